//! The delivery loop. Each `tick` claims due deliveries with a lease, sends them concurrently,
//! and records each result; a sender killed mid-flight leaves leases that expire, and another
//! tick (on any replica) sends those deliveries again — at least once, never lost.
//!
//! Writers queue deliveries as outbox rows, one per event that subscriptions want, written by
//! the database in the statement that records the event (migration 0012); each tick first turns
//! outbox rows into deliveries, one per subscription, in the transaction that claims them. A
//! writer sends the senders no notification: they learn of new work from the events wake-up every
//! commit gives (`EventFeed`), after which one statement asks whether there is any, at most once
//! per [`CHECK_SPACING`] — and, while no subscription is enabled, at most once per
//! [`UNSUBSCRIBED_RECHECK`], commits unheeded: then no commit can have queued anything (a
//! worker's state changes paid one statement each for nothing).
//!
//! A process's senders run on a thread of their own at a lower priority
//! ([`Sender::run_in_background`]): delivery stays off the request path in CPU as well.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::config::WebhookSettings;
use crate::db::spare_connections::SpareConnections;
use crate::db::webhook_deliveries::{self, AttemptResult, Claimed};
use crate::db::webhooks;
use crate::domain::webhook::{next_retry, parse_retry_after};
use crate::domain::webhook_format::render;
use crate::feed::EventFeed;
use crate::webhooks::{signature, ssrf};

const BATCH: i64 = 64;
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

#[derive(Clone)]
pub struct Sender {
    pool: PgPool,
    feed: EventFeed,
    client: reqwest::Client,
    settings: Arc<WebhookSettings>,
    /// Outlasts an attempt (its timeout) so a live sender never loses its claim.
    lease: Duration,
    /// Told when a tick claimed a full batch, so another loop claims the next one meanwhile.
    more: Option<Arc<tokio::sync::Notify>>,
}

/// What one tick did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TickOutcome {
    pub attempted: usize,
    pub succeeded: usize,
}

impl Sender {
    pub fn new(pool: PgPool, feed: EventFeed, settings: Arc<WebhookSettings>) -> Sender {
        let client = ssrf::client(Arc::new(settings.allowed_hosts.clone()), settings.timeout);
        let lease = settings.timeout * 2 + Duration::from_secs(1);
        Sender { pool, feed, client, settings, lease, more: None }
    }

    /// Turns outbox rows into deliveries, claims due deliveries (one transaction), sends them
    /// concurrently, and records every result in one transaction; returns when every claimed
    /// delivery has a result.
    pub async fn tick(&self) -> anyhow::Result<TickOutcome> {
        let claimed = {
            let mut tx = self.pool.begin().await?;
            relaxed_commit(&mut tx).await?;
            webhook_deliveries::expand_outbox(&mut tx, BATCH).await?;
            let claimed = webhook_deliveries::claim(&mut tx, BATCH, self.lease).await?;
            tx.commit().await?;
            claimed
        };
        if claimed.is_empty() {
            return Ok(TickOutcome::default());
        }
        if let Some(more) = self.more.as_ref().filter(|_| claimed.len() >= BATCH as usize) {
            more.notify_one();
        }
        let sent = futures_util::future::join_all(claimed.iter().map(|c| self.send(c))).await;
        let mut tx = self.pool.begin().await?;
        relaxed_commit(&mut tx).await?;
        let mut outcome = TickOutcome { attempted: claimed.len(), succeeded: 0 };
        let mut delivered = Vec::new();
        // A subscription disabled here is an event; the results alone are not.
        let mut disabled = false;
        for (claim, attempt) in claimed.iter().zip(sent) {
            let result = AttemptResult {
                status_code: attempt.status.map(i32::from),
                error: attempt.error.as_deref(),
                duration_ms: attempt.duration_ms,
            };
            match attempt.status {
                Some(code) if (200..300).contains(&code) => delivered.push((claim, attempt.duration_ms, code)),
                Some(410) => {
                    webhook_deliveries::failed(&mut tx, claim, &result, None).await?;
                    disabled |=
                        webhooks::disable(&mut tx, claim.subscription_id, "the endpoint answered 410 Gone").await?;
                }
                _ => disabled |= self.record_failure(&mut tx, claim, &result, attempt.retry_after).await?,
            }
        }
        outcome.succeeded = webhook_deliveries::succeeded(&mut tx, &delivered).await?;
        if disabled {
            self.feed.commit(tx).await?;
        } else {
            tx.commit().await?;
        }
        Ok(outcome)
    }

    /// Runs [`Self::run`] on a thread of its own, at a lower CPU priority than the API, and
    /// resolves when it has drained. Sending shares no tokio worker with request handlers (a
    /// burst of deliveries would queue them), and when the two want the same CPU the kernel
    /// serves the API first: delivery stays off the request path under load too. The thread
    /// opens its own connections to `pool`'s database (a connection serves the runtime that
    /// opened it).
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
                let pool = crate::db::beside(options, LOOPS as u32 + 1);
                Sender::new(pool.clone(), feed, settings).run(shutdown).await;
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

