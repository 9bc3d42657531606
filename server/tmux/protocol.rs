//! The text of tmux's control-mode protocol, with no I/O: quoting a command line so tmux's
//! command parser reads back exactly the arguments we meant, unescaping `%output` values, and
//! parsing notification lines into [`Notification`]s.

/// The subscription name the control client registers (see `control.rs`) so tmux tells it when
/// a pane dies; its changes become [`Notification::PaneDied`].
pub(crate) const PANE_DEAD_SUBSCRIPTION: &str = "switchyard-pane-dead";

/// Something tmux told a control client outside a command reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notification {
    /// A pane printed these raw bytes (`%output`, or `%extended-output` when `pause-after` is set).
    /// A [`super::control::Control`]'s subscribers get a mirrored pane's without the bytes (its
    /// mirror took them).
    Output {
        pane: String,
        data: Vec<u8>,
    },
    /// A window was linked to the attached session.
    WindowAdd {
        window: String,
    },
    /// A window of the attached session closed.
    WindowClose {
        window: String,
    },
    /// A window not (or no longer) linked to the attached session was created.
    UnlinkedWindowAdd {
        window: String,
    },
    /// A window not (or no longer) linked to the attached session closed. tmux reports a
    /// window killed together with other commands in one batch this way, so treat it like
    /// [`Notification::WindowClose`].
    UnlinkedWindowClose {
        window: String,
    },
    WindowRenamed {
        window: String,
        name: String,
    },
    UnlinkedWindowRenamed {
        window: String,
    },
    /// A window's layout changed (`%layout-change`): its panes with their sizes now, as
    /// `(%ID, cols, rows)`.
    LayoutChange {
        window: String,
        panes: Vec<(String, u16, u16)>,
    },
    /// The pane entered or left a mode (copy mode, …): its screen may not be the program's.
    PaneModeChanged {
        pane: String,
    },
    /// A session was created or destroyed.
    SessionsChanged,
    SessionChanged {
        session_id: String,
        name: String,
    },
    /// The pane's process exited; the pane stays (remain-on-exit) so its last screen can be read.
    /// tmux samples this about once a second, and may report the same death twice: first
    /// without a status (the pty closed), then with it (the process was reaped).
    PaneDied {
        pane: String,
        window: String,
        status: Option<i32>,
        signal: Option<i32>,
    },
    /// tmux stopped sending a pane's output to this client (only with `pause-after`).
    Pause {
        pane: String,
    },
    Continue {
        pane: String,
    },
    /// The control client is exiting (`%exit [reason]`), or its output ended. Always the last.
    Exit {
        reason: Option<String>,
    },
    /// Any other notification line, kept for the curious and for tmux versions to come.
    Other(String),
}

/// What one line of control-mode output is, before we know if it sits inside a reply block.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    Begin { guard: &'a [u8], ours: bool },
    End { guard: &'a [u8], error: bool },
    Other(&'a [u8]),
}

/// Classifies a line (without its `\n`). `ours` is flag bit 1: set for commands this client
/// sent, clear for the `attach` that started it.
pub(crate) fn classify(line: &[u8]) -> Line<'_> {
    if let Some(rest) = line.strip_prefix(b"%begin ") {
        let ours = rest.rsplit(|b| *b == b' ').next().and_then(|f| std::str::from_utf8(f).ok()?.parse::<u32>().ok());
        return Line::Begin { guard: rest, ours: ours.is_some_and(|f| f & 1 == 1) };
    }
    if let Some(rest) = line.strip_prefix(b"%end ") {
        return Line::End { guard: rest, error: false };
    }
    if let Some(rest) = line.strip_prefix(b"%error ") {
        return Line::End { guard: rest, error: true };
    }
    Line::Other(line)
}

