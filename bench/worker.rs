//! `cargo bench --bench worker`: the worker's figures (issue 4), printed, never asserted.
//!
//! Runs the real application with its worker in-process against the PostgreSQL server in
//! `BENCH_DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`; it creates and
//! drops its own database there), on a tmux socket of its own, with `BENCH_AGENTS` (default 100)
//! fake agents: a shell script that shows Claude Code's working screen or its idle screen in turn,
//! for 0.5–3 s each (`BENCH_SHOW_MS=min-max` to change: the naive approach costs the same
//! however busy the agents are, the worker less the quieter they are), and logs the time of each
//! switch. Then, over `BENCH_SECONDS` (default 60):
//! 1. detection latency, p50/p95/max, from a switch to the `agent.state_changed` row that records
//!    it (the row's `created_at`, the start of its transaction): to `working` (the busy marker
//!    appeared) and to `idle` (which waits the detector's settle time on purpose);
//! 2. CPU seconds per minute of the worker's process and the tmux server while it watches them;
//! 3. with the worker stopped (the agents keep running), the tmux server alone: what taking in
//!    the agents' output costs whoever watches, so the cost of watching can be told apart;
//! 4. still with the worker stopped, the naive approach — every pane captured
//!    by a forked `tmux capture-pane` and hashed every 500 ms — and its CPU (the poller with its
//!    children, and the tmux server) over the same length; then the ratio.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;
use switchyard::worker::WorkerConfig;

use common::{cpu_ticks, percentile_ms as percentile, tmux};

#[path = "common/mod.rs"]
mod common;

/// The fake agent: Claude Code's working screen (busy marker) and idle screen in turn, logging
/// `<ns since the epoch> <state>` just before each switch.
const FAKE_AGENT: &str = r#"#!/bin/sh
log="$BENCH_LOG_DIR/$SWITCHYARD_AGENT.log"
seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
n=0
while :; do
    if [ $((n % 2)) -eq 0 ]; then s=working; else s=idle; fi
    echo "$(date +%s%N) $s" >> "$log"
    printf '\033[H\033[2J'
    cat "$BENCH_SCREENS/$s.txt"
    sleep "$(awk -v s="$seed$n" -v lo="$BENCH_SHOW_MIN" -v hi="$BENCH_SHOW_MAX" 'BEGIN { srand(s); printf "%.2f", lo + rand() * (hi - lo) }')"
    n=$((n + 1))
done
"#;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if !common::invoked_by_cargo_bench("worker") {
        return Ok(());
    }
    let seconds = common::env_num("BENCH_SECONDS", 60);
    let agents = common::env_num("BENCH_AGENTS", 100);
    let (show, show_min, show_max) = common::show_ms()?;
    let as_seconds = |ms: u64| format!("{:.3}", ms as f64 / 1000.0);
    let database_url = common::fresh_database(&common::server_url(), "switchyard_bench_worker").await?;
    let data_dir = tempfile::tempdir()?;
    let logs = tempfile::tempdir()?;
    let script = common::fake_agent(data_dir.path(), FAKE_AGENT)?;
    std::fs::write(
        data_dir.path().join("providers.toml"),
        format!(
            "[providers.bench]\ncommand = [{:?}]\nscreen_rules = \"claude\"\n\
             env = {{ BENCH_LOG_DIR = {:?}, BENCH_SCREENS = {:?}, BENCH_SHOW_MIN = {:?}, BENCH_SHOW_MAX = {:?} }}\n",
            script.display().to_string(),
            logs.path().display().to_string(),
            common::SCREENS,
            as_seconds(show_min),
            as_seconds(show_max),
        ),
    )?;
    let socket = format!("sy-bench-worker-{}", std::process::id());
    let app = common::start(
        &database_url,
        data_dir.path(),
        WorkerConfig { tmux_socket: socket.clone(), ..WorkerConfig::default() },
    )
    .await?;
    let pool = app.pool.clone();
    let client = reqwest::Client::new();

    let repo = common::git_repo()?;
    app.post(&client, "/projects", json!({"slug": "bench", "name": "Bench", "repo_path": repo.path()})).await?;
    println!("# Switchyard worker benchmark: {agents} fake agents, each screen shown {show} ms, {seconds} s per phase");
    let started = Instant::now();
    for i in 0..agents {
        app.post(
            &client,
            "/agents",
            json!({"name": format!("a{i:03}"), "project": "bench", "kind": "worker",
            "role": "engineer", "provider": "bench", "clone": "none"}),
        )
        .await?;
    }
    common::wait_for_panes(&pool, started, Duration::from_secs(120)).await?;
    println!("all {agents} agents have panes after {:.1} s", started.elapsed().as_secs_f64());
    tokio::time::sleep(Duration::from_secs(5)).await; // let the first screens settle

    let tmux_pid: u32 = tmux(&socket, &["display-message", "-p", "#{pid}"])?.trim().parse()?;
    let phase_start = chrono::Utc::now();
    let (self_before, tmux_before) = (cpu_ticks("self", false)?, cpu_ticks(&tmux_pid.to_string(), false)?);
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let (self_after, tmux_after) = (cpu_ticks("self", false)?, cpu_ticks(&tmux_pid.to_string(), false)?);
    let phase_end = chrono::Utc::now();
    let worker_cpu = per_minute(self_after - self_before, seconds);
    let tmux_cpu = per_minute(tmux_after - tmux_before, seconds);

    let events: Vec<(String, String, Time)> = sqlx::query_as(
        "SELECT subject, payload->>'to', created_at FROM events
         WHERE type = 'agent.state_changed' AND created_at BETWEEN $1 AND $2 ORDER BY id",
    )
    .bind(phase_start)
    .bind(phase_end + chrono::Duration::seconds(5))
    .fetch_all(&pool)
    .await?;
    let switches = read_logs(logs.path())?;
    for state in ["working", "idle"] {
        let (mut latencies, missed) = latencies(&switches, &events, state, phase_start, phase_end);
        latencies.sort_unstable();
        println!(
            "detection latency to {state:7}: n = {:5}  p50 = {:6.1} ms  p95 = {:6.1} ms  max = {:6.1} ms  \
             (switches not seen before the next one: {missed})",
            latencies.len(),
            percentile(&latencies, 0.50),
            percentile(&latencies, 0.95),
            percentile(&latencies, 1.0),
        );
    }
    println!(
        "worker: {worker_cpu:.2} CPU s/min (process) + {tmux_cpu:.2} (tmux server) = {:.2} CPU s/min",
        worker_cpu + tmux_cpu
    );

    // The naive approach, with the worker stopped and the agents still running.
    app.stop().await?;
    let session_panes = tmux(&socket, &["list-panes", "-a", "-F", "#{window_name} #{pane_id}"])?;
    let panes: Vec<String> = session_panes
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(name, _)| name.starts_with('a'))
        .map(|(_, pane)| pane.to_owned())
        .collect();
    // What tmux costs with nobody watching: taking in the agents' output, which every approach
    // pays; the rest of each figure is the cost of watching.
    let idle_before = cpu_ticks(&tmux_pid.to_string(), false)?;
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let unwatched = per_minute(cpu_ticks(&tmux_pid.to_string(), false)? - idle_before, seconds);
    println!("unwatched (the agents alone): {unwatched:.2} CPU s/min (tmux server)");

    let (self_before, tmux_before) = (cpu_ticks("self", true)?, cpu_ticks(&tmux_pid.to_string(), false)?);
    let socket_for_poller = socket.clone();
    let changes = tokio::task::spawn_blocking(move || naive_poll(&socket_for_poller, &panes, seconds)).await??;
    let (self_after, tmux_after) = (cpu_ticks("self", true)?, cpu_ticks(&tmux_pid.to_string(), false)?);
    let naive_cpu = per_minute(self_after - self_before, seconds);
    let naive_tmux = per_minute(tmux_after - tmux_before, seconds);
    println!(
        "naive (capture-pane + hash every 500 ms): {naive_cpu:.2} CPU s/min (poller and its forks) + \
         {naive_tmux:.2} (tmux server) = {:.2} CPU s/min ({changes} changed screens seen)",
        naive_cpu + naive_tmux
    );
    let (ours, naive) = (worker_cpu + tmux_cpu, naive_cpu + naive_tmux);
    println!("ratio naive / worker: {:.1}", naive / ours.max(0.001));
    println!(
        "cost of watching (minus the unwatched tmux server): worker {:.2}, naive {:.2} CPU s/min; ratio {:.1}",
        ours - unwatched,
        naive - unwatched,
        (naive - unwatched) / (ours - unwatched).max(0.001)
    );
    let _ = tmux(&socket, &["kill-server"]);
    common::drop_database(&common::server_url(), "switchyard_bench_worker").await
}

