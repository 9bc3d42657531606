//! A tmux control-mode client (`tmux -L SOCKET -C attach -t =SESSION`) kept as a child process:
//! it pushes pane output and window events as [`Notification`]s, and answers commands over its
//! stdin without forking a tmux per call (`capture-pane` ≈ 0.2 ms instead of ≈ 2 ms).
//!
//! Two tasks own the pipes. The writer sends one quoted command line per [`Control::command`]
//! and queues its reply slot; the reader matches each `%begin … %end`/`%error` block of ours
//! (flag bit 1) to the oldest queued slot, tmux answering in order, and broadcasts everything
//! else. When the client ends (`%exit`, or its output closes because the server died) the link
//! goes [`Link::Down`], waiting commands fail with [`TmuxError::LinkDown`], and a last
//! [`Notification::Exit`] is sent: the worker reconnects with a new [`Control::attach`].
//!
//! Flow control: the reader only parses and hands off, never waiting for a subscriber
//! (`broadcast` drops the oldest notifications for one that falls behind, which then sees
//! `RecvError::Lagged` and must re-read every screen). We do not set tmux's `pause-after`:
//! draining fast keeps tmux's buffer for us small, and a paused pane would need a
//! `refresh-client -A` round trip before we saw its output again. `%pause`/`%continue`/
//! `%extended-output` are still understood, should a caller turn it on through `command`.
//!
//! Pane death: with remain-on-exit no window closes when a program exits, so on attach the
//! client subscribes (`refresh-client -B`) to `#{pane_dead}` of every pane; tmux checks
//! subscriptions about once a second and each death becomes [`Notification::PaneDied`].
//!
//! A pane cannot inject replies: a reply ends only on `%end`/`%error` with the same time,
//! number and flags as its `%begin`, and output of panes arrives escaped in `%output` lines.
//!
//! Mirrors ([`Control::mirror`]): the reader feeds each mirrored pane's output into its
//! [`Mirror`] as it reads it, and seeds a mirror at the exact place of the seed's reply in the
//! stream, so no output is missed or applied twice. A layout change that resizes a pane drops
//! its mirror; the next [`Control::mirror`] starts it again at the new size.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::{broadcast, mpsc, oneshot, watch};

use super::mirror::{Mirror, PaneView, SEED_FORMAT};
use super::protocol::{self, classify, parse_notification, Line, Notification, PANE_DEAD_SUBSCRIPTION};
use super::{capture_args, Result, Tmux, TmuxError, COMMAND_TIMEOUT};

/// How many notifications a slow subscriber may fall behind before it misses some (and must
/// re-read every screen). 500 agents redrawing their screens send a few thousand a second, and
/// the worker's loop may be busy recording states for a second or two: with 4,096 it fell
/// behind again and again under load, each time re-reading every pane. Without their bytes
/// (of a mirrored pane, as the worker's are: see the reader) a slot is about a hundred bytes.
const EVENT_CAPACITY: usize = 65_536;

/// How long a pane prints nothing before its mirror is frozen (see [`crate::tmux::mirror`]): an
/// agent at work redraws (a spinner, streamed text) more often than this, so its mirror stays
/// live; one waiting for input prints nothing, and its screen is read (a settling reading, a
/// confirming one) from the text its mirror kept as it froze.
const MIRROR_QUIET: Duration = Duration::from_millis(300);
/// How often quiet mirrors are looked for. A task of the client's own does it, whatever its
/// subscribers are busy with: when the worker's loop froze them, its long turns (spawning 500
/// agents, recording their states on a loaded database) left nearly every mirror live — 158 MB
/// of emulators at the load bench's peak, where 500 frozen ones hold a few MB.
const FREEZE_EVERY: Duration = Duration::from_millis(100);

/// Whether the control client is attached, for the status endpoint and for reconnecting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    Up,
    Down { reason: String },
}

/// A handle on one control-mode client. Clones share it; when the last clone is dropped, the
/// client's stdin closes and tmux detaches it.
#[derive(Debug, Clone)]
pub struct Control {
    commands: mpsc::UnboundedSender<(String, Slot)>,
    events: broadcast::Sender<Notification>,
    link: watch::Receiver<Link>,
    mirrors: Mirrors,
}

type Mirrors = Arc<Mutex<HashMap<String, Mirror>>>;

#[derive(Debug)]
struct Reply {
    error: bool,
    lines: Vec<String>,
}

/// Run by the reader when a command line's last reply block arrives, before it reads any later
/// output.
type OnReply = Box<dyn FnOnce(&[Reply]) + Send>;

/// Where the replies to one command line go. A line of several commands (`a ; b`) is answered
/// with a block for each, or fewer when one fails (tmux skips the rest).
struct Slot {
    blocks: usize,
    replies: Vec<Reply>,
    on_reply: Option<OnReply>,
    done: oneshot::Sender<Vec<Reply>>,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").field("blocks", &self.blocks).field("replies", &self.replies).finish_non_exhaustive()
    }
}

