//! The control-mode client against a real tmux: pushed output, pane deaths, commands without a
//! fork, and the link going down.

use std::time::{Duration, Instant};

use switchyard::tmux::{Control, Link, Notification, TmuxError};

use super::{next_matching, TmuxServer, SESSION};

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn output_of_a_window_created_after_attach_arrives_with_its_exact_bytes() {
    let server = TmuxServer::start().await;
    let control = Control::attach(&server.tmux, SESSION).await.expect("attach");
    let mut events = control.subscribe();
    // Raw output mode, so the terminal does not turn LF into CR LF on the way.
    let script =
        r#"stty raw -echo; printf 'a\tb\\c\033[A h\303\251llo \360\237\230\200 \001\177 %s\n' '%end'; exec sleep 30"#;
    let pane = server.window("printer", &["sh", "-c", script]).await;
    let expected = "a\tb\\c\x1b[A héllo 😀 \x01\x7f %end\n".as_bytes();
    let window = next_matching(&mut events, WAIT, |n| match n {
        Notification::WindowAdd { window } => Some(window.clone()),
        _ => None,
    })
    .await;
    assert_eq!(window, pane.window_id);
    let mut received = Vec::new();
    while received.len() < expected.len() {
        let chunk = next_matching(&mut events, WAIT, |n| match n {
            Notification::Output { pane: p, data } if *p == pane.pane_id => Some(data.clone()),
            _ => None,
        })
        .await;
        received.extend(chunk);
    }
    assert_eq!(received, expected);
}

#[tokio::test]
async fn a_pane_whose_program_exits_is_reported_dead_and_its_window_closed_when_killed() {
    let server = TmuxServer::start().await;
    let control = Control::attach(&server.tmux, SESSION).await.expect("attach");
    let mut events = control.subscribe();
    let pane = server.window("exits", &["sh", "-c", "sleep 0.1; exit 3"]).await;
    let (window, status) = next_matching(&mut events, WAIT, |n| match n {
        Notification::PaneDied { pane: p, window, status, .. } if *p == pane.pane_id => Some((window.clone(), *status)),
        _ => None,
    })
    .await;
    assert_eq!(window, pane.window_id);
    // The first report may come before tmux has the status (or, rarely, tmux never gets it).
    assert!(status.is_none_or(|s| s == 3), "{status:?}");

    server.tmux.kill_window(&pane.window_id).await.unwrap();
    let closed = next_matching(&mut events, WAIT, |n| match n {
        Notification::WindowClose { window } | Notification::UnlinkedWindowClose { window } => Some(window.clone()),
        _ => None,
    })
    .await;
    assert_eq!(closed, pane.window_id);
}

#[tokio::test]
async fn capture_through_the_control_client_reads_the_same_screen_as_a_forked_tmux() {
    let server = TmuxServer::start().await;
    let control = Control::attach(&server.tmux, SESSION).await.expect("attach");
    let pane = server
        .window("screen", &["sh", "-c", "printf 'first\\n\\033[1;31mred\\033[0m line\\n%%end 1 2 1\\n'; exec sleep 30"])
        .await;
    let deadline = Instant::now() + WAIT;
    loop {
        let screen = control.capture(&pane.pane_id, 10).await.expect("capture");
        if screen.contains("red line") {
            assert_eq!(screen, server.tmux.capture(&pane.pane_id, 10).await.unwrap());
            assert!(screen.contains("%end 1 2 1"), "a pane cannot end a reply early: {screen}");
            break;
        }
        assert!(Instant::now() < deadline, "the screen never showed the output: {screen:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let escaped = control.capture_escaped(&pane.pane_id, 10).await.unwrap();
    assert!(escaped.contains("\x1b[1m\x1b[31mred") || escaped.contains("\x1b[1;31mred"), "{escaped:?}");
    assert_eq!(escaped, server.tmux.capture_escaped(&pane.pane_id, 10).await.unwrap());
}

#[tokio::test]
async fn arguments_with_tmux_syntax_reach_tmux_unchanged_and_run_nothing() {
    let server = TmuxServer::start().await;
    let control = Control::attach(&server.tmux, SESSION).await.expect("attach");
    let hazards = [
        "plain",
        ";",
        "abc;",
        "\\;",
        "a ; new-window -n pwned",
        "x\" ; new-window -n pwned ; \"",
        "x' ; new-window -n pwned ; '",
        "#{pane_id} # comment",
        "$HOME ${HOME} \\$HOME",
        "~ ~/x",
        "{ new-window }",
        "line1\nnew-window -n pwned\r\n",
        "\x1b[A\x07\t\x01\x7f",
        "%if 1",
        "-t foo",
        "émoji 😀",
    ];
    for (i, text) in hazards.iter().enumerate() {
        let file = server.path(&format!("hazard-{i}"));
        control.command(&["set-buffer", "-b", "hazard", "--", text]).await.expect("set-buffer");
        control.command(&["save-buffer", "-b", "hazard", file.to_str().unwrap()]).await.expect("save-buffer");
        assert_eq!(std::fs::read(&file).unwrap(), text.as_bytes(), "hazard {text:?}");
    }
    // One reply per command: the queue is still in step.
    assert_eq!(control.command(&["display-message", "-p", "in step"]).await.unwrap(), ["in step"]);
    assert_eq!(server.window_count().await, 1, "no window was created");
}

#[tokio::test]
async fn an_argument_with_a_nul_byte_is_refused_before_it_reaches_tmux() {
    let server = TmuxServer::start().await;
    let control = Control::attach(&server.tmux, SESSION).await.expect("attach");
    let err = control.command(&["set-buffer", "--", "cut\0here"]).await.expect_err("NUL cannot be passed");
    assert!(matches!(err, TmuxError::Invalid { .. }), "{err}");
}

#[tokio::test]
async fn a_failing_command_reports_tmux_error_text() {
    let server = TmuxServer::start().await;
    let control = Control::attach(&server.tmux, SESSION).await.expect("attach");
    let err = control.command(&["capture-pane", "-p", "-t", "%999"]).await.expect_err("no such pane");
    assert!(matches!(&err, TmuxError::Failed { command, .. } if command == "capture-pane"), "{err}");
    assert!(err.is_missing(), "{err}");
    assert_eq!(control.command(&["display-message", "-p", "still up"]).await.unwrap(), ["still up"]);
}

#[tokio::test]
async fn killing_the_tmux_server_takes_the_link_down() {
    let server = TmuxServer::start().await;
    let control = Control::attach(&server.tmux, SESSION).await.expect("attach");
    let mut events = control.subscribe();
    assert!(control.is_up());
    server.tmux.kill_server().await.unwrap();
    next_matching(&mut events, WAIT, |n| matches!(n, Notification::Exit { .. }).then_some(())).await;
    tokio::time::timeout(WAIT, control.closed()).await.expect("the link goes down");
    assert!(matches!(*control.link().borrow(), Link::Down { .. }));
    let err = control.command(&["display-message", "-p", "x"]).await.expect_err("link is down");
    assert!(matches!(err, TmuxError::LinkDown(_)), "{err}");
}

#[tokio::test]
async fn attaching_to_a_missing_session_fails() {
    let server = TmuxServer::start().await;
    let err = Control::attach(&server.tmux, "missing").await.expect_err("no such session");
    assert!(matches!(err, TmuxError::LinkDown(_)), "{err}");
}
