//! Replacing a task's dependencies after it was created: refused when that would make a cycle,
//! its unmet counter recounted and its status moved between `blocked` and `ready` to match
//! (`domain::task::after_new_dependencies`), with one `task.dependencies_changed` event.

use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{subject, Task, TaskRow};
use crate::db::events;
use crate::domain::task::{after_new_dependencies, DependenciesFixed, TaskStatus};

/// What [`replace`] did.
// One per request, as `Applied`; boxing the task would only make the caller's match noisier.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Replaced {
    Done(Task),
    NotFound,
    /// The task has started: its dependencies stay.
    Fixed(DependenciesFixed),
    /// This dependency already waits, directly or not, for the task itself.
    Cycle(Uuid),
}

/// Replaces task `id`'s dependencies with `depends_on` (tasks of its project, checked by the
/// caller), in the caller's transaction.
pub async fn replace(conn: &mut PgConnection, id: Uuid, depends_on: &[Uuid]) -> Result<Replaced, sqlx::Error> {
    let mut depends_on = depends_on.to_vec();
    depends_on.sort();
    depends_on.dedup();
    // One edit of a project's dependency graph at a time: two edits that each look acyclic alone
    // (a → b and b → a) cannot both commit.
    let Some(project_id) =
        sqlx::query_scalar!("SELECT project_id FROM tasks WHERE id = $1", id).fetch_optional(&mut *conn).await?
    else {
        return Ok(Replaced::NotFound);
    };
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended('task_dependencies:' || $1::uuid::text, 0))",
        project_id
    )
    .execute(&mut *conn)
    .await?;
    let Some(status) =
        sqlx::query_scalar!("SELECT status FROM tasks WHERE id = $1 FOR UPDATE", id).fetch_optional(&mut *conn).await?
    else {
        return Ok(Replaced::NotFound);
    };
    let from: TaskStatus = super::row::status(&status)?;
    if let Err(fixed) = after_new_dependencies(from, 0) {
        return Ok(Replaced::Fixed(fixed));
    }
    // The new dependencies and everything they wait for: the task must not be among them.
    let cycle = sqlx::query_scalar!(
        r#"WITH RECURSIVE reach(root, id) AS (
               SELECT d, d FROM unnest($2::uuid[]) AS d
               UNION
               SELECT r.root, td.depends_on FROM task_dependencies td JOIN reach r ON td.task_id = r.id
           )
           SELECT root AS "root!" FROM reach WHERE id = $1 LIMIT 1"#,
        id,
        &depends_on
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(root) = cycle {
        return Ok(Replaced::Cycle(root));
    }
    // FOR SHARE holds off a completion of a dependency until this commits (see `insert`).
    let statuses =
        sqlx::query_scalar!("SELECT status FROM tasks WHERE id = ANY($1) ORDER BY id FOR SHARE", &depends_on)
            .fetch_all(&mut *conn)
            .await?;
    let unmet = statuses.iter().filter(|s| s.as_str() != TaskStatus::Done.as_str()).count();
    let Ok(to) = after_new_dependencies(from, unmet) else { unreachable!("checked above") };
    sqlx::query!("DELETE FROM task_dependencies WHERE task_id = $1", id).execute(&mut *conn).await?;
    sqlx::query!("INSERT INTO task_dependencies (task_id, depends_on) SELECT $1, unnest($2::uuid[])", id, &depends_on)
        .execute(&mut *conn)
        .await?;
    let row = sqlx::query_as!(
        TaskRow,
        "UPDATE tasks SET status = $2, unmet_dependencies = $3, version = version + 1, updated_at = now()
         WHERE id = $1
         RETURNING id, project_id, wish_id, group_key, title, goal, status, assignee, provider, result, question,
                   iterations, max_iterations, board_id, column_id, unmet_dependencies, started_at, completed_at,
                   branch, base_commit, head_commit, reported_at, merge_commit,
                   version, created_at, updated_at",
        id,
        to.as_str(),
        unmet as i32
    )
    .fetch_one(&mut *conn)
    .await?;
    let task = Task::try_from(row)?;
    let payload = json!({"from": from, "to": to, "depends_on": depends_on, "unmet_dependencies": unmet});
    events::record(conn, "task.dependencies_changed", &subject(id), payload).await?;
    Ok(Replaced::Done(task))
}
