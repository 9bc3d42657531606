//! Extractors whose failures are problem+json like every other error: path parameters
//! (`ApiPath`, a malformed id is a 404 — no such resource can exist) and query strings
//! (`ApiQuery`, a 422 naming the parameter).

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{FromRequestParts, Path, Query};

use crate::api::error::ApiError;

#[derive(FromRequestParts)]
#[from_request(via(Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

#[derive(FromRequestParts)]
#[from_request(via(Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> ApiError {
        match rejection {
            PathRejection::FailedToDeserializePathParams(e) => {
                ApiError::NotFound(format!("no such resource: {}", e.body_text()))
            }
            // A route whose handler asks for parameters it does not have is our bug.
            other => ApiError::Internal(anyhow::anyhow!(other.body_text())),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> ApiError {
        let text = rejection.body_text();
        // axum's text reads "Failed to deserialize query string: limit: invalid digit …".
        let detail = text.strip_prefix("Failed to deserialize query string: ").unwrap_or(&text);
        let (field, message) = detail.split_once(": ").unwrap_or(("query", detail));
        ApiError::validation(field, message)
    }
}
