//! Agents' clones: `git clone --shared` of the project's repository under
//! `<data_dir>/clones/<agent-name>`, on the agent's own branch; never `git worktree` (an agent
//! could flip `core.bare` in a shared `.git` and corrupt the project's repository).
//!
//! Before a clone is removed, [`unmerged_work`] says what would be lost: commits not in the
//! project's target branch (and how many are not pushed anywhere) and uncommitted files.

use serde::Serialize;
use std::path::{Path, PathBuf};

use super::{run as git, GitError};
use crate::agent_writable::AgentWritable;

/// Where an agent's clone lives.
pub fn clone_dir(data_dir: &Path, agent_name: &str) -> PathBuf {
    data_dir.join("clones").join(agent_name)
}

/// Where a team's clone lives on the node that runs its agents.
pub fn team_clone_dir(data_dir: &Path, team: &str) -> PathBuf {
    data_dir.join("teams").join(team)
}

/// The branch an agent works on when none is given.
pub fn default_branch(agent_name: &str) -> String {
    format!("switchyard/{agent_name}")
}

/// Makes the agent's clone at `dest` from `repo`, on `branch` started from `origin/<target_branch>`
/// (or following `origin/<branch>` when the repository already has that branch). A clone that is
/// already there (a resumed agent) is kept as it is.
///
/// The clone is made beside `dest` and moved there once checked out, so `dest` exists only
/// whole. A worker killed while making it (SIGKILL, then a restart that spawns the agent again)
/// leaves a partial directory, never a `dest` that looks made: its `git clone` and `git checkout`
/// run on after it died, and an agent started in a half-made `dest` worked on the default
/// branch with nothing checked out, until the orphaned checkout switched its branch under it
/// (its commit then left behind, its `group done` refused for good). The next attempt makes its
/// own partial directory and removes the ones left before.
#[tracing::instrument(skip_all, fields(dest = %dest.display(), branch = %branch), err(level = "debug"))]
pub async fn make(repo: &Path, dest: &Path, branch: &str, target_branch: &str) -> Result<(), GitError> {
    // The agent can write its clone: a `.git` it replaced with a link is not its clone's.
    match tokio::fs::symlink_metadata(dest.join(".git")).await {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => {
            let message = format!("{}/.git is not a directory (a link?); not using this clone", dest.display());
            return Err(std::io::Error::other(message).into());
        }
        Err(_) => {}
    }
    let (parent, name) = match (dest.parent(), dest.file_name()) {
        (Some(parent), Some(name)) => (parent, name.to_string_lossy()),
        _ => return Err(std::io::Error::other(format!("no clone can be made at {}", dest.display())).into()),
    };
    // Owner-only: clones hold the project's code and what the agents wrote.
    tokio::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).await?;
    let prefix = partial_prefix(&name);
    remove_partials(parent, &prefix).await;
    let partial = parent.join(format!("{prefix}{}", uuid::Uuid::new_v4().simple()));
    let made = match clone_into(repo, parent, &partial, branch, target_branch).await {
        Ok(()) => tokio::fs::rename(&partial, dest).await.map_err(GitError::from),
        Err(e) => Err(e),
    };
    if made.is_err() {
        let _ = tokio::fs::remove_dir_all(&partial).await;
    }
    made
}

/// What the partial directories of the clone named `name` start with (hidden beside it).
fn partial_prefix(name: &str) -> String {
    format!(".{name}.partial-")
}

/// Removes the partial directories `prefix` names in `parent`: what an earlier, interrupted
/// attempt left (a git it left running there may still write; then some of it stays).
async fn remove_partials(parent: &Path, prefix: &str) {
    let Ok(mut entries) = tokio::fs::read_dir(parent).await else { return };
    while let Ok(Some(entry)) = entries.next_entry().await {
        if entry.file_name().to_string_lossy().starts_with(prefix) {
            if let Err(e) = tokio::fs::remove_dir_all(entry.path()).await {
                tracing::debug!(dir = %entry.path().display(), error = %e, "removing a partial clone");
            }
        }
    }
}

