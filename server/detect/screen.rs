//! Reading one screen: what the provider's own drawing says the agent is doing.
//!
//! Every provider draws a transcript, then a live area (spinner, dialog), then its input area
//! (a box or rules around a `>`/`❯`/`›` line) and a footer. The rules only look at the **live
//! region**: the lines above the input area, from the last transcript bullet (`⏺`, `•`, `✦` …)
//! down. Text typed into the input box, the footer, and anything said in earlier turns (an old
//! `esc to interrupt`, a usage-limit message from before a resume) therefore never count.
//!
//! A reading reports *markers*; it never says "idle" just because a prompt is visible. With no
//! marker, `activity` is `None` and [`ScreenReading::region_hash`] lets the caller apply the
//! two-readings rule ([`super::decision`]). Precedence within one reading: permission, then
//! question, then working (Codex prints `esc to interrupt` under its question dialog).

mod claude;
mod codex;
mod gemini;

use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::domain::agent::Activity;

/// Which provider's screen rules apply to a pane (named in the provider config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScreenRules {
    ClaudeCode,
    Codex,
    Gemini,
    /// A shell or custom command: no markers at all. The decision layer falls back to "the screen
    /// changed → working; unchanged across two readings → idle".
    Generic,
}

impl ScreenRules {
    pub const ALL: [ScreenRules; 4] =
        [ScreenRules::ClaudeCode, ScreenRules::Codex, ScreenRules::Gemini, ScreenRules::Generic];

    /// The name used in provider configs.
    pub fn as_str(self) -> &'static str {
        match self {
            ScreenRules::ClaudeCode => "claude",
            ScreenRules::Codex => "codex",
            ScreenRules::Gemini => "gemini",
            ScreenRules::Generic => "generic",
        }
    }
}

impl fmt::Display for ScreenRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ScreenRules {
    type Err = String;

    /// A provider config's `screen_rules`. `shell` is another name for `generic` (a shell has no
    /// markers of its own), which configs written before the name `generic` use.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "shell" {
            return Ok(ScreenRules::Generic);
        }
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown screen rules {s:?}; expected one of: claude, codex, gemini, generic"))
    }
}

/// What a reading needs besides the text: the wall clock and the zone for reset times that name
/// none (the providers print them in the machine's local zone; the worker passes its own).
#[derive(Debug, Clone, Copy)]
pub struct ReadContext {
    pub now: DateTime<Utc>,
    pub zone: Tz,
}

/// The result of reading one screen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenReading {
    /// `Some(Working | Permission | Question)` when a marker says so; `Some(Idle)` only when the
    /// provider is back at its prompt after a usage-limit or error message; `None` when no marker
    /// shows — idle only if the next reading is the same ([`Self::region_hash`]).
    pub activity: Option<Activity>,
    /// The provider said its usage limit is reached; when it resets (an hour from now when the
    /// screen gives no time it can parse).
    pub usage_limit: Option<DateTime<Utc>>,
    /// A final error the provider printed (API error, crash), as shown.
    pub error: Option<String>,
    /// The provider cannot work until the user gives it something (a login, an API key,
    /// network access), in its own words: a start screen asking for a sign-in, or the answer
    /// to a turn while the provider still says so ("Not logged in · Please run /login" above a
    /// footer that says "Not logged in"). The agent is `error` with this reason.
    pub fatal: Option<String>,
    /// The provider's input area is drawn (always true for rules without one): a quiet screen
    /// without it is a CLI still starting, not an idle one.
    pub at_prompt: bool,
    /// A hash of the region above the input area, colour codes stripped: equal hashes on two
    /// readings mean nothing happened in between.
    pub region_hash: u64,
    /// The rule that decided `activity` (working, permission or question) and the line it
    /// matched, so a state can be explained ("spinner" on `✻ Thinking…`).
    pub matched: Option<Matched>,
    /// While it asks (permission, question): what, in the CLI's words ([`super::prompt::asked`]).
    pub asked: Option<String>,
    /// A dialog the CLI starts at that Switchyard answers itself, and how.
    pub start_choice: Option<StartChoice>,
}

/// The option Switchyard chooses in a dialog a CLI opens at because of how Switchyard configured
/// it (Codex's "Folder access" for the untrusted clone). The screen reads it as a question too;
/// on a pane expected to open at it, before the CLI was ready, it is not a person's
/// ([`super::decision::Detector::expecting_start_dialog`]): the worker chooses it with key
/// presses checked on the screen, under this label only
/// ([`crate::app::local_panes::Typist::choose_labelled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartChoice {
    pub option: u32,
    pub label: &'static str,
}

/// A screen rule that matched, and the line (colour codes stripped) it matched on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    pub rule: &'static str,
    pub line: String,
}

