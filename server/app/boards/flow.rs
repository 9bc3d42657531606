//! Boards act: who may take a card out of a column, and what a card entering one
//! does. Gate `human`: only a person (the dashboard, or a token that is not an agent's) moves a
//! card out. Gate `agent` with an `action_skill`: entering it records a skill run, which the
//! conductor gives an agent; the card moves on when that agent reports done. Gate `auto`: the card
//! moves on when its task completes. The board's last column is `done`: entering it completes the
//! task, so a task's status and its column agree.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::app::{Error, Result};
use crate::db::boards::{self, Column};
use crate::db::task_runs::{self, NewRun};
use crate::db::tasks::{self, Applied, Change, Task};
use crate::db::{agents, conductor};
use crate::domain::board::Gate;
use crate::domain::task::{TaskEvent, TaskStatus};

/// Who moves a card.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mover<'a> {
    /// A person: the dashboard, or an API token that is not an agent's.
    Person,
    /// An agent's token: it may move only its own task's card, and never out of a `human` column.
    Agent(&'a str),
    /// Switchyard itself: a skill reported done, or a task completed in an `auto` column.
    Switchyard,
}

/// The board's columns in order, and where `column_id` is among them.
async fn place(conn: &mut PgConnection, column_id: Uuid) -> Result<Option<(Vec<Column>, usize)>> {
    let Some(board_id) = sqlx::query_scalar!("SELECT board_id FROM board_columns WHERE id = $1", column_id)
        .fetch_optional(&mut *conn)
        .await?
    else {
        return Ok(None);
    };
    let columns = boards::columns_of(conn, &[board_id]).await?;
    let at = columns.iter().position(|c| c.id == column_id);
    Ok(at.map(|at| (columns, at)))
}

/// Refuses a move of `task`'s card by `by` that its column's gate (or the agent's reach) forbids.
pub async fn check_leave(conn: &mut PgConnection, task: &Task, to: Uuid, by: Mover<'_>) -> Result<()> {
    let Some(from) = task.column_id.filter(|from| *from != to) else { return own_card(conn, task, by).await };
    let Some((columns, at)) = place(conn, from).await? else { return own_card(conn, task, by).await };
    let column = &columns[at];
    if column.gate == Gate::Human && by != Mover::Person {
        return Err(Error::Forbidden(format!(
            "column `{}` has gate `human`: only a person (the dashboard, or a token that is not an agent's) may move a \
             card out of it",
            column.name
        )));
    }
    own_card(conn, task, by).await
}

/// An agent's token moves only its own task's card.
async fn own_card(conn: &mut PgConnection, task: &Task, by: Mover<'_>) -> Result<()> {
    let Mover::Agent(name) = by else { return Ok(()) };
    let own = agents::by_name(&mut *conn, name).await?.is_some_and(|a| a.task_id == Some(task.id));
    if !own && task.assignee.as_deref() != Some(name) {
        return Err(Error::Forbidden(format!("agent `{name}` may move only the card of its own task")));
    }
    Ok(())
}

/// What entering `column_id` does to `task` (called after the card moved there, in the same
/// transaction): the last column completes it; an `agent` column with a skill records a skill
/// run. Answers with the task as it is now.
pub async fn entered(conn: &mut PgConnection, task: Task, column_id: Uuid) -> Result<Task> {
    let Some((columns, at)) = place(conn, column_id).await? else { return Ok(task) };
    let column = &columns[at];
    // A skill run ends when its card leaves its column (a person moved it on).
    if let Some(run) = task_runs::live(&mut *conn, task.id).await? {
        if run.is_skill() && run.column_id != Some(column_id) {
            let why = format!("the card moved on to `{}`", column.name);
            task_runs::finish(&mut *conn, run.id, "cancelled", Some(&why)).await?;
            if let Some(agent_id) = run.agent_id {
                conductor::conclude(&mut *conn, agent_id).await?;
            }
        }
    }
    if at + 1 == columns.len() {
        return complete(conn, task, &column.name).await;
    }
    let (Gate::Agent, Some(skill)) = (column.gate, column.action_skill.clone()) else { return Ok(task) };
    if let Some(run) = task_runs::live(&mut *conn, task.id).await? {
        let who = run.agent_name.unwrap_or_else(|| "an agent about to start".to_owned());
        return Err(Error::conflict(
            format!("column `{}` asks an agent for `{skill}`, but {who} is still on this task", column.name),
            Some(task.status.as_str()),
        ));
    }
    let config = task_runs::project_of(&mut *conn, task.project_id).await?.2;
    let provider = task.provider.clone().unwrap_or_else(|| config.provider.clone());
    let max_iterations = task.max_iterations.min(i32::try_from(config.max_iterations).unwrap_or(i32::MAX));
    let new = NewRun { task_id: task.id, skill: Some((column.id, skill)), provider, max_iterations };
    task_runs::insert(conn, &new).await?;
    Ok(task)
}

