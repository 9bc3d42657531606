//! `cargo bench --bench load`: "load held" (issue 19), printed, never asserted.
//!
//! Runs the real application against the PostgreSQL server in `BENCH_DATABASE_URL`
//! (default `postgres://postgres@127.0.0.1:5432/postgres`; it creates and drops its own database
//! there) with `BENCH_AGENTS` (default 500) fake agents — a shell script showing Claude Code's
//! working and idle screens in turn, 0.5–3 s each (`BENCH_SHOW_MS=min-max`) — on one node, then on
//! two nodes, each a process of its own, sharing the database (`BENCH_NODES=1` or `2` runs only that one), at the agents'
//! default CPU niceness (`BENCH_NICE`, default Switchyard's own default, sets their provider's `nice`). With two, both
//! workers claim from the same queue (`SKIP LOCKED`; an agent cannot be pinned to a node, only a
//! team with a clone of its own), and the split each claimed is printed.
//!
//! Once every agent has a pane, for `BENCH_SECONDS` (default 30):
//! - `BENCH_SSE` (default 50) clients follow `GET /api/v1/events/stream`: lag is the time a client
//!   parsed an event minus the event's `created_at` (the start of the transaction that wrote it);
//! - one client fetches the dashboard overview in a loop, logged in: p50 and p99;
//! - each node's CPU (`/proc/<pid>/stat` utime + stime) over the window, per agent, and the tmux
//!   servers' apart; each node's RSS (`VmRSS`, and the peak `VmHWM`) at its end. The first node
//!   runs in this process, a second one in a child process (this bench run again with
//!   `BENCH_LOAD_NODE` set); the clients above run in a child process of their own (with
//!   `BENCH_LOAD_CLIENTS` set), so the figures are the servers', and the clients' own are
//!   printed apart.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard::worker::WorkerConfig;

use common::{cpu_ticks, percentile_ms as percentile, tmux};

#[path = "common/mod.rs"]
mod common;

const DATABASE: &str = "switchyard_bench_load";

/// The fake agent: the working screen, then the idle one, each for a pseudo-random 0.5–3 s. The
/// times come from shell arithmetic (an LCG seeded once) so that 500 of them fork little
/// besides `cat` and `sleep`.
const FAKE_AGENT: &str = r#"#!/bin/sh
seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
span=$((BENCH_SHOW_MAX_MS - BENCH_SHOW_MIN_MS + 1))
while :; do
    for s in working idle; do
        printf '\033[H\033[2J'
        cat "$BENCH_SCREENS/$s.txt"
        seed=$(((seed * 1103515245 + 12345) % 2147483648))
        ms=$((BENCH_SHOW_MIN_MS + seed % span))
        sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
    done
done
"#;

fn main() -> anyhow::Result<()> {
    if !common::invoked_by_cargo_bench("load") {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    if let Some(node) = from_env::<NodeSpec>(NodeSpec::VAR)? {
        return runtime.block_on(node.serve());
    }
    match from_env::<Clients>(Clients::VAR)? {
        Some(clients) => runtime.block_on(clients.run()),
        None => runtime.block_on(run()),
    }
}

struct Options {
    agents: u64,
    seconds: u64,
    sse: u64,
    show_min: u64,
    show_max: u64,
}

async fn run() -> anyhow::Result<()> {
    let (show, show_min, show_max) = common::show_ms()?;
    let options = Options {
        agents: common::env_num("BENCH_AGENTS", 500),
        seconds: common::env_num("BENCH_SECONDS", 30),
        sse: common::env_num("BENCH_SSE", 50),
        show_min,
        show_max,
    };
    let nodes: Vec<u64> = match std::env::var("BENCH_NODES").ok().as_deref() {
        None | Some("") => vec![1, 2],
        Some("1") => vec![1],
        Some("2") => vec![2],
        Some(other) => anyhow::bail!("BENCH_NODES must be 1 or 2, not {other}"),
    };
    println!(
        "# Switchyard load bench: {} fake agents (screens shown {show} ms), {} SSE clients, {} s window",
        options.agents, options.sse, options.seconds
    );
    for n in nodes {
        let result = one_run(&options, n).await;
        common::drop_database(&common::server_url(), DATABASE).await?;
        result?;
    }
    Ok(())
}

/// A node of the run: the application, its tmux server and its data directory.
struct Node {
    app: common::Running,
    socket: Socket,
    _data_dir: tempfile::TempDir,
}

/// What a node needs to start, in this process or (as `BENCH_LOAD_NODE`, JSON) in a child.
#[derive(serde::Serialize, serde::Deserialize)]
struct NodeSpec {
    database_url: String,
    socket: String,
    show_min: u64,
    show_max: u64,
}

impl NodeSpec {
    const VAR: &str = "BENCH_LOAD_NODE";

    /// As the child: starts the node, says `ready`, and serves until its input closes.
    async fn serve(self) -> anyhow::Result<()> {
        let node = start_node(&self).await?;
        println!("ready");
        tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink())).await??;
        node.app.stop().await
    }

    /// This bench again, as the node's process, once it is ready.
    fn spawn(&self) -> anyhow::Result<std::process::Child> {
        let mut child = this_bench_again(Self::VAR, self)?
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        let stdout = child.stdout.as_mut().ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line)?;
        anyhow::ensure!(line.trim() == "ready", "the second node did not start: {line:?}");
        Ok(child)
    }
}

