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
//!
//! `BENCH_TIMELINE=1` also prints the wish's events from its plan to its merge, each with its time
//! after the plan: where the wish's time beyond the floor goes. `BENCH_CLAUDE_DEBUG=DIR` has every
//! Claude Code (the agents' and the floor's) write its debug log in DIR.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use switchyard::worker::WorkerConfig;

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
    // The merge queue never moves a branch under a working tree: the target is not checked out.
    let detached = std::process::Command::new("git")
        .args(["-c", "advice.detachedHead=false", "checkout", "-q", "--detach"])
        .current_dir(repo.path())
        .status()?;
    anyhow::ensure!(detached.success(), "git checkout --detach");
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
    let mut ids = Vec::new();
    for turn in 0..turns {
        let before = idle_events(&app.pool, "turns").await?;
        let sent =
            api.call(reqwest::Method::POST, "/messages", json!({"to": "turns", "body": format!("Say hello ({turn})")}));
        let sent = sent.await?;
        queued.push(now_ns());
        ids.push(sent["id"].as_str().unwrap_or_default().to_owned());
        let deadline = Instant::now() + STEP;
        while idle_events(&app.pool, "turns").await? <= before {
            anyhow::ensure!(Instant::now() < deadline, "turn {turn}: the agent never went idle again");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let stamps = read_trace(&trace)?;
    let idles = idle_times(&app.pool, "turns").await?;
    let mut to_prompt = Vec::new();
    let (mut to_paste, mut to_enter, mut enter_to_prompt) = (Vec::new(), Vec::new(), Vec::new());
    let mut to_idle = Vec::new();
    for (turn, &q) in queued.iter().enumerate() {
        let next = queued.get(turn + 1).copied().unwrap_or(i128::MAX);
        let prompt = stamps.iter().find(|s| s.event == "UserPromptSubmit" && s.at >= q && s.at < next);
        let stop = stamps.iter().find(|s| s.event == "Stop" && s.at >= q && s.at < next);
        if let Some(prompt) = prompt {
            to_prompt.push(((prompt.at - q) / 1_000) as u64);
            if let Some((pasted, entered)) = delivery_steps(&app.pool, &ids[turn]).await? {
                to_paste.push(((pasted - q).max(0) / 1_000) as u64);
                to_enter.push(((entered - pasted).max(0) / 1_000) as u64);
                enter_to_prompt.push(((prompt.at - entered).max(0) / 1_000) as u64);
            }
        }
        if let Some(stop) = stop {
            if let Some(idle) = idles.iter().find(|&&i| i >= stop.at) {
                to_idle.push(((idle - stop.at) / 1_000) as u64);
            }
        }
    }
    for figures in [&mut to_prompt, &mut to_paste, &mut to_enter, &mut enter_to_prompt, &mut to_idle] {
        figures.sort_unstable();
    }
    println!("turns measured: {} of {turns}", to_prompt.len().min(to_idle.len()));
    println!(
        "message queued -> UserPromptSubmit hook: p50 {:.0} ms, p95 {:.0} ms (target p95 <= 300 ms)",
        common::percentile_ms(&to_prompt, 0.5),
        common::percentile_ms(&to_prompt, 0.95)
    );
    for (part, figures) in [
        ("  of which queued -> pasted", &to_paste),
        ("  pasted -> Enter (the paste drawn)", &to_enter),
        ("  Enter -> the hook (Claude Code's)", &enter_to_prompt),
    ] {
        println!(
            "{part:<41}p50 {:.0} ms, p95 {:.0} ms",
            common::percentile_ms(figures, 0.5),
            common::percentile_ms(figures, 0.95)
        );
    }
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
    let planned_at = chrono::Utc::now();
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
    if std::env::var_os("BENCH_TIMELINE").is_some() {
        timeline(&app.pool, planned_at).await?;
        hook_timeline(&trace, planned_at)?;
        model_timeline(&model, planned_at);
    }
    let _ = common::tmux(&socket, &["kill-server"]);
    app.stop().await
}

/// With `BENCH_TIMELINE` set: the wish's story from its plan to its merge, each event's time after
/// the plan (agents' states, messages, groups, the wish, the merge queue), to see where the wish's
/// time beyond the floor goes.
async fn timeline(pool: &sqlx::PgPool, since: chrono::DateTime<chrono::Utc>) -> anyhow::Result<()> {
    let events: Vec<(chrono::DateTime<chrono::Utc>, String, String, Value)> =
        sqlx::query_as("SELECT created_at, type, subject, payload FROM events WHERE created_at >= $1 ORDER BY id")
            .bind(since)
            .fetch_all(pool)
            .await?;
    for (at, kind, subject, payload) in events {
        let to = payload["to"].as_str().or_else(|| payload["status"].as_str()).unwrap_or_default();
        println!("  +{:>5} ms  {kind} {subject} {to}", (at - since).num_milliseconds());
    }
    // Each brief's delivery steps: pasted, Enter recorded, delivered (confirmed).
    type Steps = (
        String,
        Option<chrono::DateTime<chrono::Utc>>,
        Option<chrono::DateTime<chrono::Utc>>,
        Option<chrono::DateTime<chrono::Utc>>,
    );
    let briefs: Vec<Steps> = sqlx::query_as(
        "SELECT recipient, pasted_at, submitted_at, delivered_at FROM messages WHERE created_at >= $1 ORDER BY created_at",
    )
    .bind(since)
    .fetch_all(pool)
    .await?;
    let ms = |at: Option<chrono::DateTime<chrono::Utc>>| at.map_or(-1, |at| (at - since).num_milliseconds());
    for (to, pasted, entered, delivered) in briefs {
        println!(
            "  brief to {to}: pasted +{} ms, Enter +{} ms, delivered +{} ms",
            ms(pasted),
            ms(entered),
            ms(delivered)
        );
    }
    Ok(())
}

/// With `BENCH_TIMELINE` set: each hook the wish's agents ran and each report they made (its
/// start and end, stamped by the wrapper), after the plan: where the engineers' turns spend
/// their time.
fn hook_timeline(trace: &Path, since: chrono::DateTime<chrono::Utc>) -> anyhow::Result<()> {
    let since = since.timestamp_nanos_opt().unwrap_or_default() as i128;
    let text = std::fs::read_to_string(trace).unwrap_or_default();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(at), Some(agent)) = (words.next().and_then(|w| w.parse::<i128>().ok()), words.next()) else {
            continue;
        };
        if at >= since {
            println!("  +{:>5} ms  hook {agent} {}", (at - since) / 1_000_000, words.next().unwrap_or_default());
        }
    }
    Ok(())
}

