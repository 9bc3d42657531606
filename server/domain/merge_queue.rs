//! The merge queue's rules: an entry's states (`pending → processing → completed | failed |
//! conflict`), what happens after a failed attempt (a fix agent, up to the project's cap, or a
//! person), and which entry ahead a predicted conflict makes an entry wait for.
//!
//! ```text
//! pending ──claim──▶ processing ──merged──▶ completed
//!    ▲                   │ └──conflict──▶ conflict ─┐
//!    │                   └──failed────▶ failed ────┤
//!    ├──recover (crash: the claim's process is gone) │
//!    └──retry / fixed ◀──────────────────────────────┘
//! pending ──ci_failed (the branch's CI failed while it waited)──▶ failed
//! ```
//! An entry is removed (its row deleted) from `pending`, `failed` or `conflict`, never while it
//! is processing; held entries are skipped, not moved.

pub mod batches;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::UnknownStatus;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    Pending,
    Processing,
    Completed,
    Failed,
    Conflict,
}

impl EntryState {
    pub const ALL: [EntryState; 5] =
        [EntryState::Pending, EntryState::Processing, EntryState::Completed, EntryState::Failed, EntryState::Conflict];

    pub fn as_str(&self) -> &'static str {
        match self {
            EntryState::Pending => "pending",
            EntryState::Processing => "processing",
            EntryState::Completed => "completed",
            EntryState::Failed => "failed",
            EntryState::Conflict => "conflict",
        }
    }
}

impl fmt::Display for EntryState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for EntryState {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        super::parse_status("merge queue entry", &Self::ALL, Self::as_str, s)
    }
}

/// Something that happens to an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryEvent {
    Claim,
    Merged,
    Conflict,
    Failed,
    /// The process that claimed it is gone and the target branch did not move to its merge.
    Recover,
    /// A person retries it, or its fix agent reports the branch fixed.
    Retry,
    /// CI reported the wish's branch failing while it waited.
    CiFailed,
}

impl EntryEvent {
    pub fn name(&self) -> &'static str {
        match self {
            EntryEvent::Claim => "claim",
            EntryEvent::Merged => "merged",
            EntryEvent::Conflict => "conflict",
            EntryEvent::Failed => "failed",
            EntryEvent::Recover => "recover",
            EntryEvent::Retry => "retry",
            EntryEvent::CiFailed => "ci_failed",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot {} a merge queue entry that is {from}", .event)]
pub struct IllegalEntryEvent {
    pub from: EntryState,
    pub event: &'static str,
}

pub fn transition(from: EntryState, event: EntryEvent) -> Result<EntryState, IllegalEntryEvent> {
    use EntryEvent as E;
    use EntryState as S;
    match (from, event) {
        (S::Pending, E::Claim) => Ok(S::Processing),
        (S::Processing, E::Merged) => Ok(S::Completed),
        (S::Processing, E::Conflict) => Ok(S::Conflict),
        (S::Processing, E::Failed) => Ok(S::Failed),
        (S::Processing, E::Recover) => Ok(S::Pending),
        (S::Failed | S::Conflict, E::Retry) => Ok(S::Pending),
        (S::Pending, E::CiFailed) => Ok(S::Failed),
        _ => Err(IllegalEntryEvent { from, event: event.name() }),
    }
}

/// Whether a person may remove the entry now.
pub fn removable(state: EntryState) -> bool {
    matches!(state, EntryState::Pending | EntryState::Failed | EntryState::Conflict)
}

/// Where a conflicting or failing entry goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handoff {
    /// A new fix agent (this is its number, from 1).
    FixAgent(i32),
    /// A person: the cap is reached, the project sends conflicts to people, or no agent can fix it.
    Human,
}

/// Why an attempt did not merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setback {
    Conflict,
    GateFailed,
    /// The target branch cannot be moved as things are (checked out under a working tree): only
    /// a person can change that.
    Refused,
}

/// The next step after a setback, given the fix agents already sent for this entry.
pub fn handoff(setback: Setback, fix_attempts: i32, fix_cap: i32, conflicts_to_human: bool) -> Handoff {
    match setback {
        Setback::Refused => Handoff::Human,
        Setback::Conflict if conflicts_to_human => Handoff::Human,
        _ if fix_attempts >= fix_cap => Handoff::Human,
        _ => Handoff::FixAgent(fix_attempts + 1),
    }
}

/// What a trial merge of an entry's branch with another branch predicts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Predicted {
    Clean,
    Conflict {
        files: Vec<String>,
    },
    /// git could not say (a branch is missing, a timeout).
    Unknown {
        why: String,
    },
}

/// The first entry ahead (in queue order) the entry is predicted to conflict with: it waits for
/// that one to leave the queue, then is predicted again.
pub fn held_for<'a>(ahead: impl IntoIterator<Item = (&'a str, &'a Predicted)>) -> Option<&'a str> {
    ahead.into_iter().find(|(_, p)| matches!(p, Predicted::Conflict { .. })).map(|(slug, _)| slug)
}

/// The most of a gate's output a fix agent is sent.
pub const LOG_TAIL: usize = 4000;

/// The last `max` bytes of `log` (cut at a character boundary), as text a pane may be given:
/// control characters other than newline and tab are dropped (a test's colours, a stray escape).
pub fn log_tail(log: &str, max: usize) -> String {
    let mut start = log.len().saturating_sub(max);
    while !log.is_char_boundary(start) {
        start += 1;
    }
    log[start..].chars().filter(|c| !c.is_control() || matches!(c, '\n' | '\t')).collect()
}

