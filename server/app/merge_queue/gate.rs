//! The gate: the project's `merge_check` run with `sh -c` in the scratch clone of a merge commit,
//! with a timeout, its output (stdout and stderr as they arrive, the last [`KEEP`] bytes) kept as
//! the entry's log. The command is the project's but what it runs comes from an agent's branch
//! (`./ci/test.sh`), so it runs confined ([`Confinement`]) under bubblewrap where it is installed:
//! the scratch clone writable (its `.git` not), the system, the tools and the project's
//! repository read-only, nothing else of the data directory (no agent's token), no capability.
//! Either way it gets only the environment a build needs: never the server's database URL or
//! tokens. A gate outlives nothing: it runs in a process group of its own, ended whole when the
//! gate ends, times out or is cancelled ([`Group`]); its group is told to the caller as it starts
//! (to be recorded), and [`end_left`] ends the group of a gate a dead process left behind.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::providers::sandbox::{self, Network};

/// The most output kept (its end).
pub const KEEP: usize = 64 * 1024;

/// Variables a build may need; everything else of the server's environment stays out.
const PASSED_ON: [&str; 9] = ["PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "CARGO_HOME", "RUSTUP_HOME", "SHELL"];

/// How gates run on this node (`serve --gate-network`, `--gate-paths`).
#[derive(Debug, Clone, Default)]
pub struct GateSettings {
    pub network: Network,
    /// Shown read-only besides the system, the tools on `PATH` and the project's repository.
    pub read_only: Vec<PathBuf>,
}

/// The sandbox a gate runs in: its network and what it is shown read-only.
#[derive(Debug, Clone)]
pub struct Confinement {
    pub network: Network,
    pub read_only: Vec<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateRun {
    pub passed: bool,
    /// The exit as words: `exit 0`, `exit 101`, `killed after 600 s`.
    pub outcome: String,
    pub log: String,
}

/// Runs `command` in `dir`, `confined` when given (else as the server's user); `started` is
/// awaited with the gate's process group and its leader's identity ([`leader`]) as soon as it
/// runs, and `alive` every `every` while it runs (the claims' leases).
pub async fn run<F, Fut, S, SFut>(
    dir: &Path,
    confined: Option<&Confinement>,
    command: &str,
    (timeout, every): (Duration, Duration),
    started: S,
    mut alive: F,
) -> GateRun
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
    S: FnOnce(i32, String) -> SFut,
    SFut: std::future::Future<Output = ()>,
{
    let shell = crate::programs::on_own_path("sh");
    let argv = vec![shell.to_string_lossy().into_owned(), "-c".to_owned(), command.to_owned()];
    // An empty home in the sandbox, unless it is the root itself.
    let home = std::env::var_os("HOME").map(PathBuf::from).filter(|home| home.parent().is_some());
    let argv = match confined {
        Some(c) => sandbox::gate(c.network, dir, &c.read_only, home.as_deref(), argv),
        None => argv,
    };
    let program = match confined {
        Some(_) => crate::programs::on_own_path("bwrap"),
        None => shell,
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&argv[1..]).current_dir(dir).env_clear().stdin(Stdio::null());
    for name in PASSED_ON {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    if confined.is_some() {
        // The sandbox's own, empty /tmp: the server's TMPDIR is not there.
        cmd.env("TMPDIR", "/tmp");
    }
    cmd.env("TERM", "dumb").env("CI", "true").stdout(Stdio::piped()).stderr(Stdio::piped());
    // Its own process group: a timeout kills everything it started, not just the shell (under
    // bubblewrap, the sandbox: what runs inside dies with it).
    cmd.process_group(0).kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => return GateRun { passed: false, outcome: format!("cannot start: {e}"), log: String::new() },
    };
    // Whatever way this ends (done, timed out, or the caller gives up on it), the group goes.
    let group = child.id().map(|pid| Group(pid as i32));
    if let Some(Group(pgid)) = &group {
        started(*pgid, leader(*pgid).unwrap_or_default()).await;
    }
    let log = Arc::new(Mutex::new(Vec::new()));
    let readers = [
        child.stdout.take().map(|out| tokio::spawn(collect(out, log.clone()))),
        child.stderr.take().map(|err| tokio::spawn(collect(err, log.clone()))),
    ];
    let deadline = tokio::time::Instant::now() + timeout;
    let mut ticker = tokio::time::interval(every);
    ticker.tick().await;
    let outcome = loop {
        tokio::select! {
            status = child.wait() => break match status {
                Ok(s) if s.success() => Ok(()),
                Ok(s) => Err(s.code().map(|c| format!("exit {c}")).unwrap_or_else(|| format!("ended by {s}"))),
                Err(e) => Err(format!("cannot wait for it: {e}")),
            },
            _ = tokio::time::sleep_until(deadline) => {
                if let Some(group) = &group {
                    group.kill();
                }
                let _ = child.wait().await;
                break Err(format!("killed after {} s", timeout.as_secs()));
            }
            _ = ticker.tick() => alive().await,
        }
    };
    // What the gate left running in the background goes with it.
    drop(group);
    for reader in readers.into_iter().flatten() {
        // The group is gone or done; a grandchild holding the pipe must not keep us waiting.
        let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
    }
    let log = String::from_utf8_lossy(&log.lock().map(|l| l.clone()).unwrap_or_default()).into_owned();
    match outcome {
        Ok(()) => GateRun { passed: true, outcome: "exit 0".into(), log },
        Err(outcome) => GateRun { passed: false, outcome, log },
    }
}

/// A gate's process group, killed when dropped.
struct Group(i32);

impl Group {
    fn kill(&self) {
        let _ = nix::sys::signal::killpg(nix::unistd::Pid::from_raw(self.0), nix::sys::signal::Signal::SIGKILL);
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The identity of process `pid`: `<boot id>:<start time>` (clock ticks after boot), which no
/// other process shares, even one given the same pid later; `None` when it is gone.
pub fn leader(pid: i32) -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(format!("{}:{}", boot.trim(), stat(pid)?.1))
}

/// Process `pid`'s state letter, start time and process group, from `/proc/<pid>/stat`.
fn stat(pid: i32) -> Option<(char, u64, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold anything: fields count from its end.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    Some((fields.first()?.chars().next()?, fields.get(19)?.parse().ok()?, fields.get(2)?.parse().ok()?))
}

/// Live (not zombie) processes in group `pgid`.
fn members(pgid: i32) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    dir.flatten()
        .filter_map(|p| p.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .filter(|(state, _, group)| *group == pgid && *state != 'Z')
        .count()
}

/// Ends the process group `pgid` a gate left when its process died (`leader` as recorded when
/// it started) and waits until none of it runs, up to `patience`; whether it is gone. A group
/// whose leader's pid now names another process (or that ran before a reboot) is not the gate's
/// and is left alone: it is gone as far as the gate goes.
pub async fn end_left(pgid: i32, leader_was: &str, patience: Duration) -> bool {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    if !leader_was.starts_with(boot.trim()) {
        return true;
    }
    if let Some(now) = leader(pgid) {
        if now != leader_was {
            return true;
        }
    }
    // The leader is the gate's, or gone while its group may live on (a pid that leads a group
    // is not given to a new process while the group has members).
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        Group(pgid).kill();
        if members(pgid) == 0 {
            return true;
        }
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Appends what `from` says to `log`, keeping its last [`KEEP`] bytes.
async fn collect(mut from: impl AsyncRead + Unpin, log: Arc<Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 8192];
    while let Ok(n) = from.read(&mut buf).await {
        if n == 0 {
            break;
        }
        if let Ok(mut log) = log.lock() {
            log.extend_from_slice(&buf[..n]);
            if log.len() > KEEP {
                let cut = log.len() - KEEP;
                log.drain(..cut);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn no_record(_: i32, _: String) {}

    /// A group left running by a process that died is ended whole; a pid that names another
    /// process now is left alone.
    #[tokio::test]
    async fn a_group_left_behind_is_ended_whole_and_a_reused_pid_is_left_alone() {
        use std::os::unix::process::CommandExt;
        let mut left = std::process::Command::new("sh");
        left.args(["-c", "sleep 300 & sleep 300 & wait"]).process_group(0);
        let mut left = left.spawn().unwrap();
        let pgid = left.id() as i32;
        let was = leader(pgid).unwrap();
        // Not ours to reap in the story (its process died): a thread stands in for init.
        let reaper = std::thread::spawn(move || left.wait());
        let started = std::time::Instant::now();
        while members(pgid) < 3 {
            assert!(started.elapsed() < Duration::from_secs(10), "the group started");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(end_left(pgid, "another-boot:1", Duration::from_secs(1)).await, "another boot's: not ours");
        assert_eq!(members(pgid), 3);
        let (boot, _) = was.split_once(':').unwrap();
        assert!(end_left(pgid, &format!("{boot}:1"), Duration::from_secs(1)).await, "another process's pid");
        assert_eq!(members(pgid), 3, "left alone");
        assert!(end_left(pgid, &was, Duration::from_secs(10)).await);
        assert_eq!(members(pgid), 0, "the whole group is gone");
        reaper.join().unwrap().unwrap();
    }

    /// How a gate may run here: as we do, and under bubblewrap where it is installed.
    fn ways() -> Vec<Option<Confinement>> {
        let mut ways = vec![None];
        if crate::programs::on_own_path("bwrap").is_absolute() {
            ways.push(Some(Confinement { network: Network::None, read_only: Vec::new() }));
        }
        ways
    }

    #[tokio::test]
    async fn a_gate_passes_or_fails_with_its_output_and_a_hung_one_is_killed() {
        for confined in ways() {
            let confined = confined.as_ref();
            let dir = tempfile::tempdir().unwrap();
            let never = || async {};
            let tick = Duration::from_secs(10);
            let check = "echo out; echo err >&2; test -z \"$DATABASE_URL\"";
            let ok = run(dir.path(), confined, check, (Duration::from_secs(10), tick), no_record, never).await;
            assert!(ok.passed, "{ok:?}");
            assert!(ok.log.contains("out") && ok.log.contains("err"));
            let failed =
                run(dir.path(), confined, "echo boom; exit 3", (Duration::from_secs(10), tick), no_record, never).await;
            assert_eq!((failed.passed, failed.outcome.as_str(), failed.log.as_str()), (false, "exit 3", "boom\n"));
            let started = std::time::Instant::now();
            let hung =
                run(dir.path(), confined, "sleep 30 & sleep 30", (Duration::from_millis(300), tick), no_record, never)
                    .await;
            assert!(!hung.passed && hung.outcome.starts_with("killed"), "{hung:?}");
            assert!(started.elapsed() < Duration::from_secs(10));
        }
    }

    #[tokio::test]
    async fn a_confined_gate_writes_its_clone_only_and_has_no_capability() {
        if !crate::programs::on_own_path("bwrap").is_absolute() {
            return; // nothing to confine with: the gate runs as the server's user (and says so)
        }
        let outside = tempfile::tempdir().unwrap();
        let scratch = outside.path().join("scratch");
        std::fs::create_dir_all(scratch.join(".git")).unwrap();
        let host_file = outside.path().join("written-from-the-gate");
        let confined = Confinement { network: Network::None, read_only: Vec::new() };
        let check = format!(
            "grep CapEff /proc/self/status; echo made > made.txt; touch .git/config-from-gate; touch '{}'; ls '{}'",
            host_file.display(),
            outside.path().display()
        );
        let tick = Duration::from_secs(10);
        let gate =
            run(&scratch, Some(&confined), &check, (Duration::from_secs(20), tick), no_record, || async {}).await;
        assert!(gate.log.contains("CapEff:\t0000000000000000"), "{gate:?}");
        assert!(scratch.join("made.txt").is_file(), "{gate:?}");
        assert!(!scratch.join(".git/config-from-gate").exists(), "{gate:?}");
        assert!(!host_file.exists(), "{gate:?}");
    }
}
