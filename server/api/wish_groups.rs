//! `POST /api/v1/wishes/{slug}/groups/{key}/start|complete|fail|retry`: progress of a wish's
//! execution groups ([`crate::app::groups`]).

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::json::ApiJson;
use crate::api::task_actions::RetryBody;
use crate::app::groups;
pub use crate::app::groups::GroupOutcome;
use crate::db::tasks::Change;
use crate::domain::task::TaskEvent;
use crate::http::error::{ApiResult, Problem};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start_group))
        .routes(routes!(complete_group))
        .routes(routes!(fail_group))
        .routes(routes!(retry_group))
        .routes(routes!(redispatch_group))
}

/// Dispatches a started group again, to a new agent (after it was handed to a person, or to
/// give up on its agent): `in_progress → ready`; the conductor assigns it from the wish's
/// branch as it stands.
#[utoipa::path(post, path = "/wishes/{slug}/groups/{key}/redispatch", tag = "wishes",
    params(("slug" = String, Path), ("key" = String, Path)),
    responses((status = 200, body = crate::app::wish_lifecycle::WishDetail), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "The wish is not executing, or the group is not started"),
        (status = 422, body = Problem, description = "The group's provider is unknown, or less confined than the wish's own")))]
#[tracing::instrument(skip_all, fields(slug = ?slug, key = ?key), err(level = "debug"))]
pub async fn redispatch_group(
    State(state): State<AppState>,
    Path((slug, key)): Path<(String, String)>,
) -> ApiResult<Json<crate::app::wish_lifecycle::WishDetail>> {
    Ok(Json(crate::app::conductor::handoff::redispatch(&state, &slug, &key).await?))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"result": "merged API endpoints; tests green"}))]
pub struct GroupResult {
    /// What the group produced, or why it failed.
    pub result: Option<String>,
}

/// `ready → in_progress` (counts an iteration).
#[utoipa::path(post, path = "/wishes/{slug}/groups/{key}/start", tag = "wishes",
    params(("slug" = String, Path), ("key" = String, Path)),
    responses((status = 200, body = GroupOutcome), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(slug = ?slug, key = ?key), err(level = "debug"))]
pub async fn start_group(
    State(state): State<AppState>,
    Path((slug, key)): Path<(String, String)>,
) -> ApiResult<Json<GroupOutcome>> {
    Ok(Json(groups::act_on(&state, &slug, &key, TaskEvent::Start, Change::default()).await?))
}

/// `in_progress → done`; dependents whose last dependency this was become `ready`, and the wish
/// completes when it was the last group.
#[utoipa::path(post, path = "/wishes/{slug}/groups/{key}/complete", tag = "wishes",
    params(("slug" = String, Path), ("key" = String, Path)), request_body(content = Option<GroupResult>, description = "optional"),
    responses((status = 200, body = GroupOutcome), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(slug = ?slug, key = ?key), err(level = "debug"))]
pub async fn complete_group(
    State(state): State<AppState>,
    Path((slug, key)): Path<(String, String)>,
    body: Option<ApiJson<GroupResult>>,
) -> ApiResult<Json<GroupOutcome>> {
    let result = body.and_then(|ApiJson(b)| b.result);
    Ok(Json(groups::act_on(&state, &slug, &key, TaskEvent::Complete, Change { result, ..Change::default() }).await?))
}

/// `in_progress → failed`; back to `ready` while iterations are left, else the wish fails.
#[utoipa::path(post, path = "/wishes/{slug}/groups/{key}/fail", tag = "wishes",
    params(("slug" = String, Path), ("key" = String, Path)), request_body(content = Option<GroupResult>, description = "optional"),
    responses((status = 200, body = GroupOutcome), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(slug = ?slug, key = ?key), err(level = "debug"))]
pub async fn fail_group(
    State(state): State<AppState>,
    Path((slug, key)): Path<(String, String)>,
    body: Option<ApiJson<GroupResult>>,
) -> ApiResult<Json<GroupOutcome>> {
    let result = body.and_then(|ApiJson(b)| b.result);
    Ok(Json(groups::act_on(&state, &slug, &key, TaskEvent::Fail, Change { result, ..Change::default() }).await?))
}

/// `failed|cancelled → ready` (or `blocked` while dependencies are unmet), after the wish was
/// resumed and started again. A group that has used all its `max_iterations` needs a higher
/// cap in the body.
#[utoipa::path(post, path = "/wishes/{slug}/groups/{key}/retry", tag = "wishes",
    params(("slug" = String, Path), ("key" = String, Path)),
    request_body(content = Option<RetryBody>, description = "optional"),
    responses((status = 200, body = GroupOutcome), (status = 404, body = Problem), (status = 409, body = Problem),
        (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, fields(slug = ?slug, key = ?key), err(level = "debug"))]
pub async fn retry_group(
    State(state): State<AppState>,
    Path((slug, key)): Path<(String, String)>,
    body: Option<ApiJson<RetryBody>>,
) -> ApiResult<Json<GroupOutcome>> {
    let change = body.map(|ApiJson(b)| b).unwrap_or_default().change()?;
    Ok(Json(groups::act_on(&state, &slug, &key, TaskEvent::Retry { unmet_dependencies: 0 }, change).await?))
}
