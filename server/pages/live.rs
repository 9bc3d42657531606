//! `GET /live`: a page's one live connection (Server-Sent Events, htmx's `sse` extension). It
//! follows the event log from where the page was rendered (`after`, or `Last-Event-ID` when the
//! browser reconnects) and, for each burst of events, names the topics they touched: `wishes`,
//! `wish-login`, `agent-fox`, `board-<id>`, … A page part listens to the topics it shows
//! (`hx-trigger="sse:wish-login"`) and fetches itself again: only the parts that changed are
//! swapped, and a burst of a hundred events costs each part one refresh. Each such part also has
//! `hx-sync="this:replace"`: a topic named while the part's previous fetch is in flight aborts
//! that fetch and starts a new one. (htmx's default queues it on the element, which the older
//! fetch then swaps out of the page, so the newer change would never show.) For the same reason
//! a part's trigger has no `delay:`: htmx drops a request whose element left the page, so a
//! topic named during the delay, while the previous fetch swapped the part, was lost for good
//! (the page kept showing the state before it). Bursts are coalesced here, per batch, instead.
//! And the pages' htmx config sets `defaultSettleDelay` to 0: htmx attaches a swapped-in part's
//! listeners when the swap settles, so a topic named in the default 20 ms between was lost too.

use std::collections::BTreeSet;
use std::convert::Infallible;

