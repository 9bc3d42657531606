//! When the conductor stops and asks a person: an agent that ended, got stuck
//! (`max_nudges`) or said it is blocked before its step concluded leaves the step to `human` —
//! a group's task, or the wish for a planner's, reviewer's or fixer's step. The wish keeps its
//! state; the overview lists what waits on a person with the reason. Concluded agents and those of
//! a cancelled wish are stopped, those of a held wish parked (suspended), and suspended ones of a
//! wish that ended are finished with their waiting mail cancelled.

use crate::app::wish_lifecycle::{give_up, HUMAN};
use crate::app::{agent_panes, Ctx, Result};
use crate::db::agents::{self, Agent, Cause};
use crate::db::tasks;
use crate::db::wishes;
use crate::db::{conductor, events, messages};
use crate::domain::agent::{AgentEvent, AgentState};

/// Hands the steps of conductor agents that ended without concluding them to a person.
pub async fn abandoned(ctx: &Ctx) -> Result<usize> {
    let mut tx = ctx.db.begin().await?;
    let agents = conductor::abandoned(&mut tx, super::BATCH).await?;
    for agent in &agents {
        let why = agent.failure_reason.as_deref().unwrap_or("no reason recorded");
        let reason = format!("agent `{}` ended ({}) before reporting: {why}", agent.name, agent.state);
        give_up(&mut tx, agent, &reason).await?;
    }
    ctx.feed.commit(tx).await?;
    Ok(agents.len())
}

/// Stops concluded agents (and those of cancelled wishes) that are still live; their windows
/// close where they run.
pub async fn stop_concluded(ctx: &Ctx) -> Result<usize> {
    let agents = {
        let mut conn = ctx.db.acquire().await?;
        conductor::concluded_live(&mut conn, super::BATCH).await?
    };
    Ok(stop_here(ctx, agents, AgentEvent::Finish, "its step is done or its wish ended").await)
}

/// Parks the live agents of held wishes: suspended, their windows closed and their sessions
/// kept, so nothing of a held wish waits on a person; releasing the wish resumes them.
pub async fn park_held(ctx: &Ctx) -> Result<usize> {
    let agents = {
        let mut conn = ctx.db.acquire().await?;
        conductor::live_of_held(&mut conn, super::BATCH).await?
    };
    Ok(stop_here(ctx, agents, AgentEvent::Suspend, "its wish is on hold").await)
}

/// Applies `event` to those of `agents` this node runs and closes their windows (another node's
/// conductor stops its own); how many it stopped.
async fn stop_here(ctx: &Ctx, agents: Vec<Agent>, event: AgentEvent, reason: &str) -> usize {
    let mut stopped = 0;
    for agent in agents {
        if agent.node_id.as_deref().is_some_and(|node| node != ctx.node.node_id) {
            continue;
        }
        match agent_panes::stop(ctx, &agent.name, event, reason).await {
            Ok(_) => stopped += 1,
            Err(e) => tracing::debug!(agent = %agent.name, error = %e, "stopping an agent"),
        }
    }
    stopped
}

/// Finishes the suspended agents of wishes that merged or were cancelled (those a redispatch
/// replaced, or suspended when the wish ended): nothing will resume them, so they are `done`,
/// concluded, and the messages still waiting for them (their briefs, a notice to go on) are
/// cancelled rather than left pending for ever. They have no pane to close.
pub async fn retire_suspended(ctx: &Ctx) -> Result<usize> {
    let mut tx = ctx.db.begin().await?;
    let agents = conductor::suspended_of_ended_wishes(&mut tx, super::BATCH).await?;
    let cause = Cause { detail: Some("its wish ended".to_owned()), ..Cause::from("conductor") };
    for agent in &agents {
        agents::apply(&mut tx, agent.id, Some(AgentState::Suspended), AgentEvent::Finish, &cause).await?;
        conductor::conclude(&mut tx, agent.id).await?;
        messages::cancel_pending(&mut tx, agent.id, "its agent stopped: its wish ended").await?;
    }
    ctx.feed.commit(tx).await?;
    Ok(agents.len())
}

