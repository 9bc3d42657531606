//! What the merge queue asks of git, in the project's repository (bare or not) without ever
//! touching its index or working tree:
//! - the merge itself is [`super::branches::merge_as`] (`git merge-tree --write-tree`, then `git
//!   commit-tree` with both as parents — a `--no-ff` merge commit made in memory; no ref moves),
//!   made by [`MERGE_QUEUE`].
//! - [`checkout_scratch`]: a `git clone --shared` scratch clone (kept between entries) checked
//!   out at the merge commit, where the gate runs; it sees the new objects through its alternates.
//! - [`move_branch`]: `git update-ref refs/heads/<target> <merge> <base>`, a compare-and-swap that
//!   moves the target only from the commit the merge was made on.
//! - [`checked_out_at`]: where a branch is checked out under a working tree, so the queue never
//!   moves a branch under someone's files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{run as git, GitError};

/// Every local branch and its commit, from one `git for-each-ref`.
pub async fn branch_heads(repo: &Path) -> Result<HashMap<String, String>, GitError> {
    let out = git(repo, &["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/"]).await?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(id, name)| name.strip_prefix("refs/heads/").map(|n| (n.to_owned(), id.to_owned())))
        .collect())
}

/// Who the merge queue's merge commits are made by (with [`super::branches::merge_as`]).
pub const MERGE_QUEUE: (&str, &str) = ("Switchyard merge queue", "merge-queue@switchyard.invalid");

/// Moves `refs/heads/<branch>` to `new` only if it still points at `old`: `Ok(false)` when it
/// moved meanwhile (someone pushed), and nothing changed.
pub async fn move_branch(repo: &Path, branch: &str, new: &str, old: &str, reason: &str) -> Result<bool, GitError> {
    let reference = format!("refs/heads/{branch}");
    match git(repo, &["update-ref", "-m", reason, &reference, new, old]).await {
        Ok(_) => Ok(true),
        Err(GitError::Failed { stderr, .. }) if stderr.contains("is at") || stderr.contains("but expected") => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Deletes `refs/heads/<branch>` if it is still at `at` (a branch that moved keeps its new work).
pub async fn delete_branch(repo: &Path, branch: &str, at: &str) -> Result<(), GitError> {
    let reference = format!("refs/heads/{branch}");
    git(repo, &["update-ref", "-d", &reference, at]).await.map(drop)
}

/// Where `branch` is checked out under a working tree of `repo` (its own, or a linked worktree
/// of it), if anywhere; a bare repository's HEAD is no working tree.
pub async fn checked_out_at(repo: &Path, branch: &str) -> Result<Option<PathBuf>, GitError> {
    let out = git(repo, &["worktree", "list", "--porcelain"]).await?;
    let wanted = format!("branch refs/heads/{branch}");
    for block in out.split("\n\n") {
        let lines: Vec<&str> = block.lines().collect();
        if lines.contains(&"bare") || !lines.contains(&wanted.as_str()) {
            continue;
        }
        if let Some(path) = lines.iter().find_map(|l| l.strip_prefix("worktree ")) {
            return Ok(Some(PathBuf::from(path)));
        }
    }
    Ok(None)
}

/// Readies the scratch clone at `dir` (made once with `git clone --shared`), checked out at
/// `commit` with nothing else in it: the gate sees exactly the merge.
pub async fn checkout_scratch(repo: &Path, dir: &Path, commit: &str) -> Result<(), GitError> {
    if !dir.join(".git").is_dir() {
        if let Some(parent) = dir.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        let _ = tokio::fs::remove_dir_all(dir).await;
        let parent = dir.parent().unwrap_or(Path::new("/"));
        let (repo_arg, dir_arg) = (repo.to_string_lossy(), dir.to_string_lossy());
        git(parent, &["clone", "--quiet", "--shared", "--no-checkout", "--", &repo_arg, &dir_arg]).await?;
    }
    git(dir, &["checkout", "--quiet", "--force", "--detach", commit]).await?;
    git(dir, &["clean", "--quiet", "-ffdx"]).await?;
    Ok(())
}

/// Local branches of `repo` under `prefix` (e.g. `group/login/`).
pub async fn branches_under(repo: &Path, prefix: &str) -> Result<Vec<(String, String)>, GitError> {
    let pattern = format!("refs/heads/{prefix}");
    let out = git(repo, &["for-each-ref", "--format=%(objectname) %(refname)", &pattern]).await?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(id, name)| name.strip_prefix("refs/heads/").map(|n| (n.to_owned(), id.to_owned())))
        .collect())
}

