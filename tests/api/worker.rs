//! The worker with real tmux (a private socket per test), real git and real PostgreSQL: an agent
//! created through the API gets a pane, its state follows what the pane shows, input arrives
//! literally, and a pane that dies is settled by the reconciler.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{eventually, spawn_app_with_worker, TestApp};
use crate::projects::create_project;

async fn agent(app: &TestApp, name: &str) -> Value {
    app.admin(Method::GET, &format!("/api/v1/agents/{name}")).send().await.expect("get").json().await.expect("json")
}

async fn screen(app: &TestApp, name: &str) -> String {
    let response = app.admin(Method::GET, &format!("/api/v1/agents/{name}/screen")).send().await.expect("screen");
    let body: Value = response.json().await.expect("json");
    body["text"].as_str().unwrap_or_default().to_owned()
}

/// A `shell` agent in the project's repository, waiting until it has a pane.
async fn shell_agent(app: &TestApp, project: &str, name: &str) -> Value {
    let response = app
        .admin(Method::POST, "/api/v1/agents")
        .json(&json!({"name": name, "project": project, "kind": "worker", "role": "engineer",
            "provider": "shell", "clone": "none"}))
        .send()
        .await
        .expect("create");
    assert_eq!(response.status(), 201, "{:?}", response.text().await);
    eventually("the worker gives the agent a pane", Duration::from_secs(15), || async {
        agent(app, name).await["tmux_pane"].is_string()
    })
    .await;
    agent(app, name).await
}

#[tokio::test]
async fn an_agent_gets_a_pane_its_state_follows_the_screen_and_input_arrives_literally() {
    let app = spawn_app_with_worker().await;
    let (project, _repo) = create_project(&app, "alpha").await;
    let project = project["slug"].as_str().expect("slug").to_owned();
    let fox = shell_agent(&app, &project, "fox").await;
    let node: Value =
        app.client.get(format!("{}/status", app.status_address)).send().await.expect("s").json().await.expect("j");
    assert_eq!(fox["node_id"], node["node_id"], "claimed by this node");
    eventually("a quiet shell is idle", Duration::from_secs(15), || async {
        agent(&app, "fox").await["state"] == "idle"
    })
    .await;

    // `;` and a `C-c` written as text must arrive as text, not as tmux commands or keys.
    let text = "echo 'sy;marker C-c'";
    let sent =
        app.admin(Method::POST, "/api/v1/agents/fox/input").json(&json!({"text": text})).send().await.expect("input");
    assert_eq!(sent.status(), 200, "{:?}", sent.text().await);
    eventually("the command ran in the pane", Duration::from_secs(10), || async {
        screen(&app, "fox").await.lines().any(|l| l.trim() == "sy;marker C-c")
    })
    .await;

    // A loop printing keeps it working; interrupting it lets it settle back to idle.
    app.admin(Method::POST, "/api/v1/agents/fox/input")
        .json(&json!({"text": "while true; do date +%N; sleep 0.1; done"}))
        .send()
        .await
        .expect("input");
    eventually("printing is working", Duration::from_secs(10), || async {
        agent(&app, "fox").await["state"] == "working"
    })
    .await;
    let interrupted = app.admin(Method::POST, "/api/v1/agents/fox/interrupt").send().await.expect("interrupt");
    assert_eq!(interrupted.status(), 200);
    eventually("quiet again is idle", Duration::from_secs(15), || async {
        agent(&app, "fox").await["state"] == "idle"
    })
    .await;

    let changes: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE type = 'agent.state_changed' AND subject = 'agent:fox'")
            .fetch_one(&app.pool)
            .await
            .expect("events");
    assert!(changes >= 3, "spawning → idle → working → idle each wrote an event ({changes})");
    let status: Value =
        app.client.get(format!("{}/status", app.status_address)).send().await.expect("status").json().await.expect("j");
    assert_eq!(status["worker"]["control_link_up"], true, "{status}");
    assert_eq!(status["agents"]["idle"], 1, "{status}");
}

#[tokio::test]
async fn a_pane_that_dies_is_settled_within_one_reconcile_and_never_duplicated() {
    let app = spawn_app_with_worker().await;
    let (project, _repo) = create_project(&app, "alpha").await;
    let project = project["slug"].as_str().expect("slug").to_owned();
    let owl = shell_agent(&app, &project, "owl").await;
    let window = owl["tmux_window"].as_str().expect("window").to_owned();
    let killed = std::process::Command::new("tmux")
        .args(["-L", &app.tmux_socket, "kill-window", "-t", &window])
        .status()
        .expect("tmux");
    assert!(killed.success());
    // Input to a pane that is gone is the agent's state (409), never a server fault.
    let gone = app
        .admin(Method::POST, "/api/v1/agents/owl/input")
        .json(&json!({"text": "hello"}))
        .send()
        .await
        .expect("input");
    assert_eq!(gone.status(), 409, "{:?}", gone.text().await);
    eventually("the vanished pane is settled", Duration::from_secs(10), || async {
        agent(&app, "owl").await["state"] == "error"
    })
    .await;
    let owl = agent(&app, "owl").await;
    assert!(owl["failure_reason"].as_str().unwrap_or("").contains("pane"), "{owl}");
    let stopped: i64 =
        sqlx::query_scalar("SELECT count(*) FROM events WHERE type = 'agent.stopped' AND subject = 'agent:owl'")
            .fetch_one(&app.pool)
            .await
            .expect("events");
    assert_eq!(stopped, 1);

    // Resumed, it gets exactly one new window.
    let resumed = app.admin(Method::POST, "/api/v1/agents/owl/resume").send().await.expect("resume");
    assert_eq!(resumed.status(), 200, "{:?}", resumed.text().await);
    eventually("the resumed agent has a pane again", Duration::from_secs(15), || async {
        agent(&app, "owl").await["tmux_pane"].is_string()
    })
    .await;
    let windows = std::process::Command::new("tmux")
        .args(["-L", &app.tmux_socket, "list-windows", "-a", "-F", "#{window_name}"])
        .output()
        .expect("tmux");
    let names = String::from_utf8_lossy(&windows.stdout);
    assert_eq!(names.lines().filter(|n| *n == "owl").count(), 1, "{names}");
}
