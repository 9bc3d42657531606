//! A target branch checked out in a person's working tree, advanced with it as `git merge
//! --ff-only` would: the branch moves, then the tree's index and files follow (`git read-tree -m
//! -u`, which changes only what differs between the two commits), so `git status` is clean after.
//! A tree with anything uncommitted (staged, unstaged or untracked: what keeps `git status` from
//! saying "working tree clean") is not touched at all. git runs hardened as everywhere ([`super`]):
//! no hook, no fsmonitor, no filter or driver the repository names — the tree is a person's, but
//! what is merged into it came from agents.

use std::path::Path;

use super::{run as git, GitError};

/// How advancing a checked-out branch went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advance {
    /// The branch and the working tree are at the new commit.
    Moved,
    /// The branch was not at the commit expected: nothing changed.
    BranchMoved,
    /// The working tree has uncommitted changes (or got some while it was advanced): nothing
    /// changed.
    Dirty,
}

/// Whether the working tree at `tree` has anything `git status` lists (ignored files aside).
/// Read without taking git's optional locks: the person's own git commands never find the index
/// locked by us.
pub async fn dirty(tree: &Path) -> Result<bool, GitError> {
    let status = git(tree, &["--no-optional-locks", "status", "--porcelain", "--untracked-files=normal"]).await?;
    Ok(!status.trim().is_empty())
}

/// Moves `branch` of `repo`, checked out in the working tree `tree`, from `old` to `new` (a
/// descendant of `old`) by compare-and-swap, and the tree with it — unless the tree is
/// [`dirty`]. Should the tree refuse (the person changed a file meanwhile), the branch is moved
/// back and the tree is left as it was.
pub async fn advance(
    repo: &Path,
    tree: &Path,
    branch: &str,
    new: &str,
    old: &str,
    reason: &str,
) -> Result<Advance, GitError> {
    if dirty(tree).await? {
        return Ok(Advance::Dirty);
    }
    if !super::merge::move_branch(repo, branch, new, old, reason).await? {
        return Ok(Advance::BranchMoved);
    }
    // Stat information refreshed first, as `git merge` does: a file touched but unchanged is no
    // change in the way. `read-tree` checks every path before it writes any.
    let followed = match git(tree, &["update-index", "-q", "--refresh"]).await {
        Ok(_) => git(tree, &["read-tree", "-m", "-u", old, new]).await,
        Err(e) => Err(e),
    };
    if let Err(e) = followed {
        tracing::info!(tree = %tree.display(), error = %e, "the working tree did not follow its branch; moving it back");
        if !super::merge::move_branch(repo, branch, old, new, reason).await? {
            tracing::warn!(%branch, "the branch moved again before it could be moved back");
        }
        return Ok(Advance::Dirty);
    }
    Ok(Advance::Moved)
}

/// A working tree left behind by its branch (the process died between the two moves of
/// [`advance`]): brought from `old` to `new` as [`advance`] would have, when its index is still
/// exactly `old`'s; `false` (nothing touched) when it is not, or the tree refuses. A tree at
/// `new` already (it died after both) is left as it is.
pub async fn catch_up(tree: &Path, old: &str, new: &str) -> Result<bool, GitError> {
    let staged_against = |commit: &str| {
        let commit = commit.to_owned();
        async move { git(tree, &["diff-index", "--cached", "--name-only", &commit]).await }
    };
    if staged_against(new).await?.trim().is_empty() {
        return Ok(true);
    }
    if !staged_against(old).await?.trim().is_empty() {
        return Ok(false);
    }
    git(tree, &["update-index", "-q", "--refresh"]).await?;
    Ok(git(tree, &["read-tree", "-m", "-u", old, new]).await.is_ok())
}

#[cfg(test)]
mod tests {
    use super::super::clones::tests::{commit, project_repo};
    use super::*;

    /// A commit on top of `main` in `repo`, made elsewhere (a clone pushed back to a branch):
    /// what the merge queue's merge is to the checked-out `main`. Answers (old, new).
    async fn next_commit(repo: &Path, dir: &Path) -> (String, String) {
        let other = dir.join("other");
        git(dir, &["clone", "--quiet", &repo.to_string_lossy(), &other.to_string_lossy()]).await.unwrap();
        std::fs::write(other.join("new.txt"), "new\n").unwrap();
        std::fs::write(other.join("README.md"), "hello\nagain\n").unwrap();
        commit(&other, "next").await;
        git(&other, &["push", "--quiet", "origin", "HEAD:refs/heads/next"]).await.unwrap();
        let rev = |r: &'static str| async move { git(repo, &["rev-parse", r]).await.unwrap().trim().to_owned() };
        (rev("main").await, rev("next").await)
    }

    async fn status(tree: &Path) -> String {
        git(tree, &["status", "--porcelain"]).await.unwrap()
    }

    #[tokio::test]
    async fn a_clean_tree_follows_its_branch_and_a_dirty_one_is_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let repo = project_repo(dir.path()).await;
        let (old, new) = next_commit(&repo, dir.path()).await;

        std::fs::write(repo.join("README.md"), "hello\nmine\n").unwrap();
        assert!(dirty(&repo).await.unwrap());
        assert_eq!(advance(&repo, &repo, "main", &new, &old, "test").await.unwrap(), Advance::Dirty);
        assert_eq!(std::fs::read_to_string(repo.join("README.md")).unwrap(), "hello\nmine\n");
        assert_eq!(git(&repo, &["rev-parse", "main"]).await.unwrap().trim(), old);

        git(&repo, &["checkout", "--quiet", "README.md"]).await.unwrap();
        assert_eq!(advance(&repo, &repo, "main", &new, &old, "test").await.unwrap(), Advance::Moved);
        assert_eq!(git(&repo, &["rev-parse", "main"]).await.unwrap().trim(), new);
        assert_eq!(std::fs::read_to_string(repo.join("new.txt")).unwrap(), "new\n");
        assert_eq!(status(&repo).await, "");
        // Moved from a commit it is no longer at: refused, nothing changed.
        assert_eq!(advance(&repo, &repo, "main", &old, &old, "test").await.unwrap(), Advance::BranchMoved);
        assert_eq!(status(&repo).await, "");
    }

    #[tokio::test]
    async fn a_tree_left_behind_by_its_branch_catches_up_unless_something_is_staged() {
        let dir = tempfile::tempdir().unwrap();
        let repo = project_repo(dir.path()).await;
        let (old, new) = next_commit(&repo, dir.path()).await;
        // The branch moved, the tree did not (a crash between the two).
        git(&repo, &["update-ref", "refs/heads/main", &new, &old]).await.unwrap();
        std::fs::write(repo.join("staged.txt"), "staged\n").unwrap();
        git(&repo, &["add", "staged.txt"]).await.unwrap();
        assert!(!catch_up(&repo, &old, &new).await.unwrap(), "a person's staged file: left alone");
        assert!(repo.join("staged.txt").exists() && !repo.join("new.txt").exists());

        git(&repo, &["rm", "--quiet", "--cached", "staged.txt"]).await.unwrap();
        std::fs::remove_file(repo.join("staged.txt")).unwrap();
        assert!(catch_up(&repo, &old, &new).await.unwrap());
        assert_eq!(std::fs::read_to_string(repo.join("new.txt")).unwrap(), "new\n");
        assert_eq!(status(&repo).await, "");
    }
}
