//! What the merge queue asks of git, in the project's repository (bare or not) without touching
//! its index or working tree (a target checked out there is advanced by [`super::checked_out`]):
//! - the merge itself is [`super::branches::merge_as`] (`git merge-tree --write-tree`, then `git
//!   commit-tree` with both as parents — a `--no-ff` merge commit made in memory; no ref moves),
//!   made by [`MERGE_QUEUE`].
//! - [`merge_in_scratch`]: with a gate, the merge is made instead with `git merge --no-ff` in a
//!   `git clone --shared` scratch clone (kept between entries), its objects written to the
//!   project's repository (the object store the clone borrows through its alternates), and
//!   [`tidy_scratch`] puts the clone back after the gate. [`clear_scratch`] and
//!   [`checkout_scratch`], which it uses, also check out a merge made in memory.
//! - [`move_branch`]: `git update-ref refs/heads/<target> <merge> <base>`, a compare-and-swap that
//!   moves the target only from the commit the merge was made on.
//! - [`heads`]: one `git for-each-ref` says where each branch is and where it is checked out
//!   under a working tree (so the queue moves such a branch only with its files);
//!   [`checked_out`] reads the latter again from git's `HEAD` files just before a move.
//! - [`delete_branches`]: merged branches deleted in one `git update-ref --stdin` transaction.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{run as git, GitError};
use crate::agent_writable::AgentWritable;

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

/// Which branches of `repo` are checked out, and where, read from the `HEAD` files git keeps for
/// the main working tree and each linked one (`.git/worktrees/*`): what [`heads`] tells of it,
/// without running git, so the merge queue can look again just before each move for the cost of a
/// few small reads. `None` when `repo` is not a plain repository (a linked working tree or a
/// submodule, whose `.git` is a file): ask [`heads`] then.
pub fn checked_out(repo: &Path) -> Option<HashMap<String, PathBuf>> {
    let dot_git = repo.join(".git");
    let (git_dir, main) = match dot_git.symlink_metadata() {
        Ok(meta) if meta.is_dir() => (dot_git, Some(repo)),
        Ok(_) => return None,
        // A bare repository: its HEAD is no working tree's.
        Err(_) if repo.join("HEAD").is_file() && repo.join("objects").is_dir() => (repo.to_owned(), None),
        Err(_) => return None,
    };
    let branch_of = |dir: &Path| -> Option<String> {
        let head = std::fs::read_to_string(dir.join("HEAD")).ok()?;
        head.trim_end().strip_prefix("ref: refs/heads/").map(str::to_owned)
    };
    let mut found = HashMap::new();
    if let (Some(main), Some(branch)) = (main, branch_of(&git_dir)) {
        found.insert(branch, main.to_owned());
    }
    if let Ok(linked) = std::fs::read_dir(git_dir.join("worktrees")) {
        for admin in linked.flatten().map(|e| e.path()) {
            // `gitdir` names the working tree's `.git` file; a tree whose files are gone (prunable)
            // has nothing to protect, as [`heads`] sees it.
            let Ok(pointer) = std::fs::read_to_string(admin.join("gitdir")) else { continue };
            let pointer = PathBuf::from(pointer.trim_end());
            let (Some(tree), Some(branch)) = (pointer.parent(), branch_of(&admin)) else { continue };
            if pointer.symlink_metadata().is_ok() {
                found.insert(branch, tree.to_owned());
            }
        }
    }
    Some(found)
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
/// nothing changes (`false`: the branch or one of `doomed` moved meanwhile, or one of `doomed` is
/// gone already; the caller then moves and deletes step by step to learn which).
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
        Err(GitError::Failed { stderr, .. })
            if stderr.contains("is at")
                || stderr.contains("but expected")
                || stderr.contains("unable to resolve reference") =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Deletes each `refs/heads/<branch>` still at its `at` (a branch that moved keeps its new work):
/// one `git update-ref --stdin` transaction; if it fails (one moved), one by one. The branches
/// that could not be deleted, with git's reason (logged here, at debug: keeping one is no error).
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
            tracing::debug!(%branch, error = %e, "keeping a merged branch");
            kept.push((branch.clone(), e));
        }
    }
    kept
}

