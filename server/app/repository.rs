//! A project's repository as this node works on it: its `repo_path`, or — for a project on a git
//! remote (`repo_url`) — this node's own mirror of the remote, fetched before it is read
//! ([`open`]). A branch of a project on a remote moves on the remote first, by a push with a lease,
//! and in the mirror only once the remote took it ([`Repo::compare_and_swap`] and its kin): a
//! refused push is a branch someone else moved, which the caller reads again and retries from —
//! never forced. The merge queue's target is pushed the same way ([`publish_target`]), and for a
//! `repo_path` project to its `push_remote` (`origin` by default, when the repository has one).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::db::projects;
use crate::git::remote::{self, Pushed, Remote, Update};
use crate::git::{branches, checked_out, merge, GitError};

/// A project's repository on this node.
#[derive(Debug, Clone)]
pub struct Repo {
    /// Where git runs: the project's `repo_path`, or this node's mirror of its remote.
    pub path: PathBuf,
    /// The remote whose mirror `path` is (`None` for a `repo_path` project).
    pub remote: Option<Remote>,
}

/// The directory git works in for a project recorded at `location` (its `repo_path`, or its
/// `repo_url`, as an agent's `repo` records it), without fetching anything.
pub fn local_dir(data_dir: &Path, location: &str) -> PathBuf {
    match remote::is_url(location) {
        true => remote::mirror_dir(data_dir, location),
        false => PathBuf::from(location),
    }
}

/// The project's repository on this node, its mirror fetched first when it is on a remote. It
/// takes the pool, not a connection: the one it reads the project on goes back before the fetch,
/// so the caller must hold none (a step in a transaction uses [`Mirrors`]).
pub async fn open(db: &PgPool, data_dir: &Path, project_id: Uuid) -> crate::app::Result<Repo> {
    let located = locate(&mut *db.acquire().await?, data_dir, project_id).await?;
    located.fetched().await
}

/// Projects' repositories for a step that works in one transaction, which must not be held
/// while a mirror is fetched over the network. In the transaction [`Mirrors::ready`] gives the
/// repositories git can use at once — a `repo_path` project's, or a mirror fetched before the
/// transaction began — and notes the others, whose work the step leaves; after its commit
/// [`Mirrors::fetch_noted`] fetches those with no connection held, and the step runs again.
#[derive(Default)]
pub struct Mirrors {
    /// Fetched this step, or why not.
    fetched: HashMap<Uuid, Result<Repo, String>>,
    noted: Vec<(Uuid, Repo)>,
}

impl Mirrors {
    /// The project's repository if git can use it now (an error if its fetch failed); `None`
    /// when its mirror is still to fetch: noted, the step passes over what needs it.
    pub async fn ready(
        &mut self,
        conn: &mut PgConnection,
        data_dir: &Path,
        project_id: Uuid,
    ) -> crate::app::Result<Option<Repo>> {
        if let Some(fetched) = self.fetched.get(&project_id) {
            return fetched.clone().map(Some).map_err(|e| crate::app::Error::Internal(anyhow::anyhow!(e)));
        }
        let repo = locate(conn, data_dir, project_id).await?;
        if repo.remote.is_none() {
            return Ok(Some(repo));
        }
        if !self.noted.iter().any(|(noted, _)| *noted == project_id) {
            self.noted.push((project_id, repo));
        }
        Ok(None)
    }

    /// Fetches the mirrors noted since the last call (the caller holds no connection); true when
    /// there were any, and the step runs again to use them.
    pub async fn fetch_noted(&mut self) -> bool {
        let noted = std::mem::take(&mut self.noted);
        let any = !noted.is_empty();
        for (project, repo) in noted {
            self.fetched.insert(project, repo.fetched().await.map_err(|e| format!("{e:#}")));
        }
        any
    }
}

/// The project's repository on this node as recorded, nothing fetched yet: the caller gives its
/// connection back before [`Repo::fetched`] talks to the network.
pub async fn locate(conn: &mut PgConnection, data_dir: &Path, project_id: Uuid) -> crate::app::Result<Repo> {
    let found = projects::repository(conn, project_id).await?;
    let Some(url) = found.repo_url else { return Ok(Repo { path: PathBuf::from(found.repo_path), remote: None }) };
    let remote = Remote { url, secret: found.repo_secret };
    Ok(Repo { path: remote::mirror_dir(data_dir, &remote.url), remote: Some(remote) })
}