/// `git clone --shared` of `repo` into `dest`, checked out on `branch`.
///
/// The clone takes only the branch it starts from: the repository may hold thousands of branches
/// (every group of every wish), and a clone of all of them has `git upload-pack` list every one
/// (with 2,000 branches, 69 ms a clone against 30). Its fetch refspec is then set back to every
/// branch, so a later `git fetch` (an agent merging the wish's branch, the check before removal)
/// sees them all.
async fn clone_into(
    repo: &Path,
    parent: &Path,
    dest: &Path,
    branch: &str,
    target_branch: &str,
) -> Result<(), GitError> {
    let (repo_arg, dest_arg) = (repo.to_string_lossy(), dest.to_string_lossy());
    // A branch the repository has is cloned checked out, following `origin/<branch>`.
    let existing = branch_exists(repo, branch).await?;
    let start = if existing { branch } else { target_branch };
    let mut args = vec!["clone", "--quiet", "--shared", "--single-branch", "--branch", start];
    if !existing {
        args.push("--no-checkout");
    }
    args.extend(["--", repo_arg.as_ref(), dest_arg.as_ref()]);
    git(parent, &args).await?;
    if !existing {
        let start = format!("origin/{target_branch}");
        // -B: the clone's one local branch is the target branch, which may be `branch` itself.
        git(dest, &["checkout", "--quiet", "-B", branch, &start]).await?;
    }
    git(dest, &["config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"]).await?;
    Ok(())
}

/// Whether `repo` has a local branch named `branch`.
pub async fn branch_exists(repo: &Path, branch: &str) -> Result<bool, GitError> {
    let reference = format!("refs/heads/{branch}");
    match git(repo, &["rev-parse", "--verify", "--quiet", &reference]).await {
        Ok(_) => Ok(true),
        // `--quiet` fails without a message when the ref is missing; anything else is a real error.
        Err(GitError::Failed { stderr, .. }) if stderr.is_empty() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Work in a clone that removing it would lose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct UnmergedWork {
    /// The branch checked out (None when detached).
    pub branch: Option<String>,
    /// The project's target branch it was compared with.
    pub target_branch: String,
    /// Commits on the clone's branches (or HEAD) that the target branch does not have.
    pub commits_ahead: u32,
    /// Of those, commits on no branch of the project's repository at all.
    pub unpushed: u32,
    /// Changed, staged or untracked files, as `git status --porcelain` names them.
    pub dirty_files: Vec<String>,
}

impl UnmergedWork {
    /// One sentence saying exactly what is unmerged.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.commits_ahead > 0 {
            let branch = self.branch.as_deref().map(|b| format!("branch `{b}`")).unwrap_or_else(|| "HEAD".into());
            let plural = if self.commits_ahead == 1 { "" } else { "s" };
            parts.push(format!(
                "{branch} has {} commit{plural} not in `{}` ({} not pushed)",
                self.commits_ahead, self.target_branch, self.unpushed
            ));
        }
        if !self.dirty_files.is_empty() {
            let plural = if self.dirty_files.len() == 1 { "" } else { "s" };
            parts.push(format!("{} uncommitted file{plural}: {}", self.dirty_files.len(), self.dirty_files.join(", ")));
        }
        parts.join("; ")
    }
}

