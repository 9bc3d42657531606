//! Knowing what each agent is doing: one [`Detector`] per pane, fed by control-mode output (push,
//! no polling), the pane's screen read from its in-process mirror (no tmux command: see
//! [`crate::tmux::mirror`]) only when output changed (or when the detector asks for a confirming
//! second reading), and the agent's last Claude Code hook from its row, read when a hook was
//! recorded (`switchyard_hooks`, see [`Watches::refresh_hooks`]). A decision becomes a
//! conditional state change with its event.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use chrono::Utc;
use sqlx::PgPool;
use uuid::Uuid;

use crate::app::agents::{Agent, Cause};
use crate::app::usage::SessionLogOf;
use crate::app::worker_records::{self, Applied, SpareConnections};
use crate::detect::decision::{Decision, Detector, DetectorConfig, Source};
use crate::detect::screen::{ScreenRules, StartChoice};
use crate::domain::agent::{AgentEvent, AgentState};
use crate::tmux::Control;

/// Lines of history read above the visible screen: enough for the rules to see the last turn.
const HISTORY: u32 = 20;
/// How long a pane's output may go on before its screen is read: a program draws a screen in
/// several writes (a clear, then the text), and reading after the first would cost a reading
/// of a half-drawn screen, which never decides anything.
pub const OUTPUT_SETTLE: Duration = Duration::from_millis(3);
/// How long an answer to a start dialog ([`Watches::start_dialogs`]) is given before the dialog,
/// still showing, is answered again: longer than [`crate::app::local_panes::Typist::choose`] takes.
pub const START_ANSWER_EVERY: Duration = Duration::from_secs(30);
/// How often output may move an agent's `last_activity`: a pane prints in bursts of many
/// notifications a second, and the column is read by people (seconds are plenty), so a write
/// per burst would be the worker's busiest statement for nothing.
pub const ACTIVITY_EVERY: Duration = Duration::from_secs(5);

/// One watched pane.
pub struct Watch {
    pub agent_id: Uuid,
    pub name: String,
    /// The shell a pane without screen rules runs (`bash`); `None` for providers with rules.
    pub shell: Option<String>,
    pub detector: Detector,
    /// When control mode last reported output from the pane.
    pub last_output: Instant,
    /// The hook time already given to the detector, so each hook is told once.
    hook_seen: Option<chrono::DateTime<Utc>>,
    /// A newer hook than `hook_seen`, for the next reading to tell the detector.
    hook_new: Option<(chrono::DateTime<Utc>, AgentState)>,
    /// When the hook last told to the detector came, on this clock.
    hook_at: Option<Instant>,
    /// When this watch last handed a decision out to be written.
    decided_at: Option<Instant>,
    /// When to read the screen for output (or a hook) that no reading has seen yet.
    read_at: Option<Instant>,
    /// When output last moved the agent's `last_activity` ([`ACTIVITY_EVERY`]).
    activity_at: Option<Instant>,
    /// The session log its tokens are read from when it goes idle (Codex, Gemini CLI).
    pub session_log: Option<SessionLogOf>,
    /// When the start dialog its screen shows was last handed out to be answered.
    start_answered: Option<Instant>,
}

impl Watch {
    /// `shell`: for panes without screen rules, the program the pane runs (`bash`): another
    /// process group holding its terminal means the agent is busy. `start_dialog`: the
    /// provider's CLI opens at a dialog the worker answers
    /// ([`crate::worker::provider_setup::opens_at_a_dialog`]), expected while the agent is
    /// still spawning.
    pub fn new(agent: &Agent, rules: ScreenRules, shell: Option<String>, start_dialog: bool) -> Watch {
        // A state recorded before this worker watched it (a restart) is where it starts.
        let mut detector = Detector::resuming(rules, DetectorConfig::default(), activity_of(agent.state));
        if start_dialog && agent.state == AgentState::Spawning {
            detector = detector.expecting_start_dialog();
        }
        Watch {
            shell,
            agent_id: agent.id,
            name: agent.name.clone(),
            detector,
            last_output: Instant::now(),
            hook_seen: agent.last_hook_at,
            hook_new: None,
            hook_at: None,
            decided_at: None,
            read_at: Some(Instant::now()),
            activity_at: None,
            session_log: None,
            start_answered: None,
        }
    }

