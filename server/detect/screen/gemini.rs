//! Gemini CLI's screen.
//!
//! ```text
//! ✦ I'll run the tests.                                  ← last transcript bullet
//! ⠏ Running the test suite (esc to cancel, 3s)           ← braille spinner, `esc to cancel`
//! ╭──────────────────────────────────────────────────╮ ← input box
//! │ >   Type your message or @path/to/file           │
//! ╰──────────────────────────────────────────────────╯
//! ~/src/app (main*)   no sandbox   gemini-2.5-pro (98% context left)
//! ```
//! Tool confirmations are boxes (`Allow execution of: 'rm'?`, `Apply this change?`, `● 1. Yes,
//! allow once`) that replace the input box; quota errors open a dialog (`Usage limit reached for
//! all Pro models.` / `Access resets at 11:00 AM GMT+2.` / `● 1. Keep trying`).

use super::{
    first, first_containing, first_containing_ci, has_yes_option, limit_at, selection, words_of, Layout, Marks,
    ReadContext,
};

pub(super) const LAYOUT: Layout = Layout {
    prompts: &['>', '!', '*'],
    bare_prompt: false,
    bullets: &['✦', '✕'],
    hint_above_prompt: true,
    composer_hints: &[],
    starting: Some(initializing),
};

/// The authentication dialog Gemini CLI starts at without a login or key (0.61: "Get started /
/// How would you like to authenticate for this project? … No authentication method selected.").
const SIGN_IN: &[&str] = &["No authentication method selected", "How would you like to authenticate"];

const APPROVALS: &[&str] = &["Allow execution", "Apply this change?", "Allow modification", "Do you want to proceed?"];

const QUOTA: &[&str] = &["Usage limit reached", "exhausted your capacity", "Quota exceeded", "quota limit"];

pub(super) fn marks(live: &[&str], ctx: &ReadContext) -> Marks {
    let busy = first_containing_ci(live, "esc to cancel", "esc to cancel")
        .or_else(|| first(live, "spinner", is_braille_spinner));
    // 0.61's options are `1. Allow once` / `2. Allow for this session` / `3. No, suggest
    // changes (esc)` under `Allow execution of [Shell]?`: no option starts with "Yes".
    let permission = (has_yes_option(live) || has_allow_option(live))
        .then(|| first_containing(live, "approval dialog", APPROVALS))
        .flatten()
        .or_else(|| first_containing(live, "allow option", &["Yes, allow once", "Yes, allow always"]));
    let question = if permission.is_none() { selection(live) } else { None };
    let limit_line = live.iter().position(|l| QUOTA.iter().any(|q| l.contains(q)));
    let usage_limit = limit_line.map(|i| limit_at(live, i, 2, ctx));
    let error = match limit_line {
        Some(_) => None,
        None => live.iter().find(|l| l.starts_with('✕')).map(|l| l.trim_start_matches(['✕', ' ']).to_string()),
    };
    let fatal = words_of(live, SIGN_IN);
    Marks { busy, permission, question, usage_limit, error, fatal, start_choice: None }
}

/// Whether Gemini CLI is still initializing its configuration: it draws its input area at once,
/// and above it nothing but startup warnings (`⚠ Warning: …`) and its composer's `? for
/// shortcuts` until then (0.61's `MainContent`, its header and transcript, is empty until
/// `isConfigInitialized`). It is not at its prompt yet: a session it resumes is loaded only
/// then, its input line hidden meanwhile and the keys pressed into it lost (an Enter after a
/// pasted message was, and its "Resuming session…" read as the turn the message started).
fn initializing(region: &[&str]) -> bool {
    let composers = |l: &str| l.starts_with('⚠') || l == "? for shortcuts";
    region.iter().map(|l| l.trim()).filter(|l| !l.is_empty()).all(composers)
}

/// A numbered `Allow once` option (Gemini CLI 0.61's tool confirmations).
fn has_allow_option(live: &[&str]) -> bool {
    live.iter().any(|l| {
        let l = l.trim_start_matches(|c: char| c == '│' || c == '●' || c.is_whitespace());
        l.strip_prefix("1. ").is_some_and(|rest| rest.starts_with("Allow once"))
    })
}

/// `⠏ Thinking… (esc to cancel, 3s)`: Gemini's spinner frames are braille patterns.
fn is_braille_spinner(line: &str) -> bool {
    let mut chars = line.chars();
    chars.next().is_some_and(|c| ('\u{2800}'..='\u{28ff}').contains(&c)) && chars.next() == Some(' ')
}
