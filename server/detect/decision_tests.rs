//! The arbiter's precedence rules, driven with explicit instants (no sleeps).

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::decision::{Decision, Detector, DetectorConfig, Disagreement, Source};
use super::screen::ScreenRules;
use crate::domain::agent::Activity;

const RULE: &str = "────────────────────────────────────────────────────────────────────────────────";

fn claude(above: &str, typed: &str) -> String {
    format!("{above}\n\n{RULE}\n❯ {typed}\n{RULE}\n  ? for shortcuts\n")
}

fn spinner(seconds: u32) -> String {
    claude(&format!("⏺ Running the tests.\n\n✻ Compiling… ({seconds}s · ↓ 1.2k tokens · esc to interrupt)"), "")
}

fn quiet() -> String {
    claude("⏺ Done: all 12 tests pass.\n\n✻ Worked for 1m 3s", "")
}

const PERMISSION: &str = "⏺ Bash(rm -rf build/)\n\n\
    ────────────────────────────────────────────────────────────────────────────────\n \
    Bash command\n\n   rm -rf build/\n\n Do you want to proceed?\n ❯ 1. Yes\n   2. No, and tell Claude what to do differently (esc)\n";

struct Clock {
    start: Instant,
    wall: DateTime<Utc>,
}

impl Clock {
    fn new() -> Clock {
        Clock { start: Instant::now(), wall: "2026-11-22T10:00:00Z".parse().unwrap() }
    }

    fn at(&self, ms: u64) -> Instant {
        self.start + Duration::from_millis(ms)
    }

    fn screen(&self, d: &mut Detector, ms: u64, text: &str) -> Option<Decision> {
        d.on_screen(self.at(ms), self.wall + chrono::Duration::milliseconds(ms as i64), text)
    }
}

fn detector(rules: ScreenRules) -> Detector {
    Detector::new(
        rules,
        DetectorConfig {
            hook_precedence: Duration::from_secs(10),
            settle: Duration::from_millis(800),
            ..Default::default()
        },
    )
}

fn activity(d: Option<Decision>) -> Option<(Activity, Source)> {
    d.map(|d| (d.activity, d.source))
}

#[test]
fn a_busy_marker_is_working_on_the_first_reading() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    assert_eq!(activity(c.screen(&mut d, 0, &spinner(1))), Some((Activity::Working, Source::Screen)));
}

#[test]
fn a_quiet_screen_is_idle_only_on_a_second_identical_reading_after_the_settle_time() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    c.screen(&mut d, 0, &spinner(1));
    assert_eq!(c.screen(&mut d, 1000, &quiet()), None, "one quiet reading proves nothing");
    assert_eq!(d.next_reading_at(), Some(c.at(1800)));
    assert_eq!(c.screen(&mut d, 1200, &quiet()), None, "too soon after the first");
    assert_eq!(activity(c.screen(&mut d, 1800, &quiet())), Some((Activity::Idle, Source::Screen)));
    assert_eq!(d.next_reading_at(), None);
}

#[test]
fn a_changed_quiet_screen_restarts_the_two_readings() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    c.screen(&mut d, 0, &spinner(1));
    c.screen(&mut d, 1000, &claude("⏺ Writing the summary", ""));
    assert_eq!(c.screen(&mut d, 2000, &quiet()), None);
    assert_eq!(activity(c.screen(&mut d, 2800, &quiet())).map(|a| a.0), Some(Activity::Idle));
}

#[test]
fn a_marker_between_two_quiet_readings_resets_them() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    c.screen(&mut d, 0, &quiet());
    c.screen(&mut d, 500, &spinner(1));
    assert_eq!(c.screen(&mut d, 1000, &quiet()), None, "the earlier quiet reading no longer counts");
    assert_eq!(activity(c.screen(&mut d, 1800, &quiet())).map(|a| a.0), Some(Activity::Idle));
}

#[test]
fn typing_into_the_input_box_does_not_break_the_idle_confirmation() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    c.screen(&mut d, 0, &quiet());
    let typed = claude("⏺ Done: all 12 tests pass.\n\n✻ Worked for 1m 3s", "Do you want to");
    assert_eq!(activity(c.screen(&mut d, 900, &typed)).map(|a| a.0), Some(Activity::Idle));
}