/// Parses a notification line (outside any reply block). Never fails: what it does not know
/// becomes [`Notification::Other`].
pub fn parse_notification(line: &[u8]) -> Notification {
    let text = || String::from_utf8_lossy(line).into_owned();
    let (name, rest) = match line.iter().position(|b| *b == b' ') {
        Some(i) => (&line[..i], &line[i + 1..]),
        None => (line, &b""[..]),
    };
    let word = |n: usize| -> Option<String> {
        let s = std::str::from_utf8(rest).ok()?;
        s.split(' ').nth(n).filter(|w| !w.is_empty()).map(str::to_owned)
    };
    let parsed = match name {
        b"%output" => split_first(rest).map(|(pane, value)| Notification::Output { pane, data: unescape(value) }),
        b"%extended-output" => parse_extended_output(rest),
        b"%window-add" => word(0).map(|window| Notification::WindowAdd { window }),
        b"%window-close" => word(0).map(|window| Notification::WindowClose { window }),
        b"%unlinked-window-add" => word(0).map(|window| Notification::UnlinkedWindowAdd { window }),
        b"%unlinked-window-close" => word(0).map(|window| Notification::UnlinkedWindowClose { window }),
        b"%unlinked-window-renamed" => word(0).map(|window| Notification::UnlinkedWindowRenamed { window }),
        b"%window-renamed" => split_first(rest)
            .map(|(window, name)| Notification::WindowRenamed { window, name: String::from_utf8_lossy(name).into() }),
        b"%layout-change" => split_first(rest).map(|(window, layouts)| {
            let layout = String::from_utf8_lossy(layouts);
            let layout = layout.split(' ').next().unwrap_or_default();
            Notification::LayoutChange { window, panes: super::mirror::layout_panes(layout) }
        }),
        b"%pane-mode-changed" => word(0).map(|pane| Notification::PaneModeChanged { pane }),
        b"%sessions-changed" => Some(Notification::SessionsChanged),
        b"%session-changed" => split_first(rest).map(|(session_id, name)| Notification::SessionChanged {
            session_id,
            name: String::from_utf8_lossy(name).into(),
        }),
        b"%pause" => word(0).map(|pane| Notification::Pause { pane }),
        b"%continue" => word(0).map(|pane| Notification::Continue { pane }),
        b"%subscription-changed" => parse_pane_dead(rest),
        b"%exit" => {
            Some(Notification::Exit { reason: (!rest.is_empty()).then(|| String::from_utf8_lossy(rest).into_owned()) })
        }
        _ => None,
    };
    parsed.unwrap_or_else(|| Notification::Other(text()))
}

/// `%extended-output %PANE AGE ... : VALUE`: arguments up to a lone `:` are for future use.
fn parse_extended_output(rest: &[u8]) -> Option<Notification> {
    let (pane, after) = split_first(rest)?;
    let colon =
        after.windows(3).position(|w| w == b" : ").map(|i| i + 3).or_else(|| after.strip_prefix(b": ").map(|_| 2))?;
    Some(Notification::Output { pane, data: unescape(&after[colon..]) })
}

/// `%subscription-changed NAME $S @W INDEX %P ... : VALUE` for our pane-death subscription,
/// whose value is `DEAD/STATUS/SIGNAL`; alive panes produce nothing.
fn parse_pane_dead(rest: &[u8]) -> Option<Notification> {
    let text = std::str::from_utf8(rest).ok()?;
    let (head, value) = text.split_once(" : ")?;
    let mut words = head.split(' ');
    if words.next()? != PANE_DEAD_SUBSCRIPTION {
        return None;
    }
    let (_session, window, _index, pane) = (words.next()?, words.next()?, words.next()?, words.next()?);
    let mut parts = value.split('/');
    if parts.next()? != "1" {
        return Some(Notification::Other(format!("%subscription-changed {text}")));
    }
    let number = |s: Option<&str>| s.and_then(|s| s.parse::<i32>().ok());
    let (status, signal) = (number(parts.next()), number(parts.next()));
    Some(Notification::PaneDied { pane: pane.to_owned(), window: window.to_owned(), status, signal })
}

/// Splits `WORD REST` at the first space; REST may be empty or hold more spaces.
fn split_first(rest: &[u8]) -> Option<(String, &[u8])> {
    let (first, value) = match rest.iter().position(|b| *b == b' ') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &b""[..]),
    };
    let first = std::str::from_utf8(first).ok().filter(|s| !s.is_empty())?;
    Some((first.to_owned(), value))
}

