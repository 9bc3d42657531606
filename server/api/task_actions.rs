//! `/api/v1/tasks/{id}/…`: the actions that move a task through its state machine
//! (start, ask, answer, complete, fail, cancel, retry), and moving it between board columns.
//!
//! Each action is the use case [`crate::app::tasks::act`]; an illegal transition is a 409 with
//! the task's `current_state`. A wish's groups are refused here: their status belongs to the
//! wish, whose own routes drive them.

use axum::extract::{Path, State};
use axum::response::Response;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::api::auth::Authenticated;
use crate::api::json::ApiJson;
use crate::api::tasks::{parse_id, with_etag};
use crate::app::boards::flow::Mover;
use crate::app::{self, tasks};
use crate::db::tasks::{Change, Task};
use crate::domain::task::TaskEvent;
use crate::http::error::{ApiResult, Problem};
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

/// Parses the task's id, applies one action through [`tasks::act`] and answers with the task as
/// it is now, its version as the `ETag`.
async fn act(state: &AppState, id: &str, event: TaskEvent, change: Change) -> ApiResult<Response> {
    let task = tasks::act(state, parse_id(id)?, event, change).await?;
    Ok(with_etag(task.version, task))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"question": "Should the login page support SSO?"}))]
pub struct AskBody {
    /// Not blank.
    #[schema(min_length = 1, pattern = "\\S")]
    pub question: String,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"answer": "Not yet; email and password only."}))]
pub struct AnswerBody {
    /// Not blank.
    #[schema(min_length = 1, pattern = "\\S")]
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

const ID: &str = "task id";

/// Starts a `ready` task: it becomes `in_progress` and its `iterations` count goes up by one.
/// A task that has used all its `max_iterations` is refused (409).
#[utoipa::path(post, path = "/tasks/{id}/start", tag = "tasks", params(("id" = uuid::Uuid, Path, description = ID)),
    responses((status = 200, body = Task, description = "The task as it is now"), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "Not `ready`, or a wish's group; `current_state` says why"),
        (status = 422, body = Problem, description = "`id` is not a UUID")))]
pub async fn start_task(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    act(&state, &id, TaskEvent::Start, Change::default()).await
}

/// The agent asks a question: an `in_progress` task becomes `waiting_input` until answered.
#[utoipa::path(post, path = "/tasks/{id}/ask", tag = "tasks", request_body = AskBody,
    params(("id" = uuid::Uuid, Path, description = ID)),
    responses((status = 200, body = Task, description = "The task as it is now"), (status = 404, body = Problem), (status = 409, body = Problem),
        (status = 422, body = Problem)))]
pub async fn ask_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<AskBody>,
) -> ApiResult<Response> {
    let change = Change { question: Some(body.question), ..Change::default() };
    act(&state, &id, TaskEvent::Ask, change).await
}

/// Answers the open question: the task is `in_progress` again; the answer is in the event.
#[utoipa::path(post, path = "/tasks/{id}/answer", tag = "tasks", request_body = AnswerBody,
    params(("id" = uuid::Uuid, Path, description = ID)),
    responses((status = 200, body = Task, description = "The task as it is now"), (status = 404, body = Problem), (status = 409, body = Problem),
        (status = 422, body = Problem)))]
pub async fn answer_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<AnswerBody>,
) -> ApiResult<Response> {
    let change = Change { answer: Some(body.answer), ..Change::default() };
    act(&state, &id, TaskEvent::Answer, change).await
}

/// Completes the task (`done`); dependents whose last dependency it was become `ready`.
#[utoipa::path(post, path = "/tasks/{id}/complete", tag = "tasks",
    request_body(content = Option<OutcomeBody>, description = "optional"), params(("id" = uuid::Uuid, Path, description = ID)),
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
    request_body(content = Option<OutcomeBody>, description = "optional: why it failed"),
    params(("id" = uuid::Uuid, Path, description = ID)),
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
    request_body(content = Option<OutcomeBody>, description = "optional: why"), params(("id" = uuid::Uuid, Path, description = ID)),
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
    #[schema(minimum = 1)]
    pub max_iterations: Option<i32>,
}

impl RetryBody {
    /// The retry's data, its cap checked (a wish's group retry takes it too).
    pub(crate) fn change(self) -> app::Result<Change> {
        Ok(Change { max_iterations: tasks::max_iterations(self.max_iterations)?, ..Change::default() })
    }
}

/// Retries a `failed` or `cancelled` task: `ready`, or `blocked` while dependencies are not done.
/// `iterations` keeps counting; a task that has used all its `max_iterations` is refused (409)
/// unless the body raises the cap.
#[utoipa::path(post, path = "/tasks/{id}/retry", tag = "tasks", params(("id" = uuid::Uuid, Path, description = ID)),
    request_body(content = Option<RetryBody>, description = "optional"),
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

/// Moves the task to another column (of any board of its project), as the column gates allow:
/// only a person moves a card out of a `human` column (an agent's token gets 403), entering an
/// `agent` column with an `action_skill` asks an agent to do the skill, and entering the board's
/// last column completes the task. An agent's token may move only its own task's card.
#[utoipa::path(post, path = "/tasks/{id}/move", tag = "tasks", request_body = MoveBody,
    params(("id" = uuid::Uuid, Path, description = ID)),
    responses((status = 200, body = Task, description = "The task as it is now"), (status = 404, body = Problem),
        (status = 403, body = Problem, description = "An agent's token moving a card out of a `human` column, or another task's"),
        (status = 409, body = Problem, description = "The column is full (WIP limit), or the task cannot enter it"),
        (status = 422, body = Problem, description = "No such column in the task's project")))]
#[tracing::instrument(skip_all, fields(task = ?id), err(level = "debug"))]
pub async fn move_task(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(id): Path<String>,
    ApiJson(body): ApiJson<MoveBody>,
) -> ApiResult<Response> {
    let by = match caller.agent.as_deref() {
        Some(agent) => Mover::Agent(agent),
        None => Mover::Person,
    };
    let task = tasks::move_card(&state, parse_id(&id)?, body.column_id, by).await?;
    Ok(with_etag(task.version, task))
}