/// Removes this node's mirrors of remotes no project or agent names any more (the project was
/// deleted, or moved to another repository): what a node keeps of a project goes with it. Each
/// node sweeps its own; a node that deletes or moves a project sweeps at once. The names are read
/// with the connection given back before anything is removed; a project made on the same remote
/// meanwhile gets its mirror made again by its first fetch. The mirrors removed.
pub async fn remove_unused_mirrors(db: &sqlx::PgPool, data_dir: &Path) -> crate::app::Result<Vec<PathBuf>> {
    let found = remote::mirrors(data_dir).map_err(|e| crate::app::Error::Internal(e.into()))?;
    if found.is_empty() {
        return Ok(found);
    }
    let named = projects::repositories_named(&mut *db.acquire().await?).await?;
    let kept: std::collections::HashSet<PathBuf> =
        named.iter().filter(|r| remote::is_url(r)).map(|url| remote::mirror_dir(data_dir, url)).collect();
    let mut removed = Vec::new();
    for mirror in found.into_iter().filter(|m| !kept.contains(m)) {
        match remote::remove_mirror(&mirror).await {
            Ok(()) => removed.push(mirror),
            Err(e) => tracing::warn!(mirror = %mirror.display(), error = %e, "removing a mirror no project uses"),
        }
    }
    Ok(removed)
}

fn fetching(remote: &Remote, e: GitError) -> crate::app::Error {
    crate::app::Error::Internal(anyhow::anyhow!("fetching {} into this node's mirror: {e}", remote.url))
}

/// Why a branch did not move on the remote: someone moved it first.
fn moved(branch: &str) -> GitError {
    GitError::Failed { args: format!("push {branch}"), stderr: format!("`{branch}` moved on the remote meanwhile") }
}

impl Repo {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The repository with its mirror fetched now, when it is on a remote.
    pub async fn fetched(self) -> crate::app::Result<Repo> {
        if let Some(remote) = &self.remote {
            remote::sync(&self.path, remote).await.map_err(|e| fetching(remote, e))?;
        }
        Ok(self)
    }

    /// Brings the mirror up to date again (after a push the remote refused).
    async fn refetch(&self, remote: &Remote) -> Result<(), GitError> {
        remote::sync(&self.path, remote).await
    }

    /// [`branches::create_if_missing`], on the remote first.
    pub async fn create_if_missing(&self, branch: &str, commit: &str) -> Result<String, GitError> {
        let Some(remote) = &self.remote else { return branches::create_if_missing(&self.path, branch, commit).await };
        if let Some(existing) = branches::head(&self.path, branch).await? {
            return Ok(existing);
        }
        let update = Update { branch: branch.to_owned(), new: Some(commit.to_owned()), expected: None };
        if remote::push(&self.path, remote, &[update]).await? == Pushed::Moved {
            // Made by another node meanwhile: theirs stands.
            self.refetch(remote).await?;
            return branches::head(&self.path, branch).await?.ok_or_else(|| moved(branch));
        }
        branches::reset(&self.path, branch, commit).await?;
        Ok(commit.to_owned())
    }

    /// [`branches::reset`] — for a project on a remote, from where the mirror last saw the
    /// branch (a branch moved since is refused, never overwritten).
    pub async fn reset(&self, branch: &str, commit: &str) -> Result<(), GitError> {
        let Some(remote) = &self.remote else { return branches::reset(&self.path, branch, commit).await };
        let expected = branches::head(&self.path, branch).await?;
        if expected.as_deref() == Some(commit) {
            return Ok(());
        }
        let update = Update { branch: branch.to_owned(), new: Some(commit.to_owned()), expected };
        if remote::push(&self.path, remote, &[update]).await? == Pushed::Moved {
            self.refetch(remote).await?;
            return Err(moved(branch));
        }
        branches::reset(&self.path, branch, commit).await
    }

    /// [`branches::compare_and_swap`], on the remote first.
    pub async fn compare_and_swap(&self, branch: &str, new: &str, old: &str) -> Result<(), GitError> {
        let Some(remote) = &self.remote else { return branches::compare_and_swap(&self.path, branch, new, old).await };
        let update = Update { branch: branch.to_owned(), new: Some(new.to_owned()), expected: Some(old.to_owned()) };
        if remote::push(&self.path, remote, &[update]).await? == Pushed::Moved {
            self.refetch(remote).await?;
            return Err(moved(branch));
        }
        branches::reset(&self.path, branch, new).await
    }

    /// [`merge::move_and_delete`], on the remote first (one atomic push).
    pub async fn move_and_delete(
        &self,
        branch: &str,
        new: &str,
        old: &str,
        reason: &str,
        doomed: &[(String, String)],
    ) -> Result<bool, GitError> {
        let Some(remote) = &self.remote else {
            return merge::move_and_delete(&self.path, branch, new, old, reason, doomed).await;
        };
        let mut updates =
            vec![Update { branch: branch.to_owned(), new: Some(new.to_owned()), expected: Some(old.to_owned()) }];
        updates.extend(doomed.iter().map(|(b, at)| Update {
            branch: b.clone(),
            new: None,
            expected: Some(at.clone()),
        }));
        if remote::push(&self.path, remote, &updates).await? == Pushed::Moved {
            self.refetch(remote).await?;
            return Ok(false);
        }
        branches::reset(&self.path, branch, new).await?;
        merge::delete_branches(&self.path, doomed).await;
        Ok(true)
    }

