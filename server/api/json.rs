//! `ApiJson<T>`: the JSON body extractor whose every failure is a problem+json naming the field.
//! Request types use `#[serde(deny_unknown_fields)]`, so a misspelt field is a 422, never
//! silently ignored.

use axum::extract::{FromRequest, Request};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::http::error::{ApiError, FieldError};

pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        parse(&json_bytes(req, state).await?).map(ApiJson)
    }
}

/// The body's bytes, read once, of a request that says it sends JSON (else 415).
pub(crate) async fn json_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<axum::body::Bytes, ApiError> {
    let is_json = is_json(&req);
    let bytes = body_bytes(req, state).await?;
    if !is_json {
        return Err(ApiError::UnsupportedMediaType("send the body as JSON with Content-Type: application/json".into()));
    }
    Ok(bytes)
}

/// `Option<ApiJson<T>>`: an empty (or all-whitespace, or `null`) body is `None`, for actions whose body is
/// optional; anything else must be JSON, with the same 415/400/422 answers as [`ApiJson`].
impl<S, T> axum::extract::OptionalFromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Option<Self>, Self::Rejection> {
        let is_json = is_json(&req);
        let bytes = body_bytes(req, state).await?;
        // JSON's `null` says "nothing" as well as no body does.
        if bytes.iter().all(u8::is_ascii_whitespace) || bytes.trim_ascii() == b"null" {
            return Ok(None);
        }
        if !is_json {
            return Err(ApiError::UnsupportedMediaType(
                "send the body as JSON with Content-Type: application/json".into(),
            ));
        }
        parse(&bytes).map(|v| Some(ApiJson(v)))
    }
}

fn is_json(req: &Request) -> bool {
    req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).and_then(|v| v.split(';').next()).is_some_and(
        |mime| {
            let mime = mime.trim().to_ascii_lowercase();
            mime == "application/json" || mime.ends_with("+json")
        },
    )
}

pub(crate) async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<axum::body::Bytes, ApiError> {
    axum::body::Bytes::from_request(req, state).await.map_err(|e| {
        if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::PayloadTooLarge(e.body_text())
        } else {
            ApiError::BadRequest(e.body_text())
        }
    })
}

/// Parses a JSON body; a syntax error is a 400, a well-formed body of the wrong shape a 422
/// whose `errors` name the field. Every body is an object (serde would take a struct from an
/// array too), and a whole number written `3.0` is the integer JSON Schema says it is.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    refuse_nul(bytes)?;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut value = match serde_json::Value::deserialize(&mut de).and_then(|v| de.end().map(|()| v)) {
        Ok(value) => value,
        // Anything but whitespace after the value is refused, not ignored.
        Err(e) => {
            return Err(ApiError::BadRequest(format!("the body is not valid JSON: {}", strip_position(&e.to_string()))))
        }
    };
    if !value.is_object() {
        return Err(ApiError::validation("body", "must be a JSON object"));
    }
    whole_numbers_as_integers(&mut value);
    match serde_path_to_error::deserialize(value) {
        Ok(value) => Ok(value),
        Err(err) => {
            let inner = err.inner();
            let message = strip_position(&inner.to_string());
            let field = field_name(&err.path().to_string(), &message);
            Err(ApiError::Validation {
                detail: format!("{field}: {message}"),
                errors: vec![FieldError::new(field, message)],
            })
        }
    }
}

/// PostgreSQL cannot store NUL in text, so no string of a body may hold one: a 422 naming the
/// string's JSON path. JSON can only carry NUL escaped, so only a body holding `\u0000` is walked.
fn refuse_nul(bytes: &[u8]) -> Result<(), ApiError> {
    if !bytes.windows(6).any(|w| w == b"\\u0000") {
        return Ok(());
    }
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return Ok(()); // Broken JSON: the parse after this says how.
    };
    match nul_at(&value, String::new()) {
        Some(path) => {
            let field = if path.is_empty() { "body".to_owned() } else { path };
            Err(ApiError::validation(field, "must not contain NUL (\\u0000)"))
        }
        None => Ok(()),
    }
}

