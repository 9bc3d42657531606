//! Text typed into an agent's pane is text, never keys: what such text may hold.
//!
//! tmux pastes it, and wraps the paste in `ESC[200~ … ESC[201~` when the program asked for
//! bracketed paste; it does not remove an `ESC[201~` inside the text, so that text could end the
//! paste early and the rest would arrive as keystrokes. A program that did not ask for bracketed
//! paste reads every control byte as a key (`0x03` is Ctrl-C). So typed text holds no control
//! characters but tab and newline (LF, or CRLF as a browser's text area sends it); keys are
//! pressed only by name ([`crate::tmux::Key`] through the input API's `keys`).

/// What ends a bracketed paste.
pub const PASTE_END: &str = "\x1b[201~";

/// Why `text` may not be typed, as a sentence for its field: the first control character and
/// its byte offset.
pub fn check(text: &str) -> Result<(), String> {
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let allowed = match c {
            '\t' | '\n' => true,
            '\r' => chars.peek().is_some_and(|(_, next)| *next == '\n'),
            c => !c.is_control(),
        };
        if !allowed {
            let code = c as u32;
            return Err(if code < 0x80 {
                format!("contains control byte 0x{code:02x} at offset {at}; only tab and newline may be typed (press keys with `keys`)")
            } else {
                format!("contains control character U+{code:04X} at offset {at}; only tab and newline may be typed")
            });
        }
    }
    Ok(())
}

/// [`check`] for text of one line (a title): no line break either.
pub fn check_line(text: &str) -> Result<(), String> {
    check(text)?;
    match text.find(['\n', '\r']) {
        Some(at) => Err(format!("contains a line break at offset {at}; it is one line")),
        None => Ok(()),
    }
}

/// `text` with every character [`check`] refuses removed (CRLF becomes LF): for text from
/// elsewhere (a repository's diff, a summary) that Switchyard itself types to an agent.
pub fn plain(text: &str) -> String {
    text.chars().filter(|c| matches!(c, '\t' | '\n') || !c.is_control()).collect()
}

/// Whether `text` would end a bracketed paste: refused by the typist whatever let it through.
pub fn ends_paste(text: &str) -> bool {
    text.contains(PASTE_END)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tab_newline_and_crlf_are_text() {
        assert!(check("a\tb\nc\r\nd; C-c Enter ünïcödé 🦀").is_ok());
    }

    #[test]
    fn other_control_characters_are_named_with_their_offset() {
        assert_eq!(
            check("ok \x1b[201~echo pwned").unwrap_err().split(';').next(),
            Some("contains control byte 0x1b at offset 3")
        );
        assert!(check("\u{3}").unwrap_err().starts_with("contains control byte 0x03 at offset 0"));
        assert!(check("a\0").unwrap_err().starts_with("contains control byte 0x00 at offset 1"));
        assert!(check("lone\rcr").unwrap_err().starts_with("contains control byte 0x0d at offset 4"));
        assert!(check("del\x7f").unwrap_err().starts_with("contains control byte 0x7f"));
        assert!(check("é\u{9b}").unwrap_err().starts_with("contains control character U+009B at offset 2"));
    }

    #[test]
    fn a_line_is_text_without_line_breaks() {
        assert!(check_line("Login page\tv2 ünï").is_ok());
        assert_eq!(check_line("a\nb").unwrap_err(), "contains a line break at offset 1; it is one line");
        assert!(check_line("a\r\nb").is_err());
        assert!(check_line("a\x1b[31m").unwrap_err().starts_with("contains control byte 0x1b"));
    }

    #[test]
    fn a_paste_terminator_is_found_anywhere() {
        assert!(ends_paste("text\x1b[201~more"));
        assert!(!ends_paste("text [201~"));
    }
}
