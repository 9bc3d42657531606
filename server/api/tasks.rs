//! `/api/v1/tasks`: create, list, read and edit tasks. Status changes go through the actions in
//! [`super::task_actions`]; this file never changes a task's status.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Deserializer, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::api::idempotency::{self, IdempotentJson};
use crate::api::json::ApiJson;
use crate::api::{task_actions, task_dependencies};
use crate::app::projects::id as project_id;
use crate::app::tasks::{self as tasks_app, NewTask};
use crate::db::tasks::{self, DependencyRef, Edit, ListFilter, Task};
use crate::domain::task::{blocked_reason, TaskStatus};
use crate::http::error::{ApiError, ApiResult, Problem};
use crate::http::pagination::{page, Page, PageQuery, Position};
use crate::http::query::{filter, ApiQuery};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_task, list_tasks))
        .routes(routes!(get_task, update_task))
        .merge(task_actions::router())
        .merge(task_dependencies::router())
        .merge(super::task_runs::router())
}

/// A task id from the path; anything but a UUID is a 422 naming `id`.
pub(crate) fn parse_id(id: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(id).map_err(|_| ApiError::validation("id", "is not a task id (a UUID)"))
}

/// The response for one task, with its version as the `ETag` for a later `If-Match`.
pub(crate) fn with_etag<T: Serialize>(version: i32, body: T) -> Response {
    let mut response = Json(body).into_response();
    if let Ok(value) = HeaderValue::from_str(&format!("\"{version}\"")) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"project": "switchyard", "title": "Add a login page", "goal": "Users can sign in",
    "assignee": "worker-1", "depends_on": []}))]
pub struct CreateTask {
    /// The project's slug.
    pub project: String,
    pub title: String,
    pub goal: Option<String>,
    /// An agent's name or `human`.
    pub assignee: Option<String>,
    pub provider: Option<String>,
    /// How many times the task may be started before it must be retried (default 10).
    #[schema(minimum = 1)]
    pub max_iterations: Option<i32>,
    /// Put the task on this board (in its first column unless `column_id` is given).
    pub board_id: Option<Uuid>,
    pub column_id: Option<Uuid>,
    /// Tasks of the same project that must be `done` first.
    #[serde(default)]
    pub depends_on: Vec<Uuid>,
}

/// Creates a task: `ready`, or `blocked` while any of `depends_on` is not done.
#[utoipa::path(post, path = "/tasks", tag = "tasks", request_body = CreateTask,
    params(("Idempotency-Key" = Option<String>, Header, description = "Makes the request safe to retry: the same key with the same body within 24 hours answers the first response again (nothing is created); with another body, 422.")),
    responses((status = 201, body = Task, description = "The new task"),
        (status = 409, body = Problem, description = "The column is full (WIP limit)"),
        (status = 422, body = Problem, description = "A bad field, an unknown project or dependency")))]
#[tracing::instrument(skip_all, fields(project = ?body.project), err(level = "debug"))]
pub async fn create_task(
    State(state): State<AppState>,
    IdempotentJson(body, idem): IdempotentJson<CreateTask>,
) -> ApiResult<Response> {
    if let Some(first) = idempotency::replay(&state, idem.as_ref()).await? {
        return Ok(first);
    }
    let task = tasks_app::create_now(&state, body.into(), idem.as_ref()).await?;
    let mut response = with_etag(task.version, task);
    *response.status_mut() = StatusCode::CREATED;
    Ok(response)
}

impl From<CreateTask> for NewTask {
    fn from(body: CreateTask) -> NewTask {
        NewTask {
            project: body.project,
            title: body.title,
            goal: body.goal,
            assignee: body.assignee,
            provider: body.provider,
            max_iterations: body.max_iterations,
            board_id: body.board_id,
            column_id: body.column_id,
            depends_on: body.depends_on,
        }
    }
}

/// Filters for listing tasks; they combine with AND.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TaskFilters {
    /// A project's slug.
    pub project: Option<String>,
    /// One status, e.g. `blocked` or `in_progress`.
    #[param(value_type = Option<crate::domain::task::TaskStatus>)]
    pub status: Option<String>,
    /// A board column's id.
    #[param(format = Uuid)]
    pub column: Option<String>,
    /// An agent's name or `human`.
    pub assignee: Option<String>,
}

