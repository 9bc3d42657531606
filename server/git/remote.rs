//! A project's repository on a git remote (`file://`, `git://`, `ssh://`, `https://`): each node
//! keeps its own bare mirror of it under its data directory ([`mirror_dir`]), fetched from the
//! remote ([`sync`]) and never shared; branches move on the remote first, by a push with a lease
//! ([`push`]): a ref that is no longer where it was read refuses the push ([`Pushed::Moved`]), and
//! the caller fetches and tries again from the new head — nothing is ever forced.
//!
//! git here talks to the network, so the transports the hardened runner turns off for agents'
//! repositories are on, and the node's own git configuration (credential helpers, `ssh`) applies;
//! a project's secret goes to git in its environment as an HTTP header, never into a file an
//! agent can read (agents see the mirror, read-only) and never into a log line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use super::{finished, GitError};

/// A remote and how to reach it.
#[derive(Clone)]
pub struct Remote {
    /// A URL, or (for a `repo_path` project's own remote) the remote's name in that repository.
    pub url: String,
    /// The project's credential for the remote, when the node's git configuration has none.
    pub secret: Option<SecretString>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("url", &self.url)
            .field("secret", &self.secret.as_ref().map(|_| "[redacted]"))
            .finish()
    }
}

/// How git says a ref was not where a push expected it (`--porcelain`'s reasons).
const MOVED: [&str; 4] = ["(stale info)", "(fetch first)", "(non-fast-forward)", "(already exists)"];

/// The schemes a project's `repo_url` may use.
pub const SCHEMES: [&str; 4] = ["file://", "git://", "ssh://", "https://"];

/// How long one conversation with a remote may take.
const REMOTE_TIMEOUT: Duration = Duration::from_secs(120);

/// Where this node keeps its mirror of `url`: one bare repository per URL.
pub fn mirror_dir(data_dir: &Path, url: &str) -> PathBuf {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(url.as_bytes());
    data_dir.join("mirrors").join(format!("{}.git", hex::encode(&digest[..12])))
}

/// Whether `location` (a project's repository as an agent records it) is a URL, not a path.
pub fn is_url(location: &str) -> bool {
    SCHEMES.iter().any(|scheme| location.starts_with(scheme))
}

/// git in `dir` speaking to `remote`: the hardened runner's settings, with the network
/// transports on and the node's credentials left to it ([`super::safe`]).
async fn command(dir: &Path, args: &[&str], remote: &Remote) -> tokio::process::Command {
    let mut extra = Vec::new();
    if let Some(secret) = &remote.secret {
        use base64::Engine;
        let secret = secret.expose_secret();
        let pair = if secret.contains(':') { secret.to_owned() } else { format!("x-access-token:{secret}") };
        let header = format!("Authorization: Basic {}", base64::engine::general_purpose::STANDARD.encode(pair));
        // For this remote's URL only: not for a server it redirects to.
        extra.push((format!("http.{}.extraHeader", remote.url), header));
    }
    super::command_for_remote(dir, args, extra).await
}

/// Runs git against `remote` with a deadline; its output whatever its exit status.
async fn output(dir: &Path, args: &[&str], remote: &Remote) -> Result<std::process::Output, GitError> {
    let run = command(dir, args, remote).await.output();
    match tokio::time::timeout(REMOTE_TIMEOUT, run).await {
        Ok(output) => Ok(output?),
        Err(_) => Err(GitError::Timeout { args: args.join(" "), after: REMOTE_TIMEOUT }),
    }
}

async fn run(dir: &Path, args: &[&str], remote: &Remote) -> Result<String, GitError> {
    finished(args, output(dir, args, remote).await?)
}

/// The fetches of one mirror: one at a time (two would fight over its ref locks), numbered as
/// they start and remembered as they finish.
#[derive(Default)]
struct Fetches {
    one_at_a_time: tokio::sync::Mutex<()>,
    /// (the last fetch started, the last one finished)
    counts: Mutex<(u64, u64)>,
}

