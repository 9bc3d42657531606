//! The `Idempotency-Key` header of creating `POST`s. [`IdempotencyKey`] reads and checks the
//! header; [`IdempotentJson`] is the JSON body together with the request's
//! [`Idempotency`] (the caller, the key, the route and a SHA-256 of the raw body), for the
//! handler to ask `app::idempotency::replay` and to hand to the use case, which records it in the
//! transaction that creates.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use crate::api::json::{json_bytes, parse, ApiJson};
use crate::app::idempotency::{Idempotency, Replay, FIELD};
use crate::db::tokens::Caller;
use crate::http::error::ApiError;
use crate::http::AppState;

/// What the OpenAPI document says about the header.
pub const DESCRIPTION: &str = "Makes the request safe to retry: 1–255 printable ASCII characters, \
    fresh per creation. The same key with the same body within 24 hours answers the first \
    response again (nothing new is created); with another body it is a 422.";

/// The request's `Idempotency-Key`, if it has one: 1–255 printable ASCII characters, else a 422
/// naming `Idempotency-Key`.
pub struct IdempotencyKey(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let Some(value) = parts.headers.get(FIELD) else { return Ok(IdempotencyKey(None)) };
        check(value.as_bytes()).map(|key| IdempotencyKey(Some(key)))
    }
}

fn check(value: &[u8]) -> Result<String, ApiError> {
    if value.is_empty() || value.len() > 255 {
        return Err(ApiError::validation(FIELD, "must be 1 to 255 characters long"));
    }
    if !value.iter().all(|b| (0x20..0x7f).contains(b)) {
        return Err(ApiError::validation(FIELD, "must be printable ASCII"));
    }
    Ok(String::from_utf8_lossy(value).into_owned())
}

/// A JSON body (as [`ApiJson`]) with the request's [`Idempotency`], when it carries a key.
pub struct IdempotentJson<T>(pub T, pub Option<Idempotency>);

impl<S, T> FromRequest<S> for IdempotentJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = req.into_parts();
        let IdempotencyKey(key) = IdempotencyKey::from_request_parts(&mut parts, state).await?;
        let Some(key) = key else {
            let ApiJson(value) = ApiJson::from_request(Request::from_parts(parts, body), state).await?;
            return Ok(IdempotentJson(value, None));
        };
        let caller = parts
            .extensions
            .get::<Caller>()
            .map(|c| c.token_id.to_string())
            .ok_or(ApiError::Unauthorized("send Authorization: Bearer <token>"))?;
        let route = format!("{} {}", parts.method, parts.uri.path());
        // Read once: hashed as sent, then parsed as `ApiJson` parses.
        let bytes = json_bytes(Request::from_parts(parts, body), state).await?;
        let request_hash = Sha256::digest(&bytes).to_vec();
        Ok(IdempotentJson(parse(&bytes)?, Some(Idempotency { caller, key, route, request_hash })))
    }
}

/// The first response to this request when it carries a key used before for the same request
/// (a 422 naming `Idempotency-Key` when used for another); `None`: go on and create.
pub async fn replay(state: &AppState, idem: Option<&Idempotency>) -> Result<Option<Response>, ApiError> {
    Ok(crate::app::idempotency::replay(state, idem).await?.map(replayed))
}

/// The first response again: its status and body, with its version as the `ETag` when it has
/// one, and `Idempotent-Replayed: true`.
fn replayed(replay: Replay) -> Response {
    let status = StatusCode::from_u16(replay.status).unwrap_or(StatusCode::OK);
    let etag = replay.response.get("version").and_then(|v| v.as_i64()).map(|v| format!("\"{v}\""));
    let mut response = (status, axum::Json(replay.response)).into_response();
    if let Some(value) = etag.and_then(|v| HeaderValue::from_str(&v).ok()) {
        response.headers_mut().insert(header::ETAG, value);
    }
    response.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_one_to_255_printable_ascii_characters() {
        assert_eq!(check(b"abc-123_:/ x").unwrap(), "abc-123_:/ x");
        assert!(check(b"").is_err());
        assert!(check(&[b'a'; 256]).is_err());
        assert!(check(&[b'a'; 255]).is_ok());
        assert!(check(b"a\tb").is_err());
        assert!(check("é".as_bytes()).is_err());
    }
}
