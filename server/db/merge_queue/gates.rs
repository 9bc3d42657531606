//! The gates this node runs: each one's scratch clone, process group and the run of the process
//! that started it. A process that starts again finds the groups its predecessor left and ends
//! them before it touches their scratch clones.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

/// A gate started by an earlier run of this node.
#[derive(Debug, Clone)]
pub struct LeftGate {
    pub scratch: String,
    pub pgid: i32,
    /// `<boot id>:<start time>` of the group's leader when it started.
    pub leader: String,
}

/// The gate in `scratch` runs in process group `pgid` (led by `leader`), started by `run`.
pub async fn started(
    conn: &mut PgConnection,
    node: &str,
    scratch: &str,
    run: DateTime<Utc>,
    pgid: i32,
    leader: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO merge_gates (node, scratch, run, pgid, leader) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (node, scratch) DO UPDATE SET run = EXCLUDED.run, pgid = EXCLUDED.pgid,
             leader = EXCLUDED.leader, updated_at = now()",
        node,
        scratch,
        run,
        pgid,
        leader
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The gate `run` started in `scratch` has ended (its group with it).
pub async fn ended(conn: &mut PgConnection, node: &str, scratch: &str, run: DateTime<Utc>) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM merge_gates WHERE node = $1 AND scratch = $2 AND run = $3", node, scratch, run)
        .execute(conn)
        .await?;
    Ok(())
}

/// Gates of this node started by runs before `run` (processes that are gone).
pub async fn left_before(
    conn: &mut PgConnection,
    node: &str,
    run: DateTime<Utc>,
) -> Result<Vec<LeftGate>, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT scratch, pgid, leader FROM merge_gates WHERE node = $1 AND run < $2 ORDER BY scratch",
        node,
        run
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| LeftGate { scratch: r.scratch, pgid: r.pgid, leader: r.leader }).collect())
}

/// A left gate's group is gone: its row goes.
pub async fn forget(conn: &mut PgConnection, node: &str, gate: &LeftGate) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM merge_gates WHERE node = $1 AND scratch = $2 AND pgid = $3",
        node,
        gate.scratch,
        gate.pgid
    )
    .execute(conn)
    .await?;
    Ok(())
}
