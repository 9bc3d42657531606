//! The numbered choices of a prompt an agent is showing (a permission dialog, a question with
//! options), read from the bottom of its screen so a person can answer with one click, and
//! which one is highlighted: a menu is answered with key presses, checked on the screen
//! (`crate::app::agent_panes::choose`), never by typing its number as text.

use std::sync::LazyLock;

use regex::Regex;

/// `❯ 1. Yes`, `  2. No, and tell Claude…`, `› 1. Yes, proceed (y)`, `│ ● 1. Yes, allow once │`:
/// a box's edge, the highlight's marker, a number, a label.
static OPTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^[\s│]*([❯›>●]\s*)?(\d{1,2})\.\s+(\S.*?)[\s│]*$").expect("a valid pattern"));

/// How far up from the bottom a prompt's options may start.
const LOOK_BACK: usize = 30;

/// One choice: its number, what it says, and whether it is the highlighted one (Enter picks it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptOption {
    pub number: String,
    pub label: String,
    pub selected: bool,
}

/// Where the highlight is among `options`.
pub fn selected(options: &[PromptOption]) -> Option<usize> {
    options.iter().position(|o| o.selected)
}

/// The last run of options numbered 1, 2, 3, … near the bottom of the screen; empty when the
/// screen shows none. Lines between options (an option's description) are skipped.
pub fn options(screen: &str) -> Vec<PromptOption> {
    // From the last line with text: a TUI drawn at the top leaves the screen's bottom blank.
    let lines: Vec<&str> = screen.trim_end().lines().collect();
    let start = lines.len().saturating_sub(LOOK_BACK);
    let mut found: Vec<PromptOption> = Vec::new();
    for line in &lines[start..] {
        let Some(caps) = OPTION.captures(line) else { continue };
        let number = caps[2].to_owned();
        if number == "1" {
            found.clear();
        } else if number.parse::<usize>().ok() != Some(found.len() + 1) {
            continue;
        }
        found.push(PromptOption { number, label: label(&caps[3]).to_owned(), selected: caps.get(1).is_some() });
    }
    found
}

/// The most lines of what a prompt asks that are kept (those nearest its options).
const ASKED_LINES: usize = 8;

/// The longest line of what a prompt asks that is kept whole.
const ASKED_LINE_CHARS: usize = 300;

/// What the prompt whose options [`options`] reads asks, in the CLI's own words: the lines above
/// its first option (a dialog's title, the command or file, the question), without box edges and
/// blank lines, up to the dialog's top edge, a rule, or the blank gap that parts it from the
/// transcript. `None` when the screen shows no options.
pub fn asked(screen: &str) -> Option<String> {
    let lines: Vec<&str> = screen.trim_end().lines().collect();
    let start = lines.len().saturating_sub(LOOK_BACK);
    let options = options(screen);
    let first = options.first()?;
    // The last line that is option 1 (as `options` reads the last run).
    let at = (start..lines.len()).rev().find(|&i| {
        OPTION
            .captures(lines[i])
            .is_some_and(|caps| &caps[2] == first.number.as_str() && label(&caps[3]) == first.label)
    })?;
    let mut asked: Vec<String> = Vec::new();
    let mut blanks = 0;
    for line in lines[..at].iter().rev() {
        let raw = line.trim();
        // A box's top or bottom edge or a rule at the outer level ends the dialog.
        if raw.starts_with(['╭', '╰', '─', '┌', '└', '━']) {
            break;
        }
        let text = raw.trim_matches(|c: char| c == '│' || c == '┃' || c.is_whitespace());
        if !text.chars().any(char::is_alphanumeric) {
            // A blank line, or an inner box's edge or arrows: two blanks in a row part the
            // dialog from the transcript above it, once it has words.
            blanks += usize::from(text.is_empty());
            if blanks >= 2 && !asked.is_empty() && text.is_empty() {
                break;
            }
            continue;
        }
        blanks = 0;
        asked.push(text.chars().take(ASKED_LINE_CHARS).collect());
        if asked.len() == ASKED_LINES {
            break;
        }
    }
    asked.reverse();
    (!asked.is_empty()).then(|| asked.join("\n"))
}

