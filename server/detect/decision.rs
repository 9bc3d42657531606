//! The per-agent arbiter: hooks, control-mode output and screen readings in, one activity out.
//!
//! Rules, in order:
//! 1. A hook's word stands for [`DetectorConfig::hook_precedence`] after it arrives, whatever the
//!    screen shows (the screen lags, and the hook is Claude Code's own account).
//! 2. After that, a screen reading taken after the window wins; if it disagrees with the hook,
//!    the [`Decision`] carries a [`Disagreement`] for the caller to log, and the hook is spent.
//!    Without such a reading the hook still stands: a stale screen never overrules it.
//! 3. A screen marker (spinner, dialog) counts on one reading. Idle needs two readings at least
//!    [`DetectorConfig::settle`] apart with the same region above the input area, no marker,
//!    and the input area drawn (a CLI still starting shows none);
//!    [`Detector::next_reading_at`] says when to take the confirming reading.
//! 4. With [`ScreenRules::Generic`] (a shell, a custom command) there are no markers: output
//!    means working (source [`Source::Output`]), and an unchanged screen on two readings means
//!    idle.
//!
//! Usage limits, errors and what the provider needs from the user (`fatal`) are reported as soon
//! as one reading shows them, beside the activity.
//! Every method returns `None` when nothing the worker writes would change.
//!
//! Time is passed in (`now: Instant`, and the wall clock for reset times), so tests need no sleeps.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::screen::{self, Matched, ReadContext, ScreenRules, StartChoice};
use crate::domain::agent::Activity;

/// How long a hook's word outranks the screen, by default.
pub const HOOK_PRECEDENCE: Duration = Duration::from_secs(10);

/// How far apart the two readings that confirm idle must be, by default.
pub const SETTLE: Duration = Duration::from_millis(800);

#[derive(Debug, Clone, Copy)]
pub struct DetectorConfig {
    pub hook_precedence: Duration,
    pub settle: Duration,
    /// The zone for reset times a screen prints without one (the worker's local zone).
    pub zone: Tz,
}

impl Default for DetectorConfig {
    fn default() -> Self {
        DetectorConfig { hook_precedence: HOOK_PRECEDENCE, settle: SETTLE, zone: Tz::UTC }
    }
}

/// Which signal decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    Hook,
    Screen,
    Output,
}

/// The screen overruled a hook after the precedence window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disagreement {
    /// What the hook said.
    pub hook: Activity,
    /// What the screen showed, and the decision now is.
    pub screen: Activity,
    /// How old the hook was when the screen won.
    pub hook_age: Duration,
}

/// What the worker should write for the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub activity: Activity,
    pub source: Source,
    pub disagreement: Option<Disagreement>,
    /// The provider shows its usage-limit message; suspend the agent and resume it then.
    pub usage_limit_until: Option<DateTime<Utc>>,
    /// A final error the provider printed (for `failure_reason` or a log line).
    pub error: Option<String>,
    /// The provider cannot work until the user gives it something (a login, an API key,
    /// network access), in its own words: the agent is to be `error` with this reason.
    pub fatal: Option<String>,
    /// For a decision of the screen: the rule that decided it and the line it matched (the
    /// line is empty for rules about the whole screen, such as an unchanged one).
    pub matched: Option<Matched>,
    /// For a screen's permission or question: what it asks ([`screen::ScreenReading::asked`]).
    pub asked: Option<String>,
}

