//! The worker driving a fake Claude Code (`tests/fake_agent/fake-claude.sh`, a custom provider
//! read with Claude Code's screen rules): it plays the recorded screens in the fixtures README's
//! order and sends each step's hook through the real `switchyard hook`. The registry follows it
//! state by state, the agent's task waits for a person while it asks, a usage limit suspends it
//! until the reset and the worker resumes it, and a restarted worker neither loses nor doubles it.

use std::process::Command;
use std::time::Duration;

use reqwest::Method;
use serde_json::json;

use crate::helpers::{assert_json, eventually, restart, stop, TestApp};
use switchyard::domain::task::TaskStatus;

/// The fake agent as a provider; its resume command passes `resumed`.
pub(crate) fn providers_toml() -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let script = format!("{root}/tests/fake_agent/fake-claude.sh");
    format!(
        r#"[providers.fake-claude]
command = ["{script}"]
resume = ["{script}", "resumed"]
screen_rules = "claude"
install_hooks = false
env = {{ FAKE_SCREENS = "{root}/tests/fixtures/screens/claude", SWITCHYARD_BIN = "{bin}" }}
"#,
        bin = env!("CARGO_BIN_EXE_switchyard")
    )
}

/// `tmux` on the app's private server.
fn tmux(socket: &str, args: &[&str]) -> String {
    let out = Command::new("tmux").arg("-L").arg(socket).args(args).output().expect("tmux");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every window on the app's tmux server with its pane's start command: `name\tcommand`.
fn windows(socket: &str) -> Vec<(String, String)> {
    tmux(socket, &["list-panes", "-a", "-F", "#{window_name}\t#{pane_start_command}"])
        .lines()
        .filter_map(|l| l.split_once('\t').map(|(n, c)| (n.to_owned(), c.to_owned())))
        .collect()
}

/// Tells the fake agent to go on to its next screen, by typing a line into its pane.
pub(crate) async fn go_on(app: &TestApp, name: &str) {
    assert_json(app.post(&format!("/api/v1/agents/{name}/input"), json!({"text": "go on"})).await, 200).await;
}

pub(crate) async fn wait_for_state(app: &TestApp, name: &str, state: &str) {
    eventually(&format!("{name} is {state}"), Duration::from_secs(15), || async {
        app.agent(name).await["state"] == state
    })
    .await;
}

/// A project with a one-group wish, and a fake Claude Code agent on that group's started task;
/// returns the task id once the agent has a pane.
pub(crate) async fn fake_agent_on_a_task(app: &TestApp, name: &str) -> String {
    app.create_project("alpha").await;
    app.create_wish(
        json!({"slug": "login", "project": "alpha", "title": "Login", "groups": [{"key": "api", "title": "API"}]}),
    )
    .await;
    app.start_wish("login").await;
    let created = app
        .create_agent(json!({"name": name, "project": "alpha", "kind": "worker", "role": "engineer",
            "provider": "fake-claude", "clone": "none", "wish": "login", "group": "api"}))
        .await;
    let task = created["task_id"].as_str().expect("the agent works on the group's task").to_owned();
    assert_json(app.send(Method::POST, "/api/v1/wishes/login/groups/api/start", None).await, 200).await;
    eventually("the worker gives the agent a pane", Duration::from_secs(15), || async {
        app.agent(name).await["tmux_pane"].is_string()
    })
    .await;
    task
}

/// The states the fake agent's first seven steps show, and its task's status at each.
const STEPS: [(&str, &str); 7] = [
    ("idle", "in_progress"),
    ("working", "in_progress"),
    ("permission", "waiting_input"),
    ("working", "in_progress"),
    ("question", "waiting_input"),
    ("working", "in_progress"),
    ("idle", "in_progress"),
];

/// Plays the fake agent from its first screen to its final idle one, checking each step.
async fn play_to_idle(app: &TestApp, name: &str, task: &str) {
    for (step, (state, task_wants)) in STEPS.iter().enumerate() {
        if step > 0 {
            go_on(app, name).await;
        }
        wait_for_state(app, name, state).await;
        // The task moves in the same transaction as the state: no window where they disagree.
        assert_eq!(app.task(task).await["status"], *task_wants, "step {}: {state}", step + 1);
    }
}

/// The states the agent changed to, in order.
pub(crate) async fn state_changes(app: &TestApp, name: &str) -> Vec<String> {
    let changes = state_change_events(app, name).await;
    changes.iter().map(|c| c["to"].as_str().unwrap_or_default().to_owned()).collect()
}

/// The agent's `agent.state_changed` payloads (from, to, source, detail, …), in order.
pub(crate) async fn state_change_events(app: &TestApp, name: &str) -> Vec<serde_json::Value> {
    sqlx::query_scalar("SELECT payload FROM events WHERE type = 'agent.state_changed' AND subject = $1 ORDER BY id")
        .bind(format!("agent:{name}"))
        .fetch_all(&app.pool)
        .await
        .expect("events")
}

/// Waits until the worker's status has shown `n` different reconcile times.
async fn reconcile_passes(app: &TestApp, n: usize) {
    let seen = std::sync::Mutex::new(Vec::new());
    eventually(&format!("{n} reconcile passes"), Duration::from_secs(10), || async {
        let at = app.status().await["worker"]["last_reconcile_at"].clone();
        let mut seen = seen.lock().expect("lock");
        if !at.is_null() && !seen.contains(&at) {
            seen.push(at);
        }
        seen.len() >= n
    })
    .await;
}

#[tokio::test]
async fn a_fake_claude_code_goes_through_each_state_in_order_and_its_task_waits_while_it_asks() {
    let app = TestApp::builder().providers(&providers_toml()).worker(|_| {}).spawn().await;
    let task = fake_agent_on_a_task(&app, "fox").await;
    play_to_idle(&app, "fox", &task).await;

    // Each step is one state change, in order: no flapping between them.
    let expected: Vec<String> = STEPS.iter().map(|(s, _)| (*s).to_owned()).collect();
    assert_eq!(state_changes(&app, "fox").await, expected);
    let sources: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT payload->>'source' FROM events WHERE type = 'agent.state_changed' AND subject = 'agent:fox'",
    )
    .fetch_all(&app.pool)
    .await
    .expect("events");
    assert!(sources.iter().any(|s| s == "hook"), "the hooks sent through `switchyard hook` counted: {sources:?}");
    let asked = app.count_events("task.asked", &format!("task:{task}")).await;
    assert_eq!(asked, 2, "asked once for the permission and once for the question");
}

