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
    let output = match tokio::time::timeout(TIMEOUT, git_command(repo, &args).await.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Outcome::Unknown(format!("cannot run git: {e}")),
        Err(_) => return Outcome::Unknown("git took too long".to_owned()),
    };
    match output.status.code() {
        Some(0) => Outcome::Clean,
        // A conflicted merge still prints its tree; a commit git cannot find exits 1 with none.
        Some(1) if !output.stdout.is_empty() => {
            Outcome::Conflicts(conflicted_files(&String::from_utf8_lossy(&output.stdout)))
        }
        _ => Outcome::Unknown(String::from_utf8_lossy(&output.stderr).trim().to_owned()),
    }
}

/// The paths `head` changed since its merge base with `base` (`git diff --name-only --no-renames
/// base...head`: a rename is its two paths); `None` when git cannot say.
pub async fn changed_paths(repo: &Path, base: &str, head: &str) -> Option<Vec<String>> {
    let range = format!("{base}...{head}");
    let args = ["diff", "--name-only", "--no-renames", "-z", &range];
    let output = tokio::time::timeout(TIMEOUT, git_command(repo, &args).await.output()).await.ok()?.ok()?;
    output.status.success().then(|| {
        output
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect()
    })
}

/// Trial merges of many pairs of commits in one `git merge-tree --stdin`, answered in the order
/// asked: a queue of N entries needs one git run, not N. git stops at a pair it cannot merge (a
/// commit that is gone); that pair and the ones after it are asked one at a time.
pub async fn trial_merge_many(repo: &Path, pairs: &[(String, String)]) -> Vec<Outcome> {
    if pairs.is_empty() {
        return Vec::new();
    }
    let input: String = pairs.iter().map(|(a, b)| format!("{a} {b}\n")).collect();
    let args = ["merge-tree", "--stdin", "--name-only", "--no-messages"];
    let timeout = TIMEOUT * u32::try_from(pairs.len()).unwrap_or(u32::MAX).clamp(1, 10);
    let output =
        tokio::time::timeout(timeout, super::output_with_input(git_command(repo, &args).await, input.into_bytes()));
    let mut outcomes = match output.await {
        Ok(Ok(output)) => batch_outcomes(&output.stdout),
        _ => Vec::new(),
    };
    outcomes.truncate(pairs.len());
    for (a, b) in &pairs[outcomes.len()..] {
        outcomes.push(trial_merge_commits(repo, a, b).await);
    }
    outcomes
}

/// `merge-tree --stdin --name-only` answers each pair with NUL-separated fields: `1` (clean) or
/// `0` (conflicts), the tree id, each conflicted file (once per stage), then an empty field.
fn batch_outcomes(stdout: &[u8]) -> Vec<Outcome> {
    let mut fields = stdout.split(|b| *b == 0).map(|f| String::from_utf8_lossy(f).into_owned());
    let mut outcomes = Vec::new();
    while let (Some(status), Some(_tree)) = (fields.next(), fields.next()) {
        let files: Vec<String> = fields.by_ref().take_while(|f| !f.is_empty()).collect();
        match status.as_str() {
            "1" => outcomes.push(Outcome::Clean),
            "0" => {
                let mut files = files;
                files.sort();
                files.dedup();
                outcomes.push(Outcome::Conflicts(files));
            }
            _ => break,
        }
    }
    outcomes
}

