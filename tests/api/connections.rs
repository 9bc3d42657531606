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
