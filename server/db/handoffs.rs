//! What the conductor left to a person, read for the dashboard: wish groups and wishes assigned
//! to `human`, and the agents that worked on a wish.

use sqlx::types::Json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::agents::{self, Agent};
use super::tasks::{Task, TaskRow};
use super::wishes::{Wish, WishRow};

/// Unfinished wish groups handed to a person, oldest change first, with their wish's slug.
pub async fn groups(conn: &mut PgConnection, limit: i64) -> Result<Vec<(Task, String)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT to_jsonb(t) AS "task!: Json<TaskRow>", w.slug
           FROM tasks t JOIN wishes w ON w.id = t.wish_id
           WHERE t.assignee = 'human' AND t.status NOT IN ('done', 'failed', 'cancelled')
             AND w.status NOT IN ('merged', 'cancelled')
           ORDER BY t.updated_at, t.id LIMIT $1"#,
        limit
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(|r| Ok((Task::try_from(r.task.0)?, r.slug))).collect()
}

/// Wishes whose step was handed to a person and that are not over, oldest change first.
pub async fn wishes(conn: &mut PgConnection, limit: i64) -> Result<Vec<Wish>, sqlx::Error> {
    let rows = sqlx::query_scalar!(
        r#"SELECT to_jsonb(w) AS "wish!: Json<WishRow>" FROM wishes w
           WHERE w.assignee = 'human' AND w.status NOT IN ('merged', 'cancelled')
           ORDER BY w.updated_at, w.id LIMIT $1"#,
        limit
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(|r| Wish::try_from(r.0)).collect()
}

/// The agents that worked on the wish (its planner, engineers, reviewers, fixers), newest first.
pub async fn agents_of(conn: &mut PgConnection, wish_id: Uuid) -> Result<Vec<Agent>, sqlx::Error> {
    let ids =
        sqlx::query_scalar!("SELECT id FROM agents WHERE wish_id = $1 ORDER BY created_at DESC, id LIMIT 200", wish_id)
            .fetch_all(&mut *conn)
            .await?;
    let mut found = Vec::with_capacity(ids.len());
    for id in ids {
        found.extend(agents::get(&mut *conn, id).await?);
    }
    Ok(found)
}

/// An idle agent whose group or task is still open and unreported: its turn ended without a
/// report (`switchyard group done|blocked`, `task done|fail`), so only a person (or a nudge)
/// gets it going. Agents with mail waiting are left out: their next message is on its way.
#[derive(Debug, Clone)]
pub struct Unreported {
    pub agent: String,
    /// The group's key, or the standalone task's title.
    pub work: String,
    /// The group's wish, `None` for a standalone task.
    pub wish: Option<String>,
    /// When the agent last changed (went idle, mostly).
    pub since: chrono::DateTime<chrono::Utc>,
}

/// Up to `limit` [`Unreported`] agents, longest idle first.
pub async fn idle_unreported(conn: &mut PgConnection, limit: i64) -> Result<Vec<Unreported>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT a.name, COALESCE(t.group_key, t.title) AS "work!", w.slug AS "wish?", a.updated_at
           FROM agents a JOIN tasks t ON t.id = a.task_id LEFT JOIN wishes w ON w.id = t.wish_id
           WHERE a.state = 'idle' AND NOT a.ready_for_cleanup AND t.assignee = a.name
             AND t.status IN ('in_progress', 'waiting_input') AND t.reported_at IS NULL
             AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.recipient_id = a.id AND m.delivered_at IS NULL)
           ORDER BY a.updated_at, a.id LIMIT $1"#,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Unreported { agent: r.name, work: r.work, wish: r.wish, since: r.updated_at })
        .collect())
}
