//! Each agent's token use per model as read from its transcript so far (`agent_model_usage`),
//! where the reading stopped (`agent_usage`), so the next hook reads only what was added, and the
//! sums over agents (per group, wish, project).

use std::collections::BTreeMap;

use sqlx::PgConnection;
use uuid::Uuid;

use crate::domain::usage::Usage;

/// Where an agent's transcript was read up to.
#[derive(Debug, Clone)]
pub struct Progress {
    pub transcript_path: String,
    pub read_offset: i64,
    /// What the reader carries between chunks: the last message id counted (a Claude Code
    /// transcript), or a Codex or Gemini CLI reader's state as JSON.
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

/// Adds what was read (tokens per model) and records where it stopped.
pub async fn add(
    conn: &mut PgConnection,
    agent_id: Uuid,
    read: &Progress,
    by_model: &BTreeMap<String, Usage>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE agent_usage SET transcript_path = $2, read_offset = $3, last_message = $4, updated_at = now()
         WHERE agent_id = $1",
        agent_id,
        read.transcript_path,
        read.read_offset,
        read.last_message,
    )
    .execute(&mut *conn)
    .await?;
    if by_model.is_empty() {
        return Ok(());
    }
    let models: Vec<String> = by_model.keys().cloned().collect();
    let column = |f: fn(&Usage) -> i64| by_model.values().map(f).collect::<Vec<i64>>();
    sqlx::query!(
        "INSERT INTO agent_model_usage AS u (agent_id, model, input_tokens, output_tokens,
             cache_creation_input_tokens, cache_read_input_tokens)
         SELECT $1, * FROM UNNEST($2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[])
         ON CONFLICT (agent_id, model) DO UPDATE SET
             input_tokens = u.input_tokens + EXCLUDED.input_tokens,
             output_tokens = u.output_tokens + EXCLUDED.output_tokens,
             cache_creation_input_tokens = u.cache_creation_input_tokens + EXCLUDED.cache_creation_input_tokens,
             cache_read_input_tokens = u.cache_read_input_tokens + EXCLUDED.cache_read_input_tokens,
             updated_at = now()",
        agent_id,
        &models,
        &column(|u| u.input_tokens),
        &column(|u| u.output_tokens),
        &column(|u| u.cache_creation_input_tokens),
        &column(|u| u.cache_read_input_tokens),
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Whose token use to sum: agents matching every filter given (none: all agents).
#[derive(Debug, Clone, Copy, Default)]
pub struct Scope {
    pub agent: Option<Uuid>,
    /// A wish's execution group (the task its agent works on).
    pub group: Option<Uuid>,
    pub wish: Option<Uuid>,
    pub project: Option<Uuid>,
}

/// Token use per model of the agents in `scope`.
pub async fn by_model(conn: &mut PgConnection, scope: &Scope) -> Result<BTreeMap<String, Usage>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT u.model, sum(u.input_tokens)::bigint AS "input_tokens!", sum(u.output_tokens)::bigint AS "output_tokens!",
                  sum(u.cache_creation_input_tokens)::bigint AS "cache_creation_input_tokens!",
                  sum(u.cache_read_input_tokens)::bigint AS "cache_read_input_tokens!"
           FROM agent_model_usage u JOIN agents a ON a.id = u.agent_id
           WHERE ($1::uuid IS NULL OR a.id = $1) AND ($2::uuid IS NULL OR a.task_id = $2)
             AND ($3::uuid IS NULL OR a.wish_id = $3) AND ($4::uuid IS NULL OR a.project_id = $4)
           GROUP BY u.model"#,
        scope.agent,
        scope.group,
        scope.wish,
        scope.project
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let usage =
                tokens(r.input_tokens, r.output_tokens, r.cache_creation_input_tokens, r.cache_read_input_tokens);
            (r.model, usage)
        })
        .collect())
}

/// Token use per model of each wish group's agents (by group id), for the wish page.
pub async fn by_group(
    conn: &mut PgConnection,
    wish: Uuid,
) -> Result<BTreeMap<Uuid, BTreeMap<String, Usage>>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT a.task_id AS "group_id!", u.model, sum(u.input_tokens)::bigint AS "input_tokens!",
                  sum(u.output_tokens)::bigint AS "output_tokens!",
                  sum(u.cache_creation_input_tokens)::bigint AS "cache_creation_input_tokens!",
                  sum(u.cache_read_input_tokens)::bigint AS "cache_read_input_tokens!"
           FROM agent_model_usage u JOIN agents a ON a.id = u.agent_id
           WHERE a.wish_id = $1 AND a.task_id IS NOT NULL
           GROUP BY a.task_id, u.model"#,
        wish
    )
    .fetch_all(conn)
    .await?;
    let mut groups = BTreeMap::<Uuid, BTreeMap<String, Usage>>::new();
    for r in rows {
        let usage = tokens(r.input_tokens, r.output_tokens, r.cache_creation_input_tokens, r.cache_read_input_tokens);
        groups.entry(r.group_id).or_default().insert(r.model, usage);
    }
    Ok(groups)
}

/// The providers of which no agent in `scope` has any token use recorded, with how many
/// agents in `scope` run each. A provider one of whose agents reported is never among them.
pub async fn unreported(conn: &mut PgConnection, scope: &Scope) -> Result<Vec<(String, i64)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT a.provider, count(*) AS "agents!" FROM agents a
           WHERE ($1::uuid IS NULL OR a.id = $1) AND ($2::uuid IS NULL OR a.task_id = $2)
             AND ($3::uuid IS NULL OR a.wish_id = $3) AND ($4::uuid IS NULL OR a.project_id = $4)
           GROUP BY a.provider
           HAVING NOT bool_or(EXISTS (SELECT 1 FROM agent_model_usage u WHERE u.agent_id = a.id))
           ORDER BY a.provider"#,
        scope.agent,
        scope.group,
        scope.wish,
        scope.project
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.provider, r.agents)).collect())
}

/// Token use per model of each project's agents (by project slug), for the overview.
pub async fn by_project(conn: &mut PgConnection) -> Result<BTreeMap<String, BTreeMap<String, Usage>>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT p.slug, u.model, sum(u.input_tokens)::bigint AS "input_tokens!",
                  sum(u.output_tokens)::bigint AS "output_tokens!",
                  sum(u.cache_creation_input_tokens)::bigint AS "cache_creation_input_tokens!",
                  sum(u.cache_read_input_tokens)::bigint AS "cache_read_input_tokens!"
           FROM agent_model_usage u JOIN agents a ON a.id = u.agent_id JOIN projects p ON p.id = a.project_id
           GROUP BY p.slug, u.model"#
    )
    .fetch_all(conn)
    .await?;
    let mut projects = BTreeMap::<String, BTreeMap<String, Usage>>::new();
    for r in rows {
        let usage = tokens(r.input_tokens, r.output_tokens, r.cache_creation_input_tokens, r.cache_read_input_tokens);
        projects.entry(r.slug).or_default().insert(r.model, usage);
    }
    Ok(projects)
}

/// A row's four sums.
fn tokens(
    input_tokens: i64,
    output_tokens: i64,
    cache_creation_input_tokens: i64,
    cache_read_input_tokens: i64,
) -> Usage {
    Usage { input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens }
}
