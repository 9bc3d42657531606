//! `/tasks/{id}`: one task — its state, goal, result or open question, where it sits (board,
//! column, wish), what it waits for, its own history — and what a person can do with it: the
//! state machine's actions that are legal now (start, complete, fail, cancel, retry, answer),
//! edit its title, goal and assignee, and choose its dependencies. A wish's group shows its wish
//! instead: the wish page drives its groups. Every change is a use case of
//! [`crate::app::tasks`], as the API's.

use askama::Template;
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use chrono::Utc;
use serde::Deserialize;
use uuid::Uuid;

use crate::app::tasks as tasks_app;
use crate::db::boards;
use crate::db::events;
use crate::db::sessions::Session;
use crate::db::tasks::{self, Change, Edit, ListFilter, Task};
use crate::domain::task::blocked_reason;
use crate::domain::task::{transition, TaskEvent, TaskStatus};
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::events::EventRow;
use crate::pages::live::topic;
use crate::pages::view::{
    ago, filled, no_block, render, see_other, words, BlockQuery, Chrome, PageForm, PagePath, PageQuery, PageResult,
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/tasks/{id}", get(detail))
        .route("/tasks/{id}/edit", post(edit))
        .route("/tasks/{id}/dependencies", post(set_dependencies))
        .route("/tasks/{id}/actions/{action}", post(act))
        .route("/tasks/{id}/dispatch", post(dispatch))
}

/// A task this one waits for, or may: with whether it does.
struct TaskRef {
    id: Uuid,
    title: String,
    status: &'static str,
    status_label: String,
    chosen: bool,
}

impl TaskRef {
    fn new(id: Uuid, title: String, status: TaskStatus, chosen: bool) -> TaskRef {
        TaskRef { id, title, status: status.as_str(), status_label: words(status.as_str()), chosen }
    }
}

#[derive(Template)]
#[template(path = "tasks/detail.html", blocks = ["summary", "history"])]
struct DetailPage {
    chrome: Chrome,
    task: Task,
    status: &'static str,
    status_label: String,
    topic: String,
    /// `(address, name)` of the board and column it sits in.
    board: Option<(String, String)>,
    column: Option<String>,
    /// `(address, slug)` of its wish when it is a group.
    wish: Option<(String, String)>,
    dependencies: Vec<TaskRef>,
    blocked_reason: Option<String>,
    /// The actions legal now: `(action, label)`.
    actions: Vec<(&'static str, &'static str)>,
    answerable: bool,
    /// Whether a Dispatch button is shown: a standalone task with no live run that may run.
    dispatchable: bool,
    /// The task's runs, newest first: `(kind and skill, agent, iteration of max, status)`.
    runs: Vec<crate::db::task_runs::TaskRun>,
    candidates: Vec<TaskRef>,
    editable_dependencies: bool,
    history: Vec<EventRow>,
    history_url: String,
    updated: String,
}

/// The actions a person can take from this page, each with the event it applies.
const ACTIONS: [(&str, &str); 5] =
    [("start", "Start"), ("complete", "Complete"), ("fail", "Fail"), ("cancel", "Cancel"), ("retry", "Retry")];

fn event_for(action: &str) -> Option<TaskEvent> {
    Some(match action {
        "start" => TaskEvent::Start,
        "complete" => TaskEvent::Complete,
        "fail" => TaskEvent::Fail,
        "cancel" => TaskEvent::Cancel,
        "retry" => TaskEvent::Retry { unmet_dependencies: 0 },
        "answer" => TaskEvent::Answer,
        _ => return None,
    })
}

/// Tasks offered as dependencies at most: a page of checkboxes, not a picker for thousands.
const CANDIDATES: i64 = 300;
const HISTORY: i64 = 50;

/// A task's id from the address, refused as every page refuses a bad id ([`PagePath`]).
fn task_id(id: &str) -> Result<Uuid, ApiError> {
    id.parse().map_err(|_| ApiError::NotFound(format!("`{id}` is not a task id")))
}

