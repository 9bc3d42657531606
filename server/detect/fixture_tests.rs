//! Every screen under `tests/fixtures/screens/{claude,codex,gemini}/` against its provider's
//! rules. The file name says the expected result — `working`, `idle`, `permission`, `question`,
//! `usage_limit`, `error` or `fatal` (the provider needs a login, key or network: the agent is
//! `error`) or `start` (a dialog Switchyard answers itself before the first prompt: nothing
//! decided, a [`StartChoice`](super::screen::StartChoice) to make), then optionally
//! `-what-is-special` and, for screens recorded from the real CLIs, the CLI's version — so a
//! new fixture is a new case.
//! Each goes through a fresh [`Detector`] the way the worker would: read, then read again after
//! the settle time (idle needs both) — once as captured, and once printed into a pane mirror
//! ([`crate::tmux::mirror`]), which is how the worker reads screens.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::decision::{Decision, Detector, DetectorConfig};
use super::screen::ScreenRules;
use crate::domain::agent::Activity;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/screens")
}

fn rules_for(dir: &str) -> ScreenRules {
    match dir {
        "claude" => ScreenRules::ClaudeCode,
        "codex" => ScreenRules::Codex,
        "gemini" => ScreenRules::Gemini,
        other => panic!("no screen rules for fixtures in {other}/"),
    }
}

/// The decisions after reading `text` once, and again `settle` later.
fn read_twice(rules: ScreenRules, text: &str) -> (Option<Decision>, Option<Decision>) {
    let config = DetectorConfig::default();
    // A pane watched for a while: a new pane's first screen hides a usage limit (a resumed
    // session's old one; see the decision tests).
    let mut detector = Detector::past_its_first_prompt(rules, config);
    let (start, wall) = (Instant::now(), "2026-11-22T10:00:00Z".parse().unwrap());
    let first = detector.on_screen(start, wall, text);
    let second = detector.on_screen(start + config.settle, wall, text);
    (first, second)
}

/// The decision in force after both readings.
fn settle(rules: ScreenRules, text: &str) -> Option<Decision> {
    let (first, second) = read_twice(rules, text);
    second.or(first)
}

/// `text` as a program printing it into a fresh pane of the worker's size would leave it, read
/// back from the pane's mirror.
fn through_mirror(text: &str) -> String {
    use crate::tmux::mirror::{Mirror, PaneView};
    let (cols, rows) = crate::tmux::WINDOW_SIZE;
    let view = PaneView { cols, rows, cursor_x: 0, cursor_y: 0, alternate: false };
    let mut mirror = Mirror::seed(view, 20, &[]);
    mirror.feed(b"\x1b[H\x1b[2J");
    mirror.feed(text.replace('\n', "\r\n").as_bytes());
    mirror.text(20)
}

fn check(path: &Path, mirrored: bool) -> Result<(), String> {
    let provider = path.parent().unwrap().file_name().unwrap().to_str().unwrap();
    let name = path.file_name().unwrap().to_str().unwrap();
    let name = if mirrored { format!("{name} (mirrored)") } else { name.to_owned() };
    let expected = name.split(['-', '.', ' ']).next().unwrap();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: {e}"))?;
    let text = if mirrored { through_mirror(&text) } else { text };
    if expected == "start" {
        return start(rules_for(provider), &text).map_err(|e| format!("{provider}/{name}: {e}"));
    }
    let (first, second) = read_twice(rules_for(provider), &text);
    if expected == "starting" {
        // A CLI not ready for input yet: neither idle nor anything else.
        let decided = second.or(first);
        return decided.map_or(Ok(()), |d| Err(format!("{provider}/{name}: decided {d:?} while starting")));
    }
    if expected == "idle" && first.is_some() {
        return Err(format!("{provider}/{name}: decided on one reading: {first:?}"));
    }
    let decision = second.or(first).ok_or_else(|| format!("{provider}/{name}: no decision"))?;
    let ok = match expected {
        "working" => {
            decision.activity == Activity::Working && decision.usage_limit_until.is_none() && decision.fatal.is_none()
        }
        "idle" => {
            decision.activity == Activity::Idle
                && decision.usage_limit_until.is_none()
                && decision.error.is_none()
                && decision.fatal.is_none()
        }
        "permission" => decision.activity == Activity::Permission,
        "question" => decision.activity == Activity::Question,
        "usage_limit" => decision.usage_limit_until.is_some(),
        "error" => decision.error.is_some() && decision.usage_limit_until.is_none() && decision.fatal.is_none(),
        "fatal" => decision.fatal.is_some(),
        other => return Err(format!("{provider}/{name}: unknown expectation {other:?}")),
    };
    ok.then_some(()).ok_or_else(|| format!("{provider}/{name}: expected {expected}, got {decision:?}"))
}

