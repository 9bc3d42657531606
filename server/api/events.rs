//! `GET /api/v1/events`: the event log as a cursor (agentmux's applied offset), so a script can
//! follow everything that happens: keep passing the last `next_after` back as `after`.

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::error::{ApiError, ApiResult, Problem};
use crate::api::query::ApiQuery;
use crate::db::events::{self, Event};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_events))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// The `next_after` of the previous call (an event id); omit to start from the beginning.
    pub after: Option<i64>,
    /// Events per call, 1 to 1000 (default 100).
    pub limit: Option<i64>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"items": [{"id": 42, "type": "task.completed", "subject": "task:7c9e6679-7425-40de-944b-e07fc1f90ae7", "payload": {"from": "in_progress", "to": "done"}, "created_at": "2026-11-22T09:30:00Z"}], "next_after": 42}))]
pub struct EventPage {
    /// In log order: the order in which a follower must apply them.
    pub items: Vec<Event>,
    /// Pass as `after` next time. Equal to the `after` you sent when nothing new happened.
    pub next_after: Option<i64>,
}

/// Events after a cursor, in log order. An event whose transaction is still running is held back
/// until it commits, so a follower never skips one.
#[utoipa::path(get, path = "/events", tag = "events", params(EventsQuery),
    responses((status = 200, body = EventPage), (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, fields(after = ?query.after), err(level = "debug"))]
pub async fn list_events(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> ApiResult<Json<EventPage>> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::validation("limit", "must be between 1 and 1000"));
    }
    let mut conn = state.db.acquire().await?;
    if let Some(after) = query.after {
        if !events::exists(&mut conn, after).await? {
            return Err(ApiError::validation("after", format!("no event {after}: pass an id this API returned")));
        }
    }
    let items = events::after(&mut conn, query.after, limit).await?;
    let next_after = items.last().map(|e| e.id).or(query.after);
    Ok(Json(EventPage { items, next_after }))
}
