//! An agent's branch arriving as a git bundle (its clone's HEAD, made by `switchyard group|fix|task
//! done` inside its sandbox, which cannot write the project's repository). The bundle is data
//! from an untrusted agent: it is verified against the repository, its objects are checked as
//! they are fetched, and its HEAD lands first on a ref of its own, so the branch only moves by
//! compare-and-swap once the rules allow it (a fast-forward, unless forced).

use std::path::Path;

use super::branches;
use super::remote::{push, Pushed, Remote, Update};
use super::{run as git, GitError};

/// Why a bundle was not taken.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Not a bundle, one whose prerequisite commits the repository lacks, or without a HEAD commit.
    #[error("{0}")]
    Invalid(String),
    /// The branch has commits the bundle's HEAD does not (and the branch may only fast-forward).
    #[error("`{branch}` is at {old}, which {new} does not contain: only a fast-forward is taken")]
    NotFastForward { branch: String, old: String, new: String },
    /// The branch moved while the bundle was fetched.
    #[error("`{0}` moved meanwhile: try again")]
    Moved(String),
}

/// Where a branch was and is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    pub previous: Option<String>,
    pub commit: String,
}

/// Points `branch` of `repo` at the HEAD of the bundle file `bundle`: whatever it pointed at when
/// `force`, else only as a fast-forward (or a new branch). `holding` is a ref no one else uses,
/// where the bundle's HEAD waits while it is checked; it is gone afterwards. With `remote`
/// (`repo` is this node's mirror of it), the branch moves on the remote first, with a lease.
pub async fn fetch(
    repo: &Path,
    remote: Option<&Remote>,
    bundle: &Path,
    branch: &str,
    holding: &str,
    force: bool,
) -> Result<Result<Moved, Refused>, GitError> {
    let file = bundle.to_string_lossy();
    // git's complaint, on one line: "Repository lacks these prerequisite commits: 4b825dc…"; the
    // server's temporary path it may name is not the agent's business.
    let invalid = |e: GitError| match e {
        GitError::Failed { stderr, .. } => {
            let lines = stderr.lines().map(|line| line.trim_start_matches("error: ").trim_start_matches("fatal: "));
            let why = lines.collect::<Vec<_>>().join(" ").replace(&format!("'{file}'"), "the upload");
            Ok(Err(Refused::Invalid(why.replace(file.as_ref(), "the upload"))))
        }
        other => Err(other),
    };
    // Not `--quiet`: it hides why a bundle is refused.
    if let Err(e) = git(repo, &["bundle", "verify", &file]).await {
        return invalid(e);
    }
    let heads = git(repo, &["bundle", "list-heads", &file]).await?;
    if !heads.lines().any(|line| line.split_whitespace().nth(1) == Some("HEAD")) {
        return Ok(Err(Refused::Invalid("the bundle has no HEAD (make it with `git bundle create FILE HEAD`)".into())));
    }
    let refspec = format!("+HEAD:{holding}");
    let fetched = git(
        repo,
        &[
            "-c",
            "transfer.fsckObjects=true",
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
            &file,
            &refspec,
        ],
    )
    .await;
    if let Err(e) = fetched {
        return invalid(e);
    }
    let outcome = settle(repo, remote, branch, holding, force).await;
    // The holding ref only kept the objects reachable while they were checked.
    git(repo, &["update-ref", "-d", holding]).await?;
    outcome
}

