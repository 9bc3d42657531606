//! `<data dir>/state.json`: the read-only export in multiclaude's schema
//! ([`crate::app::state_file::document`]), rewritten atomically (a temp file, fsync, rename, fsync
//! of the directory) after commits — at most one rewrite per [`COALESCE`], so under a stream of
//! commits it trails the last one by well under a second.
//!
//! The document holds every agent and every history row, so building it costs more as they
//! accumulate (with 1,300 agents, a few ms of queries and JSON), while most commits (an agent's
//! state, a message) change nothing in it. So the file is written only when its bytes changed, and
//! the next build waits at least [`SHARE`] times as long as the last one took: on a large
//! installation the export trails a little more instead of taking a growing share of a core.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::feed::EventFeed;

/// Commits within this window share one rewrite.
const COALESCE: Duration = Duration::from_millis(200);
/// The wait after a build, as a multiple of the time it took: the export uses at most about a
/// tenth of a core.
const SHARE: u32 = 10;

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("state.json")
}

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

/// Builds the document and replaces the file with it unless the file holds `written` already;
/// answers the bytes written, if it wrote.
async fn write_if_changed(pool: &PgPool, data_dir: &Path, written: Option<&[u8]>) -> anyhow::Result<Option<Vec<u8>>> {
    let document = {
        let mut conn = pool.acquire().await?;
        crate::app::state_file::document(&mut conn).await.map_err(|e| anyhow::anyhow!("{e}"))?
    };
    let bytes = serde_json::to_vec_pretty(&document)?;
    // A file removed by hand is written again even when nothing changed.
    if written == Some(bytes.as_slice()) && path(data_dir).exists() {
        return Ok(None);
    }
    let dir = data_dir.to_path_buf();
    let bytes = tokio::task::spawn_blocking(move || replace(&dir, &bytes).map(|()| bytes)).await??;
    Ok(Some(bytes))
}

fn replace(dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = dir.join("state.json.tmp");
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path(dir))?;
    std::fs::File::open(dir)?.sync_all()
}