/// With `BENCH_TIMELINE` set: each request the scripted model answered after the plan (the
/// wish's, then the floor's), with the start of its prompt and how many tool results it carried.
fn model_timeline(model: &scripted_model::ScriptedModel, since: chrono::DateTime<chrono::Utc>) {
    let since = since.timestamp_nanos_opt().unwrap_or_default() as i128;
    for logged in model.log() {
        let at = logged.at.duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or_default();
        if at >= since {
            let prompt: String = scripted_model::script::unframed(&logged.prompt).chars().take(40).collect();
            let prompt = prompt.replace('\n', " ");
            println!("  +{:>5} ms  model {prompt:?} after {} results", (at - since) / 1_000_000, logged.results.len());
        }
    }
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
    // `BENCH_CLAUDE_DEBUG=DIR`: each agent's Claude Code writes its debug log there.
    let debug = match std::env::var("BENCH_CLAUDE_DEBUG") {
        Ok(dir) if !dir.is_empty() => format!("\"--debug-file\", {:?}, ", format!("{dir}/{{session_id}}.log")),
        _ => String::new(),
    };
    format!(
        "[providers.claude]\ncommand = [{claude:?}, {debug}\"--session-id\", \"{{session_id}}\"]\n\
         resume = [{claude:?}, \"--resume\", \"{{session_id}}\"]\nsandbox = \"none\"\nnice = 0\n\
         env = {{ ANTHROPIC_BASE_URL = {url:?}, ANTHROPIC_API_KEY = {KEY:?}, PATH = {path:?}, {} }}\n",
        identity.join(", ")
    )
}

/// `--debug-file BENCH_CLAUDE_DEBUG/<name>.log` when that is set, for the floor's runs.
fn debug_file(name: &str) -> Vec<String> {
    match std::env::var("BENCH_CLAUDE_DEBUG") {
        Ok(dir) if !dir.is_empty() => vec!["--debug-file".into(), format!("{dir}/{name}.log")],
        _ => Vec::new(),
    }
}

/// `<dir>/bin/switchyard`: stamps each hook's start (ns since the epoch, agent, hook event) and
/// end (`<event>-exit`) in `trace`, and the start and end of any other command the agents run
/// (`group-done`, `group-done-exit`), then runs the real binary with the same input. A hook's
/// run ends the script: the real binary runs once.
fn hook_stamper(dir: &Path, trace: &Path) -> anyhow::Result<PathBuf> {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin)?;
    let real = env!("CARGO_BIN_EXE_switchyard");
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = hook ]; then\n  at=$(date +%s%N)\n  input=$(cat)\n\
         event=$(printf '%s' \"$input\" | sed -n 's/.*\"hook_event_name\" *: *\"\\([A-Za-z]*\\)\".*/\\1/p')\n\
         echo \"$at $SWITCHYARD_AGENT $event\" >> '{trace}'\n  printf '%s' \"$input\" | '{real}' \"$@\"\n\
         echo \"$(date +%s%N) $SWITCHYARD_AGENT $event-exit\" >> '{trace}'\n  exit 0\nfi\n\
         echo \"$(date +%s%N) $SWITCHYARD_AGENT $1-$2\" >> '{trace}'\n'{real}' \"$@\"\nstatus=$?\n\
         echo \"$(date +%s%N) $SWITCHYARD_AGENT $1-$2-exit\" >> '{trace}'\nexit $status\n",
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

/// When the message `id` was pasted and when its (last) Enter was pressed, ns since the epoch.
async fn delivery_steps(pool: &sqlx::PgPool, id: &str) -> anyhow::Result<Option<(i128, i128)>> {
    type At = Option<chrono::DateTime<chrono::Utc>>;
    let steps: Option<(At, At)> = sqlx::query_as("SELECT pasted_at, submitted_at FROM messages WHERE id::text = $1")
        .bind(id)
        .fetch_optional(pool)
        .await?;
    let ns = |t: chrono::DateTime<chrono::Utc>| t.timestamp_nanos_opt().unwrap_or_default() as i128;
    Ok(match steps {
        Some((Some(pasted), Some(entered))) => Some((ns(pasted), ns(entered))),
        _ => None,
    })
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
        let brief = switchyard::domain::briefs::engineer(
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
            .args(debug_file(&format!("floor-{key}")))
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
