//! What every page shares: the chrome around it (navigation, CSRF token, live stream address),
//! rendering a template or one of its blocks, errors shown as HTML, form bodies, and the small
//! formatting rules templates need (relative times, truncation, state labels).

use askama::Template;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use sqlx::PgConnection;

use crate::db::events;
use crate::db::sessions::Session;
use crate::http::error::{ApiError, InternalCause};
use crate::http::extract::refused_path;
use crate::pages::assets;

/// The dashboard's sections, in the navigation's order: `(key, address, label)`.
pub const SECTIONS: [(&str, &str, &str); 10] = [
    ("overview", "/", "Overview"),
    ("boards", "/boards", "Boards"),
    ("wishes", "/wishes", "Wishes"),
    ("merge-queue", "/merge-queue", "Merge queue"),
    ("history", "/history", "History"),
    ("agents", "/agents", "Agents"),
    ("teams", "/teams", "Teams"),
    ("messages", "/messages", "Mailbox"),
    ("webhooks", "/webhooks", "Webhooks"),
    ("events", "/events", "Events"),
];

/// The frame of every page: who is logged in, the CSRF token for forms and htmx, which navigation
/// entry is current, and where the page's live stream starts.
pub struct Chrome {
    pub title: String,
    pub nav: &'static str,
    pub csrf: String,
    pub who: String,
    /// `/live?after=<event id>`: the events after what this page shows.
    pub live: String,
    pub css: &'static str,
    pub app_js: &'static str,
    pub htmx_js: &'static str,
    pub sse_js: &'static str,
}

impl Chrome {
    /// Reads the event log's head first: anything that happens after it reaches the page through
    /// its live stream, even while the page is still being rendered.
    pub async fn new(
        conn: &mut PgConnection,
        session: &Session,
        nav: &'static str,
        title: impl Into<String>,
    ) -> Result<Chrome, ApiError> {
        Ok(Chrome::after(events::head(conn).await?, session, nav, title))
    }

    /// A page whose live stream follows the log from after event `head` (from its beginning when
    /// `None`): what the page shows must reflect every event up to it.
    pub fn after(head: Option<i64>, session: &Session, nav: &'static str, title: impl Into<String>) -> Chrome {
        let live = match head {
            Some(id) => format!("/live?after={id}"),
            None => "/live".to_owned(),
        };
        Chrome {
            title: title.into(),
            nav,
            csrf: session.csrf.clone(),
            who: session.token_name.clone(),
            live,
            css: assets::css_url(),
            app_js: assets::app_js_url(),
            htmx_js: assets::HTMX_URL,
            sse_js: assets::SSE_URL,
        }
    }

    /// The breadcrumb's links above the page's own name: the overview, then the page's section
    /// unless the page is that section's list.
    pub fn crumbs(&self) -> Vec<(&'static str, &'static str)> {
        let mut crumbs = Vec::new();
        if self.nav != "overview" {
            crumbs.push(("/", "Overview"));
        }
        if let Some((_, href, label)) = SECTIONS.iter().find(|(key, _, _)| *key == self.nav) {
            if *label != self.title && self.nav != "overview" {
                crumbs.push((*href, *label));
            }
        }
        crumbs
    }

    pub fn sections(&self) -> &'static [(&'static str, &'static str, &'static str)] {
        &SECTIONS
    }

    /// The `hx-headers` value that makes htmx send the CSRF token with every request.
    pub fn hx_headers(&self) -> String {
        serde_json::json!({ super::CSRF_HEADER: self.csrf }).to_string()
    }
}

/// A page or a fragment, rendered; a template error is a logged 500.
pub fn render(template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => html_response(StatusCode::OK, html),
        Err(e) => PageError::from(ApiError::Internal(anyhow::anyhow!("rendering a template: {e}"))).into_response(),
    }
}

pub fn html_response(status: StatusCode, html: String) -> Response {
    let mut response = (status, html).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    // Pages show live state: never serve one from a cache.
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A 404 for a `?block=` the page does not have.
pub fn no_block(name: &str) -> PageError {
    PageError(ApiError::NotFound(format!("this page has no part `{name}`")))
}

/// `?block=<name>`: which part of a page to render alone.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockQuery {
    pub block: Option<String>,
}

/// An error on a page. The API's errors say what went wrong in the model's words; here they are
/// shown as HTML: for htmx, a message swapped into the page's flash area; without JavaScript, a
/// small page with a way back.
#[derive(Debug)]
pub struct PageError(pub ApiError);

impl From<ApiError> for PageError {
    fn from(error: ApiError) -> PageError {
        PageError(error)
    }
}