/// A tmux socket whose server (the agents' panes) is killed when this is dropped, also when a
/// run fails half-way.
struct Socket(String);

impl Drop for Socket {
    fn drop(&mut self) {
        // With 500 panes `kill-server` may give up ("server exited unexpectedly") and leave the
        // server and its agents running, to load the next run: the server is killed by its pid.
        let pid = tmux(&self.0, &["display-message", "-p", "#{pid}"]);
        let _ = tmux(&self.0, &["kill-server"]);
        if let Ok(pid) = pid {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", pid.trim()])
                .stderr(std::process::Stdio::null())
                .status();
        }
    }
}

async fn start_node(spec: &NodeSpec) -> anyhow::Result<Node> {
    let data_dir = tempfile::tempdir()?;
    let script = common::fake_agent(data_dir.path(), FAKE_AGENT)?;
    std::fs::write(
        data_dir.path().join("providers.toml"),
        format!(
            "[providers.bench]\ncommand = [{:?}]\nscreen_rules = \"claude\"\n\
             env = {{ BENCH_SCREENS = {:?}, BENCH_SHOW_MIN_MS = \"{}\", BENCH_SHOW_MAX_MS = \"{}\" }}\nnice = {}\n",
            script.display().to_string(),
            common::SCREENS,
            spec.show_min,
            spec.show_max,
            common::env_num("BENCH_NICE", u64::from(switchyard::providers::AGENT_NICE)),
        ),
    )?;
    let worker = WorkerConfig { tmux_socket: spec.socket.clone(), ..WorkerConfig::default() };
    let app = common::start(&spec.database_url, data_dir.path(), worker).await?;
    Ok(Node { app, socket: Socket(spec.socket.clone()), _data_dir: data_dir })
}

