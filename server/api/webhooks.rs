//! `/api/v1/webhooks`: subscriptions that receive events as signed HTTP POSTs (Standard
//! Webhooks). The secret is shown once, on creation and on rotation. Admin scope: a subscription
//! sends the event log to a URL of the caller's choosing.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use secrecy::SecretString;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::api::auth::Authenticated;
use crate::api::idempotency::{self, IdempotentJson};
use crate::api::json::{nullable, ApiJson};
use crate::api::webhook_deliveries;
pub use crate::app::webhooks::WebhookWithSecret;
use crate::app::webhooks::{self as webhooks_app, NewWebhook};
use crate::auth::Scope;
use crate::db::webhooks::{self, Subscription, SubscriptionPatch};
use crate::domain::webhook_format::WebhookFormat;
use crate::http::error::{ApiResult, Problem};
use crate::http::extract::ApiPath;
use crate::http::pagination::{page, Page, PageQuery, Position};
use crate::http::query::ApiQuery;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_webhook, list_webhooks))
        .routes(routes!(get_webhook, update_webhook, delete_webhook))
        .routes(routes!(rotate_secret))
        .merge(webhook_deliveries::router())
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"url": "https://ci.example.com/switchyard", "events": ["on_ci_failed", "task.*"],
    "project": "switchyard", "description": "CI bridge"}))]
pub struct CreateWebhook {
    /// Where to POST; `http://` or `https://`. Loopback, private and link-local destinations are
    /// refused unless `SWITCHYARD_WEBHOOK_ALLOWED_HOSTS` allows them (checked again on every connect).
    #[schema(max_length = 2048, pattern = "^https?://")]
    pub url: String,
    /// Event types (`task.completed`), patterns (`task.*`, `*`) and multiclaude hook names:
    /// `on_event` = every event; `on_agent_started` = `agent.spawned`; `on_agent_idle` =
    /// `agent.state_changed` with `to: idle`; `on_agent_stopped` = `agent.stopped`;
    /// `on_worker_stuck` = `agent.stuck`; `on_message_sent` = `message.delivered`; `on_merge_complete` =
    /// `merge.completed` and `wish.merged`; `on_pr_created` = `pr.created`; `on_ci_failed` =
    /// `ci.failed`; `on_task_assigned` = `task.assigned` and `task.started` with an assignee.
    #[schema(min_items = 1, max_items = 100)]
    pub events: Vec<String>,
    /// Only events of this project (slug). Events carry a project when their payload has one or
    /// their subject is a project, task, wish or board.
    pub project: Option<String>,
    pub description: Option<String>,
    /// A Standard Webhooks secret (`whsec_` + base64 of at least 16 bytes); generated when omitted.
    #[schema(value_type = Option<String>)]
    pub secret: Option<SecretString>,
    /// Default true.
    pub enabled: Option<bool>,
    /// What deliveries look like: `standard` (default; the event as JSON), `slack` (a
    /// Slack-compatible incoming webhook's `{"text": …}`) or `ntfy` (a text body with `Title` and
    /// `Click` headers); the chat formats link back to the dashboard page that answers the event.
    pub format: Option<WebhookFormat>,
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"enabled": true, "events": ["on_event"]}))]
pub struct UpdateWebhook {
    #[schema(max_length = 2048, pattern = "^https?://")]
    pub url: Option<String>,
    #[schema(min_items = 1, max_items = 100)]
    pub events: Option<Vec<String>>,
    /// A slug, or null for every project.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub project: Option<Option<String>>,
    pub description: Option<String>,
    /// Enabling a disabled subscription clears `disabled_reason`; its pending deliveries resume.
    pub enabled: Option<bool>,
    /// `standard`, `slack` or `ntfy`.
    pub format: Option<WebhookFormat>,
}

/// Subscribes a URL to events. The answer holds the signing secret, shown only this once.
#[utoipa::path(post, path = "/webhooks", tag = "webhooks", request_body = CreateWebhook,
    params(("Idempotency-Key" = Option<String>, Header, description = "Makes the request safe to retry: the same key with the same body within 24 hours answers the first response again (nothing is created); with another body, 422.")),
    responses(
        (status = 201, body = WebhookWithSecret, description = "Created; keep the secret", headers(("Location" = String))),
        (status = 403, body = Problem, description = "Needs an admin token"),
        (status = 422, body = Problem, description = "A bad field, e.g. an unknown event name or a refused URL")))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn create_webhook(
    State(state): State<AppState>,
    caller: Authenticated,
    IdempotentJson(body, idem): IdempotentJson<CreateWebhook>,
) -> ApiResult<Response> {
    caller.require(Scope::Admin)?;
    if let Some(first) = idempotency::replay(&state, idem.as_ref()).await? {
        return Ok(first);
    }
    let new = NewWebhook {
        url: body.url,
        events: body.events,
        project: body.project,
        description: body.description,
        secret: body.secret,
        enabled: body.enabled,
        format: body.format,
    };
    let created = webhooks_app::create(&state, &state.webhooks.allowed_hosts, new, idem.as_ref()).await?;
    let location = [(header::LOCATION, format!("/api/v1/webhooks/{}", created.subscription.id))];
    Ok((StatusCode::CREATED, location, Json(created)).into_response())
}