/// Reply slots in the order their commands were written. `closed` is set when the reader
/// stops, so a command written afterwards fails at once instead of waiting forever.
#[derive(Default)]
struct Pending {
    closed: bool,
    queue: VecDeque<Slot>,
}

impl Control {
    /// Attaches a control client to `session` (which must exist: see
    /// [`Tmux::ensure_session`]) and returns once tmux answers a first command. `-f ignore-size`
    /// keeps the client from resizing the session's windows.
    pub async fn attach(tmux: &Tmux, session: &str) -> Result<Control> {
        super::check_name("session name", session)?;
        let mut child = tmux
            .command()
            .args(["-C", "attach-session", "-f", "ignore-size", "-t", &super::exact(session)])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| TmuxError::Spawn { command: "attach-session".into(), source })?;
        let (stdin, stdout) = (child.stdin.take().expect("piped"), child.stdout.take().expect("piped"));
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        let (link_tx, link) = watch::channel(Link::Up);
        let (commands, command_rx) = mpsc::unbounded_channel();
        let pending = Arc::new(Mutex::new(Pending::default()));
        let mirrors = Mirrors::default();
        let (ready_tx, ready) = oneshot::channel();
        tokio::spawn(write_loop(stdin, command_rx, pending.clone()));
        let streams = Streams { events: events.clone(), link: link_tx, mirrors: mirrors.clone() };
        tokio::spawn(read_loop(stdout, child, pending, streams, ready_tx));
        tokio::spawn(freeze_loop(Arc::downgrade(&mirrors)));
        let control = Control { commands, events, link, mirrors };
        // Commands that reach tmux before the attach has completed fail ("no current client"):
        // wait for the attach's own reply first.
        let attached = tokio::time::timeout(COMMAND_TIMEOUT, ready)
            .await
            .map_err(|_| TmuxError::Timeout { command: "attach-session".into() })?;
        match attached {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => return Err(TmuxError::LinkDown(reason)),
            Err(_) => return Err(TmuxError::LinkDown(control.closed().await)),
        }
        let subscription =
            format!("{PANE_DEAD_SUBSCRIPTION}:%*:#{{pane_dead}}/#{{pane_dead_status}}/#{{pane_dead_signal}}");
        control.command(&["refresh-client", "-B", &subscription]).await?;
        Ok(control)
    }

    /// A new receiver of notifications from now on (earlier ones are not replayed: list the
    /// panes after subscribing to learn what already exists).
    pub fn subscribe(&self) -> broadcast::Receiver<Notification> {
        self.events.subscribe()
    }

    /// The link state, to watch for changes.
    pub fn link(&self) -> watch::Receiver<Link> {
        self.link.clone()
    }

    pub fn is_up(&self) -> bool {
        *self.link.borrow() == Link::Up
    }

    /// Resolves when the link goes down, with the reason.
    pub async fn closed(&self) -> String {
        let mut link = self.link.clone();
        let down = link.wait_for(|l| matches!(l, Link::Down { .. })).await;
        match down.as_deref() {
            Ok(Link::Down { reason }) => reason.clone(),
            _ => "control client ended".to_owned(),
        }
    }

    /// Runs one tmux command through the client and returns its output lines. Each argument
    /// is quoted for tmux's parser ([`protocol::command_line`]), so no argument can end the
    /// command or start another one.
    pub async fn command(&self, args: &[&str]) -> Result<Vec<String>> {
        let mut replies = self.command_list(&[args], None).await?;
        Ok(replies.pop().map(|r| r.lines).unwrap_or_default())
    }

    /// Runs `commands` as one command line (`a ; b`): tmux runs them together, with no pane
    /// output read in between. `on_reply` runs in the reader when the last reply arrives.
    /// Fails with the first command that failed.
    async fn command_list(&self, commands: &[&[&str]], on_reply: Option<OnReply>) -> Result<Vec<Reply>> {
        let name = commands.first().and_then(|c| c.first()).copied().unwrap_or_default().to_owned();
        if commands.iter().any(|c| c.first().is_none_or(|n| n.is_empty())) {
            // An empty line would detach the client.
            return Err(TmuxError::Invalid { what: "control command", reason: "is empty".into() });
        }
        if commands.iter().flat_map(|c| c.iter()).any(|a| a.contains('\0')) {
            // tmux arguments are C strings: a NUL would silently cut the argument short.
            return Err(TmuxError::Invalid { what: "control command", reason: "an argument contains NUL".into() });
        }
        let line = commands.iter().map(|c| protocol::command_line(c)).collect::<Vec<_>>().join(" ; ");
        let (done, rx) = oneshot::channel();
        let slot = Slot { blocks: commands.len(), replies: Vec::new(), on_reply, done };
        let down = |this: &Control| {
            TmuxError::LinkDown(match &*this.link.borrow() {
                Link::Down { reason } => reason.clone(),
                Link::Up => "control client ended".to_owned(),
            })
        };
        self.commands.send((line, slot)).map_err(|_| down(self))?;
        let replies = tokio::time::timeout(COMMAND_TIMEOUT, rx)
            .await
            .map_err(|_| TmuxError::Timeout { command: name.clone() })?
            .map_err(|_| down(self))?;
        if let Some(failed) = replies.iter().find(|r| r.error) {
            return Err(TmuxError::Failed { command: name, stderr: failed.lines.join("\n") });
        }
        Ok(replies)
    }

    /// Starts mirroring `pane` with `history` lines above its screen, or starts again (after a
    /// resize): from the pane's size, cursor and screen, read in one command line so no output
    /// falls between them.
    pub async fn mirror(&self, pane: &str, history: u32) -> Result<()> {
        // Wrapped rows joined (`-J`): printed again, they wrap where they did, and marked so.
        let capture = capture_args(pane, history, true);
        let capture: Vec<&str> = capture.iter().map(String::as_str).collect();
        let display = ["display-message", "-p", "-t", pane, SEED_FORMAT];
        let (mirrors, key) = (self.mirrors.clone(), pane.to_owned());
        let seed = Box::new(move |replies: &[Reply]| {
            let [view, screen] = replies else { return };
            if let Some(view) = view.lines.first().and_then(|l| PaneView::parse(l)) {
                let mirror = Mirror::seed(view, history as usize, &screen.lines);
                mirrors.lock().expect("mirrors lock").insert(key, mirror);
            }
        });
        self.command_list(&[&display, &capture], Some(seed)).await?;
        if self.mirrors.lock().expect("mirrors lock").contains_key(pane) {
            Ok(())
        } else {
            Err(TmuxError::Unexpected { command: "display-message".into(), output: "no pane size".into() })
        }
    }

    /// The mirrored screen of `pane` (see [`Mirror::text`]), or `None` when it is not mirrored.
    pub fn mirrored(&self, pane: &str, history: u32) -> Option<String> {
        self.mirrors.lock().expect("mirrors lock").get_mut(pane).map(|m| m.text(history as usize))
    }

    /// How many mirrors keep an emulator now (the rest are frozen).
    pub fn live_mirrors(&self) -> usize {
        self.mirrors.lock().expect("mirrors lock").values().filter(|m| !m.frozen()).count()
    }

    /// Stops mirroring the panes not in `keep`.
    pub fn keep_mirrors(&self, keep: &[String]) {
        self.mirrors.lock().expect("mirrors lock").retain(|pane, _| keep.contains(pane));
    }

    /// [`Tmux::capture`] through the client: the same text, without a fork.
    pub async fn capture(&self, pane: &str, history: u32) -> Result<String> {
        self.capture_with(pane, history, false).await
    }

    /// [`Tmux::capture_escaped`] through the client.
    pub async fn capture_escaped(&self, pane: &str, history: u32) -> Result<String> {
        self.capture_with(pane, history, true).await
    }

    async fn capture_with(&self, pane: &str, history: u32, escapes: bool) -> Result<String> {
        let args = capture_args(pane, history, escapes);
        let lines = self.command(&args.iter().map(String::as_str).collect::<Vec<_>>()).await?;
        Ok(lines.into_iter().map(|l| l + "\n").collect())
    }
}

