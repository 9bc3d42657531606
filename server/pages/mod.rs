//! The dashboard: server-rendered pages (askama templates in `web/templates`) made live with htmx
//! and one Server-Sent Events stream per page. One module per page group; every page calls the
//! same db and domain functions as the API (and the API's shared actions), never a copy of them.
//!
//! A page's parts that change are askama blocks: the full page renders them in place, and
//! `?block=<name>` renders one alone, which is what htmx fetches when the live stream says
//! something about that part changed (see [`live`]).

mod agents;
mod assets;
mod boards;
mod dag;
mod diff;
mod events;
mod first_run;
mod handoffs;
mod live;
mod login;
mod merge_queue;
mod messages;
mod notifications;
mod overview;
pub mod overview_cache;
mod paging;
mod project_conductor;
mod projects;
mod session;
mod tasks;
mod team_actions;
mod teams;
mod view;
mod webhook_form;
mod webhooks;
mod wish_conductor;
mod wish_form;
mod wish_plan;
mod wish_review;
mod wishes;

use axum::http::{header, HeaderValue};
use axum::middleware;
use axum::Router;
use tower_http::set_header::SetResponseHeaderLayer;

use crate::http::AppState;

pub use session::{CSRF_FIELD, CSRF_HEADER, SESSION_COOKIE};

/// A browser asking for something outside the API: it wants HTML.
pub fn wants_a_page(request: &axum::extract::Request) -> bool {
    let html = request
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"));
    html && !request.uri().path().starts_with("/api/")
}

/// An API error shown as the dashboard's error page.
pub fn error_page(error: crate::http::error::ApiError) -> axum::response::Response {
    axum::response::IntoResponse::into_response(view::PageError(error))
}

/// Scripts and styles come from this server only; nothing is evaluated from strings.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'self'";

/// Every dashboard route: the login pages and static files are public, the rest needs a session
/// (and, to change anything, its CSRF token).
pub fn router(state: AppState) -> Router<AppState> {
    let pages = Router::new()
        .merge(overview::router())
        .merge(boards::router())
        .merge(tasks::router())
        .merge(projects::router())
        .merge(wishes::router())
        .merge(wish_form::router())
        .merge(wish_plan::router())
        .merge(wish_review::router())
        .merge(handoffs::router())
        .merge(project_conductor::router())
        .merge(agents::router())
        .merge(teams::router())
        .merge(team_actions::router())
        .merge(messages::router())
        .merge(webhooks::router())
        .merge(webhook_form::router())
        .merge(events::router())
        .merge(merge_queue::router())
        .merge(notifications::router())
        .merge(live::router())
        .merge(login::logout_router())
        .route_layer(middleware::from_fn_with_state(state.clone(), session::require_session));
    Router::new()
        .merge(pages)
        .merge(login::router(state))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")))
        .layer(SetResponseHeaderLayer::if_not_present(header::REFERRER_POLICY, HeaderValue::from_static("same-origin")))
        .merge(assets::router())
}
