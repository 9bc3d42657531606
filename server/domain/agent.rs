//! Agent state and its state machine (registered, working, idle, …).
//!
//! ```text
//! spawning → working ⇄ idle → done
//!            working | idle ⇄ permission | question
//! any live state → error | suspended;  error | suspended → spawning (resume)
//! suspended → done (its work was given to another agent, or is over)
//! ```
//!
//! An agent's state is mostly *observed* (hooks, control-mode output, screen rules) rather than
//! commanded, so the main event is [`AgentEvent::Observed`] carrying what the detector saw.
//! Rules chosen where the sources leave room:
//! - An observation never revives an agent that is `done`, `error` or `suspended`: a late hook or
//!   screen reading from a pane that is already gone must not undo what the reconciler decided.
//!   Only an explicit `resume` brings it back, through `spawning`.
//! - Observing the state an agent is already in is legal and changes nothing; callers skip the
//!   write (and the event) when `to == from`.
//! - `done` is terminal: a finished agent is cleaned up, not resumed.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::UnknownStatus;

/// What an agent is doing. Stored as the snake_case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentState {
    /// The row exists; the pane is being created or the provider is starting up.
    Spawning,
    /// Mid-turn: the agent is producing output or running tools.
    Working,
    /// Waiting at its prompt; messages may be delivered now.
    Idle,
    /// Asking to be allowed to run a tool; needs a person (or a policy) to answer.
    Permission,
    /// Asking a question (numbered options or free text); needs an answer.
    Question,
    /// Finished its work; the pane may be gone.
    Done,
    /// The pane died or the provider failed and cannot simply be resumed.
    Error,
    /// The pane is gone on purpose (suspend, usage limit, vanished pane) but the provider session
    /// is kept, so `resume` can continue where it stopped.
    Suspended,
}

impl AgentState {
    /// Every state, in lifecycle order.
    pub const ALL: [AgentState; 8] = [
        AgentState::Spawning,
        AgentState::Working,
        AgentState::Idle,
        AgentState::Permission,
        AgentState::Question,
        AgentState::Done,
        AgentState::Error,
        AgentState::Suspended,
    ];

    /// The wire and database name; matches the serde representation and the SQL `CHECK`.
    pub fn as_str(&self) -> &'static str {
        match self {
            AgentState::Spawning => "spawning",
            AgentState::Working => "working",
            AgentState::Idle => "idle",
            AgentState::Permission => "permission",
            AgentState::Question => "question",
            AgentState::Done => "done",
            AgentState::Error => "error",
            AgentState::Suspended => "suspended",
        }
    }

    /// A live agent has (or is about to have) a pane that the worker watches.
    pub fn is_live(&self) -> bool {
        matches!(
            self,
            AgentState::Spawning
                | AgentState::Working
                | AgentState::Idle
                | AgentState::Permission
                | AgentState::Question
        )
    }

    /// The agent is blocked on a person: shown first on the dashboard.
    pub fn needs_person(&self) -> bool {
        matches!(self, AgentState::Permission | AgentState::Question)
    }
}

impl fmt::Display for AgentState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AgentState {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        super::parse_status("agent", &Self::ALL, Self::as_str, s)
    }
}

/// How the failure reason of an agent the worker could not start begins (its provider missing,
/// a clone it cannot make, a link it refuses to follow): another try meets the same refusal.
pub const SPAWN_FAILED: &str = "spawning failed";

/// Whether `reason` says the agent could not be started at all ([`SPAWN_FAILED`]).
pub fn never_started(reason: &str) -> bool {
    reason.starts_with(SPAWN_FAILED)
}

/// What a provider needs from the user, read from the words it failed with (the screen rules
/// record them as the agent's failure reason): `a login`, `an API key` or `network access`;
/// `None` for a failure that is not the provider asking for something.
pub fn provider_need(reason: &str) -> Option<&'static str> {
    let reason = reason.to_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| reason.contains(w));
    if any(&["api key"]) {
        Some("an API key")
    } else if any(&["logged in", "/login", "log in", "sign in", "authenticate"]) {
        Some("a login")
    } else if any(&["unable to connect", "enotfound", "network"]) {
        Some("network access")
    } else {
        None
    }
}

/// What a detector saw a live agent doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activity {
    Working,
    Idle,
    Permission,
    Question,
}

impl Activity {
    pub fn state(self) -> AgentState {
        match self {
            Activity::Working => AgentState::Working,
            Activity::Idle => AgentState::Idle,
            Activity::Permission => AgentState::Permission,
            Activity::Question => AgentState::Question,
        }
    }
}

/// Something that happens to an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentEvent {
    /// A hook, control-mode output or a screen rule says what the agent is doing.
    Observed(Activity),
    /// The agent finished its work (or its session ended cleanly).
    Finish,
    /// The pane died or the provider failed in a way that cannot be resumed.
    Fail,
    /// The pane is gone (or is being killed) but the provider session is kept for resume.
    Suspend,
    /// Start a new pane for a suspended or failed agent, continuing its provider session.
    Resume,
}

impl AgentEvent {
    /// A stable snake_case name for the event, for errors, logs and API responses.
    pub fn name(&self) -> &'static str {
        match self {
            AgentEvent::Observed(_) => "observe",
            AgentEvent::Finish => "finish",
            AgentEvent::Fail => "fail",
            AgentEvent::Suspend => "suspend",
            AgentEvent::Resume => "resume",
        }
    }
}

