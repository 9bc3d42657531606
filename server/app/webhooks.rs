//! Webhook subscriptions and their deliveries: subscribe a URL to events, change or delete a
//! subscription, rotate its signing secret, queue a test delivery, send a delivery again. The
//! secret is handed out only on creation and rotation. Commits go through the feed, which also
//! wakes the senders.

use secrecy::{ExposeSecret, SecretString};
use serde::{Serialize, Serializer};
use sqlx::PgConnection;
use uuid::Uuid;

use super::idempotency::{self, Idempotency};
use super::{Ctx, Error, Fields, Result};
use crate::db::webhook_deliveries::{self, Delivery};
use crate::db::webhooks::{self as subscriptions, NewSubscription, Subscription, SubscriptionPatch};
use crate::domain::project::is_valid_slug;
use crate::domain::webhook::EventFilter;
use crate::domain::webhook_format::WebhookFormat;
use crate::webhooks::signature;
use crate::webhooks::ssrf::AllowList;

/// What a new subscription is made of; `None` takes the default.
#[derive(Debug)]
pub struct NewWebhook {
    pub url: String,
    pub events: Vec<String>,
    pub project: Option<String>,
    pub description: Option<String>,
    /// A Standard Webhooks secret; generated when `None`.
    pub secret: Option<SecretString>,
    pub enabled: Option<bool>,
    /// Default: `standard`.
    pub format: Option<WebhookFormat>,
}

/// A subscription with its secret: only in the answer to creation and rotation.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WebhookWithSecret {
    #[serde(flatten)]
    pub subscription: Subscription,
    /// Verify deliveries with it; it is not shown again.
    #[serde(serialize_with = "expose")]
    #[schema(value_type = String, example = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")]
    pub secret: SecretString,
}

fn expose<S: Serializer>(secret: &SecretString, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(secret.expose_secret())
}

pub fn not_found(id: Uuid) -> Error {
    Error::NotFound(format!("no webhook {id}"))
}

/// The subscription `id` (never its secret).
pub async fn find(conn: &mut PgConnection, id: Uuid) -> Result<Subscription> {
    subscriptions::get(conn, id).await?.ok_or_else(|| not_found(id))
}

/// Subscribes a URL to events. `hosts` says which private destinations are allowed (the sender
/// checks again on every connect).
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn create(
    ctx: &Ctx,
    hosts: &AllowList,
    new: NewWebhook,
    idem: Option<&Idempotency>,
) -> Result<WebhookWithSecret> {
    let mut errors = Fields::default();
    let url = errors.take(check_url(hosts, &new.url))?.unwrap_or_default();
    errors.take(check_events(&new.events))?;
    errors.take(check_project(&new.project))?;
    errors.take(check_description(&new.description))?;
    if let Some(s) = &new.secret {
        let ok = s.expose_secret().len() <= 1024 && signature::decode_secret(s.expose_secret()).is_some();
        errors.check(
            "secret",
            ok,
            "must be whsec_ followed by base64 of at least 16 bytes, at most 1024 characters in all",
        );
    }
    errors.finish()?;
    let secret = new.secret.unwrap_or_else(|| SecretString::from(signature::generate_secret()));
    let row = NewSubscription {
        url,
        events: new.events,
        project: new.project,
        description: new.description.unwrap_or_default(),
        secret: secret.expose_secret().to_owned(),
        enabled: new.enabled.unwrap_or(true),
        format: new.format.unwrap_or_default(),
    };
    let mut tx = ctx.db.begin().await?;
    let subscription = subscriptions::create(&mut tx, &row).await?;
    let created = WebhookWithSecret { subscription, secret };
    idempotency::record(&mut tx, idem, &created).await?;
    ctx.feed.commit(tx).await?;
    Ok(created)
}