#[tokio::test]
async fn a_usage_limit_suspends_the_agent_until_the_reset_and_the_worker_resumes_its_session() {
    let app = TestApp::builder().providers(&providers_toml()).worker(|_| {}).spawn().await;
    let task = fake_agent_on_a_task(&app, "fox").await;
    play_to_idle(&app, "fox", &task).await;

    // The next screen: "You've hit your limit · resets in 3 seconds".
    go_on(&app, "fox").await;
    wait_for_state(&app, "fox", "suspended").await;
    let fox = app.agent("fox").await;
    let until: chrono::DateTime<chrono::Utc> =
        fox["suspended_until"].as_str().expect("suspended_until").parse().expect("a time");
    let from_now = until - chrono::Utc::now();
    assert!(from_now <= chrono::Duration::seconds(4), "the reset the screen named: {until}");
    eventually("the suspended agent's window is gone", Duration::from_secs(10), || async {
        !windows(&app.tmux_socket).iter().any(|(name, _)| name == "fox")
    })
    .await;

    // After the reset the worker resumes it: spawning, a pane running the resume command, idle.
    eventually("the agent is resumed with a pane", Duration::from_secs(20), || async {
        let fox = app.agent("fox").await;
        fox["state"] == "idle" && fox["tmux_pane"].is_string()
    })
    .await;
    assert!(chrono::Utc::now() >= until, "not resumed before the reset");
    let changes = state_changes(&app, "fox").await;
    assert_eq!(changes[STEPS.len()..], ["suspended", "spawning", "idle"], "{changes:?}");
    let fox_windows: Vec<_> = windows(&app.tmux_socket).into_iter().filter(|(name, _)| name == "fox").collect();
    assert_eq!(fox_windows.len(), 1, "{fox_windows:?}");
    assert!(fox_windows[0].1.contains("resumed"), "started with the resume command: {fox_windows:?}");
}

#[tokio::test]
async fn a_restarted_worker_keeps_its_agents_panes_and_states_and_reports_a_stray_window_once() {
    let app = TestApp::builder().providers(&providers_toml()).worker(|_| {}).spawn().await;
    let task = fake_agent_on_a_task(&app, "fox").await;
    wait_for_state(&app, "fox", "idle").await;
    go_on(&app, "fox").await;
    wait_for_state(&app, "fox", "working").await;
    let before = app.agent("fox").await;
    let node = app.status().await["node_id"].as_str().expect("node id").to_owned();

    let stopped = stop(app).await;
    // While no worker runs, a window appears that no agent owns.
    let session = format!("switchyard-{node}");
    let made = Command::new("tmux")
        .args(["-L", &stopped.tmux_socket, "new-window", "-d", "-t", &format!("{session}:"), "-n", "stray"])
        .args(["sh", "-c", "while :; do sleep 60; done"])
        .status()
        .expect("tmux");
    assert!(made.success());
    let app = restart(stopped).await;
    assert_eq!(app.status().await["node_id"], node.as_str(), "the same node");

    let orphans = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM events WHERE type = 'agent.orphan_found'")
            .fetch_one(&app.pool)
            .await
            .expect("events")
    };
    eventually("the stray window is reported", Duration::from_secs(10), || async { orphans().await == 1 }).await;
    // A few more reconcile passes must neither report it again nor touch the agent.
    reconcile_passes(&app, 4).await;
    assert_eq!(orphans().await, 1, "reported once");
    let names: Vec<String> = windows(&app.tmux_socket).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names.iter().filter(|n| *n == "stray").count(), 1, "never killed: {names:?}");
    assert_eq!(names.iter().filter(|n| *n == "fox").count(), 1, "no duplicate window: {names:?}");
    let after = app.agent("fox").await;
    assert_eq!((&after["tmux_pane"], &after["state"]), (&before["tmux_pane"], &before["state"]), "{after}");
    let agents: i64 = sqlx::query_scalar("SELECT count(*) FROM agents").fetch_one(&app.pool).await.expect("count");
    assert_eq!(agents, 1);
    assert_eq!(app.task_status(&task).await, TaskStatus::InProgress);

    // Another restart does not report the same stray window again.
    let app = restart(stop(app).await).await;
    reconcile_passes(&app, 2).await;
    let reported: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE type = 'agent.orphan_found'")
        .fetch_one(&app.pool)
        .await
        .expect("events");
    assert_eq!(reported, 1, "still reported once after another restart");

    // The new worker watches the pane it kept: the next screen asks for permission.
    go_on(&app, "fox").await;
    wait_for_state(&app, "fox", "permission").await;
    // The task follows in the same transaction as the state.
    assert_eq!(app.task_status(&task).await, TaskStatus::WaitingInput);
    assert_eq!(app.agent("fox").await["tmux_pane"], before["tmux_pane"]);
}
