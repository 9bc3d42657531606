//! The loop that keeps `<data dir>/state.json` (the read-only export,
//! [`crate::app::state_document::write_if_changed`]) current after commits — at most one rewrite
//! per [`COALESCE`], so under a stream of commits it trails the last one by well under a second.
//!
//! The document holds every agent and every history row, so building it costs more as they
//! accumulate (with 1,300 agents, a few ms of queries and JSON), while most commits (an agent's
//! state, a message) change nothing in it. So the file is written only when its bytes changed, and
//! the next build waits at least [`SHARE`] times as long as the last one took: on a large
//! installation the export trails a little more instead of taking a growing share of a core.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::app::state_document::write_if_changed;
use crate::feed::EventFeed;

/// Commits within this window share one rewrite.
const COALESCE: Duration = Duration::from_millis(200);
/// The wait after a build, as a multiple of the time it took: the export uses at most about a
/// tenth of a core.
const SHARE: u32 = 10;

/// Writes the file now and after every burst of commits until `shutdown`.
pub async fn run(pool: PgPool, feed: EventFeed, data_dir: PathBuf, shutdown: CancellationToken) {
    let mut wake = feed.subscribe();
    let mut written: Option<Vec<u8>> = None;
    loop {
        let started = Instant::now();
        match write_if_changed(&pool, &data_dir, written.as_deref()).await {
            Ok(Some(bytes)) => written = Some(bytes),
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "writing state.json"),
        }
        let rest = COALESCE.max(started.elapsed() * SHARE);
        tokio::select! {
            _ = shutdown.cancelled() => break,
            changed = wake.changed() => if changed.is_err() { break },
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep_until((started + rest).into()) => {}
        }
        wake.borrow_and_update();
    }
}
