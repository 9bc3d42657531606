//! What is typed in a pane's input line: the cursor's line as `capture-pane -e` gives it, without
//! dim text (the placeholder a TUI shows in an empty prompt, such as Claude Code's `Try "…"`),
//! escape codes and surrounding blanks. Delivery compares it before and after a paste and after
//! Enter; only equality matters, so the prompt glyph and box borders may stay in.

/// The typed text of one captured line (with SGR escapes).
pub fn typed(escaped_line: &str) -> String {
    let mut kept = String::with_capacity(escaped_line.len());
    let mut dim = false;
    let mut chars = escaped_line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            let mut params = String::new();
            let mut last = None;
            for p in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&p) {
                    last = Some(p);
                    break;
                }
                params.push(p);
            }
            if last == Some('m') {
                dim = sgr_dim(&params, dim);
            }
            continue;
        }
        if !dim {
            kept.push(c);
        }
    }
    super::ansi::strip(&kept).trim().to_owned()
}

/// Whether text is dim after the SGR parameters `params` (`2` sets it; `0`, `22` or none clear it).
fn sgr_dim(params: &str, mut dim: bool) -> bool {
    if params.is_empty() {
        return false;
    }
    for param in params.split(';') {
        match param {
            "0" | "" | "22" => dim = false,
            "2" => dim = true,
            _ => {}
        }
    }
    dim
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dim_placeholder_reads_as_an_empty_line() {
        assert_eq!(typed("\u{1b}[39m❯ \u{1b}[2mTry \"fix lint errors\"\u{1b}[22m  "), "❯");
        assert_eq!(typed("❯ "), "❯");
        assert_eq!(typed("\u{1b}[1m❯\u{1b}[0m fix the \u{1b}[31mtests\u{1b}[0m"), "❯ fix the tests");
        assert_eq!(typed("\u{1b}[2;33mdim\u{1b}[0mshown"), "shown");
    }
}
