//! `<data dir>/state.json`: the read-only export in multiclaude's schema
//! ([`crate::app::state_file::document`]), rewritten atomically (a temp file, fsync, rename, fsync
//! of the directory) after commits — at most one rewrite per [`COALESCE`], so under a stream of
//! commits it trails the last one by well under a second.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::feed::EventFeed;

/// Commits within this window share one rewrite.
const COALESCE: Duration = Duration::from_millis(200);

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("state.json")
}

/// Writes the file now and after every burst of commits until `shutdown`.
pub async fn run(pool: PgPool, feed: EventFeed, data_dir: PathBuf, shutdown: CancellationToken) {
    let mut wake = feed.subscribe();
    loop {
        if let Err(e) = write_once(&pool, &data_dir).await {
            tracing::warn!(error = %e, "writing state.json");
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            changed = wake.changed() => if changed.is_err() { break },
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(COALESCE) => {}
        }
        wake.borrow_and_update();
    }
}

/// Builds the document and replaces the file with it.
pub async fn write_once(pool: &PgPool, data_dir: &Path) -> anyhow::Result<()> {
    let document = {
        let mut conn = pool.acquire().await?;
        crate::app::state_file::document(&mut conn).await.map_err(|e| anyhow::anyhow!("{e}"))?
    };
    let bytes = serde_json::to_vec_pretty(&document)?;
    let dir = data_dir.to_path_buf();
    tokio::task::spawn_blocking(move || replace(&dir, &bytes)).await??;
    Ok(())
}

fn replace(dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join("state.json.tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path(dir))?;
    std::fs::File::open(dir)?.sync_all()
}
