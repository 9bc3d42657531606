//! The real agent CLIs — Claude Code, Codex and Gemini CLI, the pinned versions `./dev deps`
//! installs under `.cache/agent-clis/` — started and read by the worker in real tmux, with
//! Claude Code's real hooks. No vendor is reachable from here: each CLI must reach its prompt
//! without a person (Switchyard prepares its configuration), or say plainly what it needs, and
//! the screen rules must read what it really draws.
//!
//! `SWITCHYARD_AGENT_CLIS` names another bin directory (`./dev clis-latest` runs these tests
//! against `@latest`); with `SWITCHYARD_RECORD_SCREENS=DIR` each screen a test checks is also
//! written to `DIR/<provider>/<name>-<version>.txt` (how `tests/fixtures/screens/` got its real
//! screens, and how `@latest` is compared with them). Skipped, saying why, only when `./dev deps`
//! found the npm registry unreachable.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard::providers::Providers;

use crate::dashboard::Dashboard;
use crate::fake_agent::{state_change_events, state_changes};
use crate::helpers::{assert_json, eventually, git, TestApp};
use crate::scripted_model::ScriptedModel;
use switchyard::domain::agent::AgentState;

/// The CLIs start slowly on a loaded machine (Codex about 8 s alone).
pub(crate) const START: Duration = Duration::from_secs(60);

/// The directory holding `claude`, `codex` and `gemini`; `None` (said on stderr) when npm was
/// unreachable for `./dev deps`.
pub(crate) fn agent_clis() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SWITCHYARD_AGENT_CLIS").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/agent-clis");
    if let Ok(why) = std::fs::read_to_string(cache.join("unreachable")) {
        eprintln!("skipped: {}", why.trim());
        return None;
    }
    let bin = cache.join("node_modules/.bin");
    assert!(bin.join("claude").exists(), "the agent CLIs are not installed in {}: run ./dev deps", cache.display());
    Some(bin)
}

/// TOML for the `env` of a provider outside the sandbox: `HOME` an empty directory of the test
/// run's own, as the sandbox gives its agents. The machine's start-up files are not the tests'
/// business, and here they hurt: `~/.bashrc` runs pyenv's `rehash`, which waits 60 s on a lock
/// file that a shell killed with an earlier test's pane left behind, and Claude Code's and
/// Codex's shells source it before each command.
pub(crate) fn bare_home_env() -> String {
    static HOME: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let home = HOME.get_or_init(|| tempfile::tempdir().expect("a home"));
    format!("HOME = {:?}", home.path().to_string_lossy())
}

/// The CLI's version as it reports it (`2.1.332 (Claude Code)`, `codex-cli 0.169.0`, `0.61.0`).
pub(crate) fn version(bin: &Path, cli: &str) -> String {
    let out = Command::new(bin.join(cli)).arg("--version").output().expect("run --version");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace().find(|w| w.starts_with(|c: char| c.is_ascii_digit())).expect("a version").to_owned()
}

/// A provider's argv as TOML, its program named by its path in `bin` (the pinned CLIs,
/// whatever else is on the PATH).
pub(crate) fn located(bin: &Path, args: &[String]) -> String {
    let mut args = args.to_vec();
    args[0] = bin.join(&args[0]).to_string_lossy().into_owned();
    serde_json::to_string(&args).expect("json is toml here")
}

/// The built-in `claude`, `codex` and `gemini` with their own arguments and the program named by
/// its path in `bin` (the pinned CLIs, whatever else is on the PATH); plus `codex-key` and `gemini-key`: the same
/// CLIs given an API key (a made-up one: nothing is reachable anyway).
pub(crate) fn providers_toml(bin: &Path) -> String {
    let builtin = Providers::builtin();
    let mut toml = String::new();
    for (name, base, key) in [
        ("claude", "claude", ""),
        ("codex", "codex", ""),
        ("gemini", "gemini", ""),
        ("codex-key", "codex", "OPENAI_API_KEY = \"sk-switchyard-test-not-a-key\""),
        ("gemini-key", "gemini", "GEMINI_API_KEY = \"switchyard-test-not-a-key\""),
    ] {
        let provider = builtin.get(base).expect("built in");
        let resume = provider.resume.as_ref().expect("resumable");
        toml.push_str(&format!(
            "[providers.{name}]\ncommand = {}\nresume = {}\nscreen_rules = \"{base}\"\nsetup = \"{base}\"\n\
             env = {{ {key} }}\n\n",
            located(bin, &provider.command),
            located(bin, resume),
        ));
    }
    toml
}

