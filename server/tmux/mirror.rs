//! A pane's screen kept in-process: a terminal emulator ([`vt100`]) fed with the pane's
//! `%output`, so reading a watched screen costs no tmux command at all. Asking tmux for the
//! screen (`capture-pane`) on every change was most of what watching cost the tmux server.
//!
//! A mirror starts from what tmux shows ([`Mirror::seed`]: the pane's size, cursor and a capture
//! with its colours) and from then on sees the same bytes tmux parses. tmux sends `%output`
//! for everything it read before a command's reply ahead of that reply, so a seed taken from a
//! reply and fed with the output that follows it is the pane's screen, byte for byte. Where
//! tmux and the emulator differ (tmux keeps a cleared screen in its history; the emulator
//! does not), only the history above the screen differs.

use std::num::NonZeroU16;

/// The facts about a pane a mirror starts from (`display-message` with [`SEED_FORMAT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaneView {
    pub cols: u16,
    pub rows: u16,
    pub cursor_x: u16,
    pub cursor_y: u16,
    /// The program is on the alternate screen (a full-screen program).
    pub alternate: bool,
}

/// The `display-message` format [`PaneView::parse`] reads.
pub const SEED_FORMAT: &str = "#{pane_width} #{pane_height} #{cursor_x} #{cursor_y} #{alternate_on}";

impl PaneView {
    pub fn parse(line: &str) -> Option<PaneView> {
        let mut fields = line.split(' ').map(|f| f.parse::<u16>().ok());
        let mut next = || fields.next().flatten();
        let view = PaneView {
            cols: next().filter(|c| *c > 0)?,
            rows: next().filter(|r| *r > 0)?,
            cursor_x: next()?,
            cursor_y: next()?,
            alternate: next()? == 1,
        };
        Some(view)
    }
}

/// One pane's screen.
pub struct Mirror {
    parser: vt100::Parser,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirror").field("size", &self.size()).finish_non_exhaustive()
    }
}

impl Mirror {
    /// A mirror showing `lines` (a `capture-pane -e -J` of the pane: its history, then its
    /// screen, with colours and wrapped rows joined) with the cursor where the pane has it.
    pub fn seed(view: PaneView, history: usize, lines: &[String]) -> Mirror {
        let size = |n: u16| NonZeroU16::new(n).unwrap_or(NonZeroU16::MIN);
        let mut parser = vt100::Parser::new(size(view.rows), size(view.cols), history);
        if view.alternate {
            parser.process(b"\x1b[?1049h");
        }
        // Line after line: a long line wraps where it did in tmux, and the lines past the
        // screen's height scroll into the history as they did there, leaving the screen's rows.
        for (i, line) in lines.iter().enumerate() {
            if i > 0 {
                parser.process(b"\r\n");
            }
            parser.process(line.as_bytes());
        }
        parser.process(format!("\x1b[0m\x1b[{};{}H", view.cursor_y + 1, view.cursor_x + 1).as_bytes());
        Mirror { parser }
    }

    pub fn size(&self) -> (u16, u16) {
        let (rows, cols) = self.parser.screen().size();
        (cols.get(), rows.get())
    }

    /// What the pane printed since.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.parser.process(bytes);
    }

    /// The screen as plain text: up to `history` lines above it, then its rows, wrapped lines
    /// joined and trailing blanks cut — what `capture-pane -p -J -S -history` prints, without
    /// its blank rows at the bottom.
    pub fn text(&mut self, history: usize) -> String {
        let screen = self.parser.screen_mut();
        let (rows, cols) = screen.size();
        let mut text = String::new();
        // The history, a screenful at a time: scrolled back by `k`, the top row is the `k`th
        // line above the screen.
        let mut back = screen.scrollback_len().min(history);
        while back > 0 {
            screen.set_scrollback(back);
            let n = back.min(usize::from(rows.get()));
            for (i, row) in screen.rows(0, cols.get()).take(n).enumerate() {
                text.push_str(row.trim_end_matches(' '));
                if !screen.row_wrapped(i as u16) {
                    text.push('\n');
                }
            }
            back -= n;
        }
        screen.set_scrollback(0);
        for line in screen.contents().split('\n') {
            text.push_str(line.trim_end_matches(' '));
            text.push('\n');
        }
        text
    }
}

