//! A wish's branches in the project's repository, moved without a working tree: the wish's
//! integration branch (`wish/<slug>`) and its groups' branches (`group/<slug>/<key>`; git cannot
//! hold both `wish/x` and `wish/x/y`). Merges are made in memory (`git merge-tree --write-tree`,
//! then `commit-tree`) and a branch only moves by compare-and-swap (`update-ref <new> <old>`),
//! so a branch is never left mid-merge, nor moved from under a concurrent change, and the user's
//! checked-out files are never touched.

use std::path::Path;

use super::{command, run as git, GitError};

/// The integration branch of wish `slug`.
pub fn wish_branch(slug: &str) -> String {
    format!("wish/{slug}")
}

/// The branch of group `key` of wish `slug`.
pub fn group_branch(slug: &str, key: &str) -> String {
    format!("group/{slug}/{key}")
}

/// The commit `branch` points at, or `None` when there is no such branch.
pub async fn head(repo: &Path, branch: &str) -> Result<Option<String>, GitError> {
    let reference = format!("refs/heads/{branch}^{{commit}}");
    match git(repo, &["rev-parse", "--verify", "--quiet", &reference]).await {
        Ok(out) => Ok(Some(out.trim().to_owned())),
        Err(GitError::Failed { stderr, .. }) if stderr.is_empty() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The commits the `N` branches point at (`None` for one that does not exist), from one git run.
pub async fn heads<const N: usize>(repo: &Path, branches: [&str; N]) -> Result<[Option<String>; N], GitError> {
    let patterns: Vec<String> = branches.iter().map(|b| format!("refs/heads/{b}")).collect();
    let listed = super::merge::heads(repo, &patterns).await?;
    Ok(branches.map(|b| listed.get(b).map(|h| h.commit.clone())))
}

/// Makes `branch` point at `commit` if it does not exist yet; answers where it points.
pub async fn create_if_missing(repo: &Path, branch: &str, commit: &str) -> Result<String, GitError> {
    if let Some(existing) = head(repo, branch).await? {
        return Ok(existing);
    }
    let reference = format!("refs/heads/{branch}");
    // The empty old value: only if the ref does not exist (a concurrent creator wins cleanly).
    match git(repo, &["update-ref", &reference, commit, ""]).await {
        Ok(_) => Ok(commit.to_owned()),
        Err(e) => head(repo, branch).await?.ok_or(e),
    }
}

/// Points `branch` at `commit` whatever it pointed at (a group branch nobody works on yet).
pub async fn reset(repo: &Path, branch: &str, commit: &str) -> Result<(), GitError> {
    git(repo, &["update-ref", &format!("refs/heads/{branch}"), commit]).await.map(drop)
}

/// Moves `branch` from `old` to `new`; fails if it no longer points at `old`.
pub async fn compare_and_swap(repo: &Path, branch: &str, new: &str, old: &str) -> Result<(), GitError> {
    git(repo, &["update-ref", &format!("refs/heads/{branch}"), new, old]).await.map(drop)
}

/// Deletes `branch` if it exists.
pub async fn delete(repo: &Path, branch: &str) -> Result<(), GitError> {
    if head(repo, branch).await?.is_none() {
        return Ok(());
    }
    git(repo, &["update-ref", "-d", &format!("refs/heads/{branch}")]).await.map(drop)
}

/// Whether commit `ancestor` is reachable from `descendant`.
pub async fn is_ancestor(repo: &Path, ancestor: &str, descendant: &str) -> Result<bool, GitError> {
    let output = command(repo, &["merge-base", "--is-ancestor", ancestor, descendant]).await.output().await?;
    match output.status.code() {
        Some(0) => Ok(true),
        Some(1) => Ok(false),
        _ => Err(GitError::Failed {
            args: "merge-base --is-ancestor".to_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        }),
    }
}

/// How many commits `head` has that `base` does not.
pub async fn commits_ahead(repo: &Path, base: &str, head: &str) -> Result<u32, GitError> {
    let range = format!("{base}..{head}");
    let out = git(repo, &["rev-list", "--count", &range]).await?;
    Ok(out.trim().parse().unwrap_or(0))
}

/// What merging one commit into another in memory gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merge {
    /// The merge commit (not on any branch yet).
    Clean(String),
    /// The files git could not combine.
    Conflicts(Vec<String>),
}

/// Who Switchyard's merges are made by, whoever runs it and whatever their git identity says.
pub const SWITCHYARD: (&str, &str) = ("Switchyard", "switchyard@localhost");

/// Merges commit `theirs` into commit `ours` without a working tree: a merge commit with both as
/// parents (never a fast-forward), or the conflicting files. Nothing moves; the caller swaps the
/// branch to the commit.
pub async fn merge(repo: &Path, ours: &str, theirs: &str, message: &str) -> Result<Merge, GitError> {
    merge_as(repo, ours, theirs, message, SWITCHYARD).await
}

/// [`merge`], with the commit made by `(name, email)`.
pub async fn merge_as(
    repo: &Path,
    ours: &str,
    theirs: &str,
    message: &str,
    who: (&str, &str),
) -> Result<Merge, GitError> {
    match merge_tree(repo, ours, theirs).await? {
        Ok(tree) => Ok(Merge::Clean(commit_merge(repo, &tree, ours, theirs, message, who).await?)),
        Err(files) => Ok(Merge::Conflicts(files)),
    }
}

/// The tree of merging commit `theirs` into commit `ours`, in memory (`git merge-tree
/// --write-tree`), or the files that conflict.
pub async fn merge_tree(repo: &Path, ours: &str, theirs: &str) -> Result<Result<String, Vec<String>>, GitError> {
    let args = ["merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs];
    let output = command(repo, &args).await.output().await?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    match output.status.code() {
        Some(0) => Ok(Ok(stdout.lines().next().unwrap_or("").trim().to_owned())),
        Some(1) => Ok(Err(super::conflicts::conflicted_files(&stdout))),
        _ => Err(GitError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        }),
    }
}

/// The merge commit of `tree` with parents `ours` and `theirs`, made by `(name, email)`.
pub async fn commit_merge(
    repo: &Path,
    tree: &str,
    ours: &str,
    theirs: &str,
    message: &str,
    who: (&str, &str),
) -> Result<String, GitError> {
    let args = ["commit-tree", tree, "-p", ours, "-p", theirs, "-m", message];
    let mut commit_tree = command(repo, &args).await;
    super::as_identity(&mut commit_tree, who);
    let commit = super::finished(&args, commit_tree.output().await?)?;
    Ok(commit.trim().to_owned())
}

/// The commit `branch` points at and that commit's tree, from one git run; `None` when there is
/// no such branch.
pub async fn head_and_tree(repo: &Path, branch: &str) -> Result<Option<(String, String)>, GitError> {
    let reference = format!("refs/heads/{branch}");
    let out = git(repo, &["for-each-ref", "--format=%(objectname) %(tree) %(refname)", &reference]).await?;
    // The pattern also matches branches below it as a folder: only the one named counts.
    let line = out.lines().find(|line| line.splitn(3, ' ').nth(2) == Some(reference.as_str()));
    Ok(line.and_then(|line| {
        let mut fields = line.split(' ');
        Some((fields.next()?.to_owned(), fields.next()?.to_owned()))
    }))
}

/// The message of `commit` (a full hash), as git has it.
pub async fn message(repo: &Path, commit: &str) -> Result<String, GitError> {
    let object = format!("{commit}^{{commit}}");
    Ok(git(repo, &["show", "--no-patch", "--format=%B", &object]).await?.trim_end().to_owned())
}

/// The diff of `head` against its merge base with `base`: a `--stat` summary, then the patch.
pub async fn diff(repo: &Path, base: &str, head: &str) -> Result<(String, String), GitError> {
    let range = format!("{base}...{head}");
    let stat = git(repo, &["diff", "--stat", "--no-color", &range]).await?;
    let patch = git(repo, &["diff", "--no-color", "--no-ext-diff", &range]).await?;
    Ok((stat, patch))
}

/// One file changed on a branch: its path, the lines added and removed (`None` for a binary
/// file), and its patch (from its `diff --git` line on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: String,
    pub added: Option<u32>,
    pub removed: Option<u32>,
    pub patch: String,
}

