//! `cargo bench --bench conductor`: the conductor's figures (issue 17), printed, never asserted.
//!
//! Runs the real application (worker and conductor in-process) against the PostgreSQL server in
//! `BENCH_DATABASE_URL`, on a tmux socket of its own, with instant fake agents (the conductor
//! tests' `conductor-agent.sh`: an engineer commits one file and reports done with the real
//! `switchyard` CLI at once). For each count in `BENCH_WISHES` (default `1,5,20`) that many
//! wishes of `BENCH_CHAINS` × `BENCH_CHAIN` groups (default 10 chains of 5: 50 groups) run at
//! once; it prints the round's wall time per group (what a group costs when many run: the figure
//! that stays flat as wishes are added, if anything does), and per group Switchyard's time from
//! the moment the group could start (its last dependency merged, or its wish started) to its own
//! merge into the wish's branch — spawn, clone, the agent's few git commands, report,
//! integration, dispatch — p50/p95. With N groups running at once on a machine the work keeps
//! busy, a group's own time is about N × the time per group (Little's law): it grows with the
//! chains in flight whatever Switchyard does. In the same run, the raw floor per group: a loop of what that work
//! needs at the least (`git clone --shared`, a commit, `git merge --no-ff`, tmux `new-window`
//! running a command that exits), p50/p95.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard::worker::WorkerConfig;

