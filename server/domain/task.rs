//! Task status and its state machine: the one status set shared by standalone tasks
//! and a wish's execution groups.
//!
//! ```text
//! blocked → ready → in_progress ⇄ waiting_input → done | failed | cancelled
//! ```
//!
//! Rules chosen where the sources leave room:
//! - `complete` and `fail` are accepted from `waiting_input` as well as `in_progress`: an agent
//!   that asked a question may still finish or die (or a human may close the task instead of
//!   answering), and refusing would leave the task stuck in `waiting_input`.
//! - `cancel` is accepted from every non-terminal status, including `blocked` and `ready`, so a
//!   task can be withdrawn before any agent picks it up.
//! - `retry` revives `failed` and `cancelled` tasks (never `done`), back to `ready` or `blocked`
//!   depending on how many dependencies are still unmet — the same rule as a new task.
//! - Moving a task between board columns is not a status change and has no event here.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::UnknownStatus;

/// Where a task is in its lifecycle. Stored as the snake_case name (`in_progress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(example = "in_progress")]
pub enum TaskStatus {
    /// Waiting for at least one dependency to be `done`.
    Blocked,
    /// Every dependency is `done`; an agent or human may start it.
    Ready,
    /// An agent (or human) is working on it.
    InProgress,
    /// The agent asked a question and waits for an answer.
    WaitingInput,
    Done,
    Failed,
    Cancelled,
}

impl TaskStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [TaskStatus; 7] = [
        TaskStatus::Blocked,
        TaskStatus::Ready,
        TaskStatus::InProgress,
        TaskStatus::WaitingInput,
        TaskStatus::Done,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ];

    /// The wire and database name; matches the serde representation and the SQL `CHECK`.
    pub fn as_str(&self) -> &'static str {
        match self {
            TaskStatus::Blocked => "blocked",
            TaskStatus::Ready => "ready",
            TaskStatus::InProgress => "in_progress",
            TaskStatus::WaitingInput => "waiting_input",
            TaskStatus::Done => "done",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// No work happens on a terminal task; only an explicit `retry` can revive a failed or
    /// cancelled one.
    pub fn is_terminal(&self) -> bool {
        matches!(self, TaskStatus::Done | TaskStatus::Failed | TaskStatus::Cancelled)
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TaskStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        super::parse_status("task", &Self::ALL, Self::as_str, s)
    }
}

/// Something that happens to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskEvent {
    /// An agent or human picks the task up.
    Start,
    /// The agent asked a question and waits for an answer.
    Ask,
    /// The question was answered; the agent works on.
    Answer,
    Complete,
    Fail,
    Cancel,
    /// Try a failed or cancelled task again; it re-enters as a new task would.
    Retry {
        unmet_dependencies: usize,
    },
    /// The task's last dependency became `done`.
    DependenciesMet,
}

impl TaskEvent {
    /// A stable snake_case name for the event, for errors, logs and API responses.
    pub fn name(&self) -> &'static str {
        match self {
            TaskEvent::Start => "start",
            TaskEvent::Ask => "ask",
            TaskEvent::Answer => "answer",
            TaskEvent::Complete => "complete",
            TaskEvent::Fail => "fail",
            TaskEvent::Cancel => "cancel",
            TaskEvent::Retry { .. } => "retry",
            TaskEvent::DependenciesMet => "dependencies_met",
        }
    }
}

/// What an event name does, worded to fit "cannot … a task that is …".
fn verb(event: &str) -> &str {
    match event {
        "ask" => "ask a question on",
        "dependencies_met" => "unblock",
        other => other,
    }
}

/// An event that the task's current status does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot {} a task that is {from}", verb(.event))]
pub struct IllegalTransition {
    pub from: TaskStatus,
    /// The event's [`TaskEvent::name`].
    pub event: &'static str,
}

/// The status a task starts in (and re-enters on retry): blocked until its dependencies are done.
pub fn initial_status(unmet_dependencies: usize) -> TaskStatus {
    if unmet_dependencies == 0 {
        TaskStatus::Ready
    } else {
        TaskStatus::Blocked
    }
}