fn fetches_of(mirror: &Path) -> Arc<Fetches> {
    static MIRRORS: OnceLock<Mutex<HashMap<PathBuf, Arc<Fetches>>>> = OnceLock::new();
    let mut mirrors = MIRRORS.get_or_init(Default::default).lock().expect("mirrors");
    mirrors.entry(mirror.to_owned()).or_default().clone()
}

/// Brings `mirror` up to date with `remote` (made first if this node has none): every branch of
/// the remote, as the remote has it, and none it deleted. A fetch that started after this call
/// did, and finished while it waited for it, serves it too: concurrent steps of one node fetch
/// once, not once each.
#[tracing::instrument(skip_all, fields(mirror = %mirror.display()), err(level = "debug"))]
pub async fn sync(mirror: &Path, remote: &Remote) -> Result<(), GitError> {
    let fetches = fetches_of(mirror);
    let fresh_enough = fetches.counts.lock().expect("fetch counts").0 + 1;
    let _turn = fetches.one_at_a_time.lock().await;
    let number = {
        let mut counts = fetches.counts.lock().expect("fetch counts");
        if counts.1 >= fresh_enough {
            return Ok(());
        }
        counts.0 += 1;
        counts.0
    };
    if !mirror.join("HEAD").is_file() {
        make(mirror).await?;
    }
    let args = [
        "fetch",
        "--quiet",
        "--prune",
        "--no-tags",
        "--no-write-fetch-head",
        "--",
        &remote.url,
        "+refs/heads/*:refs/heads/*",
    ];
    run(mirror, &args, remote).await?;
    fetches.counts.lock().expect("fetch counts").1 = number;
    Ok(())
}

/// The mirrors this node keeps under `data_dir` (whole ones: not one being made or removed).
pub fn mirrors(data_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(data_dir.join("mirrors")) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for entry in entries {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if !name.starts_with('.') && name.ends_with(".git") {
            found.push(data_dir.join("mirrors").join(name));
        }
    }
    Ok(found)
}

/// Removes `mirror`, waiting for a fetch into it to end first: moved aside at once (a step that
/// reads it afterwards finds none, and [`sync`] makes it again), then deleted.
pub async fn remove_mirror(mirror: &Path) -> Result<(), GitError> {
    let fetches = fetches_of(mirror);
    let _turn = fetches.one_at_a_time.lock().await;
    let parent = mirror.parent().ok_or_else(|| std::io::Error::other("a mirror has a parent directory"))?;
    let aside = parent.join(format!(".removing-{}", uuid::Uuid::new_v4().simple()));
    match tokio::fs::rename(mirror, &aside).await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.into()),
    }
    tokio::fs::remove_dir_all(&aside).await?;
    Ok(())
}

/// Makes an empty bare mirror at `mirror`, whole or not at all.
async fn make(mirror: &Path) -> Result<(), GitError> {
    let parent = mirror.parent().ok_or_else(|| std::io::Error::other("a mirror needs a parent directory"))?;
    tokio::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent).await?;
    let partial = parent.join(format!(".partial-{}", uuid::Uuid::new_v4().simple()));
    let made = async {
        super::run(parent, &["init", "--quiet", "--bare", &partial.to_string_lossy()]).await?;
        tokio::fs::rename(&partial, mirror).await.map_err(GitError::from)
    };
    let made = made.await;
    if made.is_err() {
        let _ = tokio::fs::remove_dir_all(&partial).await;
        // Made by a concurrent caller meanwhile: theirs is as good.
        if mirror.join("HEAD").is_file() {
            return Ok(());
        }
    }
    made
}

/// One branch to move on the remote: to `new` (`None` deletes it) if it is at `expected`
/// (`None`: if it does not exist).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    pub branch: String,
    pub new: Option<String>,
    pub expected: Option<String>,
}

/// What a push with a lease did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    /// Every branch moved.
    Done,
    /// A branch was not where it was expected (or the remote refused it otherwise): nothing moved.
    Moved,
}

