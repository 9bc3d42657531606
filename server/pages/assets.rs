//! The dashboard's static files, compiled into the binary (it needs nothing beside it) and served
//! with year-long cache headers: each URL names one exact content — htmx and its SSE extension by
//! their version, our own CSS and script by a hash of their bytes — so a changed file is a new URL.
//! The icon is the exception: browsers look for it by a fixed name, so it is cached for a day.

use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};

use crate::http::AppState;

const HTMX: &[u8] = include_bytes!("../../web/static/htmx-2.0.11.min.js");
const SSE: &[u8] = include_bytes!("../../web/static/htmx-ext-sse-2.2.4.min.js");
const CSS: &[u8] = include_bytes!("../../web/static/app.css");
const APP_JS: &[u8] = include_bytes!("../../web/static/app.js");
const FAVICON: &[u8] = include_bytes!("../../web/static/favicon.svg");

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
    Router::new()
        .route("/static/{name}", get(asset))
        // Browsers ask for `/favicon.ico` on their own, whatever the page links.
        .route("/favicon.ico", get(|| asset(Path("favicon.svg".to_owned()))))
}

/// Every static file with its content type, for the server and the bench (first-visit bytes).
pub fn files() -> [(&'static str, &'static str, &'static [u8]); 5] {
    [
        ("htmx-2.0.11.min.js", "text/javascript; charset=utf-8", HTMX),
        ("htmx-ext-sse-2.2.4.min.js", "text/javascript; charset=utf-8", SSE),
        ("app.css", "text/css; charset=utf-8", CSS),
        ("app.js", "text/javascript; charset=utf-8", APP_JS),
        ("favicon.svg", "image/svg+xml", FAVICON),
    ]
}

async fn asset(Path(name): Path<String>) -> Response {
    let Some((_, content_type, bytes)) = files().into_iter().find(|(file, _, _)| *file == name) else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    let cache = if name == "favicon.svg" { "public, max-age=86400" } else { "public, max-age=31536000, immutable" };
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// WCAG relative luminance of `#rrggbb`.
    fn luminance(hex: &str) -> f64 {
        let channel = |i: usize| {
            let c = f64::from(u8::from_str_radix(&hex[1 + 2 * i..3 + 2 * i], 16).expect("hex")) / 255.0;
            if c <= 0.03928 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2)
    }

    fn contrast(a: &str, b: &str) -> f64 {
        let (x, y) = (luminance(a), luminance(b));
        (x.max(y) + 0.05) / (x.min(y) + 0.05)
    }

    #[test]
    fn every_text_colour_on_its_background_meets_wcag_aa() {
        let css = std::str::from_utf8(CSS).expect("utf-8");
        let pair = regex::Regex::new(r"background: (#[0-9a-f]{6}); color: (#[0-9a-f]{6})").expect("pattern");
        let mut checked = 0;
        for caps in pair.captures_iter(css) {
            let ratio = contrast(&caps[1], &caps[2]);
            assert!(ratio >= 4.5, "{} on {} is {ratio:.2}:1", &caps[2], &caps[1]);
            checked += 1;
        }
        assert!(checked >= 7, "the state colours were found ({checked})");
        // The page's own text, muted text and links on the page and panel backgrounds.
        for (text, background) in [("#1b1f24", "#f6f7f9"), ("#545d68", "#eef1f5"), ("#1d4ed8", "#f6f7f9")] {
            assert!(contrast(text, background) >= 4.5, "{text} on {background}");
        }
    }
}
