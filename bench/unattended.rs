//! `cargo bench --bench unattended`: the real Claude Code (the version `./dev deps` pins, or
//! `SWITCHYARD_AGENT_CLIS`) against the scripted model on loopback with no latency of its own,
//! run by the real application (worker and conductor in-process). Printed, never asserted.
//!
//! 1. **Per turn** (`BENCH_TURNS`, default 20 messages to one idle agent): Switchyard's added
//!    latency — the message queued (its `POST /messages` answered) → Claude Code's
//!    UserPromptSubmit hook starting, and Claude Code's Stop hook starting → `idle` recorded
//!    (the state change's event) — p50 and p95. A hook's start is stamped by a wrapper around
//!    the `switchyard` binary the hooks run (`date +%s%N` first thing), so the second figure is
//!    Switchyard's whole part: its hook process, the HTTP call, the state change's transaction.
//! 2. **A planned 3-group wish**: from its plan (approved automatically) to `merged` (the merge queue with no gate), with
//!    its three engineers real Claude Code; and, in the same run, the floor: the same three
//!    engineer briefs given to `claude -p` alone, at once, in three clones (the same scripted
//!    model answers both the same way), wall time until all three exit. Targets: p95 ≤ 300 ms
//!    each; the wish ≤ 1.5× the floor.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use switchyard::config::WorkerConfig;

#[path = "common/mod.rs"]
mod common;
// The tests' own scripted model; what only the tests use of it (its unit tests, cues) is idle here.
#[path = "../tests/api/scripted_model/mod.rs"]
#[allow(dead_code, unused_imports)]
mod scripted_model;

/// A made-up key: only the scripted model sees it.
const KEY: &str = "sk-ant-switchyard-bench-not-a-key-0123456789";

/// How long any one step may take before the benchmark gives up, saying which.
const STEP: Duration = Duration::from_secs(180);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if !common::invoked_by_cargo_bench("unattended") {
        return Ok(());
    }
    let Some(bin) = agent_clis() else {
        println!("# skipped: the agent CLIs are not installed (./dev deps)");
        return Ok(());
    };
    let claude = bin.join("claude");
    let turns = common::env_num("BENCH_TURNS", 20) as usize;
    let model = scripted_model::ScriptedModel::start().await;
    let database_url = common::fresh_database(&common::server_url(), "switchyard_bench_unattended").await?;
    let data_dir = tempfile::tempdir()?;
    let home = tempfile::tempdir()?;
    let trace = data_dir.path().join("hooks.trace");
    let wrapper = hook_stamper(data_dir.path(), &trace)?;
    std::fs::write(data_dir.path().join("providers.toml"), providers_toml(&claude, &model.url, &wrapper))?;
    let socket = format!("sy-bench-unattended-{}", std::process::id());
    let worker = WorkerConfig {
        tmux_socket: socket.clone(),
        conductor: true,
        switchyard_exe: Some(wrapper.clone()),
        provider_home: Some(home.path().to_path_buf()),
        ..WorkerConfig::default()
    };
    let app = common::start(&database_url, data_dir.path(), worker).await?;
    let client = reqwest::Client::new();
    let api = Api { client: &client, base: app.api(), token: &app.token };
    let repo = common::git_repo()?;
    api.call(
        reqwest::Method::POST,
        "/projects",
        json!({"slug": "bench", "name": "Bench", "repo_path": repo.path(),
               "conductor_config": {"provider": "claude", "review": "none"},
               "merge_queue_config": {"enabled": true, "track_mode": "all"}}),
    )
    .await?;
    println!("# Switchyard unattended benchmark: real Claude Code {}, a zero-latency scripted model", version(&claude));

    // 1. Per turn.
    api.call(
        reqwest::Method::POST,
        "/agents",
        json!({"name": "turns", "project": "bench", "kind": "worker", "role": "engineer", "provider": "claude",
               "clone": "agent"}),
    )
    .await?;
    api.wait("the agent idle", |a: Value| a["state"] == "idle", "/agents/turns").await?;
    let mut queued = Vec::new();
    for turn in 0..turns {
        let before = idle_events(&app.pool, "turns").await?;
        let sent =
            api.call(reqwest::Method::POST, "/messages", json!({"to": "turns", "body": format!("Say hello ({turn})")}));
        sent.await?;
        queued.push(now_ns());
        let deadline = Instant::now() + STEP;
        while idle_events(&app.pool, "turns").await? <= before {
            anyhow::ensure!(Instant::now() < deadline, "turn {turn}: the agent never went idle again");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let stamps = read_trace(&trace)?;
    let idles = idle_times(&app.pool, "turns").await?;
    let mut to_prompt = Vec::new();
    let mut to_idle = Vec::new();
    for (turn, &q) in queued.iter().enumerate() {
        let next = queued.get(turn + 1).copied().unwrap_or(i128::MAX);
        let prompt = stamps.iter().find(|s| s.event == "UserPromptSubmit" && s.at >= q && s.at < next);
        let stop = stamps.iter().find(|s| s.event == "Stop" && s.at >= q && s.at < next);
        if let Some(prompt) = prompt {
            to_prompt.push(((prompt.at - q) / 1_000) as u64);
        }
        if let Some(stop) = stop {
            if let Some(idle) = idles.iter().find(|&&i| i >= stop.at) {
                to_idle.push(((idle - stop.at) / 1_000) as u64);
            }
        }
    }
    to_prompt.sort_unstable();
    to_idle.sort_unstable();
    println!("turns measured: {} of {turns}", to_prompt.len().min(to_idle.len()));
    println!(
        "message queued -> UserPromptSubmit hook: p50 {:.0} ms, p95 {:.0} ms (target p95 <= 300 ms)",
        common::percentile_ms(&to_prompt, 0.5),
        common::percentile_ms(&to_prompt, 0.95)
    );
    println!(
        "Stop hook -> idle recorded:              p50 {:.0} ms, p95 {:.0} ms (target p95 <= 300 ms)",
        common::percentile_ms(&to_idle, 0.5),
        common::percentile_ms(&to_idle, 0.95)
    );

    // 2. A planned 3-group wish, and the floor in the same run.
    let groups: Vec<Value> = ["a", "b", "c"]
        .iter()
        .map(|k| json!({"key": k, "title": format!("Add {k}.txt"), "goal": format!("Add {k}.txt saying {k}")}))
        .collect();
    api.call(
        reqwest::Method::POST,
        "/wishes",
        json!({"slug": "letters", "project": "bench", "title": "Letters", "description": "Add a.txt, b.txt and c.txt",
               "groups": groups}),
    )
    .await?;
    // Planned, its approval automatic: the conductor queues and starts it.
    let started = Instant::now();
    api.call(reqwest::Method::POST, "/wishes/letters/plan", json!({})).await?;
    api.wait("the wish merged", |w: Value| w["status"] == "merged", "/wishes/letters").await?;
    let wish = started.elapsed();
    let floor = floor(&claude, &model.url, repo.path(), home.path()).await?;
    println!(
        "planned 3-group wish, start -> merged: {:.1} s; claude -p alone in three clones: {:.1} s; ratio {:.2} (target <= 1.5)",
        wish.as_secs_f64(),
        floor.as_secs_f64(),
        wish.as_secs_f64() / floor.as_secs_f64()
    );
    let _ = common::tmux(&socket, &["kill-server"]);
    app.stop().await
}

/// The directory holding `claude`, as the real-CLI tests find it.
fn agent_clis() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SWITCHYARD_AGENT_CLIS").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/agent-clis/node_modules/.bin");
    bin.join("claude").exists().then_some(bin)
}