    /// Has the screen read by `at` at the latest.
    fn read_by(&mut self, at: Instant) {
        self.read_at = Some(self.read_at.map_or(at, |due| due.min(at)));
    }
}

impl Watch {
    /// A fresh reading of the screen: tells the detector about a newer hook first (so a recent
    /// hook wins over the screen for its bounded time), then the screen, and returns what is to
    /// be written, if anything.
    ///
    /// The API wrote each hook's state when the hook came, so a verdict that only repeats the
    /// hook is written again only when this watch wrote something since (a screen read just
    /// before the hook's screen was drawn): otherwise it would write a hook that newer hooks
    /// have already overtaken. The detector reports each verdict once, so the verdict the hook
    /// brought is kept even when the screen read with it has nothing new to say.
    pub fn read(&mut self, now: Instant, text: &str, foreground: Option<&str>) -> Option<Decision> {
        let mut decided = None;
        if let Some((at, state)) = self.hook_new.take() {
            self.hook_seen = Some(at);
            let age = (Utc::now() - at).to_std().unwrap_or(Duration::ZERO);
            let when = now.checked_sub(age).unwrap_or(now);
            self.hook_at = Some(when);
            if let Some(activity) = activity_of(state) {
                decided = self.detector.on_hook(when, activity);
            }
        }
        let busy = match (&self.shell, foreground) {
            (Some(_), Some(running)) => self.detector.on_busy(now, running),
            _ => None,
        };
        let decision = self.detector.on_screen(now, Utc::now(), text).or(busy).or(decided)?;
        let only_the_hook = decision.source == Source::Hook
            && decision.usage_limit_until.is_none()
            && decision.error.is_none()
            && decision.fatal.is_none()
            && self.decided_at.is_none_or(|written| self.hook_at.is_some_and(|hook| written <= hook));
        if only_the_hook {
            return None;
        }
        self.decided_at = Some(now);
        Some(decision)
    }

    /// When the screen is to be read next: for unread output, for the detector, or to answer
    /// a start dialog still showing again ([`Watches::start_dialogs`]).
    fn next_reading_at(&self) -> Option<Instant> {
        let answer_again = self.detector.start_choice().and(self.start_answered).map(|at| at + START_ANSWER_EVERY);
        [self.read_at, self.detector.next_reading_at(), answer_again].into_iter().flatten().min()
    }
}

/// The panes being watched, by pane id (`%7`).
#[derive(Default)]
pub struct Watches {
    panes: HashMap<String, Watch>,
    /// Panes were forgotten since the last reading: their mirrors can go.
    forgot: bool,
}

impl Watches {
    pub fn contains(&self, pane: &str) -> bool {
        self.panes.contains_key(pane)
    }

    pub fn insert(&mut self, pane: String, watch: Watch) {
        self.panes.insert(pane, watch);
    }

    /// Forgets panes no longer in `keep`.
    pub fn retain(&mut self, keep: &[String]) {
        let before = self.panes.len();
        self.panes.retain(|pane, _| keep.contains(pane));
        self.forgot |= self.panes.len() < before;
    }

    /// Output may have been missed (a notification backlog overflowed): read every screen.
    pub fn read_all_now(&mut self) {
        let now = Instant::now();
        self.panes.values_mut().for_each(|w| w.read_by(now));
    }

    pub fn get(&self, pane: &str) -> Option<&Watch> {
        self.panes.get(pane)
    }

