//! The webhook outbox's rows after they are written: the delivery log, claiming due rows with a
//! lease (`FOR UPDATE SKIP LOCKED`, so any number of senders can share the work), and recording
//! each attempt's result. A result is written only by the attempt that holds the claim.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

/// One delivery in the log.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "0e3c5a4e-8a1b-4f7e-9d2a-6b1c2d3e4f50", "message_id": "msg_0e3c5a4e8a1b4f7e9d2a6b1c2d3e4f50",
    "event_id": 42, "event_type": "task.completed", "status": "pending", "attempts": 2,
    "next_attempt_at": "2025-01-15T10:35:05Z", "last_status_code": 503, "last_error": null, "last_duration_ms": 48,
    "delivered_at": null, "created_at": "2025-01-15T10:30:00Z", "updated_at": "2025-01-15T10:30:05Z"}))]
pub struct Delivery {
    pub id: Uuid,
    /// The `webhook-id` header: the same on every attempt and redelivery.
    pub message_id: String,
    pub event_id: Option<i64>,
    pub event_type: String,
    /// `pending` (waiting or being sent), `succeeded` or `failed` (retries used up, or 410).
    #[schema(example = "pending")]
    pub status: String,
    pub attempts: i32,
    pub next_attempt_at: DateTime<Utc>,
    /// The receiver's answer to the last attempt.
    pub last_status_code: Option<i32>,
    /// Why the last attempt failed without an answer (refused address, timeout, …).
    pub last_error: Option<String>,
    pub last_duration_ms: Option<i32>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A claimed delivery, with what the sender needs to send it. Not `Debug`: it holds the secrets.
pub struct Claimed {
    pub id: Uuid,
    pub subscription_id: Uuid,
    pub message_id: String,
    pub attempts: i32,
    pub url: String,
    pub secret: String,
    pub previous_secret: Option<String>,
    pub body: serde_json::Value,
    pub failing_since: Option<DateTime<Utc>>,
    /// The subscription's format (`standard`, `slack`, `ntfy`).
    pub format: String,
}

/// A subscription's deliveries, newest first, `limit + 1` rows before (`created_at`, `id`).
#[tracing::instrument(skip_all, fields(subscription = %subscription), err(level = "debug"))]
pub async fn list(
    conn: &mut PgConnection,
    subscription: Uuid,
    before: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Delivery>, sqlx::Error> {
    let (at, id) = before.unzip();
    sqlx::query_as!(
        Delivery,
        r#"SELECT id, message_id, event_id, event_type, status, attempts, next_attempt_at, last_status_code,
                  last_error, last_duration_ms, delivered_at, created_at, updated_at
           FROM webhook_deliveries
           WHERE subscription_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) < ($2, $3))
           ORDER BY created_at DESC, id DESC LIMIT $4"#,
        subscription,
        at,
        id,
        limit + 1
    )
    .fetch_all(conn)
    .await
}

/// Claims up to `limit` due deliveries of enabled subscriptions for `lease`; counts the attempt.
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn claim(conn: &mut PgConnection, limit: i64, lease: Duration) -> Result<Vec<Claimed>, sqlx::Error> {
    sqlx::query_as!(
        Claimed,
        r#"WITH claimed AS (
             UPDATE webhook_deliveries d
             SET attempts = d.attempts + 1, leased_until = now() + make_interval(secs => $2), updated_at = now()
             WHERE d.id IN (
               SELECT d2.id FROM webhook_deliveries d2
               JOIN webhook_subscriptions s2 ON s2.id = d2.subscription_id
               WHERE d2.status = 'pending' AND d2.next_attempt_at <= now()
                 AND (d2.leased_until IS NULL OR d2.leased_until < now()) AND s2.enabled
               ORDER BY d2.next_attempt_at
               LIMIT $1
               FOR UPDATE OF d2 SKIP LOCKED)
             RETURNING d.id, d.subscription_id, d.message_id, d.attempts, d.event_id, d.event_type, d.body)
           SELECT c.id AS "id!", c.subscription_id AS "subscription_id!", c.message_id AS "message_id!",
                  c.attempts AS "attempts!", s.url, s.secret, s.failing_since, s.format,
                  CASE WHEN s.previous_secret_expires_at > now() THEN s.previous_secret END AS previous_secret,
                  COALESCE(c.body, jsonb_build_object(
                    'type', e.type, 'timestamp', e.created_at,
                    'data', jsonb_build_object('id', e.id, 'subject', e.subject, 'project', e.project,
                                               'payload', e.payload))) AS "body!"
           FROM claimed c
           JOIN webhook_subscriptions s ON s.id = c.subscription_id
           LEFT JOIN events e ON e.id = c.event_id"#,
        limit,
        lease.as_secs_f64()
    )
    .fetch_all(conn)
    .await
}