/// One agent's detector. Feed it every signal for that agent; write what it decides.
#[derive(Debug)]
pub struct Detector {
    rules: ScreenRules,
    config: DetectorConfig,
    hook: Option<Stamped>,
    /// The screen's (or, for generic rules, the output's) settled opinion and its latest support.
    view: Option<View>,
    /// A quiet reading waiting for its confirmation: the region's hash and when it was first seen.
    quiet: Option<(u64, Instant)>,
    usage_limit: Option<DateTime<Utc>>,
    error: Option<String>,
    /// The first reading after a restart is where the screen is, not a change of it: for generic
    /// rules it must not count as work (an idle shell agent went idle → working → idle on every
    /// restart, and a project's `on_agent_idle` webhooks heard it each time).
    baseline: bool,
    fatal: Option<String>,
    reported: Option<Reported>,
    /// What made the screen's view what it is (see [`Decision::matched`]).
    matched: Option<Matched>,
    /// What the screen's prompt asks, while it asks.
    asked: Option<String>,
    /// How far a new pane's first readings got (see [`FirstPrompt`]).
    first_prompt: FirstPrompt,
    /// Where the pane is with a dialog its CLI opens at ([`StartDialog`]).
    start_dialog: StartDialog,
}

/// A dialog the CLI opens at, before it is ready, because of how Switchyard configured it
/// (Codex's "Folder access" in its untrusted clone), answered by the worker ([`StartChoice`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StartDialog {
    /// None expected, or it came and went: the screen is read as it is.
    Over,
    /// Expected and not shown yet. A prompt on the screen is the CLI still starting, not idle
    /// (Codex 0.169 draws its composer for a moment before the dialog): until the dialog shows,
    /// or a prompt has shown for [`START_DIALOG_WAIT`] without it.
    Awaited { prompt_since: Option<Instant> },
    /// On the screen: not a question for a person; gone, the CLI is ready.
    Showing(StartChoice),
}

/// How long a prompt may show without an expected start dialog before the dialog is taken as
/// answered already (a worker restarted between the answer and the CLI's first prompt).
pub const START_DIALOG_WAIT: Duration = Duration::from_secs(20);

/// A usage limit a new pane shows the first time it is read at its prompt is the one its agent
/// was suspended for, drawn again by the session resumed after the reset (the last entry of its
/// transcript until a new turn): counted, it would suspend the agent again, and the reset time
/// it names, passed now, would read as tomorrow's. A limit on that first screen at the prompt
/// does not count while the region above the prompt stays as that reading showed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FirstPrompt {
    /// A new pane not yet read at its prompt.
    Awaited,
    /// Read at its prompt showing a limit: it does not count while the region has this hash.
    Stale(u64),
    /// Every limit counts.
    Passed,
}

type Reported = (Activity, Option<DateTime<Utc>>, Option<String>, Option<String>);