/// Undoes tmux's `%output` escaping: every byte below 0x20 and every backslash arrives as
/// `\ooo` (three octal digits); all other bytes, UTF-8 included, arrive as they are.
pub fn unescape(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len());
    let mut i = 0;
    while i < value.len() {
        if value[i] == b'\\' && i + 4 <= value.len() {
            let digits = &value[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let n = digits.iter().fold(0u32, |n, d| n * 8 + u32::from(d - b'0'));
                if let Ok(byte) = u8::try_from(n) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(value[i]);
        i += 1;
    }
    out
}

/// Joins arguments into one control-mode command line that tmux's parser splits back into
/// exactly these arguments. Plain words stay bare; anything else is double-quoted with `\`,
/// `"` and `$` escaped and every control character (newline included: a newline would end the
/// command line) written as `\ooo`. Inside double quotes tmux treats `;`, `#`, `~`, `{`, `}`
/// and spaces as ordinary characters (a leading `~`, which tmux would still expand to $HOME, is
/// written `\~`), so no argument can end the command or start another.
pub fn command_line(args: &[&str]) -> String {
    let mut line = String::new();
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        quote_into(&mut line, arg);
    }
    line
}

fn quote_into(out: &mut String, arg: &str) {
    let bare = !arg.is_empty()
        && arg.bytes().all(|b| b.is_ascii_alphanumeric() || b"%@=:./,+-_".contains(&b))
        && !arg.starts_with('%');
    if bare {
        out.push_str(arg);
        return;
    }
    out.push('"');
    for (i, c) in arg.chars().enumerate() {
        match c {
            // tmux expands a leading `~` to $HOME even inside double quotes.
            '~' if i == 0 => out.push_str("\\~"),
            '\\' | '"' | '$' => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\{:03o}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescape_turns_octal_escapes_back_into_bytes() {
        assert_eq!(unescape(br"a\011b\134c\033[A\015\012"), b"a\tb\\c\x1b[A\r\n");
        assert_eq!(unescape("héllo 😀".as_bytes()), "héllo 😀".as_bytes());
        assert_eq!(unescape(br"\000\377"), [0u8, 255]);
    }

    #[test]
    fn unescape_keeps_what_is_not_an_escape() {
        assert_eq!(unescape(br"\"), br"\");
        assert_eq!(unescape(br"\01"), br"\01");
        assert_eq!(unescape(br"\08x"), br"\08x");
        assert_eq!(unescape(br"\400"), br"\400");
        assert_eq!(unescape(b""), b"");
    }

    #[test]
    fn output_notifications_keep_spaces_and_raw_bytes() {
        assert_eq!(
            parse_notification(br"%output %12 a b  \033[0m"),
            Notification::Output { pane: "%12".into(), data: b"a b  \x1b[0m".to_vec() }
        );
        assert_eq!(parse_notification(b"%output %1 "), Notification::Output { pane: "%1".into(), data: vec![] });
        assert_eq!(
            parse_notification(br"%extended-output %3 120 future : hi\012"),
            Notification::Output { pane: "%3".into(), data: b"hi\n".to_vec() }
        );
    }

    #[test]
    fn window_and_session_notifications_are_parsed() {
        assert_eq!(
            parse_notification(b"%layout-change @1 b25f,80x24,0,0,2 b25f,80x24,0,0,2 *"),
            Notification::LayoutChange { window: "@1".into(), panes: vec![("%2".into(), 80, 24)] }
        );
        assert_eq!(parse_notification(b"%window-add @4"), Notification::WindowAdd { window: "@4".into() });
        assert_eq!(parse_notification(b"%window-close @4"), Notification::WindowClose { window: "@4".into() });
        assert_eq!(
            parse_notification(b"%unlinked-window-close @5"),
            Notification::UnlinkedWindowClose { window: "@5".into() }
        );
        assert_eq!(
            parse_notification(b"%window-renamed @4 my agent"),
            Notification::WindowRenamed { window: "@4".into(), name: "my agent".into() }
        );
        assert_eq!(parse_notification(b"%pane-mode-changed %2"), Notification::PaneModeChanged { pane: "%2".into() });
        assert_eq!(parse_notification(b"%sessions-changed"), Notification::SessionsChanged);
        assert_eq!(
            parse_notification(b"%session-changed $0 node one"),
            Notification::SessionChanged { session_id: "$0".into(), name: "node one".into() }
        );
        assert_eq!(parse_notification(b"%pause %7"), Notification::Pause { pane: "%7".into() });
    }

    #[test]
    fn exit_carries_its_reason_when_there_is_one() {
        assert_eq!(parse_notification(b"%exit"), Notification::Exit { reason: None });
        assert_eq!(
            parse_notification(b"%exit server exited"),
            Notification::Exit { reason: Some("server exited".into()) }
        );
    }

    #[test]
    fn pane_death_comes_from_our_subscription_only() {
        let line = format!("%subscription-changed {PANE_DEAD_SUBSCRIPTION} $0 @3 2 %3 : 1/7/");
        assert_eq!(
            parse_notification(line.as_bytes()),
            Notification::PaneDied { pane: "%3".into(), window: "@3".into(), status: Some(7), signal: None }
        );
        let killed = format!("%subscription-changed {PANE_DEAD_SUBSCRIPTION} $0 @3 2 %3 : 1//15");
        assert!(matches!(parse_notification(killed.as_bytes()), Notification::PaneDied { signal: Some(15), .. }));
        let alive = format!("%subscription-changed {PANE_DEAD_SUBSCRIPTION} $0 @3 2 %3 : 0//");
        assert!(matches!(parse_notification(alive.as_bytes()), Notification::Other(_)));
        assert!(matches!(parse_notification(b"%subscription-changed other $0 @3 2 %3 : 1//"), Notification::Other(_)));
    }

    #[test]
    fn unknown_or_malformed_lines_are_kept_as_other() {
        assert_eq!(parse_notification(b"%client-detached c1"), Notification::Other("%client-detached c1".into()));
        assert_eq!(parse_notification(b"%window-add"), Notification::Other("%window-add".into()));
    }

    #[test]
    fn reply_guards_are_recognised_and_only_flag_one_is_ours() {
        assert_eq!(classify(b"%begin 1795320207 270 1"), Line::Begin { guard: b"1795320207 270 1", ours: true });
        assert_eq!(classify(b"%begin 1795320207 265 0"), Line::Begin { guard: b"1795320207 265 0", ours: false });
        assert_eq!(classify(b"%error 1 2 1"), Line::End { guard: b"1 2 1", error: true });
        assert_eq!(classify(b"%end 1 2 1"), Line::End { guard: b"1 2 1", error: false });
        assert_eq!(classify(b"%output %1 x"), Line::Other(b"%output %1 x"));
    }

    #[test]
    fn plain_words_stay_bare_and_the_rest_is_quoted() {
        assert_eq!(command_line(&["capture-pane", "-p", "-t", "@3", "-S", "-20"]), "capture-pane -p -t @3 -S -20");
        assert_eq!(command_line(&["display", "-p", "%1"]), r#"display -p "%1""#);
        assert_eq!(command_line(&["set-buffer", ""]), r#"set-buffer """#);
        assert_eq!(command_line(&["x", "a;b"]), r#"x "a;b""#);
        assert_eq!(command_line(&["x", "$HOME \"q\" \\"]), r#"x "\$HOME \"q\" \\""#);
        assert_eq!(command_line(&["x", "l1\nl2\r\x1b"]), r#"x "l1\012l2\015\033""#);
        assert_eq!(command_line(&["x", "~", "a~", "#c", "{a}"]), r##"x "\~" "a~" "#c" "{a}""##);
    }

    /// A model of tmux's parser for the subset [`command_line`] emits (bare words, double
    /// quotes with `\\ \" \$ \ooo`), to check that quoting round-trips for any input.
    fn parse_back(line: &str) -> Vec<String> {
        let mut args = Vec::new();
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let mut arg = Vec::new();
            if bytes[i] == b'"' {
                i += 1;
                while bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        if bytes[i + 1].is_ascii_digit() {
                            let n = (0..3).fold(0u32, |n, k| n * 8 + u32::from(bytes[i + 1 + k] - b'0'));
                            arg.push(n as u8);
                            i += 4;
                        } else {
                            arg.push(bytes[i + 1]);
                            i += 2;
                        }
                    } else {
                        assert!(!b";\n".contains(&bytes[i]) || bytes[i] == b';');
                        arg.push(bytes[i]);
                        i += 1;
                    }
                }
                i += 1;
            } else {
                while i < bytes.len() && bytes[i] != b' ' {
                    assert!(!b";#~$\"'{}\\".contains(&bytes[i]), "unsafe bare byte in {line}");
                    arg.push(bytes[i]);
                    i += 1;
                }
            }
            args.push(String::from_utf8(arg).unwrap());
            i += 1;
        }
        args
    }

    proptest::proptest! {
        #[test]
        fn quoting_round_trips_any_arguments(args in proptest::collection::vec(".*", 1..5)) {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let line = command_line(&refs);
            proptest::prop_assert!(!line.contains('\n'));
            proptest::prop_assert_eq!(parse_back(&line), args);
        }
    }
}
