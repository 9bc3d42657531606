//! `Idempotency-Key` on creating `POST`s: a retry with the same key and body answers the first
//! response and creates nothing; the same key with another body is refused; keys are per token.

use serde_json::{json, Value};

use crate::helpers::{assert_json, assert_problem, engineer, spawn_app, TestApp};

async fn post_with_key(app: &TestApp, token: &str, path: &str, key: &str, body: &Value) -> reqwest::Response {
    app.client
        .post(app.url(path))
        .bearer_auth(token)
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .expect("post")
}

async fn tasks_of(app: &TestApp, project: &str) -> Vec<Value> {
    let page = app.get_ok(&format!("/api/v1/tasks?project={project}")).await;
    page["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn a_retried_task_creation_with_the_same_key_answers_the_first_task_and_creates_one() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let body = json!({"project": "alpha", "title": "Add a login page"});
    let first = post_with_key(&app, &app.admin_token, "/api/v1/tasks", "retry-1", &body).await;
    let first_etag = first.headers().get("etag").cloned();
    let first = assert_json(first, 201).await;
    let again = post_with_key(&app, &app.admin_token, "/api/v1/tasks", "retry-1", &body).await;
    assert_eq!(again.headers().get("etag").cloned(), first_etag);
    let again = assert_json(again, 201).await;
    assert_eq!(again, first);
    assert_eq!(tasks_of(&app, "alpha").await.len(), 1);
}

#[tokio::test]
async fn the_same_key_with_another_body_is_refused_naming_the_header() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let body = json!({"project": "alpha", "title": "Add a login page"});
    assert_json(post_with_key(&app, &app.admin_token, "/api/v1/tasks", "k", &body).await, 201).await;
    let other = json!({"project": "alpha", "title": "Something else"});
    let refused = assert_problem(post_with_key(&app, &app.admin_token, "/api/v1/tasks", "k", &other).await, 422).await;
    assert_eq!(refused["errors"][0]["field"], "Idempotency-Key", "{refused}");
    // Nor may the key be reused on another route.
    let wish = json!({"slug": "w", "project": "alpha", "title": "A wish"});
    let refused = assert_problem(post_with_key(&app, &app.admin_token, "/api/v1/wishes", "k", &wish).await, 422).await;
    assert_eq!(refused["errors"][0]["field"], "Idempotency-Key", "{refused}");
    assert_eq!(tasks_of(&app, "alpha").await.len(), 1);
}

#[tokio::test]
async fn a_bad_key_is_refused_naming_the_header() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let body = json!({"project": "alpha", "title": "t"});
    for key in ["", &"k".repeat(256)] {
        let refused =
            assert_problem(post_with_key(&app, &app.admin_token, "/api/v1/tasks", key, &body).await, 422).await;
        assert_eq!(refused["errors"][0]["field"], "Idempotency-Key", "{refused}");
    }
    assert!(tasks_of(&app, "alpha").await.is_empty());
}

#[tokio::test]
async fn two_tokens_with_the_same_key_create_two_tasks() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let other = app.token("write").await;
    let body = json!({"project": "alpha", "title": "Add a login page"});
    let mine = assert_json(post_with_key(&app, &app.admin_token, "/api/v1/tasks", "same", &body).await, 201).await;
    let theirs = assert_json(post_with_key(&app, &other, "/api/v1/tasks", "same", &body).await, 201).await;
    assert_ne!(mine["id"], theirs["id"]);
    assert_eq!(tasks_of(&app, "alpha").await.len(), 2);
}

#[tokio::test]
async fn a_retried_message_or_agent_or_wish_or_project_is_created_once() {
    let app = spawn_app().await;
    let project = app.create_project("alpha").await;
    let agent = engineer("alpha", "fox");
    let message = json!({"to": "operator", "body": "done"});
    let wish = json!({"slug": "login", "project": "alpha", "title": "Log in"});
    let second = json!({"slug": "beta", "name": "Beta", "repo_path": project["repo_path"]});
    for (path, body) in [
        ("/api/v1/agents", &agent),
        ("/api/v1/messages", &message),
        ("/api/v1/wishes", &wish),
        ("/api/v1/projects", &second),
    ] {
        let key = format!("key-{path}");
        let first = assert_json(post_with_key(&app, &app.admin_token, path, &key, body).await, 201).await;
        let again = assert_json(post_with_key(&app, &app.admin_token, path, &key, body).await, 201).await;
        assert_eq!(again, first, "{path}");
    }
    let messages = app.get_ok("/api/v1/messages?to=operator").await;
    assert_eq!(messages["items"].as_array().map(Vec::len), Some(1), "{messages}");
    let agents = app.get_ok("/api/v1/agents?project=alpha").await;
    assert_eq!(agents["items"].as_array().map(Vec::len), Some(1), "{agents}");
}

#[tokio::test(flavor = "multi_thread")]
async fn msg_send_sends_a_fresh_key_per_invocation() {
    let app = spawn_app().await;
    for _ in 0..2 {
        let (url, token) = (app.address.clone(), app.admin_token.clone());
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(crate::binary::BIN)
                .args(["msg", "send", "--to", "operator", "same words"])
                .env_remove("SWITCHYARD_AGENT")
                .env_remove("SWITCHYARD_TOKEN_FILE")
                .env("SWITCHYARD_URL", url)
                .env("SWITCHYARD_TOKEN", token)
                .output()
                .expect("run")
        })
        .await
        .expect("cli");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let keys: Vec<String> = sqlx::query_scalar("SELECT key FROM idempotency_keys WHERE route LIKE 'POST %messages'")
        .fetch_all(&app.pool)
        .await
        .expect("keys");
    assert_eq!(keys.len(), 2, "one key per invocation: {keys:?}");
    assert_ne!(keys[0], keys[1]);
    let messages = app.get_ok("/api/v1/messages?to=operator").await;
    assert_eq!(messages["items"].as_array().map(Vec::len), Some(2), "two sends, two messages");
}
