//! The webhook sender's loops: they claim and send due deliveries
//! ([`crate::app::webhook_deliveries`]) when a watcher finds some. A writer sends the senders no
//! notification: they learn of new work from the events wake-up every commit gives
//! (`EventFeed`), after which one statement asks whether there is any, at most once per
//! [`CHECK_SPACING`] — and, while no subscription is enabled, at most once per
//! [`UNSUBSCRIBED_RECHECK`], commits unheeded: then no commit can have queued anything (a
//! worker's state changes paid one statement each for nothing).
//!
//! A process's senders run on a thread of their own at a lower priority ([`run_in_background`]):
//! delivery stays off the request path in CPU as well.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::PgPool;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::app::webhook_deliveries::{Deliveries, TickOutcome, BATCH};
use crate::feed::EventFeed;
use crate::webhooks::WebhookSettings;

/// Loops per process: a slow receiver holds up one of them, not all deliveries.
const LOOPS: usize = 4;
/// The least time between two checks for due deliveries after commits: under a stream of
/// commits (most of which queue nothing) the check costs one statement per interval, not one per
/// commit. The first commit after a quiet spell is checked at once.
const CHECK_SPACING: Duration = Duration::from_millis(20);
/// The watcher checks at least this often, commits or not.
const POLL: Duration = Duration::from_secs(1);
/// How long commits go unchecked after a check found no subscription enabled. A subscription
/// enabled meanwhile has its first deliveries found by the next check or poll.
const UNSUBSCRIBED_RECHECK: Duration = Duration::from_secs(1);
/// How much nicer than the API the sender thread is, so the API wins a contended CPU.
const BACKGROUND_NICENESS: i32 = 10;

/// Runs [`run`] on a thread of its own, at a lower CPU priority than the API, and resolves when
/// it has drained. Sending shares no tokio worker with request handlers (a burst of deliveries
/// would queue them), and when the two want the same CPU the kernel serves the API first:
/// delivery stays off the request path under load too. The thread opens its own connections to
/// `pool`'s database (a connection serves the runtime that opened it).
pub fn run_in_background(
    pool: &PgPool,
    feed: EventFeed,
    settings: Arc<WebhookSettings>,
    shutdown: CancellationToken,
) -> impl std::future::Future<Output = ()> {
    let options = (*pool.connect_options()).clone();
    let (done, drained) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new().name("webhook-sender".into()).spawn(move || {
        lower_this_threads_priority(BACKGROUND_NICENESS);
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(runtime) => runtime,
            Err(e) => return tracing::error!(error = %e, "cannot start the webhook sender's runtime"),
        };
        runtime.block_on(async move {
            let pool = crate::app::webhook_deliveries::sender_pool(options);
            run(Deliveries::new(pool.clone(), feed.clone(), settings), feed, shutdown).await;
            pool.close().await;
        });
        drop(done);
    });
    if let Err(e) = &thread {
        tracing::error!(error = %e, "cannot start the webhook sender's thread");
    }
    async move {
        // Resolves when the thread drops `done`: it finished, or never started.
        let _ = drained.await;
    }
}

/// Runs `LOOPS` delivery loops until `shutdown`: each ticks when woken, and keeps ticking while
/// it claims full batches. [`watch`] wakes one loop when a delivery is due, and a loop that
/// claimed a full batch wakes another, so a backlog is sent by every loop at once while a trickle
/// costs one claim per wake, not one per loop. The loops do not poll on their own: one watcher's
/// statement a second does it for all of them.
pub async fn run(deliveries: Deliveries, feed: EventFeed, shutdown: CancellationToken) {
    let wake = Arc::new(Notify::new());
    let watcher = watch(&deliveries, &feed, &wake, shutdown.clone());
    let loops = (0..LOOPS).map(|_| {
        let (deliveries, wake, shutdown) = (deliveries.clone(), wake.clone(), shutdown.clone());
        async move {
            while !shutdown.is_cancelled() {
                match tick(&deliveries, &wake).await {
                    Ok(outcome) if outcome.attempted >= BATCH => continue,
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "webhook delivery tick failed"),
                }
                let wait = until_next_due(&deliveries).await;
                tokio::select! {
                    _ = shutdown.cancelled() => {}
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(wait.unwrap_or(Duration::MAX)), if wait.is_some() => {}
                }
            }
        }
    });
    tokio::join!(watcher, futures_util::future::join_all(loops));
}

/// Claims due deliveries, sends them and records each result; a full batch claimed wakes
/// another loop first, to claim the next one meanwhile.
async fn tick(deliveries: &Deliveries, more: &Notify) -> crate::app::Result<TickOutcome> {
    let claimed = deliveries.claim().await?;
    if claimed.len() >= BATCH {
        more.notify_one();
    }
    deliveries.send_and_record(&claimed).await
}

/// After commits (this process's, or another's through its notification) and at least every
/// [`POLL`] (a lost notification, another sender's lease running out), asks whether a delivery
/// is due, and wakes a loop when one is.
async fn watch(deliveries: &Deliveries, feed: &EventFeed, wake: &Notify, shutdown: CancellationToken) {
    let mut commits = feed.subscribe();
    let mut unsubscribed_at: Option<Instant> = None;
    loop {
        match unsubscribed_at.map(|at| UNSUBSCRIBED_RECHECK.saturating_sub(at.elapsed())) {
            // No subscription is enabled, so no commit can have queued anything: sleep through
            // them (each would wake this thread for nothing) until the recheck.
            Some(rest) => tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(rest) => {}
            },
            None => tokio::select! {
                _ = shutdown.cancelled() => return,
                changed = commits.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(POLL) => {}
            },
        }
        commits.borrow_and_update();
        let found = deliveries.due_check().await;
        unsubscribed_at = match found {
            Ok(check) if !check.subscribed => Some(Instant::now()),
            _ => None,
        };
        match found {
            Ok(check) if check.due => wake.notify_one(),
            Ok(_) => {}
            // The next check or poll finds what this missed.
            Err(e) => tracing::warn!(error = %e, "cannot check for due webhook deliveries"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(CHECK_SPACING) => {}
        }
    }
}

/// How long until the earliest pending delivery can be claimed; `None` when none is pending (the
/// watcher wakes a loop when one comes). A failed read is tried again after [`POLL`].
async fn until_next_due(deliveries: &Deliveries) -> Option<Duration> {
    // A due row that is leased by another sender would make this zero: wait a little then.
    deliveries.next_due_in().await.map_or(Some(POLL), |due| due.map(|d| d.max(Duration::from_millis(5))))
}

/// Raises the calling thread's nice value by `by` (Linux keeps one per thread; threads it
/// starts inherit it). Lowering one's own priority needs no privilege; should it fail, the
/// thread runs at the usual priority.
fn lower_this_threads_priority(by: i32) {
    // SAFETY: getpriority and setpriority only read their integer arguments; `who` 0 is the
    // calling thread. (A nice value of -1 reads like an error; taken as is, it is still right.)
    let failed = unsafe {
        let now = libc::getpriority(libc::PRIO_PROCESS, 0);
        libc::setpriority(libc::PRIO_PROCESS, 0, (now + by).min(19))
    } != 0;
    if failed {
        tracing::debug!(error = %std::io::Error::last_os_error(), "cannot lower the webhook sender's priority");
    }
}
