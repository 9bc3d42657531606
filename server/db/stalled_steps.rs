//! Steps that keep failing ([`StalledStep`]): recorded at each failure with a growing wait before
//! the next try, removed when the step succeeds.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;

/// A step the server keeps retrying, as the person sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct StalledStep {
    /// What is stuck: `wish:<id>`, `merge_entry:<id>`.
    #[serde(skip)]
    pub subject: String,
    /// The step: `integrate` (merging a wish's reported groups into its branch).
    pub step: String,
    /// Why it failed last, in the refusing tool's words.
    pub error: String,
    /// When it first failed.
    pub since: DateTime<Utc>,
    /// How many times it has been tried.
    pub attempts: i32,
    /// When it is tried next.
    pub retry_at: DateTime<Utc>,
}

/// The subject of merging a wish's reported groups into its branch (the conductor's integration).
pub fn wish_integration(wish_id: uuid::Uuid) -> String {
    format!("wish:{wish_id}")
}

/// The subject of a merge queue's passes (a project's target branch).
pub fn merge_queue(project_id: uuid::Uuid, target_branch: &str) -> String {
    format!("merge_queue:{project_id}:{target_branch}")
}

/// The longest wait between two tries.
const MAX_WAIT_SECONDS: f64 = 60.0;

/// Records a failure of `step` for `subject` and when to try again: 1 s after the first, doubling
/// up to a minute. Answers the step and whether this is its first failure (since it last
/// succeeded).
pub async fn failed(
    conn: &mut PgConnection,
    subject: &str,
    step: &str,
    error: &str,
) -> Result<(StalledStep, bool), sqlx::Error> {
    let row = sqlx::query!(
        r#"INSERT INTO stalled_steps (subject, step, error, retry_at)
           VALUES ($1, $2, $3, now() + interval '1 second')
           ON CONFLICT (subject) DO UPDATE
              SET step = excluded.step, error = excluded.error, attempts = stalled_steps.attempts + 1,
                  retry_at = now() + make_interval(secs => least($4, power(2, stalled_steps.attempts)))
           RETURNING subject, step, error, since, attempts, retry_at, (xmax = 0) AS "first!""#,
        subject,
        step,
        error,
        MAX_WAIT_SECONDS,
    )
    .fetch_one(conn)
    .await?;
    let stalled = StalledStep {
        subject: row.subject,
        step: row.step,
        error: row.error,
        since: row.since,
        attempts: row.attempts,
        retry_at: row.retry_at,
    };
    Ok((stalled, row.first))
}

/// The step succeeded: its record goes. Answers it, if it had failed before.
pub async fn succeeded(conn: &mut PgConnection, subject: &str) -> Result<Option<StalledStep>, sqlx::Error> {
    sqlx::query_as!(
        StalledStep,
        "DELETE FROM stalled_steps WHERE subject = $1 RETURNING subject, step, error, since, attempts, retry_at",
        subject
    )
    .fetch_optional(conn)
    .await
}

/// The failing step of `subject`, if any.
pub async fn get(conn: &mut PgConnection, subject: &str) -> Result<Option<StalledStep>, sqlx::Error> {
    sqlx::query_as!(
        StalledStep,
        "SELECT subject, step, error, since, attempts, retry_at FROM stalled_steps WHERE subject = $1",
        subject
    )
    .fetch_optional(conn)
    .await
}

/// The failing steps whose subject starts with `prefix` (`merge_queue:`).
pub async fn with_prefix(conn: &mut PgConnection, prefix: &str) -> Result<Vec<StalledStep>, sqlx::Error> {
    sqlx::query_as!(
        StalledStep,
        "SELECT subject, step, error, since, attempts, retry_at FROM stalled_steps WHERE starts_with(subject, $1)",
        prefix
    )
    .fetch_all(conn)
    .await
}

/// Steps tried at least `attempts` times in vain, longest failing first: what a person should
/// look at.
pub async fn failing(conn: &mut PgConnection, attempts: i32, limit: i64) -> Result<Vec<StalledStep>, sqlx::Error> {
    sqlx::query_as!(
        StalledStep,
        "SELECT subject, step, error, since, attempts, retry_at FROM stalled_steps
         WHERE attempts >= $1 ORDER BY since LIMIT $2",
        attempts,
        limit
    )
    .fetch_all(conn)
    .await
}
