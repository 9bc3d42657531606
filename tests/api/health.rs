use crate::helpers::{eventually, spawn_app};

#[tokio::test]
async fn healthz_and_readyz_answer_without_a_token() {
    let app = spawn_app().await;
    for path in ["/healthz", "/readyz"] {
        let response = app.client.get(app.url(path)).send().await.expect("request");
        assert_eq!(response.status(), 200, "{path}");
        let body: serde_json::Value = response.json().await.expect("json");
        assert_eq!(body["status"], "ok");
    }
}

#[tokio::test]
async fn readyz_is_503_when_the_database_is_gone_and_healthz_stays_200() {
    let app = spawn_app().await;
    // Drop the app's database from under it (FORCE ends its connections).
    let admin_url = app.database_url.replace(&app.database_name, "postgres");
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&admin_url).await.expect("connect");
    sqlx::query(&format!("DROP DATABASE \"{}\" WITH (FORCE)", app.database_name))
        .execute(&mut conn)
        .await
        .expect("drop");
    let client = app.client.clone();
    let readyz = app.url("/readyz");
    eventually("readyz reports the database gone", std::time::Duration::from_secs(10), || {
        let request = client.get(&readyz).send();
        async move { request.await.is_ok_and(|r| r.status() == 503) }
    })
    .await;
    let response = app.client.get(app.url("/healthz")).send().await.expect("request");
    assert_eq!(response.status(), 200);
    let status = app.client.get(format!("{}/status", app.status_address)).send().await.expect("request");
    assert_eq!(status.status(), 503);
    let body: serde_json::Value = status.json().await.expect("json");
    assert_eq!(body["database"], "error");
}

#[tokio::test]
async fn the_status_endpoint_reports_node_version_and_database() {
    let app = spawn_app().await;
    let response = app.client.get(format!("{}/status", app.status_address)).send().await.expect("request");
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.expect("json");
    assert!(body["node_id"].as_str().is_some_and(|id| id.starts_with("node-")), "{body}");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(body["database"], "ok");
    assert_eq!(body["role"], "serve");
    assert!(body["uptime_s"].is_u64());
    assert!(body["started_at"].is_string());
}
