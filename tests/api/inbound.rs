//! Inbound hooks: GitHub deliveries checked with `X-Hub-Signature-256`, and generic Standard
//! Webhooks that file tasks or wishes. Signatures are made here from the specs, independently.

use hmac::{Hmac, Mac};
use secrecy::SecretString;
use serde_json::{json, Value};
use sha2::Sha256;
use switchyard::webhooks::WebhookSettings;

use crate::helpers::{assert_problem, engineer, merged, TestApp};
use crate::receiver::sign;

const GITHUB_SECRET: &str = "gh-test-secret";
const HOOK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

async fn app() -> TestApp {
    TestApp::builder()
        .webhooks(WebhookSettings {
            github_secret: Some(SecretString::from(GITHUB_SECRET)),
            inbound: vec![("tracker".into(), SecretString::from(HOOK_SECRET))],
            ..WebhookSettings::default()
        })
        .spawn()
        .await
}

/// GitHub's scheme: `sha256=` and the hex HMAC-SHA256 of the raw body.
fn github_signature(body: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(GITHUB_SECRET.as_bytes()).expect("key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

async fn github(app: &TestApp, event: &str, body: &[u8], signature: &str) -> reqwest::Response {
    app.client
        .post(app.url("/api/v1/hooks/github"))
        .header("content-type", "application/json")
        .header("x-github-event", event)
        .header("x-hub-signature-256", signature)
        .body(body.to_vec())
        .send()
        .await
        .expect("request")
}

async fn events_of(app: &TestApp, event_type: &str) -> Vec<Value> {
    let body = app.get_ok("/api/v1/events?limit=1000").await;
    body["items"].as_array().expect("items").iter().filter(|e| e["type"] == event_type).cloned().collect()
}

/// The events of this type, once at least one is visible: another test's transaction on the
/// shared cluster may hold the event log's horizon back for a moment.
async fn recorded(app: &TestApp, event_type: &str) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let found = events_of(app, event_type).await;
        if !found.is_empty() || std::time::Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_failed_github_check_run_becomes_ci_failed_on_the_wish_with_that_branch() {
    let app = app().await;
    app.create_project("shop").await;
    app.create_wish(json!({"project": "shop", "slug": "login", "title": "Login", "branch": "wish/login"})).await;
    let body = serde_json::to_vec(&json!({"action": "completed", "repository": {"full_name": "acme/shop"},
        "check_run": {"name": "tests", "conclusion": "failure", "head_sha": "abc123", "html_url": "https://github.com/x",
            "check_suite": {"head_branch": "wish/login"}}}))
    .expect("json");
    let response = github(&app, "check_run", &body, &github_signature(&body)).await;
    assert_eq!(response.status(), 202);
    let failed = recorded(&app, "ci.failed").await;
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["subject"], "wish:login");
    assert_eq!(failed[0]["project"], "shop");
    assert_eq!(failed[0]["payload"]["sha"], "abc123");

    let pr = serde_json::to_vec(&json!({"action": "closed", "pull_request": {"number": 7, "merged": true,
        "head": {"ref": "wish/login"}, "title": "Login", "html_url": "https://github.com/acme/shop/pull/7"}}))
    .expect("json");
    assert_eq!(github(&app, "pull_request", &pr, &github_signature(&pr)).await.status(), 202);
    assert_eq!(recorded(&app, "pr.merged").await[0]["payload"]["number"], 7);
}

#[tokio::test]
async fn a_failed_check_run_on_an_agents_branch_is_ci_failed_on_that_agent() {
    let app = app().await;
    app.create_project("shop").await;
    app.create_agent(merged(engineer("shop", "otter"), json!({"provider": "shell", "branch": "feature/pay"}))).await;
    let body =
        serde_json::to_vec(&json!({"action": "completed", "workflow_run": {"name": "ci", "conclusion": "failure",
        "head_branch": "feature/pay", "head_sha": "def456", "html_url": "https://github.com/y"}}))
        .expect("json");
    assert_eq!(github(&app, "workflow_run", &body, &github_signature(&body)).await.status(), 202);
    let failed = recorded(&app, "ci.failed").await;
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0]["subject"], "agent:otter");
    assert_eq!(failed[0]["project"], "shop");
    assert_eq!(failed[0]["payload"]["agent"], "otter");
}

#[tokio::test]
async fn a_github_delivery_with_a_wrong_signature_is_refused_before_its_body_is_read() {
    let app = app().await;
    let body = br#"{"action": "completed"}"#;
    let mut tampered = body.to_vec();
    tampered.push(b' ');
    assert_problem(github(&app, "check_run", &tampered, &github_signature(body)).await, 401).await;
    // Not JSON at all, and unsigned: still 401, not 400 — nothing is parsed before the check.
    assert_problem(github(&app, "check_run", b"not json", "sha256=00").await, 401).await;
    assert_problem(github(&app, "check_run", b"not json", "").await, 401).await;
    assert_problem(github(&app, "check_run", b"not json", &github_signature(b"not json")).await, 400).await;
    let unconfigured = crate::helpers::spawn_app().await;
    assert_problem(github(&unconfigured, "ping", body, &github_signature(body)).await, 404).await;
}