/// Subscriptions, oldest first, a page at a time.
#[utoipa::path(get, path = "/webhooks", tag = "webhooks", params(PageQuery),
    responses((status = 200, body = Page<Subscription>, description = "One page"),
        (status = 403, body = Problem, description = "Needs an admin token"),
        (status = 422, body = Problem, description = "Bad cursor or limit")))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list_webhooks(
    State(state): State<AppState>,
    caller: Authenticated,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<Subscription>>> {
    caller.require(Scope::Admin)?;
    let (limit, after) = query.parse()?;
    let mut conn = state.db.acquire().await?;
    let rows = webhooks::list(&mut conn, after.map(|p| (p.created_at, p.id)), limit).await?;
    Ok(Json(page(rows, limit, |s| Position { created_at: s.created_at, id: s.id })))
}

/// One subscription (never its secret).
#[utoipa::path(get, path = "/webhooks/{id}", tag = "webhooks", params(("id" = Uuid, Path)),
    responses((status = 200, body = Subscription, description = "The subscription"),
        (status = 403, body = Problem, description = "Needs an admin token"),
        (status = 404, body = Problem, description = "Not found")))]
#[tracing::instrument(skip_all, fields(id = ?id), err(level = "debug"))]
pub async fn get_webhook(
    State(state): State<AppState>,
    caller: Authenticated,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<Subscription>> {
    caller.require(Scope::Admin)?;
    let mut conn = state.db.acquire().await?;
    Ok(Json(webhooks_app::find(&mut conn, id).await?))
}

/// Changes some fields; only those sent change.
#[utoipa::path(patch, path = "/webhooks/{id}", tag = "webhooks", params(("id" = Uuid, Path)), request_body = UpdateWebhook,
    responses((status = 200, body = Subscription, description = "The subscription"),
        (status = 403, body = Problem, description = "Needs an admin token"),
        (status = 404, body = Problem, description = "Not found"),
        (status = 422, body = Problem, description = "A bad field")))]
#[tracing::instrument(skip_all, fields(id = ?id), err(level = "debug"))]
pub async fn update_webhook(
    State(state): State<AppState>,
    caller: Authenticated,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<UpdateWebhook>,
) -> ApiResult<Json<Subscription>> {
    caller.require(Scope::Admin)?;
    let patch = SubscriptionPatch {
        url: body.url,
        events: body.events,
        project: body.project,
        description: body.description,
        format: body.format,
        enabled: body.enabled,
    };
    Ok(Json(webhooks_app::update(&state, &state.webhooks.allowed_hosts, id, patch).await?))
}

/// Deletes a subscription and its delivery log; pending deliveries are dropped.
#[utoipa::path(delete, path = "/webhooks/{id}", tag = "webhooks", params(("id" = Uuid, Path)),
    responses((status = 204, description = "Deleted"),
        (status = 403, body = Problem, description = "Needs an admin token"),
        (status = 404, body = Problem, description = "Not found")))]
#[tracing::instrument(skip_all, fields(id = ?id), err(level = "debug"))]
pub async fn delete_webhook(
    State(state): State<AppState>,
    caller: Authenticated,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<StatusCode> {
    caller.require(Scope::Admin)?;
    webhooks_app::delete(&state, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Replaces the signing secret. For the next 24 hours deliveries carry two signatures (new and
/// old), so the receiver can switch without dropping messages. The new secret is shown once.
#[utoipa::path(post, path = "/webhooks/{id}/rotate-secret", tag = "webhooks", params(("id" = Uuid, Path)),
    responses((status = 200, body = WebhookWithSecret, description = "The new secret"),
        (status = 403, body = Problem, description = "Needs an admin token"),
        (status = 404, body = Problem, description = "Not found")))]
#[tracing::instrument(skip_all, fields(id = ?id), err(level = "debug"))]
pub async fn rotate_secret(
    State(state): State<AppState>,
    caller: Authenticated,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<WebhookWithSecret>> {
    caller.require(Scope::Admin)?;
    Ok(Json(webhooks_app::rotate_secret(&state, id).await?))
}