    /// [`merge::delete_branches`], on the remote first (each still at its commit; one that moved
    /// keeps its new work).
    pub async fn delete_branches(&self, doomed: &[(String, String)]) {
        if let Some(remote) = &self.remote {
            for (branch, at) in doomed {
                let update = Update { branch: branch.clone(), new: None, expected: Some(at.clone()) };
                if let Err(e) = remote::push(&self.path, remote, &[update]).await {
                    tracing::debug!(%branch, error = %e, "keeping a merged branch on the remote");
                }
            }
        }
        merge::delete_branches(&self.path, doomed).await;
    }
}

/// What pushing the merge queue's merged target did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// The project's target has no remote to push to.
    NoRemote,
    /// The remote's target is at the merge.
    Pushed,
    /// The remote's target moved meanwhile: the entry is rebuilt on its new head (the local target
    /// was brought there when it could follow without losing anything).
    Moved,
}

/// Pushes the merge queue's `merge` (of the entry onto `base`) to the remote's `target` with a
/// lease, before the target moves here: on a project's remote (from this node's mirror at
/// `repo`, with the merged branches `doomed` deleted there), or a `repo_path` project's
/// `push_remote`. A remote that moved means the entry is
/// rebuilt on it, never forced; for a `repo_path` project whose remote is merely behind (a person
/// had not pushed), it is brought up to the merge from where it is.
#[tracing::instrument(skip_all, fields(%target), err(level = "debug"))]
pub async fn publish_target(
    conn: &mut PgConnection,
    project_id: Uuid,
    repo: &Path,
    (target, merge, base): (&str, &str, &str),
    doomed: &[(String, String)],
) -> crate::app::Result<Published> {
    let found = projects::repository(conn, project_id).await?;
    let (remote, mirror) = match found.repo_url {
        Some(url) => (Remote { url, secret: found.repo_secret }, true),
        None => match push_remote(repo, found.push_remote.as_deref()).await? {
            Some(remote) => (remote, false),
            None => return Ok(Published::NoRemote),
        },
    };
    let git = |e: GitError| crate::app::Error::Internal(anyhow::anyhow!("pushing `{target}` to {}: {e}", remote.url));
    let update = |expected: Option<String>| Update { branch: target.to_owned(), new: Some(merge.to_owned()), expected };
    if remote::push(repo, &remote, &[update(Some(base.to_owned()))]).await.map_err(git)? == Pushed::Done {
        if mirror {
            // The merged wish's branches live on the remote: they go there too.
            Repo { path: repo.to_owned(), remote: Some(remote.clone()) }.delete_branches(doomed).await;
        }
        return Ok(Published::Pushed);
    }
    if mirror {
        remote::sync(repo, &remote).await.map_err(git)?;
        return Ok(Published::Moved);
    }
    // A project's own remote may be behind (or at the merge already, pushed before a crash):
    // anything the merge contains is pushed over, from where it is.
    let at = remote::head(repo, &remote, target).await.map_err(git)?;
    if let Some(at) = &at {
        let known = branches::is_ancestor(repo, at, merge).await.unwrap_or(false);
        if known && remote::push(repo, &remote, &[update(Some(at.clone()))]).await.map_err(git)? == Pushed::Done {
            return Ok(Published::Pushed);
        }
    }
    follow_remote(repo, &remote, target, base).await.map_err(git)?;
    Ok(Published::Moved)
}

/// The remote a `repo_path` project's target is pushed to: `setting` when it names one (empty:
/// none), else `origin` when the repository has it.
async fn push_remote(repo: &Path, setting: Option<&str>) -> crate::app::Result<Option<Remote>> {
    let name = match setting {
        Some("") => return Ok(None),
        Some(name) => name,
        None => "origin",
    };
    let found = remote::named(repo, name).await?;
    if found.is_none() && setting.is_some() {
        let why = format!("the project's `push_remote` `{name}` is not a remote of its repository");
        return Err(crate::app::Error::Internal(anyhow::anyhow!(why)));
    }
    Ok(found)
}

/// Brings a `repo_path` project's local `target` (at `base`) to the remote's, which moved on:
/// as a fast-forward, with its working tree if it is checked out and clean. A remote that
/// diverged from it is a person's to reconcile: the merge queue never forces either side.
async fn follow_remote(repo: &Path, remote: &Remote, target: &str, base: &str) -> Result<(), GitError> {
    let holding = format!("refs/switchyard/remotes/{target}");
    let theirs = remote::fetch_branch(repo, remote, target, &holding).await?;
    if !branches::is_ancestor(repo, base, &theirs).await? {
        return Err(GitError::Failed {
            args: format!("push {target}"),
            stderr: format!(
                "`{target}` on {} and here have diverged: merge them by hand (the merge queue never forces a push)",
                remote.url
            ),
        });
    }
    let reason = format!("switchyard merge queue: follow {}", remote.url);
    let tree = merge::checked_out(repo).and_then(|mut trees| trees.remove(target));
    match tree {
        Some(tree) => {
            checked_out::advance(repo, &tree, target, &theirs, base, &reason).await?;
        }
        None => {
            merge::move_branch(repo, target, &theirs, base, &reason).await?;
        }
    }
    Ok(())
}
