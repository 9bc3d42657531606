//! The row shape every task query reads into, and its conversion to [`Task`].

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::Task;
use crate::domain::task::TaskStatus;

/// A row as read; `status` is text until checked against [`TaskStatus`]. It also reads from
/// `to_jsonb(tasks)` where a task comes inside another row (columns it does not know are skipped).
#[derive(Debug, serde::Deserialize)]
pub(crate) struct TaskRow {
    pub(super) id: Uuid,
    pub(super) project_id: Uuid,
    pub(super) wish_id: Option<Uuid>,
    pub(super) group_key: Option<String>,
    pub(super) title: String,
    pub(super) goal: String,
    pub(super) status: String,
    pub(super) assignee: Option<String>,
    pub(super) provider: Option<String>,
    pub(super) result: Option<String>,
    pub(super) question: Option<String>,
    pub(super) iterations: i32,
    pub(super) max_iterations: i32,
    pub(super) board_id: Option<Uuid>,
    pub(super) column_id: Option<Uuid>,
    pub(super) unmet_dependencies: i32,
    pub(super) started_at: Option<DateTime<Utc>>,
    pub(super) completed_at: Option<DateTime<Utc>>,
    pub(super) branch: Option<String>,
    pub(super) base_commit: Option<String>,
    pub(super) head_commit: Option<String>,
    pub(super) reported_at: Option<DateTime<Utc>>,
    pub(super) merge_commit: Option<String>,
    pub(super) version: i32,
    pub(super) created_at: DateTime<Utc>,
    pub(super) updated_at: DateTime<Utc>,
}

/// The `CHECK` constraint admits only known statuses; anything else is a decode error, not a panic.
pub(super) fn status(text: &str) -> Result<TaskStatus, sqlx::Error> {
    text.parse().map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

impl TryFrom<TaskRow> for Task {
    type Error = sqlx::Error;

    fn try_from(r: TaskRow) -> Result<Task, sqlx::Error> {
        Ok(Task {
            status: status(&r.status)?,
            id: r.id,
            project_id: r.project_id,
            wish_id: r.wish_id,
            group_key: r.group_key,
            title: r.title,
            goal: r.goal,
            assignee: r.assignee,
            provider: r.provider,
            result: r.result,
            question: r.question,
            iterations: r.iterations,
            max_iterations: r.max_iterations,
            board_id: r.board_id,
            column_id: r.column_id,
            unmet_dependencies: r.unmet_dependencies,
            started_at: r.started_at,
            completed_at: r.completed_at,
            branch: r.branch,
            base_commit: r.base_commit,
            head_commit: r.head_commit,
            reported_at: r.reported_at,
            merge_commit: r.merge_commit,
            version: r.version,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}