/// Lists tasks oldest first, filtered, a page at a time.
#[utoipa::path(get, path = "/tasks", tag = "tasks", params(TaskFilters, PageQuery),
    responses((status = 200, body = Page<Task>, description = "One page of tasks, oldest first"), (status = 422, body = Problem, description = "A bad filter or cursor")))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list_tasks(
    State(state): State<AppState>,
    ApiQuery(filters): ApiQuery<TaskFilters>,
    ApiQuery(paging): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<Task>>> {
    let (limit, position) = paging.parse()?;
    let status = filter::<TaskStatus>("status", filters.status.as_deref())?;
    let column_id = filters
        .column
        .as_deref()
        .map(Uuid::parse_str)
        .transpose()
        .map_err(|_| ApiError::validation("column", "is not a column id (a UUID)"))?;
    let mut conn = state.db.acquire().await?;
    let project_id = match &filters.project {
        Some(slug) => Some(project_id(&mut conn, slug, "project").await?),
        None => None,
    };
    let filter = ListFilter {
        project_id,
        status,
        column_id,
        assignee: filters.assignee,
        after: position.map(|p| (p.created_at, p.id)),
        ..ListFilter::default()
    };
    let rows = tasks::list(&mut conn, &filter, limit + 1).await?;
    Ok(Json(page(rows, limit, |t| Position { created_at: t.created_at, id: t.id })))
}

/// A task with what it waits for.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TaskDetail {
    #[serde(flatten)]
    pub task: Task,
    /// Its direct dependencies and their statuses.
    pub dependencies: Vec<DependencyRef>,
    /// Why the task is blocked, when it is.
    #[schema(example = "waiting for 1 of 2 dependencies: `Schema` is failed and needs a retry")]
    pub blocked_reason: Option<String>,
}

/// Reads a task, its dependencies, and why it is blocked.
#[utoipa::path(get, path = "/tasks/{id}", tag = "tasks", params(("id" = uuid::Uuid, Path, description = "task id")),
    responses((status = 200, body = TaskDetail, description = "The task, its dependencies and why it is blocked", headers(("ETag" = String, description = "the version, quoted"))),
        (status = 404, body = Problem), (status = 422, body = Problem, description = "`id` is not a UUID")))]
#[tracing::instrument(skip_all, fields(task = ?id), err(level = "debug"))]
pub async fn get_task(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let id = parse_id(&id)?;
    let (task, dependencies) = state
        .task_reads
        .get(id)
        .await
        .map_err(|e| anyhow::anyhow!("reading task {id}: {e}"))?
        .ok_or_else(|| ApiError::NotFound(format!("no task {id}")))?;
    let blocked_reason = (task.status == TaskStatus::Blocked)
        .then(|| blocked_reason(dependencies.iter().map(|d| (d.title.as_str(), d.status))));
    Ok(with_etag(task.version, TaskDetail { task, dependencies, blocked_reason }))
}

/// `Some(None)` for an explicit `null`, so a PATCH can clear a field.
fn nullable<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"assignee": "human", "max_iterations": 5}))]
pub struct UpdateTask {
    pub title: Option<String>,
    pub goal: Option<String>,
    /// An agent's name, `human`, or `null` to unassign.
    #[serde(default, deserialize_with = "nullable")]
    pub assignee: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    pub provider: Option<Option<String>>,
    /// How many times the task may be started before it must be retried.
    #[schema(minimum = 1)]
    pub max_iterations: Option<i32>,
    /// Not patchable: accepted only to explain that the actions change the status.
    #[serde(default)]
    #[schema(ignore)]
    pub status: Option<serde_json::Value>,
}

/// The version in `If-Match` (`3`, `"3"` or `W/"3"`), if the header is there; `*` asks for no check.
fn if_match(headers: &HeaderMap) -> Result<Option<i32>, ApiError> {
    let Some(value) = headers.get(header::IF_MATCH) else { return Ok(None) };
    let value = value.to_str().unwrap_or("").trim();
    if value == "*" {
        return Ok(None);
    }
    value
        .trim_start_matches("W/")
        .trim_matches('"')
        .parse()
        .map(Some)
        .map_err(|_| ApiError::validation("If-Match", "must be the task's version, e.g. \"3\""))
}

/// Edits a task's title, goal, assignee, provider or max_iterations. Send `If-Match: "<version>"`
/// to make sure nobody changed it since you read it.
#[utoipa::path(patch, path = "/tasks/{id}", tag = "tasks", request_body = UpdateTask,
    params(("id" = uuid::Uuid, Path, description = "task id"),
        ("If-Match" = Option<String>, Header, description = "the version you read, e.g. \"3\"")),
    responses((status = 200, body = Task, description = "The edited task", headers(("ETag" = String, description = "the new version, quoted"))),
        (status = 404, body = Problem), (status = 412, body = Problem, description = "The version moved on"),
        (status = 422, body = Problem, description = "A bad field, or `status` (use the actions)")))]
#[tracing::instrument(skip_all, fields(task = ?id), err(level = "debug"))]
pub async fn update_task(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<UpdateTask>,
) -> ApiResult<Response> {
    let id = parse_id(&id)?;
    if body.status.is_some() {
        return Err(ApiError::validation(
            "status",
            "is not patchable; use POST /tasks/{id}/start, ask, answer, complete, fail, cancel or retry",
        ));
    }
    let expected = if_match(&headers)?;
    let edit = Edit {
        title: body.title,
        goal: body.goal,
        assignee: body.assignee,
        provider: body.provider,
        max_iterations: body.max_iterations,
    };
    let task = tasks_app::edit(&state, id, expected, edit).await?;
    Ok(with_etag(task.version, task))
}
