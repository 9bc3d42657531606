//! A wish's lifecycle: its state machine, with its hold flag, `blocked_by` wishes
//! and resume from an error state.
//!
//! ```text
//! draft → planned → queued → executing → completed → pending_merge → merged
//! error states: failed, conflict, interrupted, cancelled
//! ```
//!
//! Rules chosen where the sources leave room:
//! - **Hold.** While `held`, every event is refused with [`WishError::Held`] except `release`.
//!   A wish can be held in any state but the final ones (`merged`, `cancelled`).
//! - **Blockers.** `start` (queued → executing) is refused with [`WishError::BlockedBy`] while
//!   any `blocked_by` wish has not merged; queueing is allowed, so a blocked wish waits in line.
//! - **Cancel** is accepted from every state but `merged` and `cancelled`, error states
//!   included (giving up on a failed wish). `cancelled` can only be left by an explicit resume.
//! - **Merge failure.** Besides `conflict`, the merge queue can end in `failed` (fetch or push
//!   error); `merge_failed` moves `pending_merge → failed`.
//! - **Merge queue round trips.** `requeue` sends a wish the merge queue gave back (`conflict`,
//!   or `failed` there) to `pending_merge` again once a fix agent or a person has fixed its branch;
//!   the merge queue only uses it for a wish it holds an entry of. `withdraw` takes a
//!   `pending_merge` wish out of the queue, back to `completed`.
//! - **Resume** (from `failed`, `conflict`, `interrupted`, `cancelled`) goes to the last good
//!   state, derived from stored data rather than a remembered status:
//!   a `conflict` resumes to `pending_merge` (once fixed, the branch goes back to the merge
//!   queue); otherwise a wish whose groups exist as tasks (it was queued)
//!   resumes to `queued`, one with only a plan to `planned`, anything else to `draft`.
//!   It never resumes to `executing`: going through `queued` makes `start` check the blockers
//!   again, and groups already `done` stay done. An explicit target
//!   may be `draft`, `planned` or `queued`, and only if the data supports it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::UnknownStatus;

/// Where a wish is in its lifecycle. Stored as the snake_case name (`pending_merge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WishStatus {
    /// Stated, not planned yet.
    Draft,
    /// Has a plan of execution groups.
    Planned,
    /// Its groups exist as tasks; waiting to start.
    Queued,
    /// Agents are working on its groups.
    Executing,
    /// Every group is done; not yet in the merge queue.
    Completed,
    PendingMerge,
    Merged,
    Failed,
    /// The merge queue hit a merge conflict.
    Conflict,
    Interrupted,
    Cancelled,
}

impl WishStatus {
    /// Every status, happy path first, then the error states.
    pub const ALL: [WishStatus; 11] = [
        WishStatus::Draft,
        WishStatus::Planned,
        WishStatus::Queued,
        WishStatus::Executing,
        WishStatus::Completed,
        WishStatus::PendingMerge,
        WishStatus::Merged,
        WishStatus::Failed,
        WishStatus::Conflict,
        WishStatus::Interrupted,
        WishStatus::Cancelled,
    ];

    /// The wire and database name; matches the serde representation and the SQL `CHECK`.
    pub fn as_str(&self) -> &'static str {
        match self {
            WishStatus::Draft => "draft",
            WishStatus::Planned => "planned",
            WishStatus::Queued => "queued",
            WishStatus::Executing => "executing",
            WishStatus::Completed => "completed",
            WishStatus::PendingMerge => "pending_merge",
            WishStatus::Merged => "merged",
            WishStatus::Failed => "failed",
            WishStatus::Conflict => "conflict",
            WishStatus::Interrupted => "interrupted",
            WishStatus::Cancelled => "cancelled",
        }
    }

    /// Final states: nothing happens to the wish any more, and it cannot be held or cancelled.
    /// A cancelled wish can still be revived by an explicit resume.
    pub fn is_terminal(&self) -> bool {
        matches!(self, WishStatus::Merged | WishStatus::Cancelled)
    }

    /// Error states, the ones `resume` accepts.
    pub fn is_error(&self) -> bool {
        matches!(self, WishStatus::Failed | WishStatus::Conflict | WishStatus::Interrupted | WishStatus::Cancelled)
    }
}

