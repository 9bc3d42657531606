//! `cargo bench --bench merge_queue`: issue 18's figures, printed, never asserted.
//! - Throughput: `BENCH_WISHES` (default 50) wishes, each touching its own file, queued at once
//!   in a bare repository and merged through the queue (a trivial gate, `true`: the scratch
//!   checkout and the gate run for every entry), in merges per minute; in the same run, a raw
//!   loop of `git merge --no-ff` + `git update-ref` (compare-and-swap) over the same branches in
//!   a clone of the same repository. `BENCH_ROUNDS` (default 3) rounds of both in turn, and the
//!   ratio of their medians.
//! - Slow gate (issue 41): `BENCH_SLOW_WISHES` (default 50) wishes, some touching a file of their
//!   own and some one shared file (on lines of their own: they merge cleanly), two of which fail
//!   the gate, through a gate that takes wall time and little CPU (`sleep BENCH_GATE_SECS`,
//!   default 5) with the project's default batches and gates at once: the wall time against the
//!   serial floor (wishes × gate), the gate runs spent per culprit, and whether any commit on the
//!   target's first-parent line fails the gate.
//! - Prediction: the time of one queue pass that predicts a new entry behind 10, 50 and 200
//!   entries in flight (held, so nothing merges), and the trial merges it ran.
//!
//! Runs the real application against the PostgreSQL server in `BENCH_DATABASE_URL` and drives the
//! queue's loop with `tick()` as a node would run it.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard::worker::WorkerConfig;

#[path = "common/mod.rs"]
mod common;

const IN_FLIGHT: [usize; 3] = [10, 50, 200];

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
        .args(args)
        .output()?;
    anyhow::ensure!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A seed repository with `n` branches `wish/<prefix><i>`, each adding its own file, cloned bare
/// (the project's) and non-bare (the raw loop's).
fn repos(dir: &Path, prefix: &str, n: usize) -> anyhow::Result<(std::path::PathBuf, std::path::PathBuf)> {
    let seed = dir.join(format!("{prefix}seed"));
    std::fs::create_dir_all(&seed)?;
    git(&seed, &["init", "-q", "-b", "main"])?;
    std::fs::write(seed.join("README.md"), "bench\n")?;
    git(&seed, &["add", "-A"])?;
    git(&seed, &["commit", "-qm", "start"])?;
    for i in 0..n {
        git(&seed, &["checkout", "-q", "-b", &format!("wish/{prefix}{i}"), "main"])?;
        std::fs::write(seed.join(format!("{prefix}{i}.txt")), format!("{i}\n"))?;
        git(&seed, &["add", "-A"])?;
        git(&seed, &["commit", "-qm", &format!("{prefix}{i}")])?;
    }
    git(&seed, &["checkout", "-q", "main"])?;
    let (bare, raw) = (dir.join(format!("{prefix}.git")), dir.join(format!("{prefix}raw")));
    git(dir, &["clone", "-q", "--bare", &seed.to_string_lossy(), &bare.to_string_lossy()])?;
    // The seed is no remote of the project's (the merge queue pushes its target to `origin`).
    git(&bare, &["remote", "remove", "origin"])?;
    git(dir, &["clone", "-q", &seed.to_string_lossy(), &raw.to_string_lossy()])?;
    Ok((bare, raw))
}

fn per_min(merges: usize, took: Duration) -> f64 {
    merges as f64 * 60.0 / took.as_secs_f64()
}

struct Client {
    http: reqwest::Client,
    api: String,
    token: String,
}

impl Client {
    async fn send(&self, method: reqwest::Method, path: &str, body: Value) -> anyhow::Result<()> {
        let response = self
            .http
            .request(method, format!("{}{path}", self.api))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await?;
        anyhow::ensure!(response.status().is_success(), "{path}: {}", response.text().await?);
        Ok(())
    }

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<()> {
        self.send(reqwest::Method::POST, path, body).await
    }

