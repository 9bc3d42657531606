//! Each agent's token use as read from its transcript so far (`agent_usage`), with where the
//! reading stopped, so the next hook reads only what was added.

use sqlx::PgConnection;
use uuid::Uuid;

use crate::domain::usage::Usage;

/// Where an agent's transcript was read up to.
#[derive(Debug, Clone)]
pub struct Progress {
    pub transcript_path: String,
    pub read_offset: i64,
    pub last_message: Option<String>,
}

/// Locks the agent's row, made now for its first transcript. A new transcript (a new session)
/// is read from its start; the sums carry on.
pub async fn lock(conn: &mut PgConnection, agent_id: Uuid, transcript_path: &str) -> Result<Progress, sqlx::Error> {
    sqlx::query!(
        "INSERT INTO agent_usage (agent_id, transcript_path) VALUES ($1, $2) ON CONFLICT (agent_id) DO NOTHING",
        agent_id,
        transcript_path
    )
    .execute(&mut *conn)
    .await?;
    let row = sqlx::query!(
        "SELECT transcript_path, read_offset, last_message FROM agent_usage WHERE agent_id = $1 FOR UPDATE",
        agent_id
    )
    .fetch_one(&mut *conn)
    .await?;
    if row.transcript_path != transcript_path {
        return Ok(Progress { transcript_path: transcript_path.to_owned(), read_offset: 0, last_message: None });
    }
    Ok(Progress { transcript_path: row.transcript_path, read_offset: row.read_offset, last_message: row.last_message })
}

/// Adds what was read and records where it stopped.
pub async fn add(conn: &mut PgConnection, agent_id: Uuid, read: &Progress, usage: &Usage) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE agent_usage SET transcript_path = $2, read_offset = $3, last_message = $4,
             input_tokens = input_tokens + $5, output_tokens = output_tokens + $6,
             cache_creation_input_tokens = cache_creation_input_tokens + $7,
             cache_read_input_tokens = cache_read_input_tokens + $8, updated_at = now()
         WHERE agent_id = $1",
        agent_id,
        read.transcript_path,
        read.read_offset,
        read.last_message,
        usage.input_tokens,
        usage.output_tokens,
        usage.cache_creation_input_tokens,
        usage.cache_read_input_tokens
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The agent's token use, `None` before any transcript was read.
pub async fn get(conn: &mut PgConnection, agent_id: Uuid) -> Result<Option<Usage>, sqlx::Error> {
    let row = sqlx::query!(
        "SELECT input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens
         FROM agent_usage WHERE agent_id = $1",
        agent_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| Usage {
        input_tokens: r.input_tokens,
        output_tokens: r.output_tokens,
        cache_creation_input_tokens: r.cache_creation_input_tokens,
        cache_read_input_tokens: r.cache_read_input_tokens,
    }))
}