/// The first line of `live` that `test` holds for, as rule `rule`'s match.
fn first(live: &[&str], rule: &'static str, test: impl Fn(&str) -> bool) -> Option<Matched> {
    live.iter().find(|l| test(l)).map(|l| Matched { rule, line: l.trim().to_owned() })
}

/// The first line of `live` holding one of `needles`.
fn first_containing(live: &[&str], rule: &'static str, needles: &[&str]) -> Option<Matched> {
    first(live, rule, |l| needles.iter().any(|n| l.contains(n)))
}

/// The first line holding `needle` in any case.
fn first_containing_ci(live: &[&str], rule: &'static str, needle: &str) -> Option<Matched> {
    first(live, rule, |l| l.to_lowercase().contains(needle))
}

/// Reads `text` (a capture, with or without escape codes) with the provider's rules.
pub fn read(rules: ScreenRules, text: &str, ctx: &ReadContext) -> ScreenReading {
    let plain = super::ansi::strip(text);
    let lines: Vec<&str> = plain.lines().map(str::trim_end).collect();
    let layout = match rules {
        ScreenRules::ClaudeCode => claude::LAYOUT,
        ScreenRules::Codex => codex::LAYOUT,
        ScreenRules::Gemini => gemini::LAYOUT,
        ScreenRules::Generic => Layout {
            prompts: &[],
            bare_prompt: false,
            bullets: &[],
            hint_above_prompt: false,
            composer_hints: &[],
            starting: None,
        },
    };
    let input_area = layout.input_area(&lines);
    let (region, below) = lines.split_at(input_area.unwrap_or(lines.len()));
    let at_prompt = (layout.prompts.is_empty() || input_area.is_some())
        && !layout.starting.is_some_and(|starting| starting(region));
    let mut hasher = std::hash::DefaultHasher::new();
    // Trailing blank lines come and go as the input area grows; they are not news.
    let trimmed = region.iter().rposition(|l| !l.is_empty()).map_or(&region[..0], |last| &region[..=last]);
    trimmed.hash(&mut hasher);
    let region_hash = hasher.finish();
    let live: Vec<&str> = layout.live(region).iter().map(|l| content(l)).collect();
    let marks = match rules {
        ScreenRules::ClaudeCode => claude::marks(&live, below, ctx),
        ScreenRules::Codex => codex::marks(&live, ctx),
        ScreenRules::Gemini => gemini::marks(&live, ctx),
        ScreenRules::Generic => Marks::default(),
    };
    let mut reading = marks.into_reading(region_hash, at_prompt);
    if matches!(reading.activity, Some(Activity::Permission | Activity::Question)) {
        reading.asked = super::prompt::asked(&plain);
    }
    reading
}

/// What one provider's rules found in the live region.
#[derive(Debug, Default)]
struct Marks {
    busy: Option<Matched>,
    permission: Option<Matched>,
    question: Option<Matched>,
    usage_limit: Option<DateTime<Utc>>,
    error: Option<String>,
    fatal: Option<String>,
    start_choice: Option<StartChoice>,
}

impl Marks {
    fn into_reading(self, region_hash: u64, at_prompt: bool) -> ScreenReading {
        let (activity, matched) = if self.permission.is_some() {
            (Some(Activity::Permission), self.permission)
        } else if self.question.is_some() {
            (Some(Activity::Question), self.question)
        } else if self.busy.is_some() {
            (Some(Activity::Working), self.busy)
        } else if self.usage_limit.is_some() || self.error.is_some() {
            (Some(Activity::Idle), None)
        } else {
            (None, None)
        };
        // A message shown while the provider is still busy (retrying) is not final.
        let error = if activity == Some(Activity::Working) { None } else { self.error };
        ScreenReading {
            activity,
            usage_limit: self.usage_limit,
            error,
            fatal: self.fatal,
            at_prompt,
            region_hash,
            matched,
            asked: None,
            start_choice: self.start_choice,
        }
    }
}

/// How a provider lays out its screen.
struct Layout {
    /// Characters that open the input line (`>` `❯` `›` `▌`).
    prompts: &'static [char],
    /// The input line may stand alone near the bottom, without a box or rules (Codex).
    bare_prompt: bool,
    /// Characters that open a transcript entry; the live region starts at the last one.
    bullets: &'static [char],
    /// A hint line and a blank one may stand between the input area's rule and its prompt
    /// (Gemini 0.61: `Shift+Tab to accept edits`).
    hint_above_prompt: bool,
    /// A bare prompt is the composer only with one of these in its footer (Codex hides its
    /// composer while a turn starts, leaving the user's echoed `›` line last on the screen).
    composer_hints: &'static [&'static str],
    /// Whether what stands above the input area says the CLI is still starting, its input area
    /// drawn but not yet taking keys (Gemini CLI before its configuration is loaded).
    starting: Option<fn(&[&str]) -> bool>,
}

