//! Pane mirrors against a real tmux: the screen the worker reads without asking tmux is the
//! screen tmux itself shows, whether the mirror starts before, during or after the output, and
//! after the window is resized.

use std::time::Duration;

use switchyard::tmux::{Control, Pane};

use super::{TmuxServer, SESSION};
use crate::helpers::eventually;

const WAIT: Duration = Duration::from_secs(10);
const HISTORY: u32 = 20;

/// Prints a phase of everything a terminal program does: colours, lines scrolling into the
/// history (a few at a time), a spinner redrawn in place, a line longer than the window, a line replaced by moving
/// the cursor up, then `phase N done`; phase 2 waits for the file `go`.
const SCRIPT: &str = r#"
phase() {
    i=0
    while [ $i -lt 60 ]; do
        printf 'p%s line %d \033[1;3%dmcolour\033[0m\n' "$1" $i $((i % 7))
        i=$((i + 1))
        [ $((i % 10)) -eq 0 ] && sleep 0.02
    done
    printf 'spinner: -'
    for c in / - / -; do printf '\b%s' "$c"; done
    printf '\n%0250d\n' "$1"
    printf 'to be replaced\nkeep\n\033[2A\033[Kreplaced %s\033[2B\r' "$1"
    printf 'phase %s done' "$1"
}
phase 1
while [ ! -e go ]; do sleep 0.02; done
printf '\n'
phase 2
exec sleep 60
"#;

/// The screen with its blank rows at the bottom cut: tmux prints them, the mirror does not.
fn trimmed(screen: &str) -> String {
    screen.trim_end_matches('\n').to_owned()
}

async fn mirrored(control: &Control, pane: &Pane) -> String {
    trimmed(&control.mirrored(&pane.pane_id, HISTORY).unwrap_or_default())
}

/// Waits until tmux's own screen of `pane` shows `text`.
async fn tmux_shows(control: &Control, pane: &Pane, text: &str) {
    eventually(&format!("{text:?} on the screen"), WAIT, || async {
        control.capture(&pane.pane_id, 0).await.is_ok_and(|s| s.contains(text))
    })
    .await;
}

/// Waits for `marker` in the mirror, then checks the mirror against `capture-pane`.
async fn mirror_matches_tmux(control: &Control, pane: &Pane, marker: &str) {
    eventually(&format!("{marker:?} in the mirror"), WAIT, || async { mirrored(control, pane).await.contains(marker) })
        .await;
    let captured = trimmed(&control.capture(&pane.pane_id, HISTORY).await.expect("capture"));
    assert_eq!(mirrored(control, pane).await, captured);
}

#[tokio::test]
async fn a_mirror_shows_what_tmux_shows_however_it_starts_and_after_a_resize() {
    let server = TmuxServer::start().await;
    let control = Control::attach(&server.tmux, SESSION).await.expect("attach");
    // Mirrored from the first byte (started as the program starts), and from the middle of the
    // output of a second window.
    let early = server.window("early", &["sh", "-c", SCRIPT]).await;
    control.mirror(&early.pane_id, HISTORY).await.expect("mirror");
    let late = server.window("late", &["sh", "-c", SCRIPT]).await;
    tmux_shows(&control, &late, "p1 line").await;
    control.mirror(&late.pane_id, HISTORY).await.expect("mirror");
    for pane in [&early, &late] {
        mirror_matches_tmux(&control, pane, "phase 1 done").await;
    }
    assert!(control.mirrored("%9999", HISTORY).is_none(), "an unmirrored pane has no mirror");

    // A resize drops the mirror (its rows no longer line up); mirrored again, it follows.
    server.tmux.run(&["resize-window", "-t", &early.window_id, "-x", "120", "-y", "30"]).await.expect("resize");
    eventually("the resized pane's mirror is dropped", WAIT, || async {
        control.mirrored(&early.pane_id, HISTORY).is_none()
    })
    .await;
    assert!(control.mirrored(&late.pane_id, HISTORY).is_some(), "the other window kept its mirror");
    control.mirror(&early.pane_id, HISTORY).await.expect("mirror again");
    std::fs::write(server.path("go"), b"").unwrap();
    // Started again while the output streams: nothing missed, nothing applied twice.
    tmux_shows(&control, &late, "p2 line").await;
    control.mirror(&late.pane_id, HISTORY).await.expect("mirror mid-stream");
    for pane in [&early, &late] {
        mirror_matches_tmux(&control, pane, "phase 2 done").await;
    }

    // Mirrors of panes no longer watched go.
    control.keep_mirrors(std::slice::from_ref(&late.pane_id));
    assert!(control.mirrored(&early.pane_id, HISTORY).is_none());
    assert!(control.mirrored(&late.pane_id, HISTORY).is_some());
}

#[tokio::test]
async fn mirroring_a_pane_that_does_not_exist_fails() {
    let server = TmuxServer::start().await;
    let control = Control::attach(&server.tmux, SESSION).await.expect("attach");
    assert!(control.mirror("%4242", HISTORY).await.is_err());
    assert!(control.mirrored("%4242", HISTORY).is_none());
    // The link still answers: a failed seed did not confuse the replies that follow.
    let pane = server.window("after", &["sh", "-c", "printf 'still here'; exec sleep 30"]).await;
    control.mirror(&pane.pane_id, HISTORY).await.expect("mirror");
    mirror_matches_tmux(&control, &pane, "still here").await;
}

#[tokio::test]
async fn a_mirrored_panes_output_is_announced_without_its_bytes_which_its_mirror_has() {
    let server = TmuxServer::start().await;
    let control = Control::attach(&server.tmux, SESSION).await.expect("attach");
    let mut events = control.subscribe();
    let pane = server
        .window("quiet", &["sh", "-c", "while [ ! -e go ]; do sleep 0.02; done; echo mirrored-bytes; exec sleep 60"])
        .await;
    control.mirror(&pane.pane_id, HISTORY).await.expect("mirror");
    std::fs::write(server.path("go"), b"").unwrap();
    let data = super::next_matching(&mut events, WAIT, |n| match n {
        switchyard::tmux::Notification::Output { pane: p, data } if *p == pane.pane_id => Some(data.clone()),
        _ => None,
    })
    .await;
    assert!(data.is_empty(), "the bytes stay with the mirror: {data:?}");
    mirror_matches_tmux(&control, &pane, "mirrored-bytes").await;
}

#[tokio::test]
async fn a_quiet_panes_mirror_is_frozen_by_the_client_itself_and_takes_output_frozen() {
    let server = TmuxServer::start().await;
    let control = Control::attach(&server.tmux, SESSION).await.expect("attach");
    let pane = server
        .window(
            "quiet",
            &["sh", "-c", "echo first; while [ ! -e go ]; do sleep 0.02; done; echo second; exec sleep 60"],
        )
        .await;
    control.mirror(&pane.pane_id, HISTORY).await.expect("mirror");
    mirror_matches_tmux(&control, &pane, "first").await;
    // Nobody asks: the client freezes a mirror whose pane went quiet on its own.
    eventually("the quiet pane's mirror is frozen", WAIT, || async { control.live_mirrors() == 0 }).await;
    mirror_matches_tmux(&control, &pane, "first").await;
    assert_eq!(control.live_mirrors(), 0, "reading a frozen mirror does not thaw it");
    std::fs::write(server.path("go"), b"").unwrap();
    mirror_matches_tmux(&control, &pane, "second").await;
    assert_eq!(control.live_mirrors(), 0, "the output was applied by the reading, which froze it again");
}