/// An event that the agent's current state does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot {event} an agent that is {from}")]
pub struct IllegalTransition {
    pub from: AgentState,
    /// The event's [`AgentEvent::name`].
    pub event: &'static str,
}

/// Applies `event` to an agent in state `from`, returning its new state.
pub fn transition(from: AgentState, event: &AgentEvent) -> Result<AgentState, IllegalTransition> {
    use AgentEvent as E;
    use AgentState as S;
    let to = match (from, *event) {
        (live, E::Observed(activity)) if live.is_live() => activity.state(),
        (live, E::Finish) if live.is_live() => S::Done,
        // A suspended agent whose work is over (its wish merged, its group given to another
        // agent) finishes without a pane.
        (S::Suspended, E::Finish) => S::Done,
        (live, E::Fail) if live.is_live() => S::Error,
        (live, E::Suspend) if live.is_live() => S::Suspended,
        (S::Suspended | S::Error, E::Resume) => S::Spawning,
        _ => return Err(IllegalTransition { from, event: event.name() }),
    };
    Ok(to)
}

/// The state a plain change to `to` comes from: working and idle swap with nothing else to do
/// (no task follows, nothing stops), the change a watched agent makes most. `None` for any other
/// state, whose changes take the whole path.
pub fn swapped_from(to: AgentState) -> Option<AgentState> {
    match to {
        AgentState::Working => Some(AgentState::Idle),
        AgentState::Idle => Some(AgentState::Working),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::AgentEvent as E;
    use super::AgentState as S;
    use super::*;

    const ACTIVITIES: [Activity; 4] = [Activity::Working, Activity::Idle, Activity::Permission, Activity::Question];
    const LIVE: [AgentState; 5] = [S::Spawning, S::Working, S::Idle, S::Permission, S::Question];

    /// The whole legal set, written out independently of `transition`.
    fn legal() -> Vec<(AgentState, AgentEvent, AgentState)> {
        let mut legal = Vec::new();
        for from in LIVE {
            for activity in ACTIVITIES {
                legal.push((from, E::Observed(activity), activity.state()));
            }
            legal.push((from, E::Finish, S::Done));
            legal.push((from, E::Fail, S::Error));
            legal.push((from, E::Suspend, S::Suspended));
        }
        legal.push((S::Suspended, E::Resume, S::Spawning));
        legal.push((S::Suspended, E::Finish, S::Done));
        legal.push((S::Error, E::Resume, S::Spawning));
        legal
    }

    #[test]
    fn every_state_and_event_pair_is_legal_exactly_when_listed() {
        let events: Vec<AgentEvent> =
            ACTIVITIES.map(E::Observed).into_iter().chain([E::Finish, E::Fail, E::Suspend, E::Resume]).collect();
        let legal = legal();
        for from in S::ALL {
            for event in &events {
                let expected = legal.iter().find(|(f, e, _)| *f == from && e == event).map(|(_, _, to)| *to);
                match (transition(from, event), expected) {
                    (Ok(to), Some(want)) => assert_eq!(to, want, "{from} + {event:?}"),
                    (Err(err), None) => {
                        assert_eq!(err, IllegalTransition { from, event: event.name() })
                    }
                    (got, want) => panic!("{from} + {event:?}: got {got:?}, expected {want:?}"),
                }
            }
        }
    }

    #[test]
    fn a_late_observation_never_revives_a_gone_agent() {
        for from in [S::Done, S::Error, S::Suspended] {
            assert!(transition(from, &E::Observed(Activity::Working)).is_err());
        }
    }

    #[test]
    fn only_working_and_idle_swap_and_each_swap_is_a_legal_observation() {
        for to in S::ALL {
            match swapped_from(to) {
                Some(from) => {
                    assert_eq!(
                        transition(from, &E::Observed(ACTIVITIES.into_iter().find(|a| a.state() == to).unwrap())),
                        Ok(to)
                    );
                    assert!(!from.needs_person() && !to.needs_person() && to.is_live());
                }
                None => assert!(!matches!(to, S::Working | S::Idle)),
            }
        }
    }

    #[test]
    fn states_parse_from_their_wire_names_only() {
        for state in S::ALL {
            assert_eq!(state.as_str().parse::<S>(), Ok(state));
            assert_eq!(serde_json::to_value(state).unwrap(), state.as_str());
        }
        let err = "busy".parse::<S>().unwrap_err();
        assert_eq!(err.kind, "agent");
        assert_eq!(err.expected.len(), 8);
    }

    #[test]
    fn the_illegal_error_reads_as_a_sentence() {
        let err = transition(S::Done, &E::Resume).unwrap_err();
        assert_eq!(err.to_string(), "cannot resume an agent that is done");
    }

    #[test]
    fn a_providers_words_say_what_it_needs() {
        assert_eq!(provider_need("Not logged in · Please run /login"), Some("a login"));
        assert_eq!(provider_need("Choose how you want to use Codex. 1. Sign in with ChatGPT"), Some("a login"));
        assert_eq!(provider_need("How would you like to authenticate for this project?"), Some("a login"));
        assert_eq!(provider_need("Invalid API key · Please run /login"), Some("an API key"));
        assert_eq!(provider_need("Unable to connect to Anthropic services"), Some("network access"));
        assert_eq!(provider_need("the pane exited (status 1)"), None);
    }
}