impl Layout {
    /// The index of the first line of the input area (its top border or rule, or the bare
    /// prompt line), searching from the bottom; `None` when none is drawn (a dialog replaced it).
    fn input_area(&self, lines: &[&str]) -> Option<usize> {
        if self.prompts.is_empty() {
            return None;
        }
        let framed = (0..lines.len().saturating_sub(1)).rev().find(|&i| {
            let reach = if self.hint_above_prompt { 3 } else { 1 };
            let prompt_at = (i + 1..=i + reach).take_while(|&p| p < lines.len()).find(|&p| self.is_prompt(lines[p]));
            (is_box_top(lines[i]) || is_rule(lines[i])) && prompt_at.is_some_and(|p| near_bottom(lines, p))
        });
        if framed.is_some() || !self.bare_prompt {
            return framed;
        }
        // A bare prompt is the input only with at most a few footer lines under it; earlier
        // prompt-looking lines are the user's messages echoed in the transcript.
        (0..lines.len())
            .rev()
            .take_while(|&i| lines[i + 1..].iter().filter(|l| !l.trim().is_empty()).count() <= 3)
            .find(|&i| self.is_prompt(lines[i]))
            .filter(|&i| {
                self.composer_hints.is_empty()
                    || lines[i + 1..].iter().any(|l| self.composer_hints.iter().any(|h| l.contains(h)))
            })
    }

    fn is_prompt(&self, line: &str) -> bool {
        let text = content(line);
        let mut chars = text.chars();
        match chars.next() {
            Some(c) if self.prompts.contains(&c) => {
                let rest = chars.as_str();
                // Claude Code 2.1 draws `❯` and a no-break space.
                (rest.is_empty() || rest.starts_with(char::is_whitespace)) && option(text).is_none()
            }
            _ => false,
        }
    }

