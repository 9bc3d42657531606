//! The dashboard's static files, compiled into the binary (it needs nothing beside it) and served
//! with year-long cache headers: each URL names one exact content — htmx and its SSE extension by
//! their version, our own CSS and script by a hash of their bytes — so a changed file is a new URL.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};

use crate::api::AppState;

const HTMX: &[u8] = include_bytes!("../../web/static/htmx-2.0.11.min.js");
const SSE: &[u8] = include_bytes!("../../web/static/htmx-ext-sse-2.2.4.min.js");
const CSS: &[u8] = include_bytes!("../../web/static/app.css");
const APP_JS: &[u8] = include_bytes!("../../web/static/app.js");

pub const HTMX_URL: &str = "/static/htmx-2.0.11.min.js";
pub const SSE_URL: &str = "/static/htmx-ext-sse-2.2.4.min.js";

static CSS_URL: LazyLock<String> = LazyLock::new(|| format!("/static/app.css?v={}", short_hash(CSS)));
static APP_JS_URL: LazyLock<String> = LazyLock::new(|| format!("/static/app.js?v={}", short_hash(APP_JS)));

pub fn css_url() -> &'static str {
    &CSS_URL
}

pub fn app_js_url() -> &'static str {
    &APP_JS_URL
}

fn short_hash(bytes: &[u8]) -> String {
    hex::encode(&Sha256::digest(bytes)[..6])
}

pub fn router() -> Router<AppState> {
    Router::new().route("/static/{name}", get(asset))
}

/// Every static file with its content type, for the server and the bench (first-visit bytes).
pub fn files() -> [(&'static str, &'static str, &'static [u8]); 4] {
    [
        ("htmx-2.0.11.min.js", "text/javascript; charset=utf-8", HTMX),
        ("htmx-ext-sse-2.2.4.min.js", "text/javascript; charset=utf-8", SSE),
        ("app.css", "text/css; charset=utf-8", CSS),
        ("app.js", "text/javascript; charset=utf-8", APP_JS),
    ]
}

async fn asset(Path(name): Path<String>) -> Response {
    let Some((_, content_type, bytes)) = files().into_iter().find(|(file, _, _)| *file == name) else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=31536000, immutable"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}
