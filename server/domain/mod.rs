//! The domain: Switchyard's state machines and rules, as pure functions with no I/O.
//!
//! Nothing here touches the database, tmux, git or the network, so every rule can be tested
//! exhaustively beside its code. The database layer applies these functions and then writes the
//! result with a conditional `UPDATE … WHERE status = $old`, so two writers can never both win.
//!
//! - [`agent`]: an agent's state (observed by the worker) and its transitions.
//! - [`interruption`]: when an agent whose pane vanished is resumed on its own, and what it is told.
//! - [`agent_kind`]: an agent's kind, role and name rule.
//! - [`task`]: the task status set and its transitions (standalone tasks and wish groups).
//! - [`wish`]: a wish's lifecycle, hold, blockers and resume.
//! - [`plan`]: validation of a wish's execution groups (keys, dependencies, cycles).
//! - [`progress`]: in-memory dependency progress over a validated plan.
//! - [`merge_queue`]: a merge queue entry's states, fix-agent handoff and predicted waits.
//! - [`review`]: the review loop against an iteration cap.
//! - [`project`]: the project slug rule and its typed settings (multiclaude's configs).
//! - [`board`]: column gates and column blueprints, with their validation.
//! - [`team`]: a team's lifecycle and its name rule.
//! - [`message`]: the mailbox's rules: bodies, and how delivery goes on from where it stopped.
//! - [`typed`]: what text typed into a pane may hold (no control characters but tab and newline).
//! - [`webhook`]: which events a subscription wants (types, patterns, hook names) and retry timing.
//! - [`usage`]: token use read from a Claude Code transcript, per model.
//! - [`cost`]: prices per model and what per-model sums cost.
//! - [`webhook_format`]: what a delivery looks like on the wire (standard, Slack, ntfy).
//! - [`when`]: times as people read them ("3 min ago").

pub mod agent;
pub mod agent_kind;
pub mod board;
pub mod briefs;
pub mod cost;
pub mod interruption;
pub mod merge_queue;
pub mod message;
pub mod permissions;
pub mod plan;
pub mod progress;
pub mod project;
pub mod review;
pub mod task;
pub mod team;
pub mod typed;
pub mod usage;
pub mod webhook;
pub mod webhook_format;
pub mod when;
pub mod wish;

/// A status string that names no known status, e.g. from an API request or a database row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} status {value:?}; expected one of: {}", .expected.join(", "))]
pub struct UnknownStatus {
    /// Which status set was being parsed (`"task"`, `"wish"`).
    pub kind: &'static str,
    /// The value that was given.
    pub value: String,
    /// Every accepted value, so the caller can tell the user what would have worked.
    pub expected: Vec<&'static str>,
}

/// Parses `value` as one of `all`, by each status's wire name; shared so every status enum
/// accepts exactly the strings it serializes to and reports failures the same way.
fn parse_status<T: Copy>(
    kind: &'static str,
    all: &[T],
    name: fn(&T) -> &'static str,
    value: &str,
) -> Result<T, UnknownStatus> {
    all.iter().find(|status| name(status) == value).copied().ok_or_else(|| UnknownStatus {
        kind,
        value: value.to_owned(),
        expected: all.iter().map(name).collect(),
    })
}
