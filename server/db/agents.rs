//! The agent registry in the database: creating an agent (`spawning`, before any pane exists),
//! reading, listing, editing and deleting it. The lifecycle the worker drives — claiming spawning
//! rows, recording panes, state changes, activity, nudges and hooks — is in [`lifecycle`].
//!
//! Reads take whole rows (`SELECT *`) into one row type, so the columns are named in the table and
//! in `row::AgentRow` only, checked against each other when the queries are compiled.

pub mod lifecycle;
mod row;

pub use lifecycle::{
    apply, claim_spawning, count_by_state, interruptions_within, last_hooks, limits_reset, list_live_on_node,
    lock_in_pane, lock_on_node, record_hook, record_hook_unless_newer, record_nudge, record_pane, release_claim,
    resumed_and_not_worked_since, swap, touch_activity, Applied, Cause, INTERRUPTED,
};

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::events;
use crate::domain::agent::AgentState;
use crate::domain::agent_kind::{AgentKind, AgentRole};
use row::AgentRow;

/// An agent as stored and as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "6f1c2d9e-8a4b-4c3d-9e2f-1a2b3c4d5e6f", "name": "clever-fox", "project_id": "0b9f6a86-4c5e-4a43-9a59-7d5f6e1e8c11",
    "kind": "worker", "role": "engineer", "provider": "claude", "state": "working", "tmux_session": "switchyard-node-1",
    "tmux_window": "@3", "tmux_pane": "%7", "pid": 41234, "clone_mode": "agent",
    "clone_path": "/var/lib/switchyard/clones/clever-fox", "branch": "switchyard/clever-fox", "repo": "/srv/repos/app",
    "provider_session_id": "2c7d3a8e-1f4b-4e6a-9c0d-5b8e7f6a1d2c", "team": null, "wish_id": null, "task_id": null,
    "task": "Add a login page", "summary": null, "failure_reason": null, "node_id": "node-0a1b2c3d4e5f",
    "last_activity": "2025-01-15T10:35:00Z", "last_nudge": null, "nudge_count": 0, "ready_for_cleanup": false,
    "suspended_until": null, "last_hook_at": "2025-01-15T10:34:58Z", "last_hook_state": "working", "version": 4,
    "created_at": "2025-01-15T10:30:00Z", "updated_at": "2025-01-15T10:35:00Z"}))]
pub struct Agent {
    pub id: Uuid,
    /// A slug, unique: names the tmux window, the clone directory and the default branch.
    pub name: String,
    pub project_id: Uuid,
    pub kind: AgentKind,
    pub role: AgentRole,
    /// A provider from the providers config (`claude`, `codex`, `gemini`, `shell`, or custom).
    pub provider: String,
    pub state: AgentState,
    pub tmux_session: Option<String>,
    /// The tmux window id (`@3`).
    pub tmux_window: Option<String>,
    /// The tmux pane id (`%7`).
    pub tmux_pane: Option<String>,
    pub pid: Option<i32>,
    /// `agent`: its own clone, made by the worker; `none`: it runs in the project's repository.
    pub clone_mode: String,
    pub clone_path: Option<String>,
    pub branch: Option<String>,
    /// The repository the clone is made from (the project's `repo_path`).
    pub repo: String,
    /// The provider's session id, passed at start (`claude --session-id`) and used to resume.
    pub provider_session_id: Uuid,
    pub team: Option<String>,
    pub wish_id: Option<Uuid>,
    /// The task (e.g. a wish's group) this agent works on; its status follows the agent's.
    pub task_id: Option<Uuid>,
    /// What the agent was asked to do.
    pub task: Option<String>,
    /// What it did (a completion summary).
    pub summary: Option<String>,
    pub failure_reason: Option<String>,
    /// The worker node that manages it; null until a worker claims the spawning row.
    pub node_id: Option<String>,
    pub last_activity: Option<DateTime<Utc>>,
    pub last_nudge: Option<DateTime<Utc>>,
    pub nudge_count: i32,
    /// The agent's work is finished and it may be removed.
    pub ready_for_cleanup: bool,
    /// Suspended until this time: a usage limit's reset, or the wait before it is resumed after an interruption.
    pub suspended_until: Option<DateTime<Utc>>,
    pub last_hook_at: Option<DateTime<Utc>>,
    /// The state the last hook mapped to.
    pub last_hook_state: Option<AgentState>,
    /// Bumped on every change; send it back as `If-Match` to update safely.
    pub version: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What it takes to register an agent; the caller has validated every field.
#[derive(Debug, Clone)]
pub struct NewAgent {
    pub id: Uuid,
    pub name: String,
    pub project_id: Uuid,
    pub kind: AgentKind,
    pub role: AgentRole,
    pub provider: String,
    pub clone_mode: String,
    pub branch: Option<String>,
    pub repo: String,
    pub team: Option<String>,
    pub wish_id: Option<Uuid>,
    pub task_id: Option<Uuid>,
    pub task: Option<String>,
}

/// The newest agent working on `branch` (its own, or `switchyard/<name>` by default), with its
/// project's slug.
pub async fn on_branch(conn: &mut PgConnection, branch: &str) -> Result<Option<(String, String)>, sqlx::Error> {
    let row = sqlx::query!(
        "SELECT a.name, p.slug AS project FROM agents a JOIN projects p ON p.id = a.project_id
             WHERE a.branch = $1 OR (a.branch IS NULL AND 'switchyard/' || a.name = $1)
             ORDER BY a.created_at DESC LIMIT 1",
        branch
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| (r.name, r.project)))
}