/// A task whose dependencies cannot change now: it has started (or finished).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the dependencies of a task that is {0} cannot change: only before it starts, or before it is retried")]
pub struct DependenciesFixed(pub TaskStatus);

/// The status of a task whose dependencies were replaced, `unmet` of them not done yet: a task
/// that has not started is `blocked` or `ready` as a new task would be; a failed or cancelled
/// one stays so (its retry counts them). A task that started keeps what it has.
pub fn after_new_dependencies(from: TaskStatus, unmet: usize) -> Result<TaskStatus, DependenciesFixed> {
    match from {
        TaskStatus::Blocked | TaskStatus::Ready => Ok(initial_status(unmet)),
        TaskStatus::Failed | TaskStatus::Cancelled => Ok(from),
        started => Err(DependenciesFixed(started)),
    }
}

/// Applies `event` to a task in status `from`, returning its new status.
pub fn transition(from: TaskStatus, event: &TaskEvent) -> Result<TaskStatus, IllegalTransition> {
    use TaskEvent as E;
    use TaskStatus as S;
    let to = match (from, *event) {
        (S::Ready, E::Start) => S::InProgress,
        (S::InProgress, E::Ask) => S::WaitingInput,
        (S::WaitingInput, E::Answer) => S::InProgress,
        (S::InProgress | S::WaitingInput, E::Complete) => S::Done,
        (S::InProgress | S::WaitingInput, E::Fail) => S::Failed,
        (status, E::Cancel) if !status.is_terminal() => S::Cancelled,
        (S::Failed | S::Cancelled, E::Retry { unmet_dependencies: n }) => initial_status(n),
        (S::Blocked, E::DependenciesMet) => S::Ready,
        _ => return Err(IllegalTransition { from, event: event.name() }),
    };
    Ok(to)
}

/// A sentence naming the dependencies (title, status) that are not done, and what each needs.
pub fn blocked_reason<'a>(dependencies: impl IntoIterator<Item = (&'a str, TaskStatus)>) -> String {
    let dependencies: Vec<(&str, TaskStatus)> = dependencies.into_iter().collect();
    let open: Vec<String> = dependencies
        .iter()
        .filter(|(_, status)| *status != TaskStatus::Done)
        .map(|(title, status)| match status {
            TaskStatus::Failed | TaskStatus::Cancelled => format!("`{title}` is {status} and needs a retry"),
            other => format!("`{title}` is {other}"),
        })
        .collect();
    format!("waiting for {} of {} dependencies: {}", open.len(), dependencies.len(), open.join("; "))
}

#[cfg(test)]
mod tests {
    use super::TaskEvent as E;
    use super::TaskStatus as S;
    use super::*;
    use serde::de::value::{Error as DeError, StrDeserializer};

    const EVENTS: [TaskEvent; 9] = [
        E::Start,
        E::Ask,
        E::Answer,
        E::Complete,
        E::Fail,
        E::Cancel,
        E::Retry { unmet_dependencies: 0 },
        E::Retry { unmet_dependencies: 2 },
        E::DependenciesMet,
    ];

    /// The whole legal set, written out independently of `transition`.
    const LEGAL: [(TaskStatus, TaskEvent, TaskStatus); 16] = [
        (S::Ready, E::Start, S::InProgress),
        (S::InProgress, E::Ask, S::WaitingInput),
        (S::WaitingInput, E::Answer, S::InProgress),
        (S::InProgress, E::Complete, S::Done),
        (S::WaitingInput, E::Complete, S::Done),
        (S::InProgress, E::Fail, S::Failed),
        (S::WaitingInput, E::Fail, S::Failed),
        (S::Blocked, E::Cancel, S::Cancelled),
        (S::Ready, E::Cancel, S::Cancelled),
        (S::InProgress, E::Cancel, S::Cancelled),
        (S::WaitingInput, E::Cancel, S::Cancelled),
        (S::Failed, EVENTS[6], S::Ready),
        (S::Failed, EVENTS[7], S::Blocked),
        (S::Cancelled, EVENTS[6], S::Ready),
        (S::Cancelled, EVENTS[7], S::Blocked),
        (S::Blocked, E::DependenciesMet, S::Ready),
    ];

