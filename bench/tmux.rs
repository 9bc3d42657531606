//! `cargo bench --bench tmux`: what the tmux link itself costs, printed, never asserted — how
//! fast a pane's output reaches a control-mode subscriber (`%output`), and what one
//! `capture-pane` costs through the control client and as a forked `tmux`, beside a forked
//! `list-panes`. Runs on a tmux socket of its own, killed at the end.

use std::io::Write;
use std::time::{Duration, Instant};

use switchyard::tmux::{Control, Notification, Tmux, WindowSpec};

#[path = "common/mod.rs"]
mod common;

const SESSION: &str = "bench";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if !common::invoked_by_cargo_bench("tmux") {
        return Ok(());
    }
    let samples = common::env_num("BENCH_SAMPLES", 300) as usize;
    let tmux = Tmux::new(format!("sy-bench-tmux-{}", std::process::id()))?;
    let result = measure(&tmux, samples).await;
    let _ = tmux.kill_server().await;
    result
}

async fn measure(tmux: &Tmux, samples: usize) -> anyhow::Result<()> {
    tmux.ensure_session(SESSION).await?;
    let control = Control::attach(tmux, SESSION).await?;
    let mut events = control.subscribe();
    let dir = tempfile::tempdir()?;
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))?;
    // The pane copies whatever is written into the FIFO to its terminal, unchanged.
    let fifo_arg = fifo.to_str().ok_or_else(|| anyhow::anyhow!("a UTF-8 temp path"))?.to_owned();
    let spec = WindowSpec {
        session: SESSION.into(),
        name: "printer".into(),
        cwd: dir.path().to_owned(),
        command: ["sh", "-c", r#"stty raw -echo; exec cat "$0""#, &fifo_arg].map(String::from).to_vec(),
        env: vec![],
    };
    let pane = tmux.new_window(&spec).await?.pane_id;
    let mut writer = tokio::task::spawn_blocking(move || std::fs::OpenOptions::new().write(true).open(fifo)).await??;

    let mut latencies = Vec::with_capacity(samples);
    for i in 0..samples {
        let marker = format!("mark-{i:05}\n");
        let start = Instant::now();
        writer.write_all(marker.as_bytes())?;
        let mut seen = Vec::new();
        while !seen.windows(marker.len()).any(|w| w == marker.as_bytes()) {
            match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
                Ok(Ok(Notification::Output { pane: p, data })) if p == pane => seen.extend(data),
                Ok(Ok(_)) | Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(e)) => anyhow::bail!("notifications ended: {e}"),
                Err(_) => anyhow::bail!("no %output within 5 s"),
            }
        }
        latencies.push(start.elapsed());
    }
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    println!("# tmux link: {samples} lines written into a pane");
    println!("pane output -> %output: p50 {:?}, p95 {:?}, p99 {:?}, max {:?}", at(0.50), at(0.95), at(0.99), at(1.0));

    let per_call = |label: &str, total: Duration, n: u32| println!("{label}: {:?} per call", total / n);
    let start = Instant::now();
    for _ in 0..200 {
        control.capture(&pane, 0).await?;
    }
    per_call("capture-pane through the control client", start.elapsed(), 200);
    let start = Instant::now();
    for _ in 0..50 {
        tmux.capture(&pane, 0).await?;
    }
    per_call("capture-pane as a forked tmux", start.elapsed(), 50);
    let start = Instant::now();
    for _ in 0..50 {
        tmux.list_panes(SESSION).await?;
    }
    per_call("list-panes as a forked tmux", start.elapsed(), 50);
    Ok(())
}
