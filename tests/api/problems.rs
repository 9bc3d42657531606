use reqwest::Method;

use crate::helpers::{assert_problem, spawn_app};

#[tokio::test]
async fn an_unknown_api_route_is_a_404_problem() {
    let app = spawn_app().await;
    let response = app.admin(Method::GET, "/api/v1/no-such-thing").send().await.expect("request");
    let body = assert_problem(response, 404).await;
    assert!(body["detail"].as_str().unwrap_or("").contains("/api/v1/no-such-thing"));
    let unauthenticated = app.client.get(app.url("/api/nothing")).send().await.expect("request");
    assert_problem(unauthenticated, 404).await;
}

#[tokio::test]
async fn a_wrong_method_is_a_405_problem() {
    let app = spawn_app().await;
    let response = app.admin(Method::PUT, "/api/v1/tokens").send().await.expect("request");
    assert_problem(response, 405).await;
}

#[tokio::test]
async fn an_unknown_field_is_a_422_naming_it() {
    let app = spawn_app().await;
    let response = app
        .admin(Method::POST, "/api/v1/tokens")
        .json(&serde_json::json!({"name": "a", "scope": "read", "colour": "red"}))
        .send()
        .await
        .expect("request");
    let body = assert_problem(response, 422).await;
    assert_eq!(body["errors"][0]["field"], "colour");
}

#[tokio::test]
async fn a_bad_value_is_a_422_naming_the_field() {
    let app = spawn_app().await;
    let response = app
        .admin(Method::POST, "/api/v1/tokens")
        .json(&serde_json::json!({"name": "a", "scope": "superuser"}))
        .send()
        .await
        .expect("request");
    let body = assert_problem(response, 422).await;
    assert_eq!(body["errors"][0]["field"], "scope");
    let blank = app
        .admin(Method::POST, "/api/v1/tokens")
        .json(&serde_json::json!({"name": "  ", "scope": "read"}))
        .send()
        .await
        .expect("request");
    let body = assert_problem(blank, 422).await;
    assert_eq!(body["errors"][0]["field"], "name");
}

#[tokio::test]
async fn broken_json_is_400_and_a_missing_content_type_is_415() {
    let app = spawn_app().await;
    let broken = app
        .admin(Method::POST, "/api/v1/tokens")
        .header("content-type", "application/json")
        .body("{\"name\":")
        .send()
        .await
        .expect("request");
    assert_problem(broken, 400).await;
    let untyped = app.admin(Method::POST, "/api/v1/tokens").body("{}").send().await.expect("request");
    assert_problem(untyped, 415).await;
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let app = spawn_app().await;
    let huge = format!("{{\"name\":\"{}\",\"scope\":\"read\"}}", "a".repeat(switchyard::http::BODY_LIMIT + 1));
    let response = app
        .admin(Method::POST, "/api/v1/tokens")
        .header("content-type", "application/json")
        .body(huge)
        .send()
        .await
        .expect("request");
    assert_problem(response, 413).await;
}

#[tokio::test]
async fn a_duplicate_live_token_name_is_a_409() {
    let app = spawn_app().await;
    let body = serde_json::json!({"name": "twice", "scope": "read"});
    let first = app.admin(Method::POST, "/api/v1/tokens").json(&body).send().await.expect("request");
    assert_eq!(first.status(), 201);
    let second = app.admin(Method::POST, "/api/v1/tokens").json(&body).send().await.expect("request");
    assert_problem(second, 409).await;
}

#[tokio::test]
async fn every_response_carries_a_request_id() {
    let app = spawn_app().await;
    let response = app.client.get(app.url("/healthz")).send().await.expect("request");
    assert!(response.headers().get("x-request-id").is_some_and(|v| !v.is_empty()));
    let given = app.client.get(app.url("/healthz")).header("x-request-id", "abc-123").send().await.expect("request");
    assert_eq!(given.headers().get("x-request-id").and_then(|v| v.to_str().ok()), Some("abc-123"));
}

#[tokio::test]
async fn data_after_the_json_body_is_refused() {
    let app = spawn_app().await;
    let response = app
        .admin(Method::POST, "/api/v1/tokens")
        .header("content-type", "application/json")
        .body(r#"{"name": "a", "scope": "read"} xyz"#)
        .send()
        .await
        .expect("request");
    assert_problem(response, 400).await;
}

#[tokio::test]
async fn nul_anywhere_in_a_request_is_a_422_naming_where_never_a_500() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let task = serde_json::json!({"project": "alpha", "title": "a\u{0}b"});
    let body = assert_problem(app.post("/api/v1/tasks", task).await, 422).await;
    assert_eq!(body["errors"][0]["field"], "title", "{body}");
    for (path, field) in [
        ("/api/v1/agents/a%00b", "path"),
        ("/api/v1/projects/alpha%00", "path"),
        ("/api/v1/tasks?assignee=%00", "assignee"),
        ("/api/v1/events?type=a%00", "type"),
    ] {
        let response = app.admin(Method::GET, path).send().await.expect("request");
        let body = assert_problem(response, 422).await;
        assert_eq!(body["errors"][0]["field"], field, "{path}: {body}");
    }
}
