//! Claude Code's screen.
//!
//! ```text
//! ⏺ Bash(cargo test)                                  ← last transcript bullet: live region starts
//!   ⎿  Running…
//! ✻ Compiling… (45s · ↓ 2.1k tokens · esc to interrupt) ← spinner: glyph, word, `…`
//! ───────────────────────────────────────────────────── ← input area (v2); v1 draws ╭─╮│ > │╰─╯
//! ❯ text the user is typing
//! ─────────────────────────────────────────────────────
//!   ⏵⏵ accept edits on (shift+tab to cycle)            ← footer
//! ```
//! When a permission or question dialog is open, it replaces the input area.

use std::sync::LazyLock;

use regex::Regex;

use super::{
    first, first_containing, first_containing_ci, has_yes_option, limit_at, selection, words_of, Layout, Marks,
    ReadContext,
};

/// `!` opens the input line in bash mode.
pub(super) const LAYOUT: Layout = Layout {
    prompts: &['>', '❯', '!'],
    bare_prompt: false,
    // A prompt echoed in the transcript opens an entry too: a limit or error drawn before it
    // (the one a resumed session stopped at) is not this turn's.
    bullets: &['⏺', '●', '>', '❯'],
    hint_above_prompt: false,
    composer_hints: &[],
    starting: None,
};

/// What stops Claude Code until the user gives it something: the first start's "Unable to
/// connect to Anthropic services" (onboarding with no network), and answers to a turn.
const FATAL: &[&str] = &[
    "Unable to connect to Anthropic services",
    "Invalid API key",
    "Credit balance is too low",
    "OAuth token has expired",
];

/// 2.1.x answers a turn with `⎿  Not logged in · Please run /login` and says `Not logged in ·
/// run /login` in its footer while that holds. An old answer in a resumed transcript, after the
/// user logged in, is not news: only with the footer does it count.
const NOT_LOGGED_IN: &str = "Please run /login";
const FOOTER_NOT_LOGGED_IN: &str = "Not logged in";

/// The glyphs Claude Code's spinner cycles through.
const SPINNER: &[char] = &['·', '✢', '✳', '✶', '✻', '✽', '*', '∗'];

static TOKENS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"[↑↓]\s*[\d.,]+k?\s*tokens").expect("valid regex"));

/// `below`: the input area and the footer.
pub(super) fn marks(live: &[&str], below: &[&str], ctx: &ReadContext) -> Marks {
    let busy = first(live, "spinner", is_spinner)
        .or_else(|| first(live, "tool running", is_tool_running))
        .or_else(|| first(live, "token counter", |l| TOKENS.is_match(l)))
        .or_else(|| first_containing_ci(live, "esc to interrupt", "esc to interrupt"))
        .or_else(|| first_containing(live, "retrying", &["· Retrying in", "· retrying in"]));
    let permission = has_yes_option(live)
        .then(|| first_containing(live, "permission dialog", &["Do you want to", "Would you like to proceed"]))
        .flatten()
        .or_else(|| first_containing(live, "allow option", &["Yes, allow once", "Yes, allow always"]));
    let question = if permission.is_none() { selection(live) } else { None };
    let usage_limit = live
        .iter()
        .position(|l| is_usage_limit(l))
        .map(|i| limit_at(live, i, 1, ctx))
        .or_else(|| live.iter().any(|l| l.contains(RATE_LIMITED)).then(|| ctx.now + API_RATE_LIMIT_WAIT));
    let error = live
        .iter()
        .find(|l| (l.contains("API Error") && !l.contains("Retrying")) || l.starts_with("Error:"))
        .map(|l| l.trim_start_matches(['⏺', '●', '⎿', ' ']).to_string());
    let logged_out = below.iter().any(|l| l.contains(FOOTER_NOT_LOGGED_IN));
    let fatal = words_of(live, FATAL).or_else(|| logged_out.then(|| words_of(live, &[NOT_LOGGED_IN])).flatten());
    Marks { busy, permission, question, usage_limit, error, fatal, start_choice: None }
}

