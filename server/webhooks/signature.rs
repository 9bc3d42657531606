//! Standard Webhooks signatures (<https://www.standardwebhooks.com/>): secrets are `whsec_` and
//! base64 key bytes; a signature is `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`;
//! the header holds one or more, space-separated (two while a rotated secret is in its grace).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// How far a signed timestamp may be from now, either way, before a message is refused.
pub const TOLERANCE_SECONDS: i64 = 5 * 60;

/// A new secret: `whsec_` and 32 random bytes in base64.
pub fn generate_secret() -> String {
    let mut key = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut key);
    format!("whsec_{}", STANDARD.encode(key))
}

/// The key bytes of a `whsec_…` secret; `None` when it is not one.
pub fn decode_secret(secret: &str) -> Option<Vec<u8>> {
    let key = STANDARD.decode(secret.strip_prefix("whsec_")?).ok()?;
    (key.len() >= 16).then_some(key)
}

fn mac(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> HmacSha256 {
    let mut mac = HmacSha256::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `webhook-signature` header value: one `v1,<base64>` per secret, space-separated.
pub fn signature_header(secrets: &[&str], id: &str, timestamp: i64, body: &[u8]) -> String {
    secrets
        .iter()
        .filter_map(|s| decode_secret(s))
        .map(|key| format!("v1,{}", STANDARD.encode(mac(&key, id, timestamp, body).finalize().into_bytes())))
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("the {0} header is missing")]
    Missing(&'static str),
    #[error("webhook-timestamp is not a unix time in seconds")]
    BadTimestamp,
    #[error("webhook-timestamp is more than 5 minutes from now")]
    Stale,
    #[error("no signature in webhook-signature matches the body")]
    NoMatch,
}

/// Verifies a message against `secret`, in constant time per signature; refuses it when the
/// timestamp is over [`TOLERANCE_SECONDS`] away from `now` (a replayed old message).
pub fn verify(
    secret: &str,
    id: Option<&str>,
    timestamp: Option<&str>,
    signatures: Option<&str>,
    body: &[u8],
    now: i64,
) -> Result<(), VerifyError> {
    let id = id.ok_or(VerifyError::Missing("webhook-id"))?;
    let timestamp = timestamp.ok_or(VerifyError::Missing("webhook-timestamp"))?;
    let signatures = signatures.ok_or(VerifyError::Missing("webhook-signature"))?;
    let timestamp: i64 = timestamp.trim().parse().map_err(|_| VerifyError::BadTimestamp)?;
    if (now - timestamp).abs() > TOLERANCE_SECONDS {
        return Err(VerifyError::Stale);
    }
    let key = decode_secret(secret).ok_or(VerifyError::NoMatch)?;
    let expected = mac(&key, id, timestamp, body);
    let matched = signatures
        .split_whitespace()
        .filter_map(|s| s.strip_prefix("v1,"))
        .any(|candidate| STANDARD.decode(candidate).is_ok_and(|bytes| expected.clone().verify_slice(&bytes).is_ok()));
    if matched {
        Ok(())
    } else {
        Err(VerifyError::NoMatch)
    }
}

/// GitHub's `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>`, checked in constant time.
pub fn verify_github(secret: &[u8], header: Option<&str>, body: &[u8]) -> bool {
    let Some(hex_sig) = header.and_then(|h| h.trim().strip_prefix("sha256=")) else {
        return false;
    };
    let Ok(bytes) = hex::decode(hex_sig) else {
        return false;
    };
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(body);
    mac.verify_slice(&bytes).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // The example from the Standard Webhooks reference implementations.
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const BODY: &[u8] = br#"{"test": 2432232314}"#;

    #[test]
    fn signatures_match_the_reference_example() {
        let header = signature_header(&[SECRET], ID, 1614265330, BODY);
        assert_eq!(header, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn a_tampered_body_or_an_old_timestamp_is_refused() {
        let now = 1614265330;
        let header = signature_header(&[SECRET], ID, now, BODY);
        let ts = now.to_string();
        assert_eq!(verify(SECRET, Some(ID), Some(&ts), Some(&header), BODY, now), Ok(()));
        assert_eq!(verify(SECRET, Some(ID), Some(&ts), Some(&header), b"{}", now), Err(VerifyError::NoMatch));
        assert_eq!(verify(SECRET, Some(ID), Some(&ts), Some(&header), BODY, now + 360), Err(VerifyError::Stale));
        assert_eq!(verify(SECRET, None, Some(&ts), Some(&header), BODY, now), Err(VerifyError::Missing("webhook-id")));
    }

    #[test]
    fn either_of_two_signatures_verifies() {
        let other = generate_secret();
        let header = signature_header(&[&other, SECRET], ID, 10, BODY);
        assert_eq!(header.split(' ').count(), 2);
        assert_eq!(verify(SECRET, Some(ID), Some("10"), Some(&header), BODY, 10), Ok(()));
    }

    #[test]
    fn github_signatures_are_hex_hmacs_of_the_body() {
        // From GitHub's documentation on validating webhook deliveries.
        let header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert!(verify_github(b"It's a Secret to Everybody", Some(header), b"Hello, World!"));
        assert!(!verify_github(b"It's a Secret to Everybody", Some(header), b"Hello, World"));
        assert!(!verify_github(b"x", None, b""));
    }
}
