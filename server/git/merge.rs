//! What the merge queue asks of git, in the project's repository (bare or not) without ever
//! touching its index or working tree:
//! - the merge itself is [`super::branches::merge_as`] (`git merge-tree --write-tree`, then `git
//!   commit-tree` with both as parents — a `--no-ff` merge commit made in memory; no ref moves),
//!   made by [`MERGE_QUEUE`].
//! - [`clear_scratch`], [`checkout_scratch`]: a `git clone --shared` scratch clone (kept between
//!   entries), cleared, then checked out at the merge commit, where the gate runs; it sees the new objects through its alternates.
//! - [`move_branch`]: `git update-ref refs/heads/<target> <merge> <base>`, a compare-and-swap that
//!   moves the target only from the commit the merge was made on.
//! - [`heads`]: one `git for-each-ref` says where each branch is and where it is checked out
//!   under a working tree (so the queue never moves a branch under someone's files).
//! - [`delete_branches`]: merged branches deleted in one `git update-ref --stdin` transaction.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{run as git, GitError};

/// Every local branch and its commit, from one `git for-each-ref`.
pub async fn branch_heads(repo: &Path) -> Result<HashMap<String, String>, GitError> {
    Ok(heads(repo, &[]).await?.into_iter().map(|(name, head)| (name, head.commit)).collect())
}

/// A local branch as one `git for-each-ref` saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchHead {
    pub commit: String,
    /// The working tree that has it checked out, if any (a bare repository's HEAD is none).
    pub checked_out_at: Option<PathBuf>,
}

/// Every local branch of `repo` (or those under `patterns`, e.g. `refs/heads/main`,
/// `refs/heads/group/x/`), from one `git for-each-ref`: its commit and where it is checked out.
/// (Whether a branch is merged is asked of the one branch that matters: with many branches,
/// `%(ahead-behind)` for each was most of what a merge-queue pass cost.)
pub async fn heads(repo: &Path, patterns: &[String]) -> Result<HashMap<String, BranchHead>, GitError> {
    let mut args = vec!["for-each-ref".to_owned(), "--format=%(objectname) %(refname) %(worktreepath)".to_owned()];
    match patterns {
        [] => args.push("refs/heads/".to_owned()),
        some => args.extend(some.iter().cloned()),
    }
    let out = git(repo, &args.iter().map(String::as_str).collect::<Vec<_>>()).await?;
    Ok(out.lines().filter_map(parse_head).collect())
}

/// `<commit> refs/heads/<name> <worktree path or nothing>`.
fn parse_head(line: &str) -> Option<(String, BranchHead)> {
    let mut fields = line.splitn(3, ' ');
    let (commit, name) = (fields.next()?, fields.next()?);
    let name = name.strip_prefix("refs/heads/")?;
    let path = fields.next().unwrap_or("");
    // The bare repository itself is listed as the "working tree" of its HEAD: a working tree has
    // a `.git` (a directory, or the file a linked worktree has); a git directory has none.
    let checked_out_at =
        Some(PathBuf::from(path)).filter(|p| !path.is_empty() && p.join(".git").symlink_metadata().is_ok());
    Some((name.to_owned(), BranchHead { commit: commit.to_owned(), checked_out_at }))
}

/// Who the merge queue's merge commits are made by (with [`super::branches::merge_as`]).
pub const MERGE_QUEUE: (&str, &str) = ("Switchyard merge queue", "merge-queue@switchyard.invalid");

/// Moves `refs/heads/<branch>` to `new` only if it still points at `old`: `Ok(false)` when it
/// moved meanwhile (someone pushed), and nothing changed.
pub async fn move_branch(repo: &Path, branch: &str, new: &str, old: &str, reason: &str) -> Result<bool, GitError> {
    move_and_delete(repo, branch, new, old, reason, &[]).await
}