/// What removing the clone would lose, or `None` when nothing would (or there is no clone). The
/// clone first fetches from the project's repository `repo`, so work merged there since counts as
/// merged: from `repo` itself, not from the URL the clone's configuration names (its agent
/// wrote it), and only into a `.git` directory the clone has (not through a link or a file
/// naming another repository, whose branches the fetch would prune).
#[tracing::instrument(skip_all, fields(clone = %clone.display()), err(level = "debug"))]
pub async fn unmerged_work(clone: &Path, repo: &Path, target_branch: &str) -> Result<Option<UnmergedWork>, GitError> {
    let Ok(clone_git) = std::fs::symlink_metadata(clone.join(".git")) else {
        return if clone.exists() { Err(not_a_clone(clone)) } else { Ok(None) };
    };
    if !clone_git.is_dir() {
        return Err(not_a_clone(clone));
    }
    let repo = repo.to_string_lossy();
    git(clone, &["fetch", "--quiet", "--prune", "--", &repo, "+refs/heads/*:refs/remotes/origin/*"]).await?;
    let target = format!("refs/remotes/origin/{target_branch}");
    let count = |text: String| text.trim().parse::<u32>().unwrap_or(0);
    let ahead = count(git(clone, &["rev-list", "--count", "HEAD", "--branches", "--not", &target]).await?);
    let unpushed =
        count(git(clone, &["rev-list", "--count", "HEAD", "--branches", "--not", "--remotes=origin"]).await?);
    let status = git(clone, &["status", "--porcelain", "--untracked-files=all"]).await?;
    let dirty_files: Vec<String> =
        status.lines().filter(|l| l.len() > 3).map(|l| l[3..].trim_matches('"').to_owned()).collect();
    if ahead == 0 && dirty_files.is_empty() {
        return Ok(None);
    }
    let branch = git(clone, &["symbolic-ref", "--quiet", "--short", "HEAD"]).await.ok().map(|b| b.trim().to_owned());
    Ok(Some(UnmergedWork {
        branch,
        target_branch: target_branch.to_owned(),
        commits_ahead: ahead,
        unpushed,
        dirty_files,
    }))
}

fn not_a_clone(clone: &Path) -> GitError {
    std::io::Error::other(format!("{} has no `.git` directory of its own", clone.display())).into()
}

