//! The worker with real tmux (a private socket per test), real git and real PostgreSQL: an agent
//! created through the API gets a pane, its state follows what the pane shows, input arrives
//! literally, and a pane that dies is settled by the reconciler.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::fake_inbox::{prompts, providers_toml};
use crate::helpers::{
    engineer, eventually, id, merged, restart, spawn_app, spawn_app_with_worker, spawn_app_with_worker_settings, stop,
    TestApp,
};

async fn screen(app: &TestApp, name: &str) -> String {
    let response = app.get(&format!("/api/v1/agents/{name}/screen")).await;
    let body: Value = response.json().await.expect("json");
    body["text"].as_str().unwrap_or_default().to_owned()
}

/// A `shell` agent of project `alpha` in its repository, waiting until it has a pane.
async fn shell_agent(app: &TestApp, name: &str) -> Value {
    app.create_agent(merged(engineer("alpha", name), json!({"provider": "shell", "clone": "none"}))).await;
    eventually("the worker gives the agent a pane", Duration::from_secs(15), || async {
        app.agent(name).await["tmux_pane"].is_string()
    })
    .await;
    app.agent(name).await
}

#[tokio::test]
async fn an_agent_gets_a_pane_its_state_follows_the_screen_and_input_arrives_literally() {
    let app = spawn_app_with_worker().await;
    app.create_project("alpha").await;
    let fox = shell_agent(&app, "fox").await;
    let node = app.status().await;
    assert_eq!(fox["node_id"], node["node_id"], "claimed by this node");
    eventually("a quiet shell is idle", Duration::from_secs(15), || async {
        app.agent("fox").await["state"] == "idle"
    })
    .await;

    // `;` and a `C-c` written as text must arrive as text, not as tmux commands or keys.
    let text = "echo 'sy;marker C-c'";
    let sent = app.post("/api/v1/agents/fox/input", json!({"text": text})).await;
    assert_eq!(sent.status(), 200, "{:?}", sent.text().await);
    eventually("the command ran in the pane", Duration::from_secs(10), || async {
        screen(&app, "fox").await.lines().any(|l| l.trim() == "sy;marker C-c")
    })
    .await;

    // A loop printing keeps it working; interrupting it lets it settle back to idle.
    app.post("/api/v1/agents/fox/input", json!({"text": "while true; do date +%N; sleep 0.1; done"})).await;
    eventually("printing is working", Duration::from_secs(10), || async {
        app.agent("fox").await["state"] == "working"
    })
    .await;
    let interrupted = app.admin(Method::POST, "/api/v1/agents/fox/interrupt").send().await.expect("interrupt");
    assert_eq!(interrupted.status(), 200);
    eventually("quiet again is idle", Duration::from_secs(15), || async { app.agent("fox").await["state"] == "idle" })
        .await;

    let changes = app.count_events("agent.state_changed", "agent:fox").await;
    assert!(changes >= 3, "spawning → idle → working → idle each wrote an event ({changes})");
    let status = app.status().await;
    assert_eq!(status["worker"]["control_link_up"], true, "{status}");
    assert_eq!(status["agents"]["idle"], 1, "{status}");
}

#[tokio::test]
async fn a_pane_that_dies_is_settled_within_one_reconcile_and_never_duplicated() {
    let app = spawn_app_with_worker().await;
    app.create_project("alpha").await;
    let owl = shell_agent(&app, "owl").await;
    let window = owl["tmux_window"].as_str().expect("window").to_owned();
    let killed = std::process::Command::new("tmux")
        .args(["-L", &app.tmux_socket, "kill-window", "-t", &window])
        .status()
        .expect("tmux");
    assert!(killed.success());
    // Input to a pane that is gone is the agent's state (409), never a server fault.
    let gone = app.post("/api/v1/agents/owl/input", json!({"text": "hello"})).await;
    assert_eq!(gone.status(), 409, "{:?}", gone.text().await);
    eventually("the vanished pane is settled", Duration::from_secs(10), || async {
        app.agent("owl").await["state"] == "error"
    })
    .await;
    let owl = app.agent("owl").await;
    assert!(owl["failure_reason"].as_str().unwrap_or("").contains("pane"), "{owl}");
    assert_eq!(app.count_events("agent.stopped", "agent:owl").await, 1);

    // Resumed, it gets exactly one new window.
    let resumed = app.admin(Method::POST, "/api/v1/agents/owl/resume").send().await.expect("resume");
    assert_eq!(resumed.status(), 200, "{:?}", resumed.text().await);
    eventually("the resumed agent has a pane again", Duration::from_secs(15), || async {
        app.agent("owl").await["tmux_pane"].is_string()
    })
    .await;
    let windows = std::process::Command::new("tmux")
        .args(["-L", &app.tmux_socket, "list-windows", "-a", "-F", "#{window_name}"])
        .output()
        .expect("tmux");
    let names = String::from_utf8_lossy(&windows.stdout);
    assert_eq!(names.lines().filter(|n| *n == "owl").count(), 1, "{names}");
}

