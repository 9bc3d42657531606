//! `GET /notifications?after=<event id>`: what needs a person since the cursor — an agent asking
//! permission or a question, a stuck agent, a task asking or handed to a person, a wish in merge
//! conflict — as JSON for the dashboard's browser notifications. They are opt-in per browser
//! (`app.js`): when the page's live stream names agents, tasks or wishes, the page asks here and
//! shows each notice with the Notification API; a click opens the page that answers it.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::db::events::{self, Event};
use crate::domain::webhook_format::page_of;
use crate::http::AppState;
use crate::pages::view::{PageQuery, PageResult};

pub fn router() -> Router<AppState> {
    Router::new().route("/notifications", get(notifications))
}

/// One thing to tell a person.
#[derive(Debug, PartialEq, Serialize)]
pub struct Notice {
    /// The event it comes from (also the notification's tag, so a notice is shown once).
    pub id: i64,
    pub title: String,
    pub body: String,
    /// The dashboard page that answers it.
    pub link: String,
}

#[derive(Debug, Serialize)]
struct Notices {
    /// Pass back as `after` next time.
    after: Option<i64>,
    items: Vec<Notice>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoticeQuery {
    after: Option<i64>,
}

/// Events read per call: notices come from a person's last few minutes, not the whole log.
const SCAN: i64 = 500;

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn notifications(
    State(state): State<AppState>,
    PageQuery(query): PageQuery<NoticeQuery>,
) -> PageResult<Response> {
    let mut conn = state.db.acquire().await?;
    // Read as the API's event list reads it: 0 is the beginning, as no cursor is.
    let cursor = crate::app::events::cursor(&mut conn, query.after, "after").await?;
    // Every event after the cursor is scanned (not only the wanted types), so the cursor moves
    // past what needs nobody and the next call starts where this one stopped.
    let scanned = events::after(&mut conn, cursor, SCAN, &events::Only::default()).await?;
    let after = scanned.last().map(|e| e.id).or(cursor);
    let items = scanned.iter().filter_map(notice).collect();
    let mut response = Json(Notices { after, items }).into_response();
    response.headers_mut().insert(axum::http::header::CACHE_CONTROL, axum::http::HeaderValue::from_static("no-store"));
    Ok(response)
}

/// The notice an event makes, if it needs a person.
pub fn notice(event: &Event) -> Option<Notice> {
    let text = |key: &str| event.payload.get(key).and_then(|v| v.as_str()).unwrap_or_default().to_owned();
    let (what, name) = event.subject.split_once(':')?;
    let link = page_of(&event.subject)?;
    let (title, body) = match (what, event.event_type.as_str()) {
        ("agent", "agent.state_changed") => {
            let asks = match text("to").as_str() {
                "permission" => "asks for permission",
                "question" => "asks a question",
                _ => return None,
            };
            // What it asks: a hook's detail ("permission to use Bash"), else the screen's line
            // the rule matched ("Do you want to proceed?"), else the title's words again.
            let body = [text("detail"), text("line")].into_iter().find(|t| !t.trim().is_empty());
            (format!("{name} {asks}"), body.unwrap_or_else(|| format!("{name} {asks}; answer on its page.")))
        }
        ("agent", "agent.stuck") => (format!("{name} is stuck"), "It stopped answering nudges.".to_owned()),
        ("task", "task.asked") => ("A task asks a question".to_owned(), text("question")),
        ("task", "task.assigned") if text("assignee") == "human" => {
            ("A task is handed to you".to_owned(), text("reason"))
        }
        ("wish", "wish.conflict") => {
            (format!("Wish {name} has a merge conflict"), "Its branch does not merge cleanly.".to_owned())
        }
        _ => return None,
    };
    Some(Notice { id: event.id, title, body, link })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(event_type: &str, subject: &str, payload: serde_json::Value) -> Event {
        Event {
            id: 7,
            event_type: event_type.into(),
            subject: subject.into(),
            project: None,
            payload,
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn what_needs_a_person_makes_a_notice_linking_the_page_that_answers_it() {
        let asks = event(
            "agent.state_changed",
            "agent:fox",
            serde_json::json!({"to": "permission", "detail": "permission to use Bash"}),
        );
        let notice = notice(&asks).expect("a notice");
        assert_eq!(
            (notice.title.as_str(), notice.body.as_str()),
            ("fox asks for permission", "permission to use Bash")
        );
        assert_eq!(notice.link, "/agents/fox");
        let handed =
            event("task.assigned", "task:3f2a", serde_json::json!({"assignee": "human", "reason": "pane gone"}));
        assert_eq!(super::notice(&handed).map(|n| n.link), Some("/tasks/3f2a".to_owned()));
        let conflict = event("wish.conflict", "wish:login", serde_json::json!({}));
        assert_eq!(super::notice(&conflict).map(|n| n.link), Some("/wishes/login".to_owned()));
    }

    #[test]
    fn a_prompt_read_from_the_screen_says_what_it_asks_and_never_nothing() {
        let read = event(
            "agent.state_changed",
            "agent:fox",
            serde_json::json!({"to": "permission", "detail": null, "source": "screen",
                "signal": "permission dialog", "line": "Do you want to proceed?"}),
        );
        assert_eq!(notice(&read).map(|n| n.body).as_deref(), Some("Do you want to proceed?"));
        let bare = event("agent.state_changed", "agent:fox", serde_json::json!({"to": "question", "detail": ""}));
        assert_eq!(notice(&bare).map(|n| n.body).as_deref(), Some("fox asks a question; answer on its page."));
    }

    #[test]
    fn what_needs_nobody_makes_none() {
        for (t, s, p) in [
            ("agent.state_changed", "agent:fox", serde_json::json!({"to": "idle"})),
            ("task.assigned", "task:1", serde_json::json!({"assignee": "owl"})),
            ("task.completed", "task:1", serde_json::json!({})),
        ] {
            assert_eq!(notice(&event(t, s, p)), None, "{t}");
        }
    }
}
