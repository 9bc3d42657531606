//! Outgoing webhooks as a receiver sees them: signed Standard Webhooks deliveries, retries with
//! backoff and a stable `webhook-id`, disabling, the delivery log, redelivery and test events,
//! secret rotation, and the SSRF guard.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use switchyard::webhooks::ssrf::AllowList;
use switchyard::webhooks::WebhookSettings;

use crate::helpers::{assert_json, assert_problem, eventually, TestApp};
use crate::receiver::{signed_by, Receiver};

/// Loopback allowed (the receiver is on 127.0.0.1) and retries in milliseconds.
pub fn test_settings() -> WebhookSettings {
    WebhookSettings {
        allowed_hosts: AllowList::parse("loopback").expect("allow-list"),
        retry_schedule: [100, 200, 400, 800].into_iter().map(Duration::from_millis).collect(),
        timeout: Duration::from_secs(2),
        ..WebhookSettings::default()
    }
}

/// Subscribes `url` to `events`; returns the subscription's id and secret.
pub async fn subscribe(app: &TestApp, url: &str, events: Value) -> (String, String) {
    let body = assert_json(app.post("/api/v1/webhooks", json!({"url": url, "events": events})).await, 201).await;
    (body["id"].as_str().expect("id").to_owned(), body["secret"].as_str().expect("secret").to_owned())
}

async fn deliveries(app: &TestApp, id: &str) -> Vec<Value> {
    let body = app.get_ok(&format!("/api/v1/webhooks/{id}/deliveries")).await;
    body["items"].as_array().cloned().unwrap_or_default()
}

async fn webhook(app: &TestApp, id: &str) -> Value {
    app.get_ok(&format!("/api/v1/webhooks/{id}")).await
}

/// An app with one `token.*` subscriber, once it has received the event of a token made; the
/// subscription's id and secret with it.
async fn a_first_delivery() -> (TestApp, Receiver, String, String) {
    let app = TestApp::builder().webhooks(test_settings()).spawn().await;
    let receiver = Receiver::start(&[], 200).await;
    let (id, secret) = subscribe(&app, &receiver.url, json!(["token.*"])).await;
    app.token("read").await;
    eventually("the delivery arrives", Duration::from_secs(10), || async { receiver.count() >= 1 }).await;
    (app, receiver, id, secret)
}

#[tokio::test]
async fn a_subscriber_receives_events_signed_as_the_spec_says() {
    let (_app, receiver, _, secret) = a_first_delivery().await;
    let message = &receiver.received()[0];
    assert!(signed_by(&secret, message), "signature verifies: {:?}", message.headers);
    assert!(message.header("webhook-id").starts_with("msg_"));
    let age = chrono::Utc::now().timestamp() - message.header("webhook-timestamp").parse::<i64>().expect("unix time");
    assert!((0..60).contains(&age), "{age}");
    let body = message.json();
    assert_eq!(body["type"], "token.created");
    assert_eq!(body["data"]["payload"]["scope"], "read");
    assert!(!String::from_utf8_lossy(&message.body).contains("sy_"), "no token secret in the body");
    let mut tampered = message.clone();
    tampered.body.push(b' ');
    assert!(!signed_by(&secret, &tampered));
}

