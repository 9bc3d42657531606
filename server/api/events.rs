//! `GET /api/v1/events`: the event log as a cursor, so a script can
//! follow everything that happens: keep passing the last `next_after` back as `after`. Filtered
//! by type, project and subject as the live stream is (`types`, `project`) and beyond it
//! (`subject`: one task's or one agent's history).

use axum::extract::State;
use axum::Json;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::Fields;
use crate::db::events::{self, Event};
use crate::domain::webhook::EventFilter;
use crate::http::error::{ApiError, ApiResult, Problem};
use crate::http::query::ApiQuery;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_events))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// The `next_after` of the previous call (an event id); omit, or pass 0, to start from the
    /// beginning.
    pub after: Option<i64>,
    /// Events per call, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// Comma-separated event types, `prefix.*` patterns or hook names (as for webhooks), e.g.
    /// `task.*,on_agent_idle`; every event when omitted.
    #[param(min_length = 1, pattern = "[^, ]")]
    pub types: Option<String>,
    /// Only events of this project (slug); one that never existed is a 422 naming `project`.
    #[param(max_length = 100)]
    pub project: Option<String>,
    /// Only events about this subject, e.g. `task:7c9e6679-7425-40de-944b-e07fc1f90ae7` or
    /// `agent:clever-fox`.
    #[param(max_length = 200)]
    pub subject: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"items": [{"id": 42, "type": "task.completed", "subject": "task:7c9e6679-7425-40de-944b-e07fc1f90ae7", "payload": {"from": "in_progress", "to": "done"}, "created_at": "2026-11-22T09:30:00Z"}], "next_after": 42}))]
pub struct EventPage {
    /// In log order: the order in which a follower must apply them.
    pub items: Vec<Event>,
    /// Pass as `after` next time. Equal to the `after` you sent when nothing new happened.
    pub next_after: Option<i64>,
}

/// Events after a cursor, in log order, optionally only those of some types, of a project or
/// about a subject. An event whose transaction is still running is held back until it commits,
/// so a follower never skips one.
#[utoipa::path(get, path = "/events", tag = "events", params(EventsQuery),
    responses((status = 200, body = EventPage),
        (status = 422, body = Problem, description = "A bad cursor, filter or limit, or an unknown project")))]
#[tracing::instrument(skip_all, fields(after = ?query.after), err(level = "debug"))]
pub async fn list_events(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> ApiResult<Json<EventPage>> {
    let limit = query.limit.unwrap_or(100);
    let mut errors = Fields::default();
    errors.max_len_opt("project", query.project.as_deref(), 100);
    errors.max_len_opt("subject", query.subject.as_deref(), 200);
    errors.finish()?;
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::validation("limit", "must be between 1 and 1000"));
    }
    let mut conn = state.db.acquire().await?;
    let after = crate::app::events::cursor(&mut conn, query.after, "after").await?;
    if let Some(slug) = &query.project {
        known_project(&mut conn, slug).await?;
    }
    let types = query.types.as_deref().map(type_filter).transpose()?;
    let only = events::Only {
        types: types.as_ref().map(EventFilter::entries),
        project: query.project.as_deref(),
        subject: query.subject.as_deref(),
    };
    let items = events::after(&mut conn, after, limit, &only).await?;
    let next_after = items.last().map(|e| e.id).or(after);
    Ok(Json(EventPage { items, next_after }))
}

/// A `project` filter must name a project, as every list's does (a typo is never an empty
/// list); a deleted project's events are still found by its slug.
pub async fn known_project(conn: &mut PgConnection, slug: &str) -> ApiResult<()> {
    if events::project_known(conn, slug).await? {
        Ok(())
    } else {
        Err(ApiError::validation("project", format!("no project `{slug}`")))
    }
}

/// `types=a,b`: a filter as a webhook's `events` are checked; a bad entry is a 422 naming `types`.
pub fn type_filter(types: &str) -> Result<EventFilter, ApiError> {
    let entries: Vec<&str> = types.split(',').map(str::trim).filter(|t| !t.is_empty()).collect();
    if entries.is_empty() {
        return Err(ApiError::validation("types", "name at least one event type, pattern or hook (or leave it out)"));
    }
    EventFilter::parse(&entries).map_err(|e| ApiError::validation("types", e.to_string()))
}