async fn app_with_real_clis() -> Option<(TestApp, PathBuf)> {
    let bin = agent_clis()?;
    let app = TestApp::builder().providers(&providers_toml(&bin)).worker(|_| {}).spawn().await;
    app.create_project("alpha").await;
    Some((app, bin))
}

/// An agent in its own clone of the project (as the conductor starts them).
pub(crate) async fn start(app: &TestApp, name: &str, provider: &str) {
    app.create_agent(json!({"name": name, "project": "alpha", "kind": "worker", "role": "engineer",
        "provider": provider, "clone": "agent"}))
        .await;
}

/// Waits for `state`, failing at once should the agent land in another state it cannot leave.
pub(crate) async fn wait_for(app: &TestApp, name: &str, state: &str, within: Duration) -> Value {
    wait_watching(app, name, state, "", within).await.0
}

/// Waits for `state` as [`wait_for`] does, and returns the last screen its window showed on the
/// way that held `words` (the window of an agent that stopped is gone when the state says so).
pub(crate) async fn wait_watching(
    app: &TestApp,
    name: &str,
    state: &str,
    words: &str,
    within: Duration,
) -> (Value, String) {
    let started = Instant::now();
    let mut last = String::new();
    loop {
        let now = screen(app, name);
        if now.contains(words) {
            last = now;
        }
        let agent = app.agent(name).await;
        if agent["state"] == state {
            return (agent, last);
        }
        let settled = ["error", "done", "suspended"].contains(&agent["state"].as_str().unwrap_or_default());
        if (settled && state != "spawning") || started.elapsed() >= within {
            let (now, story) = (screen(app, name), story(app, name).await);
            panic!("{name} is {} waiting for {state} ({within:?}): {agent}\n{story}\n{now}", agent["state"]);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the agent's usage shows the tokens the scripted model reported in `answers` (the
/// requests its CLI records in its session log), and returns that usage: one model, named,
/// and no provider left unreported.
pub(crate) async fn wait_for_usage(app: &TestApp, name: &str, answers: &[crate::scripted_model::Logged]) -> Value {
    assert!(!answers.is_empty(), "the model answered");
    let input: u64 = answers.iter().map(|l| l.usage.input_tokens).sum();
    let output: u64 = answers.iter().map(|l| l.usage.output_tokens).sum();
    let started = Instant::now();
    loop {
        let usage = app.agent(name).await["usage"].clone();
        if usage["input_tokens"] == input && usage["output_tokens"] == output {
            assert_eq!(usage["unreported"], json!([]), "{usage}");
            let models = usage["models"].as_array().expect("models");
            assert_eq!(models.len(), 1, "{usage}");
            let model = models[0]["model"].as_str().expect("a model");
            assert!(!model.is_empty() && model != "unknown", "{usage}");
            assert_eq!(
                (models[0]["input_tokens"].clone(), models[0]["output_tokens"].clone()),
                (json!(input), json!(output))
            );
            return usage;
        }
        assert!(
            started.elapsed() < START,
            "{name}'s usage never showed {input} input and {output} output tokens: {usage}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every state change of the agent with its source and reason, one a line: what a failure says.
pub(crate) async fn story(app: &TestApp, name: &str) -> String {
    state_change_events(app, name).await.iter().map(Value::to_string).collect::<Vec<_>>().join("\n")
}

/// How long after `since` the agent became `state` (polled every 20 ms).
pub(crate) async fn latency(app: &TestApp, name: &str, state: &str, since: Instant, within: Duration) -> Duration {
    wait_for(app, name, state, within).await;
    since.elapsed()
}

pub(crate) fn tmux(app: &TestApp, args: &[&str]) -> String {
    let out = Command::new("tmux").arg("-L").arg(&app.tmux_socket).args(args).output().expect("tmux");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The agent's window's screen now (empty when it has none).
pub(crate) fn screen(app: &TestApp, name: &str) -> String {
    let panes = tmux(app, &["list-panes", "-a", "-F", "#{window_name}\t#{pane_id}"]);
    let Some(pane) = panes.lines().find_map(|l| l.strip_prefix(&format!("{name}\t"))) else {
        return String::new();
    };
    tmux(app, &["capture-pane", "-p", "-t", pane])
}

/// The start command of the agent's window.
pub(crate) fn start_command(app: &TestApp, name: &str) -> String {
    let panes = tmux(app, &["list-panes", "-a", "-F", "#{window_name}\t#{pane_start_command}"]);
    panes.lines().find_map(|l| l.strip_prefix(&format!("{name}\t"))).unwrap_or_default().to_owned()
}

/// Policy `ask`: `run` (a command line for a file name) asks a person, and the answer through
/// the API does what it says: the option labelled "No" runs nothing and the agent goes on;
/// option 1 (labelled `yes`…) runs it.
pub(crate) async fn no_means_no_and_yes_runs(app: &TestApp, name: &str, run: impl Fn(&str) -> String, yes: &str) {
    let clone = PathBuf::from(app.agent(name).await["clone_path"].as_str().expect("a clone"));
    let chosen = |answered: &Value| answered["chosen"]["label"].as_str().unwrap_or_default().to_owned();

    app.send_message(name, &run("no.txt")).await;
    let agent = wait_for(app, name, "permission", START).await;
    let asked = screen_shows(app, name, "python3").await;
    eprintln!("{name} asks:\n{asked}");
    let options = switchyard::detect::prompt::options(&asked);
    let no = options.iter().find(|o| o.label.starts_with("No"));
    let no = no.unwrap_or_else(|| panic!("a No: {options:?}\n{agent}\n{asked}"));
    let input = format!("/api/v1/agents/{name}/input");
    let answered = app.post(&input, json!({"option": no.number.parse::<u32>().unwrap()})).await;
    let answered = crate::helpers::assert_json(answered, 200).await;
    assert!(chosen(&answered).starts_with("No"), "{answered}");
    wait_for(app, name, "idle", START).await;
    assert!(!clone.join("no.txt").exists(), "No ran it");

    app.send_message(name, &run("yes.txt")).await;
    wait_for(app, name, "permission", START).await;
    let answered = app.post(&input, json!({"option": 1})).await;
    let answered = crate::helpers::assert_json(answered, 200).await;
    assert!(chosen(&answered).starts_with(yes), "{answered}");
    crate::helpers::eventually("Yes ran it", START, || async { clone.join("yes.txt").exists() }).await;
    wait_for(app, name, "idle", START).await;
}

/// Waits for the agent's screen to show `text`, and returns the screen.
pub(crate) async fn screen_shows(app: &TestApp, name: &str, text: &str) -> String {
    let started = Instant::now();
    loop {
        let now = screen(app, name);
        if now.contains(text) {
            return now;
        }
        assert!(started.elapsed() < START, "{name}'s screen does not show {text:?}:\n{now}\n{}", app.agent(name).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes `text` to `$SWITCHYARD_RECORD_SCREENS/<provider>/<name>-<version>.txt` when recording.
pub(crate) fn record(provider: &str, name: &str, version: &str, text: &str) {
    let Some(dir) = std::env::var_os("SWITCHYARD_RECORD_SCREENS").filter(|d| !d.is_empty()) else { return };
    let dir = PathBuf::from(dir).join(provider);
    std::fs::create_dir_all(&dir).expect("recording directory");
    let text = text.trim_end_matches('\n').to_owned() + "\n";
    std::fs::write(dir.join(format!("{name}-{version}.txt")), text).expect("record the screen");
}

pub(crate) async fn type_text(app: &TestApp, name: &str, text: &str) {
    let response = app.post(&format!("/api/v1/agents/{name}/input"), json!({"text": text})).await;
    if response.status() != 200 {
        let agent = app.agent(name).await;
        panic!(
            "typing {text:?}: {} {}\n{agent}\n{}",
            response.status(),
            response.text().await.unwrap_or_default(),
            screen(app, name)
        );
    }
}

pub(crate) async fn act(app: &TestApp, name: &str, action: &str) -> Value {
    assert_json(app.post(&format!("/api/v1/agents/{name}/{action}"), json!({})).await, 200).await
}

/// The overview's "Needs you" panel, as the dashboard shows it.
pub(crate) async fn needs_panel(app: &TestApp) -> String {
    let dashboard = Dashboard::login(app).await;
    let (status, html) = dashboard.get("/?block=needs").await;
    assert_eq!(status, 200);
    html
}

#[tokio::test]
async fn claude_code_starts_at_its_prompt_its_real_hook_confirms_a_message_and_not_logged_in_is_an_error() {
    let Some((app, bin)) = app_with_real_clis().await else { return };
    let v = version(&bin, "claude");
    let started = Instant::now();
    start(&app, "fox", "claude").await;

    // No onboarding, no "Is this a project you trust?": straight to the prompt.
    let up = latency(&app, "fox", "idle", started, START).await;
    let idle = screen_shows(&app, "fox", "Not logged in").await;
    for dialog in ["trust", "Do you want", "Unable to connect", "Choose the text style"] {
        assert!(!idle.contains(dialog), "a dialog a person would answer: {dialog:?}\n{idle}");
    }
    record("claude", "idle-start-not-logged-in", &v, &idle);
    eprintln!("claude {v}: spawn to idle {up:?}");
    // Under bubblewrap, as the built-in is wherever it is installed: its config, hooks and
    // node_modules all work inside.
    assert!(start_command(&app, "fox").contains("bwrap --unshare-user"), "{}", start_command(&app, "fox"));

    // A message is typed, and Claude Code's own UserPromptSubmit hook confirms it.
    let sent = Instant::now();
    let message = app.send_message("fox", "Summarise the README in one line.").await;
    let delivered = app.delivered(message, START).await;
    assert_eq!(delivered["confirmed_by"], "hook", "{delivered}");
    let confirmed = sent.elapsed();

    // Offline and not logged in, its answer stops it: error, in its own words.
    let (fox, last) = wait_watching(&app, "fox", "error", "Please run /login", START).await;
    let to_error = sent.elapsed();
    record("claude", "fatal-not-logged-in", &v, &last);
    let reason = fox["failure_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("Not logged in") && reason.contains("/login"), "{fox}");
    eprintln!("claude {v}: message to hook-confirmed {confirmed:?}, to error {to_error:?} ({reason})");
    let changes = state_changes(&app, "fox").await;
    assert!(changes.ends_with(&["working".to_owned(), "error".to_owned()]), "{changes:?}");

    // The overview says which provider needs what.
    let needs = needs_panel(&app).await;
    assert!(needs.contains("needs a login") && needs.contains("claude"), "{needs}");
    assert!(needs.contains("Not logged in · Please run /login"), "{needs}");

    // Resumed, it continues the session it failed in (the prompt is in its transcript) and,
    // still not logged in, says so again.
    // Offline, the resumed session may fail again and its window go within a second: the
    // window is watched from the moment of the resume, not after it.
    let prompt = "Summarise the README in one line.";
    let watch = async {
        let started = Instant::now();
        loop {
            let (command, now) = (start_command(&app, "fox"), screen(&app, "fox"));
            if command.contains("--resume") && now.contains(prompt) {
                return (command, now);
            }
            assert!(started.elapsed() < START, "the resumed window never showed {prompt:?}:\n{now}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let (_, (command, transcript)) = tokio::join!(act(&app, "fox", "resume"), watch);
    assert!(
        command.contains("--resume") && command.contains(fox["provider_session_id"].as_str().unwrap()),
        "{command}"
    );
    record("claude", "fatal-resumed-not-logged-in", &v, &transcript);
    let again = wait_for(&app, "fox", "error", START).await;
    let reason = again["failure_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("Not logged in"), "{reason:?}\n{}", story(&app, "fox").await);
}

#[tokio::test]
async fn claude_code_is_interrupted_suspended_and_resumed_with_its_session() {
    let Some((app, bin)) = app_with_real_clis().await else { return };
    let v = version(&bin, "claude");
    start(&app, "owl", "claude").await;
    wait_for(&app, "owl", "idle", START).await;

    // A shell command in bash mode keeps it busy without a model.
    type_text(&app, "owl", "!sleep 600").await;
    let typed = Instant::now();
    let busy = latency(&app, "owl", "working", typed, START).await;
    let working = screen_shows(&app, "owl", "Running…").await;
    record("claude", "working-bash-mode", &v, &working);

    let pressed = Instant::now();
    act(&app, "owl", "interrupt").await;
    let stopped = latency(&app, "owl", "idle", pressed, Duration::from_secs(20)).await;
    record("claude", "idle-interrupted", &v, &screen(&app, "owl"));
    eprintln!("claude {v}: typed to working {busy:?}; interrupt to idle {stopped:?}");

    let owl = act(&app, "owl", "suspend").await;
    let session = owl["provider_session_id"].as_str().expect("a session id").to_owned();
    wait_for(&app, "owl", "suspended", START).await;
    eventually("owl's window is gone", START, || async { screen(&app, "owl").is_empty() }).await;

    // Its session is in its own config directory, and the resumed pane continues it.
    let sessions = app._data_dir.path().join("agents/owl/claude/projects");
    let stored = walk(&sessions).into_iter().any(|p| p.ends_with(format!("{session}.jsonl")));
    assert!(stored, "no {session}.jsonl under {}", sessions.display());
    act(&app, "owl", "resume").await;
    wait_for(&app, "owl", "idle", START).await;
    let command = start_command(&app, "owl");
    assert!(command.contains("--resume") && command.contains(&session), "{command}");
    let resumed = screen_shows(&app, "owl", "Not logged in").await;
    assert!(!resumed.contains("No conversation found"), "{resumed}");
    record("claude", "idle-resumed", &v, &resumed);
}

/// Every file under `dir`.
pub(crate) fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.flatten().flat_map(|e| if e.path().is_dir() { walk(&e.path()) } else { vec![e.path()] }).collect()
}

/// A CLI with neither a login nor a key (`provider`) says so: the agent is `error` with
/// `words` in its reason and the overview says the provider needs a login. Given an API key
/// (`keyed`), the same CLI starts at its prompt without a dialog, works on a message (it waits
/// for the network) until interrupted, and is idle again.
async fn needs_a_login_or_starts_with_a_key(provider: &str, keyed: &str, words: &str, busy: &str) {
    let Some((app, bin)) = app_with_real_clis().await else { return };
    let v = version(&bin, provider);
    start(&app, "fox", provider).await;
    let (fox, last) = wait_watching(&app, "fox", "error", words, START).await;
    record(provider, "fatal-sign-in", &v, &last);
    assert!(fox["failure_reason"].as_str().unwrap_or_default().contains(words), "{fox}");

    let started = Instant::now();
    start(&app, "owl", keyed).await;
    let up = latency(&app, "owl", "idle", started, START).await;
    let idle = screen(&app, "owl");
    // No trust dialog (Gemini CLI's footer may say the clone is "untrusted": that is ours).
    assert!(!idle.contains("Do you trust") && !idle.contains("Folder access"), "{idle}");
    record(provider, "idle-start-api-key", &v, &idle);

    let sent = Instant::now();
    let message = app.send_message("owl", "Summarise the README in one line.").await;
    let delivered = app.delivered(message, START).await;
    let (took, confirmed_by) = (sent.elapsed(), delivered["confirmed_by"].clone());
    let working = latency(&app, "owl", "working", sent, START).await;
    record(provider, "working-offline", &v, &screen_shows(&app, "owl", busy).await);
    let pressed = Instant::now();
    act(&app, "owl", "interrupt").await;
    let stopped = latency(&app, "owl", "idle", pressed, Duration::from_secs(20)).await;
    record(provider, "idle-interrupted", &v, &screen(&app, "owl"));
    eprintln!(
        "{provider} {v}: spawn to idle {up:?}; message delivered in {took:?} (confirmed by {confirmed_by}), \
         working {working:?} after sending; interrupt to idle {stopped:?}"
    );

    let needs = needs_panel(&app).await;
    assert!(needs.contains(provider) && needs.contains("needs a login"), "{needs}");
}

#[tokio::test]
async fn codex_says_it_needs_a_sign_in_and_with_an_api_key_starts_works_and_is_interrupted() {
    needs_a_login_or_starts_with_a_key("codex", "codex-key", "Sign in", "esc to interrupt").await;
}

#[tokio::test]
async fn gemini_says_it_needs_a_sign_in_and_with_an_api_key_starts_works_and_is_interrupted() {
    needs_a_login_or_starts_with_a_key("gemini", "gemini-key", "authenticate", "esc to cancel").await;
}

/// The conductor with the providers as the README documents them (the built-in `claude`): the
/// engineer it dispatches is real Claude Code, started without a person in its own clone, where
/// `CLAUDE.md` (kept out of its commits) tells it how to report; its brief arrives as its first
/// message, confirmed by Claude Code's own hook. Offline and not logged in, it says so, and the
/// group goes to a person with Claude Code's words.
#[tokio::test]
async fn the_conductor_gives_a_group_to_real_claude_code_which_gets_its_brief_and_hands_back_needing_a_login() {
    let Some(bin) = agent_clis() else { return };
    let app = TestApp::builder().providers(&providers_toml(&bin)).worker(|w| w.conductor = true).spawn().await;
    app.create_project("alpha").await;
    app.patch_ok("/api/v1/projects/alpha", json!({"conductor_config": {"provider": "claude", "review": "none"}})).await;
    app.create_wish(json!({"slug": "hello", "project": "alpha", "title": "Say hello",
        "groups": [{"key": "greet", "title": "Greeting", "goal": "Add hello.txt saying hello"}]}))
        .await;
    app.post_ok("/api/v1/wishes/hello/plan", json!({})).await;

    let group = |wish: &Value| wish["groups"][0].clone();
    let deadline = Instant::now() + START;
    let name = loop {
        let wish = app.get_ok("/api/v1/wishes/hello").await;
        if let Some(name) = group(&wish)["assignee"].as_str() {
            break name.to_owned();
        }
        assert!(Instant::now() < deadline, "the group has no engineer: {wish}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_ne!(name, "human");
    let agent = wait_for(&app, &name, "idle", START).await;
    assert_eq!(agent["provider"], "claude");

    // Its clone is on the group's branch, and tells it how to report, outside its commits.
    let clone = PathBuf::from(agent["clone_path"].as_str().expect("a clone"));
    assert_eq!(git(&clone, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(), "group/hello/greet");
    let standing = std::fs::read_to_string(clone.join("CLAUDE.md")).expect("CLAUDE.md in the clone");
    assert!(standing.contains("switchyard group done") && standing.contains("switchyard group blocked"), "{standing}");
    assert!(git(&clone, &["status", "--porcelain"]).trim().is_empty(), "CLAUDE.md is not a change to commit");

    // Its first message is the brief, and Claude Code's UserPromptSubmit hook confirms it.
    let brief: uuid::Uuid = sqlx::query_scalar(
        "SELECT m.id FROM messages m JOIN agents a ON a.id = m.recipient_id WHERE a.name = $1 ORDER BY m.seq LIMIT 1",
    )
    .bind(&name)
    .fetch_one(&app.pool)
    .await
    .expect("a brief");
    let delivered = app.delivered(brief, START).await;
    assert_eq!(delivered["confirmed_by"], "hook", "{delivered}");
    assert!(delivered["body"].as_str().unwrap_or_default().contains("Add hello.txt saying hello"), "{delivered}");

    // Not logged in: the agent is in error in its own words, and the group waits for a person.
    eventually("the group is handed to a person", START, || async {
        group(&app.get_ok("/api/v1/wishes/hello").await)["assignee"] == "human"
    })
    .await;
    let human = |e: &Value| e["payload"]["assignee"] == "human";
    let handed = app.events_until("types=task.assigned&limit=50", "the hand-off", |e| e.iter().any(human)).await;
    let reason = handed.iter().find(|e| human(e)).unwrap()["payload"]["reason"].as_str().unwrap().to_owned();
    assert!(reason.contains("Not logged in"), "{reason}");
    assert_eq!(app.agent_state(&name).await, AgentState::Error);
}

/// Waits for `check` to hold; on the deadline, fails showing `name`'s story, screen and what
/// the scripted model answered.
pub(crate) async fn until(app: &TestApp, model: &ScriptedModel, name: &str, what: &str, check: impl Fn() -> bool) {
    let started = Instant::now();
    while !check() {
        if started.elapsed() > START {
            let log: Vec<String> = model.log().iter().map(|l| format!("{:?} {:?}", l.action, l.results)).collect();
            panic!(
                "timed out waiting for: {what}\n{}\n{}\n{}\nmodel: {log:#?}",
                app.agent(name).await,
                story(app, name).await,
                screen(app, name)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