/// The files `head` changes against its merge base with `base`, each with its +/− counts and its
/// own patch. Renames are shown as a deletion and an addition, so every file has one path.
pub async fn changes(repo: &Path, base: &str, head: &str) -> Result<Vec<FileChange>, GitError> {
    let range = format!("{base}...{head}");
    let numstat = git(repo, &["diff", "--numstat", "-z", "--no-renames", "--no-color", &range]).await?;
    let patch = git(repo, &["diff", "--no-color", "--no-ext-diff", "--no-renames", &range]).await?;
    Ok(split_changes(&numstat, &patch))
}

/// Pairs `git diff --numstat -z` records with the per-file parts of the patch: git lists the
/// files in the same order in both.
fn split_changes(numstat: &str, patch: &str) -> Vec<FileChange> {
    let mut patches: Vec<String> = Vec::new();
    for line in patch.split_inclusive('\n') {
        match patches.last_mut() {
            Some(current) if !line.starts_with("diff --git ") => current.push_str(line),
            _ => patches.push(line.to_owned()),
        }
    }
    let mut patches = patches.into_iter();
    numstat
        .split('\0')
        .filter(|record| !record.is_empty())
        .filter_map(|record| {
            let mut parts = record.splitn(3, '\t');
            let (added, removed, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some(FileChange {
                path: path.trim_start_matches('\n').to_owned(),
                added: added.trim().parse().ok(),
                removed: removed.trim().parse().ok(),
                patch: patches.next().unwrap_or_default(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_gets_its_counts_and_its_own_patch() {
        let numstat = "2\t1\tsrc/a.rs\0-\t-\tlogo.png\0";
        let patch = "diff --git a/src/a.rs b/src/a.rs\n@@ -1 +1,2 @@\n-old\n+new\n+more\n\
                     diff --git a/logo.png b/logo.png\nBinary files differ\n";
        let files = split_changes(numstat, patch);
        assert_eq!(files.len(), 2);
        assert_eq!((files[0].path.as_str(), files[0].added, files[0].removed), ("src/a.rs", Some(2), Some(1)));
        assert!(files[0].patch.starts_with("diff --git a/src/a.rs") && files[0].patch.ends_with("+more\n"));
        assert_eq!((files[1].path.as_str(), files[1].added, files[1].removed), ("logo.png", None, None));
        assert!(files[1].patch.contains("Binary files differ"));
        assert!(split_changes("", "").is_empty());
    }

    #[tokio::test]
    async fn heads_are_read_together_and_a_missing_branch_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let repo = crate::git::clones::tests::project_repo(dir.path()).await;
        let main = head(&repo, "main").await.unwrap().expect("main");
        create_if_missing(&repo, "wish/x", &main).await.unwrap();
        // `wish/x` is a prefix of nothing here; `wish` alone names no branch (only a folder).
        let [m, w, none, folder] = heads(&repo, ["main", "wish/x", "wish/y", "wish"]).await.unwrap();
        assert_eq!((m.as_deref(), w.as_deref()), (Some(main.as_str()), Some(main.as_str())));
        assert_eq!((none, folder), (None, None));

        let (commit, tree) = head_and_tree(&repo, "wish/x").await.unwrap().expect("wish/x");
        assert_eq!(commit, main);
        assert_eq!(tree, git(&repo, &["rev-parse", "main^{tree}"]).await.unwrap().trim());
        assert_eq!(head_and_tree(&repo, "wish").await.unwrap(), None, "a folder of branches is none");
        // Merging an ancestor gives the branch's own tree (integration relies on it to skip a group
        // merged already): here, main into wish/x.
        assert_eq!(merge_tree(&repo, "wish/x", "main").await.unwrap(), Ok(tree));
    }
}