#[test]
fn the_same_state_is_not_reported_twice() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    assert!(c.screen(&mut d, 0, &spinner(1)).is_some());
    assert_eq!(c.screen(&mut d, 1000, &spinner(2)), None);
    assert_eq!(d.activity(), Some(Activity::Working));
}

#[test]
fn a_dialog_is_reported_on_one_reading() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    c.screen(&mut d, 0, &spinner(1));
    assert_eq!(activity(c.screen(&mut d, 100, PERMISSION)), Some((Activity::Permission, Source::Screen)));
}

#[test]
fn a_hook_wins_over_a_disagreeing_screen_within_its_precedence() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    assert_eq!(activity(d.on_hook(c.at(0), Activity::Working)), Some((Activity::Working, Source::Hook)));
    c.screen(&mut d, 1000, &quiet());
    assert_eq!(c.screen(&mut d, 2000, &quiet()), None, "idle on screen, but the hook said working 2 s ago");
    assert_eq!(c.screen(&mut d, 9000, PERMISSION), None);
}

#[test]
fn after_the_precedence_a_screen_that_keeps_disagreeing_wins_and_says_so() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    d.on_hook(c.at(0), Activity::Working);
    c.screen(&mut d, 1000, &quiet());
    c.screen(&mut d, 2000, &quiet());
    assert_eq!(d.next_reading_at(), Some(c.at(10_000)), "read again when the hook's time is up");
    let decision = c.screen(&mut d, 10_000, &quiet()).expect("the screen wins");
    assert_eq!((decision.activity, decision.source), (Activity::Idle, Source::Screen));
    assert_eq!(
        decision.disagreement,
        Some(Disagreement { hook: Activity::Working, screen: Activity::Idle, hook_age: Duration::from_secs(10) })
    );
    // Overruled once: the next change is the screen's own, with no disagreement.
    let next = c.screen(&mut d, 11_000, &spinner(1)).unwrap();
    assert_eq!((next.activity, next.disagreement), (Activity::Working, None));
}

#[test]
fn a_stale_screen_never_overrules_a_hook() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    c.screen(&mut d, 0, &spinner(1));
    assert_eq!(activity(d.on_hook(c.at(500), Activity::Idle)), Some((Activity::Idle, Source::Hook)));
    // The precedence ends with no reading since: the hook's word still stands.
    assert_eq!(d.on_output(c.at(20_000)), None);
    assert_eq!(c.screen(&mut d, 20_000, &quiet()), None, "quiet, not yet confirmed: still the hook");
    assert_eq!(c.screen(&mut d, 21_000, &quiet()), None, "confirmed idle agrees with the hook");
    assert_eq!(d.activity(), Some(Activity::Idle));
}

#[test]
fn a_screen_that_agrees_with_the_hook_changes_nothing() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    d.on_hook(c.at(0), Activity::Permission);
    assert_eq!(c.screen(&mut d, 200, PERMISSION), None);
    assert_eq!(c.screen(&mut d, 15_000, PERMISSION), None);
    assert_eq!(d.next_reading_at(), None);
}

#[test]
fn a_newer_hook_replaces_an_older_one() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    d.on_hook(c.at(0), Activity::Working);
    assert_eq!(activity(d.on_hook(c.at(3000), Activity::Permission)), Some((Activity::Permission, Source::Hook)));
    assert_eq!(d.on_hook(c.at(4000), Activity::Permission), None, "the same word again is no news");
}

#[test]
fn output_alone_decides_nothing_for_providers_with_screen_rules() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    assert_eq!(d.on_output(c.at(0)), None);
    assert_eq!(d.activity(), None);
}

