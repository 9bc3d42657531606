//! Conflict prediction: would a wish's branch merge cleanly into the project's target branch, and
//! into the branches of the other wishes in flight? Asked of git itself with `git merge-tree
//! --write-tree` (git 2.38+), which merges in memory: the repository, its index and its working
//! tree are never touched.

use std::path::Path;
use std::time::Duration;

use super::command as git_command;

/// What a trial merge of two branches says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Clean,
    /// The files both sides changed in ways git cannot combine.
    Conflicts(Vec<String>),
    /// A branch is not in the repository (yet).
    Missing(String),
    /// git could not answer (not a repository, too old a git, a timeout).
    Unknown(String),
}

/// How long one trial merge may take before the prediction gives up on it.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Trial-merges branch `ours` with branch `theirs` in the repository at `repo`.
pub async fn trial_merge(repo: &Path, ours: &str, theirs: &str) -> Outcome {
    for branch in [ours, theirs] {
        match branch_exists(repo, branch).await {
            Ok(true) => {}
            Ok(false) => return Outcome::Missing(branch.to_owned()),
            Err(why) => return Outcome::Unknown(why),
        }
    }
    // Fully qualified names: a branch can never be mistaken for an option.
    trial_merge_commits(repo, &format!("refs/heads/{ours}"), &format!("refs/heads/{theirs}")).await
}

/// Trial-merges two commits (ids or fully qualified refs) in the repository at `repo`.
pub async fn trial_merge_commits(repo: &Path, ours: &str, theirs: &str) -> Outcome {
    let args = ["merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs];
    let output = match tokio::time::timeout(TIMEOUT, git_command(repo, &args).output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Outcome::Unknown(format!("cannot run git: {e}")),
        Err(_) => return Outcome::Unknown("git took too long".to_owned()),
    };
    match output.status.code() {
        Some(0) => Outcome::Clean,
        Some(1) => Outcome::Conflicts(conflicted_files(&String::from_utf8_lossy(&output.stdout))),
        _ => Outcome::Unknown(String::from_utf8_lossy(&output.stderr).trim().to_owned()),
    }
}

/// The paths `head` changed since its merge base with `base` (`git diff --name-only --no-renames
/// base...head`: a rename is its two paths); `None` when git cannot say.
pub async fn changed_paths(repo: &Path, base: &str, head: &str) -> Option<Vec<String>> {
    let range = format!("{base}...{head}");
    let args = ["diff", "--name-only", "--no-renames", "-z", &range];
    let output = tokio::time::timeout(TIMEOUT, git_command(repo, &args).output()).await.ok()?.ok()?;
    output.status.success().then(|| {
        output
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect()
    })
}

/// Whether two sets of changed paths can conflict at all: a path both changed, or a path one
/// changed that is a directory of a path the other changed (file/directory). Without either,
/// git merges the two cleanly — no trial merge needed.
pub fn may_conflict(a: &[String], b: &[String]) -> bool {
    use std::collections::HashSet;
    let paths: HashSet<&str> = a.iter().map(String::as_str).collect();
    let dirs: HashSet<&str> = a.iter().flat_map(|p| p.match_indices('/').map(move |(i, _)| &p[..i])).collect();
    b.iter().any(|p| {
        paths.contains(p.as_str())
            || dirs.contains(p.as_str())
            || p.match_indices('/').any(|(i, _)| paths.contains(&p[..i]))
    })
}

async fn branch_exists(repo: &Path, branch: &str) -> Result<bool, String> {
    let reference = format!("refs/heads/{branch}");
    let args = ["rev-parse", "--verify", "--quiet", &reference];
    match tokio::time::timeout(TIMEOUT, git_command(repo, &args).output()).await {
        Ok(Ok(output)) => Ok(output.status.success()),
        Ok(Err(e)) => Err(format!("cannot run git: {e}")),
        Err(_) => Err("git took too long".to_owned()),
    }
}

/// `merge-tree --name-only` prints the tree id, then each conflicted file (once per stage).
pub(super) fn conflicted_files(stdout: &str) -> Vec<String> {
    let mut files: Vec<String> =
        stdout.lines().skip(1).map(str::trim).take_while(|l| !l.is_empty()).map(str::to_owned).collect();
    files.sort();
    files.dedup();
    files
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git").arg("-C").arg(dir).args(args).status().expect("git").success();
        assert!(ok, "git {args:?}");
    }

    fn commit(dir: &Path, file: &str, text: &str) {
        std::fs::write(dir.join(file), text).expect("write");
        git(dir, &["add", file]);
        git(dir, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", file]);
    }

    #[test]
    fn only_a_common_path_or_a_file_where_the_other_has_a_directory_may_conflict() {
        let paths = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(!may_conflict(&paths(&["src/a.rs", "README.md"]), &paths(&["src/b.rs", "docs/x.md"])));
        assert!(may_conflict(&paths(&["src/a.rs"]), &paths(&["docs/x.md", "src/a.rs"])));
        assert!(may_conflict(&paths(&["src"]), &paths(&["src/a.rs"])), "a file where the other has a directory");
        assert!(may_conflict(&paths(&["src/a.rs"]), &paths(&["src"])));
        assert!(!may_conflict(&paths(&["src/a"]), &paths(&["src/ab"])));
        assert!(!may_conflict(&[], &paths(&["a"])));
    }

    #[tokio::test]
    async fn a_trial_merge_names_the_conflicting_files_and_touches_nothing() {
        let repo = tempfile::tempdir().expect("tempdir");
        let dir = repo.path();
        git(dir, &["init", "-q", "-b", "main"]);
        commit(dir, "a.txt", "one\n");
        git(dir, &["branch", "left"]);
        git(dir, &["branch", "right"]);
        git(dir, &["branch", "elsewhere"]);
        git(dir, &["checkout", "-q", "left"]);
        commit(dir, "a.txt", "left\n");
        git(dir, &["checkout", "-q", "right"]);
        commit(dir, "a.txt", "right\n");
        git(dir, &["checkout", "-q", "elsewhere"]);
        commit(dir, "b.txt", "b\n");

        assert_eq!(trial_merge(dir, "left", "right").await, Outcome::Conflicts(vec!["a.txt".to_owned()]));
        assert_eq!(trial_merge(dir, "left", "elsewhere").await, Outcome::Clean);
        assert_eq!(trial_merge(dir, "left", "nope").await, Outcome::Missing("nope".to_owned()));
        let status = Command::new("git").arg("-C").arg(dir).args(["status", "--porcelain"]).output().expect("git");
        assert!(status.stdout.is_empty(), "the working tree is untouched");
    }
}
