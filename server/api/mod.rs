//! The JSON API under `/api/v1`: one file per resource, each exposing `router() ->
//! OpenApiRouter`; handlers translate a request into an [`crate::app`] call (or a read) and its
//! result into a response. [`routes`] joins them with authentication and their OpenAPI document.

pub mod agent_actions;
pub mod agent_branches;
pub mod agent_hooks;
pub mod agent_reports;
pub mod agent_states;
pub mod agents;
pub mod auth;
pub mod board_columns;
pub mod board_templates;
pub mod boards;
pub mod event_stream;
pub mod events;
pub mod health;
pub mod history;
pub mod idempotency;
pub mod inbound;
pub mod json;
pub mod merge_queue;
pub mod messages;
pub mod needs;
pub mod projects;
pub mod providers;
pub mod spec;
pub mod task_actions;
pub mod task_dependencies;
pub mod task_runs;
pub mod tasks;
pub mod team_chat;
pub mod teams;
pub mod tokens;
pub mod usage;
pub mod webhook_deliveries;
pub mod webhooks;
pub mod wish_actions;
pub mod wish_groups;
pub mod wishes;

use axum::{middleware, Router};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::http::{error, rate_limit, AppState};

#[derive(OpenApi)]
#[openapi(
    info(title = "Switchyard API", description = "Control plane for fleets of AI coding agents in tmux panes. \
        Every route under /api/v1 needs `Authorization: Bearer <token>`; errors are RFC 9457 problem+json."),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    components(schemas(error::Problem, error::FieldError))
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Every `/api/v1` route, one router per resource.
fn v1_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .merge(tokens::router())
        .merge(agents::router())
        .merge(events::router())
        .merge(event_stream::router())
        .merge(webhooks::router())
        .merge(projects::router())
        .merge(boards::router())
        .merge(tasks::router())
        .merge(wishes::router())
        .merge(teams::router())
        .merge(messages::router())
        .merge(merge_queue::router())
        .merge(history::router())
        .merge(needs::router())
        .merge(providers::router())
        .merge(usage::router())
}

/// `/api/v1` routes that authenticate by signature instead of a bearer token (inbound hooks).
fn signed_routes() -> OpenApiRouter<AppState> {
    inbound::router()
}

/// The documented routes: `/api/v1` plus the health checks.
fn documented(v1: OpenApiRouter<AppState>) -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .nest("/api/v1", v1)
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
}

/// The OpenAPI document as served and as committed in `openapi/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut openapi = documented(v1_routes().merge(signed_routes())).into_openapi();
    spec::document_rate_limits(&mut openapi);
    spec::complete(&mut openapi);
    openapi
}

/// The API's routes (bearer-token routes behind authentication, signed inbound hooks beside them)
/// and the OpenAPI document that describes them. [`crate::http`] adds the docs, the dashboard
/// and the layers.
pub fn routes(state: &AppState) -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let authenticated = v1_routes().route_layer(middleware::from_fn_with_state(state.clone(), auth::require_token));
    // Signed routes take no token: they are limited by client address instead.
    let signed =
        signed_routes().route_layer(middleware::from_fn_with_state(state.clone(), rate_limit::limit_by_address));
    let (router, mut openapi) = documented(authenticated.merge(signed)).split_for_parts();
    spec::document_rate_limits(&mut openapi);
    spec::complete(&mut openapi);
    (router, openapi)
}
