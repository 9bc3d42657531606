//! Text delivered through `paste` arrives byte for byte, and nothing in it runs as a tmux command.

use switchyard::tmux::Key;

use super::{file_with_len, TmuxServer, SESSION};

/// A pane whose terminal is raw (no echo, no CR/LF mapping, no signal keys, no literal-next),
/// so `cat` writes to `out` exactly the bytes the pane received.
const RECEIVER: &str = r#"stty raw -echo -iexten && : > "$1.ready" && exec cat > "$1""#;

async fn receiver(server: &TmuxServer, name: &str) -> (String, std::path::PathBuf) {
    let out = server.path(name);
    let pane = server.window(name, &["sh", "-c", RECEIVER, "sh", out.to_str().unwrap()]).await;
    file_with_len(&out.with_extension("ready"), 0).await;
    (pane.pane_id, out)
}

fn corpus() -> Vec<(&'static str, String)> {
    let big: String = (0..2400).map(|i| format!("line {i:05} of a long message; ünïcödé ok\n")).collect();
    assert!(big.len() > 100_000);
    vec![
        ("semicolon", ";".into()),
        ("trailing-semicolon", "abc;".into()),
        ("escaped-semicolon", "\\;".into()),
        ("command-after-semicolon", "abc ; new-window -n pwned".into()),
        ("lone-separator-command", "; kill-server ;".into()),
        ("leading-dash", "-".into()),
        ("target-flag", "-t foo".into()),
        ("key-name-ctrl-c", "C-c".into()),
        ("key-name-enter", "Enter".into()),
        ("control-bytes", "\x03\x04\x1a\x11\x13\x16\x7f\0\x01".into()),
        ("cursor-up", "\x1b[A".into()),
        ("osc-title", "\x1b]0;title\x07".into()),
        ("bracketed-paste-end", "\x1b[201~after".into()),
        ("emoji", "héllo 😀 👩‍💻 done".into()),
        ("crlf", "one\r\ntwo\r\n".into()),
        ("lf", "one\ntwo\n".into()),
        ("format-and-vars", "#{pane_id} $HOME ~ 'q' \"dq\" {a}".into()),
        ("hundred-kb", big),
    ]
}

#[tokio::test]
async fn pasted_text_arrives_byte_exact_and_runs_no_tmux_command() {
    let server = TmuxServer::start().await;
    let items = corpus();
    for (name, text) in &items {
        let (pane, out) = receiver(&server, name).await;
        server.tmux.paste(&pane, text).await.expect("paste");
        let received = file_with_len(&out, text.len()).await;
        assert_eq!(String::from_utf8_lossy(&received), text.as_str(), "corpus item {name}");
        assert_eq!(received, text.as_bytes(), "corpus item {name}");
    }
    assert_eq!(server.window_count().await, 1 + items.len(), "no window was created or killed by the text");
    let panes = server.tmux.list_panes(SESSION).await.unwrap();
    assert!(panes.iter().all(|p| p.window_name != "pwned"));
    assert!(panes.iter().all(|p| !p.dead), "every receiver is still running");
    let buffers = server.tmux.run(&["list-buffers"]).await.unwrap();
    assert_eq!(buffers, "", "paste buffers are deleted after use");
}

#[tokio::test]
async fn named_keys_arrive_as_their_bytes() {
    let server = TmuxServer::start().await;
    let (pane, out) = receiver(&server, "keys").await;
    for key in [Key::Enter, Key::Escape, Key::CtrlC, Key::Tab, Key::Up] {
        server.tmux.send_key(&pane, key).await.expect("send key");
    }
    let expected = b"\r\x1b\x03\t\x1b[A";
    assert_eq!(file_with_len(&out, expected.len()).await, expected);
}

#[tokio::test]
async fn pasting_into_a_missing_pane_fails_and_leaves_no_buffer() {
    let server = TmuxServer::start().await;
    let err = server.tmux.paste("%999", "secret text").await.expect_err("no such pane");
    assert!(err.is_missing(), "{err}");
    assert_eq!(server.tmux.run(&["list-buffers"]).await.unwrap(), "");
}

/// Waits (with a deadline) until the pane's cursor line, as delivery reads it, is `want`.
async fn cursor_line_becomes(server: &TmuxServer, pane: &str, want: &str) {
    let what = format!("the cursor line of {pane} to read {want:?}");
    crate::helpers::eventually(&what, std::time::Duration::from_secs(10), || async {
        switchyard::detect::input_line::typed(&server.tmux.cursor_line(pane).await.expect("cursor line")) == want
    })
    .await;
}

#[tokio::test]
async fn the_cursor_line_shows_a_paste_waiting_in_the_input_and_empties_when_it_is_submitted() {
    let server = TmuxServer::start().await;
    // A cooked terminal echoes what arrives after its prompt, as a program's input line does.
    let pane = server.window("prompt", &["sh", "-c", "printf 'transcript\\n> '; exec cat > /dev/null"]).await;
    cursor_line_becomes(&server, &pane.pane_id, ">").await;
    server.tmux.paste(&pane.pane_id, "hello; C-c").await.expect("paste");
    cursor_line_becomes(&server, &pane.pane_id, "> hello; C-c").await;
    server.tmux.send_key(&pane.pane_id, Key::Enter).await.expect("enter");
    cursor_line_becomes(&server, &pane.pane_id, "").await;
}