/// The card entered the last column: the task is done (started first if it never was).
async fn complete(conn: &mut PgConnection, mut task: Task, column: &str) -> Result<Task> {
    let result = Change { result: Some(format!("moved to `{column}`")), ..Change::default() };
    let steps: &[TaskEvent] = match task.status {
        TaskStatus::Done => &[],
        TaskStatus::Ready => &[TaskEvent::Start, TaskEvent::Complete],
        TaskStatus::InProgress | TaskStatus::WaitingInput => &[TaskEvent::Complete],
        other => {
            return Err(Error::conflict(
                format!("a {other} task cannot move to `{column}`, the board's last column (done)"),
                Some(other.as_str()),
            ))
        }
    };
    for event in steps {
        let change = if *event == TaskEvent::Complete { result.clone() } else { Change::default() };
        task = match tasks::apply_to(&mut *conn, task, *event, &change).await? {
            Some(Applied::Done(task, _)) => task,
            Some(Applied::Refused { current, message }) => {
                return Err(Error::conflict(message, Some(current.as_str())))
            }
            None => return Err(Error::NotFound("the task is gone".into())),
        };
    }
    ended(conn, &task, "the task is done").await?;
    Ok(task)
}

/// A task that ended (done, failed, cancelled) ends its live run, whose agent is stopped.
pub async fn ended(conn: &mut PgConnection, task: &Task, why: &str) -> Result<()> {
    if !task.status.is_terminal() {
        return Ok(());
    }
    if let Some(run) = task_runs::live(&mut *conn, task.id).await? {
        let status = if task.status == TaskStatus::Done { "done" } else { "cancelled" };
        // The run as it ended: a pending one read above may have got its agent meanwhile.
        let ended = task_runs::finish(&mut *conn, run.id, status, Some(why)).await?;
        if let Some(agent_id) = ended.and_then(|run| run.agent_id) {
            conductor::conclude(conn, agent_id).await?;
        }
    }
    Ok(())
}

/// The column after `column_id` on its board, if there is one.
pub async fn next_column(conn: &mut PgConnection, column_id: Uuid) -> Result<Option<Uuid>> {
    Ok(place(conn, column_id).await?.and_then(|(columns, at)| columns.get(at + 1).map(|c| c.id)))
}

/// Where a task that completed in an `auto` column (not the last) moves on to: past every `auto`
/// column after it (each waits only for the completion that already happened) to the first one
/// that waits for something else (an agent's skill, a person), or to the last column.
pub async fn completed(conn: &mut PgConnection, task: &Task) -> Result<Option<Uuid>> {
    let Some(column_id) = task.column_id else { return Ok(None) };
    let Some((columns, at)) = place(conn, column_id).await? else { return Ok(None) };
    if columns[at].gate != Gate::Auto || at + 1 == columns.len() {
        return Ok(None);
    }
    let stop = (at + 1..columns.len() - 1).find(|&i| columns[i].gate != Gate::Auto).unwrap_or(columns.len() - 1);
    Ok(Some(columns[stop].id))
}
