//! How fast pane output reaches a control-mode subscriber, and what a capture costs with and
//! without the control client. A measurement, not a check: run it with
//! `cargo test --test api tmux::latency -- --ignored --nocapture`.

use std::io::Write;
use std::time::{Duration, Instant};

use switchyard::tmux::{Control, Notification};

use super::{next_matching, TmuxServer, SESSION};

const SAMPLES: usize = 300;

#[tokio::test]
#[ignore = "a measurement; run by hand"]
async fn control_mode_output_latency_and_capture_cost() {
    let server = TmuxServer::start().await;
    let control = Control::attach(&server.tmux, SESSION).await.expect("attach");
    let mut events = control.subscribe();
    let fifo = server.path("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    // The pane copies whatever the test writes into the FIFO to its terminal, unchanged.
    let pane =
        server.window("printer", &["sh", "-c", r#"stty raw -echo; exec cat "$0""#, fifo.to_str().unwrap()]).await;
    let fifo_path = fifo.clone();
    let mut writer = tokio::task::spawn_blocking(move || std::fs::OpenOptions::new().write(true).open(fifo_path))
        .await
        .unwrap()
        .expect("open the FIFO");

    let mut latencies = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        let marker = format!("mark-{i:05}\n");
        let start = Instant::now();
        writer.write_all(marker.as_bytes()).unwrap();
        let mut seen = Vec::new();
        while !seen.windows(marker.len()).any(|w| w == marker.as_bytes()) {
            let chunk = next_matching(&mut events, Duration::from_secs(5), |n| match n {
                Notification::Output { pane: p, data } if *p == pane.pane_id => Some(data.clone()),
                _ => None,
            })
            .await;
            seen.extend(chunk);
        }
        latencies.push(start.elapsed());
    }
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    eprintln!(
        "output -> %output over {SAMPLES} samples: p50 {:?}, p95 {:?}, p99 {:?}, max {:?}",
        pct(0.50),
        pct(0.95),
        pct(0.99),
        latencies.last().unwrap()
    );

    let timed = |label: &str, total: Duration, n: u32| eprintln!("{label}: {:?} per call", total / n);
    let start = Instant::now();
    for _ in 0..200 {
        control.capture(&pane.pane_id, 0).await.unwrap();
    }
    timed("capture-pane through the control client", start.elapsed(), 200);
    let start = Instant::now();
    for _ in 0..50 {
        server.tmux.capture(&pane.pane_id, 0).await.unwrap();
    }
    timed("capture-pane as a forked tmux", start.elapsed(), 50);
    let start = Instant::now();
    for _ in 0..50 {
        server.tmux.list_panes(SESSION).await.unwrap();
    }
    timed("list-panes as a forked tmux", start.elapsed(), 50);
}
