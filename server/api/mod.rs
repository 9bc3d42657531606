//! The HTTP application: `router(state)` builds every route and layer, with no socket, so tests
//! can drive it directly. One file per resource; each exposes `router() -> OpenApiRouter`.

pub mod agent_actions;
pub mod agent_hooks;
pub mod agents;
pub mod auth;
pub mod board_columns;
pub mod board_templates;
pub mod boards;
pub mod error;
pub mod event_stream;
pub mod events;
pub mod extract;
pub mod health;
pub mod hooks;
pub mod json;
pub mod messages;
pub mod pagination;
pub mod projects;
pub mod query;
pub mod task_actions;
pub mod tasks;
pub mod team_chat;
pub mod teams;
pub mod token_cache;
pub mod tokens;
pub mod version;
pub mod webhook_deliveries;
pub mod webhooks;
pub mod wish_actions;
pub mod wish_groups;
pub mod wishes;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{HeaderName, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use sqlx::PgPool;
use tower::ServiceBuilder;
use tower_http::compression::CompressionLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use utoipa_swagger_ui::SwaggerUi;

use crate::config::WebhookSettings;
use crate::feed::EventFeed;
use crate::node::NodeInfo;
use error::{ApiError, InternalCause};

/// What every handler can reach. Cloned for every extractor and layer of every request, so a
/// clone is one reference count.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The application's parts, shared by every request.
pub struct Shared {
    pub db: PgPool,
    pub node: NodeInfo,
    /// The providers agents may run (built-ins merged with `<data_dir>/providers.toml`).
    pub providers: std::sync::Arc<crate::worker::providers::Providers>,
    /// Where agents' clones live (`<data_dir>/clones`); nothing outside it is ever removed.
    pub data_dir: std::path::PathBuf,
    /// This node's agent panes, for the routes that act on a pane (input, screen, …); `None`
    /// where no worker runs beside the API.
    pub panes: Option<crate::worker::panes::LocalPanes>,
    /// Wakes live event streams when an event is written on any replica.
    pub feed: EventFeed,
    pub webhooks: Arc<WebhookSettings>,
    /// Bearer tokens verified in the last second.
    pub tokens: Arc<token_cache::TokenCache>,
    /// `GET /tasks/{id}`'s reads, gathered into one statement under load.
    pub task_reads: crate::db::tasks::Reads,
}

pub const BODY_LIMIT: usize = 4 * 1024 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

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
}

/// `/api/v1` routes that authenticate by signature instead of a bearer token (inbound hooks).
fn signed_routes() -> OpenApiRouter<AppState> {
    hooks::router()
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
    documented(v1_routes().merge(signed_routes())).into_openapi()
}

pub fn router(state: AppState) -> Router {
    let authenticated = v1_routes().route_layer(middleware::from_fn_with_state(state.clone(), auth::require_token));
    let (api, spec) = documented(authenticated.merge(signed_routes())).split_for_parts();
    let served = spec.clone();
    Router::new()
        .merge(api)
        // The description of the API is public; the data behind it is not.
        .route("/api/v1/openapi.json", get(move || async move { Json(served) }))
        .merge(SwaggerUi::new("/api/docs").url("/api/docs/openapi.json", spec))
        // The dashboard: pages for people, on the same functions as the API.
        .merge(crate::pages::router(state.clone()))
        .fallback(not_found)
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
                .layer(TraceLayer::new_for_http().make_span_with(request_span))
                .layer(PropagateRequestIdLayer::new(REQUEST_ID))
                .layer(middleware::from_fn(log_internal_errors))
                .layer(CompressionLayer::new())
                .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, REQUEST_TIMEOUT)),
        )
        .with_state(state)
}

async fn not_found(request: Request) -> Response {
    let error = ApiError::NotFound(format!("no route for {} {}", request.method(), request.uri().path()));
    // A person who follows a wrong link gets a page; a script gets problem+json.
    if crate::pages::wants_a_page(&request) {
        return crate::pages::error_page(error);
    }
    error.into_response()
}

/// The span of one request, named by its matched route (not the raw path, which would hold ids).
fn request_span(request: &Request) -> tracing::Span {
    let route = request.extensions().get::<MatchedPath>().map(|m| m.as_str().to_owned()).unwrap_or_default();
    let request_id = request.headers().get(&REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("");
    tracing::info_span!("http", method = %request.method(), route = %route, request_id = %request_id)
}

/// The one place a 5xx's cause is logged.
async fn log_internal_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if let Some(InternalCause(cause)) = response.extensions().get::<InternalCause>() {
        tracing::error!(status = response.status().as_u16(), cause = %cause, "request failed");
    }
    response
}
