//! `/events`: the event log, newest first, filtered by type prefix and project, older pages by
//! cursor; the first page grows live as events happen.

use askama::Template;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::boards;
use crate::db::events::{self, Event};
use crate::db::sessions::Session;
use crate::db::tasks;
use crate::domain::webhook_format::{page_of, payload_name};
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::view::{ago, iso, no_block, render, truncate, words, Chrome, PageQuery, PageResult};

pub fn router() -> Router<AppState> {
    Router::new().route("/events", get(feed))
}

/// An event as a row of the feed, in people's words: what it is about by name, with a link to
/// its page, and the payload's meaningful fields (ids, which the names replace, left out).
pub struct EventRow {
    pub id: i64,
    pub event_type: String,
    /// The subject's name: a task's title, an agent's or wish's name, …
    pub about: String,
    /// What kind of thing it is (`task`, `agent`, …), shown before the name.
    pub kind: String,
    /// The dashboard page of what it is about, when there is one.
    pub link: Option<String>,
    pub project: Option<String>,
    /// The payload in a line: `ready → in progress · result: …`.
    pub summary: String,
    pub at_ago: String,
    pub at_iso: String,
}

impl EventRow {
    /// Rows for these events, with the names of the tasks and boards they are about (one query
    /// for each kind, whatever the number of events).
    pub async fn load(conn: &mut PgConnection, list: &[Event], now: DateTime<Utc>) -> Result<Vec<EventRow>, ApiError> {
        let ids = |kind: &str| -> Vec<Uuid> {
            list.iter().filter_map(|e| e.subject.strip_prefix(kind)?.parse().ok()).collect()
        };
        let tasks = tasks::refs::titles(conn, &ids("task:")).await?;
        let boards = boards::names(conn, &ids("board:")).await?;
        Ok(list
            .iter()
            .map(|event| {
                let (kind, ident) = event.subject.split_once(':').unwrap_or(("", &event.subject));
                // Tokens and webhooks by the name their events carry (a token's name, a
                // webhook's description or host), which the summary then need not repeat.
                let carried = payload_name(&event.subject, &event.payload);
                let named = ident.parse::<Uuid>().ok().and_then(|id| match kind {
                    "task" => tasks.get(&id).cloned(),
                    "board" => boards.get(&id).cloned(),
                    _ => None,
                });
                let shown_as_name: &[&str] = if carried.is_some() { &["name", "description"] } else { &[] };
                EventRow {
                    id: event.id,
                    event_type: event.event_type.clone(),
                    about: named.or(carried).unwrap_or_else(|| short(ident)),
                    kind: kind.replace('_', " "),
                    link: page_of(&event.subject),
                    project: event.project.clone(),
                    summary: summary(&event.payload, shown_as_name),
                    at_ago: ago(event.created_at, now),
                    at_iso: iso(event.created_at),
                }
            })
            .collect())
    }
}

/// An id shortened to what a person can compare at a glance (`3ff64f4f…`); names stay whole.
fn short(ident: &str) -> String {
    if ident.parse::<Uuid>().is_ok() {
        format!("{}…", &ident[..8])
    } else {
        ident.to_owned()
    }
}

/// The payload in one line: a change of state as `from → to`, then the other fields as
/// `key: value`; ids (the subject's name stands for them), nulls, empty lists and the fields in
/// `named` (shown as the subject's name) left out.
fn summary(payload: &serde_json::Value, named: &[&str]) -> String {
    use serde_json::Value;
    let Some(fields) = payload.as_object() else { return truncate(&payload.to_string(), 160) };
    // Only states are words with underscores; people's text is shown as they wrote it.
    let state = |key: &str| fields.get(key).and_then(Value::as_str);
    let change = state("from").zip(state("to"));
    let mut parts: Vec<String> = change.iter().map(|(from, to)| format!("{} → {}", words(from), words(to))).collect();
    let is_id = |key: &str, value: &Value| {
        key == "id" || key.ends_with("_id") || value.as_str().is_some_and(|s| s.parse::<Uuid>().is_ok())
    };
    for (key, value) in fields {
        let transition = change.is_some() && (key == "from" || key == "to");
        let empty = value.is_null() || value.as_array().is_some_and(Vec::is_empty) || value.as_str() == Some("");
        if transition || empty || is_id(key, value) || named.contains(&key.as_str()) {
            continue;
        }
        let shown = match value {
            Value::Array(items) if items.iter().all(|i| i.as_str().is_some_and(|s| s.parse::<Uuid>().is_ok())) => {
                format!("{} item(s)", items.len())
            }
            Value::String(text) => text.clone(),
            other => tokens(other).unwrap_or_else(|| other.to_string()),
        };
        parts.push(format!("{}: {shown}", key.replace('_', " ")));
    }
    truncate(&parts.join(" · "), 160)
}