    /// Runs `LOOPS` delivery loops until `shutdown`: each ticks when woken, and keeps ticking
    /// while it claims full batches. [`Self::watch`] wakes one loop when a delivery is due, and
    /// a loop that claimed a full batch wakes another, so a backlog is sent by every loop at
    /// once while a trickle costs one claim per wake, not one per loop. The loops do not poll
    /// on their own: one watcher's statement a second does it for all of them.
    pub async fn run(self, shutdown: CancellationToken) {
        let wake = Arc::new(tokio::sync::Notify::new());
        let sender = Sender { more: Some(wake.clone()), ..self };
        let watcher = sender.watch(&wake, shutdown.clone());
        let loops = (0..LOOPS).map(|_| {
            let (sender, wake, shutdown) = (sender.clone(), wake.clone(), shutdown.clone());
            async move {
                while !shutdown.is_cancelled() {
                    match sender.tick().await {
                        Ok(outcome) if outcome.attempted >= BATCH as usize => continue,
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "webhook delivery tick failed"),
                    }
                    let wait = sender.until_next_due().await;
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

    /// After commits (this process's, or another's through its notification) and at least every
    /// [`POLL`] (a lost notification, another sender's lease running out), asks whether a
    /// delivery is due, and wakes a loop when one is.
    async fn watch(&self, wake: &tokio::sync::Notify, shutdown: CancellationToken) {
        let mut commits = self.feed.subscribe();
        let spare = SpareConnections::new(self.pool.clone(), 1);
        let mut unsubscribed_at: Option<Instant> = None;
        loop {
            match unsubscribed_at.map(|at| UNSUBSCRIBED_RECHECK.saturating_sub(at.elapsed())) {
                // No subscription is enabled, so no commit can have queued anything: sleep
                // through them (each would wake this thread for nothing) until the recheck.
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
            let found = match spare.take().await {
                Ok(mut conn) => {
                    let found = webhook_deliveries::due_check(&mut conn).await;
                    spare.give_back(conn, &found);
                    found
                }
                Err(e) => Err(e),
            };
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

    /// How long until the earliest pending delivery can be claimed; `None` when none is pending
    /// (the watcher wakes a loop when one comes). A failed read is tried again after [`POLL`].
    async fn until_next_due(&self) -> Option<Duration> {
        let due = match self.pool.acquire().await {
            Ok(mut conn) => webhook_deliveries::next_due_in(&mut conn).await,
            Err(e) => Err(e),
        };
        // A due row that is leased by another sender would make this zero: wait a little then.
        due.map_or(Some(POLL), |due| due.map(|d| d.max(Duration::from_millis(5))))
    }

    /// One attempt over the network; nothing is written here.
    async fn send(&self, claim: &Claimed) -> Attempt {
        let started = Instant::now();
        let format = claim.format.parse().unwrap_or_default();
        let rendered = render(format, &claim.body, self.settings.dashboard_url.as_deref());
        let body = rendered.body;
        let timestamp = chrono::Utc::now().timestamp();
        let secrets = webhooks::signing_secrets(&claim.secret, claim.previous_secret.as_deref());
        let signature = signature::signature_header(&secrets, &claim.message_id, timestamp, &body);
        let url = match self.settings.allowed_hosts.check_url(&claim.url) {
            Ok(url) => url,
            Err(why) => return Attempt::error(format!("refused: {why}"), started),
        };
        let mut request = self
            .client
            .post(url)
            .header("content-type", rendered.content_type)
            .header("webhook-id", &claim.message_id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature);
        for (name, value) in rendered.headers {
            request = request.header(name, value);
        }
        let sent = request.body(body).send().await;
        match sent {
            Err(e) => Attempt::error(error_chain(&e), started),
            Ok(response) => Attempt {
                status: Some(response.status().as_u16()),
                error: None,
                retry_after: response
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| parse_retry_after(v, chrono::Utc::now())),
                duration_ms: millis(started),
            },
        }
    }

    /// Records a failed attempt and when to retry it; true when the subscription, failing for
    /// too long, was disabled.
    async fn record_failure(
        &self,
        tx: &mut sqlx::PgConnection,
        claim: &Claimed,
        result: &AttemptResult<'_>,
        retry_after: Option<Duration>,
    ) -> Result<bool, sqlx::Error> {
        let jitter = rand::thread_rng().gen::<f64>();
        let retry_in = next_retry(&self.settings.retry_schedule, claim.attempts.max(0) as u32, jitter, retry_after);
        webhook_deliveries::failed(tx, claim, result, retry_in).await?;
        let failing_for = claim.failing_since.map(|since| chrono::Utc::now() - since);
        let limit = chrono::Duration::from_std(self.settings.disable_after).unwrap_or(chrono::Duration::MAX);
        if failing_for.is_some_and(|f| f > limit) {
            let reason = format!("every delivery failed for over {}", humane(self.settings.disable_after));
            return webhooks::disable(tx, claim.subscription_id, &reason).await;
        }
        Ok(false)
    }
}

/// What one attempt got back.
struct Attempt {
    status: Option<u16>,
    error: Option<String>,
    retry_after: Option<Duration>,
    duration_ms: i32,
}

impl Attempt {
    fn error(error: String, started: Instant) -> Attempt {
        Attempt { status: None, error: Some(error), retry_after: None, duration_ms: millis(started) }
    }
}

fn millis(started: Instant) -> i32 {
    started.elapsed().as_millis().min(i32::MAX as u128) as i32
}

/// The sender's own bookkeeping commits without waiting for the disk: if the database crashes
/// before it is flushed, a claim or a result is lost and the delivery is simply sent again —
/// at-least-once either way — while each commit stops costing an fsync.
async fn relaxed_commit(tx: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query!("SET LOCAL synchronous_commit = off").execute(tx).await?;
    Ok(())
}

/// An error with its causes, e.g. `error sending request: refused to connect to localhost: …`.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn humane(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        s if s >= 86400 && s % 86400 == 0 => format!("{} days", s / 86400),
        s if s >= 3600 => format!("{} hours", s / 3600),
        s if s >= 1 => format!("{s} seconds"),
        _ => format!("{} ms", d.as_millis()),
    }
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
