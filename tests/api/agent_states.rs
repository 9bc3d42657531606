//! Agent states that can be trusted: a suspended agent names no dead pane, and an agent's events
//! belong to its project (so a project's webhooks hear about its agents), and an agent whose
//! program is not installed fails saying so instead of looking merely gone.

use serde_json::json;

use crate::helpers::{engineer, eventually, merged, spawn_app, TestApp};
use switchyard::domain::agent::AgentState;

#[tokio::test]
async fn a_suspended_agent_keeps_no_dead_pane_or_pid() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "fox")).await;
    // As a worker would have recorded it when the pane opened.
    sqlx::query("UPDATE agents SET state = 'idle', tmux_pane = '%9', pid = 4242 WHERE name = 'fox'")
        .execute(&app.pool)
        .await
        .expect("a pane");
    let suspended = app.post_ok("/api/v1/agents/fox/suspend", json!({})).await;
    assert_eq!(suspended["state"], "suspended");
    assert_eq!((suspended["tmux_pane"].clone(), suspended["pid"].clone()), (json!(null), json!(null)), "{suspended}");
    assert_eq!(app.agent("fox").await["tmux_pane"], json!(null));
}

#[tokio::test]
async fn a_project_scoped_webhook_is_sent_its_agents_idle_and_stopped_events() {
    let app = TestApp::builder().webhooks(crate::webhooks::test_settings()).spawn().await;
    app.create_project("alpha").await;
    let hook = json!({"url": "http://127.0.0.1:9/hook", "project": "alpha",
        "events": ["on_agent_started", "on_agent_idle", "on_agent_stopped"]});
    let hook = app.post_ok("/api/v1/webhooks", hook).await;
    app.create_agent(engineer("alpha", "fox")).await;
    sqlx::query("UPDATE agents SET state = 'working' WHERE name = 'fox'").execute(&app.pool).await.expect("working");
    // Idle as the worker's observation makes it; then stopped.
    app.post_ok("/api/v1/agents/fox/hooks", json!({"hook_event_name": "Stop"})).await;
    app.post_ok("/api/v1/agents/fox/suspend", json!({})).await;
    let id = hook["id"].as_str().expect("id").to_owned();
    eventually("the webhook's deliveries", std::time::Duration::from_secs(10), || {
        let (pool, id) = (app.pool.clone(), id.clone());
        async move {
            let types: Vec<String> = sqlx::query_scalar(
                "SELECT e.type FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
                 WHERE d.subscription_id = $1::uuid ORDER BY e.id",
            )
            .bind(&id)
            .fetch_all(&pool)
            .await
            .unwrap_or_default();
            types.iter().any(|t| t == "agent.spawned")
                && types.iter().any(|t| t == "agent.state_changed")
                && types.iter().any(|t| t == "agent.stopped")
        }
    })
    .await;
}

#[tokio::test]
async fn an_agent_whose_program_is_not_installed_fails_saying_command_not_found() {
    let app = TestApp::builder()
        .providers("[providers.ghost]\ncommand = [\"switchyard-test-no-such-cli\"]\n")
        .worker(|_| {})
        .spawn()
        .await;
    app.create_project("alpha").await;
    app.create_agent(merged(engineer("alpha", "fox"), json!({"provider": "ghost"}))).await;
    eventually("fox stops", std::time::Duration::from_secs(20), || async {
        app.agent_state("fox").await == AgentState::Error
    })
    .await;
    let fox = app.agent("fox").await;
    let reason = fox["failure_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("command not found: switchyard-test-no-such-cli"), "{fox}");
    assert_eq!(fox["tmux_pane"], json!(null), "no pane was opened");
}

#[tokio::test]
async fn the_explanation_names_the_signal_that_decided_the_state_and_what_the_others_say() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "fox")).await;
    let never = app.get_ok("/api/v1/agents/fox/state/explain").await;
    assert_eq!((never["state"].as_str(), never["since"].clone()), (Some("spawning"), json!(null)), "{never}");
    sqlx::query("UPDATE agents SET state = 'working' WHERE name = 'fox'").execute(&app.pool).await.expect("working");
    app.post_ok("/api/v1/agents/fox/hooks", json!({"hook_event_name": "Stop"})).await;

    let why = app.get_ok("/api/v1/agents/fox/state/explain").await;
    assert_eq!(why["state"], "idle", "{why}");
    assert_eq!((why["decided_by"].as_str(), why["signal"].as_str()), (Some("hook"), Some("Stop")), "{why}");
    assert_eq!(why["from"], "working");
    assert_eq!(why["last_hook"]["state"], "idle");
    assert_eq!(why["screen"], json!(null), "no worker runs here to read the pane");
    let summary = why["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains("decided by a Claude Code hook (Stop)") && summary.contains("cannot be read"),
        "{summary}"
    );
    assert_eq!(app.get("/api/v1/agents/nobody/state/explain").await.status(), 404);

    let dashboard = crate::dashboard::Dashboard::login(&app).await;
    let (_, page) = dashboard.get("/agents/fox").await;
    assert!(page.contains("Why idle:") && page.contains("(Stop)"), "the agent page says it too");
}