async fn one_run(options: &Options, node_count: u64) -> anyhow::Result<()> {
    let database_url = common::fresh_database(&common::server_url(), DATABASE).await?;
    let spec = |index: u64| NodeSpec {
        database_url: database_url.clone(),
        socket: format!("sy-bench-load-{}-{index}", std::process::id()),
        show_min: options.show_min,
        show_max: options.show_max,
    };
    let node = start_node(&spec(0)).await?;
    // The second node in a process of its own; its tmux server is killed with this socket.
    let mut others = Vec::new();
    for index in 1..node_count {
        let spec = spec(index);
        others.push((spec.spawn()?, Socket(spec.socket)));
    }
    let app = &node.app;
    let pool = app.pool.clone();
    let client = reqwest::Client::new();
    let repo = common::git_repo()?;
    app.post(&client, "/projects", json!({"slug": "bench", "name": "Bench", "repo_path": repo.path()})).await?;
    println!("## {node_count} node(s), {} agents", options.agents);
    let started = Instant::now();
    for i in 0..options.agents {
        let body = json!({"name": format!("a{i:03}"), "project": "bench", "kind": "worker",
            "role": "engineer", "provider": "bench", "clone": "none"});
        app.post(&client, "/agents", body).await?;
    }
    let registered = started.elapsed();
    common::wait_for_panes(&pool, started, Duration::from_secs(600)).await?;
    println!(
        "registered in {:.1} s; all have panes after {:.1} s",
        registered.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    if node_count > 1 {
        let split: Vec<(String, i64)> =
            sqlx::query_as("SELECT node_id, count(*) FROM agents GROUP BY node_id ORDER BY node_id")
                .fetch_all(&pool)
                .await?;
        let split: Vec<String> = split.iter().map(|(node, n)| format!("{n} on {node}")).collect();
        println!("split (both workers claim): {}", split.join(", "));
    }
    tokio::time::sleep(Duration::from_secs(3)).await; // let the first screens settle

    let last_event: i64 = sqlx::query_scalar("SELECT coalesce(max(id), 0) FROM events").fetch_one(&pool).await?;
    let window_start = chrono::Utc::now();
    let clients = Clients {
        site: format!("http://{}", app.addr),
        token: app.token.clone(),
        after: last_event,
        sse: options.sse,
        seconds: options.seconds,
        since: window_start,
    }
    .spawn()?;
    let sockets = std::iter::once(&node.socket).chain(others.iter().map(|(_, socket)| socket));
    let tmux_pids: Vec<String> = sockets
        .map(|socket| tmux(&socket.0, &["display-message", "-p", "#{pid}"]).map(|p| p.trim().to_owned()))
        .collect::<anyhow::Result<_>>()?;
    let node_pids: Vec<String> =
        std::iter::once("self".to_owned()).chain(others.iter().map(|(child, _)| child.id().to_string())).collect();
    let ticks = |pids: &[String]| pids.iter().map(|pid| cpu_ticks(pid, false)).sum::<anyhow::Result<u64>>();
    let (nodes_before, tmux_before) = (ticks(&node_pids)?, ticks(&tmux_pids)?);
    let served_before = overview_served(&client, app).await?;
    let measuring = Instant::now();
    let clients = tokio::task::spawn_blocking(move || clients.wait_with_output()).await??;
    anyhow::ensure!(clients.status.success(), "the clients' process failed: {}", clients.status);
    let report: ClientReport = serde_json::from_slice(&clients.stdout)?;
    let (nodes_after, tmux_after) = (ticks(&node_pids)?, ticks(&tmux_pids)?);
    let served = overview_served(&client, app).await?.since(&served_before);
    let measured = measuring.elapsed().as_secs_f64();
    let rss: Vec<String> = node_pids
        .iter()
        .map(|pid| {
            let (rss, peak) = (status_kb(pid, "VmRSS")?, status_kb(pid, "VmHWM")?);
            Ok(format!("{:.1} MB (peak {:.1} MB)", rss as f64 / 1024.0, peak as f64 / 1024.0))
        })
        .collect::<anyhow::Result<_>>()?;
    // The machine may be shared: its load says how far the figures are the server's own.
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE id > $1 AND created_at >= $2")
        .bind(last_event)
        .bind(window_start)
        .fetch_one(&pool)
        .await?;

    // CPU over the time it was measured, which may overrun the window on a loaded machine.
    let seconds = measured;
    let cpu = (nodes_after - nodes_before) as f64 / 100.0;
    let tmux_cpu = (tmux_after - tmux_before) as f64 / 100.0;
    println!(
        "machine: {} cores, load average {} (1, 5, 15 min) at the window's end",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.join(" ")
    );
    println!(
        "server RSS at the end, each node a process (its server and worker): {}; the clients' process apart: {:.1} MB",
        rss.join(", "),
        report.rss_kb as f64 / 1024.0,
    );
    println!(
        "CPU over the {seconds:.1} s measured: server{} {:.2} CPU s/s = {:.2} ms CPU per agent per second; tmux server(s) {:.2} CPU s/s; \
         clients {:.2} CPU s/s",
        if node_count > 1 { "s" } else { "" },
        cpu / seconds,
        cpu / seconds / options.agents.max(1) as f64 * 1000.0,
        tmux_cpu / seconds,
        report.cpu_ticks as f64 / 100.0 / seconds
    );
    let ClientReport { mut overview, mut lags, dropped, .. } = report;
    overview.sort_unstable();
    println!(
        "overview: n = {}  p50 = {:.1} ms  p99 = {:.1} ms  max = {:.1} ms",
        overview.len(),
        percentile(&overview, 0.50),
        percentile(&overview, 0.99),
        percentile(&overview, 1.0)
    );
    println!(
        "overview as the server timed it (its /metrics, from a request's arrival to its answer): n = {}  p50 ≤ {} ms  p99 ≤ {} ms",
        served.count(),
        served.quantile_ms(0.50),
        served.quantile_ms(0.99),
    );
    lags.sort_unstable();
    println!(
        "SSE lag ({} clients, {dropped} failed; {events} events written in the window, {} received in all): \
         p50 = {:.1} ms  p99 = {:.1} ms  max = {:.1} ms",
        options.sse,
        lags.len(),
        percentile(&lags, 0.50),
        percentile(&lags, 0.99),
        percentile(&lags, 1.0)
    );
    // A child node stops when its input closes; its tmux server is killed with its socket.
    for (mut child, socket) in others {
        drop(child.stdin.take());
        tokio::task::spawn_blocking(move || child.wait()).await??;
        drop(socket);
    }
    node.app.stop().await
}

/// The clients of a run, in a process of their own so that the server's RSS and CPU are measured
/// apart from theirs: `BENCH_SSE` followers of the event stream and one overview loop, for
/// `seconds`. The parent passes them in `BENCH_LOAD_CLIENTS` (JSON); they print a [`ClientReport`].
#[derive(serde::Serialize, serde::Deserialize)]
struct Clients {
    site: String,
    token: String,
    /// The stream starts after this event.
    after: i64,
    sse: u64,
    seconds: u64,
    /// Lag is measured for the events written since.
    since: chrono::DateTime<chrono::Utc>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ClientReport {
    /// Overview times, µs.
    overview: Vec<u64>,
    /// SSE lags, µs.
    lags: Vec<u64>,
    /// SSE clients that failed.
    dropped: u64,
    rss_kb: u64,
    cpu_ticks: u64,
}

impl Clients {
    const VAR: &str = "BENCH_LOAD_CLIENTS";

    /// This bench again, as the clients' process; its output is the report.
    fn spawn(&self) -> anyhow::Result<std::process::Child> {
        Ok(this_bench_again(Self::VAR, self)?.stdout(std::process::Stdio::piped()).spawn()?)
    }

    async fn run(self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(self.seconds);
        let client = reqwest::Client::new();
        let stream_url = format!("{}/api/v1/events/stream?after={}", self.site, self.after);
        let followers: Vec<_> = (0..self.sse)
            .map(|_| tokio::spawn(follow(client.clone(), stream_url.clone(), self.token.clone(), self.since, deadline)))
            .collect();
        let overview = overview_loop(&self.site, &self.token, deadline).await?;
        let mut lags = Vec::new();
        let mut dropped = 0;
        for follower in followers {
            match follower.await? {
                Ok(mut l) => lags.append(&mut l),
                Err(e) => {
                    dropped += 1;
                    eprintln!("an SSE client failed: {e:#}");
                }
            }
        }
        let report = ClientReport {
            overview,
            lags,
            dropped,
            rss_kb: status_kb("self", "VmRSS")?,
            cpu_ticks: cpu_ticks("self", false)?,
        };
        println!("{}", serde_json::to_string(&report)?);
        Ok(())
    }
}

/// Follows the event stream until `deadline`; for each event written since `since`, the time
/// from its `created_at` to its being parsed here, in µs.
async fn follow(
    client: reqwest::Client,
    url: String,
    token: String,
    since: chrono::DateTime<chrono::Utc>,
    deadline: Instant,
) -> anyhow::Result<Vec<u64>> {
    let mut response = client.get(&url).bearer_auth(&token).send().await?;
    anyhow::ensure!(response.status().is_success(), "{url}: {}", response.status());
    let mut lags = Vec::new();
    let mut buffer = String::new();
    loop {
        // A timeout of zero still yields a chunk that is ready: without this check a client
        // behind would drain its backlog past the window.
        if Instant::now() >= deadline {
            return Ok(lags);
        }
        let chunk =
            match tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), response.chunk()).await {
                Err(_) => return Ok(lags), // the window is over
                Ok(chunk) => chunk?,
            };
        let Some(chunk) = chunk else { anyhow::bail!("the stream ended") };
        let received = chrono::Utc::now();
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let message: String = buffer.drain(..end + 2).collect();
            let Some(data) = message.lines().find_map(|l| l.strip_prefix("data:")) else { continue };
            let event: Value = serde_json::from_str(data.trim())?;
            let created = event["created_at"]
                .as_str()
                .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
                .ok_or_else(|| anyhow::anyhow!("an event without created_at: {data}"))?;
            if created >= since {
                lags.push((received - created.to_utc()).num_microseconds().unwrap_or(0).max(0) as u64);
            }
        }
    }
}

