//! A node holds a small fixed number of PostgreSQL connections (`db::NODE_CONNECTIONS`: the
//! pool, the listener and the webhook sender's together) however busy it is, counted where
//! PostgreSQL counts them: `pg_stat_activity`, by the node's `application_name`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use sqlx::Connection;

use crate::conductor::{project, wait_for_wish, Fakes};
use crate::helpers::*;

/// The node's connections now, as PostgreSQL sees them.
async fn connections_of(conn: &mut sqlx::PgConnection, node_id: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1")
        .bind(switchyard::db::application_name(node_id))
        .fetch_one(conn)
        .await
        .expect("count the node's connections")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_node_running_a_wish_under_api_load_holds_at_most_its_connection_budget() {
    let fakes = Fakes::new();
    let app = TestApp::builder().providers(&fakes.providers()).worker(|w| w.conductor = true).spawn().await;
    let node_id = app.status().await["node_id"].as_str().expect("the node's id").to_owned();
    // The counting connection is the test's own, named apart from the node's.
    let mut counter = sqlx::PgConnection::connect(&app.database_url).await.expect("connect");
    let (_, repo) = project(&app, "wide", json!({"review": "none", "max_agents": 8})).await;
    let groups: Vec<Value> = (0..8).map(|i| json!({"key": format!("g{i}"), "title": format!("G{i}")})).collect();
    app.create_wish(json!({"slug": "wide", "project": "wide", "title": "t", "groups": groups})).await;

    // Readers hammer the API meanwhile, so requests and the worker's loops contend for the pool.
    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..8)
        .map(|_| {
            let (client, url, token) = (app.client.clone(), app.url("/api/v1/wishes/wide"), app.admin_token.clone());
            let (stop, served) = (stop.clone(), served.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(r) = client.get(&url).bearer_auth(&token).send().await {
                        if r.status().is_success() {
                            served.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    let most = Arc::new(AtomicUsize::new(0));
    let watching = {
        let (most, stop, node_id) = (most.clone(), stop.clone(), node_id.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let now = connections_of(&mut counter, &node_id).await;
                most.fetch_max(now as usize, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    app.post_ok("/api/v1/wishes/wide/plan", json!({})).await;

    let done =
        wait_for_wish(&app, "wide", "the node finishes the wish under load", |w| w["status"] == "completed").await;
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.await.expect("reader");
    }
    watching.await.expect("counter");
    assert!(done["groups"].as_array().unwrap().iter().all(|g| g["status"] == "done"), "{done}");
    assert_eq!(git(&repo, &["rev-list", "--merges", "--count", "main..wish/wide"]).trim(), "8");
    let most = most.load(Ordering::Relaxed);
    assert!(most >= 2, "the count saw the node's connections (the listener and a pooled one): {most}");
    assert!(
        most <= switchyard::db::NODE_CONNECTIONS as usize,
        "the node held {most} connections at once, more than its {}",
        switchyard::db::NODE_CONNECTIONS
    );
    assert!(served.load(Ordering::Relaxed) > 0, "the API answered meanwhile");
}

/// A node with a main pool of ONE connection still runs a wish and serves the dashboard and the
/// API meanwhile, one statement at a time: nothing it does holds a connection while it waits for
/// a second, which would wait past the pool's 3 s and answer 503 (the `LISTEN` took the pool's
/// only connection for good; the wish page and the usage report held one while they took
/// another). The suite as a whole finds others with `SWITCHYARD_TEST_POOL_CONNECTIONS=1`.
#[tokio::test(flavor = "multi_thread")]
async fn a_node_with_a_pool_of_one_runs_a_wish_and_serves_the_dashboard_meanwhile() {
    let fakes = Fakes::new();
    let app = TestApp::builder()
        .providers(&fakes.providers())
        .worker(|w| w.conductor = true)
        .pool_connections(1)
        .spawn()
        .await;
    let (_, repo) = project(&app, "one", json!({"review": "none", "max_agents": 2})).await;
    let groups = json!([{"key": "a", "title": "A"}, {"key": "b", "title": "B"}]);
    app.create_wish(json!({"slug": "one", "project": "one", "title": "t", "groups": groups})).await;
    app.post_ok("/api/v1/wishes/one/plan", json!({})).await;
    let dashboard = crate::dashboard::Dashboard::login(&app).await;
    let read_all = || async {
        for path in ["/", "/wishes/one", "/agents"] {
            let (status, body) = dashboard.get(path).await;
            assert_eq!(status, 200, "{path} on a pool of one: {body}");
        }
        for path in ["/api/v1/usage?wish=one", "/api/v1/wishes/one"] {
            let response = app.admin(reqwest::Method::GET, path).send().await.expect("get");
            let status = response.status();
            assert_eq!(status, 200, "{path} on a pool of one: {}", response.text().await.unwrap_or_default());
        }
    };
    read_all().await;

    let done = wait_for_wish(&app, "one", "the wish completes on a pool of one", |w| w["status"] == "completed").await;
    assert!(done["groups"].as_array().unwrap().iter().all(|g| g["status"] == "done"), "{done}");
    assert_eq!(git(&repo, &["rev-list", "--merges", "--count", "main..wish/one"]).trim(), "2");
    read_all().await;
}
