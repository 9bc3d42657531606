//! The conductor's loops on this node, side by side: the steps on a group's way
//! ([`conductor::tick_groups`]) whenever something happened (the event feed), and the other steps
//! ([`conductor::tick_rest`]) at most every [`REST_GAP`] and at least every [`EVERY`]. Every
//! `serve` and `worker` process runs them; the steps claim their rows, so each happens once
//! across nodes (and the two loops of one process are no different).

use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::app::{conductor, Ctx};

/// The longest wait between two ticks when nothing is announced. Every commit anywhere (this
/// process's, or another node's through `LISTEN`) wakes the loops at once; the timer is only for
/// what time alone makes due (a usage limit's reset, an agent idle long enough for its next
/// iteration), so it can be slow: an idle conductor costs its dozen small queries every 2 s.
const EVERY: Duration = Duration::from_secs(2);
/// The shortest time between two ticks of the other steps: a busy fleet's stream of commits does
/// not run every step's queries for each of them.
const REST_GAP: Duration = Duration::from_millis(500);
/// The rest after a wake before the group steps look: a fleet at work commits hundreds of times a
/// second (agents' states, messages), and the commits of this moment wake one tick, not one each.
const GROUP_GAP: Duration = Duration::from_millis(10);

pub struct Conductor {
    pub ctx: Ctx,
}

impl Conductor {
    /// Ticks until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        tokio::join!(self.groups(&shutdown), self.rest(&shutdown));
    }

    /// The steps on a group's way: a tick that did something is followed at once by another.
    async fn groups(&self, shutdown: &CancellationToken) {
        let mut events = self.ctx.feed.subscribe();
        loop {
            let did = conductor::tick_groups(&self.ctx).await;
            if did.did_something() {
                tracing::debug!(?did, "conductor: groups");
                continue;
            }
            if !wait(shutdown, &mut events, Instant::now() + EVERY).await {
                return;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(GROUP_GAP) => {}
            }
        }
    }

    /// The other steps: after a tick, the next one waits for a commit (or [`EVERY`]), and for
    /// [`REST_GAP`] since the last.
    async fn rest(&self, shutdown: &CancellationToken) {
        let mut events = self.ctx.feed.subscribe();
        loop {
            let started = Instant::now();
            let did = conductor::tick_rest(&self.ctx).await;
            if did.did_something() {
                tracing::debug!(?did, "conductor: other steps");
            } else if !wait(shutdown, &mut events, started + EVERY).await {
                return;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep_until((started + REST_GAP).into()) => {}
            }
        }
    }
}

/// Waits for a commit or `until`; `false` at shutdown.
async fn wait(shutdown: &CancellationToken, events: &mut watch::Receiver<u64>, until: Instant) -> bool {
    tokio::select! {
        _ = shutdown.cancelled() => false,
        // A feed that closed never wakes the loop again; the timer still does.
        _ = async { if events.changed().await.is_err() { std::future::pending::<()>().await } } => true,
        _ = tokio::time::sleep_until(until.into()) => true,
    }
}