#[tokio::test]
async fn a_receiver_that_fails_three_times_gets_the_same_message_with_growing_gaps_until_it_recovers() {
    let app = TestApp::builder().webhooks(test_settings()).spawn().await;
    let receiver = Receiver::start(&[500, 503, 500], 200).await;
    let (id, secret) = subscribe(&app, &receiver.url, json!(["token.created"])).await;
    app.token("read").await;
    eventually("four attempts", Duration::from_secs(15), || async { receiver.count() >= 4 }).await;
    let seen = receiver.received();
    let ids: Vec<String> = seen.iter().map(|m| m.header("webhook-id")).collect();
    assert!(ids.iter().all(|i| *i == ids[0]), "one webhook-id across retries: {ids:?}");
    assert!(seen.iter().all(|m| signed_by(&secret, m)));
    let gaps: Vec<Duration> = seen.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert!(gaps[0] >= Duration::from_millis(85), "{gaps:?}");
    assert!(gaps[0] < gaps[1] && gaps[1] < gaps[2], "backoff grows: {gaps:?}");
    eventually("the log says delivered", Duration::from_secs(5), || async {
        deliveries(&app, &id).await.first().is_some_and(|d| d["status"] == "succeeded")
    })
    .await;
    let logged = &deliveries(&app, &id).await[0];
    assert_eq!(logged["attempts"], 4);
    assert_eq!(logged["last_status_code"], 200);
    assert_eq!(logged["message_id"], ids[0].as_str());
    assert!(logged["last_duration_ms"].as_i64().is_some());
    // Delivered once it recovered: nothing is left for a sender to claim, so no fifth attempt.
    let open: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_deliveries WHERE status <> 'succeeded'")
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(open, 0);
    assert_eq!(receiver.count(), 4);
}

#[tokio::test]
async fn a_receiver_asking_to_wait_with_retry_after_is_not_tried_again_sooner() {
    let app = TestApp::builder().webhooks(test_settings()).spawn().await;
    let receiver = Receiver::start(&[429, 503], 200).await;
    receiver.retry_after("2");
    let (id, _) = subscribe(&app, &receiver.url, json!(["token.created"])).await;
    app.token("read").await;
    eventually("three attempts", Duration::from_secs(15), || async { receiver.count() >= 3 }).await;
    let seen = receiver.received();
    let gaps: Vec<Duration> = seen.windows(2).map(|w| w[1].at - w[0].at).collect();
    // The test schedule alone would try again within a second.
    assert!(gaps.iter().all(|gap| *gap >= Duration::from_secs(2)), "Retry-After: 2 was not honoured: {gaps:?}");
    eventually("the log says delivered", Duration::from_secs(5), || async {
        deliveries(&app, &id).await.first().is_some_and(|d| d["status"] == "succeeded")
    })
    .await;
    assert_eq!(deliveries(&app, &id).await[0]["attempts"], 3);
}

#[tokio::test]
async fn a_410_disables_the_endpoint_with_an_event() {
    let app = TestApp::builder().webhooks(test_settings()).spawn().await;
    let receiver = Receiver::start(&[], 410).await;
    let (id, _) = subscribe(&app, &receiver.url, json!(["on_event"])).await;
    app.token("read").await;
    eventually("disabled", Duration::from_secs(10), || async { webhook(&app, &id).await["enabled"] == false }).await;
    assert!(webhook(&app, &id).await["disabled_reason"].as_str().is_some_and(|r| r.contains("410")));
    eventually("a webhook.disabled event", Duration::from_secs(10), || async {
        let events = app.get_ok("/api/v1/events?limit=1000").await;
        events["items"].as_array().expect("items").iter().any(|e| e["type"] == "webhook.disabled")
    })
    .await;
    let logged = deliveries(&app, &id).await.len();
    app.token("write").await;
    assert_eq!(deliveries(&app, &id).await.len(), logged, "nothing more is queued for a gone endpoint");
}

