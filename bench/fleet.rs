//! `cargo bench --bench fleet`: a fleet of nodes on one PostgreSQL (issue 42), printed, never
//! asserted. `BENCH_NODES` (default 10) node processes — this binary again, each with its own
//! pools, `LISTEN` and notifier as `switchyard worker` opens them — run the worker's real loops
//! and use cases over `BENCH_AGENTS` (default 200) simulated panes each, for `BENCH_SECONDS`
//! (default 60) after every agent has its pane:
//!
//! - claims (`worker_records::claim`, woken by commits as the fleet's loop is, then the token and
//!   the pane recorded as the spawner does), heartbeats with the settling of silent nodes
//!   (`reconciler::heartbeat_and_settle`), the conductor's loops (`worker::conductor`), the state
//!   file writer and the webhook sender, all as `lib.rs` runs them;
//! - state changes through the watcher's writing half (`watcher::apply` on its kept
//!   connections), `last_activity` touches at the watcher's `ACTIVITY_EVERY`, and the mailbox's
//!   protocol for the messages the bench sends (`due_on_node`, then the attempt, paste, Enter and
//!   delivery records). Only tmux is simulated: a pane is a task that shows `working`, sometimes
//!   a permission prompt, then `idle`, for the times below.
//!
//! The rates come from the real CLIs' runs in the suite (`tests/api/unattended_claude.rs`,
//! `unattended_codex.rs`, `unattended_gemini.rs`: each turn is `working` → `idle`, with a
//! permission prompt in the `ask` policy; a turn of the scripted model takes 2–5 s, a real
//! model's tool round trips stretch it to tens of seconds): a turn of `BENCH_TURN_S` (default 20)
//! seconds on average with a permission prompt in one turn of `BENCH_PERMISSION_EVERY` (default
//! 5), then `BENCH_IDLE_S` (default 10) idle — about 4.4 state changes per agent per minute — and
//! a message to each agent every `BENCH_MESSAGE_EVERY_S` (default 120) on average.
//!
//! Printed: PostgreSQL's commits/s and WAL bytes/s over the run against its TPC-B capacity
//! measured first by `pgbench` (`BENCH_PGBENCH_SECONDS`, default 20, 8 clients; installed with
//! the PostgreSQL client package), p50/p99 of claims, heartbeats and state changes, the event
//! fan-out lag (a state change's event, from its transaction's start to another node's reading
//! of it after its `LISTEN` woke it) p50/p99, and each node's CPU and RSS.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

#[path = "common/mod.rs"]
mod common;
#[path = "fleet/node.rs"]
mod node;
#[path = "fleet/setup.rs"]
mod setup;

