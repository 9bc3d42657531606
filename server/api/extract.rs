//! `ApiPath`: path parameters whose failures are problem+json like every other error (a
//! malformed id is a 404 — no such resource can exist). Query strings: `api::query::ApiQuery`.
//! [`refuse_nul`]: no path or query parameter of any route holds NUL.

use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path};
use axum::http::Uri;

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

/// PostgreSQL cannot store NUL (`%00`) in text, and no name, slug or filter holds one: a request
/// whose path or query carries one is refused before any handler sees it, naming `path` or the
/// query parameter (a 422, never the database's 500).
pub fn refuse_nul(uri: &Uri) -> Result<(), ApiError> {
    const WHY: &str = "must not contain NUL (%00)";
    if uri.path().contains("%00") {
        return Err(ApiError::validation("path", WHY));
    }
    let query = uri.query().unwrap_or("").as_bytes();
    match form_urlencoded::parse(query).find(|(key, value)| key.contains('\0') || value.contains('\0')) {
        Some((key, _)) if key.contains('\0') => Err(ApiError::validation("query", WHY)),
        Some((key, _)) => Err(ApiError::validation(key.into_owned(), WHY)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(uri: &str) -> Option<String> {
        match refuse_nul(&uri.parse().unwrap()) {
            Err(ApiError::Validation { errors, .. }) => Some(errors[0].field.clone()),
            _ => None,
        }
    }

    #[test]
    fn nul_in_the_path_or_a_query_parameter_is_named() {
        assert_eq!(field("/api/v1/agents/a%00b").as_deref(), Some("path"));
        assert_eq!(field("/api/v1/tasks?status=open&assignee=%00").as_deref(), Some("assignee"));
        assert_eq!(field("/api/v1/tasks?a%00=1").as_deref(), Some("query"));
        assert_eq!(field("/api/v1/tasks?assignee=a%2500&x=%0A"), None);
    }
}