impl StartDialog {
    /// Where the pane is after `reading`, taken at `now`.
    fn after(self, reading: &screen::ScreenReading, now: Instant) -> StartDialog {
        match (self, reading.start_choice) {
            (StartDialog::Over, _) => StartDialog::Over,
            (_, Some(choice)) => StartDialog::Showing(choice),
            (StartDialog::Showing(_), None) => StartDialog::Over,
            (StartDialog::Awaited { prompt_since }, None) => {
                let since = if reading.at_prompt { prompt_since.or(Some(now)) } else { prompt_since };
                match since {
                    Some(since) if now.duration_since(since) >= START_DIALOG_WAIT => StartDialog::Over,
                    _ => StartDialog::Awaited { prompt_since: since },
                }
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Stamped {
    activity: Activity,
    at: Instant,
}

#[derive(Debug, Clone, Copy)]
struct View {
    activity: Activity,
    source: Source,
    at: Instant,
}

impl Detector {
    pub fn new(rules: ScreenRules, config: DetectorConfig) -> Detector {
        Detector {
            rules,
            config,
            hook: None,
            view: None,
            quiet: None,
            usage_limit: None,
            error: None,
            fatal: None,
            reported: None,
            baseline: false,
            matched: None,
            asked: None,
            first_prompt: FirstPrompt::Awaited,
            start_dialog: StartDialog::Over,
        }
    }

    /// This detector's pane opens at a start dialog the worker answers ([`StartDialog`]).
    pub fn expecting_start_dialog(self) -> Detector {
        Detector { start_dialog: StartDialog::Awaited { prompt_since: None }, ..self }
    }

    /// A detector for an agent whose state was recorded before this worker started watching it:
    /// that state counts as already reported, and the first reading only sets where the screen is.
    pub fn resuming(rules: ScreenRules, config: DetectorConfig, recorded: Option<Activity>) -> Detector {
        let mut detector = Detector::new(rules, config);
        detector.reported = recorded.map(|activity| (activity, None, None, None));
        detector.baseline = recorded.is_some();
        if recorded.is_some() {
            // A pane watched before this worker started: what it shows is news, whatever it is.
            detector.first_prompt = FirstPrompt::Passed;
        }
        detector
    }

    /// A detector for a pane read at its prompt before (its first screen is no resumed
    /// session's): for reading single screens.
    #[cfg(test)]
    pub(crate) fn past_its_first_prompt(rules: ScreenRules, config: DetectorConfig) -> Detector {
        Detector { first_prompt: FirstPrompt::Passed, ..Detector::new(rules, config) }
    }

    /// The start dialog the pane showed on its last reading, to be answered ([`StartChoice`]):
    /// only the dialog its pane was expected to open at, before the CLI was ready (later, the
    /// same words are text on the screen, maybe the agent's).
    pub fn start_choice(&self) -> Option<StartChoice> {
        match self.start_dialog {
            StartDialog::Showing(choice) => Some(choice),
            StartDialog::Over | StartDialog::Awaited { .. } => None,
        }
    }

    /// The activity last decided, if any.
    pub fn activity(&self) -> Option<Activity> {
        self.reported.as_ref().map(|(activity, ..)| *activity)
    }

    /// Control mode saw output from the pane. The caller should read the screen again; for
    /// generic rules the output itself means working.
    pub fn on_output(&mut self, now: Instant) -> Option<Decision> {
        if self.rules != ScreenRules::Generic {
            return None;
        }
        self.view = Some(View { activity: Activity::Working, source: Source::Output, at: now });
        self.quiet = None;
        self.decide(now)
    }

    /// A program other than the pane's shell runs in its foreground (`#{pane_current_command}`):
    /// a shell agent is busy however still its screen is, so the screen cannot settle to idle
    /// (and a message is not typed into the running command).
    pub fn on_busy(&mut self, now: Instant, command: &str) -> Option<Decision> {
        self.view = Some(View { activity: Activity::Working, source: Source::Screen, at: now });
        self.matched = Some(Matched { rule: "foreground command", line: command.to_owned() });
        self.quiet = None;
        self.decide(now)
    }

    /// A hook reported `activity` (see [`super::hooks::signal`]).
    pub fn on_hook(&mut self, now: Instant, activity: Activity) -> Option<Decision> {
        self.hook = Some(Stamped { activity, at: now });
        self.decide(now)
    }

    /// A fresh capture of the pane (`wall` is the wall clock at `now`, for reset times).
    pub fn on_screen(&mut self, now: Instant, wall: DateTime<Utc>, text: &str) -> Option<Decision> {
        let mut reading = screen::read(self.rules, text, &ReadContext { now: wall, zone: self.config.zone });
        self.start_dialog = self.start_dialog.after(&reading, now);
        if self.start_dialog != StartDialog::Over {
            // The CLI is not ready yet: no prompt to be idle at, and its dialog is the worker's.
            reading.at_prompt = false;
            if reading.start_choice.is_some() && reading.activity == Some(Activity::Question) {
                reading.activity = None;
                reading.matched = None;
            }
        }
        let baseline = std::mem::take(&mut self.baseline);
        let limit = self.current_limit(&reading);
        // A limit stays at the time first read: "try again in 2 hours" would move on every reading.
        self.usage_limit = limit.map(|at| self.usage_limit.unwrap_or(at));
        self.error = reading.error;
        self.fatal = reading.fatal;
        match reading.activity {
            Some(activity) => {
                self.view = Some(View { activity, source: Source::Screen, at: now });
                self.matched = reading.matched;
                self.asked = reading.asked;
                self.quiet = None;
            }
            // A provider not drawing its input area yet (starting, a blank pane) is not idle.
            None if !reading.at_prompt => self.quiet = None,
            None => match self.quiet {
                Some((hash, since)) if hash == reading.region_hash => {
                    if now.duration_since(since) >= self.config.settle {
                        self.view = Some(View { activity: Activity::Idle, source: Source::Screen, at: now });
                        self.matched = Some(Matched { rule: "unchanged screen", line: String::new() });
                    }
                }
                _ => {
                    self.quiet = Some((reading.region_hash, now));
                    if self.rules == ScreenRules::Generic && !baseline {
                        // No markers to go by: a changed screen is the only sign of work.
                        self.view = Some(View { activity: Activity::Working, source: Source::Screen, at: now });
                        self.matched = Some(Matched { rule: "changed screen", line: String::new() });
                    }
                }
            },
        }
        self.decide(now)
    }

    /// The reading's usage limit, unless it is a resumed session's old one ([`FirstPrompt`]).
    fn current_limit(&mut self, reading: &screen::ScreenReading) -> Option<DateTime<Utc>> {
        self.first_prompt = match self.first_prompt {
            // No prompt drawn yet (or ever: a script): nothing to tell an old limit by.
            FirstPrompt::Awaited if !reading.at_prompt => return reading.usage_limit,
            FirstPrompt::Awaited if reading.usage_limit.is_some() => FirstPrompt::Stale(reading.region_hash),
            FirstPrompt::Stale(hash) if hash == reading.region_hash => return None,
            _ => FirstPrompt::Passed,
        };
        match self.first_prompt {
            FirstPrompt::Stale(_) => None,
            _ => reading.usage_limit,
        }
    }

    /// When the caller should read the screen even if no output arrives: to confirm a quiet
    /// screen as idle, or to let the screen answer a hook once its precedence ends.
    pub fn next_reading_at(&self) -> Option<Instant> {
        let confirm = match (self.quiet, self.view) {
            (Some(_), Some(view)) if view.activity == Activity::Idle && view.source != Source::Output => None,
            (Some((_, since)), _) => Some(since + self.config.settle),
            (None, _) => None,
        };
        let recheck = self.hook.and_then(|hook| {
            let end = hook.at + self.config.hook_precedence;
            let disagrees = self.view.is_none_or(|v| v.activity != hook.activity);
            let screen_read_since = self.view.is_some_and(|v| v.at >= end);
            (disagrees && !screen_read_since).then_some(end)
        });
        [confirm, recheck].into_iter().flatten().min()
    }

    fn decide(&mut self, now: Instant) -> Option<Decision> {
        let (activity, source, disagreement) = match (self.hook, self.view) {
            (Some(hook), _) if now < hook.at + self.config.hook_precedence => (hook.activity, Source::Hook, None),
            (Some(hook), Some(view)) if view.at >= hook.at + self.config.hook_precedence => {
                let disagreement = (view.activity != hook.activity).then(|| Disagreement {
                    hook: hook.activity,
                    screen: view.activity,
                    hook_age: now.duration_since(hook.at),
                });
                if disagreement.is_some() {
                    // Overruled once is enough: later changes are the screen's own, not news.
                    self.hook = None;
                }
                (view.activity, view.source, disagreement)
            }
            (Some(hook), _) => (hook.activity, Source::Hook, None),
            (None, Some(view)) => (view.activity, view.source, None),
            // What the provider needs is news even on a screen that says nothing else.
            (None, None) if self.fatal.is_some() => (Activity::Idle, Source::Screen, None),
            (None, None) => return None,
        };
        let state = (activity, self.usage_limit, self.error.clone(), self.fatal.clone());
        if self.reported.as_ref() == Some(&state) {
            return None;
        }
        self.reported = Some(state);
        Some(Decision {
            activity,
            source,
            disagreement,
            usage_limit_until: self.usage_limit,
            error: self.error.clone(),
            fatal: self.fatal.clone(),
            matched: if source == Source::Screen { self.matched.clone() } else { None },
            asked: if source == Source::Screen { self.asked.clone() } else { None },
        })
    }
}