    /// Wish `slug` on `wish/<slug>`, walked to `completed` by hand (the project skips reviews).
    async fn completed_wish(&self, project: &str, slug: &str) -> anyhow::Result<()> {
        let body = json!({"slug": slug, "project": project, "title": slug, "branch": format!("wish/{slug}"),
            "groups": [{"key": "work", "title": "Work"}]});
        self.post("/wishes", body).await?;
        for step in ["plan", "queue", "start", "groups/work/start", "groups/work/complete"] {
            self.post(&format!("/wishes/{slug}/{step}"), json!({})).await?;
        }
        Ok(())
    }

    async fn project(&self, slug: &str, repo: &Path, queue_enabled: bool) -> anyhow::Result<()> {
        let body = json!({"slug": slug, "name": slug, "repo_path": repo, "conductor_config": {"review": "none"},
            "merge_queue_config": {"enabled": queue_enabled, "track_mode": "all"}});
        self.post("/projects", body).await
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if !common::invoked_by_cargo_bench("merge_queue") {
        return Ok(());
    }
    let wishes = common::env_num("BENCH_WISHES", 50) as usize;
    let database_url = common::fresh_database(&common::server_url(), "switchyard_bench_merge_queue").await?;
    let data_dir = tempfile::tempdir()?;
    let worker = WorkerConfig {
        enabled: false,
        conductor: false,
        merge_queue: false,
        tmux_socket: format!("sy-bench-mq-{}", std::process::id()),
        ..WorkerConfig::default()
    };
    let app = common::start(&database_url, data_dir.path(), worker).await?;
    let client = Client { http: reqwest::Client::new(), api: app.api(), token: app.token.clone() };
    let queue = switchyard::app::merge_queue::MergeQueue::new(switchyard::app::Ctx::new(switchyard::app::Parts {
        db: app.pool.clone(),
        feed: switchyard::feed::EventFeed::default(),
        node: switchyard::node::NodeInfo::load(data_dir.path())?,
        data_dir: data_dir.path().to_path_buf(),
        providers: switchyard::providers::LiveProviders::fixed(switchyard::providers::Providers::load(
            data_dir.path(),
        )?),
        panes: None,
    }));
    let repos_dir = tempfile::tempdir()?;

    // Throughput: rounds of the queue and the raw loop in turn (one alone swings with the disk's
    // moods by half), each round on repositories of its own; the ratio of the medians.
    let rounds = common::env_num("BENCH_ROUNDS", 3) as usize;
    let (mut queue_times, mut raw_times) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let prefix = format!("r{round}t");
        let (bare, raw) = repos(repos_dir.path(), &prefix, wishes)?;
        let project = format!("fast{round}");
        client.project(&project, &bare, true).await?;
        let settings = json!({"merge_check": "true"});
        client.send(reqwest::Method::PUT, &format!("/projects/{project}/merge-settings"), settings).await?;
        for i in 0..wishes {
            client.completed_wish(&project, &format!("{prefix}{i}")).await?;
        }
        let started = Instant::now();
        let (mut merged, mut first_pass) = (0, None);
        while merged < wishes {
            let tick = queue.tick().await.map_err(|e| anyhow::anyhow!("{e}"))?;
            // The first pass also enters every wish and predicts them all.
            first_pass.get_or_insert(started.elapsed());
            merged += tick.processed.iter().filter(|(_, s)| s.as_str() == "completed").count();
            anyhow::ensure!(started.elapsed() < Duration::from_secs(600), "the queue stalled at {merged}");
        }
        let queue_time = started.elapsed();
        let first_pass = first_pass.unwrap_or_default();
        let merges = git(&bare, &["rev-list", "--count", "--merges", "main"])?;
        anyhow::ensure!(merges.trim() == wishes.to_string(), "{merges} merge commits");

        git(&raw, &["checkout", "-q", "--detach", "main"])?;
        let started = Instant::now();
        for i in 0..wishes {
            let old = git(&raw, &["rev-parse", "refs/heads/main"])?;
            git(
                &raw,
                &["merge", "-q", "--no-ff", "-m", &format!("Merge {prefix}{i}"), &format!("origin/wish/{prefix}{i}")],
            )?;
            git(&raw, &["update-ref", "refs/heads/main", "HEAD", old.trim()])?;
        }
        let raw_time = started.elapsed();
        println!(
            "round {round}: merge queue {wishes} wishes in {:.2} s = {:.0} merges/min (gate `true`; its first pass, which entered them all, {:.0} ms); raw git merge --no-ff + update-ref: {:.2} s = {:.0} merges/min",
            queue_time.as_secs_f64(),
            per_min(wishes, queue_time),
            first_pass.as_secs_f64() * 1000.0,
            raw_time.as_secs_f64(),
            per_min(wishes, raw_time),
        );
        queue_times.push(queue_time);
        raw_times.push(raw_time);
    }
    queue_times.sort();
    raw_times.sort();
    let (queue_time, raw_time) = (queue_times[rounds / 2], raw_times[rounds / 2]);
    println!(
        "merge queue (median of {rounds} rounds): {:.0} merges/min; raw loop: {:.0} merges/min; queue/raw = {:.0} %",
        per_min(wishes, queue_time),
        per_min(wishes, raw_time),
        100.0 * raw_time.as_secs_f64() / queue_time.as_secs_f64()
    );