#[tokio::test]
async fn an_endpoint_failing_longer_than_the_limit_is_disabled_with_an_event() {
    let settings = WebhookSettings { disable_after: Duration::from_millis(1), ..test_settings() };
    let app = TestApp::builder().webhooks(settings).spawn().await;
    let receiver = Receiver::start(&[], 500).await;
    let (id, _) = subscribe(&app, &receiver.url, json!(["token.created"])).await;
    app.token("read").await;
    eventually("disabled", Duration::from_secs(10), || async { webhook(&app, &id).await["enabled"] == false }).await;
    let reason = webhook(&app, &id).await["disabled_reason"].as_str().unwrap_or("").to_owned();
    assert!(reason.contains("failed for over"), "{reason}");
    // Enabling it again resumes the pending delivery.
    let response = app
        .admin(Method::PATCH, &format!("/api/v1/webhooks/{id}"))
        .json(&json!({"enabled": true}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    let before = receiver.count();
    eventually("resumed", Duration::from_secs(10), || async { receiver.count() > before }).await;
}

#[tokio::test]
async fn a_test_event_and_a_redelivery_reach_the_receiver_with_their_ids() {
    let app = TestApp::builder().webhooks(test_settings()).spawn().await;
    let receiver = Receiver::start(&[], 200).await;
    let (id, secret) = subscribe(&app, &receiver.url, json!(["on_ci_failed"])).await;
    let response = app.admin(Method::POST, &format!("/api/v1/webhooks/{id}/test")).send().await.expect("request");
    assert_eq!(response.status(), 202);
    let queued: Value = response.json().await.expect("json");
    // At least once: count what arrived rather than expect an exact number at each moment.
    eventually("the test event arrives", Duration::from_secs(10), || async { receiver.count() >= 1 }).await;
    let first = &receiver.received()[0];
    assert_eq!(first.json()["type"], "webhook.test");
    assert!(signed_by(&secret, first));
    let path = format!("/api/v1/webhooks/{id}/deliveries/{}/redeliver", queued["id"].as_str().expect("id"));
    let before = receiver.count();
    let response = app.admin(Method::POST, &path).send().await.expect("request");
    assert_eq!(response.status(), 202);
    eventually("redelivered", Duration::from_secs(10), || async { receiver.count() > before }).await;
    assert_eq!(receiver.received()[before].header("webhook-id"), first.header("webhook-id"));
    let missing = format!("/api/v1/webhooks/{id}/deliveries/{}/redeliver", uuid::Uuid::new_v4());
    assert_problem(app.admin(Method::POST, &missing).send().await.expect("request"), 404).await;
}

#[tokio::test]
async fn after_a_rotation_deliveries_carry_both_signatures() {
    let app = TestApp::builder().webhooks(test_settings()).spawn().await;
    let receiver = Receiver::start(&[], 200).await;
    let (id, old) = subscribe(&app, &receiver.url, json!(["token.created"])).await;
    let response =
        app.admin(Method::POST, &format!("/api/v1/webhooks/{id}/rotate-secret")).send().await.expect("request");
    assert_eq!(response.status(), 200);
    let new = response.json::<Value>().await.expect("json")["secret"].as_str().expect("secret").to_owned();
    assert_ne!(new, old);
    let shown = webhook(&app, &id).await;
    assert!(shown.get("secret").is_none(), "never shown again: {shown}");
    app.token("read").await;
    eventually("delivered", Duration::from_secs(10), || async { receiver.count() == 1 }).await;
    let message = &receiver.received()[0];
    assert_eq!(message.header("webhook-signature").split(' ').count(), 2);
    assert!(signed_by(&new, message) && signed_by(&old, message));
}

#[tokio::test]
async fn events_only_reach_subscriptions_that_want_them() {
    let app = TestApp::builder().webhooks(test_settings()).spawn().await;
    let wants = Receiver::start(&[], 200).await;
    let other = Receiver::start(&[], 200).await;
    subscribe(&app, &wants.url, json!(["token.revoked", "token.created"])).await;
    subscribe(&app, &other.url, json!(["on_agent_idle", "task.*"])).await;
    app.token("read").await;
    eventually("delivered", Duration::from_secs(10), || async { wants.count() == 1 }).await;
    let response = app.admin(Method::POST, &format!("/api/v1/webhooks/{}/test", uuid::Uuid::new_v4())).send().await;
    assert_problem(response.expect("request"), 404).await;
    assert_eq!(other.count(), 0);
}

/// Each kind of entry (hook name, pattern, type, `*`) against events that should and should not
/// match it, recorded as one batch: the delivery log of each subscription lists exactly its own.
#[tokio::test]
async fn each_kind_of_entry_queues_deliveries_for_exactly_its_events() {
    let app = TestApp::builder().webhooks(test_settings()).spawn().await;
    let receiver = Receiver::start(&[], 200).await;
    let corpus: &[(&str, Value)] = &[
        ("token.created", json!({})),
        ("agent.state_changed", json!({"to": "idle"})),
        ("agent.state_changed", json!({"to": "working"})),
        ("agent.spawned", json!({})),
        ("wish.merged", json!({})),
        ("wish.created", json!({})),
        ("task.started", json!({"assignee": "w1"})),
        ("task.started", json!({"assignee": null})),
        ("task.assigned", json!({})),
        ("ci.failed", json!({})),
        ("message.delivered", json!({})),
        ("message.created", json!({})),
        ("chat.posted", json!({})),
        ("task.created", json!({})),
    ];
    // (entries, the corpus positions they want)
    let cases: &[(Value, &[usize])] = &[
        (json!(["on_event"]), &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]),
        (json!(["*"]), &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]),
        (json!(["on_agent_idle", "on_agent_started"]), &[1, 3]),
        (json!(["on_merge_complete"]), &[4]),
        (json!(["on_task_assigned"]), &[6, 8]),
        (json!(["on_ci_failed"]), &[9]),
        // Sent means confirmed in the agent's pane, not merely stored.
        (json!(["on_message_sent"]), &[10]),
        (json!(["chat.*", "token.created"]), &[0, 12]),
        (json!(["task.*", "wish.merged"]), &[4, 6, 7, 8, 13]),
    ];
    let mut subscriptions = Vec::new();
    for (entries, _) in cases {
        subscriptions.push(subscribe(&app, &receiver.url, entries.clone()).await.0);
    }
    let mut tx = app.pool.begin().await.expect("begin");
    let batch = corpus
        .iter()
        .map(|(event_type, payload)| switchyard::db::events::NewEvent {
            event_type,
            subject: "test:matching".into(),
            payload: payload.clone(),
        })
        .collect();
    let ids = switchyard::db::events::record_all(&mut tx, batch).await.expect("record");
    tx.commit().await.expect("commit");
    // The batch's deliveries appear in the logs together (one outbox row per event, expanded by
    // the sender in one transaction); wait for as many as there should be, then compare each log.
    let logged = |subscription: String| {
        let (app, ids) = (&app, &ids);
        async move {
            let mut got: Vec<i64> = deliveries(app, &subscription)
                .await
                .iter()
                .filter_map(|d| d["event_id"].as_i64())
                .filter(|id| ids.contains(id))
                .collect();
            got.sort();
            got
        }
    };
    let expected: usize = cases.iter().map(|(_, wanted)| wanted.len()).sum();
    eventually("every delivery logged", Duration::from_secs(10), || async {
        let mut total = 0;
        for subscription in &subscriptions {
            total += logged(subscription.clone()).await.len();
        }
        total >= expected
    })
    .await;
    for ((entries, wanted), subscription) in cases.iter().zip(&subscriptions) {
        let want: Vec<i64> = wanted.iter().map(|&i| ids[i]).collect();
        assert_eq!(logged(subscription.clone()).await, want, "{entries}");
    }
}

