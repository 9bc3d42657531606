//! Steps that start work: a planner for a draft, queueing an approved plan, starting a queued
//! wish (its branch made from the target branch), and an engineer for each ready group.

use super::{assign, Assignment, BATCH};
use crate::app::repository::{Mirrors, Repo};
use crate::app::wish_lifecycle::act;
use crate::app::{Ctx, Error, Result};
use crate::db::conductor::{self, Conducted, Due};
use crate::db::tasks::{self, Applied, Change, Edit};
use crate::db::wishes;
use crate::domain::agent_kind::{AgentKind, AgentRole};
use crate::domain::briefs;
use crate::domain::task::TaskEvent;
use crate::domain::wish::WishEvent;
use crate::git::branches;

/// A planner agent for each draft that needs one.
pub async fn planners(ctx: &Ctx) -> Result<usize> {
    let mut tx = ctx.db.begin().await?;
    let due = conductor::due(&mut tx, Due::Planner, BATCH).await?;
    let at_limit = conductor::providers_at_limit(&mut tx).await?;
    let mut started = 0;
    for c in &due {
        conductor::lock_project(&mut tx, c.wish.project_id).await?;
        if !has_room(&mut tx, c).await? {
            continue;
        }
        let Some(provider) = provider_for(&at_limit, c, None) else { continue };
        let brief = briefs::planner(&c.wish.title, &c.wish.description);
        let branch = format!("plan/{}", c.wish.slug);
        let a = Assignment {
            place: super::Place::wish(c),
            role: AgentRole::Planner,
            kind: AgentKind::Worker,
            provider,
            branch,
            task_id: None,
            brief,
        };
        assign(&mut tx, a).await?;
        started += 1;
    }
    ctx.feed.commit(tx).await?;
    Ok(started)
}

/// Queues planned wishes of projects whose plans need no approval.
pub async fn queue_planned(ctx: &Ctx) -> Result<usize> {
    let mut tx = ctx.db.begin().await?;
    let due = conductor::due(&mut tx, Due::Queue, BATCH).await?;
    for c in &due {
        act(&mut tx, &c.wish, WishEvent::Queue, None).await?;
    }
    ctx.feed.commit(tx).await?;
    Ok(due.len())
}

/// Starts queued wishes whose blockers have all merged, each with its integration branch
/// (`wish/<slug>` unless it was given one) made from the target branch. The branch is made
/// inside the transaction, so a started wish always has it (a crash before the commit leaves
/// a branch the next start reuses). A wish whose project's mirror is still to fetch starts in a
/// second pass, after the fetch ([`Mirrors`]).
pub async fn start_queued(ctx: &Ctx) -> Result<usize> {
    let mut mirrors = Mirrors::default();
    let mut started = start_queued_with(ctx, &mut mirrors).await?;
    if mirrors.fetch_noted().await {
        started += start_queued_with(ctx, &mut mirrors).await?;
    }
    Ok(started)
}

async fn start_queued_with(ctx: &Ctx, mirrors: &mut Mirrors) -> Result<usize> {
    let mut tx = ctx.db.begin().await?;
    let due = conductor::due(&mut tx, Due::Start, BATCH).await?;
    let mut started = 0;
    for c in &due {
        let branch = c.wish.branch.clone().unwrap_or_else(|| branches::wish_branch(&c.wish.slug));
        let made = match mirrors.ready(&mut tx, &ctx.data_dir, c.wish.project_id).await {
            Ok(Some(local)) => wish_branch(c, &local, &branch).await,
            Ok(None) => continue,
            Err(e) => Err(e.to_string()),
        };
        if let Err(why) = made {
            let reason = format!("cannot make the wish's branch `{branch}`: {why}");
            crate::app::wish_lifecycle::to_a_person(&mut tx, &c.wish, &reason).await?;
            continue;
        }
        let wish = act(&mut tx, &c.wish, WishEvent::Start, None).await?;
        conductor::set_branch(&mut tx, wish.id, &branch).await?;
        started += 1;
    }
    ctx.feed.commit(tx).await?;
    Ok(started)
}

/// The target branch's head and the wish branch's, the latter made from the former when it does
/// not exist yet: one git run when it does (a dispatch step asks for each wish it serves).
pub(super) async fn wish_branch(
    c: &Conducted,
    local: &Repo,
    branch: &str,
) -> std::result::Result<(String, String), String> {
    let [target, wish] =
        branches::heads(local.path(), [c.target_branch.as_str(), branch]).await.map_err(|e| e.to_string())?;
    let target = target.ok_or_else(|| format!("the target branch `{}` does not exist", c.target_branch))?;
    let wish = match wish {
        Some(wish) => wish,
        None => local.create_if_missing(branch, &target).await.map_err(|e| e.to_string())?,
    };
    Ok((target, wish))
}

/// How many registered agents may wait for a worker to make their pane before the conductor
/// dispatches more groups. The workers make panes a few at a time; groups dispatched faster than
/// that only wait as agents (each one more to watch and stop), and in the benchmark's 200
/// chains at once they overloaded the machine (a group every 750 ms instead of 150). A group
/// that waits stays `ready` and goes with the next tick, once panes are made.
pub const SPAWN_BACKLOG: i64 = 16;

