//! Who holds a pane's terminal: the pane's own process group (the agent at its prompt, or
//! running something of its own), or another one that a job-controlling program gave the
//! terminal to (a shell running `cargo test`). Not tmux's `#{pane_current_command}`: that names
//! the foreground group's leader, which for a script (`#!/usr/bin/env python3`) is its
//! interpreter, never the script's own name, so comparing names called such an agent busy for
//! ever. Process groups compare the same whatever runs the agent: `nice` execs it in the pane's
//! group; under `bwrap` it runs two processes down, in the pane's group too unless it made one of
//! its own to hold the terminal (as a shell with job control does), which is then its own group
//! as well. Groups are read from here, in the host's pid namespace.

/// The program that holds the terminal of the pane whose first process is `pane_pid`, when it
/// is in another process group than that process; `None` when the pane's own group holds it
/// (idle as far as the terminal tells), or when `/proc` cannot say.
pub fn other_group_holding(pane_pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pane_pid}/stat")).ok()?;
    let (pgrp, tpgid) = groups(&stat)?;
    if tpgid <= 0 || tpgid == pgrp || agents_own_groups(pane_pid).contains(&tpgid) {
        return None;
    }
    Some(program(tpgid).unwrap_or_else(|| format!("process group {tpgid}")))
}

/// The process groups of the processes between the pane's first process and the agent: each
/// `bwrap` (its monitor outside the pid namespace, its init inside) and the one child it runs.
fn agents_own_groups(pane_pid: u32) -> Vec<i64> {
    let mut found = Vec::new();
    let mut pid = i64::from(pane_pid);
    // bwrap's two processes, then the agent: never deeper.
    for _ in 0..3 {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() != "bwrap" {
            break;
        }
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        let mut children = children.split_whitespace().filter_map(|c| c.parse::<i64>().ok());
        let (Some(child), None) = (children.next(), children.next()) else { break };
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        let Some((child_group, _)) = groups(&stat) else { break };
        found.push(child_group);
        pid = child;
    }
    found
}

/// `(pgrp, tpgid)` of a `/proc/<pid>/stat` line: the 5th and 8th fields, counted after the
/// command name's parentheses (the name may hold spaces and parentheses).
fn groups(stat: &str) -> Option<(i64, i64)> {
    let after = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = after.split(' ').collect();
    // After the name: state ppid pgrp session tty_nr tpgid.
    Some((fields.get(2)?.parse().ok()?, fields.get(5)?.parse().ok()?))
}

/// The name tmux would give the group's leader: its argv[0]'s last part, else its `comm`.
fn program(pid: i64) -> Option<String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let first = cmdline.split(|b| *b == 0).next().filter(|a| !a.is_empty());
    match first {
        Some(arg) => {
            let arg = String::from_utf8_lossy(arg);
            Some(arg.rsplit('/').next().unwrap_or(&arg).to_owned())
        }
        None => Some(std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?.trim().to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_groups_are_read_after_the_name_whatever_it_holds() {
        let stat = "4242 (a (weird) name) S 1 4242 4242 34817 5000 4194560 0 0";
        assert_eq!(groups(stat), Some((4242, 5000)));
        assert_eq!(groups("1 (x) S 0 1 1 0 -1 0"), Some((1, -1)));
        assert_eq!(groups("garbage"), None);
    }

    #[test]
    fn a_process_without_a_terminal_has_no_other_group_holding_it() {
        // The test runner's own process: its terminal, if any, is not handed to another group
        // by this test; a pid that does not exist says nothing.
        assert_eq!(other_group_holding(u32::MAX - 1), None);
    }
}