/// A use case's refusal: shown in the API's words (the same mapping, the same status).
impl From<crate::app::Error> for PageError {
    fn from(error: crate::app::Error) -> PageError {
        PageError(error.into())
    }
}

impl From<sqlx::Error> for PageError {
    fn from(error: sqlx::Error) -> PageError {
        PageError(error.into())
    }
}

pub type PageResult<T = Response> = Result<T, PageError>;

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    status: u16,
    title: &'a str,
    detail: &'a str,
    css: &'static str,
    sections: &'static [(&'static str, &'static str, &'static str)],
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let detail = match &self.0 {
            ApiError::Internal(_) => "The server failed to handle this request; it has been logged.".to_owned(),
            other => other.to_string(),
        };
        // The API's problem response decides the status and carries a 5xx's cause to the log.
        let problem = self.0.into_response();
        let status = problem.status();
        let title = status.canonical_reason().unwrap_or("Error");
        let page =
            ErrorPage { status: status.as_u16(), title, detail: &detail, css: assets::css_url(), sections: &SECTIONS };
        let html = page.render().unwrap_or_else(|_| format!("<p role=\"alert\">{}</p>", status.as_u16()));
        let mut response = html_response(status, html);
        // htmx shows it in the page's flash area instead of replacing the page.
        response.headers_mut().insert("hx-retarget", HeaderValue::from_static("#flash"));
        response.headers_mut().insert("hx-reswap", HeaderValue::from_static("innerHTML ignoreTitle:true"));
        // Whatever part of a page the request was after, the message is the part to show.
        response.headers_mut().insert("hx-reselect", HeaderValue::from_static(".flash"));
        if let Some(retry) = problem.headers().get(header::RETRY_AFTER) {
            response.headers_mut().insert(header::RETRY_AFTER, retry.clone());
        }
        if let Some(cause) = problem.extensions().get::<InternalCause>() {
            response.extensions_mut().insert(cause.clone());
        }
        response
    }
}

/// After a change, show the page it changed (POST, redirect, GET: a reload never repeats it).
pub fn see_other(location: &str) -> Response {
    Redirect::to(location).into_response()
}

/// Whether htmx sent the request (a live refresh or a boosted link or form).
pub fn is_htmx(headers: &HeaderMap) -> bool {
    headers.contains_key("hx-request")
}

/// A form body (`application/x-www-form-urlencoded`); a malformed one is a 422 naming the field.
/// Fields the type does not name (the CSRF token) are ignored.
pub struct PageForm<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for PageForm<T> {
    type Rejection = PageError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(|e| PageError(ApiError::BadRequest(e.body_text())))?;
        let body =
            std::str::from_utf8(&bytes).map_err(|_| PageError(ApiError::BadRequest("the form is not UTF-8".into())))?;
        crate::http::query::parse(body).map(PageForm).map_err(PageError)
    }
}

/// Path parameters whose failures are the error page (a malformed id is a 404 saying what it is
/// not, as in the API), never axum's plain-text rejection.
pub struct PagePath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PagePath<T> {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(PagePath(value)),
            Err(rejection) => Err(PageError(refused_path(rejection, parts.uri.path()))),
        }
    }
}

/// A page's query string, parsed as the API parses one: a bad value or a parameter the page does
/// not know is a 422 naming it (`/wishes?state=bogus` says so instead of showing every wish).
pub struct PageQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for PageQuery<T> {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        crate::http::query::parse(parts.uri.query().unwrap_or("")).map(PageQuery).map_err(PageError)
    }
}

/// The page's session, which the session middleware put there.
impl<S: Send + Sync> FromRequestParts<S> for Session {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Session>()
            .cloned()
            .ok_or(PageError(ApiError::Unauthorized("log in to the dashboard first")))
    }
}

pub use crate::domain::when::ago;

/// A machine-readable timestamp for `<time datetime>`.
pub fn iso(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// At most `max` characters, with an ellipsis when cut.
pub fn truncate(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{}…", cut.trim_end())
}

/// `a, b c` → `["a", "b", "c"]`: names typed into one field.
pub fn list(text: &str) -> Vec<String> {
    text.split([',', ' ']).map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
}

/// A form field trimmed; `None` when left empty (the use case's default).
pub fn filled(text: &str) -> Option<String> {
    Some(text.trim().to_owned()).filter(|t| !t.is_empty())
}

/// `in_progress` → `in progress`: a state as words (the CSS class keeps the underscore).
pub fn words(state: &str) -> String {
    state.replace('_', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_on_a_character_boundary_with_an_ellipsis() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("ünïcödé text here", 8), "ünïcödé…");
        assert_eq!(words("waiting_input"), "waiting input");
    }
}