#[tracing::instrument(skip_all, fields(task = ?id), err(Debug, level = "debug"))]
async fn detail(
    State(state): State<AppState>,
    session: Session,
    PagePath(id): PagePath<String>,
    PageQuery(query): PageQuery<BlockQuery>,
) -> PageResult {
    let id = task_id(&id)?;
    let mut conn = state.db.acquire().await?;
    let task = tasks::get(&mut conn, id).await?.ok_or_else(|| ApiError::NotFound(format!("no task {id}")))?;
    let chrome = Chrome::new(&mut conn, &session, "boards", format!("Task {}", task.title)).await?;
    let now = Utc::now();
    let board = match task.board_id {
        Some(board_id) => boards::get(&mut conn, board_id).await?,
        None => None,
    };
    let column =
        board.as_ref().and_then(|b| b.columns.iter().find(|c| Some(c.id) == task.column_id)).map(|c| c.name.clone());
    let wish = match task.wish_id {
        Some(wish_id) => {
            tasks::refs::wish_slug(&mut conn, wish_id).await?.map(|slug| (format!("/wishes/{slug}"), slug))
        }
        None => None,
    };
    let dependencies = tasks::dependencies(&mut conn, id).await?;
    let blocked = (task.status == TaskStatus::Blocked)
        .then(|| blocked_reason(dependencies.iter().map(|d| (d.title.as_str(), d.status))));
    let standalone = task.wish_id.is_none();
    let actions = ACTIONS
        .iter()
        .filter(|(action, _)| standalone && event_for(action).is_some_and(|e| transition(task.status, &e).is_ok()))
        .copied()
        .collect();
    let editable_dependencies = standalone && crate::domain::task::after_new_dependencies(task.status, 0).is_ok();
    let candidates = if editable_dependencies {
        let filter = ListFilter { project_id: Some(task.project_id), ..ListFilter::default() };
        tasks::list(&mut conn, &filter, CANDIDATES)
            .await?
            .into_iter()
            .filter(|t| t.id != id && t.wish_id.is_none())
            .map(|t| {
                let chosen = dependencies.iter().any(|d| d.id == t.id);
                TaskRef::new(t.id, t.title, t.status, chosen)
            })
            .collect()
    } else {
        Vec::new()
    };
    let runs = crate::db::task_runs::for_task(&mut conn, id, 10).await?;
    let live = runs.iter().any(|r| r.status == "pending" || r.status == "running");
    let dispatchable = standalone
        && !live
        && matches!(
            task.status,
            TaskStatus::Ready | TaskStatus::InProgress | TaskStatus::WaitingInput | TaskStatus::Failed
        );
    let history = events::history(&mut conn, &tasks::subject(id), HISTORY).await?;
    let history = EventRow::load(&mut conn, &history, now).await?;
    let page = DetailPage {
        chrome,
        status: task.status.as_str(),
        status_label: words(task.status.as_str()),
        topic: topic("task", &id.to_string()),
        board: board.map(|b| (format!("/boards/{}", b.id), b.name)),
        column,
        wish,
        blocked_reason: blocked,
        actions,
        answerable: standalone && task.status == TaskStatus::WaitingInput,
        dispatchable,
        runs,
        dependencies: dependencies.into_iter().map(|d| TaskRef::new(d.id, d.title, d.status, true)).collect(),
        candidates,
        editable_dependencies,
        history,
        history_url: format!("/tasks/{id}?block=history"),
        updated: ago(task.updated_at, now),
        task,
    };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("summary") => Ok(render(&page.as_summary())),
        Some("history") => Ok(render(&page.as_history())),
        Some(other) => Err(no_block(other)),
    }
}

/// What an action carries: a result or reason (complete, fail, cancel) or an answer.
#[derive(Debug, Default, Deserialize)]
struct ActionForm {
    result: Option<String>,
    answer: Option<String>,
}

#[tracing::instrument(skip_all, fields(task = ?id, action = ?action), err(Debug, level = "debug"))]
async fn act(
    State(state): State<AppState>,
    PagePath((id, action)): PagePath<(String, String)>,
    PageForm(form): PageForm<ActionForm>,
) -> PageResult {
    let id = task_id(&id)?;
    let event = event_for(&action).ok_or_else(|| ApiError::NotFound(format!("no task action `{action}`")))?;
    let change = Change {
        result: form.result.as_deref().and_then(filled),
        answer: form.answer.as_deref().and_then(filled),
        ..Change::default()
    };
    tasks_app::act(&state, id, event, change).await?;
    Ok(see_other(&format!("/tasks/{id}")))
}

/// The provider of the agent to dispatch; empty: the task's, else the project's.
#[derive(Debug, Default, Deserialize)]
struct DispatchForm {
    #[serde(default)]
    provider: String,
}

#[tracing::instrument(skip_all, fields(task = ?id), err(Debug, level = "debug"))]
async fn dispatch(
    State(state): State<AppState>,
    PagePath(id): PagePath<String>,
    PageForm(form): PageForm<DispatchForm>,
) -> PageResult {
    let id = task_id(&id)?;
    crate::app::conductor::task_runs::dispatch(&state, id, filled(&form.provider)).await?;
    Ok(see_other(&format!("/tasks/{id}")))
}

#[derive(Debug, Deserialize)]
struct EditForm {
    title: String,
    goal: String,
    /// Empty: nobody.
    assignee: String,
}

#[tracing::instrument(skip_all, fields(task = ?id), err(Debug, level = "debug"))]
async fn edit(
    State(state): State<AppState>,
    PagePath(id): PagePath<String>,
    PageForm(form): PageForm<EditForm>,
) -> PageResult {
    let id = task_id(&id)?;
    let edit = Edit {
        title: Some(form.title),
        goal: Some(form.goal),
        assignee: Some(filled(&form.assignee)),
        provider: None,
        max_iterations: None,
    };
    tasks_app::edit(&state, id, None, edit).await?;
    Ok(see_other(&format!("/tasks/{id}")))
}

/// The checked boxes: every `depends_on` field is one task (none checked: no dependencies).
#[tracing::instrument(skip_all, fields(task = ?id), err(Debug, level = "debug"))]
async fn set_dependencies(
    State(state): State<AppState>,
    PagePath(id): PagePath<String>,
    body: axum::body::Bytes,
) -> PageResult {
    let id = task_id(&id)?;
    let mut depends_on = Vec::new();
    for (key, value) in form_urlencoded::parse(&body) {
        if key == "depends_on" {
            let dependency =
                value.parse().map_err(|_| ApiError::validation("depends_on", format!("`{value}` is not a task id")))?;
            depends_on.push(dependency);
        }
    }
    tasks_app::set_dependencies(&state, id, depends_on).await?;
    Ok(see_other(&format!("/tasks/{id}")))
}
