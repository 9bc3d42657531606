//! One error type for the whole API, rendered as RFC 9457 `application/problem+json`.
//! 5xx bodies say nothing internal; their cause travels in a response extension and is logged
//! once, by `log_internal_errors`.

use axum::extract::rejection::JsonRejection;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::app;

pub use crate::app::FieldError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("method not allowed")]
    MethodNotAllowed,
    /// A conflicting state: an illegal transition, a duplicate, a full column.
    #[error("{detail}")]
    Conflict { detail: String, current_state: Option<String> },
    #[error("{0}")]
    PreconditionFailed(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("{detail}")]
    Validation { detail: String, errors: Vec<FieldError> },
    /// A rate limit ran out; `retry_after` whole seconds (at least 1) until it has room.
    #[error("{detail}")]
    TooManyRequests { detail: String, retry_after: u64 },
    #[error("{0}")]
    Unavailable(String),
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// RFC 9457 problem details, with our `errors` and `current_state` extension members.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Problem {
    #[serde(rename = "type")]
    #[schema(example = "/problems/validation")]
    pub problem_type: String,
    #[schema(example = "Invalid request")]
    pub title: String,
    #[schema(example = 422)]
    pub status: u16,
    pub detail: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_state: Option<String>,
}

/// The cause of a 5xx, kept out of the body and handed to the logging middleware.
#[derive(Clone)]
pub struct InternalCause(pub String);

impl ApiError {
    pub fn validation(field: impl Into<String>, message: impl Into<String>) -> ApiError {
        let error = FieldError::new(field, message);
        ApiError::Validation { detail: format!("{}: {}", error.field, error.message), errors: vec![error] }
    }

    pub fn conflict(detail: impl Into<String>, current_state: Option<&str>) -> ApiError {
        ApiError::Conflict { detail: detail.into(), current_state: current_state.map(str::to_owned) }
    }

    fn parts(&self) -> (StatusCode, &'static str, &'static str) {
        use ApiError::*;
        match self {
            BadRequest(_) => (StatusCode::BAD_REQUEST, "bad-request", "Bad request"),
            Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized", "Authentication required"),
            Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden", "Not allowed"),
            NotFound(_) => (StatusCode::NOT_FOUND, "not-found", "Not found"),
            MethodNotAllowed => (StatusCode::METHOD_NOT_ALLOWED, "method-not-allowed", "Method not allowed"),
            Conflict { .. } => (StatusCode::CONFLICT, "conflict", "Conflict"),
            PreconditionFailed(_) => (StatusCode::PRECONDITION_FAILED, "precondition-failed", "Precondition failed"),
            PayloadTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload-too-large", "Payload too large"),
            UnsupportedMediaType(_) => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported-media-type", "Unsupported media type")
            }
            Validation { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "validation", "Invalid request"),
            TooManyRequests { .. } => (StatusCode::TOO_MANY_REQUESTS, "too-many-requests", "Too many requests"),
            Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable", "Service unavailable"),
            Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal", "Internal error"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, slug, title) = self.parts();
        let detail = match &self {
            ApiError::Internal(_) => "The server failed to handle this request; it has been logged.".to_owned(),
            other => other.to_string(),
        };
        let (errors, current_state) = match &self {
            ApiError::Validation { errors, .. } => (errors.clone(), None),
            ApiError::Conflict { current_state, .. } => (Vec::new(), current_state.clone()),
            _ => (Vec::new(), None),
        };
        let problem = Problem {
            problem_type: format!("/problems/{slug}"),
            title: title.to_owned(),
            status: status.as_u16(),
            detail,
            errors,
            current_state,
        };
        let mut response = (status, axum::Json(problem)).into_response();
        response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        if matches!(self, ApiError::Unavailable(_)) {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if matches!(self, ApiError::Unauthorized(_)) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let ApiError::TooManyRequests { retry_after, .. } = &self {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
        }
        if let ApiError::Internal(cause) = &self {
            response.extensions_mut().insert(InternalCause(format!("{cause:#}")));
        }
        response
    }
}

/// A use case's answer, in HTTP's words: the one place this mapping is made.
impl From<app::Error> for ApiError {
    fn from(error: app::Error) -> ApiError {
        match error {
            app::Error::NotFound(detail) => ApiError::NotFound(detail),
            app::Error::Conflict { detail, current_state } => ApiError::Conflict { detail, current_state },
            app::Error::Invalid(errors) => {
                ApiError::Validation { detail: app::Error::Invalid(errors.clone()).to_string(), errors }
            }
            app::Error::Stale(detail) => ApiError::PreconditionFailed(detail),
            app::Error::Forbidden(detail) => ApiError::Forbidden(detail),
            app::Error::Unavailable(detail) => ApiError::Unavailable(detail),
            app::Error::Internal(cause) => ApiError::Internal(cause),
        }
    }
}

/// Database errors map as the application layer maps them (constraint violations are the
/// client's doing: 409/422; an outage: 503 with Retry-After; everything else is ours: 500).
impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> ApiError {
        app::Error::from(error).into()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> ApiError {
        match rejection {
            JsonRejection::MissingJsonContentType(_) => {
                ApiError::UnsupportedMediaType("send the body as JSON with Content-Type: application/json".into())
            }
            JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::PayloadTooLarge(e.body_text())
            }
            other => ApiError::BadRequest(other.body_text()),
        }
    }
}

impl ApiError {
    /// A unique violation of `constraint` becomes a 409 saying `detail` in the model's words;
    /// every other error converts as usual.
    pub fn unique_as(constraint: &'static str, detail: impl Into<String>) -> impl FnOnce(sqlx::Error) -> ApiError {
        let to_app = app::Error::unique_as(constraint, detail);
        move |error| to_app(error).into()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
