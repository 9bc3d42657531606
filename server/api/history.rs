//! `/api/v1/history`: what each finished worker agent did (multiclaude's task history), and
//! `/api/v1/state`: the same document as `<data dir>/state.json`, in multiclaude's schema.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::history::{self, HistoryPage};
use crate::http::error::{ApiResult, Problem};
use crate::http::query::ApiQuery;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_history)).routes(routes!(get_state))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct HistoryQuery {
    /// A project's slug.
    pub project: Option<String>,
    /// `open`, `merged`, `closed`, `no-pr`, `failed` or `unknown`.
    pub status: Option<String>,
    pub branch: Option<String>,
    /// From a previous page's `next_cursor`.
    pub cursor: Option<String>,
    /// 1 to 500; default 50.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
}

/// Task history, newest first, a page at a time.
#[utoipa::path(get, path = "/history", tag = "history", params(HistoryQuery),
    responses((status = 200, body = HistoryPage, description = "One page, newest first"),
        (status = 422, body = Problem, description = "A bad filter, cursor or limit")))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list_history(
    State(state): State<AppState>,
    ApiQuery(q): ApiQuery<HistoryQuery>,
) -> ApiResult<Json<HistoryPage>> {
    let page = history::list(
        &state,
        q.project.as_deref(),
        q.status.as_deref(),
        q.branch.as_deref(),
        q.cursor.as_deref(),
        q.limit.unwrap_or(50),
    )
    .await?;
    Ok(Json(page))
}

/// The state document in multiclaude's `state.json` schema (`repos`, `current_repo`, `hooks`),
/// as written to `<data dir>/state.json`.
#[utoipa::path(get, path = "/state", tag = "history",
    responses((status = 200, body = Object, description = "multiclaude's State")))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn get_state(State(state): State<AppState>) -> ApiResult<Json<serde_json::Value>> {
    let mut conn = state.db.acquire().await?;
    Ok(Json(crate::app::state_document::document(&mut conn).await?))
}
