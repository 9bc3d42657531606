//! Agents' and teams' clones: made where an agent's pane is spawned ([`workspace`]), with what
//! git must not see of it kept out ([`exclude`], [`write_excluded`]); and removed without losing
//! work: what removing it would lose is asked of git first (with no row locked), a clone holding
//! unmerged work is kept unless forced, and the directory goes only after the commit that forgets
//! it.

use std::path::{Path, PathBuf};

use sqlx::PgPool;

use super::{Error, Result};
use crate::db::agents::Agent;
use crate::feed::EventFeed;
use crate::git::clones::{self, UnmergedWork};

pub use crate::git::clones::{exclude, write_excluded};

/// What removing `clone` would lose (compared with `target` in the project's repository `repo`),
/// refused unless `force`. `owner` names whose clone it is in the refusal ("agent `fox`");
/// `state` is the owner's state.
pub async fn check_before_removing(
    clone: &Path,
    (repo, target): (&Path, &str),
    owner: &str,
    state: &str,
    force: bool,
) -> Result<Option<UnmergedWork>> {
    let work = match clones::unmerged_work(clone, repo, target).await {
        Ok(work) => work,
        Err(e) if !force => {
            return Err(Error::conflict(
                format!(
                "cannot tell whether {owner}'s clone holds unmerged work ({e}); pass force=true to remove it anyway"
            ),
                Some(state),
            ))
        }
        Err(_) => None,
    };
    match work {
        Some(work) if !force => Err(Error::conflict(
            format!(
                "{owner}'s clone {} holds work not merged into `{target}`: {}; merge or push it, or pass force=true",
                clone.display(),
                work.describe()
            ),
            Some(state),
        )),
        other => Ok(other),
    }
}

/// Removes a clone whose owner is gone (committed); false, with a warning, when it could not be.
/// Its work was checked before, so what is left is only a directory to delete.
pub async fn remove_after_commit(clone: &Path, owner: &str) -> bool {
    match clones::remove(clone).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(owner, clone = %clone.display(), error = %e, "removing a clone whose owner is gone");
            false
        }
    }
}

/// The directory the agent works in: its own clone on its branch, or the project's repository.
pub async fn workspace(db: &PgPool, feed: &EventFeed, data_dir: &Path, agent: &Agent) -> anyhow::Result<PathBuf> {
    match agent.clone_mode.as_str() {
        "agent" => {}
        // A team's members share its clone, which this node makes for the first of them.
        "team" => return team_clone(db, feed, data_dir, agent).await,
        _ if crate::git::remote::is_url(&agent.repo) => {
            anyhow::bail!(
                "the project's repository is on a remote ({}): its agents work in clones of their own",
                agent.repo
            )
        }
        _ => return Ok(PathBuf::from(&agent.repo)),
    }
    let dest = clones::clone_dir(data_dir, &agent.name);
    let branch = agent.branch.clone().unwrap_or_else(|| clones::default_branch(&agent.name));
    let (target, repo) = {
        let mut conn = db.acquire().await?;
        let target = crate::db::agents::project_target_branch(&mut conn, agent.project_id).await?;
        (target, super::repository::locate(&mut conn, data_dir, agent.project_id).await?)
    };
    // A project on a remote: the clone comes from this node's mirror, fetched now (with the
    // connection given back: the network may be slow).
    let repo = repo.fetched().await?;
    clones::make(repo.path(), &dest, &branch, &target).await?;
    Ok(dest)
}

/// The clone of the agent's team on this node (the node the team was pinned to when the
/// agent was claimed): made now for its first agent, and recorded once made. git runs with
/// no row locked.
async fn team_clone(db: &PgPool, feed: &EventFeed, data_dir: &Path, agent: &Agent) -> anyhow::Result<PathBuf> {
    let name = agent.team.as_deref().ok_or_else(|| anyhow::anyhow!("the agent's team was disbanded"))?;
    let node = agent.node_id.as_deref().ok_or_else(|| anyhow::anyhow!("the agent was not claimed"))?;
    let (team, repo) = {
        let mut conn = db.acquire().await?;
        let team = crate::db::teams::get(&mut conn, name).await?;
        (team, super::repository::locate(&mut conn, data_dir, agent.project_id).await?)
    };
    let team = team.ok_or_else(|| anyhow::anyhow!("team `{name}` was disbanded"))?;
    if team.node_id.as_deref().is_some_and(|pinned| pinned != node) {
        anyhow::bail!("team `{name}` runs on node `{}`", team.node_id.unwrap_or_default());
    }
    if let Some(path) = &team.clone_path {
        return Ok(PathBuf::from(path));
    }
    let dest = clones::team_clone_dir(data_dir, name);
    let repo = repo.fetched().await?;
    clones::make(repo.path(), &dest, &team.branch, &team.base_branch).await?;
    let mut tx = db.begin().await?;
    super::worker_records::record_team_clone(&mut tx, name, node, &dest.to_string_lossy()).await?;
    feed.commit(tx).await?;
    Ok(dest)
}