/// Changes the fields `patch` names (enabling a disabled subscription resumes its deliveries).
#[tracing::instrument(skip_all, fields(id = ?id), err(level = "debug"))]
pub async fn update(ctx: &Ctx, hosts: &AllowList, id: Uuid, patch: SubscriptionPatch) -> Result<Subscription> {
    let mut errors = Fields::default();
    let url = errors.take(patch.url.as_deref().map(|u| check_url(hosts, u)).transpose())?.flatten();
    if let Some(events) = &patch.events {
        errors.take(check_events(events))?;
    }
    if let Some(project) = &patch.project {
        errors.take(check_project(project))?;
    }
    errors.take(check_description(&patch.description))?;
    errors.finish()?;
    let patch = SubscriptionPatch { url, ..patch };
    let mut tx = ctx.db.begin().await?;
    let subscription = subscriptions::update(&mut tx, id, &patch).await?.ok_or_else(|| not_found(id))?;
    ctx.feed.commit(tx).await?;
    Ok(subscription)
}

/// Deletes a subscription with its delivery log; pending deliveries are dropped.
#[tracing::instrument(skip_all, fields(id = ?id), err(level = "debug"))]
pub async fn delete(ctx: &Ctx, id: Uuid) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    if !subscriptions::delete(&mut tx, id).await? {
        return Err(not_found(id));
    }
    ctx.feed.commit(tx).await?;
    Ok(())
}

/// Replaces the signing secret; the old one keeps signing beside it for a day, so the receiver
/// can switch without dropping deliveries.
#[tracing::instrument(skip_all, fields(id = ?id), err(level = "debug"))]
pub async fn rotate_secret(ctx: &Ctx, id: Uuid) -> Result<WebhookWithSecret> {
    let secret = SecretString::from(signature::generate_secret());
    let mut tx = ctx.db.begin().await?;
    if !subscriptions::rotate_secret(&mut tx, id, secret.expose_secret()).await? {
        return Err(not_found(id));
    }
    let subscription = find(&mut tx, id).await?;
    ctx.feed.commit(tx).await?;
    Ok(WebhookWithSecret { subscription, secret })
}

/// Queues a `webhook.test` delivery to the subscription, signed like any other; it is sent only
/// while the subscription is enabled.
#[tracing::instrument(skip_all, fields(id = ?id), err(level = "debug"))]
pub async fn queue_test(ctx: &Ctx, id: Uuid) -> Result<Delivery> {
    let mut tx = ctx.db.begin().await?;
    find(&mut tx, id).await?;
    let queued = webhook_deliveries::insert_test(&mut tx, id).await?;
    ctx.feed.commit(tx).await?;
    Ok(queued)
}

/// Queues one delivery to be sent again now, with the same `webhook-id`, whatever its state.
#[tracing::instrument(skip_all, fields(id = ?id, delivery = ?delivery), err(level = "debug"))]
pub async fn redeliver(ctx: &Ctx, id: Uuid, delivery: Uuid) -> Result<Delivery> {
    let mut tx = ctx.db.begin().await?;
    let queued = webhook_deliveries::redeliver(&mut tx, id, delivery)
        .await?
        .ok_or_else(|| Error::NotFound(format!("no delivery {delivery} for webhook {id}")))?;
    ctx.feed.commit(tx).await?;
    Ok(queued)
}

/// The longest URL a subscription may have.
const MAX_URL: usize = 2048;

fn check_url(hosts: &AllowList, url: &str) -> Result<String> {
    if url.len() > MAX_URL {
        return Err(Error::invalid("url", format!("must be at most {MAX_URL} characters")));
    }
    hosts.check_url(url).map_err(|why| Error::invalid("url", why))?;
    Ok(url.to_owned())
}

fn check_events(events: &[String]) -> Result<()> {
    if events.is_empty() || events.len() > 100 {
        return Err(Error::invalid("events", "give 1 to 100 entries"));
    }
    EventFilter::parse(events).map(|_| ()).map_err(|e| Error::invalid(format!("events[{}]", e.index), e.to_string()))
}

fn check_project(project: &Option<String>) -> Result<()> {
    match project {
        Some(p) if !is_valid_slug(p) => Err(Error::invalid("project", "must be a project slug")),
        _ => Ok(()),
    }
}

fn check_description(description: &Option<String>) -> Result<()> {
    match description {
        Some(d) if d.chars().count() > 500 => Err(Error::invalid("description", "at most 500 characters")),
        _ => Ok(()),
    }
}
