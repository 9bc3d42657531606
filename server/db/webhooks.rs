//! Webhook subscriptions in the database. The outbox rows for the events a subscription wants
//! are queued by the database itself, in the statement that records the events (migration 0012,
//! `events_queue_deliveries`), so nothing here is on an event's write path.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::events;
use crate::domain::webhook_format::WebhookFormat;

/// How long a rotated-out secret keeps signing, so receivers can switch without losing messages.
pub const ROTATION_GRACE_HOURS: i32 = 24;

/// A subscription as the API shows it: never its secret.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "6c1f0c9e-2b7a-4a52-9d55-3f6c2a1e0b7d", "url": "https://ci.example.com/switchyard",
    "events": ["on_ci_failed", "task.*"], "project": "switchyard", "description": "CI bridge", "format": "standard", "enabled": true,
    "disabled_reason": null, "failing_since": null, "created_at": "2025-01-15T10:30:00Z", "updated_at": "2025-01-15T10:30:00Z"}))]
pub struct Subscription {
    pub id: Uuid,
    pub url: String,
    /// Event types, `prefix.*` patterns and hook names, as given.
    pub events: Vec<String>,
    /// Only events of this project (slug); all projects when null.
    pub project: Option<String>,
    pub description: String,
    /// What its deliveries look like: `standard` (the event as JSON), `slack` or `ntfy`.
    #[schema(example = "standard")]
    pub format: String,
    pub enabled: bool,
    /// Why Switchyard disabled it (`410 Gone`, failing for days), if it did.
    pub disabled_reason: Option<String>,
    /// Since when every delivery has failed.
    pub failing_since: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

pub struct NewSubscription {
    pub url: String,
    pub events: Vec<String>,
    pub project: Option<String>,
    pub description: String,
    pub format: WebhookFormat,
    pub secret: String,
    pub enabled: bool,
}

/// What a PATCH may change; `None` leaves a field alone.
#[derive(Default)]
pub struct SubscriptionPatch {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub project: Option<Option<String>>,
    pub description: Option<String>,
    pub format: Option<WebhookFormat>,
    pub enabled: Option<bool>,
}

fn subject(id: Uuid) -> String {
    format!("webhook:{id}")
}

/// A subscription in its events: with its URL and description, which name it in the event log
/// and in chat texts ([`crate::domain::webhook_format::payload_name`]).
fn summary(s: &Subscription) -> serde_json::Value {
    serde_json::json!({"id": s.id, "url": s.url, "description": s.description, "events": s.events,
        "project": s.project, "format": s.format, "enabled": s.enabled})
}

#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn create(conn: &mut PgConnection, new: &NewSubscription) -> Result<Subscription, sqlx::Error> {
    let sub = sqlx::query_as!(
        Subscription,
        r#"INSERT INTO webhook_subscriptions (id, url, events, project, description, secret, enabled, format)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           RETURNING id, url, events, project, description, format, enabled, disabled_reason, failing_since,
                     created_at, updated_at"#,
        Uuid::new_v4(),
        new.url,
        &new.events,
        new.project,
        new.description,
        new.secret,
        new.enabled,
        new.format.as_str()
    )
    .fetch_one(&mut *conn)
    .await?;
    events::record(conn, "webhook.created", &subject(sub.id), summary(&sub)).await?;
    Ok(sub)
}

#[tracing::instrument(skip_all, fields(id = %id), err(level = "debug"))]
pub async fn get(conn: &mut PgConnection, id: Uuid) -> Result<Option<Subscription>, sqlx::Error> {
    sqlx::query_as!(
        Subscription,
        r#"SELECT id, url, events, project, description, format, enabled, disabled_reason, failing_since, created_at,
                  updated_at
           FROM webhook_subscriptions WHERE id = $1"#,
        id
    )
    .fetch_optional(conn)
    .await
}