    slow_gate(&client, &queue, repos_dir.path()).await?;

    // Prediction: one new entry behind N held entries in flight.
    let most = *IN_FLIGHT.last().expect("sizes");
    let (bare, _) = repos(repos_dir.path(), "p", most + IN_FLIGHT.len())?;
    client.project("many", &bare, false).await?;
    let mut entered = 0;
    let mut next = 0;
    for n in IN_FLIGHT {
        while entered < n {
            let slug = format!("p{next}");
            client.completed_wish("many", &slug).await?;
            client.post(&format!("/wishes/{slug}/submit"), json!({})).await?;
            client.post(&format!("/merge-queue/{slug}/hold"), json!({})).await?;
            entered += 1;
            next += 1;
        }
        queue.tick().await.map_err(|e| anyhow::anyhow!("{e}"))?; // the cache is warm
        let slug = format!("p{next}");
        client.completed_wish("many", &slug).await?;
        client.post(&format!("/wishes/{slug}/submit"), json!({})).await?;
        client.post(&format!("/merge-queue/{slug}/hold"), json!({})).await?;
        let started = Instant::now();
        let tick = queue.tick().await.map_err(|e| anyhow::anyhow!("{e}"))?;
        let took = started.elapsed();
        println!(
            "prediction: a new entry behind {n} in flight: {:.1} ms for the pass ({} trial merges, {} answers from the cache, {} pairs clean by their changed paths)",
            took.as_secs_f64() * 1000.0,
            tick.trial_merges,
            tick.cached,
            tick.disjoint
        );
        entered += 1;
        next += 1;
    }
    app.stop().await?;
    common::drop_database(&common::server_url(), "switchyard_bench_merge_queue").await?;
    Ok(())
}

/// Lines of the file the overlapping wishes share, each editing its own.
const SHARED_LINES: usize = 200;

