//! A node lost mid-run — its process killed (SIGKILL) and its tmux server with it, as when its
//! machine dies — and a live node on the same database that takes its agents over by itself and
//! finishes the wish: the lost agent redispatched as it stands (same name, group and branch),
//! started afresh from its branch, its task told again; nothing handed to a person.

use std::time::Duration;

use serde_json::{json, Value};

use crate::binary::{switchyard, Served};
use crate::conductor::{wait_for_wish, Fakes};
use crate::helpers::*;

/// Short, so a death is noticed in seconds (six heartbeats missed); both nodes agree on it.
const HEARTBEAT: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "multi_thread")]
async fn a_live_node_takes_over_a_killed_nodes_agents_and_finishes_the_wish() {
    let fakes = Fakes::new();
    // Group `b`'s engineer holds (mid-work) until the test says go, after its node is gone.
    fakes.say("hold-b", "");
    let (url, name) = fresh_database().await;

    // The node that dies: `switchyard serve` as a process of its own, alone at first, so it
    // takes both groups' agents.
    let doomed_dir = tempfile::tempdir().expect("data dir");
    std::fs::write(doomed_dir.path().join("providers.toml"), fakes.providers()).expect("providers");
    let doomed_socket = format!("sy-test-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let mut cmd = switchyard(doomed_dir.path());
    cmd.env("DATABASE_URL", &url)
        .env("SWITCHYARD_TMUX_SOCKET", &doomed_socket)
        .env("SWITCHYARD_HEARTBEAT_MS", HEARTBEAT.as_millis().to_string())
        .env("SWITCHYARD_RECONCILE_MS", "300")
        .env("HOME", doomed_dir.path().join("home"));
    let doomed = Served::start(cmd);
    let client = reqwest::Client::new();
    let token = admin_token(&url).await;
    let post =
        |path: &str, body: Value| client.post(format!("{}{path}", doomed.api)).bearer_auth(&token).json(&body).send();
    let repos = tempfile::tempdir().expect("repos");
    let repo = repos.path().join("omega");
    init_repo(&repo);
    let project = json!({"slug": "omega", "name": "Omega", "repo_path": repo,
                         "conductor_config": {"provider": "fake", "max_agents": 4, "review": "none"}});
    assert_json(post("/api/v1/projects", project).await.expect("project"), 201).await;
    let wish = json!({"slug": "split", "project": "omega", "title": "t",
                      "groups": [{"key": "a", "title": "A"}, {"key": "b", "title": "B"}]});
    assert_json(post("/api/v1/wishes", wish).await.expect("wish"), 201).await;
    post("/api/v1/wishes/split/plan", json!({})).await.expect("plan").error_for_status().expect("planned");

    // Alone, the doomed node finishes `a` and has `b`'s engineer at work in a pane.
    let doomed_node = std::fs::read_to_string(doomed_dir.path().join("node_id")).expect("node id").trim().to_owned();
    let get = |path: String| {
        let (client, api, token) = (client.clone(), doomed.api.clone(), token.clone());
        async move {
            let response = client.get(format!("{api}{path}")).bearer_auth(&token).send().await.expect("get");
            response.json::<Value>().await.expect("json")
        }
    };
    let deadline = std::time::Instant::now() + RUN;
    let engineer = loop {
        let wish = get("/api/v1/wishes/split".into()).await;
        let groups = wish["groups"].as_array().cloned().unwrap_or_default();
        let a_done = groups.iter().any(|g| g["key"] == "a" && g["status"] == "done");
        let b = groups.iter().find(|g| g["key"] == "b" && g["status"] == "in_progress");
        if let (true, Some(name)) = (a_done, b.and_then(|b| b["assignee"].as_str())) {
            let agent = get(format!("/api/v1/agents/{name}")).await;
            if agent["node_id"] == doomed_node.as_str() && agent["tmux_pane"].is_string() {
                break name.to_owned();
            }
        }
        assert!(std::time::Instant::now() < deadline, "`a` done and `b` at work on the doomed node: {wish:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    // The live node joins.
    let live = TestApp::builder()
        .on(url.clone(), name.clone())
        .providers(&fakes.providers())
        .worker(|w| {
            w.conductor = true;
            w.heartbeat_every = HEARTBEAT;
        })
        .spawn()
        .await;

    // Its machine dies: the process without any cleanup, its panes with it.
    doomed.crash();
    end_tmux_server(&doomed_socket);
    fakes.say("go-b", "");

    let done =
        wait_for_wish(&live, "split", "the live node finishes the wish alone", |w| w["status"] == "completed").await;
    assert!(done["groups"].as_array().unwrap().iter().all(|g| g["status"] == "done"), "{done}");
    let b = done["groups"].as_array().unwrap().iter().find(|g| g["key"] == "b").unwrap();
    assert_eq!(b["assignee"], engineer.as_str(), "the same agent carried the group on: {b}");
    let agent = live.agent(&engineer).await;
    assert_ne!(agent["node_id"], doomed_node.as_str(), "it runs on the live node now: {agent}");
    assert_eq!(live.count_events("agent.lost", &format!("agent:{engineer}")).await, 1, "marked lost once");
    let handed: Vec<Value> = sqlx::query_scalar(
        "SELECT payload FROM events WHERE type = 'task.assigned' AND payload->>'assignee' = 'human'",
    )
    .fetch_all(&live.pool)
    .await
    .expect("handoffs");
    assert!(handed.is_empty(), "nothing was handed to a person: {handed:?}");
    // Told its task again in its new session.
    let told: Vec<String> = sqlx::query_scalar(
        "SELECT body FROM messages WHERE recipient_id = (SELECT id FROM agents WHERE name = $1) ORDER BY created_at",
    )
    .bind(&engineer)
    .fetch_all(&live.pool)
    .await
    .expect("messages");
    assert!(told.iter().any(|m| m.contains("starting again on another machine")), "{told:?}");
    let files = git(&repo, &["ls-tree", "--name-only", "wish/split"]);
    assert!(files.contains("a.txt") && files.contains("b.txt"), "both groups' work on the wish's branch: {files}");
}

/// Long enough for agents to spawn, clone, commit and report on a loaded machine.
const RUN: Duration = Duration::from_secs(120);

/// An admin token made in the database, as the first start would print one.
async fn admin_token(url: &str) -> String {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let (_, token) =
        switchyard::db::tokens::create(&mut conn, "test-admin", switchyard::auth::Scope::Admin).await.expect("token");
    token
}