/// The panes of a `%layout-change` line's layout with their sizes, as `(%ID, cols, rows)`:
/// a leaf cell of tmux's layout is `COLSxROWS,X,Y,ID`; containers carry no id.
pub fn layout_panes(layout: &str) -> Vec<(String, u16, u16)> {
    static LEAF: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"(\d+)x(\d+),\d+,\d+,(\d+)").expect("a valid pattern"));
    LEAF.captures_iter(layout)
        .filter_map(|c| Some((format!("%{}", &c[3]), c[1].parse().ok()?, c[2].parse().ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(cols: u16, rows: u16, cursor_x: u16, cursor_y: u16) -> PaneView {
        PaneView { cols, rows, cursor_x, cursor_y, alternate: false }
    }

    fn lines(text: &[&str]) -> Vec<String> {
        text.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn the_seed_shows_the_capture_and_output_continues_at_the_cursor() {
        let mut mirror = Mirror::seed(view(20, 4, 2, 1), 10, &lines(&["$ ls", "$ ", "", ""]));
        assert_eq!(mirror.text(10), "$ ls\n$\n");
        mirror.feed(b"pwd\r\n/tmp\r\n$ ");
        assert_eq!(mirror.text(10), "$ ls\n$ pwd\n/tmp\n$\n");
    }

    #[test]
    fn history_lines_come_before_the_screen_and_are_capped() {
        let captured = lines(&["h1", "h2", "h3", "r1", "r2"]);
        let mut mirror = Mirror::seed(view(10, 2, 0, 1), 10, &captured);
        assert_eq!(mirror.text(10), "h1\nh2\nh3\nr1\nr2\n");
        assert_eq!(mirror.text(1), "h3\nr1\nr2\n");
        assert_eq!(mirror.text(0), "r1\nr2\n");
    }

    #[test]
    fn colours_and_cursor_movement_leave_only_the_text() {
        let mut mirror = Mirror::seed(view(30, 3, 0, 0), 0, &lines(&["", "", ""]));
        mirror.feed(b"\x1b[1;31mred\x1b[0m plain\r\n\x1b[2;1Hover\x1b[3;5Hthere");
        assert_eq!(mirror.text(0), "red plain\nover\n    there\n");
    }

    #[test]
    fn a_full_redraw_replaces_the_screen() {
        let mut mirror = Mirror::seed(view(30, 3, 0, 0), 5, &lines(&["old", "screen", ""]));
        mirror.feed(b"\x1b[H\x1b[2Jnew\r\nscreen");
        assert_eq!(mirror.text(0), "new\nscreen\n");
    }

    #[test]
    fn wrapped_lines_are_joined_like_capture_pane_j() {
        let mut mirror = Mirror::seed(view(5, 3, 0, 0), 5, &lines(&["", "", ""]));
        mirror.feed(b"abcdefgh\r\nx");
        assert_eq!(mirror.text(0), "abcdefgh\nx\n");
    }

    #[test]
    fn pane_views_parse_from_display_message() {
        assert_eq!(PaneView::parse("200 50 3 7 0"), Some(view(200, 50, 3, 7)));
        assert_eq!(PaneView::parse("80 24 0 0 1").map(|v| v.alternate), Some(true));
        assert_eq!(PaneView::parse("0 24 0 0 0"), None);
        assert_eq!(PaneView::parse("80 24 0"), None);
        assert_eq!(PaneView::parse(""), None);
    }

    #[test]
    fn layouts_name_their_panes_with_sizes() {
        assert_eq!(layout_panes("b25f,80x24,0,0,2"), vec![("%2".to_owned(), 80, 24)]);
        assert_eq!(
            layout_panes("a1b2,160x50,0,0{80x50,0,0,1,79x50,81,0[79x25,81,0,5,79x24,81,26,6]}"),
            vec![("%1".to_owned(), 80, 50), ("%5".to_owned(), 79, 25), ("%6".to_owned(), 79, 24)]
        );
        assert!(layout_panes("garbage").is_empty());
    }
}
