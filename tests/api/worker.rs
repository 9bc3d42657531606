//! The worker with real tmux (a private socket per test), real git and real PostgreSQL: an agent
//! created through the API gets a pane, its state follows what the pane shows, input arrives
//! literally, and a pane that dies is settled by the reconciler.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};
use switchyard::domain::agent::AgentState;

use crate::fake_inbox::{prompts, providers_toml};
use crate::helpers::{assert_problem, engineer, eventually, id, merged, restart, spawn_app, stop, TestApp};

async fn screen(app: &TestApp, name: &str) -> String {
    let response = app.get(&format!("/api/v1/agents/{name}/screen")).await;
    let body: Value = response.json().await.expect("json");
    body["text"].as_str().unwrap_or_default().to_owned()
}

/// A `shell` agent of project `alpha` in its repository, waiting until it has a pane.
pub async fn shell_agent(app: &TestApp, name: &str) -> Value {
    app.create_agent(merged(engineer("alpha", name), json!({"provider": "shell", "clone": "none"}))).await;
    eventually("the worker gives the agent a pane", Duration::from_secs(15), || async {
        app.agent(name).await["tmux_pane"].is_string()
    })
    .await;
    app.agent(name).await
}

#[tokio::test]
async fn an_agent_gets_a_pane_its_state_follows_the_screen_and_input_arrives_literally() {
    let app = TestApp::builder().worker(|_| {}).spawn().await;
    app.create_project("alpha").await;
    let fox = shell_agent(&app, "fox").await;
    let node = app.status().await;
    assert_eq!(fox["node_id"], node["node_id"], "claimed by this node");
    eventually("a quiet shell is idle", Duration::from_secs(15), || async {
        app.agent_state("fox").await == AgentState::Idle
    })
    .await;
    let metrics = app.client.get(format!("{}/metrics", app.status_address)).send().await.expect("metrics");
    let metrics = metrics.text().await.expect("text");
    let idle_shells = r#"switchyard_agents{state="idle",provider="shell"} 1"#;
    assert!(metrics.lines().any(|l| l == idle_shells), "this node's agents by state and provider: {metrics}");

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
        app.agent_state("fox").await == AgentState::Working
    })
    .await;
    let interrupted = app.admin(Method::POST, "/api/v1/agents/fox/interrupt").send().await.expect("interrupt");
    assert_eq!(interrupted.status(), 200);
    eventually("quiet again is idle", Duration::from_secs(15), || async {
        app.agent_state("fox").await == AgentState::Idle
    })
    .await;

    let changes = app.count_events("agent.state_changed", "agent:fox").await;
    assert!(changes >= 3, "spawning → idle → working → idle each wrote an event ({changes})");
    let status = app.status().await;
    assert_eq!(status["worker"]["control_link_up"], true, "{status}");
    assert_eq!(status["agents"]["idle"], 1, "{status}");
}

#[tokio::test]
async fn input_is_text_and_keys_are_pressed_only_by_name() {
    let app = TestApp::builder().worker(|_| {}).spawn().await;
    app.create_project("alpha").await;
    shell_agent(&app, "kit").await;
    eventually("the shell is idle at its prompt", Duration::from_secs(15), || async {
        app.agent_state("kit").await == AgentState::Idle
    })
    .await;
    let refused = [
        (json!({"text": "true \u{1b}[201~echo pwned\n"}), "text"),
        (json!({"text": "\u{3}"}), "text"),
        (json!({"keys": ["Enter", "C-c; kill-server"]}), "keys[1]"),
        (json!({"text": "echo pwned", "keys": ["Enter"]}), "keys"),
        (json!({"keys": ["Enter"], "submit": true}), "submit"),
        (json!({}), "text"),
    ];
    for (body, field) in refused {
        let problem = assert_problem(app.post("/api/v1/agents/kit/input", body.clone()).await, 422).await;
        assert_eq!(problem["errors"][0]["field"], field, "{body}: {problem}");
    }

    // Typed without Enter, it waits in the line; the key `Enter` runs it.
    let typed =
        app.post_ok("/api/v1/agents/kit/input", json!({"text": "echo sy-keys-$((6*7))", "submit": false})).await;
    assert_eq!((&typed["bytes"], &typed["submitted"]), (&json!(21), &json!(false)), "{typed}");
    eventually("the text waits in the input line", Duration::from_secs(10), || async {
        screen(&app, "kit").await.contains("echo sy-keys-$((6*7))")
    })
    .await;
    let pressed = app.post_ok("/api/v1/agents/kit/input", json!({"keys": ["Enter"]})).await;
    assert_eq!(pressed["keys"], json!(["Enter"]), "{pressed}");
    eventually("the typed command ran on Enter", Duration::from_secs(10), || async {
        screen(&app, "kit").await.lines().any(|l| l.trim() == "sy-keys-42")
    })
    .await;
    let shown = screen(&app, "kit").await;
    assert!(!shown.contains("pwned"), "nothing refused reached the pane: {shown}");
}

