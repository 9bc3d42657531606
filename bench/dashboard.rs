//! `cargo bench --bench dashboard`: the dashboard's figures (issue 7), printed, never asserted.
//!
//! Runs the real application in-process against the PostgreSQL server in `BENCH_DATABASE_URL`
//! (default `postgres://postgres@127.0.0.1:5432/postgres`; it creates its own database there),
//! fills it with one project, a board of 1,000 tasks over four columns, 20 executing wishes of
//! 5 groups, 50 agents and the events all that wrote, then measures:
//! 1. the time to serve the overview and the 1,000-task board (p50, p99 over `BENCH_REQUESTS`
//!    sequential requests each, default 200, after a warm-up), on loopback with keep-alive, so
//!    it is the server's time plus a loopback round trip;
//! 2. the bytes a first visit transfers with a browser's `Accept-Encoding`: the login page, the
//!    overview after logging in, and every static file they load (compressed bodies plus
//!    response headers).

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};
use switchyard::worker::WorkerConfig;

#[path = "common/mod.rs"]
mod common;

const TASKS: usize = 1000;
const WISHES: usize = 20;
const AGENTS: usize = 50;

fn main() -> anyhow::Result<()> {
    if !common::invoked_by_cargo_bench("dashboard") {
        return Ok(());
    }
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let url = common::fresh_database(&common::server_url(), "switchyard_bench_dashboard").await?;
    let data_dir = tempfile::tempdir()?;
    let repo = common::git_repo()?;
    // The bench walks its wishes by hand: no conductor or merge queue moves them meanwhile.
    let worker = WorkerConfig {
        enabled: false,
        conductor: false,
        merge_queue: false,
        tmux_socket: format!("sy-bench-dashboard-{}", std::process::id()),
        ..WorkerConfig::default()
    };
    let app = common::start(&url, data_dir.path(), worker).await?;
    let api = Api { client: reqwest::Client::new(), base: app.api(), token: app.token.clone() };
    let board = seed(&api, repo.path()).await?;
    let site = format!("http://{}", app.addr);
    let (client, cookie) = app.login().await?;

    let requests = common::env_num("BENCH_REQUESTS", 200) as usize;
    println!("dashboard bench: {TASKS} tasks on one board, {WISHES} wishes, {AGENTS} agents; {requests} requests each");
    for (name, path) in [("overview", "/".to_owned()), ("board, 1,000 tasks", format!("/boards/{board}"))] {
        let (p50, p99, bytes) = timings(&client, &format!("{site}{path}"), &cookie, requests).await?;
        println!("  {name:<20} p50 {:>7.2} ms  p99 {:>7.2} ms  ({bytes} bytes of HTML)", ms(p50), ms(p99));
    }
    first_visit(&client, &site, &app.token).await?;
    app.stop().await?;
    common::drop_database(&common::server_url(), "switchyard_bench_dashboard").await
}

struct Api {
    client: reqwest::Client,
    base: String,
    token: String,
}

impl Api {
    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let response =
            self.client.post(format!("{}{path}", self.base)).bearer_auth(&self.token).json(&body).send().await?;
        anyhow::ensure!(response.status().is_success(), "{path}: {}", response.text().await?);
        Ok(response.json().await?)
    }
}

/// The project, board, tasks, wishes and agents; returns the board's id.
async fn seed(api: &Api, repo: &std::path::Path) -> anyhow::Result<String> {
    api.post("/projects", json!({"slug": "bench", "name": "Bench", "repo_path": repo})).await?;
    let columns =
        json!([{"name": "Backlog"}, {"name": "Doing"}, {"name": "Review", "gate": "human"}, {"name": "Done"}]);
    let board = api.post("/projects/bench/boards", json!({"name": "Big", "columns": columns})).await?;
    let board_id = board["id"].as_str().unwrap_or_default().to_owned();
    let column_ids: Vec<String> =
        board["columns"].as_array().into_iter().flatten().filter_map(|c| c["id"].as_str().map(str::to_owned)).collect();
    let tasks = futures::stream::iter(0..TASKS)
        .map(|i| {
            let body = json!({"project": "bench", "title": format!("Task {i}: make the thing number {i} work"),
                "board_id": board_id, "column_id": column_ids[i % column_ids.len()],
                "assignee": if i % 3 == 0 { "human" } else { "worker-1" }});
            api.post("/tasks", body)
        })
        .buffer_unordered(8);
    let created: Vec<anyhow::Result<Value>> = tasks.collect().await;
    created.into_iter().collect::<anyhow::Result<Vec<_>>>()?;
    for w in 0..WISHES {
        let slug = format!("wish-{w}");
        let groups: Vec<Value> = (0..5)
            .map(|g| {
                let depends_on = if g == 0 { vec![] } else { vec![format!("g{}", g - 1)] };
                json!({"key": format!("g{g}"), "title": format!("Group {g}"), "depends_on": depends_on})
            })
            .collect();
        api.post("/wishes", json!({"slug": slug, "project": "bench", "title": format!("Wish {w}"), "groups": groups}))
            .await?;
        for action in ["plan", "queue", "start"] {
            api.post(&format!("/wishes/{slug}/{action}"), json!({})).await?;
        }
    }
    for a in 0..AGENTS {
        let body = json!({"name": format!("agent-{a}"), "project": "bench", "kind": "worker", "role": "engineer",
            "provider": "shell", "task": format!("Do part {a}")});
        api.post("/agents", body).await?;
    }
    Ok(board_id)
}