/// Every pane captured by a forked `tmux capture-pane` and hashed, every 500 ms, for `seconds`;
/// returns how many captures differed from the pane's previous one.
fn naive_poll(socket: &str, panes: &[String], seconds: u64) -> anyhow::Result<u64> {
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut last: HashMap<&str, u64> = HashMap::new();
    let mut changes = 0;
    while Instant::now() < end {
        let tick = Instant::now();
        for pane in panes {
            let out = Command::new("tmux").args(["-L", socket, "capture-pane", "-p", "-t", pane]).output()?;
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            out.stdout.hash(&mut hasher);
            let hash = hasher.finish();
            if last.insert(pane, hash).is_some_and(|previous| previous != hash) {
                changes += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(500).saturating_sub(tick.elapsed()));
    }
    Ok(changes)
}

type Time = chrono::DateTime<chrono::Utc>;

/// Per agent (`agent:<name>`), its switches: (time, state).
type Switches = HashMap<String, Vec<(Time, String)>>;

fn read_logs(dir: &Path) -> anyhow::Result<Switches> {
    let mut all = HashMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
        let mut switches = Vec::new();
        for line in std::fs::read_to_string(&path)?.lines() {
            let Some((ns, state)) = line.split_once(' ') else { continue };
            let Ok(ns) = ns.parse::<i64>() else { continue };
            switches.push((chrono::DateTime::from_timestamp_nanos(ns), state.to_owned()));
        }
        all.insert(format!("agent:{name}"), switches);
    }
    Ok(all)
}

/// For each switch to `state` inside the phase: the time until the first event recording that
/// state for that agent, if one came before the agent's next switch.
fn latencies(
    switches: &Switches,
    events: &[(String, String, Time)],
    state: &str,
    from: Time,
    to: Time,
) -> (Vec<u64>, usize) {
    let mut latencies = Vec::new();
    let mut missed = 0;
    for (subject, list) in switches {
        for (i, (at, switched_to)) in list.iter().enumerate() {
            if switched_to != state || *at < from || *at > to {
                continue;
            }
            let next = list.get(i + 1).map(|(t, _)| *t);
            let seen = events
                .iter()
                .filter(|(s, st, t)| s == subject && st == state && t >= at && next.is_none_or(|n| *t < n))
                .map(|(_, _, t)| *t)
                .min();
            match seen {
                Some(t) => latencies.push((t - *at).num_microseconds().unwrap_or(0).max(0) as u64),
                None => missed += 1,
            }
        }
    }
    (latencies, missed)
}

fn per_minute(ticks: u64, seconds: u64) -> f64 {
    // CLK_TCK is 100 on Linux.
    ticks as f64 / 100.0 * 60.0 / seconds as f64
}
