//! The one place that runs git: agents' and teams' clones ([`clones`]), conflict prediction
//! ([`conflicts`]), the merge queue's merges ([`merge`]) and the working trees it advances
//! ([`checked_out`]), and the check that a project's `repo_path` is a repository. git always runs as an argument list (never through a shell),
//! never prompts, and answers about the directory it is given, whatever repository called us.
//! Nothing a repository's own configuration names is run ([`safe`]): agents write their clones'.

pub mod branches;
pub mod bundles;
pub mod checked_out;
pub mod clones;
pub mod conflicts;
pub mod merge;
pub mod remote;
mod safe;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// git ran and said no.
    #[error("git {args} failed: {stderr}")]
    Failed { args: String, stderr: String },
    /// git did not answer in time.
    #[error("git {args} did not answer within {} seconds", .after.as_secs())]
    Timeout { args: String, after: Duration },
    /// git could not be run at all.
    #[error("cannot run git: {0}")]
    Io(#[from] std::io::Error),
}

/// git in `dir`, as an argument list. The variables git hooks set are removed so git answers
/// about `dir`, not about whatever repository called us; it never prompts, and runs no program
/// the repository's configuration names (hooks, fsmonitor, drivers, pagers, editors, pack
/// programs: [`safe`]), nor the system's configuration. A repository with a `.git` directory has
/// it as its working tree, whatever its `core.worktree` says.
pub(crate) async fn command(dir: &Path, args: &[&str]) -> tokio::process::Command {
    build(dir, args, None).await
}

/// [`command`], for git that talks to a project's remote from a repository only the server
/// writes (a node's mirror, or a `repo_path` project's own repository pushing its target): the
/// network transports are on and the node's own credential helpers and `ssh` apply; `extra`
/// settings come last (a project's credential, as a header).
pub(crate) async fn command_for_remote(
    dir: &Path,
    args: &[&str],
    extra: Vec<(String, String)>,
) -> tokio::process::Command {
    build(dir, args, Some(extra)).await
}

async fn build(dir: &Path, args: &[&str], to_remote: Option<Vec<(String, String)>>) -> tokio::process::Command {
    let mut args = args.to_vec();
    if let Some((at, fixed)) = safe::fixed_transport(&args) {
        args.insert(at, fixed);
    }
    let mut command = tokio::process::Command::new("git");
    command
        .arg("-C")
        .arg(dir)
        .args(&args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_EXTERNAL_DIFF")
        .envs([
            ("GIT_TERMINAL_PROMPT", "0"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_PROTOCOL_FROM_USER", "0"),
            ("GIT_PAGER", "cat"),
            ("GIT_EDITOR", "true"),
            ("GIT_SEQUENCE_EDITOR", "true"),
        ])
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let mut overrides = safe::overrides(dir, to_remote.is_some()).await;
    overrides.extend(to_remote.unwrap_or_default());
    command.env("GIT_CONFIG_COUNT", overrides.len().to_string());
    for (n, (key, value)) in overrides.iter().enumerate() {
        command.env(format!("GIT_CONFIG_KEY_{n}"), key).env(format!("GIT_CONFIG_VALUE_{n}"), value);
    }
    if std::fs::symlink_metadata(dir.join(".git")).is_ok_and(|m| m.is_dir()) {
        command.env("GIT_WORK_TREE", dir);
    }
    command
}

/// Makes `command`'s commits authored and committed by `(name, email)`, whatever the user's git
/// identity says.
pub(crate) fn as_identity(command: &mut tokio::process::Command, (name, email): (&str, &str)) {
    command.envs([
        ("GIT_AUTHOR_NAME", name),
        ("GIT_AUTHOR_EMAIL", email),
        ("GIT_COMMITTER_NAME", name),
        ("GIT_COMMITTER_EMAIL", email),
    ]);
}

/// Runs git in `dir` and returns its standard output.
pub(crate) async fn run(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    finished(args, command(dir, args).await.output().await?)
}

/// Runs git in `dir` with `input` on its standard input (e.g. `update-ref --stdin`).
pub(crate) async fn run_with_input(dir: &Path, args: &[&str], input: Vec<u8>) -> Result<String, GitError> {
    finished(args, output_with_input(command(dir, args).await, input).await?)
}

/// Runs `command` with `input` on its standard input and collects what it printed, whatever its
/// exit status. The input is written while the output is read: git answering line by line
/// (`--stdin` modes) could otherwise fill its output pipe and wait for us while we wait for it.
pub(crate) async fn output_with_input(
    mut command: tokio::process::Command,
    input: Vec<u8>,
) -> std::io::Result<std::process::Output> {
    use tokio::io::AsyncWriteExt;
    let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    let stdin = child.stdin.take();
    let write = async move {
        if let Some(mut stdin) = stdin {
            // A git that stopped reading (it failed) says why in its exit status, not here.
            let _ = stdin.write_all(&input).await;
        }
    };
    let (_, output) = tokio::join!(write, child.wait_with_output());
    output
}

fn finished(args: &[&str], output: std::process::Output) -> Result<String, GitError> {
    if !output.status.success() {
        return Err(GitError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// How long the repository check may take.
const CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `path` is a git repository itself: `git rev-parse --git-dir` run in it, with the
/// parent as a ceiling so a folder inside some other repository does not pass for one.
/// `Failed` carries git's first line of complaint (without `fatal: `).
pub async fn check_repository(path: &Path) -> Result<(), GitError> {
    let parent = path.parent().unwrap_or(Path::new("/"));
    let args = ["rev-parse", "--git-dir"];
    let mut run = command(path, &args).await;
    run.env("GIT_CEILING_DIRECTORIES", parent);
    let output = match tokio::time::timeout(CHECK_TIMEOUT, run.output()).await {
        Err(_) => return Err(GitError::Timeout { args: args.join(" "), after: CHECK_TIMEOUT }),
        Ok(output) => output?,
    };
    finished(&args, output).map(drop).map_err(|e| match e {
        GitError::Failed { args, stderr } => {
            let why = stderr.lines().next().unwrap_or("").trim().trim_start_matches("fatal: ").to_owned();
            GitError::Failed { args, stderr: why }
        }
        other => other,
    })
}