#[tokio::test]
async fn a_pane_that_dies_is_settled_within_one_reconcile_and_never_duplicated() {
    let app = TestApp::builder().worker(|_| {}).spawn().await;
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
        app.agent_state("owl").await == AgentState::Error
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
    let app = TestApp::builder()
        .providers(&providers_toml(logs.path(), &[]))
        .worker(|worker| {
            worker.reconcile_every = Duration::from_millis(200);
            worker.nudge_after = nudge_after;
            worker.max_nudges = 2;
        })
        .spawn()
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
    // Each nudge is recorded before it is typed: the second reaches the pane just after.
    eventually("both nudges reach owl's pane", Duration::from_secs(10), || async {
        prompts(logs.path(), "owl").len() >= 2
    })
    .await;
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
async fn a_node_that_stops_heartbeating_has_its_agents_taken_over_by_a_live_node_and_its_claims_released() {
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

    // This node's worker starts and finds node-gone silent: it takes owl over (lost there, started
    // again here with its group) and fox's claim, never spawned there, back to the queue.
    let app = restart(stop(app).await).await;
    let status = app.status().await;
    for name in ["owl", "fox"] {
        eventually(&format!("{name} runs on the live node"), Duration::from_secs(30), || async {
            let agent = app.agent(name).await;
            agent["node_id"] == status["node_id"] && agent["tmux_pane"].is_string()
        })
        .await;
    }
    assert_eq!(app.count_events("agent.lost", "agent:owl").await, 1, "owl was lost once, on node-gone");
    let task = app.task(&owl_task).await;
    assert!(task["assignee"] != "human" && task["status"] != "failed", "the group is not handed to a person: {task}");
}

/// This app's worker, built by hand so a test drives its loops one tick at a time (the app runs
/// no worker of its own): quick message settle and confirmation, on the app's tmux socket.
fn worker_of(app: &TestApp, data_dir: &std::path::Path) -> switchyard::worker::fleet::Fleet {
    use switchyard::worker::fleet::{session_name, Fleet};
    let node = switchyard::node::NodeInfo::load(data_dir).expect("node id");
    Fleet {
        session: session_name(&node),
        db: app.pool.clone(),
        tmux: switchyard::tmux::Tmux::new(app.tmux_socket.clone()).expect("tmux"),
        node,
        role: "worker",
        api_socket: None,
        // As the test apps' shells: without the machine's dotfiles (see helpers' `quiet_shells`).
        providers: switchyard::providers::LiveProviders::fixed(
            switchyard::providers::Providers::parse(
                "[providers.shell]\ncommand = [\"bash\", \"--norc\", \"--noprofile\"]",
            )
            .expect("providers"),
        ),
        settings: switchyard::worker::WorkerConfig {
            message_settle: Duration::from_millis(50),
            message_confirm: Duration::from_secs(3),
            nice_sessions: false,
            ..Default::default()
        },
        api_url: app.address.clone(),
        data_dir: data_dir.to_path_buf(),
        health: Default::default(),
        feed: switchyard::feed::EventFeed::default(),
    }
}

/// A `shell` agent named `name` in a new project, not yet claimed by any node.
async fn waiting_shell_agent(app: &TestApp, name: &str) -> uuid::Uuid {
    app.create_project("alpha").await;
    let body = merged(engineer("alpha", name), json!({"provider": "shell", "clone": "none"}));
    id(&app.create_agent(body).await)
}

#[tokio::test]
async fn one_fleet_tick_reconciles_then_claims_and_spawns_and_one_reconciler_tick_settles_a_vanished_pane() {
    use switchyard::worker::reconciler::Reconciler;

    let app = spawn_app().await;
    waiting_shell_agent(&app, "fox").await;
    let data_dir = tempfile::tempdir().expect("data dir");
    let fleet = worker_of(&app, data_dir.path());
    let (db, feed, tmux, session) = (fleet.db.clone(), fleet.feed.clone(), fleet.tmux.clone(), fleet.session.clone());
    let (node_id, providers) = (fleet.node.node_id.clone(), fleet.providers.clone());
    let mut fleet = fleet.start().await;

    let tick = fleet.tick().await;
    let reconciled = tick.reconciled.as_ref().expect("the first tick reconciles");
    assert_eq!((reconciled.settled, reconciled.spawned, reconciled.error.as_deref()), (0, 0, None), "{tick:?}");
    assert_eq!(tick.spawned, 1, "{tick:?}");
    let fox = app.agent("fox").await;
    assert_eq!(fox["node_id"], node_id.as_str(), "{fox}");
    let window = fox["tmux_window"].as_str().expect("a window").to_owned();
    // Nothing more waits: the next tick neither reconciles (not due) nor spawns.
    let tick = fleet.tick().await;
    assert_eq!((tick.reconciled.is_none(), tick.spawned), (true, 0), "{tick:?}");
    drop(fleet);

    tmux.kill_window(&window).await.expect("kill the window");
    let mut reconciler = Reconciler::new(db, feed, tmux, session, node_id, providers).await;
    let outcome = reconciler.tick().await.expect("reconcile");
    assert_eq!(outcome.settled.len(), 1, "{outcome:?}");
    assert_eq!(outcome.settled[0].0, "fox");
    assert_eq!(app.agent_state("fox").await, AgentState::Error, "a shell cannot be resumed");
    let again = reconciler.tick().await.expect("reconcile");
    assert!(again.settled.is_empty() && again.to_spawn.is_empty() && again.orphans.is_empty(), "{again:?}");
}

#[tokio::test]
async fn a_mailbox_tick_starts_one_delivery_per_agent_and_a_delivery_tick_delivers_the_next_message() {
    use switchyard::db::agents::{apply, Cause};
    use switchyard::domain::agent::{Activity, AgentEvent, AgentState};
    use switchyard::domain::message::Confirmation;
    use switchyard::worker::delivery::{Delivery, Outcome};
    use switchyard::worker::mailbox::{Mailbox, Tick};

    let app = spawn_app().await;
    let fox = waiting_shell_agent(&app, "fox").await;
    let data_dir = tempfile::tempdir().expect("data dir");
    let fleet = worker_of(&app, data_dir.path());
    let (typist, node_id) = (
        switchyard::app::local_panes::Typist {
            tmux: fleet.tmux.clone(),
            settle: fleet.settings.message_settle,
            confirm: fleet.settings.message_confirm,
        },
        fleet.node.node_id.clone(),
    );
    let delivery = Delivery { db: app.pool.clone(), typist: typist.clone(), feed: fleet.feed.clone() };
    let mut running = fleet.start().await;
    assert_eq!(running.tick().await.spawned, 1);
    drop(running);
    // No watcher runs: the test says the shell is idle, once its prompt shows.
    let pane = app.agent("fox").await["tmux_pane"].as_str().expect("pane").to_owned();
    eventually("the shell's prompt shows", Duration::from_secs(10), || async {
        typist.input_line(&pane).await.is_ok_and(|line| !line.is_empty())
    })
    .await;
    let mut conn = app.pool.acquire().await.expect("conn");
    let idle = AgentEvent::Observed(Activity::Idle);
    apply(&mut conn, fox, Some(AgentState::Spawning), idle, &Cause::from("screen")).await.expect("idle");
    drop(conn);

    let first = app.send_message("fox", "echo first-$((6*7))").await;
    let second = app.send_message("fox", "echo second-$((6*7))").await;
    let mut mailbox = Mailbox::new(delivery.clone(), node_id.clone());
    let tick = mailbox.tick().await.expect("tick");
    assert_eq!(tick.started, 1, "one delivery at a time per agent: {tick:?}");
    assert_eq!(mailbox.finished().await, Some(true), "the first message is delivered");
    assert_eq!(app.message(first).await["state"], "delivered");
    assert_eq!(app.message(second).await["state"], "pending", "the mailbox took one step only");

    let outcome = delivery.tick(&node_id, fox).await.expect("delivery tick");
    assert_eq!(outcome, Some(Outcome::Delivered(Confirmation::Screen)));
    assert_eq!(app.message(second).await["state"], "delivered");
    assert_eq!(delivery.tick(&node_id, fox).await.expect("delivery tick"), None, "nothing is due any more");
    assert_eq!(mailbox.tick().await.expect("tick"), Tick::default());
    let text = screen_of(&typist, &pane).await;
    assert_eq!(text.lines().filter(|l| l.trim() == "first-42").count(), 1, "{text}");
    assert_eq!(text.lines().filter(|l| l.trim() == "second-42").count(), 1, "{text}");
}

async fn screen_of(typist: &switchyard::app::local_panes::Typist, pane: &str) -> String {
    typist.tmux.capture(pane, 100).await.expect("capture")
}

#[tokio::test]
async fn last_activity_follows_the_panes_output_while_it_prints() {
    let app = TestApp::builder().worker(|_| {}).spawn().await;
    app.create_project("alpha").await;
    shell_agent(&app, "fox").await;
    eventually("the shell is idle", Duration::from_secs(15), || async {
        app.agent_state("fox").await == AgentState::Idle
    })
    .await;
    let long_ago = || async {
        sqlx::query("UPDATE agents SET last_activity = '2001-01-01Z' WHERE name = 'fox'")
            .execute(&app.pool)
            .await
            .expect("age it");
    };
    let recent = || async {
        let at = app.agent("fox").await["last_activity"].as_str().unwrap_or_default().to_owned();
        at.parse::<chrono::DateTime<chrono::Utc>>()
            .is_ok_and(|at| chrono::Utc::now() - at < chrono::Duration::seconds(30))
    };
    long_ago().await;
    app.post("/api/v1/agents/fox/input", json!({"text": "while true; do date +%N; sleep 0.2; done"})).await;
    eventually("output moved last_activity", Duration::from_secs(10), recent).await;
    // Output that goes on keeps moving it (throttled to once every 5 s, not only the first burst).
    long_ago().await;
    eventually("later output moved it again", Duration::from_secs(12), recent).await;
    app.admin(Method::POST, "/api/v1/agents/fox/interrupt").send().await.expect("interrupt");
}