/// What one attempt got.
pub struct AttemptResult<'a> {
    pub status_code: Option<i32>,
    pub error: Option<&'a str>,
    pub duration_ms: i32,
}

/// Records successes (delivery, duration, status code) in one statement; a delivery whose claim
/// was lost (its lease ran out and another sender took it, or a redelivery asked while it was in
/// flight cleared the lease: it is sent again) is left alone. Returns how many.
pub async fn succeeded(conn: &mut PgConnection, delivered: &[(&Claimed, i32, u16)]) -> Result<usize, sqlx::Error> {
    if delivered.is_empty() {
        return Ok(0);
    }
    let ids: Vec<Uuid> = delivered.iter().map(|d| d.0.id).collect();
    let attempts: Vec<i32> = delivered.iter().map(|d| d.0.attempts).collect();
    let durations: Vec<i32> = delivered.iter().map(|d| d.1).collect();
    let codes: Vec<i32> = delivered.iter().map(|d| i32::from(d.2)).collect();
    let subscriptions: Vec<Uuid> = delivered.iter().map(|d| d.0.subscription_id).collect();
    let done = sqlx::query!(
        r#"UPDATE webhook_deliveries d
           SET status = 'succeeded', delivered_at = now(), leased_until = NULL, last_status_code = r.code,
               last_error = NULL, last_duration_ms = r.duration, updated_at = now()
           FROM UNNEST($1::uuid[], $2::int4[], $3::int4[], $4::int4[]) AS r(id, attempts, duration, code)
           WHERE d.id = r.id AND d.attempts = r.attempts AND d.status = 'pending' AND d.leased_until IS NOT NULL"#,
        &ids,
        &attempts,
        &durations,
        &codes
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "UPDATE webhook_subscriptions SET failing_since = NULL WHERE id = ANY($1) AND failing_since IS NOT NULL",
        &subscriptions
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() as usize)
}

