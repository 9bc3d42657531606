//! What a node's worker records about itself and the agents it runs: its registration and
//! heartbeat, claims, spawns (tokens, panes, team clones), the states it observes, and the
//! settling of agents whose panes or nodes are gone (their tasks handed to a person). Each step
//! takes the worker's connection or transaction, so what belongs together commits together.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::Result;
use crate::db::agents::{self, Agent, Applied, Cause};
use crate::db::nodes::{self, Node};
use crate::db::tasks::{self, Edit};
use crate::db::{events, teams, tokens};
use crate::domain::agent::{AgentEvent, AgentState};

pub async fn register_node(
    conn: &mut PgConnection,
    node_id: &str,
    host: &str,
    role: &str,
    started_at: DateTime<Utc>,
) -> Result<()> {
    nodes::register(conn, node_id, host, role, started_at).await?;
    Ok(())
}

/// Up to `limit` agents waiting to be spawned, now this node's (a team's agents only on the node
/// the team is pinned to; the first claim pins it).
pub async fn claim(conn: &mut PgConnection, node_id: &str, limit: i64) -> Result<Vec<Agent>> {
    Ok(agents::claim_spawning(conn, node_id, limit).await?)
}

/// A new token for the agent (its earlier ones revoked), to put in its pane.
pub async fn issue_token(conn: &mut PgConnection, agent_id: Uuid) -> Result<String> {
    Ok(tokens::issue_agent_token(conn, agent_id).await?)
}

/// The pane the worker made (or found) for an agent, and its clone.
pub async fn record_pane(
    conn: &mut PgConnection,
    agent_id: Uuid,
    session: &str,
    window: &str,
    pane: &str,
    pid: Option<i32>,
    clone_path: Option<&str>,
) -> Result<()> {
    agents::record_pane(conn, agent_id, session, window, pane, pid, clone_path).await?;
    Ok(())
}

/// The team's clone, made by this node for the team's first agent.
pub async fn record_team_clone(conn: &mut PgConnection, team: &str, node_id: &str, path: &str) -> Result<bool> {
    Ok(teams::record_clone(conn, team, node_id, path).await?)
}

/// A state change the worker saw (or caused: a spawn that failed, a usage limit, a resume).
pub async fn observe(
    conn: &mut PgConnection,
    agent_id: Uuid,
    expected: Option<AgentState>,
    event: AgentEvent,
    cause: &Cause,
) -> Result<Option<Applied>> {
    Ok(agents::apply(conn, agent_id, expected, event, cause).await?)
}

/// The agents' panes printed something: their `last_activity` is now.
pub async fn touch_activity(conn: &mut PgConnection, agents: &[Uuid]) -> Result<()> {
    agents::touch_activity(conn, agents).await?;
    Ok(())
}

/// The common change (`working ⇄ idle`) in one statement, for the watcher's hot path.
pub async fn swap(
    conn: &mut PgConnection,
    agent_id: Uuid,
    to: AgentState,
    cause: &Cause,
) -> Result<Option<(String, AgentState)>, sqlx::Error> {
    agents::swap(conn, agent_id, to, cause).await
}

/// An agent whose pane is gone (or whose node stopped): its state changes with `event`, and a
/// task it left unfinished goes to a person, in one transaction. True when it changed.
pub async fn settle_gone(conn: &mut PgConnection, agent: &Agent, event: AgentEvent, reason: &str) -> Result<bool> {
    let cause = Cause { detail: Some(reason.to_owned()), ..Cause::from("reconciler") };
    let Some(Applied::Changed { .. }) = agents::apply(conn, agent.id, None, event, &cause).await? else {
        return Ok(false);
    };
    hand_task_to_a_person(conn, agent, reason).await?;
    Ok(true)
}

/// An agent that stopped mid-task leaves the task to a person (`assignee = human`, with its
/// event), so the work shows up where people look instead of waiting on a pane that is gone.
async fn hand_task_to_a_person(conn: &mut PgConnection, agent: &Agent, reason: &str) -> Result<()> {
    let Some(task_id) = agent.task_id else { return Ok(()) };
    let Some(task) = tasks::get(conn, task_id).await? else { return Ok(()) };
    if task.status.is_terminal() {
        return Ok(());
    }
    let edit = Edit { assignee: Some(Some("human".to_owned())), ..Edit::default() };
    // No expected version: the edit cannot lose a race, so the inner result is always Ok.
    let _edited = tasks::update_fields(conn, task_id, None, &edit).await?;
    let payload = serde_json::json!({"assignee": "human", "previous": agent.name, "reason": reason});
    events::record(conn, "task.assigned", &format!("task:{task_id}"), payload).await?;
    Ok(())
}

/// A window in the node's session that no agent owns (`agent.orphan_found`).
pub async fn report_orphan(conn: &mut PgConnection, node_id: &str, payload: serde_json::Value) -> Result<()> {
    events::record(conn, "agent.orphan_found", &format!("node:{node_id}"), payload).await?;
    Ok(())
}

/// This node is alive; answers the nodes that stopped heartbeating for `stale_after`.
pub async fn heartbeat(conn: &mut PgConnection, node_id: &str, stale_after: std::time::Duration) -> Result<Vec<Node>> {
    nodes::heartbeat(conn, node_id).await?;
    Ok(nodes::stale_nodes(conn, stale_after).await?)
}

/// A live agent of a node that stopped heartbeating: an unstarted claim goes back to the queue;
/// one with a pane (out of reach now) fails and leaves its task to a person.
pub async fn settle_on_stale_node(conn: &mut PgConnection, agent: &Agent, node: &Node) -> Result<()> {
    if agent.tmux_pane.is_none() {
        agents::release_claim(conn, agent.id, &node.id).await?;
    } else {
        settle_gone(conn, agent, AgentEvent::Fail, &format!("node {} stopped heartbeating", node.id)).await?;
    }
    Ok(())
}

/// A suspended agent whose usage limit reset goes back to `spawning`; true when it did.
pub async fn resume_after_limit(conn: &mut PgConnection, agent_id: Uuid) -> Result<bool> {
    let cause = Cause { detail: Some("usage limit reset".into()), ..Cause::from("worker") };
    let applied = agents::apply(conn, agent_id, Some(AgentState::Suspended), AgentEvent::Resume, &cause).await?;
    Ok(matches!(applied, Some(Applied::Changed { .. })))
}
