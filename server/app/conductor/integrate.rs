//! Merging a group reported done into its wish's branch: in memory, never a fast-forward, one
//! merge at a time per wish (the wish's row lock), the branch moved by compare-and-swap. A merge
//! that conflicts withdraws the report and tells the group's agent which files conflict. Before
//! merging, git is asked whether the group's commit is already in the wish's branch (a crash
//! after the swap, before the commit): then the group is only completed, never merged twice.

use std::path::Path;

use super::{briefs, tell};
use crate::app::groups::act_in;
use crate::app::{Ctx, Error, Result};
use crate::db::conductor;
use crate::db::tasks::{Change, Task};
use crate::db::{agents, events};
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

/// Integrates every reported group of wishes no other node is integrating.
pub async fn pending(ctx: &Ctx) -> Result<usize> {
    let wish_ids = {
        let mut conn = ctx.db.acquire().await?;
        conductor::wishes_to_integrate(&mut conn, super::BATCH).await?
    };
    let mut merged = 0;
    for wish_id in wish_ids {
        merged += wish(ctx, wish_id).await?.iter().filter(|i| matches!(i, Integration::Merged { .. })).count();
    }
    Ok(merged)
}

/// Integrates the wish's reported groups, oldest report first, in one transaction holding the
/// wish's row lock. Empty when another node holds it (it integrates them).
pub async fn wish(ctx: &Ctx, wish_id: uuid::Uuid) -> Result<Vec<Integration>> {
    let mut tx = ctx.db.begin().await?;
    let Some(c) = conductor::lock_for_integration(&mut tx, wish_id).await? else { return Ok(Vec::new()) };
    let Some(branch) = c.wish.branch.clone() else { return Ok(Vec::new()) };
    let repo = Path::new(&c.repo_path);
    let mut done = Vec::new();
    for group in conductor::reported_groups(&mut tx, wish_id).await? {
        let key = group.group_key.clone().unwrap_or_default();
        match merge_group(repo, &branch, &c.wish.slug, &group).await? {
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
    ctx.feed.commit(tx).await?;
    Ok(done)
}

/// Merges the group's reported commit into the wish's branch and swaps the branch to the merge;
/// a commit already in the branch is not merged again.
async fn merge_group(repo: &Path, branch: &str, slug: &str, group: &Task) -> Result<Merge> {
    let git = |e: crate::git::GitError| Error::Internal(anyhow::anyhow!("integrating into `{branch}`: {e}"));
    let head =
        group.head_commit.as_deref().ok_or_else(|| Error::Internal(anyhow::anyhow!("a report without a commit")))?;
    let wish_head = branches::head(repo, branch)
        .await
        .map_err(git)?
        .ok_or_else(|| Error::Internal(anyhow::anyhow!("`{branch}` is gone")))?;
    if branches::is_ancestor(repo, head, &wish_head).await.map_err(git)? {
        return Ok(Merge::Clean(wish_head));
    }
    let key = group.group_key.as_deref().unwrap_or_default();
    let message = format!("Merge group {key} of wish {slug}\n\n{}", group.result.as_deref().unwrap_or(""));
    let merged = branches::merge(repo, &wish_head, head, message.trim_end()).await.map_err(git)?;
    if let Merge::Clean(commit) = &merged {
        branches::compare_and_swap(repo, branch, commit, &wish_head).await.map_err(git)?;
    }
    Ok(merged)
}

/// The agent the group is assigned to, when that is an agent (not `human`).
async fn assigned_agent(conn: &mut sqlx::PgConnection, group: &Task) -> Result<Option<agents::Agent>> {
    match group.assignee.as_deref() {
        Some(name) => Ok(agents::by_name(conn, name).await?.filter(|a| a.task_id == Some(group.id))),
        None => Ok(None),
    }
}
