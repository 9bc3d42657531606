//! The message log: every message sent through this process is appended, as one JSON
//! line, to `<data_dir>/outbox.jsonl` after it is committed. The database is the truth; this is
//! a log a person can `tail -f` or `grep`, which survives the database.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::db::messages::Message;

/// One line at a time, whole: concurrent sends never interleave within a line.
static APPEND: Mutex<()> = Mutex::new(());

pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("outbox.jsonl")
}

/// Appends the message as one line (`id`, `from`, `to`, `body`, `created_at`); a failure is
/// logged, never the sender's problem.
pub async fn append(data_dir: &Path, message: &Message) {
    let line = serde_json::json!({"id": message.id, "from": message.from, "to": message.to, "body": message.body,
        "created_at": message.created_at});
    let file = path(data_dir);
    let written = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec(&line)?;
        bytes.push(b'\n');
        let _one_at_a_time = APPEND.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Message bodies: readable by this user only.
        let mut out = std::fs::OpenOptions::new().create(true).append(true).mode(0o600).open(&file)?;
        out.write_all(&bytes)
    })
    .await;
    match written {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "appending to the outbox file"),
        Err(e) => tracing::warn!(error = %e, "appending to the outbox file"),
    }
}
