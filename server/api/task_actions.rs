//! `/api/v1/tasks/{id}/…`: the actions that move a task through its state machine
//! (start, ask, answer, complete, fail, cancel, retry), and moving it between board columns.
//!
//! Each action is one `db::tasks::apply` in one transaction; an illegal transition is a 409 with
//! the task's `current_state`. A wish's groups are refused here: their status belongs to the
//! wish, whose own routes drive them.

use axum::extract::{Path, State};
use axum::response::Response;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::api::error::{ApiError, ApiResult, Problem};
use crate::api::json::ApiJson;
use crate::api::tasks::{max_iterations, parse_id, with_etag};
use crate::app::boards::column_full;
use crate::db::board_columns::{Card, LockedColumn};
use crate::db::tasks::{self, refs, Applied, Change, Task};
use crate::domain::task::TaskEvent;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start_task))
        .routes(routes!(ask_task))
        .routes(routes!(answer_task))
        .routes(routes!(complete_task))
        .routes(routes!(fail_task))
        .routes(routes!(cancel_task))
        .routes(routes!(retry_task))
        .routes(routes!(move_task))
}

/// Applies one action to a standalone task and answers with the task as it is now.
#[tracing::instrument(skip_all, fields(task = %id, action = event.name()), err)]
async fn act(state: &AppState, id: &str, event: TaskEvent, change: Change) -> ApiResult<Response> {
    let id = parse_id(id)?;
    let not_found = || ApiError::NotFound(format!("no task {id}"));
    let mut tx = state.db.begin().await?;
    let task = tasks::get(&mut tx, id).await?.ok_or_else(not_found)?;
    if let Some(wish_id) = task.wish_id {
        let slug = refs::wish_slug(&mut tx, wish_id).await?.unwrap_or_else(|| wish_id.to_string());
        let key = task.group_key.unwrap_or_default();
        let detail = format!(
            "this task is group `{key}` of wish `{slug}`; use /wishes/{slug}/groups/{key}/{} instead",
            event.name()
        );
        return Err(ApiError::conflict(detail, Some(task.status.as_str())));
    }
    match tasks::apply(&mut tx, id, event, &change).await?.ok_or_else(not_found)? {
        Applied::Refused { current, message } => Err(ApiError::conflict(message, Some(current.as_str()))),
        Applied::Done(task, _released) => {
            state.feed.commit(tx).await?;
            Ok(with_etag(task.version, task))
        }
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"question": "Should the login page support SSO?"}))]
pub struct AskBody {
    pub question: String,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"answer": "Not yet; email and password only."}))]
pub struct AnswerBody {
    pub answer: String,
}

/// What a finished task produced, or why it failed or was cancelled (`reason` is an alias).
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"result": "Merged in #42"}))]
pub struct OutcomeBody {
    #[serde(alias = "reason")]
    pub result: Option<String>,
}

fn required(field: &str, value: String) -> Result<String, ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::validation(field, "must not be empty"));
    }
    Ok(value)
}

const ID: &str = "task id";

/// Starts a `ready` task: it becomes `in_progress` and its `iterations` count goes up by one.
/// A task that has used all its `max_iterations` is refused (409).
#[utoipa::path(post, path = "/tasks/{id}/start", tag = "tasks", params(("id" = String, Path, description = ID)),
    responses((status = 200, body = Task, description = "The task as it is now"), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "Not `ready`, or a wish's group; `current_state` says why"),
        (status = 422, body = Problem, description = "`id` is not a UUID")))]
pub async fn start_task(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    act(&state, &id, TaskEvent::Start, Change::default()).await
}

/// The agent asks a question: an `in_progress` task becomes `waiting_input` until answered.
#[utoipa::path(post, path = "/tasks/{id}/ask", tag = "tasks", request_body = AskBody,
    params(("id" = String, Path, description = ID)),
    responses((status = 200, body = Task, description = "The task as it is now"), (status = 404, body = Problem), (status = 409, body = Problem),
        (status = 422, body = Problem)))]
pub async fn ask_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<AskBody>,
) -> ApiResult<Response> {
    let change = Change { question: Some(required("question", body.question)?), ..Change::default() };
    act(&state, &id, TaskEvent::Ask, change).await
}

/// Answers the open question: the task is `in_progress` again; the answer is in the event.
#[utoipa::path(post, path = "/tasks/{id}/answer", tag = "tasks", request_body = AnswerBody,
    params(("id" = String, Path, description = ID)),
    responses((status = 200, body = Task, description = "The task as it is now"), (status = 404, body = Problem), (status = 409, body = Problem),
        (status = 422, body = Problem)))]
pub async fn answer_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<AnswerBody>,
) -> ApiResult<Response> {
    let change = Change { answer: Some(required("answer", body.answer)?), ..Change::default() };
    act(&state, &id, TaskEvent::Answer, change).await
}

/// Completes the task (`done`); dependents whose last dependency it was become `ready`.
#[utoipa::path(post, path = "/tasks/{id}/complete", tag = "tasks",
    request_body(content = OutcomeBody, description = "optional"), params(("id" = String, Path, description = ID)),
    responses((status = 200, body = Task, description = "The task as it is now"), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "Not in progress (e.g. already done)"), (status = 422, body = Problem)))]