/// A start dialog on a pane expected to open at it: read twice, nothing decided (not a question
/// for a person, not idle) and a choice to make; on any other pane it is a question.
fn start(rules: ScreenRules, text: &str) -> Result<(), String> {
    let config = DetectorConfig::default();
    let mut detector = Detector::new(rules, config).expecting_start_dialog();
    let (now, wall) = (Instant::now(), "2026-11-22T10:00:00Z".parse().unwrap());
    let decided = [detector.on_screen(now, wall, text), detector.on_screen(now + config.settle, wall, text)];
    if decided.iter().any(Option::is_some) {
        return Err(format!("decided {decided:?}"));
    }
    detector.start_choice().ok_or("no choice to make")?;
    let mut other = Detector::new(rules, config);
    let asked = other.on_screen(now, wall, text).map(|d| d.activity);
    match (asked, other.start_choice()) {
        (Some(Activity::Question), None) => Ok(()),
        unexpected => Err(format!("on a pane not expecting it: {unexpected:?}")),
    }
}

#[test]
fn every_fixture_reads_as_its_name_says() {
    let mut failures = Vec::new();
    let mut seen = Vec::new();
    for provider in ["claude", "codex", "gemini"] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(fixtures().join(provider))
            .unwrap_or_else(|e| panic!("{provider} fixtures: {e}"))
            .map(|entry| entry.unwrap().path())
            .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("txt" | "ansi")))
            .collect();
        paths.sort();
        for path in paths {
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            seen.push(format!("{provider}/{}", name.split(['-', '.']).next().unwrap()));
            for mirrored in [false, true] {
                if let Err(e) = check(&path, mirrored) {
                    failures.push(e);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} fixture(s) misread:\n{}", failures.len(), failures.join("\n"));
    for provider in ["claude", "codex", "gemini"] {
        for state in ["working", "idle", "permission", "question", "usage_limit", "error"] {
            let key = format!("{provider}/{state}");
            assert!(seen.contains(&key), "no fixture for {key}");
        }
    }
}

/// Reset times read from the fixtures themselves (at 2026-11-22 10:00 UTC, zone UTC).
#[test]
fn usage_limit_fixtures_carry_their_reset_times() {
    for (file, rules, expected) in [
        ("claude/usage_limit.txt", ScreenRules::ClaudeCode, "2026-11-22T14:00:00Z"),
        ("claude/usage_limit-5-hour.ansi", ScreenRules::ClaudeCode, "2026-11-23T01:00:00Z"),
        ("codex/usage_limit.txt", ScreenRules::Codex, "2026-11-22T15:28:00Z"),
        ("gemini/usage_limit.txt", ScreenRules::Gemini, "2026-11-23T09:00:00Z"),
        ("gemini/usage_limit-api-key-0.61.0.txt", ScreenRules::Gemini, "2026-11-23T03:15:00Z"),
        // An API key's rate limit names no reset: the API's limits are per minute.
        ("claude/usage_limit-api-key-rate-limit-2.1.332.txt", ScreenRules::ClaudeCode, "2026-11-22T10:01:00Z"),
    ] {
        let text = std::fs::read_to_string(fixtures().join(file)).unwrap();
        let decision = settle(rules, &text).unwrap();
        assert_eq!(decision.usage_limit_until, Some(expected.parse().unwrap()), "{file}");
    }
}

#[test]
fn a_visible_prompt_alone_asks_for_a_second_reading() {
    let text = std::fs::read_to_string(fixtures().join("claude/idle.txt")).unwrap();
    let mut detector = Detector::new(ScreenRules::ClaudeCode, DetectorConfig::default());
    let now = Instant::now();
    assert_eq!(detector.on_screen(now, "2026-11-22T10:00:00Z".parse().unwrap(), &text), None);
    assert_eq!(detector.next_reading_at(), Some(now + DetectorConfig::default().settle));
}