pub(crate) fn subject(name: &str) -> String {
    format!("agent:{name}")
}

/// Registers an agent in state `spawning` with no node: a worker claims it and makes its pane.
#[tracing::instrument(skip_all, fields(agent = %new.name), err(level = "debug"))]
pub async fn insert(conn: &mut PgConnection, new: &NewAgent) -> Result<Agent, sqlx::Error> {
    sqlx::query!(
        "INSERT INTO agents (id, name, project_id, kind, role, provider, clone_mode, branch, repo,
                             provider_session_id, team, wish_id, task_id, task)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        new.id,
        new.name,
        new.project_id,
        new.kind.as_str(),
        new.role.as_str(),
        new.provider,
        new.clone_mode,
        new.branch,
        new.repo,
        Uuid::new_v4(),
        new.team,
        new.wish_id,
        new.task_id,
        new.task,
    )
    .execute(&mut *conn)
    .await?;
    let agent = get(conn, new.id).await?.ok_or(sqlx::Error::RowNotFound)?;
    let payload = json!({
        "id": agent.id, "project_id": agent.project_id, "kind": agent.kind, "role": agent.role,
        "provider": agent.provider, "wish_id": agent.wish_id, "task_id": agent.task_id,
    });
    events::record(conn, "agent.spawned", &subject(&agent.name), payload).await?;
    Ok(agent)
}

/// Filters for [`list`]; every one is optional and they combine with AND.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub id: Option<Uuid>,
    pub name: Option<String>,
    pub project_id: Option<Uuid>,
    pub state: Option<AgentState>,
    pub kind: Option<AgentKind>,
    pub team: Option<String>,
    pub node_id: Option<String>,
    /// Only agents in a live state (spawning, working, idle, permission, question).
    pub live_only: bool,
    /// Continue after this `(created_at, id)` position.
    pub after: Option<(DateTime<Utc>, Uuid)>,
}