/// What a node process reports when it stops: its samples, each `(ms since the epoch, latency ms)`.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Report {
    pub node_id: String,
    pub claims: Vec<(u64, f64)>,
    pub heartbeats: Vec<(u64, f64)>,
    pub changes: Vec<(u64, f64)>,
    pub lags: Vec<(u64, f64)>,
    pub delivered: u64,
    pub errors: u64,
}

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn main() -> anyhow::Result<()> {
    if std::env::var_os(node::NODE).is_some() {
        return node::main();
    }
    if !common::invoked_by_cargo_bench("fleet") {
        return Ok(());
    }
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let nodes = common::env_num("BENCH_NODES", 10) as usize;
    let agents = common::env_num("BENCH_AGENTS", 200) as usize;
    let seconds = common::env_num("BENCH_SECONDS", 60);
    let server = common::server_url();

    let tpcb = tpcb_capacity(&server, common::env_num("BENCH_PGBENCH_SECONDS", 20))?;
    println!("TPC-B capacity (pgbench, 8 clients, scale 8): {tpcb:.0} tps");

    let database_url = common::fresh_database(&server, "switchyard_bench_fleet").await?;
    let setup = setup::Setup::new(&database_url).await?;
    let names = setup.agents(nodes * agents).await?;
    println!("{nodes} nodes × {agents} agents ({} registered)", names.len());

    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for i in 0..nodes {
        let child = Command::new(&exe)
            .env(node::NODE, i.to_string())
            .env("DATABASE_URL", &database_url)
            .env(node::CLAIM_AT_MOST, agents.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        children.push(child);
    }
    let pids: Vec<String> = children.iter().map(|c| c.id().to_string()).collect();

    // Warm-up: every agent claimed and shown in a pane, and a few seconds of turns.
    let started = Instant::now();
    loop {
        let placed = setup.placed().await?;
        if placed >= names.len() as i64 {
            break;
        }
        anyhow::ensure!(started.elapsed() < Duration::from_secs(300), "only {placed} agents got a pane in 300 s");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!("every agent has a pane after {:.1} s", started.elapsed().as_secs_f64());
    tokio::time::sleep(Duration::from_secs(5)).await;

    let before = setup.counters().await?;
    let cpu_before: Vec<u64> = pids.iter().map(|p| common::cpu_ticks(p, false).unwrap_or(0)).collect();
    let (from, window) = (now_ms(), Instant::now());
    let mailed =
        setup.mail_for(&names, Duration::from_secs(seconds), common::env_num("BENCH_MESSAGE_EVERY_S", 120)).await?;
    let elapsed = window.elapsed().as_secs_f64();
    let to = now_ms();
    let after = setup.counters().await?;
    let cpu_after: Vec<u64> = pids.iter().map(|p| common::cpu_ticks(p, false).unwrap_or(0)).collect();
    let rss: Vec<u64> = pids.iter().map(|p| rss_kib(p)).collect();

    // Stop the nodes (their stdin closes) and take their reports.
    let mut reports = Vec::new();
    for mut child in children {
        drop(child.stdin.take());
        let mut out = String::new();
        child.stdout.take().expect("piped").read_to_string(&mut out)?;
        child.wait()?;
        match out.lines().rev().find_map(|l| serde_json::from_str::<Report>(l).ok()) {
            Some(report) => reports.push(report),
            None => println!("a node reported nothing: {out}"),
        }
    }
    setup.close().await;

    let tps = (after.commits - before.commits) as f64 / elapsed;
    let wal = (after.wal - before.wal) as f64 / elapsed;
    let writes = (after.xids - before.xids) as f64 / elapsed;
    println!("\nover {elapsed:.0} s, {mailed} messages sent:");
    println!(
        "PostgreSQL: {tps:.0} commits/s = {:.1} % of the TPC-B capacity; WAL {:.0} KiB/s",
        100.0 * tps / tpcb,
        wal / 1024.0
    );
    println!(
        "  of which writing: {writes:.0}/s = {:.1} % of the TPC-B capacity (the rest read only: claims, and the reads \
         each commit's wake-up causes on every node)",
        100.0 * writes / tpcb
    );
    let within = |pick: fn(&Report) -> &Vec<(u64, f64)>| {
        let mut all: Vec<f64> = reports
            .iter()
            .flat_map(|r| pick(r).iter().filter(|(at, _)| (from..=to).contains(at)).map(|(_, ms)| *ms))
            .collect();
        all.sort_by(f64::total_cmp);
        all
    };
    for (what, samples) in [
        ("claims", within(|r| &r.claims)),
        ("heartbeats", within(|r| &r.heartbeats)),
        ("state changes", within(|r| &r.changes)),
        ("fan-out lag", within(|r| &r.lags)),
    ] {
        println!(
            "{what:>14}: n = {:>7}, p50 {:>7.1} ms, p99 {:>7.1} ms, max {:>7.1} ms",
            samples.len(),
            quantile(&samples, 0.50),
            quantile(&samples, 0.99),
            samples.last().copied().unwrap_or(0.0)
        );
    }
    let delivered: u64 = reports.iter().map(|r| r.delivered).sum();
    let errors: u64 = reports.iter().map(|r| r.errors).sum();
    println!("messages delivered {delivered}, step errors {errors}");
    let ticks = ticks_per_second() as f64;
    for (i, report) in reports.iter().enumerate() {
        let cpu = (cpu_after[i] - cpu_before[i]) as f64 / ticks / elapsed * 100.0;
        println!("node {i} ({}): CPU {cpu:.1} % of a core, RSS {} MiB", report.node_id, rss[i] / 1024);
    }
    common::drop_database(&server, "switchyard_bench_fleet").await?;
    Ok(())
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

/// TPC-B transactions per second of the server, by `pgbench` on a scratch database.
fn tpcb_capacity(server: &str, seconds: u64) -> anyhow::Result<f64> {
    let pgbench = ["pgbench", "/usr/lib/postgresql/15/bin/pgbench"]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success()))
        .ok_or_else(|| {
            anyhow::anyhow!("pgbench not found: apt-get install postgresql-contrib (or postgresql-client)")
        })?;
    let db = server.rsplit_once('/').map_or(server.to_owned(), |(base, _)| format!("{base}/switchyard_bench_pgbench"));
    let psql = |sql: &str| Command::new("psql").args([server, "-qc", sql]).output();
    psql("DROP DATABASE IF EXISTS switchyard_bench_pgbench")?;
    psql("CREATE DATABASE switchyard_bench_pgbench")?;
    let init = Command::new(pgbench).args(["-i", "-q", "-s", "8", &db]).output()?;
    anyhow::ensure!(init.status.success(), "pgbench -i: {}", String::from_utf8_lossy(&init.stderr));
    let run = Command::new(pgbench).args(["-c", "8", "-j", "2", "-T", &seconds.to_string(), &db]).output()?;
    psql("DROP DATABASE IF EXISTS switchyard_bench_pgbench")?;
    let text = String::from_utf8_lossy(&run.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("tps = ").and_then(|rest| rest.split_whitespace().next()?.parse().ok()))
        .ok_or_else(|| anyhow::anyhow!("no tps in pgbench's output: {text}"))
}

fn rss_kib(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("VmRSS:").and_then(|v| v.split_whitespace().next()?.parse().ok()))
        })
        .unwrap_or(0)
}

fn ticks_per_second() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().map_or(100, |t| t as u64)
}

/// Reads a node's stdin until it closes: the bench's word to stop.
pub fn until_stdin_closes() -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().lock().read_to_end(&mut sink);
        let _ = tx.send(());
    });
    rx
}

/// Prints the report as the node's last line.
pub fn print_report(report: &Report) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", serde_json::to_string(report).unwrap_or_default());
    let _ = out.flush();
}

/// Samples a node's loops add to, shared.
#[derive(Clone, Default)]
pub struct Samples(pub Arc<Mutex<Report>>);

impl Samples {
    pub fn add(&self, pick: fn(&mut Report) -> &mut Vec<(u64, f64)>, took: Duration) {
        if let Ok(mut r) = self.0.lock() {
            pick(&mut r).push((now_ms(), took.as_secs_f64() * 1000.0));
        }
    }

    pub fn error(&self) {
        if let Ok(mut r) = self.0.lock() {
            r.errors += 1;
        }
    }
}
