//! The dashboard's session check: the session cookie (HttpOnly, SameSite=Lax, Secure behind TLS)
//! names a live session, and every request that may change something carries the session's CSRF
//! token — htmx sends it as a header (`hx-headers` on the page body), plain forms as a field.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use crate::db::sessions::{self, Session, SESSION_DAYS};
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::view::{is_htmx, PageError};

pub const SESSION_COOKIE: &str = "switchyard_session";
pub const CSRF_HEADER: &str = "x-csrf-token";
pub const CSRF_FIELD: &str = "_csrf";

/// Lets a request through only with a live session (else to the login page), and a change only
/// with its CSRF token (else 403). The session is put in the request for the handlers.
pub async fn require_session(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(secret) = cookie(request.headers(), SESSION_COOKIE).map(str::to_owned) else {
        return to_login(&request);
    };
    let hash = crate::auth::hash_token(&secret);
    let session = match state.sessions.get(&hash) {
        Some(session) => session,
        None => {
            let verified_at = std::time::Instant::now();
            match sessions::find(&state.db, &secret).await {
                Ok(Some(session)) => {
                    state.sessions.put(hash.clone(), session.clone(), verified_at);
                    session
                }
                Ok(None) => return to_login(&request),
                Err(e) => return PageError::from(e).into_response(),
            }
        }
    };
    let mut request = if changes_state(request.method()) {
        match check_csrf(request, &session.csrf).await {
            Ok(request) => request,
            Err(refusal) => return refusal,
        }
    } else {
        request
    };
    match crate::app::tokens::session_used(&state, &session).await {
        Ok(true) => {
            let used = Session { last_seen_at: chrono::Utc::now(), ..session.clone() };
            state.sessions.put(hash, used, std::time::Instant::now());
        }
        Ok(false) => {}
        Err(e) => tracing::warn!(error = %e, "recording session use"),
    }
    request.extensions_mut().insert(session);
    next.run(request).await
}

fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The request again if it carries the CSRF token (header, or `_csrf` in a form body), else 403.
async fn check_csrf(request: Request, expected: &str) -> Result<Request, Response> {
    let refused = || {
        PageError(ApiError::Forbidden(
            "this request lacks the page's CSRF token (or it is stale): reload the page and try again".into(),
        ))
        .into_response()
    };
    if let Some(sent) = request.headers().get(CSRF_HEADER) {
        return if same_secret(sent.as_bytes(), expected.as_bytes()) { Ok(request) } else { Err(refused()) };
    }
    let is_form = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !is_form {
        return Err(refused());
    }
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, crate::http::BODY_LIMIT)
        .await
        .map_err(|_| PageError(ApiError::PayloadTooLarge("the form is too large".into())).into_response())?;
    let sent = form_urlencoded::parse(&bytes).find(|(k, _)| k == CSRF_FIELD).map(|(_, v)| v.into_owned());
    match sent {
        Some(sent) if same_secret(sent.as_bytes(), expected.as_bytes()) => {
            Ok(Request::from_parts(parts, Body::from(bytes)))
        }
        _ => Err(refused()),
    }
}

/// Compares without stopping at the first difference, so timing says nothing about the token.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Where a request without a session goes: a page to the login form (coming back after), htmx
/// told to send the whole window there, anything else a 401.
fn to_login(request: &Request) -> Response {
    let here = request.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let login = format!("/login?next={}", form_urlencoded::byte_serialize(here.as_bytes()).collect::<String>());
    if is_htmx(request.headers()) {
        let mut response = StatusCode::UNAUTHORIZED.into_response();
        if let Ok(value) = HeaderValue::from_str(&login) {
            response.headers_mut().insert("hx-redirect", value);
        }
        return response;
    }
    if *request.method() == Method::GET {
        return Redirect::to(&login).into_response();
    }
    PageError(ApiError::Unauthorized("your dashboard session ended: log in again")).into_response()
}

/// A cookie's value from the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// The session cookie: HttpOnly (no script reads it), SameSite=Lax (no other site's form posts
/// with it), Secure when the browser reached us over TLS (a proxy says so in
/// `X-Forwarded-Proto`). `None` clears it.
pub fn session_cookie(headers: &HeaderMap, secret: Option<&str>) -> HeaderValue {
    let secure = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').next().is_some_and(|p| p.trim().eq_ignore_ascii_case("https")));
    let (value, max_age) = match secret {
        Some(secret) => (secret, SESSION_DAYS * 86_400),
        None => ("", 0),
    };
    let secure = if secure { "; Secure" } else { "" };
    let cookie = format!("{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}");
    HeaderValue::from_str(&cookie).unwrap_or_else(|_| HeaderValue::from_static("switchyard_session=; Max-Age=0"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.append(header::COOKIE, HeaderValue::from_static("a=1; switchyard_session=sys_abc; b=2"));
        assert_eq!(cookie(&headers, SESSION_COOKIE), Some("sys_abc"));
        assert_eq!(cookie(&headers, "c"), None);
    }

    #[test]
    fn the_cookie_is_http_only_lax_and_secure_only_behind_tls() {
        let plain = session_cookie(&HeaderMap::new(), Some("s"));
        let plain = plain.to_str().expect("ascii");
        assert!(plain.contains("HttpOnly") && plain.contains("SameSite=Lax") && !plain.contains("Secure"), "{plain}");
        let mut tls = HeaderMap::new();
        tls.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        assert!(session_cookie(&tls, Some("s")).to_str().expect("ascii").ends_with("; Secure"));
        assert!(session_cookie(&tls, None).to_str().expect("ascii").contains("Max-Age=0"));
    }

    #[test]
    fn secrets_compare_equal_only_when_identical() {
        assert!(same_secret(b"abc", b"abc"));
        assert!(!same_secret(b"abc", b"abd"));
        assert!(!same_secret(b"abc", b"abcd"));
    }
}
