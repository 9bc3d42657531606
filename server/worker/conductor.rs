//! The conductor's loop on this node: [`crate::app::conductor::tick`] whenever something
//! happened (the event feed) and at least every [`EVERY`]. Every `serve` and `worker` process
//! runs one; the steps claim their rows, so each happens once across nodes.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::app::{conductor, Ctx};

/// The longest wait between two ticks when nothing is announced. Every commit anywhere (this
/// process's, or another node's through `LISTEN`) wakes the loop at once; the timer is only for
/// what time alone makes due (a usage limit's reset, an agent idle long enough for its next
/// iteration), so it can be slow: an idle conductor costs its dozen small queries every 2 s.
const EVERY: Duration = Duration::from_secs(2);

pub struct Conductor {
    pub ctx: Ctx,
}

impl Conductor {
    /// Ticks until `shutdown`; a tick that did something is followed at once by another.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut events = self.ctx.feed.subscribe();
        loop {
            let did = conductor::tick(&self.ctx).await;
            if did.did_something() {
                tracing::debug!(?did, "conductor tick");
                continue;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                // A feed that closed never wakes the loop again; the timer still does.
                _ = async { if events.changed().await.is_err() { std::future::pending::<()>().await } } => {}
                _ = tokio::time::sleep(EVERY) => {}
            }
        }
    }
}
