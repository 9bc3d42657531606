//! The one place in Switchyard that talks to tmux.
//!
//! [`Tmux`] runs tmux commands as child processes on a named socket (`tmux -L SOCKET`), so the
//! worker, the tests and the user's own tmux never touch each other's servers. Arguments are
//! always an argv list, never a shell string. [`control::Control`] is the long-lived control-mode
//! client that pushes pane output and window events and answers commands without a fork.
//!
//! Choices that the rest of Switchyard relies on:
//! - `remain-on-exit on` for the whole (private) server: a pane whose program exits stays, dead,
//!   so the reconciler can read its exit status and its last screen (an agent's crash message)
//!   before it kills the window. Set globally, before any agent window exists, so even a
//!   program that exits at once is caught (per-window options would race it).
//! - Each session keeps a first window, `switchyard`, running a silent `sleep` loop: a session
//!   dies with its last window, so killing the last agent window would otherwise take the
//!   session (and the control client attached to it) down.
//! - Text goes in through a paste buffer ([`Tmux::paste`]), keys through [`Tmux::send_key`]
//!   with named keys only: `send-keys` with user text reads key names and `;` separators.

pub mod control;
pub mod foreground;
mod keys;
pub mod mirror;
pub mod process_tree;
pub mod protocol;

use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

pub use control::{Control, Link};
pub use keys::Key;
pub use protocol::Notification;

/// The first window of every session: it keeps the session alive without any agent in it.
pub const HOME_WINDOW: &str = "switchyard";
/// The size of windows in a detached session (tmux's default, 80x24, is cramped for agent TUIs).
pub const WINDOW_SIZE: (u16, u16) = (200, 50);
/// How long one tmux command may take before we give up on the server.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// Separates fields in our `-F` formats; it cannot appear in a name we accept.
const SEP: char = '\u{1f}';

pub type Result<T, E = TmuxError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    /// tmux ran and failed; `command` is the tmux command name (`new-window`, …).
    #[error("tmux {command} failed: {stderr}")]
    Failed { command: String, stderr: String },
    #[error("cannot run tmux {command}: {source}")]
    Spawn {
        command: String,
        #[source]
        source: std::io::Error,
    },
    #[error("tmux {command} did not answer within {0:?}", COMMAND_TIMEOUT)]
    Timeout { command: String },
    #[error("invalid {what}: {reason}")]
    Invalid { what: &'static str, reason: String },
    #[error("unexpected output from tmux {command}: {output:?}")]
    Unexpected { command: String, output: String },
    /// The control-mode client is gone (tmux exited, or the server was killed).
    #[error("tmux control client is down: {0}")]
    LinkDown(String),
}

impl TmuxError {
    /// True when the failure means "not there": no server on the socket, or no such session,
    /// window or pane. The reconciler treats these as facts, not as errors.
    pub fn is_missing(&self) -> bool {
        match self {
            TmuxError::Failed { stderr, .. } => [
                "no server running",
                "error connecting to",
                "server exited unexpectedly",
                "lost server",
                "can't find",
                "no such file or directory",
            ]
            .iter()
            .any(|m| stderr.to_ascii_lowercase().contains(m)),
            _ => false,
        }
    }
}

/// What to run in a new window.
#[derive(Debug, Clone, Default)]
pub struct WindowSpec {
    pub session: String,
    /// The window name; no control characters, no `:` or `.` (tmux target syntax).
    pub name: String,
    pub cwd: std::path::PathBuf,
    /// The program and its arguments, run as an argv: never through a shell.
    pub command: Vec<String>,
    /// Extra environment for the program (`-e NAME=VALUE`).
    pub env: Vec<(String, String)>,
}

/// A window just created: ids are tmux's own (`@3`, `%7`), stable for the server's life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pane {
    pub window_id: String,
    pub pane_id: String,
    pub pid: u32,
}

/// One pane as `list-panes` sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneInfo {
    pub window_id: String,
    pub window_name: String,
    pub pane_id: String,
    pub pid: u32,
    /// The program exited; the pane remains (remain-on-exit) until its window is killed.
    pub dead: bool,
    /// Exit status, once tmux has reaped the program (`None` while alive, or killed by a signal).
    /// tmux 3.3 sometimes misses a program's exit until [`Tmux::collect_exits`]: a dead pane
    /// with neither status nor signal after that means "exited, reason unknown".
    pub dead_status: Option<i32>,
    /// The signal that killed the program, if one did.
    pub dead_signal: Option<i32>,
    /// Last output in the window (tmux keeps it per window, to the second).
    pub activity: DateTime<Utc>,
}