/// Moves `branch` to what `holding` points at, if the rules allow.
async fn settle(
    repo: &Path,
    remote: Option<&Remote>,
    branch: &str,
    holding: &str,
    force: bool,
) -> Result<Result<Moved, Refused>, GitError> {
    let commit = match git(repo, &["rev-parse", "--verify", "--quiet", &format!("{holding}^{{commit}}")]).await {
        Ok(out) => out.trim().to_owned(),
        Err(GitError::Failed { .. }) => return Ok(Err(Refused::Invalid("the bundle's HEAD is not a commit".into()))),
        Err(e) => return Err(e),
    };
    let previous = branches::head(repo, branch).await?;
    if let Some(old) = &previous {
        if !force && !branches::is_ancestor(repo, old, &commit).await? {
            return Ok(Err(Refused::NotFastForward { branch: branch.to_owned(), old: old.clone(), new: commit }));
        }
    }
    if let Some(remote) = remote {
        let update = Update { branch: branch.to_owned(), new: Some(commit.clone()), expected: previous.clone() };
        if push(repo, remote, &[update]).await? == Pushed::Moved {
            return Ok(Err(Refused::Moved(branch.to_owned())));
        }
        // The remote has it: the mirror follows, whatever a fetch meanwhile left there.
        branches::reset(repo, branch, &commit).await?;
        return Ok(Ok(Moved { previous, commit }));
    }
    // The empty old value: only if the branch does not exist yet.
    match branches::compare_and_swap(repo, branch, &commit, previous.as_deref().unwrap_or("")).await {
        Ok(()) => Ok(Ok(Moved { previous, commit })),
        Err(GitError::Failed { .. }) => Ok(Err(Refused::Moved(branch.to_owned()))),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn repo_with_commit(dir: &Path) -> String {
        git(dir, &["init", "--quiet", "-b", "main"]).await.expect("init");
        for (key, value) in [("user.name", "t"), ("user.email", "t@localhost")] {
            git(dir, &["config", key, value]).await.expect("config");
        }
        commit(dir, "one").await
    }

    async fn commit(dir: &Path, what: &str) -> String {
        std::fs::write(dir.join("file.txt"), what).expect("write");
        git(dir, &["add", "file.txt"]).await.expect("add");
        git(dir, &["commit", "--quiet", "-m", what]).await.expect("commit");
        git(dir, &["rev-parse", "HEAD"]).await.expect("head").trim().to_owned()
    }

    /// A bundle of `dir`'s HEAD beyond `base` (everything without one).
    async fn bundle(dir: &Path, base: Option<&str>) -> std::path::PathBuf {
        let file = dir.join(format!("head-{}.bundle", uuid::Uuid::new_v4().simple()));
        let file_arg = file.to_string_lossy().into_owned();
        let mut args = vec!["bundle", "create", "--quiet", &file_arg, "HEAD"];
        let not = base.map(|b| format!("^{b}"));
        args.extend(not.as_deref());
        git(dir, &args).await.expect("bundle");
        file
    }

    #[tokio::test]
    async fn a_bundle_fast_forwards_a_branch_and_a_rewrite_is_taken_only_when_forced() {
        let (repo, clone) = (tempfile::tempdir().expect("repo"), tempfile::tempdir().expect("clone"));
        let base = repo_with_commit(repo.path()).await;
        git(clone.path(), &["clone", "--quiet", &repo.path().to_string_lossy(), "."]).await.expect("clone");
        for (key, value) in [("user.name", "t"), ("user.email", "t@localhost")] {
            git(clone.path(), &["config", key, value]).await.expect("config");
        }
        let two = commit(clone.path(), "two").await;
        let thin = bundle(clone.path(), Some(&base)).await;
        let moved = fetch(repo.path(), None, &thin, "work", "refs/switchyard/upload-1", false).await.expect("git");
        assert_eq!(moved.expect("new branch"), Moved { previous: None, commit: two.clone() });
        assert_eq!(branches::head(repo.path(), "work").await.expect("head"), Some(two.clone()));
        let holding = git(repo.path(), &["for-each-ref", "refs/switchyard"]).await.expect("refs");
        assert!(holding.is_empty(), "the holding ref is gone: {holding}");

        // A rewritten history: refused as a fast-forward, taken when forced.
        git(clone.path(), &["reset", "--quiet", "--hard", &base]).await.expect("reset");
        let other = commit(clone.path(), "other").await;
        let rewrite = bundle(clone.path(), Some(&base)).await;
        let refused = fetch(repo.path(), None, &rewrite, "work", "refs/switchyard/upload-2", false).await.expect("git");
        assert!(matches!(refused, Err(Refused::NotFastForward { .. })), "{refused:?}");
        assert_eq!(branches::head(repo.path(), "work").await.expect("head"), Some(two.clone()));
        let forced = fetch(repo.path(), None, &rewrite, "work", "refs/switchyard/upload-3", true).await.expect("git");
        assert_eq!(forced.expect("forced"), Moved { previous: Some(two), commit: other });
    }

    #[tokio::test]
    async fn what_is_not_a_bundle_of_known_commits_is_refused() {
        let (repo, elsewhere) = (tempfile::tempdir().expect("repo"), tempfile::tempdir().expect("other"));
        repo_with_commit(repo.path()).await;
        repo_with_commit(elsewhere.path()).await;
        // Not the repository's first commit (the same content at the same second would be).
        let unrelated = commit(elsewhere.path(), "unrelated").await;
        commit(elsewhere.path(), "two").await;
        // Its prerequisite is a commit the repository never had.
        let thin = bundle(elsewhere.path(), Some(&unrelated)).await;
        let refused = fetch(repo.path(), None, &thin, "work", "refs/switchyard/upload-1", true).await.expect("git");
        assert!(matches!(&refused, Err(Refused::Invalid(why)) if why.contains("prerequisite")), "{refused:?}");
        let junk = elsewhere.path().join("junk.bundle");
        std::fs::write(&junk, "not a bundle").expect("write");
        let refused = fetch(repo.path(), None, &junk, "work", "refs/switchyard/upload-2", true).await.expect("git");
        let junk_path = junk.to_string_lossy().into_owned();
        assert!(matches!(&refused, Err(Refused::Invalid(why)) if !why.contains(&junk_path)), "{refused:?}");
        assert_eq!(branches::head(repo.path(), "work").await.expect("head"), None);
    }
}