    #[test]
    fn every_status_and_event_pair_follows_the_legal_table() {
        let mut legal_seen = 0;
        for from in TaskStatus::ALL {
            for event in EVENTS {
                let expected = LEGAL.iter().find(|(f, e, _)| *f == from && *e == event).map(|(_, _, to)| *to);
                match (transition(from, &event), expected) {
                    (Ok(to), Some(want)) => {
                        assert_eq!(to, want, "{from} + {event:?}");
                        legal_seen += 1;
                    }
                    (Err(err), None) => {
                        assert_eq!(err.from, from);
                        assert_eq!(err.event, event.name());
                    }
                    (got, want) => panic!("{from} + {event:?}: got {got:?}, want {want:?}"),
                }
            }
        }
        assert_eq!(legal_seen, LEGAL.len());
    }

    #[test]
    fn terminal_statuses_accept_only_retry() {
        for from in TaskStatus::ALL.into_iter().filter(TaskStatus::is_terminal) {
            for event in EVENTS.into_iter().filter(|e| e.name() != "retry") {
                assert!(transition(from, &event).is_err(), "{from} + {event:?}");
            }
        }
        assert!(transition(S::Done, &EVENTS[6]).is_err());
    }

    #[test]
    fn illegal_transitions_read_as_sentences() {
        let err = transition(S::Blocked, &E::Complete).unwrap_err();
        assert_eq!(err.to_string(), "cannot complete a task that is blocked");
        let err = transition(S::Ready, &E::DependenciesMet).unwrap_err();
        assert_eq!(err.to_string(), "cannot unblock a task that is ready");
        let err = transition(S::Done, &E::Ask).unwrap_err();
        assert_eq!(err.to_string(), "cannot ask a question on a task that is done");
    }

    #[test]
    fn a_new_task_is_ready_only_without_unmet_dependencies() {
        assert_eq!(initial_status(0), S::Ready);
        assert_eq!(initial_status(1), S::Blocked);
        assert_eq!(initial_status(usize::MAX), S::Blocked);
    }

    #[test]
    fn status_names_round_trip_through_from_str_display_and_serde() {
        for status in TaskStatus::ALL {
            assert_eq!(status.as_str().parse::<TaskStatus>(), Ok(status));
            assert_eq!(status.to_string(), status.as_str());
            let de = StrDeserializer::<DeError>::new(status.as_str());
            assert_eq!(TaskStatus::deserialize(de), Ok(status));
        }
    }

    #[test]
    fn parsing_an_unknown_status_names_the_bad_value() {
        let err = "running".parse::<TaskStatus>().unwrap_err();
        assert_eq!(err.value, "running");
        assert_eq!(err.expected.len(), TaskStatus::ALL.len());
        assert!(err.to_string().starts_with("unknown task status \"running\""));
        assert!("In_Progress".parse::<TaskStatus>().is_err());
    }

    #[test]
    fn dependencies_change_before_a_task_starts_or_before_its_retry() {
        use TaskStatus as S;
        assert_eq!(after_new_dependencies(S::Ready, 1), Ok(S::Blocked));
        assert_eq!(after_new_dependencies(S::Blocked, 0), Ok(S::Ready));
        assert_eq!(after_new_dependencies(S::Blocked, 2), Ok(S::Blocked));
        assert_eq!(after_new_dependencies(S::Failed, 3), Ok(S::Failed));
        assert_eq!(after_new_dependencies(S::Cancelled, 0), Ok(S::Cancelled));
        for started in [S::InProgress, S::WaitingInput, S::Done] {
            assert_eq!(after_new_dependencies(started, 0), Err(DependenciesFixed(started)));
        }
    }
}