/// A handle on one tmux server, named by its socket. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// A handle on the server at `tmux -L socket` (which need not be running yet).
    pub fn new(socket: impl Into<String>) -> Result<Tmux> {
        let socket = socket.into();
        if socket.is_empty() || socket.contains('/') || socket.chars().any(char::is_control) {
            return Err(invalid("socket name", "must be non-empty, without '/' or control characters"));
        }
        Ok(Tmux { socket })
    }

    pub fn socket(&self) -> &str {
        &self.socket
    }

    /// `tmux -f /dev/null -L SOCKET` with only the [`inherited_env`] of our own process: the
    /// client that starts the server hands it its environment, which every pane then inherits,
    /// so the server's secrets (database URL, webhook secrets, hook tokens) must never reach it.
    /// That also drops the caller's own `TMUX` (which would make some commands default to the
    /// pane the worker happens to run in). `-f /dev/null` (read only when the command starts
    /// the server) keeps the user's `~/.tmux.conf` out of our server: its options
    /// (`remain-on-exit`, `default-command`, `base-index`, …) are ours to set. `-u`: we read
    /// UTF-8 whatever the locale — without it, where no UTF-8 locale is set (a container, a
    /// service's bare environment), tmux writes `_` for our field separator and for every
    /// character of an agent's screen beyond ASCII.
    pub(crate) fn command(&self) -> Command {
        let mut cmd = Command::new(crate::programs::on_own_path("tmux"));
        cmd.args(["-u", "-f", "/dev/null", "-L"])
            .arg(&self.socket)
            .env_clear()
            .envs(inherited_env(std::env::vars_os()))
            .kill_on_drop(true);
        cmd
    }

    /// Runs one tmux command (`args[0]` is its name) and returns its stdout.
    pub async fn run(&self, args: &[&str]) -> Result<String> {
        self.run_with_input(args, None).await
    }

    async fn run_with_input(&self, args: &[&str], input: Option<&[u8]>) -> Result<String> {
        let name = args.first().copied().unwrap_or_default().to_owned();
        let mut cmd = self.command();
        cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
        let spawn_error = |source| TmuxError::Spawn { command: name.clone(), source };
        let work = async {
            let mut child = cmd.spawn().map_err(spawn_error)?;
            if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
                stdin.write_all(input).await.map_err(spawn_error)?;
                // Dropping stdin closes it: tmux reads `-` until end of file.
            }
            child.wait_with_output().await.map_err(spawn_error)
        };
        let output = tokio::time::timeout(COMMAND_TIMEOUT, work)
            .await
            .map_err(|_| TmuxError::Timeout { command: name.clone() })??;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
            return Err(TmuxError::Failed { command: name, stderr });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Whether the session exists (`=` makes the name exact: tmux otherwise matches prefixes).
    pub async fn has_session(&self, session: &str) -> Result<bool> {
        check_name("session name", session)?;
        match self.run(&["has-session", "-t", &exact(session)]).await {
            Ok(_) => Ok(true),
            Err(e) if e.is_missing() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Makes sure the detached session exists (starting the server if needed) with its
    /// [`HOME_WINDOW`], and sets the server options this module relies on.
    pub async fn ensure_session(&self, session: &str) -> Result<()> {
        if !self.has_session(session).await? {
            let (w, h) = (WINDOW_SIZE.0.to_string(), WINDOW_SIZE.1.to_string());
            let created = self
                .run(&[
                    "new-session",
                    "-d",
                    "-s",
                    session,
                    "-n",
                    HOME_WINDOW,
                    "-x",
                    &w,
                    "-y",
                    &h,
                    "--",
                    "sh",
                    "-c",
                    "while :; do sleep 3600; done",
                ])
                .await;
            // Another caller may have created it in between: that is the outcome we wanted.
            if let Err(e) = created {
                if !self.has_session(session).await? {
                    return Err(e);
                }
            }
        }
        self.run(&["set-option", "-g", "-w", "remain-on-exit", "on"]).await?;
        let size = format!("{}x{}", WINDOW_SIZE.0, WINDOW_SIZE.1);
        // `=NAME:` — set-option reads its target as a pane, where a bare `=NAME` does not resolve.
        self.run(&["set-option", "-t", &format!("{}:", exact(session)), "default-size", &size]).await?;
        Ok(())
    }

    /// Starts `spec.command` in a new background window of `spec.session`, with the server's
    /// (clean) environment, `spec.env`, and neither `TMUX` nor `TMUX_PANE`.
    ///
    /// tmux runs a command of two or more arguments with `execvp`, no shell (a single argument
    /// it would hand to `sh -c`): the command always runs as `env -u TMUX -u TMUX_PANE -- ARGV`,
    /// so even a one-word command is run as itself, never interpreted. An empty command runs
    /// the user's shell (`$SHELL`).
    pub async fn new_window(&self, spec: &WindowSpec) -> Result<Pane> {
        check_name("session name", &spec.session)?;
        check_name("window name", &spec.name)?;
        let cwd = spec.cwd.to_str().ok_or_else(|| invalid("cwd", "is not UTF-8"))?;
        let target = format!("{}:", exact(&spec.session));
        let format = format!("#{{window_id}}{SEP}#{{pane_id}}{SEP}#{{pane_pid}}");
        let mut args: Vec<String> =
            ["new-window", "-d", "-P", "-F", &format, "-t", &target, "-n", &spec.name].map(String::from).to_vec();
        if !cwd.is_empty() {
            // `-c` is format-expanded by tmux: `##` is a literal `#`.
            args.extend(["-c".to_owned(), cwd.replace('#', "##")]);
        }
        for (key, value) in &spec.env {
            if key.is_empty() || key.contains('=') || key.contains('\0') || value.contains('\0') {
                return Err(invalid("environment variable", &format!("{key:?}")));
            }
            args.extend(["-e".to_owned(), format!("{key}={value}")]);
        }
        args.push("--".to_owned());
        // tmux sets `TMUX` and `TMUX_PANE` after `-e`, so they are unset by `env` in the pane
        // itself: the program does not learn where the server of every pane is. `env` runs the
        // program with `execvp`, without a shell, in its own process (the pane's pid stays it).
        args.extend(PANE_UNSET.map(String::from));
        // tmux 3.3 gives a new window its client's PATH whatever `-e PATH=…` said: `env` sets
        // it again before it looks the program up, so a provider's own PATH finds its CLI.
        if let Some((_, path)) = spec.env.iter().find(|(key, _)| key == "PATH") {
            args.push(format!("PATH={path}"));
        }
        if spec.command.first().is_some_and(|program| program.contains('=')) {
            // `env` would take it for a variable to set, not the program to run.
            return Err(invalid("command", "the program's name contains `=`"));
        }
        match spec.command.as_slice() {
            [] => args.extend(["sh", "-c", "exec \"${SHELL:-sh}\""].map(String::from)),
            argv => args.extend(argv.iter().cloned()),
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = self.run(&refs).await?;
        let unexpected = || TmuxError::Unexpected { command: "new-window".into(), output: out.clone() };
        let fields: Vec<&str> = out.trim_end().split(SEP).collect();
        match fields.as_slice() {
            [window_id, pane_id, pid] => Ok(Pane {
                window_id: (*window_id).to_owned(),
                pane_id: (*pane_id).to_owned(),
                pid: pid.parse().map_err(|_| unexpected())?,
            }),
            _ => Err(unexpected()),
        }
    }

    /// Makes the tmux server collect the exit status of every program of its that ended. tmux
    /// 3.3 sometimes misses a child's exit: its pane shows dead, with neither status nor signal,
    /// until another child of the server exits. A `run-shell` job is such a child (a fixed
    /// command, run by the server's own `sh`); its exit makes the server collect them all.
    pub async fn collect_exits(&self) -> Result<()> {
        self.run(&["run-shell", "true"]).await.map(drop)
    }

    /// Every pane of every window of the session, the [`HOME_WINDOW`] included.
    pub async fn list_panes(&self, session: &str) -> Result<Vec<PaneInfo>> {
        check_name("session name", session)?;
        // The window name goes last: whatever it contains cannot shift the other fields.
        let format = [
            "#{window_id}",
            "#{pane_id}",
            "#{pane_pid}",
            "#{pane_dead}",
            "#{pane_dead_status}",
            "#{pane_dead_signal}",
            "#{window_activity}",
            "#{window_name}",
        ]
        .join(&SEP.to_string());
        let out = self.run(&["list-panes", "-s", "-t", &exact(session), "-F", &format]).await?;
        out.lines().filter(|l| !l.is_empty()).map(parse_pane_line).collect()
    }

    /// The pane's visible screen plus up to `history` lines of scrollback above it, as plain
    /// text (no escape codes), wrapped lines joined.
    pub async fn capture(&self, pane: &str, history: u32) -> Result<String> {
        let args = capture_args(pane, history, false);
        self.run(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
    }

    /// Like [`Tmux::capture`], with colours and attributes as SGR escape sequences (`-e`), for
    /// rules that need to tell a dim placeholder from typed text.
    pub async fn capture_escaped(&self, pane: &str, history: u32) -> Result<String> {
        let args = capture_args(pane, history, true);
        self.run(&args.iter().map(String::as_str).collect::<Vec<_>>()).await
    }

    /// Delivers `text` to the pane byte for byte, as a paste: loaded into a uniquely named
    /// buffer from stdin, then `paste-buffer -d -p -r`. No byte of `text` is read by tmux's
    /// command parser or its key-name table, so `;`, `C-c`, `Enter` or `-t x` arrive literally.
    ///
    /// `-r` keeps `\n` as `\n` (without it tmux turns each LF into CR, "typing" Enter per
    /// line); `-p` wraps the text in bracketed-paste markers when the program asked for them,
    /// so a TUI such as Claude Code takes a multi-line message as one paste rather than a
    /// submit per line. Submitting is a separate [`Tmux::send_key`] of [`Key::Enter`].
    pub async fn paste(&self, pane: &str, text: &str) -> Result<()> {
        let buffer = unique_buffer_name();
        // One tmux call for both (tmux waits for the text before it runs the paste): a message's
        // delivery waits for each call.
        let both =
            ["load-buffer", "-b", &buffer, "-", ";", "paste-buffer", "-d", "-p", "-r", "-b", &buffer, "-t", pane];
        let pasted = self.run_with_input(&both, Some(text.as_bytes())).await;
        if pasted.is_err() {
            // `-d` only deletes on success; do not leave the text behind in the server.
            let _ = self.run(&["delete-buffer", "-b", &buffer]).await;
        }
        pasted.map(drop)
    }

    /// The line the cursor is on, with SGR escapes (`capture-pane -e`): the input line of a
    /// program waiting at its prompt. One tmux call reads the cursor's row and the screen, so
    /// the two agree.
    pub async fn cursor_line(&self, pane: &str) -> Result<String> {
        let out = self
            .run(&["display-message", "-p", "-t", pane, "#{cursor_y}", ";", "capture-pane", "-p", "-e", "-t", pane])
            .await?;
        let mut lines = out.lines();
        let row = lines.next().and_then(|l| l.trim().parse::<usize>().ok());
        let row =
            row.ok_or_else(|| TmuxError::Unexpected { command: "display-message".into(), output: out.clone() })?;
        Ok(lines.nth(row).unwrap_or_default().to_owned())
    }

    /// Presses one named key in the pane.
    pub async fn send_key(&self, pane: &str, key: Key) -> Result<()> {
        self.run(&["send-keys", "-t", pane, key.tmux_name()]).await.map(drop)
    }

    /// Closes the window and, off the caller's path, ends whatever its panes started
    /// ([`process_tree`]: a grace time after the hang-up, then killed).
    pub async fn kill_window(&self, window: &str) -> Result<()> {
        let noted = self.processes(&["list-panes", "-t", window]).await;
        self.run(&["kill-window", "-t", window]).await?;
        reap_later(noted);
        Ok(())
    }

    /// Closes the session, ending what its panes started as [`Tmux::kill_window`] does.
    pub async fn kill_session(&self, session: &str) -> Result<()> {
        check_name("session name", session)?;
        let target = exact(session);
        let noted = self.processes(&["list-panes", "-s", "-t", &target]).await;
        self.run(&["kill-session", "-t", &target]).await?;
        reap_later(noted);
        Ok(())
    }

    /// The processes of the panes `list_panes` (a `list-panes` command and its target) lists,
    /// and everything below them. None when tmux cannot say: closing goes on regardless.
    async fn processes(&self, list_panes: &[&str]) -> Vec<process_tree::Process> {
        let args: Vec<&str> = list_panes.iter().copied().chain(["-F", "#{pane_pid}"]).collect();
        let Ok(out) = self.run(&args).await else { return Vec::new() };
        let roots: Vec<i32> = out.lines().filter_map(|l| l.trim().parse().ok()).collect();
        tokio::task::spawn_blocking(move || process_tree::below(&roots)).await.unwrap_or_default()
    }

    /// Stops the whole server on this socket, every session and pane with it.
    pub async fn kill_server(&self) -> Result<()> {
        let noted = self.processes(&["list-panes", "-a"]).await;
        let killed = match self.run(&["kill-server"]).await {
            Err(e) if e.is_missing() => Ok(()),
            other => other.map(drop),
        };
        reap_later(noted);
        killed
    }

    /// True while the pane exists and its program runs; false when it is dead or gone.
    pub async fn pane_alive(&self, pane: &str) -> Result<bool> {
        match self.run(&["display-message", "-p", "-t", pane, "#{pane_dead}"]).await {
            Ok(out) => Ok(out.trim() == "0"),
            Err(e) if e.is_missing() => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// What every pane's command starts with: `TMUX` and `TMUX_PANE` name the server that holds
/// every agent's pane, so the agent's program does not get them.
const PANE_UNSET: [&str; 6] = ["env", "-u", "TMUX", "-u", "TMUX_PANE", "--"];

/// The variables of our own environment that tmux (and so, through the server's global
/// environment, every pane) may see: what a program needs to find its tools, its home, its
/// language and its terminal; `TMUX_TMPDIR` because it says where the socket is. Everything
/// else an agent gets is its provider's `env` and its own `SWITCHYARD_*` (`new-window -e`).
pub const INHERITED_ENV: &[&str] =
    &["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "TMUX_TMPDIR"];

/// The variables of `vars` that [`INHERITED_ENV`] allows, plus every `LC_*`.
pub fn inherited_env(
    vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    vars.into_iter()
        .filter(|(key, _)| {
            key.to_str().is_some_and(|k| INHERITED_ENV.contains(&k) || (k.starts_with("LC_") && k.len() > 3))
        })
        .collect()
}

/// The `tmux` command that shows `pane` of the server at `tmux -L socket` to a person at this
/// terminal: `switch-client` when the terminal is already a client of that server (`TMUX`
/// names its socket: attaching would nest it in itself), else `attach-session` (with `TMUX`
/// unset, so a person inside another tmux server gets it nested rather than refused). Either
/// command, given a pane as its target, also selects that pane's window and the pane.
pub fn attach_command(socket: &str, pane: &str, tmux_env: Option<&str>) -> std::process::Command {
    let inside = tmux_env
        .and_then(|value| value.split(',').next())
        .and_then(|path| std::path::Path::new(path).file_name())
        .is_some_and(|name| name == socket);
    let mut cmd = std::process::Command::new("tmux");
    cmd.args(["-L", socket]);
    if inside {
        cmd.args(["switch-client", "-t", pane]);
    } else {
        cmd.args(["attach-session", "-t", pane]).env_remove("TMUX");
    }
    cmd
}

/// The `capture-pane` arguments, shared by [`Tmux::capture`] and [`Control::capture`].
pub fn capture_args(pane: &str, history: u32, escapes: bool) -> Vec<String> {
    let mut args = vec!["capture-pane".to_owned(), "-p".to_owned(), "-J".to_owned()];
    if escapes {
        args.push("-e".to_owned());
    }
    args.extend(["-t".to_owned(), pane.to_owned(), "-S".to_owned(), format!("-{history}")]);
    args
}

fn parse_pane_line(line: &str) -> Result<PaneInfo> {
    let unexpected = || TmuxError::Unexpected { command: "list-panes".into(), output: line.to_owned() };
    let f: Vec<&str> = line.splitn(8, SEP).collect();
    let [window_id, pane_id, pid, dead, status, signal, activity, name] = f.as_slice() else {
        return Err(unexpected());
    };
    let activity = activity.parse::<i64>().ok().and_then(|s| DateTime::from_timestamp(s, 0)).ok_or_else(unexpected)?;
    Ok(PaneInfo {
        window_id: (*window_id).to_owned(),
        window_name: (*name).to_owned(),
        pane_id: (*pane_id).to_owned(),
        pid: pid.parse().map_err(|_| unexpected())?,
        dead: *dead == "1",
        dead_status: status.parse().ok(),
        dead_signal: signal.parse().ok(),
        activity,
    })
}

/// `=NAME`: the exact session, never one whose name merely starts with NAME.
fn exact(session: &str) -> String {
    format!("={session}")
}

/// Names we create must read back unambiguously: tmux turns `:` and `.` into `_` in session
/// names and uses them in targets, and control characters could forge list output.
fn check_name(what: &'static str, name: &str) -> Result<()> {
    if name.is_empty() || name.chars().any(|c| c.is_control() || c == ':' || c == '.') {
        return Err(invalid(what, &format!("{name:?} must be non-empty, without ':', '.' or control characters")));
    }
    Ok(())
}

fn invalid(what: &'static str, reason: &str) -> TmuxError {
    TmuxError::Invalid { what, reason: reason.to_owned() }
}

fn unique_buffer_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("switchyard-{}-{}-{:08x}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed), rand::random::<u32>())
}

/// Gives `noted` their grace time and kills what outlives it, on a blocking thread of its own.
fn reap_later(noted: Vec<process_tree::Process>) {
    if !noted.is_empty() {
        tokio::task::spawn_blocking(move || process_tree::reap(&noted, process_tree::GRACE));
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn attaching_switches_a_client_of_the_same_server_and_attaches_any_other_terminal() {
        let args = |tmux_env: Option<&str>| {
            let cmd = attach_command("switchyard", "%7", tmux_env);
            cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>()
        };
        let inside = Some("/tmp/tmux-0/switchyard,123,0");
        assert_eq!(args(inside), ["-L", "switchyard", "switch-client", "-t", "%7"]);
        assert_eq!(args(Some("/tmp/tmux-0/default,99,1")), ["-L", "switchyard", "attach-session", "-t", "%7"]);
        assert_eq!(args(None), ["-L", "switchyard", "attach-session", "-t", "%7"]);
    }
    use super::*;

    #[test]
    fn pane_lines_parse_with_any_window_name_last() {
        let line = ["@3", "%7", "4242", "1", "7", "", "1795320159", "odd name\u{1f}with sep"].join("\u{1f}");
        let pane = parse_pane_line(&line).unwrap();
        assert_eq!(pane.window_name, "odd name\u{1f}with sep");
        assert_eq!((pane.dead, pane.dead_status, pane.dead_signal), (true, Some(7), None));
        assert_eq!(pane.activity.timestamp(), 1795320159);
        assert!(parse_pane_line("@3").is_err());
    }

    #[test]
    fn names_that_tmux_would_mangle_are_refused() {
        for bad in ["", "a:b", "a.b", "a\nb", "a\u{1f}b"] {
            assert!(check_name("window name", bad).is_err(), "{bad:?}");
        }
        assert!(check_name("window name", "agent-1 ;#$~").is_ok());
        assert!(Tmux::new("a/b").is_err());
    }

    #[test]
    fn only_the_allowed_variables_reach_tmux() {
        let vars = ["PATH", "HOME", "LC_ALL", "LC_", "DATABASE_URL", "SWITCHYARD_INBOUND_HOOKS", "TMUX", "TMUX_PANE"]
            .map(|k| (k.into(), "x".into()));
        let kept: Vec<_> = inherited_env(vars).into_iter().map(|(k, _)| k).collect();
        assert_eq!(kept, ["PATH", "HOME", "LC_ALL"]);
    }

    #[test]
    fn buffer_names_are_unique() {
        assert_ne!(unique_buffer_name(), unique_buffer_name());
    }
}