/// Tokens counted by model (`agent.usage_counted`'s `added`) in words: `claude-sonnet-4: 1200 in,
/// 300 out, 5000 cache read, 0 cache written`; `None` for any other value.
fn tokens(value: &serde_json::Value) -> Option<String> {
    let models = value.as_object().filter(|m| !m.is_empty())?;
    let lines = models
        .iter()
        .map(|(model, usage)| {
            let n = |key: &str| usage.get(key).and_then(serde_json::Value::as_i64);
            Some(format!(
                "{model}: {} in, {} out, {} cache read, {} cache written",
                n("input_tokens")?,
                n("output_tokens")?,
                n("cache_read_input_tokens").unwrap_or(0),
                n("cache_creation_input_tokens").unwrap_or(0)
            ))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(lines.join("; "))
}

#[derive(Template)]
#[template(path = "events/feed.html", blocks = ["feed"])]
struct FeedPage {
    chrome: Chrome,
    events: Vec<EventRow>,
    type_prefix: String,
    project: String,
    /// The query string that keeps the filters, for the refresh and the older page.
    filters: String,
    older: Option<i64>,
    first_page: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FeedQuery {
    block: Option<String>,
    before: Option<i64>,
    #[serde(rename = "type")]
    type_prefix: Option<String>,
    project: Option<String>,
}

const PAGE: i64 = 100;

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn feed(State(state): State<AppState>, session: Session, PageQuery(query): PageQuery<FeedQuery>) -> PageResult {
    let type_prefix = query.type_prefix.as_deref().map(str::trim).filter(|s| !s.is_empty());
    let project = query.project.as_deref().map(str::trim).filter(|s| !s.is_empty());
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "events", "Events").await?;
    let now = Utc::now();
    let found = events::newest(&mut conn, query.before, type_prefix, project, PAGE + 1).await?;
    let older = (found.len() as i64 > PAGE).then(|| found[PAGE as usize - 1].id);
    let events = EventRow::load(&mut conn, &found[..found.len().min(PAGE as usize)], now).await?;
    let filters: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("type", type_prefix.unwrap_or(""))
        .append_pair("project", project.unwrap_or(""))
        .finish();
    let page = FeedPage {
        chrome,
        events,
        type_prefix: type_prefix.unwrap_or("").to_owned(),
        project: project.unwrap_or("").to_owned(),
        filters,
        older,
        first_page: query.before.is_none(),
    };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("feed") => Ok(render(&page.as_feed())),
        Some(other) => Err(no_block(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_counted_read_as_words_not_json() {
        let payload = serde_json::json!({"added": {"claude-sonnet-4": {"input_tokens": 1200, "output_tokens": 300,
            "cache_read_input_tokens": 5000, "cache_creation_input_tokens": 0}}});
        assert_eq!(
            summary(&payload, &[]),
            "added: claude-sonnet-4: 1200 in, 300 out, 5000 cache read, 0 cache written"
        );
        let other = serde_json::json!({"extra": {"a": 1}});
        assert_eq!(summary(&other, &[]), r#"extra: {"a":1}"#);
    }

    #[test]
    fn a_subject_links_to_its_page_and_a_payload_reads_as_one_line() {
        assert_eq!(page_of("wish:login").as_deref(), Some("/wishes/login"));
        assert_eq!(
            page_of("task:7c9e6679-7425-40de-944b-e07fc1f90ae7").as_deref(),
            Some("/tasks/7c9e6679-7425-40de-944b-e07fc1f90ae7")
        );
        assert_eq!(page_of("token:1"), None);
        let payload = serde_json::json!({"from": "ready", "to": "in_progress", "result": null, "n": 2,
            "wish_id": "7c9e6679-7425-40de-944b-e07fc1f90ae7", "group_key": "api",
            "depends_on": ["7c9e6679-7425-40de-944b-e07fc1f90ae7"], "released_by": "7c9e6679-7425-40de-944b-e07fc1f90ae7"});
        assert_eq!(summary(&payload, &[]), "ready → in progress · depends on: 1 item(s) · group key: api · n: 2");
        assert_eq!(short("7c9e6679-7425-40de-944b-e07fc1f90ae7"), "7c9e6679…");
        assert_eq!(short("clever-fox"), "clever-fox");
    }
}
