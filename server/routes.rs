//! The HTTP application: joins the API, its docs, the dashboard and the layers every request goes
//! through. `router(state)` needs no socket, so tests can drive it directly.

use std::time::Duration;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tower::ServiceBuilder;
use tower_http::compression::CompressionLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use utoipa_swagger_ui::SwaggerUi;

use crate::http::error::{ApiError, InternalCause};
use crate::http::{AppState, BODY_LIMIT};

const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

pub fn router(state: AppState) -> Router {
    let (api, spec) = crate::api::routes(&state);
    let served = spec.clone();
    Router::new()
        .merge(api)
        // The description of the API is public; the data behind it is not.
        .route("/api/v1/openapi.json", get(move || async move { Json(served) }))
        .merge(SwaggerUi::new("/api/docs").url("/api/docs/openapi.json", spec))
        // The dashboard: pages for people, on the same use cases as the API.
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
                .layer(middleware::from_fn_with_state(state.clone(), count_request))
                .layer(middleware::from_fn(refuse_nul))
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

/// Counts and times each request by its matched route (`unmatched` when none matched).
async fn count_request(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    // A clone of the matched path is a reference count, not a copy.
    let route = request.extensions().get::<MatchedPath>().cloned();
    let response = next.run(request).await;
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    state.metrics.request(method.as_str(), route, response.status().as_u16(), started.elapsed());
    response
}

/// No route takes NUL in its path or query ([`crate::http::extract::refuse_nul`]).
async fn refuse_nul(request: Request, next: Next) -> Response {
    match crate::http::extract::refuse_nul(request.uri()) {
        Ok(()) => next.run(request).await,
        Err(error) if crate::pages::wants_a_page(&request) => crate::pages::error_page(error),
        Err(error) => error.into_response(),
    }
}

/// The one place a 5xx's cause is logged.
async fn log_internal_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if let Some(InternalCause(cause)) = response.extensions().get::<InternalCause>() {
        tracing::error!(status = response.status().as_u16(), cause = %cause, "request failed");
    }
    response
}
