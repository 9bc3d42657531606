//! `GET /api/v1/events/stream`: the event log as Server-Sent Events. Replays from a cursor
//! (`Last-Event-ID` or `after`), then follows; each SSE `id` is the event id, so a client that
//! reconnects with the last id it saw misses nothing. Reads use `events::after`, whose horizon
//! holds back events of still-running transactions, so a late commit is never skipped.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::IntoResponse;
use futures_util::Stream;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::feed::Follower;
use crate::http::error::{ApiError, ApiResult, Problem};
use crate::http::query::ApiQuery;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(stream_events))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    /// Start after this event id (`Last-Event-ID` wins when both are sent); from the beginning
    /// when neither is, or it is 0.
    pub after: Option<i64>,
    /// Comma-separated event types, `prefix.*` patterns or hook names (as for webhooks), e.g.
    /// `task.*,on_agent_idle`; every event when omitted.
    #[param(min_length = 1, pattern = "[^, ]")]
    pub types: Option<String>,
    /// Only events of this project (slug); one that never existed is a 422 naming `project`.
    pub project: Option<String>,
}

/// One Server-Sent Event of the stream, as a client's parser hands it over.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documents the stream's shape; the stream writes these fields itself
pub struct StreamedEvent {
    /// The event's id: resume after it with `Last-Event-ID`.
    #[schema(example = "42")]
    id: String,
    /// The event's type.
    #[schema(example = "task.completed")]
    event: String,
    /// The event as JSON, as `GET /events` lists it.
    data: String,
}

/// Server-Sent Events of the event log: `id` is the event id, `event` its type, `data` the
/// event as JSON (as in `GET /events`). Resume after a disconnect with `Last-Event-ID`.
#[utoipa::path(get, path = "/events/stream", tag = "events", params(StreamQuery,
        ("Last-Event-ID" = Option<i64>, Header, description = "The last event id received; replay continues after it")),
    responses(
        (status = 200, content_type = "text/event-stream", body = StreamedEvent,
            description = "A stream of `id: 42\\nevent: task.completed\\ndata: {…event…}` messages, with keep-alive comments",
            example = json!("id: 42\nevent: task.completed\ndata: {\"id\":42,\"type\":\"task.completed\",\"subject\":\"task:3f2a…\",\"project\":\"switchyard\",\"payload\":{},\"created_at\":\"2025-01-15T10:30:00Z\"}\n\n")),
        (status = 422, body = Problem, description = "A bad cursor, type filter or parameter")))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn stream_events(
    State(state): State<AppState>,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<StreamQuery>,
) -> ApiResult<impl IntoResponse> {
    let (after, field) = match headers.get("last-event-id") {
        Some(value) => {
            let id = value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok())
                .ok_or_else(|| ApiError::validation("Last-Event-ID", "must be an event id"))?;
            (Some(id), "Last-Event-ID")
        }
        None => (query.after, "after"),
    };
    let filter = query.types.as_deref().map(crate::api::events::type_filter).transpose()?;
    let after = match after {
        Some(_) => crate::app::events::cursor(&mut *state.db.acquire().await?, after, field).await?,
        None => None,
    };
    if let Some(slug) = &query.project {
        crate::api::events::known_project(&mut *state.db.acquire().await?, slug).await?;
    }
    let follower = Follower::new(state.db.clone(), &state.feed, after, filter, query.project);
    Ok(Sse::new(into_stream(follower)).keep_alive(KeepAlive::default()))
}

/// The API's stream: one SSE message per wanted event.
fn into_stream(follower: Follower) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    futures_util::stream::unfold(follower, |mut follower| async move {
        let event = follower.next().await?;
        let sse = SseEvent::default()
            .id(event.id.to_string())
            .event(event.event_type.clone())
            .json_data(&event)
            .unwrap_or_else(|_| SseEvent::default().comment("unserializable event"));
        Some((Ok(sse), follower))
    })
}
