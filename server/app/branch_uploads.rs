//! An agent's branch reaching the project's repository (`PUT /agents/{name}/branch`; for a
//! project on a git remote, the remote, through this node's mirror): the
//! `switchyard group|fix|task done` commands send their clone's HEAD as a git bundle, since a
//! sandboxed agent cannot write the repository (and no agent is given it). It lands on the
//! agent's own branch only, as `git push` did: forced for a group's or a task's own branch (the
//! agent may have rewritten it), a fast-forward only for any other (a fix agent's wish branch,
//! which others' work is on); never the project's target branch, which moves through the merge
//! queue alone.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use serde::Serialize;

use crate::app::{agents as agents_app, Ctx, Error, FieldError, Result};
use crate::db::agents;
use crate::git::bundles::{self, Refused};

/// The largest bundle taken: a clone's new commits, or its whole history when the repository
/// lacks what they build on.
pub const MAX_BUNDLE: usize = 100 * 1024 * 1024;

/// Where the agent's branch points now.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"branch": "group/login-page/api", "commit": "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
    "previous": "9daeafb9864cf43055ae93beb0afd6c7d144bfa4", "forced": true}))]
pub struct BranchUpdate {
    pub branch: String,
    /// The commit it points at: the bundle's HEAD.
    pub commit: String,
    /// Where it pointed before; `null` for a new branch.
    pub previous: Option<String>,
    /// Whether the branch could be rewritten (a group's or task's own branch), or only fast-forwarded.
    pub forced: bool,
}

/// Points agent `name`'s branch at the HEAD of `bundle` (a git bundle's bytes).
#[tracing::instrument(skip_all, fields(agent = ?name, bytes = bundle.len()), err(level = "debug"))]
pub async fn receive(ctx: &Ctx, name: &str, bundle: &[u8]) -> Result<BranchUpdate> {
    let (agent, target) = {
        let mut conn = ctx.db.acquire().await?;
        let agent = agents::by_name(&mut conn, name).await?.ok_or_else(|| agents_app::not_found(name))?;
        let target = agents::project_target_branch(&mut conn, agent.project_id).await?;
        (agent, target)
    };
    let repo = super::repository::open(&ctx.db, &ctx.data_dir, agent.project_id).await?;
    let branch = agent.branch.clone().ok_or_else(|| {
        Error::conflict(format!("agent `{name}` has no branch of its own"), Some(agent.state.as_str()))
    })?;
    if branch == target {
        let why = format!("`{branch}` is the project's target branch: it moves through the merge queue only");
        return Err(Error::conflict(why, Some(agent.state.as_str())));
    }
    let force = agent.task_id.is_some();
    let file = BundleFile::write(bundle).map_err(|e| Error::Internal(anyhow::anyhow!("keeping the bundle: {e}")))?;
    let holding = format!("refs/switchyard/uploads/{}", uuid::Uuid::new_v4().simple());
    let fetched = bundles::fetch(repo.path(), repo.remote.as_ref(), &file.0, &branch, &holding, force)
        .await
        .map_err(|e| Error::Internal(anyhow::anyhow!("fetching agent `{name}`'s bundle into `{branch}`: {e}")))?;
    match fetched {
        Ok(moved) => Ok(BranchUpdate { branch, commit: moved.commit, previous: moved.previous, forced: force }),
        Err(Refused::Invalid(why)) => Err(Error::Invalid(vec![FieldError::new("bundle", why)])),
        Err(refused) => Err(Error::conflict(refused.to_string(), Some(agent.state.as_str()))),
    }
}

/// The bundle, kept while git reads it: owner-only, removed when dropped.
struct BundleFile(PathBuf);

impl BundleFile {
    fn write(bytes: &[u8]) -> std::io::Result<BundleFile> {
        let path = std::env::temp_dir().join(format!("switchyard-{}.bundle", uuid::Uuid::new_v4().simple()));
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
        let kept = BundleFile(path);
        file.write_all(bytes)?;
        Ok(kept)
    }
}

impl Drop for BundleFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
