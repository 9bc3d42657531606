//! Reading an agent's token use from the transcript its hooks name (`transcript_path`), a little
//! more at each hook: from where the last reading stopped, at most [`MAX_READ`] at a time, whole
//! lines only. The path comes from an untrusted agent, so only an absolute path to a regular
//! `.jsonl` file is read, and what is read only ever adds token counts. The file is read on the
//! machine that takes the hook (one node: the agent's); elsewhere the path does not exist and
//! nothing is counted.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use uuid::Uuid;

use super::{Ctx, Result};
use crate::db::agent_usage;
use crate::domain::usage::{read_chunk, Usage};

/// The most read at one hook; a longer transcript is caught up at the next ones.
const MAX_READ: u64 = 4 << 20;

/// Reads what was added to the transcript at `path` since the last reading and adds its usage.
#[tracing::instrument(skip_all, fields(agent = %agent_id), err(level = "debug"))]
pub async fn read_transcript(ctx: &Ctx, agent_id: Uuid, path: &str) -> Result<Usage> {
    let file = Path::new(path);
    if !file.is_absolute() || file.extension().is_none_or(|e| e != "jsonl") {
        return Ok(Usage::default());
    }
    let mut tx = ctx.db.begin().await?;
    let mut progress = agent_usage::lock(&mut tx, agent_id, path).await?;
    let offset = u64::try_from(progress.read_offset).unwrap_or(0);
    let owned = file.to_owned();
    let bytes = tokio::task::spawn_blocking(move || read_from(&owned, offset))
        .await
        .map_err(|e| anyhow::anyhow!("reading the transcript: {e}"))?;
    let Some(bytes) = bytes else { return Ok(Usage::default()) };
    let chunk = read_chunk(&bytes, progress.last_message.take());
    progress.read_offset += i64::try_from(chunk.consumed).unwrap_or(0);
    progress.last_message = chunk.last_message;
    agent_usage::add(&mut tx, agent_id, &progress, &chunk.usage).await?;
    tx.commit().await?;
    Ok(chunk.usage)
}

/// Up to [`MAX_READ`] bytes of the regular file at `path` from `offset`; `None` when it is not
/// one (missing, a directory, a device).
fn read_from(path: &Path, offset: u64) -> Option<Vec<u8>> {
    let mut file = std::fs::File::open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_READ).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}
