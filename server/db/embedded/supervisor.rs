//! Watching the embedded server: when it dies (killed, out of memory, crashed), it is reaped and
//! started again with backoff, and what happened is logged and kept for `/status`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::EmbeddedPostgres;

/// How often the server process is looked at.
const POLL: Duration = Duration::from_millis(200);
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// A server that stayed up this long starts over from the first backoff when it next dies.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// What `/status` says of the embedded server.
#[derive(Debug, Clone, Serialize)]
pub struct EmbeddedHealth {
    /// `running`, `restarting` or `stopped`.
    pub state: &'static str,
    /// How many times it was started again after dying.
    pub restarts: u64,
    /// How it last died (`signal: 9 (SIGKILL)`, `exit status: 1`), if it ever did.
    pub last_exit: Option<String>,
    pub last_exit_at: Option<DateTime<Utc>>,
    /// Why the last attempt to start it again failed, while it is restarting.
    pub last_error: Option<String>,
}

impl Default for EmbeddedHealth {
    fn default() -> Self {
        EmbeddedHealth { state: "running", restarts: 0, last_exit: None, last_exit_at: None, last_error: None }
    }
}

pub type SharedEmbeddedHealth = Arc<Mutex<EmbeddedHealth>>;

fn update(health: &SharedEmbeddedHealth, change: impl FnOnce(&mut EmbeddedHealth)) {
    if let Ok(mut h) = health.lock() {
        change(&mut h);
    }
}

impl EmbeddedPostgres {
    /// How the server exited, if it has (and reaps it).
    fn reap(&self) -> Option<String> {
        let mut slot = self.child.lock().ok()?;
        let status = slot.as_mut()?.try_wait().ok()??;
        slot.take();
        Some(status.to_string())
    }

    /// Watches the server until `stop` fires, starting it again whenever it dies.
    pub async fn supervise(self: Arc<Self>, health: SharedEmbeddedHealth, stop: CancellationToken) {
        let mut backoff = FIRST_BACKOFF;
        let mut up_since = Instant::now();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(POLL) => {}
            }
            let Some(exit) = self.reap() else { continue };
            if up_since.elapsed() > STABLE_AFTER {
                backoff = FIRST_BACKOFF;
            }
            tracing::warn!(exit = %exit, "the embedded PostgreSQL died; starting it again");
            update(&health, |h| {
                h.state = "restarting";
                h.last_exit = Some(exit);
                h.last_exit_at = Some(Utc::now());
            });
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                let restarted = tokio::select! {
                    _ = stop.cancelled() => return,
                    restarted = self.restart() => restarted,
                };
                match restarted {
                    Ok(()) => {
                        tracing::warn!("the embedded PostgreSQL is running again");
                        update(&health, |h| {
                            h.state = "running";
                            h.restarts += 1;
                            h.last_error = None;
                        });
                        up_since = Instant::now();
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "starting the embedded PostgreSQL again failed");
                        update(&health, |h| h.last_error = Some(e.to_string()));
                    }
                }
            }
        }
    }
}