/// Removes the clone directory (gone already is fine).
#[tracing::instrument(skip_all, fields(clone = %clone.display()), err(level = "debug"))]
pub async fn remove(clone: &Path) -> Result<(), GitError> {
    match tokio::fs::remove_dir_all(clone).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// Writes `text` to each of `files` in the clone's root that is not there already, and lists
/// them in `.git/info/exclude` so they never end up in the agent's commits (a file the
/// repository itself has, or a link, is left as it is: nothing is written through it).
pub fn write_excluded(clone: &Path, files: &[&str], text: &str) -> std::io::Result<()> {
    let clone = AgentWritable::open(clone)?;
    let mut written = Vec::new();
    for file in files {
        if clone.create_new(file, text.as_bytes(), 0o644)? {
            written.push(format!("/{file}"));
        }
    }
    let lines: Vec<&str> = written.iter().map(String::as_str).collect();
    exclude(&clone, &lines)
}

/// Adds each of `lines` that is not there yet to the clone's `.git/info/exclude`. A clone with
/// no `.git` directory (none, or a linked worktree's `.git` file) has nothing to add to; a link
/// there, or anything but a file at `exclude`, is refused, never followed.
pub fn exclude(clone: &AgentWritable, lines: &[&str]) -> std::io::Result<()> {
    use rustix::fs::FileType;
    match clone.kind(".git")? {
        None | Some(FileType::RegularFile) => return Ok(()),
        Some(_) => {}
    }
    let info = clone.create_dir(".git/info", 0o755)?;
    let listed = info.read_string("exclude")?.unwrap_or_default();
    let mut add = String::new();
    for line in lines {
        if !listed.lines().any(|l| l.trim() == *line) && !add.lines().any(|l| l == *line) {
            add.push_str(line);
            add.push('\n');
        }
    }
    if add.is_empty() {
        return Ok(());
    }
    let sep = if listed.is_empty() || listed.ends_with('\n') { "" } else { "\n" };
    info.replace("exclude", format!("{listed}{sep}{add}").as_bytes(), 0o644)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A repository with one commit on `main`, as a project's would be.
    pub(crate) async fn project_repo(dir: &Path) -> PathBuf {
        let repo = dir.join("project");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "--quiet", "--initial-branch=main"]).await.unwrap();
        std::fs::write(repo.join("README.md"), "hello\n").unwrap();
        commit(&repo, "first").await;
        repo
    }

    pub(crate) async fn commit(dir: &Path, message: &str) {
        git(dir, &["add", "-A"]).await.unwrap();
        git(dir, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", message]).await.unwrap();
    }

    #[tokio::test]
    async fn a_clone_is_shared_and_on_the_agents_branch_from_the_target() {
        let dir = tempfile::tempdir().unwrap();
        let repo = project_repo(dir.path()).await;
        let dest = clone_dir(dir.path(), "fox");
        git(&repo, &["branch", "wish/other"]).await.unwrap();
        make(&repo, &dest, &default_branch("fox"), "main").await.unwrap();
        // It took only the branch it starts from, and a fetch brings the others (an agent told
        // to merge the wish's branch fetches it).
        let remotes = || async { git(&dest, &["branch", "-r", "--format=%(refname:short)"]).await.unwrap() };
        assert!(!remotes().await.contains("wish/other"), "{}", remotes().await);
        git(&dest, &["fetch", "--quiet", "origin"]).await.unwrap();
        assert!(remotes().await.lines().any(|b| b == "origin/wish/other"), "{}", remotes().await);
        assert!(dest.join("README.md").is_file());
        assert!(dest.join(".git/objects/info/alternates").is_file(), "--shared borrows the project's objects");
        assert!(!dest.join(".git").is_file(), "a real clone, not a worktree");
        let branch = git(&dest, &["symbolic-ref", "--short", "HEAD"]).await.unwrap();
        assert_eq!(branch.trim(), "switchyard/fox");
        assert_eq!(unmerged_work(&dest, &repo, "main").await.unwrap(), None);
        // Making it again (a resume) keeps what is there.
        std::fs::write(dest.join("notes.txt"), "x").unwrap();
        make(&repo, &dest, "switchyard/fox", "main").await.unwrap();
        assert!(dest.join("notes.txt").is_file());
    }

    /// The hidden partial directories beside the clones in `dir`.
    fn partials(dir: &Path) -> Vec<String> {
        let names = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned());
        names.filter(|n| n.contains(".partial-")).collect()
    }

    #[tokio::test]
    async fn what_a_clone_cut_off_half_made_left_is_removed_and_the_next_attempt_makes_it_whole() {
        let dir = tempfile::tempdir().unwrap();
        let repo = project_repo(dir.path()).await;
        let dest = clone_dir(dir.path(), "fox");
        let clones = dest.parent().unwrap().to_path_buf();
        // A worker killed between `git clone` and the checkout: the clone, on `main`, with
        // nothing checked out, is all it left.
        std::fs::create_dir_all(&clones).unwrap();
        let left = clones.join(".fox.partial-killed");
        let (repo_arg, left_arg) = (repo.to_string_lossy(), left.to_string_lossy());
        git(&clones, &["clone", "--quiet", "--shared", "--no-checkout", "--", &repo_arg, &left_arg]).await.unwrap();
        make(&repo, &dest, "switchyard/fox", "main").await.unwrap();
        assert!(dest.join("README.md").is_file(), "checked out");
        let branch = git(&dest, &["symbolic-ref", "--short", "HEAD"]).await.unwrap();
        assert_eq!(branch.trim(), "switchyard/fox");
        assert_eq!(partials(&clones), Vec::<String>::new(), "what the killed attempt left is removed");
        // A clone that cannot be made leaves nothing behind either.
        let nowhere = dir.path().join("no-such-repository");
        make(&nowhere, &clone_dir(dir.path(), "owl"), "switchyard/owl", "main").await.unwrap_err();
        assert!(!clone_dir(dir.path(), "owl").exists());
        assert_eq!(partials(&clones), Vec::<String>::new());
    }

    #[tokio::test]
    async fn unmerged_commits_and_dirty_files_are_reported_until_merged() {
        let dir = tempfile::tempdir().unwrap();
        let repo = project_repo(dir.path()).await;
        let dest = clone_dir(dir.path(), "owl");
        make(&repo, &dest, "switchyard/owl", "main").await.unwrap();
        std::fs::write(dest.join("feature.rs"), "fn f() {}\n").unwrap();
        commit(&dest, "feature").await;
        std::fs::write(dest.join("wip.rs"), "todo\n").unwrap();
        let work = unmerged_work(&dest, &repo, "main").await.unwrap().expect("unmerged");
        assert_eq!(work.commits_ahead, 1);
        assert_eq!(work.unpushed, 1);
        assert_eq!(work.dirty_files, ["wip.rs"]);
        assert_eq!(work.branch.as_deref(), Some("switchyard/owl"));
        assert_eq!(
            work.describe(),
            "branch `switchyard/owl` has 1 commit not in `main` (1 not pushed); 1 uncommitted file: wip.rs"
        );
        // Pushed but not merged: still unmerged, no longer unpushed.
        std::fs::remove_file(dest.join("wip.rs")).unwrap();
        git(&dest, &["push", "--quiet", "origin", "switchyard/owl"]).await.unwrap();
        let work = unmerged_work(&dest, &repo, "main").await.unwrap().expect("unmerged");
        assert_eq!((work.commits_ahead, work.unpushed), (1, 0));
        // Merged into the project's main: nothing would be lost.
        git(&repo, &["merge", "--quiet", "--ff-only", "switchyard/owl"]).await.unwrap();
        assert_eq!(unmerged_work(&dest, &repo, "main").await.unwrap(), None);
        remove(&dest).await.unwrap();
        assert!(!dest.exists());
        remove(&dest).await.unwrap();
    }

    #[tokio::test]
    async fn removing_a_clone_removes_links_in_it_not_what_they_name() {
        let dir = tempfile::tempdir().unwrap();
        let repo = project_repo(dir.path()).await;
        let dest = clone_dir(dir.path(), "fox");
        make(&repo, &dest, "switchyard/fox", "main").await.unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), dest.join("planted")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("keep"), dest.join(".git/planted")).unwrap();
        remove(&dest).await.unwrap();
        assert!(!dest.exists());
        assert!(outside.path().join("keep").exists(), "removing the clone followed a link");
    }

    #[tokio::test]
    async fn a_clone_whose_git_directory_was_replaced_with_a_link_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let repo = project_repo(dir.path()).await;
        let dest = clone_dir(dir.path(), "fox");
        make(&repo, &dest, "switchyard/fox", "main").await.unwrap();
        std::fs::rename(dest.join(".git"), dir.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(repo.join(".git"), dest.join(".git")).unwrap();
        let refused = make(&repo, &dest, "switchyard/fox", "main").await.unwrap_err().to_string();
        assert!(refused.contains(".git is not a directory"), "{refused}");
    }

    #[test]
    fn instruction_files_and_the_exclude_list_are_never_written_through_links() {
        let (clone, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::create_dir_all(clone.path().join(".git/info")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("planted"), clone.path().join("CLAUDE.md")).unwrap();
        write_excluded(clone.path(), &["CLAUDE.md", "AGENTS.md"], "report with switchyard").unwrap();
        assert!(!outside.path().join("planted").exists(), "created outside the clone");
        assert_eq!(std::fs::read_to_string(clone.path().join("AGENTS.md")).unwrap(), "report with switchyard");
        let exclude = clone.path().join(".git/info/exclude");
        assert_eq!(std::fs::read_to_string(&exclude).unwrap(), "/AGENTS.md\n");

        let victim = outside.path().join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        std::fs::remove_file(&exclude).unwrap();
        std::os::unix::fs::symlink(&victim, &exclude).unwrap();
        std::fs::remove_file(clone.path().join("AGENTS.md")).unwrap();
        let refused = write_excluded(clone.path(), &["AGENTS.md"], "text").unwrap_err().to_string();
        assert!(refused.contains("exclude is a symbolic link"), "{refused}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n", "appended to through a link");
    }

    #[tokio::test]
    async fn an_existing_branch_in_the_project_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let repo = project_repo(dir.path()).await;
        git(&repo, &["checkout", "--quiet", "-b", "team/a"]).await.unwrap();
        std::fs::write(repo.join("team.txt"), "a\n").unwrap();
        commit(&repo, "team work").await;
        git(&repo, &["checkout", "--quiet", "main"]).await.unwrap();
        let dest = clone_dir(dir.path(), "cat");
        make(&repo, &dest, "team/a", "main").await.unwrap();
        assert!(dest.join("team.txt").is_file());
        assert!(branch_exists(&repo, "team/a").await.unwrap());
        assert!(!branch_exists(&repo, "team/b").await.unwrap());
    }
}
