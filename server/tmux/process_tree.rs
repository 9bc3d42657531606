//! Ending everything a pane started. Closing a pane hangs up its terminal, and an agent ends on
//! the hang-up, saving what it saves (Claude Code its transcript); but not every process does:
//! Gemini CLI's relaunched child kept running on a hung-up terminal at most of a core, and a
//! process of the agent's own that left the terminal's process group never hears it. So the
//! pane's processes and everything below them are noted before the pane closes, given a grace
//! time to end on the hang-up, and killed if they have not. Under the sandbox this reaches
//! whatever the agent started however it detached: bubblewrap's init is one of the noted
//! processes, and killing it ends its whole pid namespace.
//!
//! Processes are told apart by pid and start time, so a pid reused meanwhile is never signalled.
//! Read from `/proc` in the host's pid namespace.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// How long processes get to end on the hang-up before they are killed.
pub const GRACE: Duration = Duration::from_secs(5);

/// One process, as `/proc` named it when it was noted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Process {
    pub pid: i32,
    /// Its start time (clock ticks after boot): a later process with the same pid differs.
    started: u64,
}

impl Process {
    /// Whether this very process still runs (a zombie has ended).
    pub fn alive(&self) -> bool {
        stat(self.pid).is_some_and(|s| s.started == self.started && s.state != 'Z')
    }
}

/// What `/proc/<pid>/stat` says that matters here.
struct Stat {
    state: char,
    parent: i32,
    started: u64,
}

fn stat(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The fields after the command name's parentheses (the name may hold spaces and parentheses):
/// state is the 1st, the parent the 2nd, the start time the 20th.
fn parse_stat(line: &str) -> Option<Stat> {
    let after = line.get(line.rfind(')')? + 2..)?;
    let fields: Vec<&str> = after.split(' ').collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        parent: fields.get(1)?.parse().ok()?,
        started: fields.get(19)?.parse().ok()?,
    })
}

/// `roots` and every process below them, as they run now.
pub fn below(roots: &[i32]) -> Vec<Process> {
    let mut children: HashMap<i32, Vec<Process>> = HashMap::new();
    let mut all: HashMap<i32, Process> = HashMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let Some(s) = stat(pid) else { continue };
        let process = Process { pid, started: s.started };
        all.insert(pid, process);
        children.entry(s.parent).or_default().push(process);
    }
    let mut found: Vec<Process> = roots.iter().filter_map(|pid| all.get(pid).copied()).collect();
    let mut next = 0;
    while next < found.len() {
        let pid = found[next].pid;
        for child in children.get(&pid).into_iter().flatten() {
            if !found.contains(child) {
                found.push(*child);
            }
        }
        next += 1;
    }
    found
}

/// Waits up to `grace` for `noted` to end, then kills what still runs and anything it started
/// since. Blocking: run it off the async threads.
pub fn reap(noted: &[Process], grace: Duration) {
    let deadline = Instant::now() + grace;
    while noted.iter().any(Process::alive) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left: Vec<i32> = noted.iter().filter(|p| p.alive()).map(|p| p.pid).collect();
    if left.is_empty() {
        return;
    }
    // Read again: what the survivors started since was not noted.
    let survivors = below(&left);
    tracing::info!(processes = survivors.len(), "processes of a closed pane outlived its hang-up; killing them");
    for process in survivors {
        if process.alive() {
            let _ = kill(Pid::from_raw(process.pid), Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_is_read_past_a_name_with_spaces_and_parentheses() {
        let line = "4242 (node (gemini) x) S 4200 4242 4242 34816 4242 4194304 1 0 0 0 5 2 0 0 20 0 11 0 98765 1 2 3";
        let stat = parse_stat(line).expect("parsed");
        assert_eq!((stat.state, stat.parent, stat.started), ('S', 4200, 98765));
    }

    #[test]
    fn a_process_that_ignores_the_hang_up_is_killed_with_what_it_started() {
        // A shell that ignores SIGHUP and starts a child that does too.
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "trap '' HUP; sh -c \"trap '' HUP; sleep 600\" & sleep 600; wait"])
            .spawn()
            .expect("sh");
        let root = shell.id() as i32;
        let deadline = Instant::now() + Duration::from_secs(10);
        let noted = loop {
            let noted = below(&[root]);
            // The shell, its child shell (or its sleep) and its own sleep.
            if noted.len() >= 3 || Instant::now() > deadline {
                break noted;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(noted.len() >= 3, "{noted:?}");
        for process in &noted {
            let _ = kill(Pid::from_raw(process.pid), Signal::SIGHUP);
        }
        reap(&noted, Duration::from_millis(300));
        let _ = shell.wait();
        // A killed process ends once the kernel gets to it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while noted.iter().any(Process::alive) {
            assert!(Instant::now() < deadline, "{noted:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
