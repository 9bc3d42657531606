//! Task history (multiclaude's `TaskHistoryEntry`): one row per finished worker agent, written by
//! the `agents_finished` trigger in the transaction that finished it, kept after the agent is
//! deleted, and marked `merged` when its wish merges.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "3e4f5a6b-7c8d-4e9f-a0b1-c2d3e4f5a6b7", "project": "shop", "name": "clever-fox",
    "task": "Add auth", "branch": "wish/auth", "pr_url": null, "pr_number": null, "status": "merged",
    "summary": "JWT auth with refresh tokens", "failure_reason": null, "created_at": "2025-01-01T00:00:00Z",
    "completed_at": "2025-01-02T00:00:00Z"}))]
pub struct HistoryEntry {
    pub id: Uuid,
    /// The project's slug.
    pub project: String,
    /// The worker's name.
    pub name: String,
    pub task: Option<String>,
    pub branch: Option<String>,
    pub pr_url: Option<String>,
    pub pr_number: Option<i32>,
    /// `open`, `merged`, `closed`, `no-pr`, `failed` or `unknown`.
    #[schema(example = "merged")]
    pub status: String,
    pub summary: Option<String>,
    pub failure_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub completed_at: Option<DateTime<Utc>>,
}

/// The history statuses, as multiclaude names them.
pub const STATUSES: [&str; 6] = ["open", "merged", "closed", "no-pr", "failed", "unknown"];

#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub project_id: Option<Uuid>,
    pub status: Option<String>,
    pub branch: Option<String>,
    /// The last row of the previous page: (completed_at, id).
    pub before: Option<(DateTime<Utc>, Uuid)>,
}

/// Newest first (by completion), a page at a time.
pub async fn list(conn: &mut PgConnection, filter: &Filter, limit: i64) -> Result<Vec<HistoryEntry>, sqlx::Error> {
    let (before_at, before_id) = filter.before.unzip();
    sqlx::query_as!(
        HistoryEntry,
        r#"SELECT h.id, p.slug AS project, h.name, h.task, h.branch, h.pr_url, h.pr_number, h.status, h.summary,
                  h.failure_reason, h.created_at, h.completed_at
           FROM task_history h JOIN projects p ON p.id = h.project_id
           WHERE ($1::uuid IS NULL OR h.project_id = $1) AND ($2::text IS NULL OR h.status = $2)
             AND ($3::text IS NULL OR h.branch = $3)
             AND ($4::timestamptz IS NULL OR (COALESCE(h.completed_at, h.created_at), h.id) < ($4, $5))
           ORDER BY COALESCE(h.completed_at, h.created_at) DESC, h.id DESC
           LIMIT $6"#,
        filter.project_id,
        filter.status,
        filter.branch,
        before_at,
        before_id,
        limit
    )
    .fetch_all(conn)
    .await
}

/// The wish merged: the rows of the workers whose work merged say so (a failed one stays failed;
/// a planner's or reviewer's work was never on the branch).
pub async fn mark_merged(conn: &mut PgConnection, wish_id: Uuid) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE task_history SET status = 'merged', updated_at = now()
         WHERE wish_id = $1 AND status IN ('no-pr', 'open', 'unknown')
           AND (role IS NULL OR role NOT IN ('planner', 'reviewer'))",
        wish_id
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// A pull request was opened, merged or closed for `branch` (the inbound GitHub hook): the rows
/// of workers on that branch take its url, number and status.
pub async fn record_pr(
    conn: &mut PgConnection,
    branch: &str,
    url: Option<&str>,
    number: Option<i32>,
    status: &str,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE task_history SET pr_url = COALESCE($2, pr_url), pr_number = COALESCE($3, pr_number),
             status = $4, updated_at = now()
         WHERE branch = $1 AND status <> 'failed'",
        branch,
        url,
        number,
        status
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}
