//! Tasks in the database: creating them with their dependencies, and applying the task state
//! machine (`domain::task`) with a conditional `UPDATE`, so two writers never both win.
//!
//! Standalone tasks (the tasks API) and a wish's execution groups (the wishes API) both go
//! through [`insert`] and [`apply`]. Every change writes its event in the caller's transaction.
//!
//! Completing a task releases its direct dependents with one statement over the stored
//! `unmet_dependencies` counters: the work is proportional to the number of direct dependents,
//! never to the size of the graph, and the row locks on those counters make concurrent
//! completions agree on which one made a dependent `ready`.

pub mod dependency_edits;
mod edits;
pub mod refs;
mod row;

pub use edits::{list, move_to_column, update_fields, Edit, ListFilter};
pub use refs::{dependencies, DependencyRef};
pub(crate) use row::TaskRow;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::db::batched_reads::BatchedReads;
use crate::db::events::{self, NewEvent};
use crate::domain::task::{initial_status, transition, TaskEvent, TaskStatus};

/// A task as stored and as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Task {
    pub id: Uuid,
    pub project_id: Uuid,
    /// Set when the task is one of a wish's execution groups.
    pub wish_id: Option<Uuid>,
    /// The group's key within its wish (set exactly when `wish_id` is).
    #[schema(example = "backend")]
    pub group_key: Option<String>,
    #[schema(example = "Add a login page")]
    pub title: String,
    pub goal: String,
    pub status: TaskStatus,
    /// An agent's name, `human`, or nobody yet.
    #[schema(example = "worker-1")]
    pub assignee: Option<String>,
    #[schema(example = "claude")]
    pub provider: Option<String>,
    /// What the task produced, or why it failed.
    pub result: Option<String>,
    /// The open question while the task is `waiting_input`.
    pub question: Option<String>,
    /// How many times the task was started.
    pub iterations: i32,
    pub max_iterations: i32,
    pub board_id: Option<Uuid>,
    pub column_id: Option<Uuid>,
    /// How many dependencies are not `done` yet.
    pub unmet_dependencies: i32,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    /// A wish group's branch in the project's repository (`group/<wish>/<key>`), once dispatched.
    #[schema(example = "group/login-page/api")]
    pub branch: Option<String>,
    /// The wish-branch commit the group's branch started from.
    pub base_commit: Option<String>,
    /// The group branch's commit its agent reported done with.
    pub head_commit: Option<String>,
    /// When its agent reported done; the group is merged into the wish's branch after that.
    pub reported_at: Option<DateTime<Utc>>,
    /// The wish-branch merge commit that took the group's work in.
    pub merge_commit: Option<String>,
    /// Bumped on every change; send it back as `If-Match` to update safely.
    pub version: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What it takes to create a task. The caller checks that `depends_on` exist in the same project.
#[derive(Debug, Clone, Default)]
pub struct NewTask {
    pub project_id: Uuid,
    pub wish_id: Option<Uuid>,
    pub group_key: Option<String>,
    pub title: String,
    pub goal: String,
    pub assignee: Option<String>,
    pub provider: Option<String>,
    /// `None` keeps the database default (10).
    pub max_iterations: Option<i32>,
    pub board_id: Option<Uuid>,
    pub column_id: Option<Uuid>,
    pub depends_on: Vec<Uuid>,
}

/// The data that comes with an event: `result` for complete/fail/cancel, `question` for ask,
/// `answer` for answer (recorded in the event, so it can be delivered to the agent).
#[derive(Debug, Clone, Default)]
pub struct Change {
    pub result: Option<String>,
    pub question: Option<String>,
    pub answer: Option<String>,
    /// A new cap on starts, given with a retry of a task that has used all its iterations.
    pub max_iterations: Option<i32>,
}

/// The outcome of [`apply`].
// One per request; boxing the task would only make every caller's match noisier.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Applied {
    /// The event was applied; with the dependents that became `ready` because of it.
    Done(Task, Vec<Released>),
    /// The task's current status does not allow the event (possibly because another writer
    /// changed it first).
    Refused { current: TaskStatus, message: String },
}

/// A dependent that became `ready` because its last dependency was completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    pub id: Uuid,
    pub wish_id: Option<Uuid>,
    /// Its key when it is a wish's execution group.
    pub group_key: Option<String>,
}

