//! Merging a group reported done into its wish's branch: in memory, never a fast-forward, one
//! integration at a time per wish (the wish's row lock), the branch moved by compare-and-swap. A merge
//! that conflicts withdraws the report and tells the group's agent which files conflict. Before
//! merging, git is asked whether the group's commit is already in the wish's branch (a crash
//! after the swap, before the commit): then the group is only completed, never merged twice.

use std::path::Path;

use crate::app::groups::act_in;
use crate::app::messages::tell;
use crate::app::repository::Mirrors;
use crate::app::{Ctx, Error, Result};
use crate::db::conductor;
use crate::db::stalled_steps;
use crate::db::tasks::{Change, Task};
use crate::db::{agents, events, wishes};
use crate::domain::briefs;
use crate::domain::task::TaskEvent;
use crate::git::branches::{self, Merge};

/// What integrating one reported group did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Integration {
    /// Merged into the wish's branch (or found already merged there).
    Merged { group: String, merge_commit: String },
    /// The merge conflicts; the group's agent was told the files.
    Conflict { group: String, files: Vec<String> },
}

/// Integrates every reported group of wishes no other node is integrating. A wish whose
/// integration git refuses (a ref it cannot lock, a repository gone) is recorded as stalled, in
/// git's words, once as an event, and tried again after a growing wait ([`stalled_steps`]); the
/// other wishes go on.
pub async fn pending(ctx: &Ctx) -> Result<usize> {
    let due = {
        let mut conn = ctx.db.acquire().await?;
        conductor::wishes_to_integrate(&mut conn, super::BATCH).await?
    };
    let mut merged = 0;
    for wish_id in due {
        match wish(ctx, wish_id).await {
            Ok(done) => merged += done.iter().filter(|i| matches!(i, Integration::Merged { .. })).count(),
            Err(Error::Internal(e)) => failing(ctx, wish_id, &format!("{e:#}")).await?,
            Err(e) => return Err(e),
        }
    }
    Ok(merged)
}

async fn failing(ctx: &Ctx, wish_id: uuid::Uuid, error: &str) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    let (stalled, first) =
        stalled_steps::failed(&mut tx, &stalled_steps::wish_integration(wish_id), "integrate", error).await?;
    if !first {
        tracing::debug!(wish = %wish_id, error, attempts = stalled.attempts, "integrating reported groups failed again");
    } else {
        tracing::warn!(wish = %wish_id, error, "integrating reported groups failed; tried again after a wait");
        if let Some(wish) = wishes::by_ids(&mut tx, &[wish_id]).await?.pop() {
            let payload = serde_json::json!({"step": stalled.step, "error": stalled.error});
            events::record(&mut tx, "wish.step_failing", &wishes::subject(&wish), payload).await?;
        }
    }
    ctx.feed.commit(tx).await?;
    Ok(())
}

/// An integration that failed before went through: its record goes, with an event, in the
/// integration's own transaction.
async fn recovered(conn: &mut sqlx::PgConnection, wish: &wishes::Wish) -> Result<()> {
    if let Some(stalled) = stalled_steps::succeeded(&mut *conn, &stalled_steps::wish_integration(wish.id)).await? {
        let payload = serde_json::json!({"step": stalled.step, "attempts": stalled.attempts, "since": stalled.since});
        events::record(conn, "wish.step_recovered", &wishes::subject(wish), payload).await?;
    }
    Ok(())
}

/// Integrates the wish's reported groups, oldest report first, in one transaction holding the
/// wish's row lock. Empty when another node holds it (it integrates them).
///
/// The groups are merged one onto the other in memory, and the wish's branch moves once, by
/// compare-and-swap from where it was read, to the last merge: git runs twice per group and
/// twice per batch, where a merge moved the branch each time. A swap that fails (the branch moved
/// meanwhile) undoes the batch; the next tick tries again. A project's mirror is fetched before
/// the transaction, not in it ([`Mirrors`]).
pub async fn wish(ctx: &Ctx, wish_id: uuid::Uuid) -> Result<Vec<Integration>> {
    let mut mirrors = Mirrors::default();
    let done = wish_with(ctx, wish_id, &mut mirrors).await?;
    if mirrors.fetch_noted().await {
        return wish_with(ctx, wish_id, &mut mirrors).await;
    }
    Ok(done)
}

