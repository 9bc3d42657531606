//! Logging in and out. Two ways in, both ending in a session cookie:
//! - the one-time link `serve` prints at first start (`/login?code=syl_…`): the code opens one
//!   session and is then used up, so the link in a browser's history or a terminal log opens
//!   nothing later; it expires after a day unused;
//! - an admin token pasted into the form: works every time, for as long as the token lives.
//!
//! Revoking the token ends every session opened with it (or with its link).

use std::net::SocketAddr;

use askama::Template;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;

use crate::app::tokens::{self, TokenLogin};
use crate::db::sessions::{self, Session};
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::assets;
use crate::pages::session::{cookie, session_cookie, SESSION_COOKIE};
use crate::pages::view::{html_response, PageError, PageForm, PageResult};

/// Both ways in check a secret without a session, so each client address gets only so many tries
/// (`SWITCHYARD_RATE_LIMIT_PER_ADDRESS`).
pub fn router(state: AppState) -> Router<AppState> {
    Router::new()
        .route("/login", get(login_page).post(log_in))
        .route_layer(middleware::from_fn_with_state(state, limit_by_address))
}

/// The address's rate limit, answered with the error page. A router driven without a socket (no
/// `ConnectInfo`) has no peer to key on and is not limited.
async fn limit_by_address(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<SocketAddr>>() {
        if let Err(error) = state.rate_limits.check_address(*peer, request.headers()) {
            return PageError(error).into_response();
        }
    }
    next.run(request).await
}

/// Logging out changes state: it sits behind the session check and its CSRF token.
pub fn logout_router() -> Router<AppState> {
    Router::new().route("/logout", post(log_out))
}

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    next: String,
    message: Option<String>,
    css: &'static str,
}

fn login_page_with(status: StatusCode, next: &str, message: Option<String>) -> PageResult {
    let page = LoginPage { next: next.to_owned(), message, css: assets::css_url() };
    let html = page.render().map_err(|e| ApiError::Internal(anyhow::anyhow!("rendering the login page: {e}")))?;
    Ok(html_response(status, html))
}

#[derive(Debug, Deserialize)]
struct LoginQuery {
    code: Option<String>,
    next: Option<String>,
}

/// Only a path on this site: never `//elsewhere`, `/\\elsewhere` or a full URL (an open
/// redirect), and no control characters (a browser drops tabs and newlines, so `/\t/evil` is
/// `//evil`; CR, LF or DEL cannot go in a `Location` header at all).
pub(crate) fn safe_next(next: Option<&str>) -> String {
    let on_this_site = |n: &str| {
        n.starts_with('/')
            && !n.starts_with("//")
            && !n.starts_with("/\\")
            && !n.chars().any(|c| c.is_control() || c == '\\')
    };
    match next {
        Some(n) if on_this_site(n) => n.to_owned(),
        _ => "/".to_owned(),
    }
}

/// Where a new session goes, with its cookie.
fn logged_in(headers: &HeaderMap, opened: sessions::Opened, next: &str) -> Response {
    let mut response = axum::response::Redirect::to(next).into_response();
    response.headers_mut().insert(header::SET_COOKIE, session_cookie(headers, Some(&opened.secret)));
    response
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn login_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    axum::extract::Query(query): axum::extract::Query<LoginQuery>,
) -> PageResult {
    let next = safe_next(query.next.as_deref());
    let Some(code) = query.code else {
        // Already logged in: nothing to do here.
        if let Some(secret) = cookie(&headers, SESSION_COOKIE) {
            if sessions::find(&state.db, secret).await?.is_some() {
                return Ok(axum::response::Redirect::to(&next).into_response());
            }
        }
        return login_page_with(StatusCode::OK, &next, None);
    };
    let Some(opened) = tokens::log_in_with_code(&state, &code).await? else {
        let message = "This login link was used already, has expired, or its token was revoked. \
                       Paste an admin token instead.";
        return login_page_with(StatusCode::UNAUTHORIZED, &next, Some(message.to_owned()));
    };
    Ok(logged_in(&headers, opened, &next))
}

#[derive(Debug, Deserialize)]
struct LoginForm {
    token: String,
    next: Option<String>,
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn log_in(State(state): State<AppState>, headers: HeaderMap, PageForm(form): PageForm<LoginForm>) -> PageResult {
    let next = safe_next(form.next.as_deref());
    // No session yet, so no CSRF token: a cross-site form could only log the browser in as
    // whoever's token it holds. Refuse any request another site's page sent.
    if !same_origin(&headers) {
        return Err(PageError(ApiError::Forbidden("a login must come from this site's own login form".into())));
    }
    match tokens::log_in_with_token(&state, &form.token).await? {
        TokenLogin::Opened(opened) => Ok(logged_in(&headers, opened, &next)),
        TokenLogin::Unknown => {
            let message = "That token is unknown or revoked.".to_owned();
            login_page_with(StatusCode::UNAUTHORIZED, &next, Some(message))
        }
        TokenLogin::NotAdmin(scope) => {
            let message = format!(
                "That is a `{scope}` token; the dashboard needs an admin token \
                 (`switchyard token create --name me --scope admin`)."
            );
            login_page_with(StatusCode::FORBIDDEN, &next, Some(message))
        }
    }
}

/// The browser names the page a form came from in `Origin` (and `Sec-Fetch-Site`); without
/// either (an old client, a script) the request is let through.
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        return matches!(site, "same-origin" | "none");
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else { return true };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    origin.split_once("://").is_some_and(|(_, rest)| rest == host)
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn log_out(State(state): State<AppState>, headers: HeaderMap, session: Session) -> PageResult {
    tokens::log_out(&state, session.id).await?;
    // Not one more request with its cookie here; other replicas drop it within a second.
    state.sessions.clear();
    let mut response = axum::response::Redirect::to("/login").into_response();
    response.headers_mut().insert(header::SET_COOKIE, session_cookie(&headers, None));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn next_is_only_ever_a_path_on_this_site() {
        assert_eq!(safe_next(Some("/wishes/login")), "/wishes/login");
        assert_eq!(safe_next(Some("//evil.example")), "/");
        assert_eq!(safe_next(Some("https://evil.example")), "/");
        assert_eq!(safe_next(Some("/\\evil.example")), "/");
        for hostile in ["/\t/evil.example", "/\n/evil.example", "/a\r\nSet-Cookie: x=1", "/\x7f", "/a\\..\\b"] {
            assert_eq!(safe_next(Some(hostile)), "/", "{hostile:?}");
        }
        assert_eq!(safe_next(Some("/wishes?q=ünï%09")), "/wishes?q=ünï%09");
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn a_login_posted_from_another_site_is_recognised() {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:8080"));
        assert!(same_origin(&headers), "no Origin: a script");
        headers.insert(header::ORIGIN, HeaderValue::from_static("http://127.0.0.1:8080"));
        assert!(same_origin(&headers));
        headers.insert(header::ORIGIN, HeaderValue::from_static("https://evil.example"));
        assert!(!same_origin(&headers));
        headers.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(!same_origin(&headers));
    }
}
