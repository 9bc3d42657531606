//! What a node's worker records about itself and the agents it runs: its registration and
//! heartbeat, claims, spawns (tokens, panes, team clones), the states it observes, and the
//! settling of agents whose panes or nodes are gone (resumed on their own when they were
//! interrupted mid-work, else their tasks handed to a person). Each step takes the worker's
//! connection or transaction, so what belongs together commits together.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::Result;
use crate::db::agents::{self, Agent, Cause};
use crate::db::messages;
use crate::db::nodes::{self, Node};
use crate::db::tasks::{self, Edit};
use crate::db::{events, teams, tokens, wishes};
use crate::domain::agent::{AgentEvent, AgentState};
use crate::domain::interruption;
use crate::domain::message::SWITCHYARD;

pub use crate::db::agents::Applied;
/// The connections the watcher keeps for its writes (a swap per agent at once).
pub use crate::db::spare_connections::SpareConnections;

/// The live agents this node runs, with their panes.
pub async fn live_on_node(conn: &mut PgConnection, node_id: &str) -> Result<Vec<Agent>> {
    Ok(agents::list_live_on_node(conn, node_id).await?)
}

/// This node's suspended agents whose usage limit has reset or whose wait has passed.
pub async fn limits_reset(conn: &mut PgConnection, node_id: &str) -> Result<Vec<Agent>> {
    Ok(agents::limits_reset(conn, node_id).await?)
}