/// Up to `limit` agents after the filter's position, in `(created_at, id)` order.
pub async fn list(conn: &mut PgConnection, filter: &ListFilter, limit: i64) -> Result<Vec<Agent>, sqlx::Error> {
    let (after_at, after_id) = filter.after.unzip();
    let rows = sqlx::query_as!(
        AgentRow,
        "SELECT * FROM agents
         WHERE ($1::uuid IS NULL OR id = $1)
           AND ($2::text IS NULL OR name = $2)
           AND ($3::uuid IS NULL OR project_id = $3)
           AND ($4::text IS NULL OR state = $4)
           AND ($5::text IS NULL OR kind = $5)
           AND ($6::text IS NULL OR team = $6)
           AND ($7::text IS NULL OR node_id = $7)
           AND (NOT $8 OR state IN ('spawning', 'working', 'idle', 'permission', 'question'))
           AND ($9::timestamptz IS NULL OR (created_at, id) > ($9, $10::uuid))
         ORDER BY created_at, id
         LIMIT $11",
        filter.id,
        filter.name,
        filter.project_id,
        filter.state.map(|s| s.as_str()),
        filter.kind.map(|k| k.as_str()),
        filter.team,
        filter.node_id,
        filter.live_only,
        after_at,
        after_id,
        limit
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(Agent::try_from).collect()
}

/// What the overview shows of agents, in one statement (under load each round trip waits its
/// turn for a core): how many are in each state; up to 50 live ones, those waiting on a person (a
/// permission or a question) first, then the most recently active, sorted and cut here rather
/// than after reading every live agent; those failed with a reason (up to 500); and the providers
/// at a usage limit, until when.
///
/// The limits are literals: a statement without parameters is planned once per connection,
/// where `LIMIT $1` was planned again on every view (about 1 ms of the database's CPU).
pub async fn at_a_glance(conn: &mut PgConnection) -> Result<AtAGlance, sqlx::Error> {
    // (A column's name, with its type, is cut at 63 bytes: hence the short names.)
    use sqlx::types::Json;
    type Counts = std::collections::HashMap<String, i64>;
    type Limits = Vec<(String, DateTime<Utc>)>;
    let row = sqlx::query!(
        // The rows are chosen first and only those made JSON: made JSON in the outer list, every
        // live agent would be before the sort. `json_agg` writes text; `jsonb_agg(to_jsonb(..))`
        // built each row as jsonb first, three times the database's CPU (3 ms for 50 agents).
        r#"SELECT
             (SELECT coalesce(jsonb_object_agg(state, n), '{}') FROM (SELECT state, count(*) AS n FROM agents GROUP BY state) c)
               AS "counts!: Json<Counts>",
             (SELECT coalesce(json_agg(a ORDER BY a.state IN ('permission', 'question') DESC,
                                       a.last_activity DESC NULLS LAST, a.created_at, a.id), '[]')
              FROM (SELECT * FROM agents
                    WHERE state IN ('spawning', 'working', 'idle', 'permission', 'question')
                    ORDER BY state IN ('permission', 'question') DESC, last_activity DESC NULLS LAST, created_at, id
                    LIMIT 50) a) AS "pressing!: Json<Vec<AgentRow>>",
             (SELECT coalesce(json_agg(f ORDER BY f.created_at, f.id), '[]')
              FROM (SELECT * FROM agents WHERE state = 'error' AND failure_reason IS NOT NULL
                    ORDER BY created_at, id LIMIT 500) f) AS "failed!: Json<Vec<AgentRow>>",
             (SELECT coalesce(jsonb_agg(jsonb_build_array(provider, until) ORDER BY provider), '[]')
              FROM (SELECT provider, max(suspended_until) AS until FROM agents
                    WHERE state = 'suspended' AND suspended_until > now() GROUP BY provider) l)
               AS "at_limit!: Json<Limits>""#
    )
    .fetch_one(conn)
    .await?;
    let agents = |rows: Vec<AgentRow>| rows.into_iter().map(Agent::try_from).collect::<Result<Vec<_>, _>>();
    Ok(AtAGlance {
        counts: row.counts.0.into_iter().filter_map(|(state, n)| Some((state.parse().ok()?, n))).collect(),
        pressing: agents(row.pressing.0)?,
        failed: agents(row.failed.0)?,
        at_limit: row.at_limit.0,
    })
}

/// The overview's agents ([`at_a_glance`]).
#[derive(Debug, Clone, Default)]
pub struct AtAGlance {
    pub counts: Vec<(AgentState, i64)>,
    pub pressing: Vec<Agent>,
    pub failed: Vec<Agent>,
    pub at_limit: Vec<(String, DateTime<Utc>)>,
}

/// One agent by its key. Not through [`list`]: a statement written for every filter at once gets
/// a plan that cannot use the key once PostgreSQL caches it, and reads every row.
pub async fn get(conn: &mut PgConnection, id: Uuid) -> Result<Option<Agent>, sqlx::Error> {
    let row = sqlx::query_as!(AgentRow, "SELECT * FROM agents WHERE id = $1", id).fetch_optional(conn).await?;
    row.map(Agent::try_from).transpose()
}

/// The agents with these ids that still exist, in the order given (rows read one by one: the
/// callers pick a few dozen ids with their own conditions and locks).
pub async fn get_all(conn: &mut PgConnection, ids: Vec<Uuid>) -> Result<Vec<Agent>, sqlx::Error> {
    let mut agents = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(agent) = get(&mut *conn, id).await? {
            agents.push(agent);
        }
    }
    Ok(agents)
}