#[tokio::test]
async fn a_shell_agent_running_a_quiet_command_is_working_until_the_command_ends() {
    let app = crate::helpers::TestApp::builder().worker(|_| {}).spawn().await;
    app.create_project("alpha").await;
    app.create_agent(merged(engineer("alpha", "kit"), json!({"provider": "shell", "clone": "none"}))).await;
    eventually("the shell is idle at its prompt", std::time::Duration::from_secs(20), || async {
        app.agent_state("kit").await == AgentState::Idle
    })
    .await;
    // A command that prints nothing for a while: the screen is still, the shell is busy.
    let sent = std::time::Instant::now();
    app.post_ok("/api/v1/agents/kit/input", json!({"text": "sleep 12; echo sy-slept"})).await;
    eventually("the command is seen running", std::time::Duration::from_secs(10), || async {
        app.agent_state("kit").await == AgentState::Working
    })
    .await;
    // The explanation reads the shell's screen as the worker does, and names what keeps it busy.
    let why = app.get_ok("/api/v1/agents/kit/state/explain").await;
    assert_eq!(
        (why["screen"]["rules"].as_str(), why["screen"]["foreground"].as_str()),
        (Some("generic"), Some("sleep")),
        "{why}"
    );
    let summary = why["summary"].as_str().unwrap_or_default();
    assert!(summary.contains("`sleep`") && summary.contains("foreground"), "{summary}");
    // Well past the screen's settle time (under a second), it is still working while `sleep` runs.
    let quiet_until = sent + std::time::Duration::from_secs(8);
    while std::time::Instant::now() < quiet_until {
        if app.agent_state("kit").await != AgentState::Working {
            let changes = app.get_ok("/api/v1/events?subject=agent:kit&types=agent.state_changed").await;
            panic!("not working while a command runs: {}", changes["items"]);
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    eventually("idle once the command ends", std::time::Duration::from_secs(20), || async {
        app.agent_state("kit").await == AgentState::Idle
    })
    .await;
}

#[tokio::test]
async fn a_state_the_screen_decided_is_explained_by_its_rule_and_the_line_it_matched() {
    // A provider read with Claude Code's rules that only draws a permission dialog: no hooks,
    // so the screen decides.
    let dialog = format!("{}/tests/fixtures/screens/claude/permission.txt", env!("CARGO_MANIFEST_DIR"));
    let providers = format!(
        "[providers.asker]\ncommand = [\"sh\", \"-c\", \"cat '{dialog}'; exec sleep 600\"]\nscreen_rules = \"claude\"\ninstall_hooks = false\n"
    );
    let app = TestApp::builder().providers(&providers).worker(|_| {}).spawn().await;
    app.create_project("alpha").await;
    app.create_agent(merged(engineer("alpha", "fox"), json!({"provider": "asker", "clone": "none"}))).await;
    eventually("fox asks for permission", std::time::Duration::from_secs(20), || async {
        app.agent_state("fox").await == AgentState::Permission
    })
    .await;
    let why = app.get_ok("/api/v1/agents/fox/state/explain").await;
    assert_eq!(
        (why["decided_by"].as_str(), why["signal"].as_str()),
        (Some("screen"), Some("permission dialog")),
        "{why}"
    );
    assert_eq!(why["line"], "Do you want to proceed?", "{why}");
    assert_eq!(
        (why["screen"]["rule"].as_str(), why["screen"]["line"].as_str()),
        (Some("permission dialog"), Some("Do you want to proceed?")),
        "read now too: {why}"
    );
    // What the dialog asks, read above its options, comes with it.
    let asked = why["detail"].as_str().unwrap_or_default();
    assert!(asked.starts_with("Bash command\nrm -rf target/debug/incremental"), "{why}");
    let summary = why["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains(
            "decided by a screen rule (permission dialog: on the line “Do you want to proceed?”: Bash command"
        ),
        "{summary}"
    );
}