#[tokio::test]
async fn a_deleted_subscription_takes_its_delivery_log_with_it_and_gets_nothing_more() {
    let (app, receiver, id, _) = a_first_delivery().await;
    assert_eq!(receiver.count(), 1);
    assert_eq!(deliveries(&app, &id).await.len(), 1);

    let response = app.admin(Method::DELETE, &format!("/api/v1/webhooks/{id}")).send().await.expect("request");
    assert_eq!(response.status(), 204);
    let response = app.admin(Method::GET, &format!("/api/v1/webhooks/{id}/deliveries")).send().await;
    assert_problem(response.expect("request"), 404).await;
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM webhook_deliveries WHERE subscription_id = $1::uuid")
        .bind(&id)
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(left, 0, "the delivery log is deleted with its subscription");
    // A later event queues nothing for it: the next subscriber's delivery arrives alone.
    let after = Receiver::start(&[], 200).await;
    subscribe(&app, &after.url, json!(["token.*"])).await;
    app.token("read").await;
    eventually("delivered to the new subscriber", Duration::from_secs(10), || async { after.count() == 1 }).await;
    assert_eq!(receiver.count(), 1);
}

#[tokio::test]
async fn unknown_event_names_and_bad_fields_are_422_naming_the_entry() {
    let app = TestApp::builder().webhooks(test_settings()).spawn().await;
    for (body, field) in [
        (json!({"url": "http://127.0.0.1:9/x", "events": ["task.created", "on_agent_sleepy"]}), "events[1]"),
        (json!({"url": "http://127.0.0.1:9/x", "events": []}), "events"),
        (json!({"url": "ftp://example.com/x", "events": ["on_event"]}), "url"),
        (json!({"url": "http://127.0.0.1:9/x", "events": ["on_event"], "secret": "hunter2"}), "secret"),
        (json!({"url": "http://127.0.0.1:9/x", "events": ["on_event"], "project": "Not A Slug"}), "project"),
    ] {
        let response = app.post("/api/v1/webhooks", body.clone()).await;
        let problem = assert_problem(response, 422).await;
        assert_eq!(problem["errors"][0]["field"], field, "{body}: {problem}");
    }
    let write = app.token("write").await;
    let response = app
        .client
        .post(app.url("/api/v1/webhooks"))
        .bearer_auth(write)
        .json(&json!({"url": "https://example.com/x", "events": ["on_event"]}))
        .send()
        .await
        .expect("request");
    assert_problem(response, 403).await;
}

