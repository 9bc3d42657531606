//! The merge queue's loop: a pass ([`MergeQueue::tick`], in `app`) after every commit anywhere
//! (the feed), at least every [`POLL`]; a pass that merged is followed at once by another.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::app::merge_queue::gate::GateSettings;
use crate::app::merge_queue::MergeQueue;
use crate::app::Ctx;

/// The longest rest between passes when nothing wakes the loop.
const POLL: Duration = Duration::from_secs(2);
/// The shortest time between two passes: commits of our own wake the loop too.
const GAP: Duration = Duration::from_millis(50);

/// Passes until `shutdown`, gates run with `gate`.
pub async fn run(ctx: Ctx, gate: GateSettings, shutdown: CancellationToken) {
    let mut wake = ctx.feed.subscribe();
    let queue = MergeQueue::new(ctx).with_gate(gate);
    loop {
        match queue.tick().await {
            // Another entry may be free to go at once: a queue of many pays no rest per merge.
            Ok(tick) if !tick.processed.is_empty() && !shutdown.is_cancelled() => continue,
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "merge queue pass"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(POLL) => {}
            _ = wake.changed() => {}
        }
        tokio::time::sleep(GAP).await;
    }
    tracing::info!("merge queue stopped");
}