/// Moves `updates` on `remote` from `repo` (which has the commits), all or none (`--atomic`),
/// each only from where it is expected to be (`--force-with-lease=<ref>:<expected>`): never
/// forced over work the caller did not see.
#[tracing::instrument(skip_all, fields(remote = %remote.url, branches = updates.len()), err(level = "debug"))]
pub async fn push(repo: &Path, remote: &Remote, updates: &[Update]) -> Result<Pushed, GitError> {
    if updates.is_empty() {
        return Ok(Pushed::Done);
    }
    // Not `--quiet`: the reason a ref was refused is what tells a moved ref from a refusal.
    let mut args: Vec<String> = ["push", "--porcelain", "--no-verify"].map(str::to_owned).to_vec();
    if updates.len() > 1 {
        args.push("--atomic".to_owned());
    }
    for u in updates {
        args.push(format!("--force-with-lease=refs/heads/{}:{}", u.branch, u.expected.as_deref().unwrap_or("")));
    }
    args.push("--".to_owned());
    args.push(remote.url.clone());
    for u in updates {
        args.push(format!("{}:refs/heads/{}", u.new.as_deref().unwrap_or(""), u.branch));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = output(repo, &args, remote).await?;
    if output.status.success() {
        return Ok(Pushed::Done);
    }
    // `--porcelain` marks each refused ref with `!` and says why: a ref that is not where the
    // lease says is a moved ref; anything else (a hook declined, the branch is checked out
    // there, no permission) is the remote's refusal, said in its words.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let refused: Vec<&str> = stdout.lines().filter(|line| line.starts_with('!')).collect();
    if refused.iter().any(|line| MOVED.iter().any(|why| line.contains(why))) {
        tracing::debug!(refused = %stdout.trim(), "a push with a lease was refused");
        return Ok(Pushed::Moved);
    }
    if !refused.is_empty() {
        let why = refused.iter().filter_map(|line| line.rsplit('\t').next()).collect::<Vec<_>>().join("; ");
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(GitError::Failed { args: args.join(" "), stderr: format!("{why} {}", stderr.trim()) });
    }
    finished(&args, output).map(|_| Pushed::Done)
}

/// The commit `branch` points at on `remote`, or `None` when it has no such branch.
pub async fn head(repo: &Path, remote: &Remote, branch: &str) -> Result<Option<String>, GitError> {
    let reference = format!("refs/heads/{branch}");
    let out = run(repo, &["ls-remote", "--", &remote.url, &reference], remote).await?;
    Ok(out.lines().find_map(|line| {
        let (commit, name) = line.split_once('\t')?;
        (name == reference).then(|| commit.to_owned())
    }))
}

/// Fetches `branch` of `remote` into `repo` as `into` (a ref no branch uses); where it points.
pub async fn fetch_branch(repo: &Path, remote: &Remote, branch: &str, into: &str) -> Result<String, GitError> {
    let refspec = format!("+refs/heads/{branch}:{into}");
    let args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--", &remote.url, &refspec];
    run(repo, &args, remote).await?;
    Ok(super::run(repo, &["rev-parse", "--verify", into]).await?.trim().to_owned())
}

/// Whether `url` answers, and has `branch` (asked before a project is made on it).
pub async fn has_branch(dir: &Path, remote: &Remote, branch: &str) -> Result<bool, GitError> {
    Ok(head(dir, remote, branch).await?.is_some())
}

/// The remote named `name` in the repository at `repo` (a `repo_path` project), if it has one.
pub async fn named(repo: &Path, name: &str) -> Result<Option<Remote>, GitError> {
    let key = format!("remote.{name}.url");
    match super::run(repo, &["config", "--get", &key]).await {
        Ok(url) if !url.trim().is_empty() => Ok(Some(Remote { url: name.to_owned(), secret: None })),
        Ok(_) => Ok(None),
        // `config --get` fails without a word when the setting is missing.
        Err(GitError::Failed { stderr, .. }) if stderr.is_empty() => Ok(None),
        Err(e) => Err(e),
    }
}