/// A person's retry of a group that was handed to them (or whose agent they gave up on): the
/// group goes back to `ready` and the conductor dispatches a new agent from the wish's branch
/// as it stands.
#[tracing::instrument(skip_all, fields(slug = ?slug, key = ?key), err(level = "debug"))]
pub async fn redispatch(ctx: &Ctx, slug: &str, key: &str) -> Result<crate::app::wish_lifecycle::WishDetail> {
    let mut tx = ctx.db.begin().await?;
    let wish = crate::app::wish_lifecycle::find(&mut tx, slug).await?;
    if wish.status != crate::domain::wish::WishStatus::Executing {
        let why = format!("the wish is {}; its groups are dispatched only while it is executing", wish.status);
        return Err(crate::app::Error::conflict(why, Some(wish.status.as_str())));
    }
    let task_id = wishes::group_task(&mut tx, wish.id, key)
        .await?
        .ok_or_else(|| crate::app::Error::NotFound(format!("wish `{slug}` has no group `{key}`")))?;
    let before = tasks::get(&mut tx, task_id).await?;
    // The group's provider may have been changed since its plan was checked.
    if let Some(named) = before.as_ref().and_then(|t| t.provider.as_deref()) {
        crate::app::wish_lifecycle::confined_group(&mut tx, &ctx.providers.current(), &wish, key, named).await?;
    }
    let task = conductor::requeue_group(&mut tx, task_id).await?.ok_or_else(|| {
        let status = before.as_ref().map(|t| t.status.as_str()).unwrap_or("gone");
        crate::app::Error::conflict(
            format!("only a started group can be dispatched again; this one is {status}"),
            Some(status),
        )
    })?;
    if let Some(previous) = before.and_then(|t| t.assignee).filter(|a| a != HUMAN) {
        if let Some(agent) = crate::db::agents::by_name(&mut tx, &previous).await? {
            conductor::conclude(&mut tx, agent.id).await?;
        }
    }
    let payload = serde_json::json!({"wish": slug, "group": key});
    events::record(&mut tx, "task.redispatched", &format!("task:{}", task.id), payload).await?;
    let detail = crate::app::wish_lifecycle::detail(&mut tx, wish).await?;
    ctx.feed.commit(tx).await?;
    Ok(detail)
}

/// A person hands a wish's step back to the conductor (after fixing what stopped it): the
/// planner, reviewer or fixer step runs again with a new agent.
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn hand_back(ctx: &Ctx, slug: &str) -> Result<crate::app::wish_lifecycle::WishDetail> {
    let mut tx = ctx.db.begin().await?;
    let wish = crate::app::wish_lifecycle::find(&mut tx, slug).await?;
    if wish.assignee.is_none() {
        return Err(crate::app::Error::conflict("the wish is not waiting for a person", Some(wish.status.as_str())));
    }
    let wish = conductor::set_wish_assignee(&mut tx, wish.id, None, None).await?;
    let payload = serde_json::json!({"slug": wish.slug, "status": wish.status, "phase": wish.phase});
    events::record(&mut tx, "wish.handed_back", &wishes::subject(&wish), payload).await?;
    let detail = crate::app::wish_lifecycle::detail(&mut tx, wish).await?;
    ctx.feed.commit(tx).await?;
    Ok(detail)
}

/// Removes this node's clones of concluded agents once their wish merged or was cancelled (a
/// project with `keep_clones` keeps them): forgotten in the database first, then deleted.
pub async fn remove_clones(ctx: &Ctx) -> Result<usize> {
    let clones = {
        let mut conn = ctx.db.acquire().await?;
        conductor::clones_to_remove(&mut conn, &ctx.node.node_id, super::BATCH).await?
    };
    let mut removed = 0;
    for (id, name, path) in clones {
        let mut tx = ctx.db.begin().await?;
        if !conductor::forget_clone(&mut tx, id, &name, &path).await? {
            continue;
        }
        ctx.feed.commit(tx).await?;
        if crate::app::clones::remove_after_commit(std::path::Path::new(&path), &name).await {
            removed += 1;
        }
    }
    Ok(removed)
}
