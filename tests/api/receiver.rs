//! A webhook receiver for tests: a small axum server on 127.0.0.1 that records every request and
//! answers from a script; and a signature check written from the Standard Webhooks spec, apart
//! from the server's own code.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

#[derive(Debug, Clone)]
pub struct Received {
    pub at: Instant,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Received {
    pub fn header(&self, name: &str) -> String {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

#[derive(Clone, Default)]
struct Script {
    received: Arc<Mutex<Vec<Received>>>,
    answers: Arc<Mutex<VecDeque<u16>>>,
    then: Arc<AtomicU16>,
    hang: Arc<AtomicBool>,
    /// Sent as `Retry-After` with every answer that is not a success.
    retry_after: Arc<Mutex<Option<String>>>,
}

pub struct Receiver {
    pub url: String,
    script: Script,
}

async fn receive(State(script): State<Script>, headers: HeaderMap, body: Bytes) -> (StatusCode, HeaderMap) {
    script.received.lock().expect("lock").push(Received { at: Instant::now(), headers, body: body.to_vec() });
    while script.hang.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let code = script.answers.lock().expect("lock").pop_front().unwrap_or(script.then.load(Ordering::SeqCst));
    let status = StatusCode::from_u16(code).expect("status");
    let mut headers = HeaderMap::new();
    if let Some(after) = script.retry_after.lock().expect("lock").clone().filter(|_| !status.is_success()) {
        headers.insert("retry-after", after.parse().expect("a header value"));
    }
    (status, headers)
}

impl Receiver {
    /// Answers `answers` in order, then `then` to every later request.
    pub async fn start(answers: &[u16], then: u16) -> Receiver {
        let script = Script::default();
        script.answers.lock().expect("lock").extend(answers);
        script.then.store(then, Ordering::SeqCst);
        let app = axum::Router::new().route("/hook", axum::routing::post(receive)).with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { url, script }
    }

    pub fn received(&self) -> Vec<Received> {
        self.script.received.lock().expect("lock").clone()
    }

    pub fn count(&self) -> usize {
        self.script.received.lock().expect("lock").len()
    }

    /// Failures from now on ask for the next attempt after `value` (`Retry-After`).
    pub fn retry_after(&self, value: &str) {
        *self.script.retry_after.lock().expect("lock") = Some(value.to_owned());
    }

    /// While set, requests are recorded but not answered (a receiver that hangs).
    pub fn hang(&self, on: bool) {
        self.script.hang.store(on, Ordering::SeqCst);
    }
}

/// Standard Webhooks, from the spec: the key is the base64 after `whsec_`; the signed content is
/// `{webhook-id}.{webhook-timestamp}.{body}`; each `v1,<base64 HMAC-SHA256>` in the header is a
/// candidate signature.
pub fn signed_by(secret: &str, message: &Received) -> bool {
    let key = STANDARD.decode(secret.strip_prefix("whsec_").expect("whsec_ prefix")).expect("base64 key");
    let mut content = format!("{}.{}.", message.header("webhook-id"), message.header("webhook-timestamp")).into_bytes();
    content.extend_from_slice(&message.body);
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&key).expect("key");
    mac.update(&content);
    let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    message.header("webhook-signature").split(' ').any(|candidate| candidate == expected)
}

/// Signs a message for our inbound verifier the same independent way.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    let key = STANDARD.decode(secret.strip_prefix("whsec_").expect("whsec_ prefix")).expect("base64 key");
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&key).expect("key");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}