#[test]
fn generic_panes_are_working_on_output_and_idle_when_the_screen_stops_changing() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::Generic));
    assert_eq!(activity(d.on_output(c.at(0))), Some((Activity::Working, Source::Output)));
    assert_eq!(c.screen(&mut d, 10, "$ make\ncc -c main.c\n"), None);
    assert_eq!(d.next_reading_at(), Some(c.at(810)));
    assert_eq!(c.screen(&mut d, 400, "$ make\ncc -c main.c\ncc -c util.c\n"), None, "changed: still working");
    assert_eq!(
        activity(c.screen(&mut d, 1200, "$ make\ncc -c main.c\ncc -c util.c\n")),
        Some((Activity::Idle, Source::Screen))
    );
    assert_eq!(
        activity(c.screen(&mut d, 1300, "$ make\ncc -c main.c\ncc -c util.c\n$ \n")),
        Some((Activity::Working, Source::Screen))
    );
}

const CODEX_LIMIT: &str =
    "› fix the tests\n\n■ You've hit your usage limit. Upgrade to Pro (https://openai.com/chatgpt/pricing) or \
                 try again in 2 hours 5 minutes.\n\n› \n\n  ? for shortcuts\n";
const CODEX_PROMPT: &str = "› \n\n  ? for shortcuts\n";

#[test]
fn a_usage_limit_is_reported_at_once_and_keeps_its_first_reset_time() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::Codex));
    let limit = CODEX_LIMIT;
    c.screen(&mut d, 0, CODEX_PROMPT);
    let decision = c.screen(&mut d, 10, limit).expect("reported on one reading");
    let until = c.wall + chrono::Duration::milliseconds(10) + chrono::Duration::minutes(125);
    assert_eq!((decision.activity, decision.usage_limit_until), (Activity::Idle, Some(until)));
    assert_eq!(c.screen(&mut d, 60_000, limit), None, "a relative time read a minute later is the same limit");
}

#[test]
fn a_resumed_session_showing_the_limit_it_stopped_at_is_not_limited_again_until_a_new_turn() {
    // As the worker watches an agent it is spawning (no state recorded for the pane).
    let (c, mut d) = (Clock::new(), Detector::resuming(ScreenRules::Codex, DetectorConfig::default(), None));
    // A new pane's first screen at its prompt, with the old limit as the last entry: idle.
    let first = c.screen(&mut d, 0, CODEX_LIMIT).expect("a decision");
    assert_eq!((first.activity, first.usage_limit_until), (Activity::Idle, None));
    assert_eq!(c.screen(&mut d, 1000, CODEX_LIMIT), None, "nothing new while it shows the same");
    // A new turn meets the limit again: that one counts.
    let again =
        "› go on\n\n■ You've hit your usage limit. Upgrade to Pro or try again in 1 hour.\n\n› \n\n  ? for shortcuts\n";
    let decision = c.screen(&mut d, 2000, again).expect("a new limit");
    assert_eq!(
        decision.usage_limit_until,
        Some(c.wall + chrono::Duration::milliseconds(2000) + chrono::Duration::hours(1))
    );
}

#[test]
fn a_pane_watched_before_this_worker_started_counts_the_limit_it_shows() {
    let c = Clock::new();
    let mut d = Detector::resuming(ScreenRules::Codex, DetectorConfig::default(), Some(Activity::Working));
    let decision = c.screen(&mut d, 0, CODEX_LIMIT).expect("reported");
    assert!(decision.usage_limit_until.is_some(), "{decision:?}");
}

#[test]
fn a_final_error_is_reported_beside_the_activity() {
    let (c, mut d) = (Clock::new(), detector(ScreenRules::ClaudeCode));
    c.screen(&mut d, 0, &spinner(1));
    let error =
        claude("> fix it\n  ⎿  API Error: 401 {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\"}}", "");
    let decision = c.screen(&mut d, 1000, &error).unwrap();
    assert_eq!(decision.activity, Activity::Idle);
    assert!(decision.error.unwrap().starts_with("API Error: 401"));
}