impl Released {
    /// Its `task.ready` event, released by the completion of `by`.
    fn event(&self, by: Uuid) -> NewEvent<'static> {
        let payload = json!({
            "from": TaskStatus::Blocked, "to": TaskStatus::Ready, "wish_id": self.wish_id,
            "group_key": self.group_key, "released_by": by,
        });
        NewEvent { event_type: event_type(&TaskEvent::DependenciesMet), subject: subject(self.id), payload }
    }
}

/// The event type written when `event` is applied, e.g. `task.completed`.
fn event_type(event: &TaskEvent) -> &'static str {
    match event {
        TaskEvent::Start => "task.started",
        TaskEvent::Ask => "task.asked",
        TaskEvent::Answer => "task.answered",
        TaskEvent::Complete => "task.completed",
        TaskEvent::Fail => "task.failed",
        TaskEvent::Cancel => "task.cancelled",
        TaskEvent::Retry { .. } => "task.retried",
        TaskEvent::DependenciesMet => "task.ready",
    }
}

pub(crate) fn subject(id: Uuid) -> String {
    format!("task:{id}")
}

/// Creates a task, `blocked` or `ready` by how many of its dependencies are not done yet.
#[tracing::instrument(skip_all, fields(project = %new.project_id, title = %new.title), err(level = "debug"))]
pub async fn insert(conn: &mut PgConnection, new: &NewTask) -> Result<Task, sqlx::Error> {
    let mut depends_on = new.depends_on.clone();
    depends_on.sort();
    depends_on.dedup();
    // FOR SHARE holds off a concurrent completion of a dependency until this task and its
    // dependency rows are committed, so that completion's release sees them; and if the
    // completion came first, we wait for it and count the dependency as done.
    let statuses =
        sqlx::query_scalar!("SELECT status FROM tasks WHERE id = ANY($1) ORDER BY id FOR SHARE", &depends_on)
            .fetch_all(&mut *conn)
            .await?;
    let unmet = statuses.iter().filter(|s| s.as_str() != TaskStatus::Done.as_str()).count();
    let row = sqlx::query_as!(
        TaskRow,
        "INSERT INTO tasks (id, project_id, wish_id, group_key, title, goal, status, assignee, provider,
                            max_iterations, board_id, column_id, unmet_dependencies)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, COALESCE($10, 10), $11, $12, $13)
         RETURNING id, project_id, wish_id, group_key, title, goal, status, assignee, provider, result, question,
                   iterations, max_iterations, board_id, column_id, unmet_dependencies, started_at, completed_at,
                   branch, base_commit, head_commit, reported_at, merge_commit,
                   version, created_at, updated_at",
        Uuid::new_v4(),
        new.project_id,
        new.wish_id,
        new.group_key,
        new.title,
        new.goal,
        initial_status(unmet).as_str(),
        new.assignee,
        new.provider,
        new.max_iterations,
        new.board_id,
        new.column_id,
        unmet as i32,
    )
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO task_dependencies (task_id, depends_on) SELECT $1, unnest($2::uuid[])",
        row.id,
        &depends_on
    )
    .execute(&mut *conn)
    .await?;
    let task = Task::try_from(row)?;
    let payload = json!({
        "title": task.title, "status": task.status, "project_id": task.project_id,
        "wish_id": task.wish_id, "group_key": task.group_key, "depends_on": depends_on,
    });
    events::record(conn, "task.created", &subject(task.id), payload).await?;
    Ok(task)
}

pub async fn get(conn: &mut PgConnection, id: Uuid) -> Result<Option<Task>, sqlx::Error> {
    let row = sqlx::query_as!(
        TaskRow,
        "SELECT id, project_id, wish_id, group_key, title, goal, status, assignee, provider, result, question,
                iterations, max_iterations, board_id, column_id, unmet_dependencies, started_at, completed_at,
                   branch, base_commit, head_commit, reported_at, merge_commit,
                version, created_at, updated_at
         FROM tasks WHERE id = $1",
        id
    )
    .fetch_optional(conn)
    .await?;
    row.map(Task::try_from).transpose()
}