async fn generic(
    app: &TestApp,
    name: &str,
    body: &[u8],
    timestamp: i64,
    signature: Option<String>,
) -> reqwest::Response {
    generic_with_id(app, name, &format!("msg_{}", uuid::Uuid::new_v4().simple()), body, timestamp, signature).await
}

async fn generic_with_id(
    app: &TestApp,
    name: &str,
    id: &str,
    body: &[u8],
    timestamp: i64,
    signature: Option<String>,
) -> reqwest::Response {
    let signature = signature.unwrap_or_else(|| sign(HOOK_SECRET, id, timestamp, body));
    app.client
        .post(app.url(&format!("/api/v1/hooks/generic/{name}")))
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(body.to_vec())
        .send()
        .await
        .expect("request")
}

#[tokio::test]
async fn a_signed_generic_hook_files_a_task_or_a_wish() {
    let app = app().await;
    app.create_project("shop").await;
    let now = chrono::Utc::now().timestamp();
    let body = serde_json::to_vec(&json!({"task": {"project": "shop", "title": "Fix the flaky test"}})).expect("json");
    let response = generic(&app, "tracker", &body, now, None).await;
    assert_eq!(response.status(), 201);
    let task: Value = response.json().await.expect("json");
    assert_eq!(task["title"], "Fix the flaky test");
    assert_eq!(task["status"], "ready");
    let body = serde_json::to_vec(&json!({"wish": {"project": "shop", "slug": "dark-mode", "title": "Dark mode"}}))
        .expect("json");
    let response = generic(&app, "tracker", &body, now, None).await;
    assert_eq!(response.status(), 201);
    assert_eq!(response.json::<Value>().await.expect("json")["slug"], "dark-mode");
    let neither = serde_json::to_vec(&json!({})).expect("json");
    assert_problem(generic(&app, "tracker", &neither, now, None).await, 422).await;
}

#[tokio::test]
async fn a_tampered_or_six_minute_old_generic_hook_is_refused() {
    let app = app().await;
    app.create_project("shop").await;
    let now = chrono::Utc::now().timestamp();
    let body = serde_json::to_vec(&json!({"task": {"project": "shop", "title": "Sneaky"}})).expect("json");
    let signature = sign(HOOK_SECRET, "msg_fixed", now, &body);
    let mut tampered = body.clone();
    tampered.extend_from_slice(b" ");
    let response = app
        .client
        .post(app.url("/api/v1/hooks/generic/tracker"))
        .header("webhook-id", "msg_fixed")
        .header("webhook-timestamp", now.to_string())
        .header("webhook-signature", signature)
        .body(tampered)
        .send()
        .await
        .expect("request");
    assert_problem(response, 401).await;
    assert_problem(generic(&app, "tracker", &body, now - 6 * 60, None).await, 401).await;
    assert_problem(generic(&app, "tracker", &body, now, Some("v1,AAAA".into())).await, 401).await;
    assert_problem(generic(&app, "nobody", &body, now, None).await, 404).await;
    assert!(events_of(&app, "task.created").await.is_empty(), "nothing was filed");
}

#[tokio::test]
async fn a_replayed_generic_hook_files_its_work_once() {
    let app = app().await;
    app.create_project("shop").await;
    let now = chrono::Utc::now().timestamp();
    let body = serde_json::to_vec(&json!({"task": {"project": "shop", "title": "Once"}})).expect("json");
    let first = generic_with_id(&app, "tracker", "msg_replayed", &body, now, None).await;
    assert_eq!(first.status(), 201);
    let again = generic_with_id(&app, "tracker", "msg_replayed", &body, now, None).await;
    assert_eq!(again.status(), 200);
    let again: Value = again.json().await.expect("json");
    assert_eq!(again["duplicate"], true);
    let filed: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE title = 'Once'")
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(filed, 1);
    // A delivery that failed (422) filed nothing and recorded nothing: its retry is acted on.
    let bad = serde_json::to_vec(&json!({"task": {"project": "nowhere", "title": "Later"}})).expect("json");
    assert_eq!(generic_with_id(&app, "tracker", "msg_retry", &bad, now, None).await.status(), 422);
    let good = serde_json::to_vec(&json!({"task": {"project": "shop", "title": "Later"}})).expect("json");
    assert_eq!(generic_with_id(&app, "tracker", "msg_retry", &good, now, None).await.status(), 201);
}
