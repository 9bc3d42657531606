//! `ApiPath`: path parameters whose failures are problem+json like every other error (a
//! malformed id is a 404 — no such resource can exist). Query strings: `http::query::ApiQuery`.
//! [`refuse_nul`]: no path or query parameter of any route holds NUL.

use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use axum::http::Uri;
use serde::de::DeserializeOwned;

use crate::http::error::ApiError;

pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(ApiPath(value)),
            Err(rejection) => Err(refused_path(rejection, parts.uri.path())),
        }
    }
}

/// A path parameter that cannot name anything, in people's words, for the API and the pages
/// alike: "`not-a-uuid` is not a board id" (a 404: no such resource can exist). What it is not
/// comes from the address: the collection before the value (`/boards/…` → board).
pub fn refused_path(rejection: PathRejection, path: &str) -> ApiError {
    let PathRejection::FailedToDeserializePathParams(e) = rejection else {
        // A route whose handler asks for parameters it does not have is our bug.
        return ApiError::Internal(anyhow::anyhow!(rejection.body_text()));
    };
    // Ids are UUIDs (serde's own error for them) or, for events and the like, numbers.
    let (value, is_uuid) = match e.kind() {
        ErrorKind::ParseErrorAtKey { value, expected_type, .. }
        | ErrorKind::ParseErrorAtIndex { value, expected_type, .. }
        | ErrorKind::ParseError { value, expected_type } => (value.clone(), expected_type.ends_with("Uuid")),
        ErrorKind::DeserializeError { value, message, .. } => (value.clone(), message.contains("UUID")),
        ErrorKind::InvalidUtf8InPathParam { .. } => return ApiError::NotFound("the address is not UTF-8".to_owned()),
        ErrorKind::WrongNumberOfParameters { .. } | ErrorKind::UnsupportedType { .. } => {
            return ApiError::Internal(anyhow::anyhow!(e.body_text()))
        }
        _ => return ApiError::NotFound(format!("no such resource: {}", e.body_text())),
    };
    let what = if is_uuid { "id" } else { "number" };
    let shown: String = value.chars().take(80).collect();
    ApiError::NotFound(match collection_of(path, &value) {
        Some(kind) => format!("`{shown}` is not {} {kind} {what}", article(&kind)),
        None => format!("`{shown}` is not a valid {what} here"),
    })
}

/// What the address's collection holds, singular: the segment before `value` (`boards` → board,
/// `deliveries` → delivery).
fn collection_of(path: &str, value: &str) -> Option<String> {
    let decoded = |segment: &str| {
        let query = format!("v={}", segment.replace('+', "%2B"));
        form_urlencoded::parse(query.as_bytes()).next().map(|(_, v)| v.into_owned())
    };
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let at = segments.iter().position(|s| *s == value || decoded(s).as_deref() == Some(value))?;
    let plural = segments[..at].last()?.replace('-', " ");
    let singular = if let Some(stem) = plural.strip_suffix("ies") {
        format!("{stem}y")
    } else if let Some(stem) = plural.strip_suffix("shes") {
        format!("{stem}sh")
    } else {
        plural.strip_suffix('s').unwrap_or(&plural).to_owned()
    };
    Some(singular)
}

fn article(word: &str) -> &'static str {
    if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
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
    fn a_collection_is_named_singular_by_the_segment_before_the_bad_value() {
        assert_eq!(collection_of("/boards/not-a-uuid", "not-a-uuid").as_deref(), Some("board"));
        assert_eq!(collection_of("/api/v1/webhooks/x/deliveries/y", "y").as_deref(), Some("delivery"));
        assert_eq!(collection_of("/wishes/a%20b", "a b").as_deref(), Some("wish"));
        assert_eq!(collection_of("/board-templates/x", "x").as_deref(), Some("board template"));
        assert_eq!(collection_of("/x", "x"), None);
        assert_eq!(article("event"), "an");
    }

    #[test]
    fn nul_in_the_path_or_a_query_parameter_is_named() {
        assert_eq!(field("/api/v1/agents/a%00b").as_deref(), Some("path"));
        assert_eq!(field("/api/v1/tasks?status=open&assignee=%00").as_deref(), Some("assignee"));
        assert_eq!(field("/api/v1/tasks?a%00=1").as_deref(), Some("query"));
        assert_eq!(field("/api/v1/tasks?assignee=a%2500&x=%0A"), None);
    }
}