/// Tasks with their dependencies, by id, in one statement; ids without a task are left out.
pub async fn with_dependencies(
    db: impl sqlx::PgExecutor<'_>,
    ids: &[Uuid],
) -> Result<HashMap<Uuid, (Task, Vec<DependencyRef>)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT t.id, to_jsonb(t) AS "task!: sqlx::types::Json<TaskRow>",
                COALESCE((SELECT json_agg(json_build_object('id', d.id, 'title', d.title, 'group_key', d.group_key,
                                                            'status', d.status) ORDER BY d.created_at, d.id)
                          FROM task_dependencies td JOIN tasks d ON d.id = td.depends_on
                          WHERE td.task_id = t.id), '[]') AS "dependencies!: sqlx::types::Json<Vec<DependencyRef>>"
           FROM tasks t WHERE id = ANY($1)"#,
        ids
    )
    .fetch_all(db)
    .await?;
    rows.into_iter().map(|r| Ok((r.id, (Task::try_from(r.task.0)?, r.dependencies.0)))).collect()
}

/// The reads of `GET /tasks/{id}`, gathered under load (see [`crate::db::batched_reads`]).
pub type Reads = BatchedReads<Uuid, (Task, Vec<DependencyRef>)>;

/// Starts the gatherer of task reads, on `pool`'s connections (a node has no others to spare:
/// `db::NODE_CONNECTIONS`).
pub fn reads(pool: &PgPool) -> Reads {
    let pool = pool.clone();
    BatchedReads::start(move |ids: Vec<Uuid>| {
        let pool = pool.clone();
        async move { with_dependencies(&pool, &ids).await }
    })
}

/// A losing writer re-reads and tries again; each failed attempt means someone else changed the
/// task, so this bound is only reached under pathological contention.
const ATTEMPTS: usize = 16;

/// Applies `event` to a task: `None` when there is no such task.
///
/// Optimistic: read the status, ask the domain for the next one, then one conditional
/// `UPDATE … WHERE status = $old`. Zero rows means another writer won; re-read and decide again
/// (usually the event is now illegal and is refused with the fresh status). For `retry` the
/// stored `unmet_dependencies` decides between `ready` and `blocked`, and the update is also
/// conditional on that counter so a dependency completing meanwhile cannot be missed.
pub async fn apply(
    conn: &mut PgConnection,
    id: Uuid,
    event: TaskEvent,
    change: &Change,
) -> Result<Option<Applied>, sqlx::Error> {
    let Some(current) = get(conn, id).await? else { return Ok(None) };
    apply_to(conn, current, event, change).await
}

/// [`apply`] to a task the caller has just read (saving the first read); `None` when the task
/// has gone meanwhile.
#[tracing::instrument(skip_all, fields(task = %read.id, event = event.name()), err(level = "debug"))]
pub async fn apply_to(
    conn: &mut PgConnection,
    read: Task,
    event: TaskEvent,
    change: &Change,
) -> Result<Option<Applied>, sqlx::Error> {
    let id = read.id;
    if event == TaskEvent::DependenciesMet {
        // Only a completion may release a dependent, through the stored counter.
        let message = "a task becomes ready only when its last dependency is completed".to_owned();
        return Ok(Some(Applied::Refused { current: read.status, message }));
    }
    let mut read = Some(read);
    for _ in 0..ATTEMPTS {
        let current = match read.take() {
            Some(task) => task,
            None => match get(conn, id).await? {
                Some(task) => task,
                None => return Ok(None),
            },
        };
        let event = match event {
            TaskEvent::Retry { .. } => {
                TaskEvent::Retry { unmet_dependencies: usize::try_from(current.unmet_dependencies).unwrap_or(0) }
            }
            other => other,
        };
        let to = match transition(current.status, &event) {
            Ok(to) => to,
            Err(illegal) => {
                return Ok(Some(Applied::Refused { current: current.status, message: illegal.to_string() }))
            }
        };
        // The cap bounds how often a task is started (runaway agent loops). A task that has used
        // it all can only be retried with a higher cap, given deliberately.
        let cap = change.max_iterations.unwrap_or(current.max_iterations);
        let starts_again = matches!(event, TaskEvent::Start | TaskEvent::Retry { .. });
        if starts_again && current.iterations >= cap {
            let message = format!(
                "the task has used all {cap} of its iterations; retry it with a higher max_iterations to go on"
            );
            return Ok(Some(Applied::Refused { current: current.status, message }));
        }
        let Some(task) = conditional_update(conn, &current, &event, to, change).await? else { continue };
        let payload = json!({
            "from": current.status, "to": task.status, "wish_id": task.wish_id, "group_key": task.group_key,
            "result": change.result, "question": change.question, "answer": change.answer,
            "assignee": task.assignee,
        });
        let mut written = vec![NewEvent { event_type: event_type(&event), subject: subject(id), payload }];
        let released = if to == TaskStatus::Done { release_dependents(conn, id).await? } else { Vec::new() };
        written.extend(released.iter().map(|r| r.event(id)));
        events::record_all(&mut *conn, written).await?;
        return Ok(Some(Applied::Done(task, released)));
    }
    let Some(current) = get(conn, id).await? else { return Ok(None) };
    let message = "the task is changing too often; try again".to_owned();
    Ok(Some(Applied::Refused { current: current.status, message }))
}

