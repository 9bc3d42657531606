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
//!
//! An emulator holds every cell of its screen (32 bytes each: 320 KB for 200 × 50), printed on
//! or not. A mirror that has printed nothing for a while is frozen ([`Mirror::freeze`]): what a
//! seed needs (its size, cursor and lines, a few KB) and its text are kept and the emulator
//! dropped. Output to a frozen mirror waits beside it, unparsed; the next reading (or enough
//! waiting bytes) seeds an emulator, applies them and freezes again. So a pane costs an
//! emulator only while it is read, whatever the fleet prints: when output thawed mirrors, 500
//! agents redrawing at once (a reader behind takes in seconds of output together) kept up to
//! 150 MB of emulators live, and a cap on live ones thrashed (each thaw froze another).

use std::num::NonZeroU16;
use std::time::{Duration, Instant};

/// The most output a frozen mirror keeps unparsed: past it, the output is applied without
/// waiting for a reading (a pane that streams and is not read costs this much, at most).
const MOST_PENDING: usize = 32 * 1024;

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
    state: State,
    /// Lines kept above the screen.
    history: usize,
    /// When output last came (or the mirror was seeded).
    fed_at: Instant,
}

enum State {
    Live(Box<vt100::Parser>),
    /// A seed for the next emulator: the pane's size and cursor, and its lines (the history as
    /// text, then the screen's rows with their colours, wrapped rows joined).
    Frozen {
        view: PaneView,
        lines: Vec<String>,
        /// What [`Mirror::text`] reads with the mirror's own history, taken as it froze: a
        /// quiet pane is read again and again (settling, confirming), each read a thaw without it.
        text: String,
        /// Output since it froze, not yet applied.
        pending: Vec<u8>,
    },
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
        Mirror { state: State::Live(Box::new(emulator(view, history, lines))), history, fed_at: Instant::now() }
    }

    pub fn size(&self) -> (u16, u16) {
        match &self.state {
            State::Live(parser) => {
                let (rows, cols) = parser.screen().size();
                (cols.get(), rows.get())
            }
            State::Frozen { view, .. } => (view.cols, view.rows),
        }
    }

    /// What the pane printed since: parsed at once by a live mirror, kept for the next reading
    /// by a frozen one.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.fed_at = Instant::now();
        match &mut self.state {
            State::Live(parser) => parser.process(bytes),
            State::Frozen { pending, .. } => {
                pending.extend_from_slice(bytes);
                if pending.len() >= MOST_PENDING {
                    self.catch_up();
                }
            }
        }
    }

    /// Applies the output a frozen mirror was fed, then freezes it again (it stays live if a
    /// full-screen program now shows).
    fn catch_up(&mut self) {
        let State::Frozen { view, lines, pending, .. } = &mut self.state else { return };
        if pending.is_empty() {
            return;
        }
        let mut parser = emulator(*view, self.history, lines);
        parser.process(pending);
        self.state = State::Live(Box::new(parser));
        self.freeze();
    }

    /// Whether the mirror keeps no emulator now.
    pub fn frozen(&self) -> bool {
        matches!(self.state, State::Frozen { .. })
    }

    /// [`Mirror::freeze`] if fed nothing for `quiet`; whether it froze.
    pub fn freeze_if_quiet(&mut self, now: Instant, quiet: Duration) -> bool {
        now.saturating_duration_since(self.fed_at) >= quiet && self.freeze()
    }

    /// Drops the emulator, keeping the seed of the next one; whether it did (not if frozen
    /// already, nor while a full-screen program shows).
    fn freeze(&mut self) -> bool {
        let history = self.history;
        let State::Live(parser) = &mut self.state else { return false };
        let screen = parser.screen_mut();
        if screen.alternate_screen() {
            // A full-screen program: the screen under it, which it gives back on leaving, is
            // not the emulator's to show, so it could not be seeded again.
            return false;
        }
        let (rows, cols) = screen.size();
        let (cursor_y, cursor_x) = screen.cursor_position();
        let view =
            PaneView { cols: cols.get(), rows: rows.get(), cursor_x, cursor_y, alternate: screen.alternate_screen() };
        let mut lines: Vec<String> = history_lines(screen, history);
        let text = screen_text(&lines, screen);
        // A history line wrapped into the screen goes on in its first row.
        let go_on = lines.pop_if(|l| !l.ends_with('\n')).unwrap_or_default();
        lines.iter_mut().for_each(|l| _ = l.pop());
        // SGR only, a line per row that does not wrap: what a seed reads.
        let rows = screen.contents_formatted_basic();
        lines.extend(
            rows.split('\n').enumerate().map(|(i, row)| if i == 0 { format!("{go_on}{row}") } else { row.to_owned() }),
        );
        self.state = State::Frozen { view, lines, text, pending: Vec::new() };
        true
    }

    /// The screen as plain text: up to `history` lines above it, then its rows, wrapped lines
    /// joined and trailing blanks cut — what `capture-pane -p -J -S -history` prints, without
    /// its blank rows at the bottom. A frozen mirror stays frozen: reading is not output.
    pub fn text(&mut self, history: usize) -> String {
        self.catch_up();
        let mut thawed;
        let screen = match &mut self.state {
            State::Live(parser) => parser.screen_mut(),
            State::Frozen { text, .. } if history == self.history => return text.clone(),
            State::Frozen { view, lines, .. } => {
                thawed = emulator(*view, self.history, lines);
                thawed.screen_mut()
            }
        };
        let history = history_lines(screen, history);
        screen_text(&history, screen)
    }
}

