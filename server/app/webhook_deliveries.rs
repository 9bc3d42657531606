//! Sending webhook deliveries, the use cases of the sender's loops
//! (the worker's webhook sender): [`Deliveries::claim`] turns outbox rows into deliveries and
//! claims due ones with a lease; [`Deliveries::send_and_record`] sends them concurrently and
//! records each result. A sender killed mid-flight leaves leases that expire, and another claim
//! (on any replica) sends those deliveries again — at least once, never lost.
//!
//! Writers queue deliveries as outbox rows, one per event that subscriptions want, written by
//! the database in the statement that records the event (migration 0012); each claim first turns
//! outbox rows into deliveries, one per subscription, in the transaction that claims them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use sqlx::PgPool;

use super::Result;
use crate::db::spare_connections::SpareConnections;
use crate::db::webhook_deliveries::{self, AttemptResult, Claimed, DueCheck};
use crate::db::webhooks;
use crate::domain::webhook::{next_retry, parse_retry_after};
use crate::domain::webhook_format::render;
use crate::feed::EventFeed;
use crate::webhooks::WebhookSettings;
use crate::webhooks::{signature, ssrf};

/// The sender's own pool, of the node's few connections (`db::SENDER_CONNECTIONS`), to the
/// database `options` name: the loops' statements are short, and the sending between them holds
/// none. Made inside the sender's own runtime (a connection serves the runtime that opened it).
pub fn sender_pool(options: sqlx::postgres::PgConnectOptions) -> PgPool {
    crate::db::beside(options, crate::db::SENDER_CONNECTIONS)
}

/// The most deliveries one claim takes.
pub const BATCH: usize = 64;

#[derive(Clone)]
pub struct Deliveries {
    pool: PgPool,
    feed: EventFeed,
    client: reqwest::Client,
    settings: Arc<WebhookSettings>,
    /// Outlasts an attempt (its timeout) so a live sender never loses its claim.
    lease: Duration,
    /// The connection [`Deliveries::due_check`] keeps: it runs often.
    spare: Arc<SpareConnections>,
}

/// What one claim and send did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TickOutcome {
    pub attempted: usize,
    pub succeeded: usize,
}

impl Deliveries {
    pub fn new(pool: PgPool, feed: EventFeed, settings: Arc<WebhookSettings>) -> Deliveries {
        let client = ssrf::client(Arc::new(settings.allowed_hosts.clone()), settings.timeout);
        let lease = settings.timeout * 2 + Duration::from_secs(1);
        let spare = Arc::new(SpareConnections::new(pool.clone(), 1));
        Deliveries { pool, feed, client, settings, lease, spare }
    }

    /// Turns outbox rows into deliveries and claims up to [`BATCH`] due ones, in one transaction.
    pub async fn claim(&self) -> Result<Vec<Claimed>> {
        let mut tx = self.pool.begin().await?;
        relaxed_commit(&mut tx).await?;
        webhook_deliveries::expand_outbox(&mut tx, BATCH as i64).await?;
        let claimed = webhook_deliveries::claim(&mut tx, BATCH as i64, self.lease).await?;
        tx.commit().await?;
        Ok(claimed)
    }

    /// Sends the `claimed` deliveries concurrently, and records every result in one
    /// transaction; returns when every one has a result.
    pub async fn send_and_record(&self, claimed: &[Claimed]) -> Result<TickOutcome> {
        if claimed.is_empty() {
            return Ok(TickOutcome::default());
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

    /// Whether any subscription is enabled and any delivery is due (or outbox rows wait), on the
    /// connection this keeps.
    pub async fn due_check(&self) -> Result<DueCheck> {
        let mut conn = self.spare.take().await?;
        let found = webhook_deliveries::due_check(&mut conn).await;
        self.spare.give_back(conn, &found);
        Ok(found?)
    }

    /// How long until the earliest pending delivery can be claimed; `None` when none is pending.
    pub async fn next_due_in(&self) -> Result<Option<Duration>> {
        let mut conn = self.pool.acquire().await?;
        Ok(webhook_deliveries::next_due_in(&mut conn).await?)
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