pub async fn complete_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Option<ApiJson<OutcomeBody>>,
) -> ApiResult<Response> {
    let body = body.map(|ApiJson(b)| b).unwrap_or_default();
    act(&state, &id, TaskEvent::Complete, Change { result: body.result, ..Change::default() }).await
}

/// Marks the task `failed`; its dependents stay blocked until it is retried and completed.
#[utoipa::path(post, path = "/tasks/{id}/fail", tag = "tasks",
    request_body(content = OutcomeBody, description = "optional: why it failed"),
    params(("id" = String, Path, description = ID)),
    responses((status = 200, body = Task, description = "The task as it is now"), (status = 404, body = Problem), (status = 409, body = Problem),
        (status = 422, body = Problem)))]
pub async fn fail_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Option<ApiJson<OutcomeBody>>,
) -> ApiResult<Response> {
    let body = body.map(|ApiJson(b)| b).unwrap_or_default();
    act(&state, &id, TaskEvent::Fail, Change { result: body.result, ..Change::default() }).await
}

/// Cancels a task that is not finished yet, whatever its status.
#[utoipa::path(post, path = "/tasks/{id}/cancel", tag = "tasks",
    request_body(content = OutcomeBody, description = "optional: why"), params(("id" = String, Path, description = ID)),
    responses((status = 200, body = Task, description = "The task as it is now"), (status = 404, body = Problem), (status = 409, body = Problem),
        (status = 422, body = Problem)))]
pub async fn cancel_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Option<ApiJson<OutcomeBody>>,
) -> ApiResult<Response> {
    let body = body.map(|ApiJson(b)| b).unwrap_or_default();
    act(&state, &id, TaskEvent::Cancel, Change { result: body.result, ..Change::default() }).await
}

/// A retry; a task that has used all its iterations needs a higher cap to be retried.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"max_iterations": 15}))]
pub struct RetryBody {
    /// A new cap on starts; required (higher than `iterations`) when the task has used all of its
    /// `max_iterations`.
    pub max_iterations: Option<i32>,
}

impl RetryBody {
    pub(crate) fn change(self) -> ApiResult<Change> {
        Ok(Change { max_iterations: max_iterations(self.max_iterations)?, ..Change::default() })
    }
}

/// Retries a `failed` or `cancelled` task: `ready`, or `blocked` while dependencies are not done.
/// `iterations` keeps counting; a task that has used all its `max_iterations` is refused (409)
/// unless the body raises the cap.
#[utoipa::path(post, path = "/tasks/{id}/retry", tag = "tasks", params(("id" = String, Path, description = ID)),
    request_body(content = RetryBody, description = "optional"),
    responses((status = 200, body = Task, description = "The task as it is now"), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "Only failed or cancelled tasks with iterations left can be retried"),
        (status = 422, body = Problem)))]
pub async fn retry_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Option<ApiJson<RetryBody>>,
) -> ApiResult<Response> {
    // The stored counter decides ready or blocked; apply() fills it in.
    act(&state, &id, TaskEvent::Retry { unmet_dependencies: 0 }, body.map(|ApiJson(b)| b).unwrap_or_default().change()?)
        .await
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"column_id": "7c9e6679-7425-40de-944b-e07fc1f90ae7"}))]
pub struct MoveBody {
    /// A column of any board of the task's project.
    pub column_id: Uuid,
}

/// Moves the task to another column (of any board of its project). Not a status change.
#[utoipa::path(post, path = "/tasks/{id}/move", tag = "tasks", request_body = MoveBody,
    params(("id" = String, Path, description = ID)),
    responses((status = 200, body = Task, description = "The task as it is now"), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "The column is full (WIP limit)"),
        (status = 422, body = Problem, description = "No such column in the task's project")))]
#[tracing::instrument(skip_all, fields(task = %id), err)]
pub async fn move_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<MoveBody>,
) -> ApiResult<Response> {
    let id = parse_id(&id)?;
    let mut tx = state.db.begin().await?;
    let task = move_to(&mut tx, id, body.column_id).await?;
    state.feed.commit(tx).await?;
    Ok(with_etag(task.version, task))
}

/// Moves task `id` to a column of a board of its project, under the column's WIP limit, in the
/// caller's transaction (the API and the dashboard's board).
pub(crate) async fn move_to(tx: &mut sqlx::PgConnection, id: Uuid, column_id: Uuid) -> ApiResult<Task> {
    let not_found = || ApiError::NotFound(format!("no task {id}"));
    let task = tasks::get(&mut *tx, id).await?.ok_or_else(not_found)?;
    let column = LockedColumn::lock(&mut *tx, None, Some(column_id), Some(Card::Task(id)))
        .await?
        .filter(|c| c.project_id == task.project_id)
        .ok_or_else(|| ApiError::validation("column_id", "no such column on a board of this task's project"))?;
    if column.is_full() {
        return Err(column_full(&column).into());
    }
    tasks::move_to_column(tx, id, &column).await?.ok_or_else(not_found)
}