/// See [`Mirror::text`]: `history` (from [`history_lines`]), then the screen's rows.
fn screen_text(history: &[String], screen: &vt100::Screen) -> String {
    let mut text = history.join("");
    for line in screen.contents().split('\n') {
        text.push_str(line.trim_end_matches(' '));
        text.push('\n');
    }
    text
}

/// An emulator showing `lines` with the cursor where `view` has it (see [`Mirror::seed`]).
fn emulator(view: PaneView, history: usize, lines: &[String]) -> vt100::Parser {
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
    parser
}

/// Up to `history` lines above the screen as text, wrapped rows joined, each line ending in a
/// newline (a wrapped row at the end of the history goes on into the screen's first line).
fn history_lines(screen: &mut vt100::Screen, history: usize) -> Vec<String> {
    let (rows, cols) = screen.size();
    let mut lines = Vec::new();
    let mut line = String::new();
    // A screenful at a time: scrolled back by `k`, the top row is the `k`th line above the screen.
    let mut back = screen.scrollback_len().min(history);
    while back > 0 {
        screen.set_scrollback(back);
        let n = back.min(usize::from(rows.get()));
        for (i, row) in screen.rows(0, cols.get()).take(n).enumerate() {
            line.push_str(row.trim_end_matches(' '));
            if !screen.row_wrapped(i as u16) {
                line.push('\n');
                lines.push(std::mem::take(&mut line));
            }
        }
        back -= n;
    }
    screen.set_scrollback(0);
    if !line.is_empty() {
        lines.push(line);
    }
    lines
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

    /// Two mirrors fed the same, one frozen whenever it may be: they read the same throughout.
    #[test]
    fn a_frozen_mirror_reads_and_goes_on_like_one_never_frozen() {
        let start = lines(&["old 1", "old 2", "$ "]);
        let (mut kept, mut frozen) =
            (Mirror::seed(view(12, 4, 2, 2), 5, &start), Mirror::seed(view(12, 4, 2, 2), 5, &start));
        let later = Instant::now() + Duration::from_secs(60);
        assert!(!frozen.freeze_if_quiet(Instant::now(), Duration::from_secs(30)), "output came just now");
        // Output, and whether a full-screen program shows (its mirror is never frozen).
        let steps: [(&[u8], bool); 6] = [
            (b"make\r\n\x1b[1;32mok\x1b[0m a line long enough to wrap twice over\r\n$ ", false),
            (b"ls", false),
            (b"\x1b[2;3Hover\x1b[4;1H", false),
            (b"\x1b[?1049h\x1b[Hfull screen\r\n\x1b[7m menu \x1b[0m", true),
            (b"\x1b[?1049l\r\nback\r\nand on\r\nscrolling\r\n$ ", false),
            (b"\x1b[H\x1b[2Jcleared", false),
        ];
        for (bytes, full_screen) in steps {
            kept.feed(bytes);
            frozen.feed(bytes);
            frozen.freeze_if_quiet(later, Duration::from_secs(30));
            assert_eq!(frozen.text(5), kept.text(5), "after {:?}", String::from_utf8_lossy(bytes));
            assert_eq!(frozen.frozen(), !full_screen, "a reading applies the output and freezes again");
            assert_eq!(frozen.text(1), kept.text(1), "less history than kept");
            assert_eq!(frozen.frozen(), !full_screen, "reading does not thaw");
            assert_eq!(frozen.size(), kept.size());
        }
        frozen.feed(b"!");
        kept.feed(b"!");
        assert!(frozen.frozen(), "output waits beside a frozen mirror");
        assert_eq!(frozen.text(5), kept.text(5));
        // Output past what may wait is applied without a reading.
        let flood = b"0123456789\r\n".repeat(MOST_PENDING / 12 + 1);
        frozen.feed(&flood);
        kept.feed(&flood);
        assert!(frozen.frozen());
        assert!(matches!(&frozen.state, State::Frozen { pending, .. } if pending.is_empty()), "applied at once");
        assert_eq!(frozen.text(5), kept.text(5));
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
