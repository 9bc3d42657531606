//! A branch's diff as the wish page shows it: each file's patch cut into lines with their old and
//! new line numbers (syntax kept plain), each line named `path:line` so a person's comment on it
//! can say where it is; and a person's review comments put together as one review's notes.

use crate::git::branches::FileChange;

/// The most diff lines one page shows; past it, files are listed with their counts only.
pub const MAX_LINES: usize = 5_000;

/// One file of the diff.
pub struct DiffFile {
    pub path: String,
    /// `+12` / `−3`, or `binary`.
    pub added: String,
    pub removed: String,
    pub lines: Vec<DiffLine>,
    /// Its lines were not shown: the page already showed [`MAX_LINES`].
    pub cut: bool,
}

/// One line of a file's patch.
pub struct DiffLine {
    /// `add`, `del`, `ctx`, `hunk` (an `@@` header) or `meta` (`\ No newline…`, `Binary files…`).
    pub kind: &'static str,
    pub old: Option<u32>,
    pub new: Option<u32>,
    pub text: String,
    /// Where a comment on this line points (`src/a.rs:12`); empty for headers.
    pub at: String,
}

/// The files of a diff, at most [`MAX_LINES`] lines shown in all.
pub fn files(changes: Vec<FileChange>) -> Vec<DiffFile> {
    let mut budget = MAX_LINES;
    changes
        .into_iter()
        .map(|change| {
            let binary = change.added.is_none();
            let mut lines = lines(&change.path, &change.patch);
            let cut = lines.len() > budget;
            if cut {
                lines.clear();
            }
            budget = budget.saturating_sub(lines.len());
            DiffFile {
                added: if binary { "binary".to_owned() } else { format!("+{}", change.added.unwrap_or(0)) },
                removed: if binary { String::new() } else { format!("−{}", change.removed.unwrap_or(0)) },
                path: change.path,
                lines,
                cut,
            }
        })
        .collect()
}

/// The lines of one file's patch from its first hunk on (the `diff --git`/`index`/`---`/`+++`
/// header says nothing the page does not show), or its notes when it has no hunk (binary).
fn lines(path: &str, patch: &str) -> Vec<DiffLine> {
    let mut out = Vec::new();
    let (mut old, mut new) = (0u32, 0u32);
    let mut in_hunk = false;
    for text in patch.lines().skip(1) {
        let line = |kind, o, n, at: String| DiffLine { kind, old: o, new: n, text: text.to_owned(), at };
        if let Some((o, n)) = hunk_start(text) {
            (old, new, in_hunk) = (o, n, true);
            out.push(line("hunk", None, None, String::new()));
        } else if !in_hunk {
            if text.starts_with("Binary files") {
                out.push(line("meta", None, None, String::new()));
            }
        } else if text.starts_with('+') {
            out.push(line("add", None, Some(new), format!("{path}:{new}")));
            new += 1;
        } else if text.starts_with('-') {
            out.push(line("del", Some(old), None, format!("{path}:{old} (removed line)")));
            old += 1;
        } else if text.starts_with('\\') {
            out.push(line("meta", None, None, String::new()));
        } else {
            out.push(line("ctx", Some(old), Some(new), format!("{path}:{new}")));
            (old, new) = (old + 1, new + 1);
        }
    }
    out
}

/// `@@ -12,3 +14,5 @@ …` → `(12, 14)`.
fn hunk_start(text: &str) -> Option<(u32, u32)> {
    let rest = text.strip_prefix("@@ -")?;
    let (old, rest) = rest.split_once(" +")?;
    let new = rest.split_once(" @@")?.0;
    let first = |range: &str| range.split(',').next().and_then(|n| n.parse().ok());
    Some((first(old)?, first(new)?))
}

/// A person's review as one set of notes: their general notes, then each line comment under
/// its `file:line`, in the order they were written.
pub fn review_notes(general: &str, comments: &[(String, String)]) -> String {
    let mut notes = general.trim().to_owned();
    let comments: Vec<_> = comments.iter().filter(|(_, body)| !body.trim().is_empty()).collect();
    if !comments.is_empty() {
        if !notes.is_empty() {
            notes.push_str("\n\n");
        }
        notes.push_str("Comments on lines:");
        for (at, body) in comments {
            notes.push_str(&format!("\n- {}: {}", at.trim(), body.trim()));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &str = "diff --git a/src/a.rs b/src/a.rs\nindex 1..2 100644\n--- a/src/a.rs\n+++ b/src/a.rs\n\
                         @@ -3,3 +3,3 @@ fn main() {\n keep\n-old\n+new\n tail\n\\ No newline at end of file\n";

    #[test]
    fn lines_carry_their_numbers_and_where_a_comment_on_them_points() {
        let lines = lines("src/a.rs", PATCH);
        let kinds: Vec<_> = lines.iter().map(|l| l.kind).collect();
        assert_eq!(kinds, ["hunk", "ctx", "del", "add", "ctx", "meta"]);
        assert_eq!((lines[1].old, lines[1].new, lines[1].at.as_str()), (Some(3), Some(3), "src/a.rs:3"));
        assert_eq!((lines[2].old, lines[2].at.as_str()), (Some(4), "src/a.rs:4 (removed line)"));
        assert_eq!((lines[3].new, lines[3].at.as_str()), (Some(4), "src/a.rs:4"));
        assert_eq!((lines[4].old, lines[4].new), (Some(5), Some(5)));
        assert_eq!(lines[3].text, "+new");
    }

    #[test]
    fn a_long_diff_shows_its_first_lines_and_lists_the_rest() {
        let big = FileChange {
            path: "big.txt".into(),
            added: Some(6000),
            removed: Some(0),
            patch: format!("diff --git a/big.txt b/big.txt\n@@ -0,0 +1,6000 @@\n{}", "+x\n".repeat(6000)),
        };
        let small = FileChange { path: "a.rs".into(), added: Some(1), removed: Some(1), patch: PATCH.into() };
        let binary = FileChange { path: "logo.png".into(), added: None, removed: None, patch: String::new() };
        let files = files(vec![small, big, binary]);
        assert!(!files[0].cut && files[0].lines.len() == 6);
        assert!(files[1].cut && files[1].lines.is_empty(), "past the budget");
        assert_eq!((files[1].added.as_str(), files[1].removed.as_str()), ("+6000", "−0"));
        assert_eq!(files[2].added, "binary");
    }

    #[test]
    fn a_review_puts_every_line_comment_under_its_place() {
        let comments = vec![
            ("src/a.rs:4".to_owned(), " Use a constant. ".to_owned()),
            ("src/b.rs:9".to_owned(), "  ".to_owned()),
            ("README.md:1".to_owned(), "Typo".to_owned()),
        ];
        assert_eq!(
            review_notes("Close, but not yet.", &comments),
            "Close, but not yet.\n\nComments on lines:\n- src/a.rs:4: Use a constant.\n- README.md:1: Typo"
        );
        assert_eq!(review_notes(" ", &comments[..1]), "Comments on lines:\n- src/a.rs:4: Use a constant.");
        assert_eq!(review_notes("Fine", &[]), "Fine");
    }
}