/// The path (`items[2].name`) of the first string or key in `value` that holds NUL; a key's NUL
/// is written `\u0000` in it (the path goes back in a problem, which is text too).
fn nul_at(value: &serde_json::Value, path: String) -> Option<String> {
    use serde_json::Value;
    match value {
        Value::String(s) => s.contains('\0').then_some(path),
        Value::Array(items) => items.iter().enumerate().find_map(|(i, v)| nul_at(v, format!("{path}[{i}]"))),
        Value::Object(fields) => fields.iter().find_map(|(k, v)| {
            let key = k.replace('\0', "\\u0000");
            let inner = if path.is_empty() { key } else { format!("{path}.{key}") };
            if k.contains('\0') {
                Some(inner)
            } else {
                nul_at(v, inner)
            }
        }),
        _ => None,
    }
}

/// `3.0` becomes `3`, as JSON Schema counts it an integer (serde would refuse it for an `i32`).
fn whole_numbers_as_integers(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|f| n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15) {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(fields) => fields.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

/// serde names an unknown or missing field only in its message (the path is the parent).
fn field_name(path: &str, message: &str) -> String {
    let named = ["unknown field `", "missing field `"]
        .iter()
        .find_map(|prefix| message.strip_prefix(prefix))
        .and_then(|rest| rest.split('`').next());
    match (path, named) {
        (".", Some(name)) => name.to_owned(),
        // An unknown field's path already ends with it; a missing one's is its parent.
        (full, Some(name)) if full == name || full.ends_with(&format!(".{name}")) => full.to_owned(),
        (parent, Some(name)) => format!("{parent}.{name}"),
        (".", None) => "body".to_owned(),
        (parent, None) => parent.to_owned(),
    }
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

impl<T: Serialize> IntoResponse for ApiJson<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// For PATCH fields that may be cleared: absent is `None` (leave it), `null` is `Some(None)`
/// (clear it), a value is `Some(Some(v))`. Use with `#[serde(default, deserialize_with = "nullable")]`.
pub fn nullable<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    <Option<T> as serde::Deserialize>::deserialize(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Body {
        name: String,
        inner: Option<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        count: u32,
    }

    fn field_of(json: &str) -> String {
        match parse::<Body>(json.as_bytes()) {
            Err(ApiError::Validation { errors, .. }) => errors[0].field.clone(),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn an_unknown_field_is_named() {
        assert_eq!(field_of(r#"{"name":"a","colour":1}"#), "colour");
    }

    #[test]
    fn a_missing_field_is_named() {
        assert_eq!(field_of(r#"{}"#), "name");
    }

    #[test]
    fn a_nested_wrong_type_is_named_by_its_path() {
        assert_eq!(field_of(r#"{"name":"a","inner":{"count":"x"}}"#), "inner.count");
        assert_eq!(field_of(r#"{"name":"a","inner":{"count":1,"extra":2}}"#), "inner.extra");
    }

    #[test]
    fn data_after_the_json_value_is_a_bad_request() {
        assert!(matches!(parse::<Body>(br#"{"name":"a"} xyz"#), Err(ApiError::BadRequest(_))));
        assert!(matches!(parse::<Body>(br#"{"name":"a"}{"name":"b"}"#), Err(ApiError::BadRequest(_))));
        assert!(parse::<Body>(b"{\"name\":\"a\"} \n").is_ok());
    }

    #[test]
    fn nul_in_any_string_is_refused_naming_its_path() {
        assert_eq!(field_of(r#"{"name":"a\u0000b"}"#), "name");
        assert_eq!(field_of(r#"{"name":"a","inner":{"count":1,"x":["ok","\u0000"]}}"#), "inner.x[1]");
        // A key holding NUL is named with it escaped: the problem carries no NUL either.
        assert_eq!(field_of(r#"{"name":"a","inner":{"k\u0000y":1}}"#), r"inner.k\u0000y");
        assert!(parse::<Body>(br#"{"name":"a\\u0000"}"#).is_ok(), "an escaped backslash is no NUL");
    }

    #[test]
    fn an_array_is_no_body_and_a_whole_float_is_an_integer() {
        assert_eq!(field_of(r#"["a", null]"#), "body");
        let body: Inner = parse(br#"{"count": 3.0}"#).expect("3.0 is 3");
        assert_eq!(body.count, 3);
        assert!(matches!(parse::<Inner>(br#"{"count": 3.5}"#), Err(ApiError::Validation { .. })));
    }

    #[test]
    fn broken_json_is_a_bad_request() {
        assert!(matches!(parse::<Body>(b"{\"name\":"), Err(ApiError::BadRequest(_))));
    }
}
