//! The parts of a task that are not its status: listing, editing fields under a version check,
//! and placing it in a board column under the column's WIP limit.

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{get, subject, Task, TaskRow};
use crate::db::board_columns::LockedColumn;
use crate::db::events;
use crate::domain::task::TaskStatus;

/// Filters for [`list`]; every one is optional and they combine with AND.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub project_id: Option<Uuid>,
    pub status: Option<TaskStatus>,
    pub column_id: Option<Uuid>,
    pub assignee: Option<String>,
    /// Only tasks on this board.
    pub board_id: Option<Uuid>,
    /// Continue after this `(created_at, id)` position.
    pub after: Option<(DateTime<Utc>, Uuid)>,
}

/// Up to `limit` tasks after the filter's position, in `(created_at, id)` order.
pub async fn list(conn: &mut PgConnection, filter: &ListFilter, limit: i64) -> Result<Vec<Task>, sqlx::Error> {
    let (after_at, after_id) = filter.after.unzip();
    let rows = sqlx::query_as!(
        TaskRow,
        "SELECT id, project_id, wish_id, group_key, title, goal, status, assignee, provider, result, question,
                iterations, max_iterations, board_id, column_id, unmet_dependencies, started_at, completed_at,
                   branch, base_commit, head_commit, reported_at, merge_commit,
                version, created_at, updated_at
         FROM tasks
         WHERE ($1::uuid IS NULL OR project_id = $1)
           AND ($2::text IS NULL OR status = $2)
           AND ($3::uuid IS NULL OR column_id = $3)
           AND ($4::text IS NULL OR assignee = $4)
           AND ($5::timestamptz IS NULL OR (created_at, id) > ($5, $6::uuid))
           AND ($8::uuid IS NULL OR board_id = $8)
         ORDER BY created_at, id
         LIMIT $7",
        filter.project_id,
        filter.status.map(|s| s.as_str()),
        filter.column_id,
        filter.assignee,
        after_at,
        after_id,
        limit,
        filter.board_id
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(Task::try_from).collect()
}

/// A PATCH: `None` leaves a field as it is; `Some(None)` clears a nullable one.
#[derive(Debug, Clone, Default)]
pub struct Edit {
    pub title: Option<String>,
    pub goal: Option<String>,
    pub assignee: Option<Option<String>>,
    pub provider: Option<Option<String>>,
    pub max_iterations: Option<i32>,
}

/// Edits a task's fields; with `expected_version`, only if the task is still at that version.
/// `Ok(Err(current))` is a version mismatch carrying the task as it is now; `Ok(Ok(None))` means
/// no such task.
#[tracing::instrument(skip_all, fields(task = %id), err(level = "debug"))]
pub async fn update_fields(
    conn: &mut PgConnection,
    id: Uuid,
    expected_version: Option<i32>,
    edit: &Edit,
) -> Result<Result<Option<Task>, Task>, sqlx::Error> {
    let row = sqlx::query_as!(
        TaskRow,
        "UPDATE tasks SET title = COALESCE($2, title), goal = COALESCE($3, goal),
             assignee = CASE WHEN $4 THEN $5 ELSE assignee END,
             provider = CASE WHEN $6 THEN $7 ELSE provider END,
             max_iterations = COALESCE($8, max_iterations),
             version = version + 1, updated_at = now()
         WHERE id = $1 AND ($9::int IS NULL OR version = $9)
         RETURNING id, project_id, wish_id, group_key, title, goal, status, assignee, provider, result, question,
                   iterations, max_iterations, board_id, column_id, unmet_dependencies, started_at, completed_at,
                   branch, base_commit, head_commit, reported_at, merge_commit,
                   version, created_at, updated_at",
        id,
        edit.title,
        edit.goal,
        edit.assignee.is_some(),
        edit.assignee.clone().flatten(),
        edit.provider.is_some(),
        edit.provider.clone().flatten(),
        edit.max_iterations,
        expected_version,
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        // Either there is no such task or its version moved on; tell the two apart.
        return Ok(match get(conn, id).await? {
            Some(current) => Err(current),
            None => Ok(None),
        });
    };
    let task = Task::try_from(row)?;
    let fields: Vec<&str> = [
        ("title", edit.title.is_some()),
        ("goal", edit.goal.is_some()),
        ("assignee", edit.assignee.is_some()),
        ("provider", edit.provider.is_some()),
        ("max_iterations", edit.max_iterations.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect();
    let payload = json!({"fields": fields, "version": task.version, "wish_id": task.wish_id});
    events::record(conn, "task.updated", &subject(id), payload).await?;
    Ok(Ok(Some(task)))
}

/// Moves a task to a column (the caller has locked it and checked its WIP limit). Not a status
/// change: only `board_id`/`column_id` move, with a `task.moved` event. `None`: no such task.
#[tracing::instrument(skip_all, fields(task = %id, column = %column.id), err(level = "debug"))]
pub async fn move_to_column(
    conn: &mut PgConnection,
    id: Uuid,
    column: &LockedColumn,
) -> Result<Option<Task>, sqlx::Error> {
    let before =
        sqlx::query!("SELECT column_id FROM tasks WHERE id = $1 FOR UPDATE", id).fetch_optional(&mut *conn).await?;
    let Some(before) = before else { return Ok(None) };
    let row = sqlx::query_as!(
        TaskRow,
        "UPDATE tasks SET board_id = $2, column_id = $3, version = version + 1, updated_at = now()
         WHERE id = $1
         RETURNING id, project_id, wish_id, group_key, title, goal, status, assignee, provider, result, question,
                   iterations, max_iterations, board_id, column_id, unmet_dependencies, started_at, completed_at,
                   branch, base_commit, head_commit, reported_at, merge_commit,
                   version, created_at, updated_at",
        id,
        column.board_id,
        column.id
    )
    .fetch_one(&mut *conn)
    .await?;
    let task = Task::try_from(row)?;
    let payload = json!({"from_column": before.column_id, "to_column": column.id, "board_id": column.board_id});
    events::record(conn, "task.moved", &subject(id), payload).await?;
    Ok(Some(task))
}
