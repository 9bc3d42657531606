//! Agents' niceness where the kernel shares the CPU between sessions first.
//!
//! With autogroup scheduling (`CONFIG_SCHED_AUTOGROUP`, built into most distributions' kernels
//! and on unless `kernel.sched_autogroup_enabled = 0`), the CPU is shared between sessions, and a
//! process's nice value only orders it among its own session's. tmux starts each pane in a
//! session of its own, so an agent under `nice -n 10` weighed as much as the whole server: on this
//! machine four nice-19 busy loops, each in a session of its own, got as much CPU each as one at
//! nice 0. A session's group has a niceness of its own (`/proc/<pid>/autogroup`); giving it the
//! provider's makes `nice` mean what it says.

use std::time::Duration;

use tokio::sync::Mutex;

/// An unprivileged process may change some autogroup's niceness once per 100 ms (EAGAIN
/// otherwise), whichever it is: the changes go one at a time, each retried this often…
const RETRY_EVERY: Duration = Duration::from_millis(110);
/// …this many times (someone else's changes may take turns too).
const TRIES: u32 = 30;

static ONE_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// Gives the session led by `pid` (a pane's process, whose whole session the agent runs in) the
/// niceness `nice`, in the background. Nothing to do where the kernel has no autogroups (no such
/// file) or the pane is already gone.
pub fn set(pid: u32, nice: u8) {
    if nice == 0 {
        return;
    }
    tokio::spawn(async move {
        let _turn = ONE_AT_A_TIME.lock().await;
        let file = format!("/proc/{pid}/autogroup");
        for _ in 0..TRIES {
            match std::fs::write(&file, nice.to_string()) {
                Ok(()) => return,
                Err(e) if e.raw_os_error() == Some(libc::EAGAIN) => tokio::time::sleep(RETRY_EVERY).await,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(e) => return tracing::debug!(pid, error = %e, "cannot set the niceness of an agent's session"),
            }
        }
        tracing::debug!(pid, "the kernel kept refusing to change the niceness of an agent's session");
    });
}