/// What a fix agent for a conflict is told.
pub fn conflict_brief(wish: &str, branch: &str, target: &str, files: &[String]) -> String {
    let files = if files.is_empty() { "(git named none)".to_owned() } else { files.join(", ") };
    format!(
        "The merge queue could not merge wish `{wish}` (branch `{branch}`) into `{target}`: these files conflict: \
         {files}.\nIn your clone, on `{branch}`: run `git fetch origin` and `git merge origin/{target}`, resolve \
         the conflicts keeping both sides' intent, commit, run the tests, then report with \
         `switchyard fix done --summary \"<what you resolved>\"` (it pushes your branch)."
    )
}

/// What a fix agent for a failed gate (or CI) is told: the command and the end of its output.
pub fn gate_brief(wish: &str, branch: &str, target: &str, check: &str, log: &str) -> String {
    let tail = log_tail(log, LOG_TAIL);
    format!(
        "The gate `{check}` failed on the merge of wish `{wish}` (branch `{branch}`) into `{target}`. \
         The end of its output:\n```\n{tail}\n```\nIn your clone, on `{branch}`: run `git fetch origin` and \
         `git merge origin/{target}`, fix what fails, commit, then report with \
         `switchyard fix done --summary \"<what you fixed>\"` (it pushes your branch)."
    )
}

#[cfg(test)]
mod tests {
    use super::EntryEvent as E;
    use super::EntryState as S;
    use super::*;

    const EVENTS: [EntryEvent; 7] = [E::Claim, E::Merged, E::Conflict, E::Failed, E::Recover, E::Retry, E::CiFailed];
    const LEGAL: [(EntryState, EntryEvent, EntryState); 8] = [
        (S::Pending, E::Claim, S::Processing),
        (S::Processing, E::Merged, S::Completed),
        (S::Processing, E::Conflict, S::Conflict),
        (S::Processing, E::Failed, S::Failed),
        (S::Processing, E::Recover, S::Pending),
        (S::Failed, E::Retry, S::Pending),
        (S::Conflict, E::Retry, S::Pending),
        (S::Pending, E::CiFailed, S::Failed),
    ];

    #[test]
    fn every_state_and_event_pair_is_legal_exactly_as_listed() {
        for from in EntryState::ALL {
            for event in EVENTS {
                let expected = LEGAL.iter().find(|(f, e, _)| *f == from && *e == event).map(|(_, _, to)| *to);
                match (transition(from, event), expected) {
                    (Ok(to), Some(want)) => assert_eq!(to, want, "{from} {event:?}"),
                    (Err(e), None) => assert_eq!(e, IllegalEntryEvent { from, event: event.name() }),
                    (got, want) => panic!("{from} {event:?}: got {got:?}, expected {want:?}"),
                }
            }
        }
    }

    #[test]
    fn states_parse_as_they_print_and_only_settled_entries_are_removable() {
        for state in EntryState::ALL {
            assert_eq!(state.as_str().parse::<EntryState>(), Ok(state));
        }
        assert!("merged".parse::<EntryState>().is_err());
        assert!(!removable(S::Processing));
        assert!(!removable(S::Completed));
        assert!(removable(S::Pending) && removable(S::Failed) && removable(S::Conflict));
    }

    #[test]
    fn setbacks_get_fix_agents_up_to_the_cap_then_a_person() {
        assert_eq!(handoff(Setback::Conflict, 0, 2, false), Handoff::FixAgent(1));
        assert_eq!(handoff(Setback::GateFailed, 1, 2, false), Handoff::FixAgent(2));
        assert_eq!(handoff(Setback::GateFailed, 2, 2, false), Handoff::Human);
        assert_eq!(handoff(Setback::Conflict, 0, 0, false), Handoff::Human);
        // Conflicts to people: a gate failure still gets an agent.
        assert_eq!(handoff(Setback::Conflict, 0, 2, true), Handoff::Human);
        assert_eq!(handoff(Setback::GateFailed, 0, 2, true), Handoff::FixAgent(1));
        assert_eq!(handoff(Setback::Refused, 0, 2, false), Handoff::Human);
    }

    #[test]
    fn a_brief_carries_the_log_tail_as_plain_text() {
        let log = format!("{}\x1b[31mFAILED\x1b[0m test_x\r\nend é", "x".repeat(10_000));
        let tail = log_tail(&log, 40);
        assert!(tail.len() <= 40 && tail.ends_with("test_x\nend é"), "{tail:?}");
        assert!(!tail.contains('\x1b') && !tail.contains('\r'));
        assert_eq!(log_tail("é", 1), "");
        let brief = gate_brief("w", "wish/w", "main", "cargo test", &log);
        assert!(brief.contains("`cargo test`") && brief.contains("FAILED") && brief.len() < LOG_TAIL + 600);
        assert!(crate::domain::message::check_body(&brief).is_ok());
        let brief = conflict_brief("w", "wish/w", "main", &["a.rs".into(), "b.rs".into()]);
        assert!(brief.contains("a.rs, b.rs") && brief.contains("git merge origin/main"));
        assert!(crate::domain::message::check_body(&brief).is_ok());
    }

    #[test]
    fn an_entry_waits_for_the_first_entry_ahead_it_conflicts_with() {
        let clean = Predicted::Clean;
        let conflict = Predicted::Conflict { files: vec!["a.rs".into()] };
        let unknown = Predicted::Unknown { why: "missing".into() };
        assert_eq!(held_for([("a", &clean), ("b", &unknown)]), None);
        assert_eq!(held_for([("a", &clean), ("b", &conflict), ("c", &conflict)]), Some("b"));
        assert_eq!(held_for(std::iter::empty()), None);
    }
}