/// Files changed between the target and the wish branch (`git diff --stat target...wish`), for the
/// wish page.
pub async fn diff_stat(repo: &Path, target: &str, wish: &str) -> Result<String, GitError> {
    let range = format!("refs/heads/{target}...refs/heads/{wish}");
    git(repo, &["diff", "--stat=200", "--no-color", &range]).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::branches::{head, is_ancestor, merge_as, Merge};
    use crate::git::clones::tests::{commit, project_repo};

    #[tokio::test]
    async fn a_merge_is_made_without_touching_the_working_tree_and_moves_only_from_its_base() {
        let dir = tempfile::tempdir().unwrap();
        let repo = project_repo(dir.path()).await;
        git(&repo, &["checkout", "--quiet", "-b", "wish/a"]).await.unwrap();
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        commit(&repo, "a").await;
        git(&repo, &["checkout", "--quiet", "-b", "wish/b", "main"]).await.unwrap();
        std::fs::write(repo.join("README.md"), "changed\n").unwrap();
        commit(&repo, "b").await;
        git(&repo, &["checkout", "--quiet", "-b", "other", "main"]).await.unwrap();
        let heads = branch_heads(&repo).await.unwrap();
        let base = heads["main"].clone();

        let Merge::Clean(merged) = merge_as(&repo, &base, &heads["wish/a"], "Merge wish a", MERGE_QUEUE).await.unwrap()
        else {
            panic!("a clean merge")
        };
        let parents = git(&repo, &["rev-list", "--parents", "-n", "1", &merged]).await.unwrap();
        assert_eq!(parents.split_whitespace().count(), 3, "a merge commit has two parents: {parents}");
        assert!(git(&repo, &["status", "--porcelain"]).await.unwrap().is_empty());
        assert_eq!(checked_out_at(&repo, "main").await.unwrap(), None);
        assert_eq!(
            checked_out_at(&repo, "other").await.unwrap().map(|p| p.canonicalize().unwrap()),
            Some(repo.canonicalize().unwrap())
        );

        assert!(!move_branch(&repo, "main", &merged, &heads["wish/a"], "test").await.unwrap(), "wrong old value");
        assert_eq!(head(&repo, "main").await.unwrap().as_deref(), Some(base.as_str()));
        assert!(move_branch(&repo, "main", &merged, &base, "test").await.unwrap());
        assert!(is_ancestor(&repo, &heads["wish/a"], "main").await.unwrap());

        // wish/b edits the line main's merge kept: no conflict (a.txt is new); make one that does.
        git(&repo, &["checkout", "--quiet", "-b", "wish/c", &base]).await.unwrap();
        std::fs::write(repo.join("README.md"), "other change\n").unwrap();
        commit(&repo, "c").await;
        let heads = branch_heads(&repo).await.unwrap();
        let Merge::Clean(with_b) = merge_as(&repo, &heads["main"], &heads["wish/b"], "b", MERGE_QUEUE).await.unwrap()
        else {
            panic!("b merges")
        };
        assert_eq!(
            merge_as(&repo, &with_b, &heads["wish/c"], "c", MERGE_QUEUE).await.unwrap(),
            Merge::Conflicts(vec!["README.md".to_owned()])
        );

        let scratch = dir.path().join("scratch");
        checkout_scratch(&repo, &scratch, &with_b).await.unwrap();
        assert_eq!(std::fs::read_to_string(scratch.join("README.md")).unwrap(), "changed\n");
        std::fs::write(scratch.join("junk"), "x").unwrap();
        checkout_scratch(&repo, &scratch, &merged).await.unwrap();
        assert!(!scratch.join("junk").exists() && scratch.join("a.txt").exists());
    }
}
