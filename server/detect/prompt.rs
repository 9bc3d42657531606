//! The numbered choices of a prompt an agent is showing (a permission dialog, a question with
//! options), read from the bottom of its screen so a person can answer with one click.

use std::sync::LazyLock;

use regex::Regex;

/// `❯ 1. Yes`, `  2. No, and tell Claude…`, `› 1. Yes, proceed (y)`: a marker, a number, a label.
static OPTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\s*(?:[❯›>]\s*)?(\d{1,2})\.\s+(\S.*?)\s*$").expect("a valid pattern"));

/// How far up from the bottom a prompt's options may start.
const LOOK_BACK: usize = 30;

/// One choice: what to type, and what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptOption {
    pub number: String,
    pub label: String,
}

/// The last run of options numbered 1, 2, 3, … near the bottom of the screen; empty when the
/// screen shows none. Lines between options (an option's description) are skipped.
pub fn options(screen: &str) -> Vec<PromptOption> {
    let lines: Vec<&str> = screen.lines().collect();
    let start = lines.len().saturating_sub(LOOK_BACK);
    let mut found: Vec<PromptOption> = Vec::new();
    for line in &lines[start..] {
        let Some(caps) = OPTION.captures(line) else { continue };
        let number = caps[1].to_owned();
        if number == "1" {
            found.clear();
        } else if number.parse::<usize>().ok() != Some(found.len() + 1) {
            continue;
        }
        found.push(PromptOption { number, label: caps[2].to_owned() });
    }
    found
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
    }

    #[test]
    fn a_question_offers_its_options_without_their_descriptions() {
        let options = options(&screen("claude/question.txt"));
        let labels: Vec<&str> = options.iter().map(|o| o.label.as_str()).collect();
        assert_eq!(labels, ["Retry up to 3 times", "Never retry", "Type something."]);
    }

    #[test]
    fn a_codex_approval_is_read_too_and_a_working_screen_offers_nothing() {
        assert_eq!(options(&screen("codex/permission.txt"))[0].label, "Yes, proceed (y)");
        assert!(options(&screen("claude/working.txt")).is_empty());
    }
}
