//! `GET /api/v1/events/stream`: Server-Sent Events that resume with `Last-Event-ID` without
//! missing anything, and reach every replica on the same database.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::Value;
use switchyard::webhooks::WebhookSettings;

use crate::helpers::{assert_problem, spawn_app, TestApp};

/// An open SSE response and what has been read of it.
struct Stream {
    response: reqwest::Response,
    buffer: String,
}

impl Stream {
    async fn open(app: &TestApp, query: &str, last_event_id: Option<i64>) -> Stream {
        let mut request = app.admin(Method::GET, &format!("/api/v1/events/stream{query}"));
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id.to_string());
        }
        let response = request.send().await.expect("request");
        assert_eq!(response.status(), 200);
        assert!(response.headers()["content-type"].to_str().expect("ascii").starts_with("text/event-stream"));
        Stream { response, buffer: String::new() }
    }

    /// The next event (`id`, `event`, parsed `data`), or `None` if none comes within `limit`.
    async fn next(&mut self, limit: Duration) -> Option<(i64, String, Value)> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let field =
                    |name: &str| block.lines().find_map(|l| l.strip_prefix(name).map(|v| v.trim_start().to_owned()));
                if let (Some(id), Some(data)) = (field("id:"), field("data:")) {
                    let event = field("event:").unwrap_or_default();
                    return Some((id.parse().expect("numeric id"), event, serde_json::from_str(&data).expect("json")));
                }
                continue; // a keep-alive comment
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            match tokio::time::timeout(left, self.response.chunk()).await {
                Ok(Ok(Some(bytes))) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }

    /// Reads until an event of `event_type` arrives; returns everything read up to it.
    async fn until(&mut self, event_type: &str) -> Vec<(i64, String, Value)> {
        let mut seen = Vec::new();
        while let Some(event) = self.next(Duration::from_secs(10)).await {
            let done = event.1 == event_type;
            seen.push(event);
            if done {
                return seen;
            }
        }
        panic!("no {event_type} in the stream; saw {seen:?}");
    }
}

async fn all_event_ids(app: &TestApp) -> Vec<i64> {
    let body = app.get_ok("/api/v1/events?limit=1000").await;
    body["items"].as_array().expect("items").iter().filter_map(|e| e["id"].as_i64()).collect()
}

async fn revoke(app: &TestApp, name_prefix: &str) {
    let body = app.get_ok("/api/v1/tokens").await;
    let items = body["items"].as_array().or(body.as_array()).cloned().unwrap_or_default();
    let token = items.iter().find(|t| t["name"].as_str().is_some_and(|n| n.starts_with(name_prefix))).expect("token");
    let response =
        app.admin(Method::DELETE, &format!("/api/v1/tokens/{}", token["id"].as_str().expect("id"))).send().await;
    assert!(response.expect("request").status().is_success());
}

#[tokio::test]
async fn a_client_that_reconnects_with_last_event_id_misses_nothing() {
    let app = spawn_app().await;
    let mut stream = Stream::open(&app, "", None).await;
    app.token("read").await;
    let first = stream.until("token.created").await;
    let last_seen = first.last().expect("an event").0;
    drop(stream);
    // While disconnected, more happens.
    app.token("write").await;
    revoke(&app, "read-").await;
    let mut resumed = Stream::open(&app, "", Some(last_seen)).await;
    let rest = resumed.until("token.revoked").await;
    let streamed: Vec<i64> = first.iter().chain(rest.iter()).map(|e| e.0).collect();
    let mut logged = all_event_ids(&app).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while logged.last() != streamed.last() && Instant::now() < deadline {
        // Another test's transaction on the shared cluster may hold the horizon back a moment.
        tokio::time::sleep(Duration::from_millis(20)).await;
        logged = all_event_ids(&app).await;
    }
    assert_eq!(streamed, logged, "every event once, in log order");
    assert_eq!(rest[0].2["id"], rest[0].0, "data is the event");
}

#[tokio::test]
async fn the_stream_filters_by_type_and_pattern() {
    let app = spawn_app().await;
    let mut stream = Stream::open(&app, "?types=token.revoked", None).await;
    app.token("read").await;
    revoke(&app, "read-").await;
    let seen = stream.until("token.revoked").await;
    assert!(seen.iter().all(|e| e.1 == "token.revoked"), "{seen:?}");
    let response = app.get("/api/v1/events/stream?types=nope.*").await;
    let problem = assert_problem(response, 422).await;
    assert_eq!(problem["errors"][0]["field"], "types");
    let response = app.get("/api/v1/events/stream?after=99999999").await;
    assert_problem(response, 422).await;
}

#[tokio::test]
async fn two_instances_on_one_database_both_stream_an_event_written_by_either() {
    let first = spawn_app().await;
    let second = TestApp::builder()
        .on(first.database_url.clone(), first.database_name.clone())
        .webhooks(WebhookSettings::default())
        .spawn()
        .await;
    let start = *all_event_ids(&first).await.last().expect("the admin tokens' events");
    let mut on_first = Stream::open(&first, "?types=token.*", Some(start)).await;
    let mut on_second = Stream::open(&second, "?types=token.*", Some(start)).await;
    second.token("read").await;
    first.token("write").await;
    for stream in [&mut on_first, &mut on_second] {
        let mut scopes = Vec::new();
        while scopes.len() < 2 {
            let (_, event, data) = stream.next(Duration::from_secs(10)).await.expect("both events arrive");
            assert_eq!(event, "token.created");
            let scope = data["payload"]["scope"].as_str().unwrap_or("").to_owned();
            if scope != "admin" {
                scopes.push(scope);
            }
        }
        scopes.sort();
        assert_eq!(scopes, ["read", "write"]);
    }
}
