//! `PUT /api/v1/agents/{name}/branch`: an agent's clone's HEAD, sent as a git bundle by the
//! `switchyard group|fix|task done` commands, lands on the agent's own branch in the project's
//! repository ([`crate::app::branch_uploads`]). An agent's token may send its own only.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::branch_uploads::{self, BranchUpdate, MAX_BUNDLE};
use crate::http::error::{ApiError, ApiResult, Problem};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(put_branch)).layer(DefaultBodyLimit::max(MAX_BUNDLE))
}

/// What the schema says of the body: a git bundle's bytes.
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)] // documents the body, which is read as the bytes it is
pub struct GitBundle(Vec<u8>);

/// Points the agent's own branch at the HEAD of a git bundle (`git bundle create FILE HEAD
/// [--not <what the repository has>]`): forced for a group's or task's own branch, a
/// fast-forward only for any other; never the project's target branch. At most 100 MiB.
#[utoipa::path(put, path = "/agents/{name}/branch", tag = "agents", params(("name" = String, Path)),
    request_body(content = GitBundle, content_type = "application/octet-stream",
        description = "A git bundle whose HEAD is the branch's new commit"),
    responses((status = 200, body = BranchUpdate),
        (status = 403, body = Problem, description = "Another agent's token"),
        (status = 404, body = Problem),
        (status = 409, body = Problem, description = "No branch of its own, the target branch, or not a fast-forward"),
        (status = 413, body = Problem, description = "A bundle larger than 100 MiB"),
        (status = 422, body = Problem, description = "Not a bundle, or one that needs commits the repository lacks")))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn put_branch(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<BranchUpdate>> {
    let bundle = body.map_err(|e| match e.status() {
        axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::PayloadTooLarge(format!("a bundle may be at most {} MiB", MAX_BUNDLE / (1024 * 1024)))
        }
        _ => ApiError::BadRequest(e.body_text()),
    })?;
    Ok(Json(branch_uploads::receive(&state.app, &name, &bundle).await?))
}