#[tokio::test]
async fn a_quiet_agent_with_work_left_is_nudged_until_it_is_reported_stuck_and_then_left_alone() {
    let logs = tempfile::tempdir().expect("log dir");
    let nudge_after = Duration::from_secs(1);
    let app = spawn_app_with_worker_settings(&providers_toml(logs.path(), &[]), |worker| {
        worker.reconcile_every = Duration::from_millis(200);
        worker.nudge_after = nudge_after;
        worker.max_nudges = 2;
    })
    .await;
    app.create_project("alpha").await;
    for (name, task) in [("owl", Some("port the parser")), ("fox", None)] {
        let fields = json!({"provider": "fake-inbox", "clone": "none", "task": task});
        app.create_agent(merged(engineer("alpha", name), fields)).await;
    }
    eventually("owl is nudged twice, then reported stuck", Duration::from_secs(30), || async {
        app.count_events("agent.stuck", "agent:owl").await == 1
    })
    .await;
    let stuck_at = chrono::Utc::now();
    let nudges = prompts(logs.path(), "owl");
    assert_eq!(nudges.len(), 2, "{nudges:?}");
    assert!(nudges.iter().all(|n| n.starts_with("Are you still working?")), "{nudges:?}");
    let owl = app.agent("owl").await;
    assert_eq!(owl["nudge_count"], 2, "{owl}");
    assert!(owl["last_nudge"].is_string(), "{owl}");

    // A reconcile pass that began after a third nudge would have been due: none came, and the
    // agent with nothing left to do was never nudged.
    let quiet_until = stuck_at + chrono::Duration::from_std(nudge_after * 2).expect("duration");
    eventually("a reconcile pass after the next nudge would be due", Duration::from_secs(10), || async {
        let status = app.status().await;
        let at = status["worker"]["last_reconcile_at"].as_str().unwrap_or_default().to_owned();
        chrono::DateTime::parse_from_rfc3339(&at).is_ok_and(|at| at > quiet_until)
    })
    .await;
    assert_eq!(prompts(logs.path(), "owl").len(), 2);
    assert_eq!(app.count_events("agent.nudged", "agent:owl").await, 2);
    assert!(prompts(logs.path(), "fox").is_empty());
    assert_eq!(app.count_events("agent.nudged", "agent:fox").await, 0);
}

#[tokio::test]
async fn a_node_that_stops_heartbeating_has_its_agents_failed_their_tasks_handed_over_and_its_claims_released() {
    use switchyard::db::agents::{self, Cause};
    use switchyard::domain::agent::{Activity, AgentEvent, AgentState};

    // Set up with no worker running: two agents claimed by another node, one with a pane there.
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_wish(
        json!({"slug": "login", "project": "alpha", "title": "Login", "groups": [{"key": "api", "title": "API"}]}),
    )
    .await;
    let shell = |name: &str| merged(engineer("alpha", name), json!({"provider": "shell", "clone": "none"}));
    let owl = merged(shell("owl"), json!({"wish": "login", "group": "api"}));
    let ids = [id(&app.create_agent(owl).await), id(&app.create_agent(shell("fox")).await)];
    let owl_task = app.agent("owl").await["task_id"].as_str().expect("owl has the group's task").to_owned();
    let mut conn = app.pool.acquire().await.expect("conn");
    switchyard::db::nodes::register(&mut conn, "node-gone", "elsewhere", "worker", chrono::Utc::now())
        .await
        .expect("register");
    assert_eq!(agents::claim_spawning(&mut conn, "node-gone", 10).await.expect("claim").len(), 2);
    agents::record_pane(&mut conn, ids[0], "switchyard-node-gone", "@1", "%1", Some(42), None)
        .await
        .expect("pane")
        .expect("owl");
    let working = AgentEvent::Observed(Activity::Working);
    agents::apply(&mut conn, ids[0], Some(AgentState::Spawning), working, &Cause::from("screen")).await.expect("apply");
    sqlx::query("UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = 'node-gone'")
        .execute(&mut *conn)
        .await
        .expect("stop the heartbeat");
    drop(conn);

    // This node's worker starts and finds node-gone silent.
    let app = restart(stop(app).await).await;
    eventually("owl, out of reach, is failed", Duration::from_secs(15), || async {
        app.agent("owl").await["state"] == "error"
    })
    .await;
    let owl = app.agent("owl").await;
    assert!(owl["failure_reason"].as_str().unwrap_or_default().contains("node-gone"), "{owl}");
    let task = app.task(&owl_task).await;
    assert_eq!(task["assignee"], "human", "{task}");
    let status = app.status().await;
    eventually("fox's claim is released and taken by the live node", Duration::from_secs(15), || async {
        let fox = app.agent("fox").await;
        fox["node_id"] == status["node_id"] && fox["tmux_pane"].is_string()
    })
    .await;
}
