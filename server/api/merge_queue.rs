//! `/api/v1/merge-queue`: the queues per project and target branch (entries in order, with
//! state, position, prediction and gate log), and a person's hand on an entry — retry, remove,
//! hold, release. `/api/v1/projects/{slug}/merge-settings`: the gate command, fix cap, where
//! conflicts go and whether merged branches are kept.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::json::ApiJson;
use crate::app::merge_queue::{self as use_cases, Queue, SettingsInput};
use crate::db::merge_queue::settings::MergeSettings;
use crate::db::merge_queue::Entry;
use crate::http::error::{ApiResult, Problem};
use crate::http::etag::{etag, IfMatch};
use crate::http::extract::ApiPath;
use crate::http::query::ApiQuery;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_queues))
        .routes(routes!(get_entry, remove_entry))
        .routes(routes!(retry_entry))
        .routes(routes!(hold_entry))
        .routes(routes!(release_entry))
        .routes(routes!(get_settings, put_settings))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct QueueFilters {
    /// A project's slug.
    pub project: Option<String>,
    pub target_branch: Option<String>,
}

/// The merge queues, one per project and target branch, entries in queue order (settled ones
/// included).
#[utoipa::path(get, path = "/merge-queue", tag = "merge-queue", params(QueueFilters),
    responses((status = 200, body = Vec<Queue>, description = "The queues"),
        (status = 422, body = Problem, description = "No such project, or an unknown filter")))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list_queues(
    State(state): State<AppState>,
    ApiQuery(filters): ApiQuery<QueueFilters>,
) -> ApiResult<Json<Vec<Queue>>> {
    Ok(Json(use_cases::list(&state, filters.project.as_deref(), filters.target_branch.as_deref()).await?))
}

/// The merge queue entry of wish `slug`.
#[utoipa::path(get, path = "/merge-queue/{slug}", tag = "merge-queue", params(("slug" = String, Path, description = "The wish's slug")),
    responses((status = 200, body = Entry, description = "The entry"), (status = 404, body = Problem, description = "No such wish, or it is not in the queue")))]
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn get_entry(State(state): State<AppState>, ApiPath(slug): ApiPath<String>) -> ApiResult<Json<Entry>> {
    let mut conn = state.db.acquire().await?;
    Ok(Json(use_cases::entry(&mut conn, &slug).await?))
}

/// Removes the entry (not while processing). A wish still `pending_merge` goes back to
/// `completed`, held, so it does not re-enter on its own: release and submit it again.
#[utoipa::path(delete, path = "/merge-queue/{slug}", tag = "merge-queue", params(("slug" = String, Path, description = "The wish's slug")),
    responses((status = 204, description = "Removed"), (status = 404, body = Problem, description = "Not in the queue"),
        (status = 409, body = Problem, description = "The entry is processing or completed")))]
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn remove_entry(State(state): State<AppState>, ApiPath(slug): ApiPath<String>) -> ApiResult<StatusCode> {
    use_cases::remove(&state, &slug).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A failed or conflicting entry goes back to `pending` in its place, its wish to
/// `pending_merge` (after a person fixed the branch, or to try again).
#[utoipa::path(post, path = "/merge-queue/{slug}/retry", tag = "merge-queue", params(("slug" = String, Path, description = "The wish's slug")),
    responses((status = 200, body = Entry, description = "The entry, pending"), (status = 404, body = Problem, description = "Not in the queue"),
        (status = 409, body = Problem, description = "The entry is not failed or conflicting")))]
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn retry_entry(State(state): State<AppState>, ApiPath(slug): ApiPath<String>) -> ApiResult<Json<Entry>> {
    Ok(Json(use_cases::retry(&state, &slug, "operator", None).await?))
}

/// Holds the entry: the queue skips it (the entries behind it go ahead) until it is released.
#[utoipa::path(post, path = "/merge-queue/{slug}/hold", tag = "merge-queue", params(("slug" = String, Path, description = "The wish's slug")),
    responses((status = 200, body = Entry, description = "The entry, held"), (status = 404, body = Problem, description = "Not in the queue"),
        (status = 409, body = Problem, description = "Already held")))]
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn hold_entry(State(state): State<AppState>, ApiPath(slug): ApiPath<String>) -> ApiResult<Json<Entry>> {
    Ok(Json(use_cases::hold(&state, &slug, true).await?))
}

/// Releases a held entry; it keeps its place.
#[utoipa::path(post, path = "/merge-queue/{slug}/release", tag = "merge-queue", params(("slug" = String, Path, description = "The wish's slug")),
    responses((status = 200, body = Entry, description = "The entry"), (status = 404, body = Problem, description = "Not in the queue"),
        (status = 409, body = Problem, description = "Not held")))]
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn release_entry(State(state): State<AppState>, ApiPath(slug): ApiPath<String>) -> ApiResult<Json<Entry>> {
    Ok(Json(use_cases::hold(&state, &slug, false).await?))
}

/// A project's merge settings (defaults until first written: version 0).
#[utoipa::path(get, path = "/projects/{slug}/merge-settings", tag = "merge-queue", params(("slug" = String, Path)),
    responses((status = 200, body = MergeSettings, description = "The settings", headers(("ETag" = String))),
        (status = 404, body = Problem, description = "No such project")))]
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn get_settings(
    State(state): State<AppState>,
    ApiPath(slug): ApiPath<String>,
) -> ApiResult<impl IntoResponse> {
    let settings = use_cases::settings_of(&state, &slug).await?;
    Ok((etag(settings.version), Json(settings)))
}

/// Replaces a project's merge settings; fields left out take their defaults. With
/// `If-Match: "<version>"` it applies only if they are still at that version.
#[utoipa::path(put, path = "/projects/{slug}/merge-settings", tag = "merge-queue", request_body = SettingsInput,
    params(("slug" = String, Path), ("If-Match" = Option<String>, Header, description = "The version the change is based on")),
    responses((status = 200, body = MergeSettings, description = "The settings", headers(("ETag" = String))),
        (status = 404, body = Problem, description = "No such project"),
        (status = 412, body = Problem, description = "The settings changed since that version"),
        (status = 422, body = Problem, description = "A field is invalid or unknown")))]
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn put_settings(
    State(state): State<AppState>,
    ApiPath(slug): ApiPath<String>,
    if_match: IfMatch,
    ApiJson(input): ApiJson<SettingsInput>,
) -> ApiResult<impl IntoResponse> {
    let settings = use_cases::put_settings(&state, &slug, input, &if_match).await?;
    Ok((etag(settings.version), Json(settings)))
}