/// Oldest first, `limit + 1` rows after (`created_at`, `id`).
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list(
    conn: &mut PgConnection,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Subscription>, sqlx::Error> {
    let (at, id) = after.unzip();
    sqlx::query_as!(
        Subscription,
        r#"SELECT id, url, events, project, description, format, enabled, disabled_reason, failing_since, created_at,
                  updated_at
           FROM webhook_subscriptions
           WHERE $1::timestamptz IS NULL OR (created_at, id) > ($1, $2)
           ORDER BY created_at, id LIMIT $3"#,
        at,
        id,
        limit + 1
    )
    .fetch_all(conn)
    .await
}

/// Applies a patch; enabling clears `disabled_reason` and `failing_since`.
#[tracing::instrument(skip_all, fields(id = %id), err(level = "debug"))]
pub async fn update(
    conn: &mut PgConnection,
    id: Uuid,
    patch: &SubscriptionPatch,
) -> Result<Option<Subscription>, sqlx::Error> {
    let (set_project, project) = match &patch.project {
        Some(p) => (true, p.clone()),
        None => (false, None),
    };
    let sub = sqlx::query_as!(
        Subscription,
        r#"UPDATE webhook_subscriptions SET
             url = COALESCE($2, url),
             events = COALESCE($3, events),
             project = CASE WHEN $4 THEN $5 ELSE project END,
             description = COALESCE($6, description),
             enabled = COALESCE($7, enabled),
             disabled_reason = CASE WHEN $7 THEN NULL ELSE disabled_reason END,
             failing_since = CASE WHEN $7 THEN NULL ELSE failing_since END,
             format = COALESCE($8, format),
             updated_at = now()
           WHERE id = $1
           RETURNING id, url, events, project, description, format, enabled, disabled_reason, failing_since,
                     created_at, updated_at"#,
        id,
        patch.url,
        patch.events.as_deref(),
        set_project,
        project,
        patch.description,
        patch.enabled,
        patch.format.map(|f| f.as_str())
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(sub) = &sub {
        events::record(conn, "webhook.updated", &subject(sub.id), summary(sub)).await?;
    }
    Ok(sub)
}

/// Deletes a subscription and its deliveries (they have no foreign key: migration 0012).
#[tracing::instrument(skip_all, fields(id = %id), err(level = "debug"))]
pub async fn delete(conn: &mut PgConnection, id: Uuid) -> Result<bool, sqlx::Error> {
    // Deliveries first, then the subscription: the sender holds a delivery's row and then updates
    // its subscription (`failing_since`), and the opposite order deadlocked with it (a 500 the
    // fuzzer found).
    sqlx::query!("DELETE FROM webhook_deliveries WHERE subscription_id = $1", id).execute(&mut *conn).await?;
    let deleted = sqlx::query!("DELETE FROM webhook_subscriptions WHERE id = $1 RETURNING url, description", id)
        .fetch_optional(&mut *conn)
        .await?;
    if let Some(gone) = &deleted {
        let payload = serde_json::json!({"id": id, "url": gone.url, "description": gone.description});
        events::record(conn, "webhook.deleted", &subject(id), payload).await?;
    }
    Ok(deleted.is_some())
}

/// Installs a new secret; the old one keeps signing for [`ROTATION_GRACE_HOURS`].
#[tracing::instrument(skip_all, fields(id = %id), err(level = "debug"))]
pub async fn rotate_secret(conn: &mut PgConnection, id: Uuid, secret: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        r#"UPDATE webhook_subscriptions
           SET previous_secret = secret, secret = $2,
               previous_secret_expires_at = now() + make_interval(hours => $3), updated_at = now()
           WHERE id = $1 RETURNING url, description"#,
        id,
        secret,
        ROTATION_GRACE_HOURS
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(done) = &done {
        let payload = serde_json::json!({"id": id, "url": done.url, "description": done.description,
            "grace_hours": ROTATION_GRACE_HOURS});
        events::record(conn, "webhook.secret_rotated", &subject(id), payload).await?;
    }
    Ok(done.is_some())
}

/// Disables a subscription that is still enabled, with an event saying why; false when it was
/// already disabled (so only one sender reports it).
#[tracing::instrument(skip_all, fields(id = %id), err(level = "debug"))]
pub async fn disable(conn: &mut PgConnection, id: Uuid, reason: &str) -> Result<bool, sqlx::Error> {
    let disabled = sqlx::query!(
        r#"UPDATE webhook_subscriptions SET enabled = false, disabled_reason = $2, updated_at = now()
           WHERE id = $1 AND enabled RETURNING url, description"#,
        id,
        reason
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(disabled) = &disabled {
        let payload =
            serde_json::json!({"id": id, "url": disabled.url, "description": disabled.description, "reason": reason});
        events::record(conn, "webhook.disabled", &subject(id), payload).await?;
    }
    Ok(disabled.is_some())
}

/// The secrets that sign a delivery now: the current one, and the previous one in its grace.
pub fn signing_secrets<'a>(current: &'a str, previous: Option<&'a str>) -> Vec<&'a str> {
    let mut secrets = vec![current];
    secrets.extend(previous);
    secrets
}

/// Records that inbound hook `hook` received `message_id` (its `webhook-id`), in the caller's
/// transaction; false when it had been received before. Entries older than a day are dropped on
/// the way: a replay that old fails the signature's five-minute window anyway.
pub async fn first_delivery(conn: &mut PgConnection, hook: &str, message_id: &str) -> Result<bool, sqlx::Error> {
    sqlx::query!("DELETE FROM inbound_deliveries WHERE received_at < now() - interval '1 day'")
        .execute(&mut *conn)
        .await?;
    let inserted = sqlx::query!(
        "INSERT INTO inbound_deliveries (hook, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        hook,
        message_id
    )
    .execute(conn)
    .await?;
    Ok(inserted.rows_affected() == 1)
}
