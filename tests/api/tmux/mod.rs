//! The tmux driver against a real tmux server: each test gets its own socket, killed when the
//! test ends (pass or fail) by [`TmuxServer`]'s `Drop`.

mod control;
mod mirror;
mod paste;
mod windows;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use switchyard::tmux::{Notification, Pane, Tmux, WindowSpec};
use tokio::sync::broadcast;

pub const SESSION: &str = "node";

/// A private tmux server with one session, and a scratch directory for the panes' files.
pub struct TmuxServer {
    pub tmux: Tmux,
    pub dir: tempfile::TempDir,
}

impl TmuxServer {
    pub async fn start() -> TmuxServer {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let socket = format!(
            "sy-test-{}-{}-{:x}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            rand::random::<u16>()
        );
        let tmux = Tmux::new(socket).expect("socket name");
        tmux.ensure_session(SESSION).await.expect("start the test session");
        TmuxServer { tmux, dir: tempfile::tempdir().expect("temp dir") }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A window running `command` in the scratch directory.
    pub async fn window(&self, name: &str, command: &[&str]) -> Pane {
        let spec = WindowSpec {
            session: SESSION.into(),
            name: name.into(),
            cwd: self.dir.path().to_owned(),
            command: command.iter().map(|s| (*s).to_owned()).collect(),
            env: vec![],
        };
        self.tmux.new_window(&spec).await.expect("new window")
    }

    pub async fn window_count(&self) -> usize {
        let panes = self.tmux.list_panes(SESSION).await.expect("list panes");
        let mut windows: Vec<_> = panes.into_iter().map(|p| p.window_id).collect();
        windows.dedup();
        windows.len()
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux").args(["-L", self.tmux.socket(), "kill-server"]).output();
    }
}

/// Waits (with a deadline) until `path` exists and holds at least `len` bytes; returns them.
pub async fn file_with_len(path: &Path, len: usize) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let bytes = std::fs::read(path).ok();
        if let Some(bytes) = bytes.as_ref().filter(|b| b.len() >= len) {
            return bytes.clone();
        }
        let have = bytes.map(|b| b.len());
        assert!(Instant::now() < deadline, "timed out waiting for {len} bytes in {path:?}, have {have:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The next notification `pick` accepts, within the deadline.
pub async fn next_matching<T>(
    rx: &mut broadcast::Receiver<Notification>,
    timeout: Duration,
    mut pick: impl FnMut(&Notification) -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Ok(n)) => {
                if let Some(found) = pick(&n) {
                    return found;
                }
            }
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(e)) => panic!("notifications ended: {e}"),
            Err(_) => panic!("timed out waiting for a notification"),
        }
    }
}
