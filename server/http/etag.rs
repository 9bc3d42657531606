//! Optimistic concurrency over a row's `version` in HTTP: responses carry `ETag: "<version>"`,
//! and a change sent with `If-Match` applies only if the row is still at that version (else 412;
//! the rule itself is [`crate::app::IfMatch`]).

use axum::extract::FromRequestParts;
use axum::http::header::{self, HeaderName};
use axum::http::request::Parts;

pub use crate::app::IfMatch;
use crate::http::error::ApiError;

impl<S: Send + Sync> FromRequestParts<S> for IfMatch {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        match parts.headers.get(header::IF_MATCH) {
            None => Ok(IfMatch::new(None)),
            Some(value) => value
                .to_str()
                .map(|v| IfMatch::new(Some(v)))
                .map_err(|_| ApiError::BadRequest("If-Match must be ASCII, e.g. \"3\"".into())),
        }
    }
}

/// The `ETag` header for a row at `version`.
pub fn etag(version: i32) -> [(HeaderName, String); 1] {
    [(header::ETAG, format!("\"{version}\""))]
}
