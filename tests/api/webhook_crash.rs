//! A `switchyard serve` killed with SIGKILL while deliveries are in flight: after a restart on
//! the same data, every delivery still arrives (at least once).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::binary::{switchyard, Served};
use crate::receiver::Receiver;

fn started(data_dir: &std::path::Path) -> Served {
    let mut cmd = switchyard(data_dir);
    cmd.env("SWITCHYARD_WEBHOOK_ALLOWED_HOSTS", "loopback")
        .env("SWITCHYARD_WEBHOOK_RETRY_SCHEDULE", "100ms,200ms,400ms")
        .env("SWITCHYARD_WEBHOOK_TIMEOUT", "1s");
    Served::start(cmd)
}

/// Polls `/readyz` until it answers 200 (within a minute).
pub(crate) async fn wait_ready(client: &reqwest::Client, api: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !client.get(format!("{api}/readyz")).send().await.is_ok_and(|r| r.status() == 200) {
        assert!(Instant::now() < deadline, "never ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn deliveries_in_flight_when_the_server_is_killed_arrive_after_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let receiver = Receiver::start(&[], 200).await;
    receiver.hang(true);
    let client = reqwest::Client::new();
    let first = started(dir.path());
    wait_ready(&client, &first.api).await;
    let token = first
        .stdout()
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("sy_"))
        .expect("bootstrap token printed")
        .to_owned();
    let created: Value = client
        .post(format!("{}/api/v1/webhooks", first.api))
        .bearer_auth(&token)
        .json(&json!({"url": receiver.url, "events": ["token.created"]}))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("json");
    assert!(created["id"].is_string(), "{created}");
    for i in 0..5 {
        let response = client
            .post(format!("{}/api/v1/tokens", first.api))
            .bearer_auth(&token)
            .json(&json!({"name": format!("t{i}"), "scope": "read"}))
            .send()
            .await
            .expect("request");
        assert_eq!(response.status(), 201);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while receiver.count() < 5 {
        assert!(Instant::now() < deadline, "deliveries never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    first.crash();
    receiver.hang(false);
    let answered_before = receiver.count();

    let second = started(dir.path());
    wait_ready(&client, &second.api).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let body: Value = client
            .get(format!("{}/api/v1/webhooks/{}/deliveries", second.api, created["id"].as_str().expect("id")))
            .bearer_auth(&token)
            .send()
            .await
            .expect("request")
            .json()
            .await
            .expect("json");
        let items = body["items"].as_array().cloned().unwrap_or_default();
        if items.len() == 5 && items.iter().all(|d| d["status"] == "succeeded") {
            break;
        }
        assert!(Instant::now() < deadline, "not all delivered after the restart: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let ids: HashSet<String> = receiver.received().iter().map(|m| m.header("webhook-id")).collect();
    assert_eq!(ids.len(), 5, "each of the five messages arrived");
    assert!(receiver.count() > answered_before, "sent again after the restart");
    assert!(second.stop().success());
}