async fn wish_with(ctx: &Ctx, wish_id: uuid::Uuid, mirrors: &mut Mirrors) -> Result<Vec<Integration>> {
    let mut tx = ctx.db.begin().await?;
    let Some(c) = conductor::lock_for_integration(&mut tx, wish_id).await? else { return Ok(Vec::new()) };
    let Some(branch) = c.wish.branch.clone() else { return Ok(Vec::new()) };
    let groups = conductor::reported_groups(&mut tx, wish_id).await?;
    if groups.is_empty() {
        return Ok(Vec::new());
    }
    let Some(local) = mirrors.ready(&mut tx, &ctx.data_dir, c.wish.project_id).await? else { return Ok(Vec::new()) };
    let repo = local.path();
    let git = |e: crate::git::GitError| Error::Internal(anyhow::anyhow!("integrating into `{branch}`: {e}"));
    let (start, tree) = branches::head_and_tree(repo, &branch)
        .await
        .map_err(git)?
        .ok_or_else(|| Error::Internal(anyhow::anyhow!("`{branch}` is gone")))?;
    let mut wish_head = Head { commit: start.clone(), tree };
    // Every merge first, then the rows: the rows this writes (each group, its dependents, its
    // agent) stay locked until the commit, and others wait on them (a worker recording the
    // agent's state), so git does not run while they are held.
    let mut merges = Vec::with_capacity(groups.len());
    for group in groups {
        let merge = merge_group(repo, &mut wish_head, &c.wish.slug, &group).await.map_err(git)?;
        merges.push((group, merge));
    }
    // A merged group's branch is spent (its work is in the wish's branch, and its merge commit
    // names it): it goes with the move, unless the project keeps merged branches. Deleted only
    // at the commit that merged, so one pushed to since keeps its new work.
    let keep = crate::db::merge_queue::settings::get(&mut tx, c.wish.project_id).await?.keep_branches;
    let spent: Vec<(String, String)> = merges
        .iter()
        .filter(|(_, merge)| !keep && matches!(merge, Merge::Clean(_)))
        .filter_map(|(group, _)| Some((group.branch.clone()?, group.head_commit.clone()?)))
        .collect();
    let mut done = Vec::new();
    for (group, merge) in merges {
        let key = group.group_key.clone().unwrap_or_default();
        match merge {
            Merge::Clean(merge_commit) => {
                conductor::record_merge_commit(&mut tx, group.id, &merge_commit).await?;
                let change = Change { result: group.result.clone(), ..Change::default() };
                act_in(&mut tx, &c.wish.slug, &key, TaskEvent::Complete, change).await?;
                if let Some(agent) = assigned_agent(&mut tx, &group).await? {
                    conductor::conclude(&mut tx, agent.id).await?;
                }
                done.push(Integration::Merged { group: key, merge_commit });
            }
            Merge::Conflicts(files) => {
                conductor::clear_report(&mut tx, group.id).await?;
                let payload = serde_json::json!({"wish": c.wish.slug, "group": key, "files": files});
                events::record(&mut tx, "group.conflict", &format!("task:{}", group.id), payload).await?;
                if let Some(agent) = assigned_agent(&mut tx, &group).await? {
                    tell(&mut tx, &agent, briefs::conflict(&branch, &files)).await?;
                }
                done.push(Integration::Conflict { group: key, files });
            }
        }
    }
    let reason = format!("switchyard: integrate into {branch}");
    // For a project on a remote, the wish's branch moves there first (a push with a lease).
    if wish_head.commit == start {
        local.delete_branches(&spent).await;
    } else if !local.move_and_delete(&branch, &wish_head.commit, &start, &reason, &spent).await.map_err(git)? {
        // The wish's branch moved (the swap alone fails, undoing the batch), or a spent branch
        // moved or is gone (a person deleted it): the swap alone, then what can go.
        local.compare_and_swap(&branch, &wish_head.commit, &start).await.map_err(git)?;
        local.delete_branches(&spent).await;
    }
    recovered(&mut tx, &c.wish).await?;
    ctx.feed.commit(tx).await?;
    Ok(done)
}

/// Where the wish's branch is as the batch merges into it: a commit and its tree.
struct Head {
    commit: String,
    tree: String,
}

/// Merges the group's reported commit onto `wish_head` in memory and moves `wish_head` to the
/// merge. A commit already in the branch (a crash after the swap, before the transaction
/// committed) is not merged again: merging an ancestor gives the branch's own tree, and only then
/// is git asked whether it is one.
async fn merge_group(
    repo: &Path,
    wish_head: &mut Head,
    slug: &str,
    group: &Task,
) -> std::result::Result<Merge, crate::git::GitError> {
    let missing =
        || crate::git::GitError::Failed { args: "integrate".into(), stderr: "a report without a commit".into() };
    let head = group.head_commit.as_deref().ok_or_else(missing)?;
    let tree = match branches::merge_tree(repo, &wish_head.commit, head).await? {
        Ok(tree) => tree,
        Err(files) => return Ok(Merge::Conflicts(files)),
    };
    if tree == wish_head.tree && branches::is_ancestor(repo, head, &wish_head.commit).await? {
        return Ok(Merge::Clean(wish_head.commit.clone()));
    }
    let key = group.group_key.as_deref().unwrap_or_default();
    let message = format!("Merge group {key} of wish {slug}\n\n{}", group.result.as_deref().unwrap_or(""));
    let commit =
        branches::commit_merge(repo, &tree, &wish_head.commit, head, message.trim_end(), branches::SWITCHYARD).await?;
    *wish_head = Head { commit: commit.clone(), tree };
    Ok(Merge::Clean(commit))
}

/// The agent the group is assigned to, when that is an agent (not `human`).
async fn assigned_agent(conn: &mut sqlx::PgConnection, group: &Task) -> Result<Option<agents::Agent>> {
    match group.assignee.as_deref() {
        Some(name) => Ok(agents::by_name(conn, name).await?.filter(|a| a.task_id == Some(group.id))),
        None => Ok(None),
    }
}
