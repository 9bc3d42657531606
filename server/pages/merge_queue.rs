//! `/merge-queue`: each project's queues (one per target branch), entries in order with their
//! state, what they wait for, the conflict prediction, the gate's log, who fixes them, and a
//! person's actions (retry, hold, release, remove); `/history`: what each finished worker did,
//! per project. The actions are the API's use cases ([`crate::app::merge_queue`]).

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::Router;
use chrono::Utc;
use serde::Deserialize;

use crate::app::history::{self, HistoryPage};
use crate::app::merge_queue::{self as use_cases, Queue};
use crate::db::merge_queue::Entry;
use crate::db::sessions::Session;
use crate::domain::merge_queue::{removable, EntryState};
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::view::{ago, no_block, render, see_other, words, Chrome, PageResult};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/merge-queue", get(queues))
        .route("/merge-queue/{slug}/actions/{action}", post(act))
        .route("/history", get(history_page))
}

/// An entry as a row of its queue's table.
pub struct EntryRow {
    pub wish: String,
    pub title: String,
    pub position: usize,
    pub state: &'static str,
    pub state_label: String,
    pub held: bool,
    pub held_for: Option<String>,
    /// Why it waits outside the queue (`uncommitted changes in <path>`).
    pub waiting: Option<String>,
    /// One line: against the target, and the entries ahead it would conflict with.
    pub prediction: String,
    pub failure: Option<String>,
    pub fixer: Option<String>,
    pub needs_person: bool,
    pub gate_log: Option<String>,
    pub attempts: i32,
    pub updated: String,
    /// Actions legal now: (path segment, label).
    pub actions: Vec<(&'static str, &'static str)>,
}

impl EntryRow {
    fn new(entry: &Entry, position: usize, now: chrono::DateTime<Utc>) -> EntryRow {
        let mut actions = Vec::new();
        if matches!(entry.state, EntryState::Failed | EntryState::Conflict) {
            actions.push(("retry", "Retry"));
        }
        if !matches!(entry.state, EntryState::Completed) {
            actions.push(if entry.held { ("release", "Release") } else { ("hold", "Hold") });
        }
        if removable(entry.state) {
            actions.push(("remove", "Remove"));
        }
        EntryRow {
            wish: entry.wish.clone(),
            title: entry.title.clone(),
            position,
            state: entry.state.as_str(),
            state_label: words(entry.state.as_str()),
            held: entry.held,
            held_for: entry.held_for.clone(),
            waiting: entry.waiting.clone().filter(|_| entry.state == EntryState::Pending),
            prediction: prediction_line(entry.prediction.as_ref()),
            failure: entry.failure_reason.clone(),
            fixer: entry.fix_agent.clone(),
            needs_person: entry.assignee.as_deref() == Some("human"),
            gate_log: entry.gate_log.clone().filter(|l| !l.is_empty()),
            attempts: entry.attempts,
            updated: ago(entry.updated_at, now),
            actions,
        }
    }
}

/// `target: clean; conflicts with a (x.rs)` from an entry's stored prediction.
fn prediction_line(prediction: Option<&serde_json::Value>) -> String {
    let Some(p) = prediction else { return "not predicted yet".to_owned() };
    let target = match p["target"]["outcome"].as_str() {
        Some("conflict") => format!("conflicts with the target in {}", files(&p["target"]["files"])),
        Some("clean") => "merges cleanly into the target".to_owned(),
        _ => "cannot tell against the target".to_owned(),
    };
    let ahead: Vec<String> = p["conflicts_ahead"]
        .as_array()
        .map(|a| a.iter().map(|c| format!("{} ({})", c["wish"].as_str().unwrap_or("?"), files(&c["files"]))).collect())
        .unwrap_or_default();
    if ahead.is_empty() {
        target
    } else {
        format!("{target}; conflicts with {}", ahead.join(", "))
    }
}

fn files(value: &serde_json::Value) -> String {
    value.as_array().map(|f| f.iter().filter_map(|f| f.as_str()).collect::<Vec<_>>().join(", ")).unwrap_or_default()
}

