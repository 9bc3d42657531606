//! `/live`: the page's event stream names the topics that changed, once per burst.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use super::Dashboard;
use crate::helpers::{id, spawn_app, TestApp};

/// A project `alpha`, a logged-in dashboard, and its live stream from now on.
async fn watching(app: &TestApp) -> (Dashboard, reqwest::Response) {
    app.create_project("alpha").await;
    let dashboard = Dashboard::login(app).await;
    let head: i64 = sqlx::query_scalar("SELECT max(id) FROM events").fetch_one(&app.pool).await.expect("max");
    let stream = dashboard.request(Method::GET, &format!("/live?after={head}")).send().await.expect("live");
    assert_eq!(stream.status(), 200);
    (dashboard, stream)
}

/// Reads the stream until `enough` says so of the text read, or the stream closes, within a
/// deadline; returns the text and whether the stream closed.
async fn read_while(response: &mut reqwest::Response, enough: impl Fn(&str) -> bool) -> (String, bool) {
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !enough(&text) {
        let chunk = tokio::time::timeout_at(deadline, response.chunk())
            .await
            .unwrap_or_else(|_| panic!("timed out; the stream said:\n{text}"))
            .expect("stream");
        match chunk {
            Some(bytes) => text.push_str(&String::from_utf8_lossy(&bytes)),
            None => return (text, true),
        }
    }
    (text, false)
}

/// Reads the stream until `wanted` has appeared in it; returns the text.
async fn read_until(response: &mut reqwest::Response, wanted: &[&str]) -> String {
    let (text, closed) = read_while(response, |text| wanted.iter().all(|w| text.contains(w))).await;
    assert!(!closed, "the stream closed before {wanted:?}:\n{text}");
    text
}

#[tokio::test]
async fn the_live_stream_names_what_changed_after_the_page_was_rendered() {
    let app = spawn_app().await;
    let (dashboard, mut stream) = watching(&app).await;
    assert_eq!(stream.headers()["content-type"], "text/event-stream");

    let wish =
        json!({"slug": "login", "project": "alpha", "title": "Login", "groups": [{"key": "api", "title": "API"}]});
    let by_id = format!("event: wish-{}", id(&app.create_wish(wish).await));
    let text = read_until(&mut stream, &["event: wish-login", &by_id, "event: wishes", "event: tasks"]).await;
    assert!(!text.contains("project"), "what happened before the page was rendered is not replayed: {text}");
    assert_eq!(text.matches("event: wishes").count(), 1, "one message per topic per burst: {text}");

    // A browser that reconnects says where it was; the stream goes on from there.
    let last: i64 = sqlx::query_scalar("SELECT max(id) FROM events").fetch_one(&app.pool).await.expect("max");
    let mut resumed = dashboard
        .request(Method::GET, "/live?after=1")
        .header("last-event-id", last.to_string())
        .send()
        .await
        .expect("live");
    app.admin(Method::POST, "/api/v1/wishes/login/hold").send().await.expect("hold");
    let text = read_until(&mut resumed, &["event: wish-login"]).await;
    assert!(!text.contains("event: projects"), "nothing before Last-Event-ID: {text}");
}

#[tokio::test]
async fn a_live_stream_ends_when_its_session_does() {
    let app = spawn_app().await;
    let (dashboard, mut stream) = watching(&app).await;
    let wish = json!({"slug": "one", "project": "alpha", "title": "One", "groups": [{"key": "a", "title": "A"}]});
    app.post("/api/v1/wishes", wish).await;
    read_until(&mut stream, &["event: wish-one"]).await;

    let logout = dashboard.post_form("/logout", &[]).await;
    assert!(logout.status().is_success() || logout.status().is_redirection(), "logout: {}", logout.status());
    let wish = json!({"slug": "two", "project": "alpha", "title": "Two", "groups": [{"key": "a", "title": "A"}]});
    app.post("/api/v1/wishes", wish).await;
    // What follows the logout is never sent: the stream closes instead.
    let (after, closed) = read_while(&mut stream, |_| false).await;
    assert!(closed, "the stream stayed open after logout");
    assert!(!after.contains("wish-two"), "an ended session still heard of later changes: {after}");
}
