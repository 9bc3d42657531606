//! `PUT /api/v1/tasks/{id}/dependencies`: what a standalone task waits for, replaced after it was
//! created (the use case [`crate::app::tasks::set_dependencies`]).

use axum::extract::{Path, State};
use axum::response::Response;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::api::json::ApiJson;
use crate::api::tasks::{parse_id, with_etag};
use crate::app::tasks;
use crate::db::tasks::Task;
use crate::http::error::{ApiResult, Problem};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(set_task_dependencies))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"depends_on": ["7c9e6679-7425-40de-944b-e07fc1f90ae7"]}))]
pub struct DependenciesBody {
    /// Every task of the same project this one waits for (an empty list: none).
    pub depends_on: Vec<Uuid>,
}

/// Replaces what the task waits for. A task that has not started becomes `blocked` or `ready`
/// by how many of them are not done; a failed or cancelled one keeps its status (its retry counts
/// them). A cycle is refused (422), and so is a task that has started or a wish's group (409).
#[utoipa::path(put, path = "/tasks/{id}/dependencies", tag = "tasks", request_body = DependenciesBody,
    params(("id" = uuid::Uuid, Path, description = "task id")),
    responses((status = 200, body = Task, description = "The task as it is now"), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "The task has started, or is a wish's group; `current_state` says which"),
        (status = 422, body = Problem, description = "A cycle, an unknown task or a task of another project")))]
#[tracing::instrument(skip_all, fields(task = ?id), err(level = "debug"))]
pub async fn set_task_dependencies(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<DependenciesBody>,
) -> ApiResult<Response> {
    let task = tasks::set_dependencies(&state, parse_id(&id)?, body.depends_on).await?;
    Ok(with_etag(task.version, task))
}