/// Logs in, then fetches the overview, one request after another, until `deadline`; the times
/// in µs.
async fn overview_loop(site: &str, token: &str, deadline: Instant) -> anyhow::Result<Vec<u64>> {
    let (client, cookie) = common::login(site, token).await?;
    let mut times = Vec::new();
    while Instant::now() < deadline {
        let started = Instant::now();
        let response = client.get(format!("{site}/")).header("cookie", &cookie).send().await?;
        anyhow::ensure!(response.status().is_success(), "overview: {}", response.status());
        response.bytes().await?;
        times.push(started.elapsed().as_micros() as u64);
    }
    Ok(times)
}

/// The server's latency histogram of the overview (`GET /`): per bucket bound in seconds, the
/// requests answered within it (cumulative, as Prometheus counts them).
struct Histogram(Vec<(f64, u64)>);

impl Histogram {
    /// The requests answered between `before` and this; a bucket `before` lacks (the route had
    /// no request yet) counted from zero.
    fn since(&self, before: &Histogram) -> Histogram {
        let earlier = |le: f64| before.0.iter().find(|(b, _)| *b == le).map_or(0, |(_, n)| *n);
        Histogram(self.0.iter().map(|&(le, n)| (le, n - earlier(le))).collect())
    }

    fn count(&self) -> u64 {
        self.0.last().map_or(0, |&(_, n)| n)
    }