impl fmt::Display for WishStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WishStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        super::parse_status("wish", &Self::ALL, Self::as_str, s)
    }
}

/// Where an executing wish is (the conductor's steps after its groups run). Stored snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WishPhase {
    /// Its groups run (or have not started).
    Groups,
    /// Every group is done; a reviewer agent reads the branch.
    AgentReview,
    /// A person reviews the branch on the wish's page.
    HumanReview,
    /// A review failed; a fix agent works on its notes.
    Fix,
}

impl WishPhase {
    pub const ALL: [WishPhase; 4] = [WishPhase::Groups, WishPhase::AgentReview, WishPhase::HumanReview, WishPhase::Fix];

    pub fn as_str(&self) -> &'static str {
        match self {
            WishPhase::Groups => "groups",
            WishPhase::AgentReview => "agent_review",
            WishPhase::HumanReview => "human_review",
            WishPhase::Fix => "fix",
        }
    }
}

impl fmt::Display for WishPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for WishPhase {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        super::parse_status("wish phase", &Self::ALL, Self::as_str, s)
    }
}

/// What the rules need to know about a wish, read from its row and related rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WishSnapshot {
    pub status: WishStatus,
    pub held: bool,
    /// How many of the wishes in its `blocked_by` have not merged yet.
    pub blockers_unmerged: usize,
    /// A validated plan with at least one execution group is stored.
    pub has_plan: bool,
    /// The plan's groups exist as tasks, created when the wish was queued.
    pub has_tasks: bool,
}

/// Something that happens to a wish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WishEvent {
    Plan,
    Queue,
    Start,
    AllGroupsDone,
    GroupFailed,
    SubmitForMerge,
    Merged,
    Conflict,
    /// The merge queue failed for a reason other than a conflict.
    MergeFailed,
    /// Back into the merge queue after a conflict or a merge failure was fixed.
    Requeue,
    /// Out of the merge queue, back to `completed`.
    Withdraw,
    Interrupt,
    Cancel,
    /// `to: None` picks the last good state; `Some` forces one (draft, planned or queued).
    Resume {
        to: Option<WishStatus>,
    },
    Hold,
    Release,
}

impl WishEvent {
    /// A stable snake_case name for the event, for errors, logs and API responses.
    pub fn name(&self) -> &'static str {
        match self {
            WishEvent::Plan => "plan",
            WishEvent::Queue => "queue",
            WishEvent::Start => "start",
            WishEvent::AllGroupsDone => "all_groups_done",
            WishEvent::GroupFailed => "group_failed",
            WishEvent::SubmitForMerge => "submit_for_merge",
            WishEvent::Merged => "merged",
            WishEvent::Conflict => "conflict",
            WishEvent::MergeFailed => "merge_failed",
            WishEvent::Requeue => "requeue",
            WishEvent::Withdraw => "withdraw",
            WishEvent::Interrupt => "interrupt",
            WishEvent::Cancel => "cancel",
            WishEvent::Resume { .. } => "resume",
            WishEvent::Hold => "hold",
            WishEvent::Release => "release",
        }
    }
}

/// What an event name does, worded to fit "cannot … a wish that is …".
fn verb(event: &str) -> &str {
    match event {
        "all_groups_done" => "complete",
        "group_failed" => "fail",
        "submit_for_merge" => "submit for merge",
        "merged" => "merge",
        "conflict" => "record a merge conflict on",
        "merge_failed" => "record a merge failure on",
        "requeue" => "send back to the merge queue",
        "withdraw" => "take out of the merge queue",
        other => other,
    }
}

/// The effect of an accepted event. Status changes and hold changes never happen together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WishChange {
    Status(WishStatus),
    Held(bool),
}

/// Why an event was refused, worded for the person who asked for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WishError {
    #[error("cannot {} a wish that is {from}", verb(.event))]
    Illegal {
        from: WishStatus,
        /// The event's [`WishEvent::name`].
        event: &'static str,
    },
    #[error("the wish is on hold; release it first")]
    Held,
    #[error("the wish is not on hold")]
    NotHeld,
    #[error("the wish is already on hold")]
    AlreadyHeld,
    #[error("the wish is blocked by {count} wish(es) that have not merged yet")]
    BlockedBy { count: usize },
    #[error("the wish has no plan; give it at least one execution group first")]
    NoPlan,
    #[error("the wish was never queued, so it has no tasks to resume from")]
    NeverQueued,
    #[error("only failed, conflict, interrupted or cancelled wishes can be resumed; this one is {status}")]
    NothingToResume { status: WishStatus },
    #[error("cannot resume a wish to {to}; choose draft, planned or queued")]
    InvalidResumeTarget { to: WishStatus },
}

