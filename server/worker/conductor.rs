//! The conductor's loop on this node: [`crate::app::conductor::tick`] whenever something
//! happened (the event feed), its full tick at most every [`FULL_GAP`] and at least every
//! [`EVERY`]. Every `serve` and `worker` process runs one; the steps claim their rows, so each
//! happens once across nodes.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::app::{conductor, Ctx};

/// The longest wait between two full ticks when nothing is announced. Every commit anywhere
/// (this process's, or another node's through `LISTEN`) wakes the loop at once; the timer is only
/// for what time alone makes due (a usage limit's reset, an agent idle long enough for its next
/// iteration), so it can be slow: an idle conductor costs its dozen small queries every 2 s.
const EVERY: Duration = Duration::from_secs(2);
/// The shortest time between two full ticks. A commit wakes a tick of the steps on a group's way
/// at once; the other steps follow within this gap, so a busy fleet's stream of commits does not
/// run every step's queries for each of them.
const FULL_GAP: Duration = Duration::from_millis(500);

pub struct Conductor {
    pub ctx: Ctx,
}

impl Conductor {
    /// Ticks until `shutdown`; a tick that did something is followed at once by another.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut events = self.ctx.feed.subscribe();
        let mut last_full = Instant::now();
        // A commit came since the last full tick: the next one is due at `last_full + FULL_GAP`.
        let mut owed = true;
        loop {
            let all = owed && last_full.elapsed() >= FULL_GAP;
            if all {
                (last_full, owed) = (Instant::now(), false);
            }
            let did = conductor::tick(&self.ctx, all).await;
            if did.did_something() {
                tracing::debug!(?did, "conductor tick");
                owed = true;
                continue;
            }
            let full_at = if owed { last_full + FULL_GAP } else { last_full + EVERY };
            tokio::select! {
                _ = shutdown.cancelled() => return,
                // A feed that closed never wakes the loop again; the timer still does.
                _ = async { if events.changed().await.is_err() { std::future::pending::<()>().await } } => owed = true,
                _ = tokio::time::sleep_until(full_at.into()) => owed = true,
            }
        }
    }
}
