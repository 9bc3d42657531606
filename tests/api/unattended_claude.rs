//! The real Claude Code (the version `./dev deps` pins) doing Switchyard's work unattended,
//! pointed at the scripted model on loopback (`ANTHROPIC_BASE_URL`, a made-up key): it reads
//! the briefs Switchyard types and makes real tool calls — `Write`, `Bash` with git and
//! `switchyard` — in its own clone, offline and deterministic. Skipped, saying why, exactly as
//! `real_clis` is when the CLIs are not installed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{git, spawn_app_with_worker_settings, TestApp};
use crate::real_clis::{agent_clis, screen, start, wait_for, START};
use crate::scripted_model::{Action, ScriptedModel};

/// A made-up key: nothing but the scripted model ever sees it.
const KEY: &str = "sk-ant-switchyard-test-not-a-key-0123456789";

/// Who the agents commit as (a user's own `~/.gitconfig` says it; the tests' home has none).
const IDENTITY: &str = "GIT_AUTHOR_NAME = \"Claude\", GIT_AUTHOR_EMAIL = \"claude@example.com\", \
     GIT_COMMITTER_NAME = \"Claude\", GIT_COMMITTER_EMAIL = \"claude@example.com\"";

/// Providers for Claude Code pointed at `model`: `claude` (the built-in, as the README
/// documents it) with the model's address and a key.
fn providers_toml(bin: &Path, model: &ScriptedModel) -> String {
    let claude = bin.join("claude").to_string_lossy().into_owned();
    format!(
        "[providers.claude]\ncommand = [{claude:?}]\nresume = [{claude:?}, \"--resume\", \"{{session_id}}\"]\n\
         screen_rules = \"claude\"\nsetup = \"claude\"\n\
         env = {{ ANTHROPIC_BASE_URL = {url:?}, ANTHROPIC_API_KEY = {KEY:?}, {IDENTITY} }}\n",
        url = model.url
    )
}

/// An app whose worker runs Claude Code against a fresh scripted model, and the project `alpha`.
async fn app_with_claude(
    tweak: impl FnOnce(&mut switchyard::config::WorkerConfig),
) -> Option<(TestApp, ScriptedModel)> {
    let bin = agent_clis()?;
    let model = ScriptedModel::start().await;
    let app = spawn_app_with_worker_settings(&providers_toml(&bin, &model), tweak).await;
    app.create_project("alpha").await;
    Some((app, model))
}

/// Waits for `check` to hold; on the deadline, fails showing `name`'s screen and what the
/// scripted model answered.
async fn until(app: &TestApp, model: &ScriptedModel, name: &str, what: &str, check: impl Fn() -> bool) {
    let started = Instant::now();
    while !check() {
        if started.elapsed() > START {
            let log: Vec<String> = model.log().iter().map(|l| format!("{:?} {:?}", l.action, l.cue)).collect();
            panic!("timed out waiting for: {what}\n{}\n{}\nmodel: {log:#?}", app.agent(name).await, screen(app, name));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn clone_of(agent: &serde_json::Value) -> PathBuf {
    PathBuf::from(agent["clone_path"].as_str().expect("a clone"))
}

/// Claude Code reads a task's brief from the scripted model and does it with its own tools: a
/// `Write` of the file, a `Bash` that commits it (its `switchyard task done` is refused: no
/// such task, which the agent shrugs off).
#[tokio::test]
async fn claude_code_writes_a_file_and_runs_bash_for_the_scripted_model() {
    let Some((app, model)) = app_with_claude(|_| {}).await else { return };
    // Until the policies are written by Switchyard, the user's own settings allow both tools.
    let home = app._data_dir.path().join("home/.claude");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("settings.json"),
        json!({"permissions": {"allow": ["Write", "Bash"], "defaultMode": "default", "disableAutoMode": "disable"}})
            .to_string(),
    )
    .unwrap();
    start(&app, "fox", "claude").await;
    let fox = wait_for(&app, "fox", "idle", START).await;
    let clone = clone_of(&fox);

    app.send_message("fox", "Your assignment: the task `t`\n\nWhat to do:\nAdd hello.txt\n\nThen report.").await;
    until(&app, &model, "fox", "Claude Code wrote hello.txt and committed it", || {
        clone.join("hello.txt").exists() && git(&clone, &["log", "--format=%s", "-1"]).contains("Add hello.txt")
    })
    .await;
    assert_eq!(std::fs::read_to_string(clone.join("hello.txt")).unwrap(), "hello\n");
    wait_for(&app, "fox", "idle", START).await;
    let actions: Vec<_> = model.log().into_iter().filter_map(|l| l.action).collect();
    assert!(matches!(&actions[0], Action::Write { path, .. } if path == "hello.txt"), "{actions:?}");
    assert!(matches!(&actions[1], Action::Run { command } if command.contains("git commit")), "{actions:?}");
}