use axum::extract::{Extension, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use futures_util::{Stream, StreamExt};
use serde::Deserialize;

use crate::db::events::{self, Event};
use crate::db::sessions::{self, Session};
use crate::feed::Follower;
use crate::http::AppState;
use crate::pages::session::{cookie, SESSION_COOKIE};
use crate::pages::view::{PageQuery, PageResult};

pub fn router() -> Router<AppState> {
    Router::new().route("/live", get(live))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LiveQuery {
    after: Option<i64>,
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn live(
    State(state): State<AppState>,
    Extension(session): Extension<Session>,
    headers: HeaderMap,
    PageQuery(query): PageQuery<LiveQuery>,
) -> PageResult {
    let resume = headers.get("last-event-id").and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse().ok());
    let mut after = resume.or(query.after);
    let mut conn = state.db.acquire().await?;
    if let Some(id) = after {
        // An unknown cursor would match nothing ever again: follow from now instead.
        if !events::exists(&mut conn, id).await? {
            after = events::head(&mut conn).await?;
        }
    }
    drop(conn);
    let follower = Follower::new(state.db.clone(), &state.feed, after, None, None);
    // The middleware let the request in by this cookie, so it is there.
    let secret = cookie(&headers, SESSION_COOKIE).unwrap_or_default().to_owned();
    let open = SessionCheck { pool: state.db.clone(), secret, id: session.id };
    Ok(Sse::new(topic_stream(follower, open)).keep_alive(KeepAlive::default()).into_response())
}

/// What a live stream asks before each message: is the session it was opened by still open
/// (not ended, not expired, its token not revoked)? The same lookup the session middleware does.
struct SessionCheck {
    pool: sqlx::PgPool,
    secret: String,
    id: uuid::Uuid,
}

impl SessionCheck {
    async fn still_open(&self) -> bool {
        matches!(sessions::find(&self.pool, &self.secret).await, Ok(Some(s)) if s.id == self.id)
    }
}

/// One SSE message per topic a batch of events touched; each carries the batch's last event id,
/// so a reconnecting browser resumes after it. The stream ends, instead of sending a batch, once
/// its session is over (or that cannot be checked).
fn topic_stream(follower: Follower, session: SessionCheck) -> impl Stream<Item = Result<SseEvent, Infallible>> {
    futures_util::stream::unfold((follower, session), |(mut follower, session)| async move {
        let batch = follower.next_batch().await?;
        if !session.still_open().await {
            return None;
        }
        let last = batch.last().map(|e| e.id.to_string()).unwrap_or_default();
        let topics: BTreeSet<String> = batch.iter().flat_map(topics).collect();
        let messages: Vec<Result<SseEvent, Infallible>> =
            topics.into_iter().map(|topic| Ok(SseEvent::default().event(topic).id(last.clone()).data(&last))).collect();
        Some((futures_util::stream::iter(messages), (follower, session)))
    })
    .flatten()
}

/// The topics an event touches: `events` always; its kind (`tasks`, `wishes`, `agents`,
/// `boards`, `webhooks`, `projects`, `teams`, `messages`); and the one
/// thing it is about (`wish-<slug>`, `agent-<name>`, `board-<id>`, `task-<id>`, `team-<name>`, `chat-<team>`
/// for a post in its chat, and `wish-<id>` for a wish's groups, whose events name the wish by id).
pub fn topics(event: &Event) -> Vec<String> {
    let mut topics = vec!["events".to_owned()];
    let kind = event.event_type.split('.').next().unwrap_or("");
    let plural = match kind {
        "task" => Some("tasks"),
        "wish" => Some("wishes"),
        "agent" => Some("agents"),
        "board" | "board_template" => Some("boards"),
        "webhook" => Some("webhooks"),
        "project" => Some("projects"),
        "team" => Some("teams"),
        "message" => Some("messages"),
        "merge" => Some("merges"),
        _ => None,
    };
    topics.extend(plural.map(str::to_owned));
    if let Some((what, id)) = event.subject.split_once(':') {
        match what {
            "wish" | "agent" | "board" | "webhook" | "task" => topics.push(topic(what, id)),
            // A team's chat is a part of its own: a post need not refresh the rest of the team.
            "team" if kind == "chat" => topics.push(topic("chat", id)),
            "team" => topics.push(topic(what, id)),
            _ => {}
        }
    }
    for (field, what) in [("wish_id", "wish"), ("board_id", "board")] {
        if let Some(id) = event.payload.get(field).and_then(|v| v.as_str()) {
            topics.push(topic(what, id));
        }
    }
    topics
}

/// `what-id`, with anything but lowercase letters, digits and dashes replaced: an SSE event name
/// and an htmx trigger name must stay plain.
pub fn topic(what: &str, id: &str) -> String {
    let id: String =
        id.chars().map(|c| if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' { c } else { '_' }).collect();
    format!("{what}-{id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event_type: &str, subject: &str, payload: serde_json::Value) -> Event {
        Event {
            id: 1,
            event_type: event_type.to_owned(),
            subject: subject.to_owned(),
            project: None,
            payload,
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn a_group_completion_reaches_the_wish_and_task_listeners() {
        let wish = "6f1c2d9e-8a4b-4c3d-9e2f-1a2b3c4d5e6f";
        let e = event("task.completed", "task:abc", serde_json::json!({"wish_id": wish, "group_key": "api"}));
        assert_eq!(topics(&e), ["events", "tasks", "task-abc", &format!("wish-{wish}")]);
    }

    #[test]
    fn a_subject_names_its_own_topic_and_a_move_its_board() {
        let e = event("agent.state_changed", "agent:fox", serde_json::json!({"to": "idle"}));
        assert_eq!(topics(&e), ["events", "agents", "agent-fox"]);
        let e = event("task.moved", "task:abc", serde_json::json!({"board_id": "b1"}));
        assert_eq!(topics(&e), ["events", "tasks", "task-abc", "board-b1"]);
        let e = event("wish.queued", "wish:login", serde_json::json!({}));
        assert_eq!(topics(&e), ["events", "wishes", "wish-login"]);
        let e = event("team.member_added", "team:login", serde_json::json!({"agent": "fox"}));
        assert_eq!(topics(&e), ["events", "teams", "team-login"]);
        let e = event("chat.posted", "team:login", serde_json::json!({"from": "fox"}));
        assert_eq!(topics(&e), ["events", "chat-login"]);
        let e = event("message.delivered", "message:m1", serde_json::json!({"to": "fox"}));
        assert_eq!(topics(&e), ["events", "messages"]);
        let e = event("token.created", "token:x", serde_json::json!({}));
        assert_eq!(topics(&e), ["events"]);
    }

    #[test]
    fn topic_names_stay_plain() {
        assert_eq!(topic("agent", "Fox;<x>"), "agent-_ox__x_");
    }
}