/// A queue as the page shows it.
pub struct QueueView {
    pub project: String,
    pub target_branch: String,
    pub entries: Vec<EntryRow>,
}

#[derive(Template)]
#[template(path = "merge_queue/queues.html", blocks = ["queues"])]
struct QueuesPage {
    chrome: Chrome,
    queues: Vec<QueueView>,
    project: String,
    filters: String,
}

#[derive(Debug, Default, Deserialize)]
struct QueueQuery {
    block: Option<String>,
    project: Option<String>,
    branch: Option<String>,
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn queues(State(state): State<AppState>, session: Session, Query(query): Query<QueueQuery>) -> PageResult {
    let project = query.project.as_deref().map(str::trim).filter(|s| !s.is_empty());
    let branch = query.branch.as_deref().map(str::trim).filter(|s| !s.is_empty());
    let chrome = {
        let mut conn = state.db.acquire().await?;
        Chrome::new(&mut conn, &session, "merge-queue", "Merge queue").await?
    };
    let now = Utc::now();
    let queues = use_cases::list(&state, project, branch)
        .await?
        .into_iter()
        .map(|Queue { project, target_branch, entries }| QueueView {
            entries: entries.iter().enumerate().map(|(i, e)| EntryRow::new(e, i + 1, now)).collect(),
            project,
            target_branch,
        })
        .collect();
    let filters: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("project", project.unwrap_or(""))
        .append_pair("branch", branch.unwrap_or(""))
        .finish();
    let page = QueuesPage { chrome, queues, project: project.unwrap_or("").to_owned(), filters };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("queues") => Ok(render(&page.as_queues())),
        Some(other) => Err(no_block(other)),
    }
}

#[tracing::instrument(skip_all, fields(slug = ?slug, action = ?action), err(Debug, level = "debug"))]
async fn act(State(state): State<AppState>, Path((slug, action)): Path<(String, String)>) -> PageResult {
    match action.as_str() {
        "retry" => drop(use_cases::retry(&state, &slug, "operator", None).await?),
        "hold" => drop(use_cases::hold(&state, &slug, true).await?),
        "release" => drop(use_cases::hold(&state, &slug, false).await?),
        "remove" => use_cases::remove(&state, &slug).await?,
        other => return Err(ApiError::NotFound(format!("no merge queue action `{other}`")).into()),
    }
    Ok(see_other("/merge-queue"))
}

#[derive(Template)]
#[template(path = "merge_queue/history.html")]
struct HistoryView {
    chrome: Chrome,
    page: HistoryPage,
    project: String,
    status: String,
    statuses: &'static [&'static str],
}

#[derive(Debug, Default, Deserialize)]
struct HistoryQuery {
    project: Option<String>,
    status: Option<String>,
    cursor: Option<String>,
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn history_page(
    State(state): State<AppState>,
    session: Session,
    Query(query): Query<HistoryQuery>,
) -> PageResult {
    let project = query.project.as_deref().map(str::trim).filter(|s| !s.is_empty());
    let status = query.status.as_deref().map(str::trim).filter(|s| !s.is_empty());
    let chrome = {
        let mut conn = state.db.acquire().await?;
        Chrome::new(&mut conn, &session, "history", "History").await?
    };
    let page = history::list(&state, project, status, None, query.cursor.as_deref(), 100).await?;
    Ok(render(&HistoryView {
        chrome,
        page,
        project: project.unwrap_or("").to_owned(),
        status: status.unwrap_or("").to_owned(),
        statuses: &crate::db::history::STATUSES,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prediction_reads_as_one_line() {
        assert_eq!(prediction_line(None), "not predicted yet");
        let p = serde_json::json!({"target": {"outcome": "clean"},
            "conflicts_ahead": [{"wish": "a", "files": ["x.rs", "y.rs"]}]});
        assert_eq!(prediction_line(Some(&p)), "merges cleanly into the target; conflicts with a (x.rs, y.rs)");
        let p = serde_json::json!({"target": {"outcome": "conflict", "files": ["z"]}, "conflicts_ahead": []});
        assert_eq!(prediction_line(Some(&p)), "conflicts with the target in z");
    }
}