async fn write_loop(
    mut stdin: ChildStdin,
    mut commands: mpsc::UnboundedReceiver<(String, Slot)>,
    pending: Arc<Mutex<Pending>>,
) {
    while let Some((mut line, reply)) = commands.recv().await {
        {
            let mut pending = pending.lock().expect("pending lock");
            if pending.closed {
                continue; // dropping `reply` fails the command with LinkDown
            }
            pending.queue.push_back(reply);
        }
        line.push('\n');
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
    // Closing stdin tells tmux to detach the client.
}

/// Freezes the mirrors fed nothing for [`MIRROR_QUIET`], every [`FREEZE_EVERY`], until the
/// client's last handle and its reader are gone. One mirror at a time: the reader, feeding the
/// others, waits for one freeze at most, not for all of them.
async fn freeze_loop(mirrors: Weak<Mutex<HashMap<String, Mirror>>>) {
    let mut tick = tokio::time::interval(FREEZE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(mirrors) = mirrors.upgrade() else { return };
        let now = Instant::now();
        let panes: Vec<String> = mirrors.lock().expect("mirrors lock").keys().cloned().collect();
        for pane in panes {
            if let Some(mirror) = mirrors.lock().expect("mirrors lock").get_mut(&pane) {
                mirror.freeze_if_quiet(now, MIRROR_QUIET);
            }
        }
    }
}

/// Where the reader sends what is not a reply.
struct Streams {
    events: broadcast::Sender<Notification>,
    link: watch::Sender<Link>,
    mirrors: Mirrors,
}

async fn read_loop(
    stdout: ChildStdout,
    mut child: Child,
    pending: Arc<Mutex<Pending>>,
    streams: Streams,
    ready: oneshot::Sender<Result<(), String>>,
) {
    let Streams { events, link, mirrors } = streams;
    let mut ready = Some(ready);
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::with_capacity(4096);
    // The open reply block: its guard (`TIME NUMBER FLAGS`), whether it is ours, its lines.
    let mut block: Option<(Vec<u8>, bool, Vec<String>)> = None;
    let mut exit_reason: Option<Option<String>> = None;
    let mut last_error: Option<String> = None;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        if let Some((guard, ours, lines)) = &mut block {
            match classify(&line) {
                Line::End { guard: end, error } if end == guard.as_slice() => {
                    let (ours, lines) = (*ours, std::mem::take(lines));
                    block = None;
                    if ours {
                        let complete = {
                            let mut pending = pending.lock().expect("pending lock");
                            match pending.queue.front_mut() {
                                Some(slot) => {
                                    slot.replies.push(Reply { error, lines });
                                    if error || slot.replies.len() >= slot.blocks {
                                        pending.queue.pop_front()
                                    } else {
                                        None
                                    }
                                }
                                None => None,
                            }
                        };
                        if let Some(mut slot) = complete {
                            if let Some(on_reply) = slot.on_reply.take() {
                                on_reply(&slot.replies);
                            }
                            let _ = slot.done.send(slot.replies);
                        }
                    } else {
                        // The reply to the attach itself, which comes first.
                        let outcome = if error { Err(lines.join("; ")) } else { Ok(()) };
                        if let Err(e) = &outcome {
                            last_error = Some(e.clone());
                        }
                        if let Some(ready) = ready.take() {
                            let _ = ready.send(outcome);
                        }
                    }
                }
                _ => lines.push(String::from_utf8_lossy(&line).into_owned()),
            }
            continue;
        }
        match classify(&line) {
            Line::Begin { guard, ours } => block = Some((guard.to_vec(), ours, Vec::new())),
            Line::End { .. } => {} // a stray end: nothing to close
            Line::Other(text) => {
                let mut notification = parse_notification(text);
                match &mut notification {
                    Notification::Exit { reason } => {
                        exit_reason = Some(reason.clone());
                        let _ = link.send(Link::Down { reason: down_reason(reason.as_deref(), &last_error) });
                    }
                    Notification::Output { pane, data } => {
                        if let Some(mirror) = mirrors.lock().expect("mirrors lock").get_mut(pane) {
                            mirror.feed(data);
                            // Of a mirrored pane subscribers learn that it printed, not what: the
                            // bytes went to its mirror, where its screen is read. A slot of the
                            // channel then holds a pane id, not a screenful, so it can hold many.
                            std::mem::take(data);
                        }
                    }
                    Notification::LayoutChange { panes, .. } => {
                        let mut mirrors = mirrors.lock().expect("mirrors lock");
                        for (pane, cols, rows) in panes {
                            if mirrors.get(pane).is_some_and(|m| m.size() != (*cols, *rows)) {
                                mirrors.remove(pane);
                            }
                        }
                    }
                    _ => {}
                }
                let _ = events.send(notification);
            }
        }
    }
    let stderr = read_stderr(&mut child).await;
    let _ = child.wait().await;
    {
        let mut pending = pending.lock().expect("pending lock");
        pending.closed = true;
        pending.queue.clear(); // dropping the slots fails their commands with LinkDown
    }
    let last_error = last_error.or(stderr);
    match exit_reason {
        Some(_) => {}
        None => {
            let reason = down_reason(Some("the control client's output ended"), &last_error);
            let _ = link.send(Link::Down { reason: reason.clone() });
            let _ = events.send(Notification::Exit { reason: Some(reason) });
        }
    }
}

fn down_reason(reason: Option<&str>, last_error: &Option<String>) -> String {
    match (reason, last_error) {
        (Some(r), Some(e)) => format!("{r}: {e}"),
        (Some(r), None) => r.to_owned(),
        (None, Some(e)) => e.clone(),
        (None, None) => "tmux control client exited".to_owned(),
    }
}

async fn read_stderr(child: &mut Child) -> Option<String> {
    let mut stderr = child.stderr.take()?;
    let mut text = String::new();
    let read = tokio::time::timeout(std::time::Duration::from_secs(1), stderr.read_to_string(&mut text)).await;
    let text = text.trim().to_owned();
    (read.is_ok() && !text.is_empty()).then_some(text)
}
