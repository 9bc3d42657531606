//! The named keys Switchyard may press in a pane. A closed set on purpose: user text never
//! reaches `send-keys`, where it would be read as key names and command separators.

/// A key for [`super::Tmux::send_key`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    Enter,
    Escape,
    Tab,
    BackTab,
    Backspace,
    Space,
    Up,
    Down,
    Left,
    Right,
    Home,
    End,
    PageUp,
    PageDown,
    /// Interrupt (`C-c`).
    CtrlC,
    /// End of input (`C-d`).
    CtrlD,
    /// Suspend (`C-z`).
    CtrlZ,
    /// Redraw in many TUIs (`C-l`).
    CtrlL,
}

impl Key {
    /// The name tmux's key table knows it by.
    pub fn tmux_name(self) -> &'static str {
        match self {
            Key::Enter => "Enter",
            Key::Escape => "Escape",
            Key::Tab => "Tab",
            Key::BackTab => "BTab",
            Key::Backspace => "BSpace",
            Key::Space => "Space",
            Key::Up => "Up",
            Key::Down => "Down",
            Key::Left => "Left",
            Key::Right => "Right",
            Key::Home => "Home",
            Key::End => "End",
            Key::PageUp => "PageUp",
            Key::PageDown => "PageDown",
            Key::CtrlC => "C-c",
            Key::CtrlD => "C-d",
            Key::CtrlZ => "C-z",
            Key::CtrlL => "C-l",
        }
    }
}