/// The slow-gate run (see the introduction).
async fn slow_gate(
    client: &Client,
    queue: &switchyard::app::merge_queue::MergeQueue,
    dir: &Path,
) -> anyhow::Result<()> {
    let wishes = common::env_num("BENCH_SLOW_WISHES", 50) as usize;
    let gate_secs = std::env::var("BENCH_GATE_SECS").ok().and_then(|s| s.parse::<f64>().ok()).unwrap_or(5.0);
    // Every third wish edits the shared file; two, one of each kind, add a file the gate refuses.
    let overlapping = |i: usize| i.is_multiple_of(3);
    let culprits = [wishes / 5, wishes * 3 / 5 / 3 * 3];
    let seed = dir.join("slow-seed");
    std::fs::create_dir_all(&seed)?;
    git(&seed, &["init", "-q", "-b", "main"])?;
    let shared: Vec<String> = (0..SHARED_LINES).map(|i| format!("line {i}")).collect();
    std::fs::write(seed.join("shared.txt"), shared.join("\n") + "\n")?;
    git(&seed, &["add", "-A"])?;
    git(&seed, &["commit", "-qm", "start"])?;
    for i in 0..wishes {
        git(&seed, &["checkout", "-q", "-b", &format!("wish/s{i}"), "main"])?;
        if overlapping(i) {
            let mut lines = shared.clone();
            lines[(i / 3 * 3 + 1) % SHARED_LINES] = format!("changed by s{i}");
            std::fs::write(seed.join("shared.txt"), lines.join("\n") + "\n")?;
        } else {
            std::fs::write(seed.join(format!("s{i}.txt")), format!("{i}\n"))?;
        }
        if culprits.contains(&i) {
            std::fs::write(seed.join(format!("bad-{i}")), "the gate refuses this\n")?;
        }
        git(&seed, &["add", "-A"])?;
        git(&seed, &["commit", "-qm", &format!("s{i}")])?;
    }
    git(&seed, &["checkout", "-q", "main"])?;
    let bare = dir.join("slow.git");
    git(dir, &["clone", "-q", "--bare", &seed.to_string_lossy(), &bare.to_string_lossy()])?;
    client.project("slow", &bare, true).await?;
    let check = format!("sleep {gate_secs}; for f in bad-*; do [ -e \"$f\" ] && exit 1; done; exit 0");
    let settings = json!({"merge_check": check});
    client.send(reqwest::Method::PUT, "/projects/slow/merge-settings", settings).await?;
    for i in 0..wishes {
        client.completed_wish("slow", &format!("s{i}")).await?;
    }
    let started = Instant::now();
    let (mut settled, mut gates, mut bisection, mut cancelled, mut most, mut failed) = (0, 0, 0, 0, 0, Vec::new());
    while settled < wishes {
        let tick = queue.tick().await.map_err(|e| anyhow::anyhow!("{e}"))?;
        for (wish, state) in &tick.processed {
            match state.as_str() {
                "completed" => settled += 1,
                "failed" | "conflict" => {
                    settled += 1;
                    failed.push(wish.clone());
                }
                _ => {}
            }
        }
        (gates, bisection, cancelled) =
            (gates + tick.gates, bisection + tick.bisection_gates, cancelled + tick.cancelled_gates);
        most = most.max(tick.most_gates_at_once);
        anyhow::ensure!(started.elapsed() < Duration::from_secs(3600), "the queue stalled at {settled}");
    }
    let took = started.elapsed();
    let floor = gate_secs * wishes as f64;
    // Every commit on main's first-parent line, checked as the gate checks (without its sleep).
    let line = git(&bare, &["rev-list", "--first-parent", "main"])?;
    let red = line
        .lines()
        .filter(|c| {
            git(&bare, &["ls-tree", "--name-only", c]).is_ok_and(|files| files.lines().any(|f| f.starts_with("bad-")))
        })
        .count();
    let merges = git(&bare, &["rev-list", "--count", "--merges", "--first-parent", "main"])?;
    failed.sort();
    let culprit_count = culprits.len().max(1) as f64;
    println!(
        "slow gate: {wishes} wishes ({} sharing a file), gate `sleep {gate_secs}` (+ a check), 2 culprits: {:.1} s against a serial floor of {floor:.0} s = {:.1}× the serial throughput; {gates} gate runs ({cancelled} more cancelled, at most {most} at once), {:.1} bisection runs per culprit (the target: ≤ 2·⌈log2 batch⌉ = 4 with batches of 4); left the queue: {failed:?}; main's first-parent line: {} merge commits, {red} commits failing the gate",
        (0..wishes).filter(|&i| overlapping(i)).count(),
        took.as_secs_f64(),
        floor / took.as_secs_f64(),
        bisection as f64 / culprit_count,
        merges.trim(),
    );
    Ok(())
}
