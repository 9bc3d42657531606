//! The row shape every agent query reads into, and its conversion to [`Agent`].

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::Agent;

/// A row as read (`SELECT *`, or whole as JSON inside another row); the enums are text until
/// checked.
#[derive(Debug, serde::Deserialize)]
pub(super) struct AgentRow {
    pub(super) id: Uuid,
    pub(super) name: String,
    pub(super) project_id: Uuid,
    pub(super) kind: String,
    pub(super) role: String,
    pub(super) provider: String,
    pub(super) state: String,
    pub(super) tmux_session: Option<String>,
    pub(super) tmux_window: Option<String>,
    pub(super) tmux_pane: Option<String>,
    pub(super) pid: Option<i32>,
    pub(super) clone_mode: String,
    pub(super) clone_path: Option<String>,
    pub(super) branch: Option<String>,
    pub(super) repo: String,
    pub(super) provider_session_id: Uuid,
    pub(super) team: Option<String>,
    pub(super) wish_id: Option<Uuid>,
    pub(super) task_id: Option<Uuid>,
    pub(super) task: Option<String>,
    pub(super) summary: Option<String>,
    pub(super) failure_reason: Option<String>,
    pub(super) node_id: Option<String>,
    pub(super) last_activity: Option<DateTime<Utc>>,
    pub(super) last_nudge: Option<DateTime<Utc>>,
    pub(super) nudge_count: i32,
    pub(super) ready_for_cleanup: bool,
    pub(super) suspended_until: Option<DateTime<Utc>>,
    pub(super) last_hook_at: Option<DateTime<Utc>>,
    pub(super) last_hook_state: Option<String>,
    pub(super) version: i32,
    pub(super) created_at: DateTime<Utc>,
    pub(super) updated_at: DateTime<Utc>,
}

/// The `CHECK` constraints admit only known values; anything else is a decode error, not a panic.
fn parse<T: std::str::FromStr>(text: &str) -> Result<T, sqlx::Error>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    text.parse().map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

impl TryFrom<AgentRow> for Agent {
    type Error = sqlx::Error;

    fn try_from(r: AgentRow) -> Result<Agent, sqlx::Error> {
        Ok(Agent {
            kind: parse(&r.kind)?,
            role: parse(&r.role)?,
            state: parse(&r.state)?,
            last_hook_state: r.last_hook_state.as_deref().map(parse).transpose()?,
            id: r.id,
            name: r.name,
            project_id: r.project_id,
            provider: r.provider,
            tmux_session: r.tmux_session,
            tmux_window: r.tmux_window,
            tmux_pane: r.tmux_pane,
            pid: r.pid,
            clone_mode: r.clone_mode,
            clone_path: r.clone_path,
            branch: r.branch,
            repo: r.repo,
            provider_session_id: r.provider_session_id,
            team: r.team,
            wish_id: r.wish_id,
            task_id: r.task_id,
            task: r.task,
            summary: r.summary,
            failure_reason: r.failure_reason,
            node_id: r.node_id,
            last_activity: r.last_activity,
            last_nudge: r.last_nudge,
            nudge_count: r.nudge_count,
            ready_for_cleanup: r.ready_for_cleanup,
            suspended_until: r.suspended_until,
            last_hook_at: r.last_hook_at,
            version: r.version,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}
