//! `cargo bench --bench webhooks`: issue 6's figures, printed, never asserted — events/s fanned
//! out to 10 subscriber endpoints on loopback, and the latency of an API write
//! (`POST /api/v1/tasks`) with 10 subscriptions versus none.
//!
//! Runs the real application against the PostgreSQL server in `BENCH_DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`; it creates and drops its own database there).
//! `BENCH_EVENTS` (default 2000) events are fanned out; `BENCH_WRITES` (default 300) writes are
//! timed in each case: with the 10 subscriptions disabled and enabled (their receivers holding
//! the first deliveries, so the sender is idle) in rounds taken in turn, then, once that backlog
//! is delivered, with each write's deliveries flowing beside the next writes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use switchyard::webhooks::ssrf::AllowList;
use switchyard::webhooks::WebhookSettings;
use switchyard::worker::WorkerConfig;

#[path = "common/mod.rs"]
mod common;

const ENDPOINTS: usize = 10;
/// Rounds of writes without and with the subscriptions, in turn.
const ROUNDS: usize = 6;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if !common::invoked_by_cargo_bench("webhooks") {
        return Ok(());
    }
    let events = common::env_num("BENCH_EVENTS", 2000) as usize;
    let writes = common::env_num("BENCH_WRITES", 300) as usize;
    let database_url = common::fresh_database(&common::server_url(), "switchyard_bench_webhooks").await?;
    let data_dir = tempfile::tempdir()?;
    let webhooks = WebhookSettings {
        allowed_hosts: AllowList::parse("loopback").map_err(anyhow::Error::msg)?,
        ..Default::default()
    };
    let worker =
        WorkerConfig { tmux_socket: format!("sy-bench-webhooks-{}", std::process::id()), ..WorkerConfig::default() };
    let app = common::start_with(&database_url, data_dir.path(), worker, webhooks).await?;
    let (api, token, pool) = (app.api(), app.token.clone(), app.pool.clone());
    let client = reqwest::Client::new();
    let repo = common::git_repo()?;
    let response = client
        .post(format!("{api}/projects"))
        .bearer_auth(&token)
        .json(&json!({"slug": "bench", "name": "Bench", "repo_path": repo.path()}))
        .send()
        .await?;
    anyhow::ensure!(response.status() == 201, "creating the project: {}", response.status());

    let write = |n: usize| {
        let client = client.clone();
        let (api, token) = (api.clone(), token.clone());
        async move {
            let mut latencies = Vec::with_capacity(n);
            for i in 0..n {
                let started = Instant::now();
                let response = client
                    .post(format!("{api}/tasks"))
                    .bearer_auth(&token)
                    .json(&json!({"project": "bench", "title": format!("task {i}")}))
                    .send()
                    .await?;
                anyhow::ensure!(response.status() == 201, "write failed: {}", response.status());
                latencies.push(started.elapsed());
            }
            anyhow::Ok(latencies)
        }
    };

    write(30).await?; // warm-up

    let received = Arc::new(AtomicUsize::new(0));
    // The endpoints hold their first requests unanswered while the next writes are timed, so
    // those measure the request path alone (outbox rows), not the sender competing for the CPU.
    // Held requests wait on a channel, not by polling: the receivers' own wake-ups must not
    // take the CPU from the writes being timed.
    let (hold, held) = tokio::sync::watch::channel(true);
    let mut subscriptions = Vec::new();
    for _ in 0..ENDPOINTS {
        let url = receiver(received.clone(), held.clone()).await?;
        let response = client
            .post(format!("{api}/webhooks"))
            .bearer_auth(&token)
            .json(&json!({"url": url, "events": ["task.*"]}))
            .send()
            .await?;
        anyhow::ensure!(response.status() == 201, "subscribe failed: {}", response.status());
        let body: serde_json::Value = response.json().await?;
        subscriptions.push(body["id"].as_str().unwrap_or_default().to_owned());
    }
    let enable_all = |enabled: bool| {
        let (client, api, token, subscriptions) = (client.clone(), api.clone(), token.clone(), subscriptions.clone());
        async move {
            for id in subscriptions {
                let response = client
                    .patch(format!("{api}/webhooks/{id}"))
                    .bearer_auth(&token)
                    .json(&json!({"enabled": enabled}))
                    .send()
                    .await?;
                anyhow::ensure!(response.status() == 200, "patch failed: {}", response.status());
            }
            anyhow::Ok(())
        }
    };
    // The two cases take turns, so neither gets the warmer cache or the smaller tables.
    let (mut without, mut with_held) = (Vec::new(), Vec::new());
    let per_round = writes.div_ceil(ROUNDS);
    for _ in 0..ROUNDS {
        enable_all(false).await?;
        without.extend(write(per_round).await?);
        enable_all(true).await?;
        with_held.extend(write(per_round).await?);
    }
    // The held backlog is delivered first: the writes below are timed beside their own
    // deliveries, as in steady operation, not beside a burst of thousands owed from before.
    hold.send_replace(false);
    let backlog = per_round * ROUNDS * ENDPOINTS;
    wait_for(&received, backlog, Duration::from_secs(300)).await?;
    let with = write(writes).await?;
    // Deliveries that arrived while these writes ran: they did flow beside them, not after.
    let beside = received.load(Ordering::SeqCst) - backlog;
    wait_for(&received, backlog + writes * ENDPOINTS, Duration::from_secs(300)).await?;

    // Fan-out: `events` task events committed at once, then timed until every endpoint has each.
    received.store(0, Ordering::SeqCst);
    let started = Instant::now();
    let mut tx = pool.begin().await?;
    for i in 0..events {
        switchyard::db::events::record(&mut tx, "task.updated", "bench", json!({"project": "bench", "n": i})).await?;
    }
    tx.commit().await?;
    let committed = started.elapsed();
    wait_for(&received, events * ENDPOINTS, Duration::from_secs(600)).await?;
    let elapsed = started.elapsed();

    println!("webhook fan-out: {events} events x {ENDPOINTS} endpoints on loopback");
    println!(
        "  outbox write (each event and its outbox row for {ENDPOINTS} subscriptions): {:.0} events/s",
        events as f64 / committed.as_secs_f64()
    );
    println!(
        "  delivered: {:.0} events/s to all {ENDPOINTS} endpoints = {:.0} deliveries/s ({:.2} s total)",
        events as f64 / elapsed.as_secs_f64(),
        (events * ENDPOINTS) as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    println!("API write latency, POST /api/v1/tasks, {} sequential writes each:", without.len());
    println!("  no subscriptions (disabled):  {}", summary(without));
    println!("  {ENDPOINTS} subscriptions, sender idle:  {}", summary(with_held));
    println!("  (the two above in {ROUNDS} rounds taken in turn)");
    println!("  {ENDPOINTS} subscriptions, deliveries flowing:  {}", summary(with));
    println!("  (while those writes ran, {beside} of their {} deliveries arrived)", writes * ENDPOINTS);
    app.stop().await?;
    common::drop_database(&common::server_url(), "switchyard_bench_webhooks").await
}

