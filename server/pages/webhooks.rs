//! `/webhooks`: the subscriptions (where events go, which, whether they work) and the form that
//! makes one ([`super::webhook_form`]);
//! `/webhooks/{id}`: one subscription's delivery log, with "redeliver" on each delivery and "send
//! a test event", enable or disable it, rotate its signing secret (the new one shown once) and
//! delete it. The log refreshes itself: attempts write no events, so it is polled.

use askama::Template;
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use chrono::Utc;
use secrecy::ExposeSecret;
use uuid::Uuid;

use super::webhook_form::{WebhookFields, WebhookForm};
use crate::app::webhooks::{self as webhooks_app, WebhookWithSecret};
use crate::db::sessions::Session;
use crate::db::webhook_deliveries::{self, Delivery};
use crate::db::webhooks::{self, Subscription, SubscriptionPatch};
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::live::topic;
use crate::pages::view::{ago, iso, no_block, render, see_other, BlockQuery, Chrome, PagePath, PageQuery, PageResult};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/webhooks", get(list))
        .route("/webhooks/{id}", get(detail))
        .route("/webhooks/{id}/test", post(send_test))
        .route("/webhooks/{id}/enable", post(enable))
        .route("/webhooks/{id}/disable", post(disable))
        .route("/webhooks/{id}/rotate-secret", post(rotate_secret))
        .route("/webhooks/{id}/delete", post(delete))
        .route("/webhooks/{id}/deliveries/{delivery}/redeliver", post(redeliver))
}

/// A subscription as a row.
struct WebhookRow {
    id: Uuid,
    url: String,
    events: String,
    project: String,
    description: String,
    state: &'static str,
    state_label: String,
    enabled: bool,
    format: String,
}

impl WebhookRow {
    fn new(s: &Subscription) -> WebhookRow {
        let (state, state_label) = match (s.enabled, &s.disabled_reason, s.failing_since) {
            (true, _, Some(since)) => ("failing", format!("failing since {}", ago(since, Utc::now()))),
            (true, _, None) => ("enabled", "enabled".to_owned()),
            (false, Some(why), _) => ("disabled", format!("disabled: {why}")),
            (false, None, _) => ("disabled", "disabled".to_owned()),
        };
        WebhookRow {
            id: s.id,
            url: s.url.clone(),
            events: s.events.join(", "),
            project: s.project.clone().unwrap_or_else(|| "every project".to_owned()),
            description: s.description.clone(),
            state,
            state_label,
            enabled: s.enabled,
            format: s.format.clone(),
        }
    }
}

#[derive(Template)]
#[template(path = "webhooks/list.html", blocks = ["webhooks"])]
pub(super) struct ListPage {
    chrome: Chrome,
    webhooks: Vec<WebhookRow>,
    form: WebhookForm,
}

/// The subscriptions, and the form to make one as `form` has it.
pub(super) async fn list_page(
    conn: &mut sqlx::PgConnection,
    session: &Session,
    form: WebhookForm,
) -> Result<ListPage, ApiError> {
    let chrome = Chrome::new(conn, session, "webhooks", "Webhooks").await?;
    let webhooks = webhooks::list(conn, None, 1000).await?.iter().map(WebhookRow::new).collect();
    Ok(ListPage { chrome, webhooks, form })
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn list(State(state): State<AppState>, session: Session, PageQuery(query): PageQuery<BlockQuery>) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let form = WebhookForm::load(&mut conn, WebhookFields::default()).await?;
    let page = list_page(&mut conn, &session, form).await?;
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("webhooks") => Ok(render(&page.as_webhooks())),
        Some(other) => Err(no_block(other)),
    }
}

/// One delivery as a row of the log.
struct DeliveryRow {
    id: Uuid,
    event_type: String,
    event_id: String,
    status: String,
    attempts: i32,
    response: String,
    duration: String,
    when: String,
    when_iso: String,
}

impl DeliveryRow {
    fn new(d: &Delivery) -> DeliveryRow {
        let response = match (d.last_status_code, &d.last_error) {
            (Some(code), _) => format!("HTTP {code}"),
            (None, Some(error)) => error.clone(),
            (None, None) => "not sent yet".to_owned(),
        };
        DeliveryRow {
            id: d.id,
            event_type: d.event_type.clone(),
            event_id: d.event_id.map(|id| format!("#{id}")).unwrap_or_default(),
            status: d.status.clone(),
            attempts: d.attempts,
            response,
            duration: d.last_duration_ms.map(|ms| format!("{ms} ms")).unwrap_or_default(),
            when: ago(d.updated_at, Utc::now()),
            when_iso: iso(d.updated_at),
        }
    }
}