/// [`move_branch`] and [`delete_branches`] in one `git update-ref --stdin` transaction: the
/// branch moves from `old` to `new` and each of `doomed` still at its commit is deleted, or
/// nothing changes (`false`: the branch or one of `doomed` moved meanwhile; the caller then
/// moves and deletes step by step to learn which).
pub async fn move_and_delete(
    repo: &Path,
    branch: &str,
    new: &str,
    old: &str,
    reason: &str,
    doomed: &[(String, String)],
) -> Result<bool, GitError> {
    let mut script = format!("update refs/heads/{branch} {new} {old}\n");
    script.extend(doomed.iter().map(|(b, at)| format!("delete refs/heads/{b} {at}\n")));
    match super::run_with_input(repo, &["update-ref", "-m", reason, "--stdin"], script.into_bytes()).await {
        Ok(_) => Ok(true),
        Err(GitError::Failed { stderr, .. }) if stderr.contains("is at") || stderr.contains("but expected") => {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Deletes each `refs/heads/<branch>` still at its `at` (a branch that moved keeps its new work):
/// one `git update-ref --stdin` transaction; if it fails (one moved), one by one. The branches
/// that could not be deleted, with git's reason.
pub async fn delete_branches(repo: &Path, branches: &[(String, String)]) -> Vec<(String, GitError)> {
    if branches.is_empty() {
        return Vec::new();
    }
    let script: String = branches.iter().map(|(branch, at)| format!("delete refs/heads/{branch} {at}\n")).collect();
    if super::run_with_input(repo, &["update-ref", "--stdin"], script.into_bytes()).await.is_ok() {
        return Vec::new();
    }
    let mut kept = Vec::new();
    for (branch, at) in branches {
        let reference = format!("refs/heads/{branch}");
        if let Err(e) = git(repo, &["update-ref", "-d", &reference, at]).await {
            kept.push((branch.clone(), e));
        }
    }
    kept
}

/// Readies the scratch clone at `dir` for the next gate: made once with `git clone --shared`
/// (nothing checked out), then emptied of whatever an earlier gate left (`git clean -ffdx`).
/// It needs no merge commit, so the queue runs it while the merge is made.
pub async fn clear_scratch(repo: &Path, dir: &Path) -> Result<(), GitError> {
    if !dir.join(".git").is_dir() {
        if let Some(parent) = dir.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        let _ = tokio::fs::remove_dir_all(dir).await;
        let parent = dir.parent().unwrap_or(Path::new("/"));
        let (repo_arg, dir_arg) = (repo.to_string_lossy(), dir.to_string_lossy());
        git(parent, &["clone", "--quiet", "--shared", "--no-checkout", "--", &repo_arg, &dir_arg]).await?;
    }
    git(dir, &["clean", "--quiet", "-ffdx"]).await?;
    Ok(())
}

/// Checks the cleared scratch clone at `dir` out at `commit`: the gate sees exactly the merge.
pub async fn checkout_scratch(dir: &Path, commit: &str) -> Result<(), GitError> {
    git(dir, &["checkout", "--quiet", "--force", "--detach", commit]).await?;
    Ok(())
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
        let listed = super::heads(&repo, &[]).await.unwrap();
        assert_eq!(listed["main"].checked_out_at, None);
        assert_eq!(
            listed["other"].checked_out_at.as_ref().map(|p| p.canonicalize().unwrap()),
            Some(repo.canonicalize().unwrap())
        );
        let bare = dir.path().join("bare.git");
        git(dir.path(), &["clone", "--quiet", "--bare", &repo.to_string_lossy(), &bare.to_string_lossy()])
            .await
            .unwrap();
        let listed = super::heads(&bare, &["refs/heads/wish/".to_owned()]).await.unwrap();
        assert_eq!(listed.keys().count(), 2, "{listed:?}");
        assert!(listed.values().all(|h| h.checked_out_at.is_none()));
        let bare_heads = super::heads(&bare, &[]).await.unwrap();
        assert!(bare_heads.values().all(|h| h.checked_out_at.is_none()), "a bare HEAD is no working tree");

        assert!(!move_branch(&repo, "main", &merged, &heads["wish/a"], "test").await.unwrap(), "wrong old value");
        assert_eq!(head(&repo, "main").await.unwrap().as_deref(), Some(base.as_str()));
        assert!(move_branch(&repo, "main", &merged, &base, "test").await.unwrap());
        assert!(is_ancestor(&repo, &heads["wish/a"], "main").await.unwrap());
        git(&repo, &["branch", "gone", &heads["wish/a"]]).await.unwrap();
        let moved = vec![("gone".to_owned(), heads["wish/a"].clone()), ("wish/a".to_owned(), base.clone())];
        let kept = delete_branches(&repo, &moved).await;
        assert_eq!(kept.iter().map(|(b, _)| b.as_str()).collect::<Vec<_>>(), ["wish/a"], "a moved branch is kept");
        assert!(head(&repo, "gone").await.unwrap().is_none());

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

        // The move and the deletion of the merged branches: together, or not at all.
        let main_now = heads["main"].clone();
        git(&repo, &["branch", "group/b/x", &heads["wish/b"]]).await.unwrap();
        let group = ("group/b/x".to_owned(), heads["wish/b"].clone());
        let moved = vec![("wish/b".to_owned(), heads["wish/c"].clone()), group.clone()];
        assert!(!move_and_delete(&repo, "main", &with_b, &main_now, "test", &moved).await.unwrap(), "wish/b moved");
        assert_eq!(head(&repo, "main").await.unwrap().as_deref(), Some(main_now.as_str()));
        assert!(head(&repo, "group/b/x").await.unwrap().is_some(), "nothing deleted");
        let stale = vec![("wish/b".to_owned(), heads["wish/b"].clone()), group.clone()];
        assert!(!move_and_delete(&repo, "main", &with_b, &base, "test", &stale).await.unwrap(), "main moved");
        assert!(move_and_delete(&repo, "main", &with_b, &main_now, "test", &stale).await.unwrap());
        assert_eq!(head(&repo, "main").await.unwrap().as_deref(), Some(with_b.as_str()));
        assert!(head(&repo, "wish/b").await.unwrap().is_none() && head(&repo, "group/b/x").await.unwrap().is_none());

        let scratch = dir.path().join("scratch");
        clear_scratch(&repo, &scratch).await.unwrap();
        checkout_scratch(&scratch, &with_b).await.unwrap();
        assert_eq!(std::fs::read_to_string(scratch.join("README.md")).unwrap(), "changed\n");
        std::fs::write(scratch.join("junk"), "x").unwrap();
        clear_scratch(&repo, &scratch).await.unwrap();
        checkout_scratch(&scratch, &merged).await.unwrap();
        assert!(!scratch.join("junk").exists() && scratch.join("a.txt").exists());
    }
}
