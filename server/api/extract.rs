//! `ApiPath`: path parameters whose failures are problem+json like every other error (a
//! malformed id is a 404 — no such resource can exist). Query strings: `api::query::ApiQuery`.

use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path};

use crate::api::error::ApiError;

#[derive(FromRequestParts)]
#[from_request(via(Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

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