/// The state `resume` without a target goes to; see the module docs for the rule.
pub fn last_good_status(w: &WishSnapshot) -> WishStatus {
    if w.status == WishStatus::Conflict {
        WishStatus::PendingMerge
    } else if w.has_tasks {
        WishStatus::Queued
    } else if w.has_plan {
        WishStatus::Planned
    } else {
        WishStatus::Draft
    }
}

/// Applies `event` to the wish described by `w`.
pub fn transition(w: &WishSnapshot, event: &WishEvent) -> Result<WishChange, WishError> {
    use WishEvent as E;
    use WishStatus as S;
    let illegal = || WishError::Illegal { from: w.status, event: event.name() };

    // Hold and release are about the flag, not the status, and release is the one way out of
    // a hold, so they are decided before the hold check.
    match event {
        E::Release if w.held => return Ok(WishChange::Held(false)),
        E::Release => return Err(WishError::NotHeld),
        E::Hold if w.held => return Err(WishError::AlreadyHeld),
        E::Hold if w.status.is_terminal() => return Err(illegal()),
        E::Hold => return Ok(WishChange::Held(true)),
        _ if w.held => return Err(WishError::Held),
        _ => {}
    }

    let to = match (w.status, event) {
        (S::Draft, E::Plan) | (S::Planned, E::Queue) if !w.has_plan => return Err(WishError::NoPlan),
        (S::Draft, E::Plan) => S::Planned,
        (S::Planned, E::Queue) => S::Queued,
        (S::Queued, E::Start) if w.blockers_unmerged > 0 => {
            return Err(WishError::BlockedBy { count: w.blockers_unmerged })
        }
        (S::Queued, E::Start) => S::Executing,
        (S::Executing, E::AllGroupsDone) => S::Completed,
        (S::Executing, E::GroupFailed) => S::Failed,
        (S::Completed, E::SubmitForMerge) => S::PendingMerge,
        (S::PendingMerge, E::Merged) => S::Merged,
        (S::PendingMerge, E::Conflict) => S::Conflict,
        (S::PendingMerge, E::MergeFailed) => S::Failed,
        (S::Conflict | S::Failed, E::Requeue) => S::PendingMerge,
        (S::PendingMerge, E::Withdraw) => S::Completed,
        (S::Queued | S::Executing, E::Interrupt) => S::Interrupted,
        (status, E::Cancel) if !status.is_terminal() => S::Cancelled,
        (status, E::Resume { to }) => resume(w, status, *to)?,
        _ => return Err(illegal()),
    };
    Ok(WishChange::Status(to))
}

fn resume(w: &WishSnapshot, from: WishStatus, to: Option<WishStatus>) -> Result<WishStatus, WishError> {
    if !from.is_error() {
        return Err(WishError::NothingToResume { status: from });
    }
    match to {
        None => Ok(last_good_status(w)),
        Some(WishStatus::Draft) => Ok(WishStatus::Draft),
        Some(WishStatus::Planned) if w.has_plan => Ok(WishStatus::Planned),
        Some(WishStatus::Planned) => Err(WishError::NoPlan),
        Some(WishStatus::Queued) if w.has_tasks => Ok(WishStatus::Queued),
        Some(WishStatus::Queued) => Err(WishError::NeverQueued),
        Some(other) => Err(WishError::InvalidResumeTarget { to: other }),
    }
}

/// A wish slug made from its title, for a wish made without one: lowercase words joined by `-`,
/// at most 40 characters (`wish` when the title has no letters or digits).
pub fn slug_of(title: &str) -> String {
    let mut slug = String::new();
    for word in title.to_lowercase().split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()) {
        if slug.len() + word.len() + 1 > 40 && !slug.is_empty() {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(word);
    }
    slug.truncate(40);
    if slug.is_empty() {
        "wish".to_owned()
    } else {
        slug
    }
}

#[cfg(test)]
mod tests;