    /// Control mode saw output: the screen is worth reading again once the output settles
    /// ([`OUTPUT_SETTLE`] after the first unread output). For panes without screen rules the
    /// output itself may decide (working).
    pub fn on_output(&mut self, pane: &str, now: Instant) -> Option<(Uuid, Decision)> {
        let watch = self.panes.get_mut(pane)?;
        watch.last_output = now;
        watch.read_by(now + OUTPUT_SETTLE);
        watch.detector.on_output(now).map(|d| (watch.agent_id, d))
    }

    /// The agent whose pane printed at `now`, when its `last_activity` is to be written: the
    /// first output seen, then at most once every [`ACTIVITY_EVERY`].
    pub fn activity_due(&mut self, pane: &str, now: Instant) -> Option<Uuid> {
        let watch = self.panes.get_mut(pane)?;
        if watch.activity_at.is_some_and(|at| now.duration_since(at) < ACTIVITY_EVERY) {
            return None;
        }
        watch.activity_at = Some(now);
        Some(watch.agent_id)
    }

    /// Panes to read now: their output settled, or the detector wants its confirming reading.
    pub fn due(&self, now: Instant) -> Vec<String> {
        self.panes
            .iter()
            .filter(|(_, w)| w.next_reading_at().is_some_and(|at| at <= now))
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// The panes whose screen shows a dialog Switchyard answers itself ([`StartChoice`]), with
    /// their agent's name and the answer, each once per [`START_ANSWER_EVERY`] while it shows.
    pub fn start_dialogs(&mut self, now: Instant) -> Vec<(String, String, StartChoice)> {
        let mut due = Vec::new();
        for (pane, watch) in &mut self.panes {
            let Some(choice) = watch.detector.start_choice() else { continue };
            if watch.start_answered.is_some_and(|at| now.duration_since(at) < START_ANSWER_EVERY) {
                continue;
            }
            watch.start_answered = Some(now);
            due.push((pane.clone(), watch.name.clone(), choice));
        }
        due
    }

    /// The earliest time a pane is to be read.
    pub fn next_due(&self) -> Option<Instant> {
        self.panes.values().filter_map(Watch::next_reading_at).min()
    }

    /// Hooks were recorded (or may have been missed): reads the last hook of every watched agent
    /// (one query) and has the screens of those with a newer one read at the next round, so a
    /// hook is told to its detector promptly, with a fresh screen.
    pub async fn refresh_hooks(&mut self, db: &PgPool) -> anyhow::Result<()> {
        let ids: Vec<Uuid> = self.panes.values().map(|w| w.agent_id).collect();
        if ids.is_empty() {
            return Ok(());
        }
        let hooks = {
            let mut conn = db.acquire().await?;
            worker_records::last_hooks(&mut conn, &ids).await?
        };
        for watch in self.panes.values_mut() {
            if let Some((Some(at), Some(state))) = hooks.get(&watch.agent_id) {
                if watch.hook_seen.is_none_or(|seen| *at > seen) {
                    watch.hook_new = Some((*at, *state));
                    watch.read_by(Instant::now());
                }
            }
        }
        Ok(())
    }

    /// Reads the screens of `panes` from their mirrors (starting a mirror where there is none
    /// yet) and decides for each; tells each detector about a newer hook first, so a recent hook
    /// wins over the screen for its bounded time.
    pub async fn read_all(&mut self, control: &Control, panes: &[String]) -> Vec<(String, Uuid, Decision)> {
        if std::mem::take(&mut self.forgot) {
            control.keep_mirrors(&self.panes.keys().cloned().collect::<Vec<_>>());
        }
        let captures = futures_util::future::join_all(panes.iter().map(|pane| screen(control, pane))).await;
        let shells = panes.iter().map(|pane| self.panes.get(pane).is_some_and(|w| w.shell.is_some()));
        let foregrounds = futures_util::future::join_all(
            panes.iter().zip(shells).map(|(pane, shell)| foreground(control, pane, shell)),
        )
        .await;
        let mut decisions = Vec::new();
        for ((pane, text), running) in panes.iter().zip(captures).zip(foregrounds) {
            let Some(watch) = self.panes.get_mut(pane) else { continue };
            watch.read_at = None;
            let text = match text {
                Ok(text) => text,
                Err(e) => {
                    tracing::debug!(pane, error = %e, "reading a pane");
                    continue;
                }
            };
            if let Some(decision) = watch.read(Instant::now(), &text, running.as_deref()) {
                decisions.push((pane.clone(), watch.agent_id, decision));
            }
        }
        decisions
    }
}

/// The program another process group runs in the pane's foreground, for panes without screen
/// rules (`None` for the others, when the pane's own group holds its terminal, or when it
/// cannot be told).
async fn foreground(control: &Control, pane: &str, shell: bool) -> Option<String> {
    if !shell {
        return None;
    }
    let lines = control.command(&["display-message", "-p", "-t", pane, "#{pane_pid}"]).await.ok()?;
    let pid = lines.into_iter().next()?.trim().parse().ok()?;
    crate::tmux::foreground::other_group_holding(pid)
}

/// The pane's screen from its mirror; a pane without one is mirrored first, and read with
/// `capture-pane` should the mirror be gone again at once (a resize).
async fn screen(control: &Control, pane: &str) -> Result<String, crate::tmux::TmuxError> {
    if let Some(text) = control.mirrored(pane, HISTORY) {
        return Ok(text);
    }
    control.mirror(pane, HISTORY).await?;
    match control.mirrored(pane, HISTORY) {
        Some(text) => Ok(text),
        None => control.capture(pane, HISTORY).await,
    }
}

fn activity_of(state: AgentState) -> Option<crate::domain::agent::Activity> {
    use crate::domain::agent::Activity;
    match state {
        AgentState::Working => Some(Activity::Working),
        AgentState::Idle => Some(Activity::Idle),
        AgentState::Permission => Some(Activity::Permission),
        AgentState::Question => Some(Activity::Question),
        _ => None,
    }
}

/// The connections the watcher writes its swaps on ([`worker_records::swap`]), kept (see
/// [`crate::db::spare_connections`]): a round's swaps for different agents are written at once, as many as
/// [`WRITERS`] on kept connections.
pub struct Writer(SpareConnections);

/// Connections kept for swaps: a round with more decisions takes the rest from the pool, which
/// keeps the others for the node's requests and other loops. One: a node's pool is four, and a
/// kept connection sits idle where a request waiting for one cannot have it.
const WRITERS: usize = 1;

impl Writer {
    pub fn new(db: PgPool) -> Writer {
        Writer(SpareConnections::new(db, WRITERS))
    }

