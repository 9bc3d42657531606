//! What the merge queue asks of git, in the project's repository (bare or not) without ever
//! touching its index or working tree:
//! - [`merge`]: `git merge-tree --write-tree` of the target and the wish commit, then `git
//!   commit-tree` with both as parents — a `--no-ff` merge commit made in memory. Its objects are
//!   written, no ref moves.
//! - [`checkout_scratch`]: a `git clone --shared` scratch clone (kept between entries) checked
//!   out at the merge commit, where the gate runs; it sees the new objects through its alternates.
//! - [`move_branch`]: `git update-ref refs/heads/<target> <merge> <base>`, a compare-and-swap that
//!   moves the target only from the commit the merge was made on.
//! - [`checked_out_at`]: where a branch is checked out under a working tree, so the queue never
//!   moves a branch under someone's files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{command, run as git, GitError};

/// Every local branch and its commit, from one `git for-each-ref`.
pub async fn branch_heads(repo: &Path) -> Result<HashMap<String, String>, GitError> {
    let out = git(repo, &["for-each-ref", "--format=%(objectname) %(refname)", "refs/heads/"]).await?;
    Ok(out
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(id, name)| name.strip_prefix("refs/heads/").map(|n| (n.to_owned(), id.to_owned())))
        .collect())
}

/// What merging a wish commit into a base commit gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    /// The merge commit (two parents: base, then the wish).
    Commit(String),
    Conflicts(Vec<String>),
}

/// The identity merge commits are made with.
const IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "Switchyard merge queue"),
    ("GIT_AUTHOR_EMAIL", "merge-queue@switchyard.invalid"),
    ("GIT_COMMITTER_NAME", "Switchyard merge queue"),
    ("GIT_COMMITTER_EMAIL", "merge-queue@switchyard.invalid"),
];

/// Merges `wish` into `base` (both commit ids) in `repo` as `git merge --no-ff` would, without a
/// working tree: the conflicting files, or a new merge commit with `message`.
pub async fn merge(repo: &Path, base: &str, wish: &str, message: &str) -> Result<Merged, GitError> {
    let args = ["merge-tree", "--write-tree", "--name-only", "--no-messages", base, wish];
    let output = command(repo, &args).output().await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    match output.status.code() {
        Some(0) => {}
        Some(1) => return Ok(Merged::Conflicts(super::conflicts::conflicted_files(&stdout))),
        _ => {
            let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
            return Err(GitError::Failed { args: args.join(" "), stderr });
        }
    }
    let tree = stdout.lines().next().unwrap_or("").trim().to_owned();
    let args = ["commit-tree", &tree, "-p", base, "-p", wish, "-m", message];
    let mut commit = command(repo, &args);
    commit.envs(IDENTITY);
    let out = super::finished(&args, commit.output().await?)?;
    Ok(Merged::Commit(out.trim().to_owned()))
}

/// The commit `rev` names in `repo`, if any.
pub async fn resolve(repo: &Path, rev: &str) -> Result<Option<String>, GitError> {
    let spec = format!("{rev}^{{commit}}");
    match git(repo, &["rev-parse", "--verify", "--quiet", &spec]).await {
        Ok(id) => Ok(Some(id.trim().to_owned())),
        Err(GitError::Failed { stderr, .. }) if stderr.is_empty() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether commit `a` is `b` or an ancestor of it.
pub async fn is_ancestor(repo: &Path, a: &str, b: &str) -> Result<bool, GitError> {
    let args = ["merge-base", "--is-ancestor", a, b];
    let output = command(repo, &args).output().await?;
    match output.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(GitError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        }),
    }
}

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

        let Merged::Commit(merged) = merge(&repo, &base, &heads["wish/a"], "Merge wish a").await.unwrap() else {
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
        assert_eq!(resolve(&repo, "main").await.unwrap().as_deref(), Some(base.as_str()));
        assert!(move_branch(&repo, "main", &merged, &base, "test").await.unwrap());
        assert!(is_ancestor(&repo, &heads["wish/a"], "main").await.unwrap());

        // wish/b edits the line main's merge kept: no conflict (a.txt is new); make one that does.
        git(&repo, &["checkout", "--quiet", "-b", "wish/c", &base]).await.unwrap();
        std::fs::write(repo.join("README.md"), "other change\n").unwrap();
        commit(&repo, "c").await;
        let heads = branch_heads(&repo).await.unwrap();
        let Merged::Commit(with_b) = merge(&repo, &heads["main"], &heads["wish/b"], "b").await.unwrap() else {
            panic!("b merges")
        };
        assert_eq!(
            merge(&repo, &with_b, &heads["wish/c"], "c").await.unwrap(),
            Merged::Conflicts(vec!["README.md".to_owned()])
        );

        let scratch = dir.path().join("scratch");
        checkout_scratch(&repo, &scratch, &with_b).await.unwrap();
        assert_eq!(std::fs::read_to_string(scratch.join("README.md")).unwrap(), "changed\n");
        std::fs::write(scratch.join("junk"), "x").unwrap();
        checkout_scratch(&repo, &scratch, &merged).await.unwrap();
        assert!(!scratch.join("junk").exists() && scratch.join("a.txt").exists());
    }
}
