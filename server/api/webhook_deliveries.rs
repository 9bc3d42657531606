//! A subscription's delivery log: list it, send one delivery again, or send a test event.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::api::auth::Authenticated;
use crate::app::webhooks;
use crate::auth::Scope;
use crate::db::webhook_deliveries::{self, Delivery};
use crate::http::error::{ApiResult, Problem};
use crate::http::extract::ApiPath;
use crate::http::pagination::{page, Page, PageQuery, Position};
use crate::http::query::ApiQuery;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_deliveries)).routes(routes!(redeliver)).routes(routes!(send_test_event))
}

/// Deliveries to this subscription, newest first: status, attempts, last response code, timing.
#[utoipa::path(get, path = "/webhooks/{id}/deliveries", tag = "webhooks", params(("id" = Uuid, Path), PageQuery),
    responses((status = 200, body = Page<Delivery>, description = "One page, newest first"),
        (status = 403, body = Problem, description = "Needs an admin token"),
        (status = 404, body = Problem, description = "No such webhook"),
        (status = 422, body = Problem, description = "Bad cursor or limit")))]
#[tracing::instrument(skip_all, fields(id = ?id), err(level = "debug"))]
pub async fn list_deliveries(
    State(state): State<AppState>,
    caller: Authenticated,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<Delivery>>> {
    caller.require(Scope::Admin)?;
    let (limit, before) = query.parse()?;
    let mut conn = state.db.acquire().await?;
    webhooks::find(&mut conn, id).await?;
    let rows = webhook_deliveries::list(&mut conn, id, before.map(|p| (p.created_at, p.id)), limit).await?;
    Ok(Json(page(rows, limit, |d| Position { created_at: d.created_at, id: d.id })))
}

/// Sends a delivery again now, with the same `webhook-id`, whatever its state (also a failed one).
#[utoipa::path(post, path = "/webhooks/{id}/deliveries/{delivery}/redeliver", tag = "webhooks",
    params(("id" = Uuid, Path), ("delivery" = Uuid, Path)),
    responses((status = 202, body = Delivery, description = "Queued for sending"),
        (status = 403, body = Problem, description = "Needs an admin token"),
        (status = 404, body = Problem, description = "No such webhook or delivery")))]
#[tracing::instrument(skip_all, fields(id = ?id, delivery = ?delivery), err(level = "debug"))]
pub async fn redeliver(
    State(state): State<AppState>,
    caller: Authenticated,
    ApiPath((id, delivery)): ApiPath<(Uuid, Uuid)>,
) -> ApiResult<(StatusCode, Json<Delivery>)> {
    caller.require(Scope::Admin)?;
    Ok((StatusCode::ACCEPTED, Json(webhooks::redeliver(&state, id, delivery).await?)))
}

/// Queues a `webhook.test` delivery to this subscription, signed like any other; like every
/// delivery it is sent only while the subscription is enabled.
#[utoipa::path(post, path = "/webhooks/{id}/test", tag = "webhooks", params(("id" = Uuid, Path)),
    responses((status = 202, body = Delivery, description = "Queued; follow it in the delivery log"),
        (status = 403, body = Problem, description = "Needs an admin token"),
        (status = 404, body = Problem, description = "No such webhook")))]
#[tracing::instrument(skip_all, fields(id = ?id), err(level = "debug"))]
pub async fn send_test_event(
    State(state): State<AppState>,
    caller: Authenticated,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<(StatusCode, Json<Delivery>)> {
    caller.require(Scope::Admin)?;
    Ok((StatusCode::ACCEPTED, Json(webhooks::queue_test(&state, id).await?)))
}