    /// The lines from the last transcript bullet (inclusive) to the end of `region`.
    fn live<'a>(&self, region: &'a [&'a str]) -> &'a [&'a str] {
        let start = region
            .iter()
            .rposition(|l| {
                let text = content(l);
                text.chars().next().is_some_and(|c| self.bullets.contains(&c)) && option(text).is_none()
            })
            .unwrap_or(0);
        &region[start..]
    }
}

/// How many footer lines (mode, hints, model, context left) may follow the input area.
const FOOTER_LINES: usize = 4;

/// Whether the input area whose first line is `lines[from]` is followed by no more than a footer:
/// a framed prompt-looking line higher up is a message echoed in the transcript.
fn near_bottom(lines: &[&str], from: usize) -> bool {
    let close = lines[from..]
        .iter()
        .position(|l| is_rule(l) || l.trim_start().starts_with('╰'))
        .map_or(lines.len(), |p| from + p + 1);
    lines[close..].iter().filter(|l| !l.trim().is_empty()).count() <= FOOTER_LINES
}

/// A line without its box borders and surrounding blanks.
fn content(line: &str) -> &str {
    line.trim().trim_start_matches(['│', '┃']).trim_end_matches(['│', '┃']).trim()
}

fn is_rule(line: &str) -> bool {
    let t = line.trim();
    t.chars().filter(|&c| c == '─' || c == '━').count() >= 10 && t.chars().all(|c| c == '─' || c == '━')
}

fn is_box_top(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('╭') && t.ends_with('╮')
}

/// A numbered option of a selection dialog: `❯ 1. Yes`, `  2. No`, `● 1. Allow once`.
/// Returns whether the cursor is on it, and its text.
fn option(text: &str) -> Option<(bool, &str)> {
    numbered(text).map(|(cursor, _, label)| (cursor, label))
}

/// [`option`] with its number.
fn numbered(text: &str) -> Option<(bool, u32, &str)> {
    let trimmed = text.trim_start();
    let rest = trimmed.trim_start_matches(['❯', '›', '●', '○', '▶', '>', '▌', '→']);
    let cursor = rest.len() != trimmed.len();
    let rest = rest.trim_start();
    let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 || digits > 2 {
        return None;
    }
    let label = rest[digits..].strip_prefix(". ")?;
    Some((cursor, rest[..digits].parse().ok()?, label.trim()))
}

/// The number of the option of `live`'s dialog that says `label`.
fn option_saying(live: &[&str], label: &str) -> Option<u32> {
    live.iter().filter_map(|l| numbered(l)).find(|(_, _, said)| *said == label).map(|(_, number, _)| number)
}

/// A dialog of numbered options with a cursor on one of them: the option under the cursor.
fn selection(live: &[&str]) -> Option<Matched> {
    let options: Vec<(bool, &str)> = live.iter().filter_map(|l| option(l)).collect();
    if options.len() < 2 {
        return None;
    }
    first(live, "selection dialog", |l| option(l).is_some_and(|(cursor, _)| cursor))
}

/// An option that says yes (`1. Yes`, `1. Yes, allow once`, `1. Yes, proceed (y)`).
fn has_yes_option(live: &[&str]) -> bool {
    live.iter().filter_map(|l| option(l)).any(|(_, label)| label.starts_with("Yes"))
}

/// The first line of `lines` holding one of `needles`, without transcript marks and box
/// borders: the provider's own words, for the agent's failure reason.
fn words_of(lines: &[&str], needles: &[&str]) -> Option<String> {
    let i = lines.iter().position(|l| needles.iter().any(|n| l.contains(n)))?;
    let first = lines[i]
        .trim_start_matches(|c: char| "⎿■✕⏺●│".contains(c) || c.is_whitespace())
        .trim_end_matches(|c: char| c == '│' || c.is_whitespace());
    Some(first.to_owned())
}

/// The reset time of the usage-limit message on line `i` of `live`, reading `wrapped` more lines
/// for messages the terminal wrapped.
fn limit_at(live: &[&str], i: usize, wrapped: usize, ctx: &ReadContext) -> DateTime<Utc> {
    let text = live[i..(i + 1 + wrapped).min(live.len())].join(" ");
    super::reset::reset_time(&text, ctx.now, ctx.zone).unwrap_or(ctx.now + super::reset::UNKNOWN_RESET_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_recognised_with_or_without_a_cursor() {
        assert_eq!(option("❯ 1. Yes"), Some((true, "Yes")));
        assert_eq!(option("  2. Yes, and don't ask again"), Some((false, "Yes, and don't ask again")));
        assert_eq!(option("● 1. Yes, allow once"), Some((true, "Yes, allow once")));
        assert_eq!(option("› 1. Yes, proceed (y)"), Some((true, "Yes, proceed (y)")));
        assert_eq!(option("❯ fix the tests"), None);
        assert_eq!(option("2024. A year"), None);
        assert_eq!(option("1.5 seconds"), None);
    }

    #[test]
    fn a_framed_prompt_high_up_is_transcript_not_the_input_area() {
        let ctx = ReadContext { now: "2026-11-22T10:00:00Z".parse().unwrap(), zone: Tz::UTC };
        let echo = ["╭────────────────────╮", "│ > fix the tests    │", "╰────────────────────╯"];
        let dialog = ["✦ I'll delete it.", " Allow execution of: 'rm'?", " ● 1. Yes, allow once", "   2. No (esc)"];
        let footer = ["", "~/src (main)   gemini-2.5-pro (97% context left)"];
        let screen = [&echo[..], &dialog[..], &footer[..]].concat().join("\n");
        assert_eq!(read(ScreenRules::Gemini, &screen, &ctx).activity, Some(Activity::Permission));
        let idle = [&dialog[..1], &echo[..], &footer[..]].concat().join("\n");
        assert_eq!(read(ScreenRules::Gemini, &idle, &ctx).activity, None);
    }

    #[test]
    fn a_reading_names_the_rule_that_decided_it_and_the_line_it_matched() {
        let ctx = ReadContext { now: "2026-11-22T10:00:00Z".parse().unwrap(), zone: Tz::UTC };
        let fixture = |name: &str| {
            let path = format!("{}/tests/fixtures/screens/claude/{name}", env!("CARGO_MANIFEST_DIR"));
            read(ScreenRules::ClaudeCode, &std::fs::read_to_string(path).unwrap(), &ctx).matched
        };
        let matched = |rule: &'static str, line: &str| Some(Matched { rule, line: line.to_owned() });
        assert_eq!(fixture("permission.txt"), matched("permission dialog", "Do you want to proceed?"));
        assert_eq!(
            fixture("working.txt"),
            matched("spinner", "✻ Running the input corpus again… (1m 12s · ↓ 3.4k tokens · esc to interrupt)")
        );
        assert_eq!(fixture("question.txt").map(|m| m.rule), Some("selection dialog"));
        assert_eq!(fixture("idle.txt"), None, "no marker, no rule: idle comes from two readings");
    }

    #[test]
    fn rules_names_round_trip() {
        for rules in ScreenRules::ALL {
            assert_eq!(rules.as_str().parse::<ScreenRules>(), Ok(rules));
        }
        assert!("vim".parse::<ScreenRules>().is_err());
        assert_eq!("shell".parse::<ScreenRules>(), Ok(ScreenRules::Generic), "the older name");
    }
}
