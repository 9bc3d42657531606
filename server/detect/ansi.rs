//! Turning raw pane text into plain text: escape sequences and control codes removed.
//!
//! `capture-pane -e` keeps SGR colours, and a raw `%output` stream carries cursor moves, OSC
//! titles and hyperlinks; none of it matters to the rules, and colour codes in the middle of a
//! word would break every pattern. Stripping is a small state machine over `char`s rather than a
//! regex so that a truncated sequence at the end of a capture cannot swallow the whole text.

/// `text` without ANSI escape sequences (CSI, OSC, DCS/SOS/PM/APC strings, two-byte escapes,
/// their 8-bit C1 forms) and without control characters other than `\n` and `\t` (`\r` goes,
/// so CRLF captures read like LF ones). Text with nothing to remove (a mirrored screen) is
/// returned as it is, without a copy.
pub fn strip(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                // Two-byte escapes (ESC 7, ESC =, ESC ( B …): the charset ones take one more.
                Some('(' | ')' | '*' | '+' | '#' | '%') => {
                    chars.next();
                }
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Parameters and intermediates (0x20–0x3f), then one final byte (0x40–0x7e).
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if ('\u{40}'..='\u{7e}').contains(&c) {
            return;
        }
        if !('\u{20}'..='\u{3f}').contains(&c) {
            // A malformed sequence: stop here rather than eat the text that follows.
            return;
        }
    }
}

/// A string terminated by BEL, ST (`ESC \`) or the 8-bit ST; a newline also ends it, so a
/// capture cut in the middle of a title does not hide the rest of the screen.
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                if chars.peek() == Some(&'\\') {
                    chars.next();
                }
                return;
            }
            '\n' => return,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::strip;

    #[test]
    fn colours_cursor_moves_titles_and_hyperlinks_are_removed() {
        let raw = "\x1b[1;38;5;208m✻\x1b[0m Thinking… \x1b[2m(esc to interrupt)\x1b[22m\x1b[K\r\n\
                   \x1b]0;✳ Claude Code\x07\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\ \x1b(Bdone\x1b=";
        assert_eq!(strip(raw), "✻ Thinking… (esc to interrupt)\nlink done");
    }

    #[test]
    fn eight_bit_forms_and_stray_controls_are_removed() {
        assert_eq!(strip("a\u{9b}31mb\u{9d}title\u{9c}c\u{7}\u{8}d\te"), "abcd\te");
    }

    #[test]
    fn a_sequence_cut_off_at_the_end_does_not_panic_or_eat_earlier_text() {
        assert_eq!(strip("ready \x1b[38;5"), "ready ");
        assert_eq!(strip("ready \x1b]0;tit"), "ready ");
        assert_eq!(strip("ready \x1b"), "ready ");
    }

    #[test]
    fn plain_text_with_box_drawing_is_unchanged() {
        let text = "╭──╮\n│ > │\n╰──╯";
        assert_eq!(strip(text), text);
    }
}