#[test]
fn a_restart_reads_an_idle_shell_where_it_was_and_reports_nothing() {
    let config = DetectorConfig { settle: Duration::from_millis(800), ..Default::default() };
    let (c, mut d) = (Clock::new(), Detector::resuming(ScreenRules::Generic, config, Some(Activity::Idle)));
    let prompt = "$ make test\nok\n$ ";
    assert_eq!(c.screen(&mut d, 0, prompt), None, "the first reading is where the screen is, not work");
    assert_eq!(c.screen(&mut d, 1000, prompt), None, "still idle, as recorded: no new decision");
    // New output afterwards is work again, then idle once it settles.
    assert_eq!(activity(c.screen(&mut d, 2000, "$ make test\nok\n$ ls\n")), Some((Activity::Working, Source::Screen)));
    assert_eq!(activity(c.screen(&mut d, 3000, "$ make test\nok\n$ ls\n")).map(|a| a.0), Some(Activity::Idle));
    // Without a recorded state, the first reading of a generic screen counts as work (as before).
    let mut fresh = detector(ScreenRules::Generic);
    assert_eq!(activity(c.screen(&mut fresh, 0, prompt)), Some((Activity::Working, Source::Screen)));
}

#[test]
fn a_limit_from_before_the_last_prompt_is_not_this_turns() {
    let (c, mut d) = (Clock::new(), Detector::resuming(ScreenRules::ClaudeCode, DetectorConfig::default(), None));
    let old = "⏺ Write(a.txt)\n  ⎿  Wrote 1 line to a.txt\n  ⎿  You've hit your 5-hour limit · resets 9:40pm (UTC)";
    c.screen(&mut d, 0, &claude(old, ""));
    // Told to go on, it works: the old limit stays on the screen above the new prompt.
    let going_on =
        format!("{old}\n\n> Your session was interrupted: go on with your assignment, then report.\n\n✻ Thinking… (esc to interrupt)");
    let decision = c.screen(&mut d, 1000, &claude(&going_on, "")).expect("working");
    assert_eq!((decision.activity, decision.usage_limit_until), (Activity::Working, None));
}

#[test]
fn a_pane_expected_to_open_at_a_start_dialog_is_not_idle_before_it_and_answers_it_not_a_person() {
    let fixture = |name: &str| {
        std::fs::read_to_string(format!("{}/tests/fixtures/screens/codex/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    };
    let (dialog, prompt) = (fixture("start-folder-access-0.169.0.txt"), fixture("idle-start-api-key-0.169.0.txt"));
    let (c, d) = (Clock::new(), detector(ScreenRules::Codex));
    let mut d = d.expecting_start_dialog();
    // Codex 0.169 draws its composer for a moment before the dialog: not idle yet.
    assert_eq!(c.screen(&mut d, 0, &prompt), None);
    assert_eq!(c.screen(&mut d, 1_000, &prompt), None);
    assert_eq!(c.screen(&mut d, 2_000, &dialog), None, "not a question for a person");
    let choice = d.start_choice().expect("a choice to make");
    assert_eq!((choice.option, choice.label), (1, "Open restricted"));
    // Answered: the prompt is the CLI ready, and the same words drawn later are not a dialog to answer.
    assert_eq!(c.screen(&mut d, 2_100, &prompt), None);
    assert_eq!(d.start_choice(), None);
    assert_eq!(activity(c.screen(&mut d, 3_000, &prompt)), Some((Activity::Idle, Source::Screen)));
    assert_eq!(activity(c.screen(&mut d, 3_100, &dialog)), Some((Activity::Question, Source::Screen)));
    assert_eq!(d.start_choice(), None);
}

#[test]
fn an_expected_start_dialog_that_never_shows_stops_being_waited_for() {
    let prompt = std::fs::read_to_string(format!(
        "{}/tests/fixtures/screens/codex/idle-start-api-key-0.169.0.txt",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let (c, d) = (Clock::new(), detector(ScreenRules::Codex));
    let mut d = d.expecting_start_dialog();
    let wait = crate::detect::decision::START_DIALOG_WAIT.as_millis() as u64;
    assert_eq!(c.screen(&mut d, 0, &prompt), None);
    assert_eq!(c.screen(&mut d, wait - 1, &prompt), None);
    // Answered before this worker watched the pane (it restarted): the prompt is the CLI ready.
    assert_eq!(c.screen(&mut d, wait, &prompt), None, "the first quiet reading at the prompt");
    assert_eq!(activity(c.screen(&mut d, wait + 1_000, &prompt)), Some((Activity::Idle, Source::Screen)));
}