/// An option's label without the description a CLI draws beside it in a column of its own
/// (Codex: `› 1. Retry up to 3 times  Deliver again after 200 ms.`): the label ends where a gap
/// of two or more spaces starts. A label never holds such a gap; a box's right edge is already
/// gone.
fn label(text: &str) -> &str {
    text.split("  ").next().unwrap_or(text).trim_end()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(path: &str) -> String {
        let root = env!("CARGO_MANIFEST_DIR");
        std::fs::read_to_string(format!("{root}/tests/fixtures/screens/{path}")).expect("fixture")
    }

    #[test]
    fn a_claude_permission_dialog_offers_its_three_answers() {
        let options = options(&screen("claude/permission.txt"));
        let labels: Vec<&str> = options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels[0], "Yes");
        assert_eq!(options.len(), 3, "{options:?}");
        assert_eq!(options[2].number, "3");
        assert_eq!(selected(&options), Some(0), "1. Yes is highlighted");
    }

    #[test]
    fn a_question_offers_its_options_without_their_descriptions() {
        let options = options(&screen("claude/question.txt"));
        let labels: Vec<&str> = options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["Retry up to 3 times", "Never retry", "Type something."]);
    }

    #[test]
    fn a_codex_question_offers_its_labels_without_the_description_column() {
        let options = options(&screen("codex/question.txt"));
        let labels: Vec<&str> = options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["Retry up to 3 times", "Never retry", "None of the above"]);
        assert_eq!(selected(&options), Some(0));
    }

    #[test]
    fn the_real_clis_questions_offer_the_options_asked_by_label_with_the_first_highlighted() {
        for fixture in [
            "claude/question-asked-2.1.332.txt",
            "codex/question-asked-0.169.0.txt",
            "gemini/question-asked-0.61.0.txt",
        ] {
            let options = options(&screen(fixture));
            let labels: Vec<&str> = options.iter().map(|o| o.label.as_str()).collect();
            assert_eq!(labels[..3], ["Red", "Blue", "Green"], "{fixture}: {options:?}");
            assert_eq!(selected(&options), Some(0), "{fixture}");
        }
    }

    #[test]
    fn a_codex_approval_is_read_too_and_a_working_screen_offers_nothing() {
        assert_eq!(options(&screen("codex/permission.txt"))[0].label, "Yes, proceed (y)");
        assert_eq!(selected(&options(&screen("codex/permission.txt"))), Some(0));
        assert!(options(&screen("claude/working.txt")).is_empty());
    }

    #[test]
    fn a_gemini_confirmation_in_its_box_is_read_with_its_highlight() {
        let options = options(&screen("gemini/permission.txt"));
        let labels: Vec<&str> = options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["Yes, allow once", "Yes, allow always ...", "No, suggest changes (esc)"]);
        assert_eq!(selected(&options), Some(0));
    }

    #[test]
    fn the_real_codex_and_gemini_cli_approval_menus_are_read_with_their_highlight_and_their_no() {
        // Codex 0.169 asking to run a command outside its sandbox (`require_escalated`).
        let codex = options(&screen("codex/permission-escalated-0.169.0.txt"));
        let labels: Vec<&str> = codex.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels.len(), 3, "{codex:?}");
        assert_eq!(labels[0], "Yes, proceed (y)");
        assert_eq!(labels[2], "No, and tell Codex what to do differently (esc)");
        assert_eq!(selected(&codex), Some(0));
        // Gemini CLI 0.61 asking to run a shell command, in its box.
        let gemini = options(&screen("gemini/permission-shell-allow-once-0.61.0.txt"));
        let labels: Vec<&str> = gemini.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["Allow once", "Allow for this session", "No, suggest changes (esc)"]);
        assert_eq!(selected(&gemini), Some(0));
    }

    #[test]
    fn what_a_prompt_asks_is_read_above_its_options_in_each_clis_words() {
        let asked = |path: &str| asked(&screen(path)).unwrap_or_default();
        assert_eq!(
            asked("claude/permission.txt"),
            "Bash command\nrm -rf target/debug/incremental\nRemove stale incremental build output\nDo you want to proceed?"
        );
        assert_eq!(asked("claude/question.txt"), "☐ Retries\nShould a failed input delivery be retried?");
        assert_eq!(asked("claude/question-asked-2.1.332.txt"), "☐ Choice\nWhich colour should claude-ask use?");
        assert_eq!(
            asked("claude/permission-edit-v1-box.txt").lines().last(),
            Some("Do you want to make this edit to input.rs?")
        );
        let codex = asked("codex/permission-escalated-0.169.0.txt");
        assert!(codex.starts_with("Would you like to run the following command?"), "{codex}");
        assert!(codex.ends_with("$ python3 -c \"open('no.txt', 'w').write('ran')\""), "{codex}");
        assert_eq!(
            asked("codex/question.txt"),
            "Question 1/1 (1 unanswered)\nShould a failed input delivery be retried?"
        );
        assert_eq!(
            asked("gemini/permission-shell-allow-once-0.61.0.txt"),
            "? Shell  touch outside-the-list.txt\ntouch outside-the-list.txt\nAllow execution of [Shell]?"
        );
        assert!(asked("gemini/permission.txt").ends_with("rm -rf target/debug/incremental\nAllow execution of: 'rm'?"));
        assert_eq!(
            asked("gemini/question-asked-0.61.0.txt"),
            "Answer Questions\nWhich colour should gemini-listed use?"
        );
        assert_eq!(asked("claude/working.txt"), "", "no options, nothing asked");
    }

    #[test]
    fn the_highlight_is_where_the_marker_is() {
        let screen = "Do you want to proceed?\n  1. Yes\n  2. Yes, and don't ask again\n❯ 3. No\n";
        assert_eq!(selected(&options(screen)), Some(2));
        assert_eq!(selected(&options("  1. Yes\n  2. No\n")), None, "a list, not a menu");
    }
}