/// Readies the scratch clone at `dir` for the next gate: made once with `git clone --shared`
/// (nothing checked out), then emptied of whatever an earlier gate left (`git clean -ffdx`).
/// One that borrows from another repository than `repo` (its project moved to another, or a
/// project of the same slug was deleted and made again) is made again: its merges' objects
/// must land in `repo`. It needs no merge commit, so the queue runs it while the merge is made.
pub async fn clear_scratch(repo: &Path, dir: &Path) -> Result<(), GitError> {
    if !borrows_from(dir, repo) {
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

/// Whether the scratch clone at `dir` is there and borrows its objects from `repo`: its
/// alternates name `repo`'s object store as `git clone --shared` wrote it, and that store is
/// there. (A repository whose `.git` is a file naming another directory is taken as it is.)
/// Gates ran in this clone: its `.git` and the file are read without following a link, and
/// anything else where they should be means a clone made again.
fn borrows_from(dir: &Path, repo: &Path) -> bool {
    let Ok(scratch) = AgentWritable::open(dir) else { return false };
    if !matches!(scratch.kind(".git"), Ok(Some(kind)) if kind.is_dir()) {
        return false;
    }
    let alternates = scratch.read_string(".git/objects/info/alternates").ok().flatten().unwrap_or_default();
    let named: Vec<&Path> = alternates.lines().map(|line| Path::new(line.trim())).collect();
    if !named.iter().all(|objects| objects.is_dir()) {
        return false;
    }
    let objects = match (repo.join(".git").is_dir(), repo.join("objects").is_dir()) {
        (true, _) => repo.join(".git").join("objects"),
        (false, true) => repo.join("objects"),
        (false, false) => return true,
    };
    named.contains(&objects.as_path())
}

/// Checks the cleared scratch clone at `dir` out at `commit`: the gate sees exactly the merge.
pub async fn checkout_scratch(dir: &Path, commit: &str) -> Result<(), GitError> {
    git(dir, &["checkout", "--quiet", "--force", "--detach", commit]).await?;
    Ok(())
}

/// What merging a wish in the scratch clone gave ([`merge_in_scratch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScratchMerge {
    /// The merge commit, checked out in the scratch clone, its objects in the project's repository.
    Merged(String),
    /// The wish's commit is in the base already: nothing to merge.
    AlreadyIn,
    /// The merge conflicts; the scratch clone is back at the base.
    Conflicts,
}

/// Merges `wish` into `base` where the gate runs: `git merge --no-ff` in the scratch clone at
/// `dir` (checked out at `base` first unless `ready` says it is there, cleared since its last
/// gate), by `(name, email)`, with no hooks, writing its objects into the project's repository
/// (the object store the scratch clone borrows from), so the target can move to the merge
/// commit. One git run where the merge made in memory and then checked out took three.
pub async fn merge_in_scratch(
    repo: &Path,
    dir: &Path,
    (base, wish): (&str, &str),
    message: &str,
    who: (&str, &str),
    ready: bool,
) -> Result<ScratchMerge, GitError> {
    if !ready || scratch_head(dir).as_deref() != Some(base) {
        clear_scratch(repo, dir).await?;
        git(dir, &["checkout", "--quiet", "--force", "--detach", base]).await?;
    }
    let objects = std::fs::read_to_string(dir.join(".git/objects/info/alternates"))?;
    let objects = objects.lines().next().unwrap_or_default().trim().to_owned();
    let args = [
        "-c",
        "core.hooksPath=/dev/null",
        "merge",
        "--quiet",
        "--no-ff",
        "--no-log",
        "--no-verify",
        "--no-edit",
        "-m",
        message,
        wish,
    ];
    let mut merge = super::command(dir, &args).await;
    merge.env("GIT_OBJECT_DIRECTORY", &objects);
    super::as_identity(&mut merge, who);
    let output = merge.output().await?;
    if !output.status.success() {
        if dir.join(".git/MERGE_HEAD").exists() {
            git(dir, &["merge", "--abort"]).await?;
            return Ok(ScratchMerge::Conflicts);
        }
        return Err(GitError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    match scratch_head(dir) {
        Some(head) if head == base => Ok(ScratchMerge::AlreadyIn),
        Some(head) => Ok(ScratchMerge::Merged(head)),
        None => Err(GitError::Failed { args: args.join(" "), stderr: "no HEAD after the merge".into() }),
    }
}

/// Puts the scratch clone back as its last merge left it after a gate ran there (`git reset
/// --hard`, then `git clean -ffdx`): a gate may change tracked files and leave others.
pub async fn tidy_scratch(dir: &Path) -> Result<(), GitError> {
    git(dir, &["reset", "--quiet", "--hard"]).await?;
    git(dir, &["clean", "--quiet", "-ffdx"]).await?;
    Ok(())
}

/// The commit checked out (detached) in the scratch clone at `dir`, read from its `HEAD`.
fn scratch_head(dir: &Path) -> Option<String> {
    let head = std::fs::read_to_string(dir.join(".git/HEAD")).ok()?;
    let head = head.trim();
    (head.len() >= 40 && head.bytes().all(|b| b.is_ascii_hexdigit())).then(|| head.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::git::branches::{head, is_ancestor, merge_as, Merge};
    use crate::git::clones::tests::{commit, project_repo};

    /// What git's `%(worktreepath)` says of each branch, as [`checked_out`] reads it.
    async fn git_says(repo: &Path) -> HashMap<String, PathBuf> {
        let listed = super::heads(repo, &[]).await.unwrap();
        listed.into_iter().filter_map(|(b, h)| Some((b, h.checked_out_at?.canonicalize().unwrap()))).collect()
    }

    fn files_say(repo: &Path) -> HashMap<String, PathBuf> {
        let found = checked_out(repo).expect("a plain repository");
        found.into_iter().map(|(b, p)| (b, p.canonicalize().unwrap())).collect()
    }

    #[tokio::test]
    async fn the_checked_out_branches_read_from_git_files_are_those_git_lists() {
        let dir = tempfile::tempdir().unwrap();
        let repo = project_repo(dir.path()).await;
        for branch in ["wish/a", "wish/b", "wish/c"] {
            git(&repo, &["branch", branch]).await.unwrap();
        }
        let linked = dir.path().join("linked");
        git(&repo, &["worktree", "add", "--quiet", &linked.to_string_lossy(), "wish/a"]).await.unwrap();
        let detached = dir.path().join("detached");
        git(&repo, &["worktree", "add", "--quiet", "--detach", &detached.to_string_lossy(), "main"]).await.unwrap();
        let pruned = dir.path().join("pruned");
        git(&repo, &["worktree", "add", "--quiet", &pruned.to_string_lossy(), "wish/b"]).await.unwrap();
        std::fs::remove_dir_all(&pruned).unwrap();
        let says = files_say(&repo);
        assert_eq!(says, git_says(&repo).await);
        assert_eq!(says.len(), 2, "main here and wish/a in the linked tree: {says:?}");
        assert_eq!(says["wish/a"], linked.canonicalize().unwrap());

        // The user checks the target out elsewhere: seen at once.
        git(&linked, &["checkout", "--quiet", "wish/c"]).await.unwrap();
        git(&repo, &["checkout", "--quiet", "--detach"]).await.unwrap();
        assert_eq!(files_say(&repo), git_says(&repo).await);
        assert!(!files_say(&repo).contains_key("main"), "a detached HEAD has no branch");

        let bare = dir.path().join("bare.git");
        git(dir.path(), &["clone", "--quiet", "--bare", &repo.to_string_lossy(), &bare.to_string_lossy()])
            .await
            .unwrap();
        assert!(files_say(&bare).is_empty(), "a bare HEAD is no working tree");
        let tree = dir.path().join("of-bare");
        git(&bare, &["worktree", "add", "--quiet", &tree.to_string_lossy(), "wish/c"]).await.unwrap();
        assert_eq!(files_say(&bare), git_says(&bare).await);
        assert_eq!(files_say(&bare).len(), 1);

        assert_eq!(checked_out(&linked), None, "a linked tree's `.git` is a file: git is asked then");
        assert_eq!(checked_out(dir.path()), None, "not a repository");
    }

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
        let gone = vec![("group/b/none".to_owned(), heads["wish/b"].clone())];
        assert!(
            !move_and_delete(&repo, "main", &with_b, &main_now, "test", &gone).await.unwrap(),
            "a doomed one is gone"
        );
        assert_eq!(head(&repo, "main").await.unwrap().as_deref(), Some(main_now.as_str()));
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

    #[tokio::test]
    async fn a_merge_in_the_scratch_clone_lands_its_objects_in_the_repository_and_leaves_no_merge_half_done() {
        let dir = tempfile::tempdir().unwrap();
        let repo = project_repo(dir.path()).await;
        git(&repo, &["checkout", "--quiet", "-b", "wish/a"]).await.unwrap();
        std::fs::write(repo.join("a.txt"), "a\n").unwrap();
        commit(&repo, "a").await;
        git(&repo, &["checkout", "--quiet", "-b", "wish/clash", "main"]).await.unwrap();
        std::fs::write(repo.join("README.md"), "theirs\n").unwrap();
        commit(&repo, "clash").await;
        git(&repo, &["checkout", "--quiet", "main"]).await.unwrap();
        std::fs::write(repo.join("README.md"), "ours\n").unwrap();
        commit(&repo, "ours").await;
        git(&repo, &["checkout", "--quiet", "-b", "elsewhere"]).await.unwrap();
        let heads = branch_heads(&repo).await.unwrap();
        let (main, scratch) = (heads["main"].clone(), dir.path().join("scratch"));
        let who = MERGE_QUEUE;

        let merged = merge_in_scratch(&repo, &scratch, (&main, &heads["wish/a"]), "Merge a", who, false).await.unwrap();
        let ScratchMerge::Merged(commit) = merged else { panic!("a clean merge: {merged:?}") };
        // The repository has the commit (the target can move to it), with both parents.
        let parents = git(&repo, &["rev-list", "--parents", "-n", "1", &commit]).await.unwrap();
        assert_eq!(parents.split_whitespace().count(), 3, "{parents}");
        let author = git(&repo, &["log", "-1", "--format=%an <%ae> %s", &commit]).await.unwrap();
        assert_eq!(author.trim(), "Switchyard merge queue <merge-queue@switchyard.invalid> Merge a");
        assert!(scratch.join("a.txt").is_file(), "checked out where the gate runs");

        // A gate that changes a tracked file and leaves another: tidied, at the merge again.
        std::fs::write(scratch.join("README.md"), "changed by the gate\n").unwrap();
        std::fs::write(scratch.join("junk"), "x").unwrap();
        tidy_scratch(&scratch).await.unwrap();
        assert_eq!(std::fs::read_to_string(scratch.join("README.md")).unwrap(), "ours\n");
        assert!(!scratch.join("junk").exists());

        let already = merge_in_scratch(&repo, &scratch, (&commit, &heads["wish/a"]), "again", who, true).await.unwrap();
        assert_eq!(already, ScratchMerge::AlreadyIn);
        let clash =
            merge_in_scratch(&repo, &scratch, (&commit, &heads["wish/clash"]), "clash", who, true).await.unwrap();
        assert_eq!(clash, ScratchMerge::Conflicts);
        assert!(!scratch.join(".git/MERGE_HEAD").exists(), "no merge left half done");
        assert!(git(&scratch, &["status", "--porcelain"]).await.unwrap().is_empty());
        // Wherever the scratch clone was left, the next merge starts from its base.
        std::fs::write(scratch.join("junk"), "x").unwrap();
        let again = merge_in_scratch(&repo, &scratch, (&main, &heads["wish/a"]), "Merge a", who, true).await.unwrap();
        assert!(matches!(again, ScratchMerge::Merged(_)), "{again:?}");
        assert!(!scratch.join("junk").exists());
        assert_eq!(git(&repo, &["rev-parse", "main"]).await.unwrap().trim(), main, "no branch of the repository moved");
    }
}