#[tokio::test]
async fn private_destinations_are_refused_when_saved_and_when_connecting() {
    let strict = crate::helpers::spawn_app().await;
    let receiver = Receiver::start(&[], 200).await;
    for url in ["http://127.0.0.1:9/x", "http://169.254.169.254/latest/meta-data", "http://[::1]/x", "http://10.0.0.1/"]
    {
        let response = strict.post("/api/v1/webhooks", json!({"url": url, "events": ["on_event"]})).await;
        let problem = assert_problem(response, 422).await;
        assert_eq!(problem["errors"][0]["field"], "url", "{url}");
    }
    // A name is checked where it resolves, when connecting: localhost is loopback.
    let by_name = receiver.url.replace("127.0.0.1", "localhost");
    let (id, _) = subscribe(&strict, &by_name, json!(["token.created"])).await;
    strict.token("read").await;
    eventually("the attempt is refused", Duration::from_secs(10), || async {
        deliveries(&strict, &id)
            .await
            .first()
            .is_some_and(|d| d["last_error"].as_str().is_some_and(|e| e.contains("loopback")))
    })
    .await;
    assert_eq!(receiver.count(), 0, "nothing reached the loopback receiver");
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let app = TestApp::builder().webhooks(WebhookSettings { retry_schedule: vec![], ..test_settings() }).spawn().await;
    let target = Receiver::start(&[], 200).await;
    let redirector = {
        let location = target.url.clone();
        let router = axum::Router::new().route(
            "/hook",
            axum::routing::post(move || {
                let location = location.clone();
                async move { (axum::http::StatusCode::TEMPORARY_REDIRECT, [("location", location)]) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        url
    };
    let (id, _) = subscribe(&app, &redirector, json!(["token.created"])).await;
    app.token("read").await;
    eventually("the attempt is logged", Duration::from_secs(10), || async {
        deliveries(&app, &id).await.first().is_some_and(|d| d["status"] == "failed")
    })
    .await;
    assert_eq!(deliveries(&app, &id).await[0]["last_status_code"], 307);
    assert_eq!(target.count(), 0);
}

#[tokio::test]
async fn deliveries_are_sent_from_a_thread_the_kernel_serves_after_the_api() {
    let _app = TestApp::builder().webhooks(test_settings()).spawn().await;
    let ours = nice_of(&std::fs::read_to_string("/proc/thread-self/stat").expect("this thread"));
    let want = (ours + 10).min(19);
    // Every app of this test process has one; each must be 10 nicer than the rest. (The thread
    // of an app another test is starting right now is named a moment before it lowers itself.)
    let senders = || -> Vec<i64> {
        std::fs::read_dir("/proc/self/task")
            .expect("this process's threads")
            .filter_map(|task| {
                let path = task.ok()?.path();
                let name = std::fs::read_to_string(path.join("comm")).ok()?;
                let stat = std::fs::read_to_string(path.join("stat")).ok()?;
                (name.trim() == "webhook-sender").then(|| nice_of(&stat))
            })
            .collect()
    };
    let what = format!("every webhook-sender thread at nice {want}");
    eventually(&what, Duration::from_secs(5), || async {
        let nice = senders();
        !nice.is_empty() && nice.iter().all(|n| *n == want)
    })
    .await;
}

/// The nice value in a `/proc/…/stat` line: the 19th field, counted after the `(comm)` field
/// (which may hold spaces).
fn nice_of(stat: &str) -> i64 {
    let after_comm = &stat[stat.rfind(')').expect("a stat line") + 2..];
    after_comm.split(' ').nth(16).and_then(|f| f.parse().ok()).expect("a nice value")
}

#[tokio::test]
async fn a_url_with_an_embedded_or_reserved_address_or_of_any_length_is_a_422_naming_url() {
    let app = TestApp::builder().webhooks(WebhookSettings::default()).spawn().await;
    let long = format!("https://example.com/{}", "a".repeat(3000));
    for url in
        ["http://[::127.0.0.1]/", "http://[::ffff:0:127.0.0.1]/", "http://[fec0::1]/", "http://192.0.2.2/", &long]
    {
        let response = app.post("/api/v1/webhooks", json!({"url": url, "events": ["on_event"]})).await;
        let problem = assert_problem(response, 422).await;
        assert_eq!(problem["errors"][0]["field"], "url", "{problem}");
    }
}

#[tokio::test]
async fn slack_and_ntfy_formats_say_what_happened_in_a_line_with_a_signed_link_back() {
    let app = TestApp::builder().webhooks(test_settings()).spawn().await;
    let (slack, ntfy) = (Receiver::start(&[], 200).await, Receiver::start(&[], 200).await);
    let mut secrets = Vec::new();
    for (receiver, format) in [(&slack, "slack"), (&ntfy, "ntfy")] {
        let body = json!({"url": receiver.url, "events": ["on_agent_started"], "format": format});
        let created = app.post_ok("/api/v1/webhooks", body).await;
        assert_eq!(created["format"], format);
        secrets.push(created["secret"].as_str().expect("secret").to_owned());
    }
    let refused = app.post("/api/v1/webhooks", json!({"url": slack.url, "events": ["*"], "format": "teams"})).await;
    assert_eq!(assert_problem(refused, 422).await["errors"][0]["field"], "format");
    app.create_project("alpha").await;
    app.create_agent(crate::helpers::engineer("alpha", "fox")).await;
    crate::helpers::eventually("both delivered", Duration::from_secs(10), || async {
        slack.count() >= 1 && ntfy.count() >= 1
    })
    .await;

    let to_slack = &slack.received()[0];
    assert!(signed_by(&secrets[0], to_slack), "signed like every delivery");
    let text = to_slack.json()["text"].as_str().unwrap_or_default().to_owned();
    assert!(text.starts_with("Switchyard: agent.spawned — agent:fox"), "{text}");
    assert!(text.contains(&format!("<{}/agents/fox|Open in Switchyard>", app.address)), "{text}");
    let to_ntfy = &ntfy.received()[0];
    assert!(signed_by(&secrets[1], to_ntfy));
    assert!(String::from_utf8_lossy(&to_ntfy.body).starts_with("agent.spawned — agent:fox"));
    assert_eq!(to_ntfy.header("title"), "Switchyard: agent.spawned");
    assert_eq!(to_ntfy.header("click"), format!("{}/agents/fox", app.address));
}