/// A loopback endpoint answering 204 (once `hold` is off) and counting deliveries. The
/// endpoints stand for other machines: they run on a thread of their own at a low priority, so
/// they queue behind neither the API's request handlers nor the writes being timed.
async fn receiver(count: Arc<AtomicUsize>, held: tokio::sync::watch::Receiver<bool>) -> anyhow::Result<String> {
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let (count, mut held) = (count.clone(), held.clone());
            async move {
                let _ = held.wait_for(|held| !held).await;
                count.fetch_add(1, Ordering::Relaxed);
                axum::http::StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    std::thread::Builder::new().name("bench-receiver".into()).spawn(move || {
        // SAFETY: setpriority only reads its integer arguments; `who` 0 is the calling thread.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, 19) };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
            let _ = axum::serve(listener, app).await;
        });
    })?;
    Ok(url)
}

async fn wait_for(count: &AtomicUsize, want: usize, limit: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    while count.load(Ordering::SeqCst) < want {
        anyhow::ensure!(Instant::now() < deadline, "only {} of {want} delivered", count.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

fn summary(mut latencies: Vec<Duration>) -> String {
    latencies.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mean = latencies.iter().map(|d| ms(*d)).sum::<f64>() / latencies.len() as f64;
    let at = |q: f64| ms(latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)]);
    format!("mean {mean:.2} ms, p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms", at(0.5), at(0.95), at(0.99))
}