    /// The smallest bucket bound, in ms, that holds quantile `q` of the requests.
    fn quantile_ms(&self, q: f64) -> String {
        let wanted = (self.count() as f64 * q).ceil() as u64;
        match self.0.iter().find(|&&(_, n)| n >= wanted) {
            Some((le, _)) if le.is_finite() => format!("{:.0}", le * 1000.0),
            _ => "∞".into(),
        }
    }
}

/// The overview's latency histogram from the node's `/metrics`.
async fn overview_served(client: &reqwest::Client, app: &common::Running) -> anyhow::Result<Histogram> {
    let text =
        client.get(format!("http://{}/metrics", app.status_addr)).send().await?.error_for_status()?.text().await?;
    let buckets = text
        .lines()
        .filter(|l| l.starts_with("switchyard_http_request_duration_seconds_bucket{"))
        .filter(|l| l.contains(r#"route="/""#) && l.contains(r#"method="GET""#))
        .map(|l| {
            let le = l.split(r#"le=""#).nth(1).and_then(|r| r.split('"').next()).unwrap_or_default();
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse()? };
            let n = l.rsplit(' ').next().unwrap_or_default().parse()?;
            Ok((le, n))
        })
        .collect::<anyhow::Result<Vec<(f64, u64)>>>()?;
    Ok(Histogram(buckets))
}

/// What the parent passed a child of this bench in `var` (JSON); `None` in the parent.
fn from_env<T: serde::de::DeserializeOwned>(var: &str) -> anyhow::Result<Option<T>> {
    match std::env::var(var) {
        Ok(json) => Ok(Some(serde_json::from_str(&json)?)),
        Err(_) => Ok(None),
    }
}

/// This bench again, as a child given `what` in `var`.
fn this_bench_again(var: &str, what: &impl serde::Serialize) -> anyhow::Result<std::process::Command> {
    let mut command = std::process::Command::new(std::env::current_exe()?);
    command.arg("--bench").env(var, serde_json::to_string(what)?);
    Ok(command)
}

/// A `kB` line of `/proc/<pid>/status`.
fn status_kb(pid: &str, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no {field} in /proc/{pid}/status"))
}
