//! Worker nodes in the database: each registers itself at start and keeps a heartbeat, so the
//! agents of a node that stopped beating can be found (and their work released) by another.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::PgConnection;

use crate::db::events;

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Node {
    #[schema(example = "node-0a1b2c3d4e5f")]
    pub id: String,
    #[schema(example = "build-01")]
    pub host: String,
    /// `serve` (API and worker) or `worker`.
    pub role: String,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Registers the node (or re-registers it after a restart: same id, new start time), with a
/// `node.registered` event, and counts it as beating now.
#[tracing::instrument(skip_all, fields(node = %id), err(level = "debug"))]
pub async fn register(
    conn: &mut PgConnection,
    id: &str,
    host: &str,
    role: &str,
    started_at: DateTime<Utc>,
) -> Result<Node, sqlx::Error> {
    let node = sqlx::query_as!(
        Node,
        "INSERT INTO nodes (id, host, role, started_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, role = EXCLUDED.role,
             started_at = EXCLUDED.started_at, heartbeat_at = now(), updated_at = now()
         RETURNING id, host, role, started_at, heartbeat_at, created_at, updated_at",
        id,
        host,
        role,
        started_at
    )
    .fetch_one(&mut *conn)
    .await?;
    let payload = json!({"host": host, "role": role, "started_at": started_at});
    events::record(conn, "node.registered", &format!("node:{id}"), payload).await?;
    Ok(node)
}

/// The node is alive now. No event: it beats every few seconds. False: the node is not
/// registered (it was removed), and should register again.
pub async fn heartbeat(conn: &mut PgConnection, id: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!("UPDATE nodes SET heartbeat_at = now() WHERE id = $1", id).execute(conn).await?;
    Ok(done.rows_affected() == 1)
}

/// Nodes whose last heartbeat is older than `older_than`, longest silent first.
pub async fn stale_nodes(conn: &mut PgConnection, older_than: std::time::Duration) -> Result<Vec<Node>, sqlx::Error> {
    let seconds = older_than.as_secs_f64();
    sqlx::query_as!(
        Node,
        "SELECT id, host, role, started_at, heartbeat_at, created_at, updated_at FROM nodes
         WHERE heartbeat_at < now() - make_interval(secs => $1)
         ORDER BY heartbeat_at, id",
        seconds
    )
    .fetch_all(conn)
    .await
}

pub async fn get(conn: &mut PgConnection, id: &str) -> Result<Option<Node>, sqlx::Error> {
    sqlx::query_as!(
        Node,
        "SELECT id, host, role, started_at, heartbeat_at, created_at, updated_at FROM nodes WHERE id = $1",
        id
    )
    .fetch_optional(conn)
    .await
}