/// An engineer for each ready group nobody works on, up to each project's `max_agents` and while
/// fewer than [`SPAWN_BACKLOG`] agents wait for a pane. The
/// group's branch is made from the wish's branch as it stands now — after the merges of the
/// groups it depends on, and of the target branch when it moved and merges clean
/// ([`super::catch_up`]) — inside the transaction that assigns the agent, so the worker that
/// claims the agent always finds it. A group whose project's mirror is still to fetch goes in a
/// second pass, after the fetch ([`Mirrors`]).
pub async fn groups(ctx: &Ctx) -> Result<usize> {
    let mut mirrors = Mirrors::default();
    let mut dispatched = groups_with(ctx, &mut mirrors).await?;
    if mirrors.fetch_noted().await {
        dispatched += groups_with(ctx, &mut mirrors).await?;
    }
    Ok(dispatched)
}

async fn groups_with(ctx: &Ctx, mirrors: &mut Mirrors) -> Result<usize> {
    let mut tx = ctx.db.begin().await?;
    let ready = conductor::ready_groups(&mut tx, BATCH).await?;
    let at_limit = conductor::providers_at_limit(&mut tx).await?;
    let mut heads: std::collections::HashMap<uuid::Uuid, String> = std::collections::HashMap::new();
    // Each project's repository located once per step.
    let mut repos: std::collections::HashMap<uuid::Uuid, Repo> = std::collections::HashMap::new();
    let mut room = SPAWN_BACKLOG - conductor::agents_spawning(&mut tx).await?;
    let mut dispatched = 0;
    for group in ready {
        if room <= 0 {
            break;
        }
        let (c, task) = (&group.conducted, group.task);
        conductor::lock_project(&mut tx, c.wish.project_id).await?;
        if !has_room(&mut tx, c).await? {
            continue;
        }
        let Some(provider) = provider_for(&at_limit, c, task.provider.as_deref()) else { continue };
        let Some(wish_branch_name) = c.wish.branch.clone() else { continue };
        let local = match repos.get(&c.wish.project_id) {
            Some(local) => local.clone(),
            None => match mirrors.ready(&mut tx, &ctx.data_dir, c.wish.project_id).await {
                Ok(Some(local)) => repos.entry(c.wish.project_id).or_insert(local).clone(),
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(wish = %c.wish.slug, error = %e, "cannot reach the project's repository");
                    continue;
                }
            },
        };
        // One read of the wish's branch per step: the groups of one wish in this batch start
        // from the same commit.
        let base = match heads.get(&c.wish.id) {
            Some(base) => base.clone(),
            None => match super::catch_up::starting_point(&mut tx, c, &local, &wish_branch_name).await {
                Ok(base) => heads.entry(c.wish.id).or_insert(base).clone(),
                Err(why) => {
                    tracing::warn!(wish = %c.wish.slug, error = %why, "cannot read the wish's branch");
                    continue;
                }
            },
        };
        let (task_id, key) = (task.id, task.group_key.clone().unwrap_or_default());
        let branch = branches::group_branch(&c.wish.slug, &key);
        local.reset(&branch, &base).await.map_err(|e| Error::Internal(e.into()))?;
        let dependencies = wishes::dependency_results(&mut tx, task_id).await?;
        let brief = briefs::engineer(&c.wish.title, &c.wish.description, &key, &task.goal, &branch, &dependencies);
        let a = Assignment {
            place: super::Place::wish(c),
            role: AgentRole::Engineer,
            kind: AgentKind::Worker,
            provider,
            branch: branch.clone(),
            task_id: Some(task.id),
            brief,
        };
        let agent = assign(&mut tx, a).await?;
        match tasks::apply_to(&mut tx, task, TaskEvent::Start, &Change::default()).await? {
            Some(Applied::Done(..)) => {}
            // Locked and read as ready in this transaction: cannot happen; undo all the same.
            _ => return Err(Error::Internal(anyhow::anyhow!("a locked ready group could not start"))),
        }
        let edit = Edit { assignee: Some(Some(agent.name.clone())), ..Edit::default() };
        // No expected version: nobody else can hold the row this transaction locked.
        let _edited = tasks::update_fields(&mut tx, task_id, None, &edit).await?;
        conductor::record_dispatch(&mut tx, task_id, &branch, &base).await?;
        let payload = serde_json::json!({"assignee": agent.name, "wish": c.wish.slug, "group": key, "branch": branch});
        crate::db::events::record(&mut tx, "task.assigned", &format!("task:{task_id}"), payload).await?;
        dispatched += 1;
        room -= 1;
    }
    ctx.feed.commit(tx).await?;
    Ok(dispatched)
}

/// Whether the project may start one more agent (its row is locked by the caller).
async fn has_room(conn: &mut sqlx::PgConnection, c: &Conducted) -> Result<bool> {
    let at_work = conductor::agents_at_work(conn, c.wish.project_id).await?;
    Ok(at_work < i64::from(c.config.max_agents))
}

/// The provider for a new agent: the group's, else the wish's, else the project's — unless it is
/// held at a usage limit. A group that says `any` takes the project's provider or the first of
/// its fallbacks that is not at a limit. `None`: wait until the limit resets.
/// `at_limit` is read once per step, not once per group.
fn provider_for(
    at_limit: &[(String, chrono::DateTime<chrono::Utc>)],
    c: &Conducted,
    group: Option<&str>,
) -> Option<String> {
    let limited = |name: &str| at_limit.iter().any(|(p, _)| p == name);
    let chosen = group.or(c.wish.provider.as_deref());
    c.config.providers_for(chosen).into_iter().find(|p| !limited(p)).map(str::to_owned)
}
