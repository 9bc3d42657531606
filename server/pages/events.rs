//! `/events`: the event log, newest first, filtered by type prefix and project, older pages by
//! cursor; the first page grows live as events happen.

use askama::Template;
use axum::extract::{Query, State};
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::db::events::{self, Event};
use crate::db::sessions::Session;
use crate::http::AppState;
use crate::pages::view::{ago, iso, no_block, render, truncate, Chrome, PageResult};

pub fn router() -> Router<AppState> {
    Router::new().route("/events", get(feed))
}

/// An event as a row of the feed.
pub struct EventRow {
    pub id: i64,
    pub event_type: String,
    pub subject: String,
    /// The dashboard page of what it is about, when there is one.
    pub link: Option<String>,
    pub project: Option<String>,
    /// The payload, compact and cut short.
    pub summary: String,
    pub at_ago: String,
    pub at_iso: String,
}

impl EventRow {
    pub fn new(event: &Event, now: DateTime<Utc>) -> EventRow {
        EventRow {
            id: event.id,
            event_type: event.event_type.clone(),
            subject: event.subject.clone(),
            link: link(&event.subject),
            project: event.project.clone(),
            summary: summary(&event.payload),
            at_ago: ago(event.created_at, now),
            at_iso: iso(event.created_at),
        }
    }
}

/// The page that shows a subject (`wish:login` → `/wishes/login`).
fn link(subject: &str) -> Option<String> {
    let (what, id) = subject.split_once(':')?;
    let base = match what {
        "wish" => "/wishes",
        "agent" => "/agents",
        "board" => "/boards",
        "webhook" => "/webhooks",
        _ => return None,
    };
    let id: String = form_urlencoded::byte_serialize(id.as_bytes()).collect();
    Some(format!("{base}/{id}"))
}

/// `key=value` pairs of the payload's top level, nulls left out, cut to a line.
fn summary(payload: &serde_json::Value) -> String {
    let Some(fields) = payload.as_object() else { return truncate(&payload.to_string(), 160) };
    let parts: Vec<String> = fields
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect();
    truncate(&parts.join(" "), 160)
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
struct FeedQuery {
    block: Option<String>,
    before: Option<i64>,
    #[serde(rename = "type")]
    type_prefix: Option<String>,
    project: Option<String>,
}

const PAGE: i64 = 100;

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn feed(State(state): State<AppState>, session: Session, Query(query): Query<FeedQuery>) -> PageResult {
    let type_prefix = query.type_prefix.as_deref().map(str::trim).filter(|s| !s.is_empty());
    let project = query.project.as_deref().map(str::trim).filter(|s| !s.is_empty());
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "events", "Events").await?;
    let now = Utc::now();
    let found = events::newest(&mut conn, query.before, type_prefix, project, PAGE + 1).await?;
    let older = (found.len() as i64 > PAGE).then(|| found[PAGE as usize - 1].id);
    let events = found.iter().take(PAGE as usize).map(|e| EventRow::new(e, now)).collect();
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
    fn a_subject_links_to_its_page_and_a_payload_reads_as_one_line() {
        assert_eq!(link("wish:login").as_deref(), Some("/wishes/login"));
        assert_eq!(link("token:1"), None);
        let payload = serde_json::json!({"from": "ready", "to": "in_progress", "result": null, "n": 2});
        assert_eq!(summary(&payload), "from=ready n=2 to=in_progress");
    }
}