fn version(claude: &Path) -> String {
    let out = std::process::Command::new(claude).arg("--version").output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()).unwrap_or_default()
}

/// The git identity agents commit with (the benchmark's home has no `.gitconfig`).
const IDENTITY: [(&str, &str); 4] = [
    ("GIT_AUTHOR_NAME", "Claude"),
    ("GIT_AUTHOR_EMAIL", "claude@example.com"),
    ("GIT_COMMITTER_NAME", "Claude"),
    ("GIT_COMMITTER_EMAIL", "claude@example.com"),
];

/// Claude Code pointed at the scripted model, unsandboxed (the hook stamper writes its trace
/// outside the clone), the stamper first on its `PATH` as `switchyard`.
fn providers_toml(claude: &Path, url: &str, wrapper: &Path) -> String {
    let path =
        format!("{}:{}", wrapper.parent().expect("a directory").display(), std::env::var("PATH").unwrap_or_default());
    let identity: Vec<String> = IDENTITY.iter().map(|(k, v)| format!("{k} = {v:?}")).collect();
    format!(
        "[providers.claude]\ncommand = [{claude:?}, \"--session-id\", \"{{session_id}}\"]\n\
         resume = [{claude:?}, \"--resume\", \"{{session_id}}\"]\nsandbox = \"none\"\nnice = 0\n\
         env = {{ ANTHROPIC_BASE_URL = {url:?}, ANTHROPIC_API_KEY = {KEY:?}, PATH = {path:?}, {} }}\n",
        identity.join(", ")
    )
}

