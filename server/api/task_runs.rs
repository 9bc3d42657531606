//! `/api/v1/tasks/{id}/dispatch` and `/tasks/{id}/runs`: a standalone task run by an agent,
//! through [`crate::app::conductor::task_runs`].

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::json::ApiJson;
use crate::api::tasks::parse_id;
use crate::app::conductor::task_runs::{self, Dispatched};
use crate::db::task_runs::{self as runs_db, TaskRun};
use crate::http::error::{ApiResult, Problem};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(dispatch_task)).routes(routes!(list_runs))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"provider": "claude"}))]
pub struct DispatchBody {
    /// The agent's provider; absent: the task's, else the project's default.
    pub provider: Option<String>,
}

/// Runs the task on a new agent (role `engineer`) in its own clone on `task/<id>`: the task is
/// `in_progress` and its run recorded at once (`pending`), the conductor starts the agent, whose
/// first message is the task's brief. The agent reports with `switchyard task done|fail|ask`;
/// stopping without a report starts the next iteration, up to `max_iterations` (the task's, or
/// the project's `conductor_config.max_iterations`, default 3), then the task fails.
#[utoipa::path(post, path = "/tasks/{id}/dispatch", tag = "tasks", params(("id" = uuid::Uuid, Path, description = "task id")),
    request_body(content = Option<DispatchBody>, description = "optional"),
    responses((status = 202, body = Dispatched, description = "The task and its run, recorded"),
        (status = 404, body = Problem),
        (status = 409, body = Problem, description = "Done, cancelled, blocked, a wish's group, or a run is live"),
        (status = 422, body = Problem, description = "An unknown `provider`, one less confined than the task's own (unsandboxed, or with more network), or `id` is not a UUID")))]
#[tracing::instrument(skip_all, fields(task = ?id), err(level = "debug"))]
pub async fn dispatch_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Option<ApiJson<DispatchBody>>,
) -> ApiResult<(StatusCode, Json<Dispatched>)> {
    let body = body.map(|ApiJson(b)| b).unwrap_or_default();
    let dispatched = task_runs::dispatch(&state.app, parse_id(&id)?, body.provider).await?;
    Ok((StatusCode::ACCEPTED, Json(dispatched)))
}

/// A task's runs, newest first.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Runs {
    pub items: Vec<TaskRun>,
}

/// The task's runs (dispatches and board skills), newest first, each with its iteration.
#[utoipa::path(get, path = "/tasks/{id}/runs", tag = "tasks", params(("id" = uuid::Uuid, Path, description = "task id")),
    responses((status = 200, body = Runs), (status = 422, body = Problem, description = "`id` is not a UUID")))]
pub async fn list_runs(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Runs>> {
    let id = parse_id(&id)?;
    let mut conn = state.db.acquire().await.map_err(crate::app::Error::from)?;
    let items = runs_db::for_task(&mut conn, id, 100).await.map_err(crate::app::Error::from)?;
    Ok(Json(Runs { items }))
}