#[path = "common/mod.rs"]
mod common;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if !common::invoked_by_cargo_bench("conductor") {
        return Ok(());
    }
    let rounds: Vec<u64> = std::env::var("BENCH_WISHES")
        .unwrap_or_else(|_| "1,5,20".into())
        .split(',')
        .map(|n| n.trim().parse())
        .collect::<Result<_, _>>()
        .map_err(|_| anyhow::anyhow!("BENCH_WISHES must be counts separated by commas, as 1,5,20"))?;
    let (chains, chain) = (common::env_num("BENCH_CHAINS", 10), common::env_num("BENCH_CHAIN", 5));
    let database_url = common::fresh_database(&common::server_url(), "switchyard_bench_conductor").await?;
    let data_dir = tempfile::tempdir()?;
    let fakes = tempfile::tempdir()?;
    let root = env!("CARGO_MANIFEST_DIR");
    std::fs::write(
        data_dir.path().join("providers.toml"),
        format!(
            "[providers.instant]\ncommand = [\"bash\", \"--norc\", \"--noprofile\", \"{root}/tests/fake_agent/conductor-agent.sh\"]\n\
             screen_rules = \"generic\"\ninstall_hooks = false\n\
             env = {{ SWITCHYARD_BIN = \"{bin}\", FAKE_DIR = \"{fakes}\" }}\n",
            bin = env!("CARGO_BIN_EXE_switchyard"),
            fakes = fakes.path().display()
        ),
    )?;
    let socket = format!("sy-bench-conductor-{}", std::process::id());
    let worker = WorkerConfig { tmux_socket: socket.clone(), conductor: true, ..WorkerConfig::default() };
    let app = common::start(&database_url, data_dir.path(), worker).await?;
    let client = reqwest::Client::new();
    let call = |method: reqwest::Method, path: &str, body: Value| {
        let request = client.request(method, format!("{}{path}", app.api())).bearer_auth(&app.token).json(&body);
        let path = path.to_owned();
        async move {
            let response = request.send().await?;
            let status = response.status();
            anyhow::ensure!(status.is_success(), "{path}: {status} {}", response.text().await.unwrap_or_default());
            anyhow::Ok(())
        }
    };
    let repo = common::git_repo()?;
    let config = json!({"provider": "instant", "review": "none", "max_agents": 1000});
    call(
        reqwest::Method::POST,
        "/projects",
        // Measured up to `completed`: the merge queue (its own benchmark) is off.
        json!({"slug": "bench", "name": "Bench", "repo_path": repo.path(),
        "conductor_config": config, "merge_queue_config": {"enabled": false, "track_mode": "all"}}),
    )
    .await?;

    println!("# Switchyard conductor benchmark: wishes of {chains} chains of {chain} groups, instant fake agents");
    let floor = raw_floor(&socket, 20)?;
    println!(
        "raw floor per group (clone --shared + commit + merge --no-ff + tmux new-window): p50 {:.0} ms, p95 {:.0} ms",
        floor.0, floor.1
    );
    let mut amortized_all = Vec::new();
    for (round, wishes) in rounds.iter().enumerate() {
        let started = Instant::now();
        let cpu_before = common::cpu_ticks("self", true)?;
        let slugs: Vec<String> = (0..*wishes).map(|w| format!("r{round}-w{w}")).collect();
        for slug in &slugs {
            let mut groups = Vec::new();
            for c in 0..chains {
                for g in 0..chain {
                    let depends_on: Vec<String> = if g == 0 { vec![] } else { vec![format!("c{c}-{}", g - 1)] };
                    groups.push(json!({"key": format!("c{c}-{g}"), "title": format!("chain {c} step {g}"), "depends_on": depends_on}));
                }
            }
            call(
                reqwest::Method::POST,
                "/wishes",
                json!({"slug": slug, "project": "bench", "title": slug, "groups": groups}),
            )
            .await?;
            call(reqwest::Method::POST, &format!("/wishes/{slug}/plan"), json!({})).await?;
        }
        let limit = Duration::from_secs(60 + 30 * wishes * chains * chain / 10);
        loop {
            let done: i64 =
                sqlx::query_scalar("SELECT count(*) FROM wishes WHERE slug = ANY($1) AND status = 'completed'")
                    .bind(&slugs)
                    .fetch_one(&app.pool)
                    .await?;
            if done == *wishes as i64 {
                break;
            }
            anyhow::ensure!(
                started.elapsed() < limit,
                "round {round}: {done} of {wishes} wishes completed in {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let wall = started.elapsed();
        // The server's own CPU (with the git it ran), not the agents' (they run under tmux).
        let cpu_ms = (common::cpu_ticks("self", true)? - cpu_before) as f64 * 10.0;
        let mut per_group: Vec<f64> = sqlx::query_scalar(
            "SELECT (EXTRACT(EPOCH FROM t.completed_at - COALESCE(
                        (SELECT max(d.completed_at) FROM task_dependencies td JOIN tasks d ON d.id = td.depends_on
                          WHERE td.task_id = t.id), w.started_at)) * 1000)::float8
             FROM tasks t JOIN wishes w ON w.id = t.wish_id WHERE w.slug = ANY($1)",
        )
        .bind(&slugs)
        .fetch_all(&app.pool)
        .await?;
        per_group.sort_by(f64::total_cmp);
        let (p50, p95) = (percentile(&per_group, 0.50), percentile(&per_group, 0.95));
        let groups = per_group.len().max(1) as f64;
        let amortized = wall.as_secs_f64() * 1000.0 / groups;
        println!(
            "{wishes:>3} wish(es) in flight, {} groups: round {:.1} s = {amortized:.0} ms per group ({:.1}× the floor's p50); \
             each group from ready to merged p50 {p50:.0} ms, p95 {p95:.0} ms ({:.1}× / {:.1}× the floor); server CPU {:.0} ms per group",
            per_group.len(),
            wall.as_secs_f64(),
            amortized / floor.0,
            p50 / floor.0,
            p95 / floor.1,
            cpu_ms / groups
        );
        hops(&app.pool, &slugs).await?;
        amortized_all.push((*wishes, amortized));
    }
    // The floor swings with the machine's moods (87 and 161 ms p50 in two runs): measured again
    // after the rounds, and the lower of the two taken, which is the harder one to stay near.
    let after = raw_floor(&socket, 20)?;
    let lower = floor.0.min(after.0);
    let mut line = format!(
        "raw floor again after the rounds: p50 {:.0} ms; per group, round wall time against the lower floor ({lower:.0} ms):",
        after.0
    );
    for (wishes, amortized) in amortized_all {
        line.push_str(&format!(" {wishes} wish(es) {amortized:.0} ms = {:.1}×;", amortized / lower));
    }
    println!("{line}");
    app.stop().await?;
    let _ = Command::new("tmux").args(["-L", &socket, "kill-server"]).status();
    common::drop_database(&common::server_url(), "switchyard_bench_conductor").await?;
    Ok(())
}