/// p50 and p99 of `n` sequential GETs (after 10 to warm up), and the page's size.
async fn timings(
    client: &reqwest::Client,
    url: &str,
    cookie: &str,
    n: usize,
) -> anyhow::Result<(Duration, Duration, usize)> {
    let mut bytes = 0;
    let mut times = Vec::with_capacity(n);
    for i in 0..n + 10 {
        let started = Instant::now();
        let response = client.get(url).header("cookie", cookie).send().await?;
        anyhow::ensure!(response.status().is_success(), "{url}: {}", response.status());
        bytes = response.bytes().await?.len();
        if i >= 10 {
            times.push(started.elapsed());
        }
    }
    times.sort();
    Ok((percentile(&times, 50), percentile(&times, 99), bytes))
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One response as it crossed the wire: its label, body bytes, header bytes, encoding.
async fn measured(label: String, response: reqwest::Response) -> anyhow::Result<(String, usize, usize, String)> {
    let headers: usize = response.headers().iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum();
    let encoding =
        response.headers().get("content-encoding").and_then(|v| v.to_str().ok()).unwrap_or("identity").to_owned();
    let body = response.bytes().await?.len();
    Ok((label, body, headers, encoding))
}

/// The static files a page loads.
fn static_files(html: &str, into: &mut Vec<String>) {
    for marker in ["href=\"/static/", "src=\"/static/"] {
        for (i, _) in html.match_indices(marker) {
            let start = i + marker.len() - "/static/".len();
            let path: String = html[start..].chars().take_while(|c| *c != '"').collect();
            if !into.contains(&path) {
                into.push(path);
            }
        }
    }
}

/// The login page, the overview after logging in, and the static files both pages name, as a
/// browser fetches them on a first visit (nothing cached), compressed as it would accept.
async fn first_visit(client: &reqwest::Client, site: &str, token: &str) -> anyhow::Result<()> {
    const ACCEPT: &str = "gzip, deflate, br, zstd";
    let get = |path: &str, cookie: &str| {
        client.get(format!("{site}{path}")).header("accept-encoding", ACCEPT).header("cookie", cookie.to_owned()).send()
    };
    let mut parts = vec![measured("GET /login".into(), get("/login", "").await?).await?];
    let login = client.post(format!("{site}/login")).header("accept-encoding", ACCEPT).form(&[("token", token)]);
    let login = login.send().await?;
    let cookie = login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or_default()
        .to_owned();
    parts.push(measured("POST /login (303 to /)".into(), login).await?);
    parts.push(measured("GET / (overview)".into(), get("/", &cookie).await?).await?);
    // The same pages uncompressed, only to read which files they load.
    let mut assets = Vec::new();
    for (path, cookie) in [("/login", ""), ("/", cookie.as_str())] {
        let html = client.get(format!("{site}{path}")).header("cookie", cookie.to_owned()).send().await?.text().await?;
        static_files(&html, &mut assets);
    }
    for path in &assets {
        parts.push(measured(format!("GET {path}"), get(path, "").await?).await?);
    }
    println!("  first visit, compressed as a browser accepts ({ACCEPT}):");
    let mut total = 0;
    for (label, body, headers, encoding) in parts {
        total += body + headers;
        println!("    {label:<44} {body:>7} B body ({encoding}) + {headers:>4} B headers");
    }
    println!("    total {total:>47} B ({:.1} KB; target < 150 KB)", total as f64 / 1024.0);
    Ok(())
}