/// The paths each of `heads` changed since it left `base`, from one `git log ^base heads…`:
/// the union of what its commits not in `base` changed (a merge commit counts what it brought
/// to its first parent). That is what `git diff --name-only base...head` ([`changed_paths`])
/// says, or more (a change undone later, what a merge of `base` brought in): never less, so a
/// pair these call disjoint is. `None` when git cannot say (a commit is gone).
pub async fn changed_paths_many(
    repo: &Path,
    base: &str,
    heads: &[String],
) -> Option<std::collections::HashMap<String, Vec<String>>> {
    use std::collections::{BTreeSet, HashMap};
    let not_base = format!("^{base}");
    let mut args = vec!["log", "--no-renames", "--name-only", "-z", "--diff-merges=first-parent", "--format=%x01%H %P"];
    args.push(&not_base);
    args.extend(heads.iter().map(String::as_str));
    let output = tokio::time::timeout(TIMEOUT, git_command(repo, &args).await.output()).await.ok()?.ok()?;
    if !output.status.success() {
        return None;
    }
    // Each commit not in `base`: its parents and the paths it changed.
    let mut commits: HashMap<String, (Vec<String>, Vec<String>)> = HashMap::new();
    for record in output.stdout.split(|b| *b == 1).skip(1) {
        let (header, paths) = record.split_at(record.iter().position(|b| *b == 0)?);
        let header = std::str::from_utf8(header).ok()?;
        let mut ids = header.split(' ').filter(|id| !id.is_empty());
        let id = ids.next().filter(|id| id.bytes().all(|b| b.is_ascii_hexdigit()))?;
        let parents = ids.map(str::to_owned).collect();
        let paths = paths
            .split(|b| *b == 0)
            .map(|p| p.strip_prefix(b"\n").unwrap_or(p))
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        commits.insert(id.to_owned(), (parents, paths));
    }
    let mut changed = HashMap::new();
    for head in heads {
        let (mut paths, mut seen, mut todo) = (BTreeSet::new(), std::collections::HashSet::new(), vec![head.as_str()]);
        while let Some(id) = todo.pop() {
            let Some((parents, touched)) = commits.get(id).filter(|_| seen.insert(id)) else { continue };
            paths.extend(touched.iter().cloned());
            todo.extend(parents.iter().map(String::as_str));
        }
        changed.insert(head.clone(), paths.into_iter().collect());
    }
    Some(changed)
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
    match tokio::time::timeout(TIMEOUT, git_command(repo, &args).await.output()).await {
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

    fn rev(dir: &Path, what: &str) -> String {
        let out = Command::new("git").arg("-C").arg(dir).args(["rev-parse", what]).output().expect("git");
        String::from_utf8(out.stdout).expect("utf-8").trim().to_owned()
    }

    #[tokio::test]
    async fn a_batch_answers_as_one_trial_merge_per_pair_and_changed_paths_as_the_diff_or_more() {
        let repo = tempfile::tempdir().expect("tempdir");
        let dir = repo.path();
        git(dir, &["init", "-q", "-b", "main"]);
        commit(dir, "a.txt", "one\n");
        for branch in ["left", "right", "apart", "merging"] {
            git(dir, &["branch", branch]);
        }
        git(dir, &["checkout", "-q", "left"]);
        commit(dir, "a.txt", "left\n");
        git(dir, &["checkout", "-q", "right"]);
        commit(dir, "a.txt", "right\n");
        commit(dir, "c.txt", "c\n");
        git(dir, &["checkout", "-q", "apart"]);
        std::fs::create_dir(dir.join("d")).expect("mkdir");
        commit(dir, "d/b.txt", "b\n");
        git(dir, &["checkout", "-q", "main"]);
        commit(dir, "m.txt", "main moved\n");
        // A branch that merged the target in, then changed a file of its own.
        git(dir, &["checkout", "-q", "merging"]);
        commit(dir, "e.txt", "e\n");
        git(dir, &["-c", "user.name=t", "-c", "user.email=t@t", "merge", "-q", "--no-edit", "main"]);
        commit(dir, "f.txt", "f\n");
        git(dir, &["checkout", "-q", "main"]);

        let ids: Vec<String> = ["main", "left", "right", "apart", "merging"].iter().map(|b| rev(dir, b)).collect();
        let gone = "0123456789abcdef0123456789abcdef01234567".to_owned();
        let pairs: Vec<(String, String)> = vec![
            (ids[1].clone(), ids[2].clone()),
            (ids[0].clone(), ids[3].clone()),
            (ids[1].clone(), gone.clone()),
            (ids[2].clone(), ids[1].clone()),
            (ids[0].clone(), ids[4].clone()),
        ];
        let batch = trial_merge_many(dir, &pairs).await;
        assert_eq!(batch.len(), pairs.len());
        for ((a, b), outcome) in pairs.iter().zip(&batch) {
            assert_eq!(*outcome, trial_merge_commits(dir, a, b).await, "{a} {b}");
        }
        assert_eq!(batch[0], Outcome::Conflicts(vec!["a.txt".to_owned()]));
        assert_eq!(batch[1], Outcome::Clean);
        assert!(matches!(batch[2], Outcome::Unknown(_)), "a commit that is gone: {:?}", batch[2]);
        assert_eq!(batch[3], batch[0], "the pairs after it are answered too");

        let heads = ids[1..].to_vec();
        let many = changed_paths_many(dir, &ids[0], &heads).await.expect("changed paths");
        for head in &heads {
            let diff = changed_paths(dir, &ids[0], head).await.expect("diff");
            assert!(diff.iter().all(|p| many[head].contains(p)), "{head}: {diff:?} within {:?}", many[head]);
        }
        assert_eq!(many[&ids[1]], ["a.txt"]);
        assert_eq!(many[&ids[2]], ["a.txt", "c.txt"]);
        assert_eq!(many[&ids[3]], ["d/b.txt"]);
        // What the merge of `main` brought counts too: more than the diff, never less.
        assert_eq!(many[&ids[4]], ["e.txt", "f.txt", "m.txt"]);
        assert!(changed_paths_many(dir, &gone, &heads).await.is_none(), "a base that is gone");
        let status = Command::new("git").arg("-C").arg(dir).args(["status", "--porcelain"]).output().expect("git");
        assert!(status.stdout.is_empty(), "the working tree is untouched");
    }
}
