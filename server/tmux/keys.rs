//! The named keys Switchyard may press in a pane. A closed set on purpose: user text never
//! reaches `send-keys`, where it would be read as key names and command separators. The input
//! API's `keys` names them as tmux does (`Enter`, `BSpace`, `C-c`); anything else is refused
//! when the request is read.

/// A key for [`super::Tmux::send_key`]; its wire name is its tmux name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub enum Key {
    Enter,
    Escape,
    Tab,
    #[serde(rename = "BTab")]
    BackTab,
    #[serde(rename = "BSpace")]
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
    #[serde(rename = "C-c")]
    CtrlC,
    /// End of input (`C-d`).
    #[serde(rename = "C-d")]
    CtrlD,
    /// Suspend (`C-z`).
    #[serde(rename = "C-z")]
    CtrlZ,
    /// Redraw in many TUIs (`C-l`).
    #[serde(rename = "C-l")]
    CtrlL,
}

impl Key {
    pub const ALL: [Key; 18] = [
        Key::Enter,
        Key::Escape,
        Key::Tab,
        Key::BackTab,
        Key::Backspace,
        Key::Space,
        Key::Up,
        Key::Down,
        Key::Left,
        Key::Right,
        Key::Home,
        Key::End,
        Key::PageUp,
        Key::PageDown,
        Key::CtrlC,
        Key::CtrlD,
        Key::CtrlZ,
        Key::CtrlL,
    ];

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

#[cfg(test)]
mod tests {
    use super::Key;

    #[test]
    fn every_key_is_named_on_the_wire_as_tmux_names_it() {
        for key in Key::ALL {
            assert_eq!(serde_json::to_value(key).unwrap(), key.tmux_name(), "{key:?}");
            assert_eq!(serde_json::from_value::<Key>(key.tmux_name().into()).unwrap(), key);
        }
        assert!(serde_json::from_value::<Key>("C-c; kill-server".into()).is_err());
    }
}