/// Records a failure: retry after `retry_in`, or fail for good when it is `None` (unless the claim
/// was lost, as for [`succeeded`]).
pub async fn failed(
    conn: &mut PgConnection,
    claim: &Claimed,
    result: &AttemptResult<'_>,
    retry_in: Option<Duration>,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        r#"UPDATE webhook_deliveries
           SET status = CASE WHEN $5::float8 IS NULL THEN 'failed' ELSE 'pending' END,
               next_attempt_at = now() + make_interval(secs => COALESCE($5, 0)),
               leased_until = NULL, last_status_code = $3, last_error = $6, last_duration_ms = $4, updated_at = now()
           WHERE id = $1 AND attempts = $2 AND status = 'pending' AND leased_until IS NOT NULL"#,
        claim.id,
        claim.attempts,
        result.status_code,
        result.duration_ms,
        retry_in.map(|d| d.as_secs_f64()),
        result.error
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "UPDATE webhook_subscriptions SET failing_since = now() WHERE id = $1 AND failing_since IS NULL",
        claim.subscription_id
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Sends a delivery again now, with the same `webhook-id`, whatever its state.
#[tracing::instrument(skip_all, fields(delivery = %delivery), err(level = "debug"))]
pub async fn redeliver(
    conn: &mut PgConnection,
    subscription: Uuid,
    delivery: Uuid,
) -> Result<Option<Delivery>, sqlx::Error> {
    sqlx::query_as!(
        Delivery,
        r#"UPDATE webhook_deliveries
           SET status = 'pending', next_attempt_at = now(), leased_until = NULL, updated_at = now()
           WHERE id = $1 AND subscription_id = $2
           RETURNING id, message_id, event_id, event_type, status, attempts, next_attempt_at, last_status_code,
                     last_error, last_duration_ms, delivered_at, created_at, updated_at"#,
        delivery,
        subscription
    )
    .fetch_optional(conn)
    .await
}

/// A `webhook.test` delivery to one subscription, with no event behind it.
#[tracing::instrument(skip_all, fields(subscription = %subscription), err(level = "debug"))]
pub async fn insert_test(conn: &mut PgConnection, subscription: Uuid) -> Result<Delivery, sqlx::Error> {
    let id = Uuid::new_v4();
    let body = serde_json::json!({"type": "webhook.test", "timestamp": Utc::now(),
        "data": {"subscription": subscription, "message": "A test event from Switchyard"}});
    sqlx::query_as!(
        Delivery,
        r#"INSERT INTO webhook_deliveries (id, subscription_id, message_id, event_type, body)
           VALUES ($1, $2, $3, 'webhook.test', $4)
           RETURNING id, message_id, event_id, event_type, status, attempts, next_attempt_at, last_status_code,
                     last_error, last_duration_ms, delivered_at, created_at, updated_at"#,
        id,
        subscription,
        format!("msg_{}", id.simple()),
        body
    )
    .fetch_one(conn)
    .await
}

/// Turns up to `limit` outbox rows (an event and the subscriptions that wanted it, written with
/// the event: migration 0012) into one pending delivery per subscription that still exists, and
/// deletes them, in one statement; returns how many deliveries it made. `SKIP LOCKED`: senders
/// expanding at once share the rows out.
pub async fn expand_outbox(conn: &mut PgConnection, limit: i64) -> Result<u64, sqlx::Error> {
    let made = sqlx::query!(
        r#"WITH taken AS (
               DELETE FROM webhook_outbox
               WHERE event_id IN (SELECT event_id FROM webhook_outbox ORDER BY event_id LIMIT $1 FOR UPDATE SKIP LOCKED)
               RETURNING event_id, subscriptions)
           INSERT INTO webhook_deliveries (id, subscription_id, event_id, message_id, event_type)
           SELECT q.id, q.subscription, q.event_id, 'msg_' || replace(q.id::text, '-', ''), q.type
           FROM (SELECT gen_random_uuid() AS id, s.id AS subscription, t.event_id, e.type
                 FROM taken t
                 CROSS JOIN LATERAL unnest(t.subscriptions) AS wanted(id)
                 JOIN webhook_subscriptions s ON s.id = wanted.id
                 JOIN events e ON e.id = t.event_id
                 ORDER BY t.event_id, s.id) q"#,
        limit
    )
    .execute(conn)
    .await?;
    Ok(made.rows_affected())
}

/// What a commit's wake-up learns: whether any subscription is enabled, and whether a sender has
/// work now — an outbox row to expand, or a delivery it could claim (the claim's conditions).
/// Deliveries are read in the due index's order, so a backlog of later retries is not scanned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueCheck {
    pub subscribed: bool,
    pub due: bool,
}

pub async fn due_check(conn: &mut PgConnection) -> Result<DueCheck, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT EXISTS (SELECT FROM webhook_subscriptions WHERE enabled) AS "subscribed!",
                  EXISTS (SELECT FROM webhook_outbox)
               OR EXISTS (
                   SELECT FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id
                   WHERE d.status = 'pending' AND d.next_attempt_at <= now()
                     AND (d.leased_until IS NULL OR d.leased_until < now()) AND s.enabled) AS "due!""#
    )
    .fetch_one(conn)
    .await?;
    Ok(DueCheck { subscribed: row.subscribed, due: row.due })
}

/// How long until the earliest pending delivery of an enabled subscription can be claimed: it
/// is due and not leased (zero if one can be claimed now).
pub async fn next_due_in(conn: &mut PgConnection) -> Result<Option<Duration>, sqlx::Error> {
    let seconds = sqlx::query_scalar!(
        r#"SELECT EXTRACT(EPOCH FROM min(GREATEST(d.next_attempt_at, COALESCE(d.leased_until, d.next_attempt_at)))
                                 - now())::float8 AS "seconds"
           FROM webhook_deliveries d JOIN webhook_subscriptions s ON s.id = d.subscription_id AND s.enabled
           WHERE d.status = 'pending'"#
    )
    .fetch_one(conn)
    .await?;
    Ok(seconds.map(|s| Duration::from_secs_f64(s.max(0.0))))
}