#[derive(Template)]
#[template(path = "webhooks/detail.html", blocks = ["deliveries"])]
struct DetailPage {
    chrome: Chrome,
    webhook: WebhookRow,
    deliveries: Vec<DeliveryRow>,
    topic: String,
}

#[tracing::instrument(skip_all, fields(webhook = ?id), err(Debug, level = "debug"))]
async fn detail(
    State(state): State<AppState>,
    session: Session,
    PagePath(id): PagePath<Uuid>,
    PageQuery(query): PageQuery<BlockQuery>,
) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "webhooks", "Webhook").await?;
    let subscription = webhooks_app::find(&mut conn, id).await?;
    let deliveries =
        webhook_deliveries::list(&mut conn, id, None, 100).await?.iter().take(100).map(DeliveryRow::new).collect();
    let page = DetailPage {
        chrome,
        webhook: WebhookRow::new(&subscription),
        deliveries,
        topic: topic("webhook", &id.to_string()),
    };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("deliveries") => Ok(render(&page.as_deliveries())),
        Some(other) => Err(no_block(other)),
    }
}

#[tracing::instrument(skip_all, fields(webhook = ?id), err(Debug, level = "debug"))]
async fn send_test(State(state): State<AppState>, PagePath(id): PagePath<Uuid>) -> PageResult {
    webhooks_app::queue_test(&state, id).await?;
    Ok(see_other(&format!("/webhooks/{id}")))
}

#[tracing::instrument(skip_all, fields(webhook = ?id, delivery = ?delivery), err(Debug, level = "debug"))]
async fn redeliver(State(state): State<AppState>, PagePath((id, delivery)): PagePath<(Uuid, Uuid)>) -> PageResult {
    webhooks_app::redeliver(&state, id, delivery).await?;
    Ok(see_other(&format!("/webhooks/{id}")))
}

/// Turns deliveries on (those held while it was disabled go out) or off.
async fn set_enabled(state: &AppState, id: Uuid, enabled: bool) -> PageResult {
    let patch = SubscriptionPatch { enabled: Some(enabled), ..SubscriptionPatch::default() };
    webhooks_app::update(state, &state.webhooks.allowed_hosts, id, patch).await?;
    Ok(see_other(&format!("/webhooks/{id}")))
}

#[tracing::instrument(skip_all, fields(webhook = ?id), err(Debug, level = "debug"))]
async fn enable(State(state): State<AppState>, PagePath(id): PagePath<Uuid>) -> PageResult {
    set_enabled(&state, id, true).await
}

#[tracing::instrument(skip_all, fields(webhook = ?id), err(Debug, level = "debug"))]
async fn disable(State(state): State<AppState>, PagePath(id): PagePath<Uuid>) -> PageResult {
    set_enabled(&state, id, false).await
}

#[tracing::instrument(skip_all, fields(webhook = ?id), err(Debug, level = "debug"))]
async fn delete(State(state): State<AppState>, PagePath(id): PagePath<Uuid>) -> PageResult {
    webhooks_app::delete(&state, id).await?;
    Ok(see_other("/webhooks"))
}

#[derive(Template)]
#[template(path = "webhooks/secret.html")]
struct SecretPage {
    chrome: Chrome,
    webhook: WebhookRow,
    secret: String,
    /// The subscription was just made (else its secret was rotated).
    created: bool,
}

/// A secret is shown on the answer that made it only (it is stored, never shown again): a page,
/// not a redirect, so a reload cannot show it twice — it asks to send the form again instead.
pub(super) async fn secret_page(
    state: &AppState,
    session: &Session,
    with_secret: WebhookWithSecret,
    created: bool,
) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let title = if created { "New webhook" } else { "New signing secret" };
    let chrome = Chrome::new(&mut conn, session, "webhooks", title).await?;
    let secret = with_secret.secret.expose_secret().to_owned();
    Ok(render(&SecretPage { chrome, webhook: WebhookRow::new(&with_secret.subscription), secret, created }))
}

#[tracing::instrument(skip_all, fields(webhook = ?id), err(Debug, level = "debug"))]
async fn rotate_secret(State(state): State<AppState>, session: Session, PagePath(id): PagePath<Uuid>) -> PageResult {
    let rotated = webhooks_app::rotate_secret(&state, id).await?;
    secret_page(&state, &session, rotated, false).await
}