/// `✻ Thinking…`, `· Crafting… (12s · ↑ 1.2k tokens · esc to interrupt)`; not the turn summary
/// `✻ Worked for 2m 3s`, which has no ellipsis.
fn is_spinner(line: &str) -> bool {
    let mut chars = line.chars();
    let Some(glyph) = chars.next() else { return false };
    let rest = chars.as_str();
    SPINNER.contains(&glyph)
        && rest.starts_with(char::is_whitespace)
        && rest.trim_start().starts_with(|c: char| c.is_alphabetic())
        && rest.split_once('…').is_some_and(|(_, after)| after.is_empty() || after.trim_start().starts_with('('))
}

/// A tool still running: `⎿  Running…`, `⎿  Waiting…`, a bash-mode command `⎿  Running… (2s)`.
fn is_tool_running(line: &str) -> bool {
    line.starts_with('⎿')
        && line.split_once('…').is_some_and(|(_, after)| after.is_empty() || after.trim_start().starts_with('('))
}

/// With an API key, an organisation's rate limit (a 429 with `retry-after` longer than Claude
/// Code waits on its own; a short one it retries, `✻ API error · retrying in 4s · attempt
/// 1/10`): `● API Error: Request rejected (429) · This request would exceed the rate limit for
/// your organization of 50 requests per minute. … try again later.` The turn has stopped
/// (`❯ Resend your message to try again`); the words name no reset.
const RATE_LIMITED: &str = "Request rejected (429)";

/// How long an agent waits at an API key's rate limit: the API's limits are per minute and
/// replenish continuously, so a minute on it goes again (and, limited still, waits again).
const API_RATE_LIMIT_WAIT: chrono::Duration = chrono::Duration::minutes(1);

/// `You've hit your limit · resets 3pm`, `You've hit your 5-hour limit · resets 6:48pm (UTC)`
/// (2.1.332, a subscription's 429), `5-hour limit reached ∙ resets 1am`, `Claude usage limit
/// reached.`; not the warnings (`Approaching usage limit`, `You've used 90% of your weekly limit`).
fn is_usage_limit(line: &str) -> bool {
    HIT_YOUR_LIMIT.is_match(line) || line.contains("limit reached")
}

static HIT_YOUR_LIMIT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"hit your (?:[\w-]+ ){0,2}limit").expect("valid regex"));

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinner_lines_need_a_glyph_a_word_and_an_ellipsis() {
        assert!(is_spinner("✻ Thinking…"));
        assert!(is_spinner("· Crafting… (12s · ↑ 1.2k tokens · esc to interrupt)"));
        assert!(is_spinner("✶ Compacting conversation… (34s)"));
        assert!(!is_spinner("✻ Worked for 2m 3s"));
        assert!(!is_spinner("* a bullet point that ends in an ellipsis… and goes on"));
        assert!(!is_spinner("Thinking…"));
    }

    #[test]
    fn usage_warnings_are_not_limits() {
        assert!(is_usage_limit("You've hit your limit · resets 3pm (Europe/Berlin)"));
        assert!(is_usage_limit("You've hit your 5-hour limit · resets 6:48pm (UTC)"));
        assert!(is_usage_limit("You've hit your weekly limit · resets Dec 1, 9am (UTC)"));
        assert!(is_usage_limit("Claude usage limit reached. Your limit will reset at 3pm (America/New_York)."));
        assert!(!is_usage_limit("Approaching usage limit · resets at 10pm"));
        assert!(!is_usage_limit("You've used 91% of your weekly limit · resets Oct 9 at 10am"));
    }

    #[test]
    fn an_api_keys_rate_limit_waits_a_minute_and_its_retries_are_work() {
        let ctx = ReadContext { now: "2026-11-22T10:00:00Z".parse().unwrap(), zone: chrono_tz::Tz::UTC };
        let limited = ["● API Error: Request rejected (429) · This request would exceed the rate limit for your \
                        organization of 50 requests per minute."];
        let marks = marks(&limited, &[], &ctx);
        assert_eq!(marks.usage_limit, Some("2026-11-22T10:01:00Z".parse().unwrap()));
        let retrying = ["✻ API error · retrying in 4s · attempt 1/10"];
        let marks = super::marks(&retrying, &[], &ctx);
        assert!(marks.busy.is_some() && marks.usage_limit.is_none() && marks.error.is_none(), "{marks:?}");
    }
}
