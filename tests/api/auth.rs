use reqwest::Method;

use crate::helpers::{assert_problem, spawn_app};

#[tokio::test]
async fn a_request_without_a_token_is_401_with_a_bearer_challenge() {
    let app = spawn_app().await;
    let response = app.client.get(app.url("/api/v1/me")).send().await.expect("request");
    assert_eq!(response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()), Some("Bearer"));
    assert_problem(response, 401).await;
}

#[tokio::test]
async fn an_unknown_token_is_401() {
    let app = spawn_app().await;
    let response =
        app.client.get(app.url("/api/v1/me")).bearer_auth("sy_not-a-real-token").send().await.expect("request");
    assert_problem(response, 401).await;
}

#[tokio::test]
async fn a_read_token_may_read_but_not_write() {
    let app = spawn_app().await;
    let read = app.token("read").await;
    let me = app.client.get(app.url("/api/v1/me")).bearer_auth(&read).send().await.expect("request");
    assert_eq!(me.status(), 200);
    let body: serde_json::Value = me.json().await.expect("json");
    assert_eq!(body["scope"], "read");
    let create = app
        .client
        .post(app.url("/api/v1/tokens"))
        .bearer_auth(&read)
        .json(&serde_json::json!({"name": "x", "scope": "read"}))
        .send()
        .await
        .expect("request");
    let problem = assert_problem(create, 403).await;
    assert!(problem["detail"].as_str().unwrap_or("").contains("write"), "{problem}");
}

#[tokio::test]
async fn a_write_token_may_not_manage_tokens_but_admin_may() {
    let app = spawn_app().await;
    let write = app.token("write").await;
    for (method, path) in [(Method::GET, "/api/v1/tokens"), (Method::POST, "/api/v1/tokens")] {
        let response = app
            .client
            .request(method, app.url(path))
            .bearer_auth(&write)
            .json(&serde_json::json!({"name": "y", "scope": "admin"}))
            .send()
            .await
            .expect("request");
        assert_problem(response, 403).await;
    }
    let listed = app.admin(Method::GET, "/api/v1/tokens").send().await.expect("request");
    assert_eq!(listed.status(), 200);
    let tokens: Vec<serde_json::Value> = listed.json().await.expect("json");
    assert!(tokens.iter().all(|t| t.get("secret").is_none() && t.get("hash").is_none()));
    assert!(tokens.iter().any(|t| t["scope"] == "write"));
}

#[tokio::test]
async fn a_revoked_token_stops_working_at_once() {
    let app = spawn_app().await;
    let write = app.token("write").await;
    let me: serde_json::Value = app
        .client
        .get(app.url("/api/v1/me"))
        .bearer_auth(&write)
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    let id = me["token_id"].as_str().expect("id");
    let revoked = app.admin(Method::DELETE, &format!("/api/v1/tokens/{id}")).send().await.expect("request");
    assert_eq!(revoked.status(), 200);
    let after = app.client.get(app.url("/api/v1/me")).bearer_auth(&write).send().await.expect("request");
    assert_problem(after, 401).await;
    let again = app.admin(Method::DELETE, &format!("/api/v1/tokens/{id}")).send().await.expect("request");
    assert_problem(again, 404).await;
}

#[tokio::test]
async fn tokens_are_stored_only_as_hashes() {
    let app = spawn_app().await;
    let secret = app.token("read").await;
    let stored: Vec<String> = sqlx::query_scalar("SELECT hash FROM tokens").fetch_all(&app.pool).await.expect("select");
    assert!(!stored.is_empty());
    assert!(stored.iter().all(|h| h != &secret && h.len() == 64));
}
