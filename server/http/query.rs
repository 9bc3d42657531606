//! `ApiQuery<T>`: the query-string extractor whose failures are problem+json naming the
//! parameter (axum's own `Query` answers a plain-text 400).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::http::error::{ApiError, FieldError};

pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parse(parts.uri.query().unwrap_or("")).map(ApiQuery)
    }
}

/// A query filter parsed by its type's `FromStr` (a status, a kind, an id); a bad value is a 422
/// naming `field`, with the parser's message (which lists the accepted values).
pub fn filter<T>(field: &str, value: Option<&str>) -> Result<Option<T>, ApiError>
where
    T: std::str::FromStr,
    T::Err: std::fmt::Display,
{
    value.map(str::parse::<T>).transpose().map_err(|e| ApiError::validation(field, e.to_string()))
}

pub fn parse<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(de).map_err(|err| {
        let message = err.inner().to_string();
        let path = err.path().to_string();
        let named = ["unknown field `", "missing field `"]
            .iter()
            .find_map(|prefix| message.strip_prefix(prefix))
            .and_then(|rest| rest.split('`').next());
        let field = match (path.as_str(), named) {
            (_, Some(name)) => name.to_owned(),
            (".", None) => "query".to_owned(),
            (p, None) => p.to_owned(),
        };
        ApiError::Validation { detail: format!("{field}: {message}"), errors: vec![FieldError::new(field, message)] }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Q {
        after: Option<i64>,
    }

    fn field(query: &str) -> String {
        match parse::<Q>(query) {
            Err(ApiError::Validation { errors, .. }) => errors[0].field.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_non_number_names_the_parameter() {
        assert_eq!(field("after=abc"), "after");
    }

    #[test]
    fn an_unknown_parameter_is_named() {
        assert_eq!(field("afterr=1"), "afterr");
    }

    #[test]
    fn a_good_query_parses() {
        assert!(matches!(parse::<Q>("after=5"), Ok(Q { after: Some(5) })));
    }
}
