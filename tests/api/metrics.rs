//! `/metrics` on the status listener: requests counted by matched route and status, the
//! database's figures read when scraped, and nothing of it on the public listener.

use crate::helpers::{assert_problem, spawn_app, TestApp};

async fn scrape(app: &TestApp) -> String {
    let response = app.client.get(format!("{}/metrics", app.status_address)).send().await.expect("metrics");
    assert_eq!(response.status(), 200);
    response.text().await.expect("text")
}

/// The value of the sample whose name and labels are `sample`, if it is there.
fn value(text: &str, sample: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(sample)?.trim().parse().ok())
}

#[tokio::test]
async fn requests_are_counted_by_route_and_status_and_the_databases_figures_are_read_when_scraped() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    for _ in 0..3 {
        app.get_ok("/api/v1/projects/alpha").await;
    }
    assert_problem(app.get("/api/v1/projects/nope").await, 404).await;
    let text = scrape(&app).await;
    let ok = r#"switchyard_http_requests_total{method="GET",route="/api/v1/projects/{slug}",status="200"}"#;
    let missing = r#"switchyard_http_requests_total{method="GET",route="/api/v1/projects/{slug}",status="404"}"#;
    assert_eq!(value(&text, ok), Some(3.0), "{text}");
    assert_eq!(value(&text, missing), Some(1.0), "{text}");
    let timed = r#"switchyard_http_request_duration_seconds_count{method="GET",route="/api/v1/projects/{slug}"}"#;
    assert_eq!(value(&text, timed), Some(4.0), "{text}");
    assert!(!text.contains("/api/v1/projects/alpha"), "routes, never raw paths: {text}");
    assert_eq!(value(&text, "switchyard_pending_messages"), Some(0.0), "{text}");
    assert_eq!(value(&text, "switchyard_webhook_outbox_lag_seconds"), Some(0.0), "{text}");
    assert!(value(&text, r#"switchyard_db_pool_connections{state="in_use"}"#).is_some_and(|n| n >= 0.0), "{text}");

    // The public listener does not serve it.
    let public = app.client.get(format!("{}/metrics", app.address)).send().await.expect("public");
    assert_eq!(public.status(), 404);
}
