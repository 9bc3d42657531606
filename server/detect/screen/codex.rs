//! Codex CLI's screen.
//!
//! ```text
//! • Ran cargo test                                  ← last transcript bullet
//!   └ test result: ok. 12 passed
//! • Working (12s • esc to interrupt)                ← status line (the first `•` is the spinner)
//!
//! › Summarize recent commits                        ← composer: a bare `›` line (`▌` before 0.40)
//!
//!   ? for shortcuts                100% context left ← footer
//! ```
//! Approvals (`Would you like to run the following command?` with `› 1. Yes, proceed (y)`; before
//! 0.40 `Allow command?` with `▌ Yes  Always  No`) and questions (`Question 1/2`, numbered
//! options, a footer that still says `esc to interrupt`) replace the composer.

use super::{
    first_containing, first_containing_ci, has_yes_option, limit_at, option_saying, selection, words_of, Layout, Marks,
    Matched, ReadContext, StartChoice,
};

pub(super) const LAYOUT: Layout = Layout {
    prompts: &['›', '▌'],
    bare_prompt: true,
    bullets: &['•', '■', '›'],
    hint_above_prompt: false,
    composer_hints: &["for shortcuts", "⏎ send", "context left"],
    starting: None,
};

/// The sign-in chooser Codex starts at without a login (0.169: "Welcome to Codex … Choose how
/// you want to use Codex." / `> 1. Sign in with ChatGPT`).
const SIGN_IN: &[&str] = &["Choose how you want to use Codex", "Sign in with ChatGPT"];

/// The dialog 0.169 starts at in a folder its configuration marks untrusted, as Switchyard marks
/// every clone (`worker::provider_setup::codex`): "Folder access", the folder, what stays
/// disabled, then `› 1. Open restricted` / `2. Back to Agent Command Center`. Restricted is
/// the point: the clone's `.codex/` stays disabled.
const FOLDER_ACCESS: &str = "Folder access";
const OPEN_RESTRICTED: &str = "Open restricted";

const APPROVALS: &[&str] = &[
    "Would you like to run the following command",
    "Would you like to make the following edits",
    "Would you like to grant these permissions",
    "Allow command?",
    "Apply changes?",
    "Allow edits?",
];

pub(super) fn marks(live: &[&str], ctx: &ReadContext) -> Marks {
    // The user's prompt as the last transcript entry is a turn with no reply drawn yet: 0.169
    // shows only that (no status line, no composer) for its first seconds offline.
    let submitted = live
        .first()
        .filter(|l| l.starts_with('›'))
        .map(|l| Matched { rule: "prompt submitted", line: l.trim().to_owned() });
    let busy = submitted.or_else(|| first_containing_ci(live, "esc to interrupt", "esc to interrupt"));
    let has_yes = has_yes_option(live) || live.iter().any(|l| l.trim_start_matches(['▌', ' ']).starts_with("Yes"));
    let permission = has_yes.then(|| first_containing(live, "approval dialog", APPROVALS)).flatten();
    let folder_access = live.iter().any(|l| l.trim() == FOLDER_ACCESS);
    let start_choice = folder_access
        .then(|| option_saying(live, OPEN_RESTRICTED))
        .flatten()
        .map(|option| StartChoice { option, label: OPEN_RESTRICTED });
    // The dialog reads as a question too: only the detector knows whether the pane was expected
    // to open at it.
    let question = if permission.is_none() { selection(live) } else { None };
    let limit_line = live.iter().position(|l| l.contains("hit your usage limit"));
    let usage_limit = limit_line.map(|i| limit_at(live, i, 2, ctx));
    let error = live
        .iter()
        .enumerate()
        .find(|(i, l)| l.starts_with('■') && Some(*i) != limit_line && !l.contains("Conversation interrupted"))
        .map(|(_, l)| l.trim_start_matches(['■', ' ']).to_string());
    // The chooser's heading and its first choice say what is missing.
    let fatal = words_of(live, SIGN_IN).map(|heading| match words_of(live, &["Sign in with ChatGPT"]) {
        Some(choice) if choice != heading => format!("{heading} {}", choice.trim_start_matches(['>', '›', ' '])),
        _ => heading,
    });
    Marks { busy, permission, question, usage_limit, error, fatal, start_choice }
}