pub async fn by_name(conn: &mut PgConnection, name: &str) -> Result<Option<Agent>, sqlx::Error> {
    let row = sqlx::query_as!(AgentRow, "SELECT * FROM agents WHERE name = $1", name).fetch_optional(conn).await?;
    row.map(Agent::try_from).transpose()
}

/// A PATCH: `None` leaves a field as it is; `Some(None)` clears a nullable one.
#[derive(Debug, Clone, Default)]
pub struct Edit {
    pub summary: Option<Option<String>>,
    pub task: Option<Option<String>>,
    pub ready_for_cleanup: Option<bool>,
}

/// Edits an agent's summary, task text or `ready_for_cleanup`; with `expected_version`, only if
/// the agent is still at that version. `Ok(Err(current))` is a version mismatch carrying the agent
/// as it is now; `Ok(Ok(None))` means no such agent.
#[tracing::instrument(skip_all, fields(agent = %name), err(level = "debug"))]
pub async fn update_fields(
    conn: &mut PgConnection,
    name: &str,
    expected_version: Option<i32>,
    edit: &Edit,
) -> Result<Result<Option<Agent>, Agent>, sqlx::Error> {
    let id = sqlx::query_scalar!(
        "UPDATE agents SET summary = CASE WHEN $2 THEN $3 ELSE summary END,
             task = CASE WHEN $4 THEN $5 ELSE task END,
             ready_for_cleanup = COALESCE($6, ready_for_cleanup),
             version = version + 1, updated_at = now()
         WHERE name = $1 AND ($7::int IS NULL OR version = $7)
         RETURNING id",
        name,
        edit.summary.is_some(),
        edit.summary.clone().flatten(),
        edit.task.is_some(),
        edit.task.clone().flatten(),
        edit.ready_for_cleanup,
        expected_version,
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(id) = id else {
        // Either there is no such agent or its version moved on; tell the two apart.
        return Ok(match by_name(conn, name).await? {
            Some(current) => Err(current),
            None => Ok(None),
        });
    };
    let agent = get(conn, id).await?.ok_or(sqlx::Error::RowNotFound)?;
    let fields: Vec<&str> = [
        ("summary", edit.summary.is_some()),
        ("task", edit.task.is_some()),
        ("ready_for_cleanup", edit.ready_for_cleanup.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect();
    let payload = json!({"fields": fields, "version": agent.version, "ready_for_cleanup": agent.ready_for_cleanup});
    events::record(conn, "agent.updated", &subject(name), payload).await?;
    Ok(Ok(Some(agent)))
}

/// Locks an agent's row for a decision that must not race a state change (deleting it).
pub async fn lock(conn: &mut PgConnection, name: &str) -> Result<Option<Agent>, sqlx::Error> {
    let id = sqlx::query_scalar!("SELECT id FROM agents WHERE name = $1 FOR UPDATE", name)
        .fetch_optional(&mut *conn)
        .await?;
    match id {
        Some(id) => get(conn, id).await,
        None => Ok(None),
    }
}

/// The target branch of the agent's project, which its clone's work must reach to count as merged.
pub async fn project_target_branch(conn: &mut PgConnection, project_id: Uuid) -> Result<String, sqlx::Error> {
    sqlx::query_scalar!("SELECT target_branch FROM projects WHERE id = $1", project_id).fetch_one(conn).await
}

/// The slug of the agent's project (events about the agent's messages and teams carry it).
pub async fn project_slug(conn: &mut PgConnection, id: Uuid) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!("SELECT p.slug FROM agents a JOIN projects p ON p.id = a.project_id WHERE a.id = $1", id)
        .fetch_optional(conn)
        .await
}

/// Removes an agent from the registry (its tokens go with it), with an `agent.deleted` event.
#[tracing::instrument(skip_all, fields(agent = %agent.name), err(level = "debug"))]
pub async fn delete(conn: &mut PgConnection, agent: &Agent, clone_removed: bool) -> Result<(), sqlx::Error> {
    let payload = json!({"id": agent.id, "state": agent.state, "clone_path": agent.clone_path,
        "clone_removed": clone_removed});
    // Recorded while the row exists, so the event finds the agent's project.
    events::record(&mut *conn, "agent.deleted", &subject(&agent.name), payload).await?;
    sqlx::query!("DELETE FROM agents WHERE id = $1", agent.id).execute(&mut *conn).await?;
    Ok(())
}