/// One `UPDATE … WHERE status = $old`; `None` when another writer changed the task first.
async fn conditional_update(
    conn: &mut PgConnection,
    current: &Task,
    event: &TaskEvent,
    to: TaskStatus,
    change: &Change,
) -> Result<Option<Task>, sqlx::Error> {
    let starting = *event == TaskEvent::Start;
    let retrying = matches!(event, TaskEvent::Retry { .. });
    // The question is open exactly while the task waits for input. A retry starts the result
    // afresh: the old one (the failure) stays in the task.failed event.
    let question = if to == TaskStatus::WaitingInput { change.question.clone() } else { None };
    let expected_unmet = retrying.then_some(current.unmet_dependencies);
    let row = sqlx::query_as!(
        TaskRow,
        "UPDATE tasks SET status = $3, version = version + 1, updated_at = now(),
             iterations = iterations + CASE WHEN $4 THEN 1 ELSE 0 END,
             max_iterations = COALESCE($10, max_iterations),
             started_at = CASE WHEN $4 THEN now() ELSE started_at END,
             completed_at = CASE WHEN $5 THEN now() WHEN $6 THEN NULL ELSE completed_at END,
             result = CASE WHEN $6 THEN NULL ELSE COALESCE($7, result) END,
             question = $8
         WHERE id = $1 AND status = $2 AND ($9::int IS NULL OR unmet_dependencies = $9)
           AND (NOT $4 OR iterations < max_iterations)
         RETURNING id, project_id, wish_id, group_key, title, goal, status, assignee, provider, result, question,
                   iterations, max_iterations, board_id, column_id, unmet_dependencies, started_at, completed_at,
                   branch, base_commit, head_commit, reported_at, merge_commit,
                   version, created_at, updated_at",
        current.id,
        current.status.as_str(),
        to.as_str(),
        starting,
        to.is_terminal(),
        retrying,
        change.result,
        question,
        expected_unmet,
        change.max_iterations,
    )
    .fetch_optional(conn)
    .await?;
    row.map(Task::try_from).transpose()
}

/// Counts one more dependency met on each direct dependent of `id`, and makes `ready` those
/// whose last dependency it was (the SQL form of `transition(Blocked, DependenciesMet)`).
/// Returns those that became ready; the caller writes their `task.ready` events.
async fn release_dependents(conn: &mut PgConnection, id: Uuid) -> Result<Vec<Released>, sqlx::Error> {
    // Locks are taken in id order so two completions sharing dependents cannot deadlock; the
    // locked row's status is the latest committed one, which is what the update then changes.
    let rows = sqlx::query!(
        r#"WITH dependents AS (
               SELECT t.id, t.status AS old_status FROM tasks t
               WHERE t.id IN (SELECT task_id FROM task_dependencies WHERE depends_on = $1)
               ORDER BY t.id FOR NO KEY UPDATE
           )
           UPDATE tasks SET unmet_dependencies = tasks.unmet_dependencies - 1,
               status = CASE WHEN tasks.unmet_dependencies = 1 AND tasks.status = 'blocked' THEN 'ready'
                             ELSE tasks.status END,
               version = tasks.version + 1, updated_at = now()
           FROM dependents WHERE tasks.id = dependents.id
           RETURNING tasks.id, tasks.wish_id, tasks.group_key,
               (dependents.old_status = 'blocked' AND tasks.status = 'ready') AS "became_ready!""#,
        id
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .filter(|r| r.became_ready)
        .map(|r| Released { id: r.id, wish_id: r.wish_id, group_key: r.group_key })
        .collect())
}