/// The time and state of each agent's last hook, by agent id.
pub async fn last_hooks(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, (Option<DateTime<Utc>>, Option<AgentState>)>> {
    Ok(agents::last_hooks(conn, ids).await?)
}

/// Whether a usage limit the agent's screen shows is a new one: a resumed session draws the
/// limit it stopped at again (with a reset time now passed, read as tomorrow's), so only a limit
/// met after it worked again since it was resumed counts.
pub async fn limit_is_new(conn: &mut PgConnection, agent_id: Uuid) -> Result<bool> {
    let Some(agent) = agents::get(conn, agent_id).await? else { return Ok(false) };
    Ok(!agents::resumed_and_not_worked_since(conn, &agent.name).await?)
}

/// Whether mail waits for the agent (the mailbox's to type; a nudge would get in its way).
pub async fn has_mail(conn: &mut PgConnection, agent_id: Uuid) -> Result<bool> {
    Ok(messages::has_pending(conn, agent_id).await?)
}

/// The orphan panes this node reported in earlier runs: `(window, pane, name)`.
pub async fn orphans_reported(conn: &mut PgConnection, node_id: &str) -> Result<Vec<(String, String, String)>> {
    Ok(events::orphans_reported(conn, &format!("node:{node_id}")).await?)
}

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

/// The common change (`working ⇄ idle`) in one statement, for the watcher's hot path, while the
/// agent is still in `pane` (the pane read).
pub async fn swap(
    conn: &mut PgConnection,
    agent_id: Uuid,
    pane: &str,
    to: AgentState,
    cause: &Cause,
) -> Result<Option<(String, AgentState)>, sqlx::Error> {
    agents::swap(conn, agent_id, pane, to, cause).await
}

/// Whether the agent is still in `pane`, its row locked for the rest of the transaction if so: a
/// reading of a pane it has left (killed, then resumed into a new one) is not the agent's.
pub async fn still_in_pane(conn: &mut PgConnection, agent_id: Uuid, pane: &str) -> Result<bool> {
    Ok(agents::lock_in_pane(conn, agent_id, pane).await?)
}

/// An agent of this node whose pane vanished or died, settled in one transaction. Interrupted
/// mid-work (its work unreported, its provider able to resume): `suspended` until a growing wait
/// has passed, when the worker resumes it into its own session, with its work still its own and a
/// message queued that tells it to go on; after [`interruption::AUTO_RESUMES`] such resumes within
/// [`interruption::REMEMBERED`] it fails and its work goes to a person. Any other agent is
/// suspended (resumable) or fails, its task to a person, as [`settle_gone`] does. Answers the
/// state it reached, `None` when another writer changed it first.
pub async fn settle_vanished(
    conn: &mut PgConnection,
    agent: &Agent,
    resumable: bool,
    reason: &str,
) -> Result<Option<AgentState>> {
    if !(resumable && has_unreported_work(&mut *conn, agent).await?) {
        let (event, state) = if resumable {
            (AgentEvent::Suspend, AgentState::Suspended)
        } else {
            (AgentEvent::Fail, AgentState::Error)
        };
        return Ok(settle_gone(conn, agent, event, reason).await?.then_some(state));
    }
    let earlier = agents::interruptions_within(&mut *conn, &agent.name, interruption::REMEMBERED).await?;
    let Some(wait) = interruption::resume_wait(u32::try_from(earlier).unwrap_or(u32::MAX)) else {
        let reason = format!("{reason}, after {} resumes", interruption::AUTO_RESUMES);
        return Ok(settle_gone(conn, agent, AgentEvent::Fail, &reason).await?.then_some(AgentState::Error));
    };
    let cause = Cause {
        detail: Some(reason.to_owned()),
        signal: Some(agents::INTERRUPTED.to_owned()),
        suspended_until: Some(chrono::Utc::now() + wait),
        ..Cause::from("reconciler")
    };
    let Some(Applied::Changed { .. }) = agents::apply(&mut *conn, agent.id, None, AgentEvent::Suspend, &cause).await?
    else {
        return Ok(None);
    };
    tell_to_go_on(&mut *conn, agent, reason).await?;
    Ok(Some(AgentState::Suspended))
}

/// Queues the message that tells a suspended agent to go on with its work once it is resumed
/// (`why` it stopped), unless one waits already: told once, however many times it is resumed
/// before it reads it.
pub async fn tell_to_go_on(conn: &mut PgConnection, agent: &Agent, why: &str) -> Result<()> {
    let notice = interruption::go_on(why);
    let start = notice.split('(').next().unwrap_or_default();
    if !messages::has_pending_like(&mut *conn, agent.id, SWITCHYARD, start).await? {
        super::messages::tell(conn, agent, notice).await?;
    }
    Ok(())
}

/// Whether the agent still owes a report on its work: a task (a wish's group, a standalone task)
/// it is assigned that is unfinished and unreported, or a planner's, reviewer's or fixer's step
/// of a wish still going that was not concluded.
pub async fn has_unreported_work(conn: &mut PgConnection, agent: &Agent) -> Result<bool> {
    if agent.ready_for_cleanup {
        return Ok(false);
    }
    if let Some(task_id) = agent.task_id {
        let Some(task) = tasks::get(&mut *conn, task_id).await? else { return Ok(false) };
        let ours = task.assignee.as_deref().is_none_or(|a| a == agent.name);
        return Ok(ours && !task.status.is_terminal() && task.reported_at.is_none());
    }
    let Some(wish_id) = agent.wish_id else { return Ok(false) };
    let wish = wishes::by_ids(&mut *conn, &[wish_id]).await?;
    Ok(wish.first().is_some_and(|w| !w.status.is_terminal()))
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

/// A live agent of a node that stopped heartbeating, taken over in the caller's transaction (one
/// per agent). An unstarted claim goes back to the queue. One with a pane (out of reach now) is
/// marked lost (`agent.lost`) and redispatched as it stands — its name, task and branch — for
/// any live node to claim: suspended and resumed, the row locked while it is still on the lost
/// node, so two live nodes never both take it. The claimant makes its clone from its branch in
/// the project's repository (what it reported is kept) and, its session being out of reach
/// there, starts it afresh with its task told again ([`retell_task`]). A team's agent, whose
/// clone lives on the lost node, fails and leaves its task to a person. True when this call
/// took the agent.
pub async fn settle_on_stale_node(conn: &mut PgConnection, agent: &Agent, node: &Node) -> Result<bool> {
    if agent.tmux_pane.is_none() {
        return Ok(agents::release_claim(conn, agent.id, &node.id).await?);
    }
    if !agents::lock_on_node(conn, agent.id, &node.id).await? {
        return Ok(false);
    }
    let reason = format!("node {} stopped heartbeating", node.id);
    if agent.clone_mode == "team" {
        return settle_gone(conn, agent, AgentEvent::Fail, &reason).await;
    }
    let lost = Cause { detail: Some(format!("{reason}: the agent was lost with it")), ..Cause::from("reconciler") };
    let Some(Applied::Changed { .. }) = agents::apply(conn, agent.id, None, AgentEvent::Suspend, &lost).await? else {
        return Ok(false);
    };
    let again = Cause { detail: Some(format!("{reason}: redispatched to a live node")), ..Cause::from("reconciler") };
    agents::apply(conn, agent.id, Some(AgentState::Suspended), AgentEvent::Resume, &again).await?;
    let payload = serde_json::json!({"node_id": node.id, "reason": reason, "redispatched": true});
    events::record(conn, "agent.lost", &format!("agent:{}", agent.name), payload).await?;
    Ok(true)
}

/// An agent of ours started afresh in a clone other than the one its session ran in (taken over
/// from a lost node, or resumed on another one): its task is told again, with where its earlier
/// work is, since the new session knows nothing of it.
pub async fn retell_task(conn: &mut PgConnection, agent: &Agent) -> Result<()> {
    let Some(task) = agent.task.as_deref() else { return Ok(()) };
    let body = crate::domain::briefs::started_again(agent.branch.as_deref(), task);
    crate::app::messages::tell(conn, agent, body).await?;
    Ok(())
}

/// A suspended agent whose usage limit reset, or whose wait after an interruption passed, goes
/// back to `spawning` (to be resumed into its own session); true when it did.
pub async fn resume_after_limit(conn: &mut PgConnection, agent_id: Uuid) -> Result<bool> {
    let detail = "the time it was suspended until came (a usage limit reset, or the wait after an interruption)";
    let cause = Cause { detail: Some(detail.into()), ..Cause::from("worker") };
    let applied = agents::apply(conn, agent_id, Some(AgentState::Suspended), AgentEvent::Resume, &cause).await?;
    Ok(matches!(applied, Some(Applied::Changed { .. })))
}