/// Where a group's time goes, hop by hop (p50/p95 of each): ready → its engineer registered (the
/// conductor's dispatch), → claimed by the worker, → its pane made (clone, provider setup, tmux),
/// → done reported (the agent's own work and the CLI), → merged into the wish's branch.
async fn hops(pool: &sqlx::PgPool, slugs: &[String]) -> anyhow::Result<()> {
    let rows: Vec<(f64, f64, f64, f64, f64)> = sqlx::query_as(
        "WITH g AS (
           SELECT t.id, t.reported_at, t.completed_at,
                  COALESCE((SELECT max(d.completed_at) FROM task_dependencies td JOIN tasks d ON d.id = td.depends_on
                             WHERE td.task_id = t.id), w.started_at) AS ready,
                  a.created_at AS registered,
                  (SELECT min(e.created_at) FROM events e WHERE e.subject = 'agent:' || a.name AND e.type = 'agent.claimed') AS claimed,
                  (SELECT min(e.created_at) FROM events e WHERE e.subject = 'agent:' || a.name AND e.type = 'agent.pane_opened') AS spawned
             FROM tasks t JOIN wishes w ON w.id = t.wish_id
             JOIN LATERAL (SELECT * FROM agents a WHERE a.task_id = t.id ORDER BY a.created_at LIMIT 1) a ON true
            WHERE w.slug = ANY($1))
         SELECT (EXTRACT(EPOCH FROM registered - ready) * 1000)::float8,
                (EXTRACT(EPOCH FROM claimed - registered) * 1000)::float8,
                (EXTRACT(EPOCH FROM spawned - claimed) * 1000)::float8,
                (EXTRACT(EPOCH FROM reported_at - spawned) * 1000)::float8,
                (EXTRACT(EPOCH FROM completed_at - reported_at) * 1000)::float8
           FROM g WHERE claimed IS NOT NULL AND spawned IS NOT NULL AND reported_at IS NOT NULL",
    )
    .bind(slugs)
    .fetch_all(pool)
    .await?;
    let names = ["ready → registered", "→ claimed", "→ pane", "→ reported", "→ merged"];
    let mut line = String::from("    hops p50/p95 ms:");
    for (i, name) in names.iter().enumerate() {
        let mut times: Vec<f64> = rows.iter().map(|r| [r.0, r.1, r.2, r.3, r.4][i]).collect();
        times.sort_by(f64::total_cmp);
        line.push_str(&format!(" {name} {:.0}/{:.0};", percentile(&times, 0.5), percentile(&times, 0.95)));
    }
    println!("{line}");
    Ok(())
}

/// Per group, the least work a group needs, timed `n` times: p50 and p95 in ms.
fn raw_floor(socket: &str, n: usize) -> anyhow::Result<(f64, f64)> {
    let repo = common::git_repo()?;
    let work = tempfile::tempdir()?;
    let git = |dir: &Path, args: &[&str]| -> anyhow::Result<()> {
        let status = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()?;
        anyhow::ensure!(status.success(), "git {args:?}");
        Ok(())
    };
    let tmux = |args: &[&str]| Command::new("tmux").arg("-L").arg(socket).args(args).status();
    tmux(&["new-session", "-d", "-s", "floor"])?;
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let started = Instant::now();
        let clone = work.path().join(format!("c{i}"));
        let (repo_arg, clone_arg) = (repo.path().display().to_string(), clone.display().to_string());
        git(work.path(), &["clone", "-q", "--shared", &repo_arg, &clone_arg])?;
        tmux(&["new-window", "-d", "-t", "floor", "true"])?;
        std::fs::write(clone.join(format!("f{i}.txt")), "x\n")?;
        git(&clone, &["add", "-A"])?;
        git(&clone, &["commit", "-q", "-m", "work"])?;
        git(&clone, &["push", "-q", "origin", &format!("HEAD:refs/heads/g{i}")])?;
        git(repo.path(), &["merge", "-q", "--no-ff", "-m", "merge", &format!("g{i}")])?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    tmux(&["kill-session", "-t", "floor"])?;
    times.sort_by(f64::total_cmp);
    Ok((percentile(&times, 0.50), percentile(&times, 0.95)))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}
