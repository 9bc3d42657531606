//! The scratch clones a queue's gates run in, one gate in each at a time (as many as the
//! project's `gate_concurrency`), and a gate's run in one: the clone cleared and checked out at
//! the projected head, the gate's process group recorded as it starts, the clone cleaned after.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::train::Round;
use super::{gate, MergeQueue, LEASE, RENEW};
use crate::app::merge_queue as use_cases;
use crate::git::merge as git;

/// The scratch clones gates run in, one gate in each at a time.
pub(super) struct Slots {
    free: Mutex<Vec<PathBuf>>,
    permits: tokio::sync::Semaphore,
    running: AtomicUsize,
    /// The most gates that ran at once.
    most: AtomicUsize,
}

/// A scratch clone a gate holds; free again when dropped.
pub(super) struct Slot<'a> {
    dir: PathBuf,
    slots: &'a Slots,
    _permit: tokio::sync::SemaphorePermit<'a>,
}

impl Slots {
    /// One scratch clone for each of `dirs`: as many gates at once.
    pub(super) fn new(dirs: Vec<PathBuf>) -> Slots {
        let gates = dirs.len();
        Slots {
            // The first taken first: where a queue's only gate runs.
            free: Mutex::new(dirs.into_iter().rev().collect()),
            permits: tokio::sync::Semaphore::new(gates),
            running: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        }
    }

    pub(super) fn most_at_once(&self) -> usize {
        self.most.load(Ordering::Relaxed)
    }

    async fn take(&self) -> Slot<'_> {
        let permit = self.permits.acquire().await.expect("the semaphore is never closed");
        let dir = self.free.lock().expect("slots lock").pop().expect("a scratch clone per permit");
        let now = self.running.fetch_add(1, Ordering::Relaxed) + 1;
        self.most.fetch_max(now, Ordering::Relaxed);
        Slot { dir, slots: self, _permit: permit }
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.slots.running.fetch_sub(1, Ordering::Relaxed);
        self.slots.free.lock().expect("slots lock").push(std::mem::take(&mut self.dir));
    }
}

impl MergeQueue {
    /// Runs the gate on `commit` in a scratch clone of its own: cleared and checked out there,
    /// its process group recorded as it starts, the clone cleaned after.
    pub(super) async fn gate_at(&self, round: &Round<'_>, commit: &str) -> crate::app::Result<gate::GateRun> {
        let slot = round.slots.take().await;
        let dir = slot.dir.clone();
        // A git run cancelled here before (a moot speculation) may have left its lock behind.
        let _ = tokio::fs::remove_file(dir.join(".git/index.lock")).await;
        git::clear_scratch(&round.repo, &dir).await?;
        git::checkout_scratch(&dir, commit).await?;
        let check = round.settings.merge_check.as_deref().unwrap_or("true");
        let timeout = std::time::Duration::from_secs(round.settings.gate_timeout_secs as u64);
        let confined = self.confinement(&round.repo);
        let (ctx, run, scratch) = (&self.ctx, self.run, dir.to_string_lossy().into_owned());
        let scratch = scratch.as_str();
        let started = move |pgid: i32, leader: String| async move {
            if let Err(e) = use_cases::gate_started(ctx, scratch, run, pgid, &leader).await {
                tracing::warn!(error = %e, "recording a gate's process group");
            }
        };
        let alive = move || async move {
            if let Err(e) = use_cases::renew_run(ctx, run, LEASE).await {
                tracing::warn!(error = %e, "renewing the merge claims");
            }
        };
        let gated = gate::run(&dir, confined.as_ref(), check, (timeout, RENEW), started, alive).await;
        use_cases::gate_ended(ctx, scratch, run).await?;
        if let Err(e) = git::tidy_scratch(&dir).await {
            tracing::debug!(error = %e, "cleaning the scratch clone");
        }
        drop(slot);
        Ok(gated)
    }
}
