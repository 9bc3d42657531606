//! `/webhooks`: the subscriptions (where events go, which, whether they work);
//! `/webhooks/{id}`: one subscription's delivery log, with "redeliver" on each delivery and "send
//! a test event". The log refreshes itself: attempts write no events, so it is polled.

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::Router;
use chrono::Utc;
use uuid::Uuid;

use crate::app::webhooks as webhooks_app;
use crate::db::sessions::Session;
use crate::db::webhook_deliveries::{self, Delivery};
use crate::db::webhooks::{self, Subscription};
use crate::http::AppState;
use crate::pages::live::topic;
use crate::pages::view::{ago, iso, no_block, render, see_other, BlockQuery, Chrome, PageResult};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/webhooks", get(list))
        .route("/webhooks/{id}", get(detail))
        .route("/webhooks/{id}/test", post(send_test))
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
        }
    }
}

#[derive(Template)]
#[template(path = "webhooks/list.html", blocks = ["webhooks"])]
struct ListPage {
    chrome: Chrome,
    webhooks: Vec<WebhookRow>,
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn list(State(state): State<AppState>, session: Session, Query(query): Query<BlockQuery>) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "webhooks", "Webhooks").await?;
    let webhooks = webhooks::list(&mut conn, None, 1000).await?.iter().map(WebhookRow::new).collect();
    let page = ListPage { chrome, webhooks };
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
    Path(id): Path<Uuid>,
    Query(query): Query<BlockQuery>,
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
async fn send_test(State(state): State<AppState>, Path(id): Path<Uuid>) -> PageResult {
    webhooks_app::queue_test(&state, id).await?;
    Ok(see_other(&format!("/webhooks/{id}")))
}

#[tracing::instrument(skip_all, fields(webhook = ?id, delivery = ?delivery), err(Debug, level = "debug"))]
async fn redeliver(State(state): State<AppState>, Path((id, delivery)): Path<(Uuid, Uuid)>) -> PageResult {
    webhooks_app::redeliver(&state, id, delivery).await?;
    Ok(see_other(&format!("/webhooks/{id}")))
}
