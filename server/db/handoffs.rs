//! What the conductor left to a person, read for the dashboard: wish groups and wishes assigned
//! to `human` (v0's handoff), and the agents that worked on a wish.

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