    async fn swap(
        &self,
        agent: Uuid,
        pane: &str,
        to: AgentState,
        cause: &Cause,
    ) -> Result<Option<(String, AgentState)>, sqlx::Error> {
        let mut conn = self.0.take().await?;
        let swapped = worker_records::swap(&mut conn, agent, pane, to, cause).await;
        self.0.give_back(conn, &swapped);
        swapped
    }
}

/// Writes a decision: a provider that needs something from the user (`fatal`) puts the agent
/// in `error` with the provider's words; a usage limit suspends it until the reset; anything
/// else is an observation, applied only if the agent is still live (a late reading never
/// revives it). Returns true when the agent stopped (its window should go; `resume` starts the
/// provider's session again in a new one).
pub async fn apply(
    db: &PgPool,
    writer: &Writer,
    feed: &crate::feed::EventFeed,
    agent_id: Uuid,
    pane: &str,
    decision: &Decision,
) -> anyhow::Result<bool> {
    let source = match decision.source {
        Source::Hook => "hook",
        Source::Screen => "screen",
        Source::Output => "control",
    };
    if let Some(d) = &decision.disagreement {
        tracing::warn!(agent = %agent_id, hook = ?d.hook, screen = ?d.screen, hook_age_ms = d.hook_age.as_millis() as u64,
            "the screen disagrees with the last hook past its precedence; the screen wins");
    }
    // A screen's decision names its rule and the line it matched, so it can be explained.
    let matched = decision.matched.as_ref();
    // A prompt read on the screen says what it asks, for the agent's task and the notices.
    let cause = Cause {
        detail: decision.error.clone().or_else(|| decision.asked.clone()),
        signal: matched.map(|m| m.rule.to_owned()),
        line: matched.map(|m| m.line.clone()).filter(|line| !line.is_empty()),
        ..Cause::from(source)
    };
    if decision.usage_limit_until.is_none() && decision.fatal.is_none() {
        // The common change first, in one statement; anything else takes the whole path below.
        let to = decision.activity.state();
        if let Some((agent, from)) = writer.swap(agent_id, pane, to, &cause).await? {
            feed.committed();
            tracing::info!(agent, %from, %to, source, "agent state changed");
            return Ok(false);
        }
    }
    // The state, its events and the task that follows it commit together, while the agent is
    // still in the pane read: killed and resumed meanwhile, it is `spawning` for a new pane, and
    // the old pane's last screen would settle it `idle` with no pane at all.
    let mut tx = db.begin().await?;
    if !worker_records::still_in_pane(&mut tx, agent_id, pane).await? {
        tx.commit().await?;
        return Ok(false);
    }
    if let Some(words) = &decision.fatal {
        let cause = Cause { detail: Some(words.clone()), ..Cause::from(source) };
        let applied = worker_records::observe(&mut tx, agent_id, None, AgentEvent::Fail, &cause).await?;
        feed.commit(tx).await?;
        return Ok(matches!(applied, Some(Applied::Changed { .. })));
    }
    // A resumed session draws the limit it stopped at again, with a reset time now passed (read
    // as tomorrow's): only a limit met after it worked again is a new one.
    let limit = match decision.usage_limit_until {
        Some(until) => worker_records::limit_is_new(&mut tx, agent_id).await?.then_some(until),
        None => None,
    };
    if let Some(until) = limit {
        let cause = Cause {
            detail: Some(format!("usage limit; resumes at {until}")),
            suspended_until: Some(until),
            ..Cause::from(source)
        };
        let applied = worker_records::observe(&mut tx, agent_id, None, AgentEvent::Suspend, &cause).await?;
        let Some(Applied::Changed { agent, .. }) = applied else {
            tx.commit().await?;
            return Ok(false);
        };
        // Resumed into its session after the reset, it is told to go on: the limit cut its turn.
        if worker_records::has_unreported_work(&mut tx, &agent).await? {
            worker_records::tell_to_go_on(&mut tx, &agent, "its usage limit was reached; it has reset").await?;
        }
        feed.commit(tx).await?;
        return Ok(true);
    }
    let applied =
        worker_records::observe(&mut tx, agent_id, None, AgentEvent::Observed(decision.activity), &cause).await?;
    if matches!(applied, Some(Applied::Changed { .. })) {
        feed.commit(tx).await?
    } else {
        tx.commit().await?
    }
    match applied {
        Some(Applied::Refused { current, .. }) => {
            tracing::debug!(agent = %agent_id, %current, "observation for an agent that is no longer live");
        }
        Some(Applied::Changed { agent, from }) => {
            tracing::info!(agent = %agent.name, %from, to = %agent.state, source, "agent state changed");
        }
        _ => {}
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::agent::Activity;

    const WORKING: &str = include_str!("../../tests/fixtures/screens/claude/working.txt");
    const IDLE: &str = include_str!("../../tests/fixtures/screens/claude/idle.txt");

    fn watch() -> Watch {
        Watch {
            agent_id: Uuid::nil(),
            name: "fox".into(),
            shell: None,
            detector: Detector::new(ScreenRules::ClaudeCode, DetectorConfig::default()),
            last_output: Instant::now(),
            hook_seen: None,
            hook_new: None,
            hook_at: None,
            decided_at: None,
            read_at: None,
            activity_at: None,
            session_log: None,
            start_answered: None,
        }
    }

    #[test]
    fn output_moves_last_activity_at_most_once_every_five_seconds() {
        let mut watches = Watches::default();
        watches.insert("%1".into(), watch());
        let start = Instant::now();
        assert_eq!(watches.activity_due("%1", start), Some(Uuid::nil()), "the first output is news");
        assert_eq!(watches.activity_due("%1", start + Duration::from_millis(10)), None);
        assert_eq!(watches.activity_due("%1", start + ACTIVITY_EVERY - Duration::from_millis(1)), None);
        assert_eq!(watches.activity_due("%1", start + ACTIVITY_EVERY), Some(Uuid::nil()));
        assert_eq!(watches.activity_due("%2", start), None, "not a watched pane");
    }

    #[test]
    fn a_hook_overruled_by_an_older_screen_is_written_back() {
        // The Stop hook came (the API wrote `idle`), then the screen, still showing the turn it
        // drew before the hook returned, was read as `working` and written. The hook, told with
        // the quiet screen that follows, must put `idle` back.
        let mut watch = watch();
        let start = Instant::now();
        let hook_came = Utc::now() - chrono::Duration::milliseconds(100);
        let first = watch.read(start, WORKING, None).expect("the screen decides");
        assert_eq!(first.activity, Activity::Working);
        watch.hook_new = Some((hook_came, AgentState::Idle));
        let second = watch.read(start + Duration::from_millis(50), IDLE, None).expect("the hook's verdict is written");
        assert_eq!((second.activity, second.source), (Activity::Idle, Source::Hook));
        // Told once: the next readings agree and report nothing new.
        assert!(watch.read(start + Duration::from_millis(100), IDLE, None).is_none());
        assert!(watch.read(start + Duration::from_secs(2), IDLE, None).is_none());
    }

    #[test]
    fn a_hook_the_api_already_wrote_is_not_written_again_nor_an_overtaken_one() {
        // SessionStart (`idle`) is told late, after UserPromptSubmit moved the agent to
        // `working`: writing it would flap the agent back to idle for a moment.
        let mut watch = watch();
        let start = Instant::now();
        watch.hook_new = Some((Utc::now(), AgentState::Idle));
        assert!(watch.read(start, IDLE, None).is_none(), "the API wrote it; newer hooks may have followed");
        assert!(watch.hook_new.is_none() && watch.hook_seen.is_some(), "each hook is told once");
        watch.hook_new = Some((Utc::now(), AgentState::Working));
        assert!(watch.read(start + Duration::from_millis(10), WORKING, None).is_none());
        assert_eq!(watch.detector.activity(), Some(Activity::Working));
    }

    #[test]
    fn a_start_dialog_is_handed_out_to_be_answered_once_and_again_only_while_it_stays() {
        const DIALOG: &str = include_str!("../../tests/fixtures/screens/codex/start-folder-access-0.169.0.txt");
        let mut codex = watch();
        codex.detector = Detector::new(ScreenRules::Codex, DetectorConfig::default()).expecting_start_dialog();
        let mut watches = Watches::default();
        watches.insert("%1".into(), codex);
        let start = Instant::now();
        assert!(watches.panes.get_mut("%1").unwrap().read(start, DIALOG, None).is_none(), "not a question");
        let due = watches.start_dialogs(start);
        assert_eq!(due.len(), 1, "{due:?}");
        assert_eq!((due[0].0.as_str(), due[0].2.label), ("%1", "Open restricted"));
        assert!(watches.start_dialogs(start + Duration::from_secs(1)).is_empty(), "being answered");
        // Still there when the answer had its time: read again then, and answered again.
        assert_eq!(watches.next_due(), Some(start + START_ANSWER_EVERY));
        assert_eq!(watches.start_dialogs(start + START_ANSWER_EVERY).len(), 1);
    }
}