/// `<dir>/bin/switchyard`: stamps each hook's start (ns since the epoch, agent, hook event) in
/// `trace`, then runs the real binary with the same input.
fn hook_stamper(dir: &Path, trace: &Path) -> anyhow::Result<PathBuf> {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin)?;
    let real = env!("CARGO_BIN_EXE_switchyard");
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = hook ]; then\n  at=$(date +%s%N)\n  input=$(cat)\n\
         event=$(printf '%s' \"$input\" | sed -n 's/.*\"hook_event_name\" *: *\"\\([A-Za-z]*\\)\".*/\\1/p')\n\
         echo \"$at $SWITCHYARD_AGENT $event\" >> '{trace}'\n  printf '%s' \"$input\" | exec '{real}' \"$@\"\nfi\n\
         exec '{real}' \"$@\"\n",
        trace = trace.display()
    );
    let path = bin.join("switchyard");
    std::fs::write(&path, script)?;
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    Ok(path)
}

struct Stamp {
    at: i128,
    event: String,
}

fn read_trace(trace: &Path) -> anyhow::Result<Vec<Stamp>> {
    let text = std::fs::read_to_string(trace).unwrap_or_default();
    Ok(text
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let at = words.next()?.parse().ok()?;
            let _agent = words.next()?;
            Some(Stamp { at, event: words.next().unwrap_or_default().to_owned() })
        })
        .collect())
}

fn now_ns() -> i128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or_default()
}

async fn idle_events(pool: &sqlx::PgPool, agent: &str) -> anyhow::Result<i64> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM events WHERE type = 'agent.state_changed' AND subject = $1 AND payload->>'to' = 'idle'",
    )
    .bind(format!("agent:{agent}"))
    .fetch_one(pool)
    .await?)
}

/// When each change to `idle` was recorded, ns since the epoch, in order.
async fn idle_times(pool: &sqlx::PgPool, agent: &str) -> anyhow::Result<Vec<i128>> {
    let times: Vec<chrono::DateTime<chrono::Utc>> = sqlx::query_scalar(
        "SELECT created_at FROM events WHERE type = 'agent.state_changed' AND subject = $1 \
         AND payload->>'to' = 'idle' ORDER BY id",
    )
    .bind(format!("agent:{agent}"))
    .fetch_all(pool)
    .await?;
    Ok(times.iter().map(|t| t.timestamp_nanos_opt().unwrap_or_default() as i128).collect())
}

/// The three engineers' briefs given to `claude -p` at once, each in its own clone of `repo`;
/// the wall time until all three exit.
async fn floor(claude: &Path, url: &str, repo: &Path, home: &Path) -> anyhow::Result<Duration> {
    let clones = tempfile::tempdir()?;
    let mut runs = Vec::new();
    let started = Instant::now();
    for key in ["a", "b", "c"] {
        let clone = clones.path().join(key);
        let status =
            std::process::Command::new("git").args(["clone", "-q", "--shared"]).arg(repo).arg(&clone).status()?;
        anyhow::ensure!(status.success(), "git clone");
        let brief = switchyard::app::conductor::briefs::engineer(
            "Letters",
            "Add a.txt, b.txt and c.txt",
            key,
            &format!("Add {key}.txt saying {key}"),
            &format!("group/letters/{key}"),
            &[],
        );
        let config = home.join(format!("floor-{key}"));
        std::fs::create_dir_all(&config)?;
        let onboarded = json!({"hasCompletedOnboarding": true,
            "projects": {clone.to_string_lossy(): {"hasTrustDialogAccepted": true}}});
        std::fs::write(config.join(".claude.json"), onboarded.to_string())?;
        let mut command = tokio::process::Command::new(claude);
        command
            .args(["-p", &brief, "--allowedTools", "Write", "Bash"])
            .current_dir(&clone)
            .env("ANTHROPIC_BASE_URL", url)
            .env("ANTHROPIC_API_KEY", KEY)
            .env("CLAUDE_CONFIG_DIR", &config)
            .envs(IDENTITY)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        runs.push(command.spawn()?);
    }
    for mut run in runs {
        run.wait().await?;
    }
    Ok(started.elapsed())
}

struct Api<'a> {
    client: &'a reqwest::Client,
    base: String,
    token: &'a str,
}

impl Api<'_> {
    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> anyhow::Result<Value> {
        let response = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(self.token)
            .json(&body)
            .send()
            .await?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        anyhow::ensure!(status.is_success(), "{path}: {status} {text}");
        Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// Polls `path` until `done` holds, for at most [`STEP`].
    async fn wait(&self, what: &str, done: impl Fn(Value) -> bool, path: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + STEP;
        loop {
            let response = self.client.get(format!("{}{path}", self.base)).bearer_auth(self.token).send().await?;
            let value: Value = response.json().await.unwrap_or(Value::Null);
            if done(value.clone()) {
                return Ok(());
            }
            anyhow::ensure!(Instant::now() < deadline, "waiting for {what}: {value}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
