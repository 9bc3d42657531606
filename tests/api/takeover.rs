//! A node lost mid-run — its process killed (SIGKILL) and its tmux server with it, as when its
//! machine dies, its data directory gone too — and a live node on the same database that takes
//! its agents over by itself and finishes the wish: the lost agent redispatched as it stands
//! (same name, group and branch), started afresh from its branch, its task told again; nothing
//! handed to a person. Both with the project's repository at one path for both nodes, and on a
//! git remote, where each node has its own mirror and the live one picks up the lost agent's
//! pushed work from the remote.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::binary::{switchyard, Served};
use crate::conductor::{wait_for_wish, Fakes};
use crate::git_remote::{mirrors, Remote};
use crate::helpers::*;

/// Short, so a death is noticed in seconds (six heartbeats missed); both nodes agree on it.
const HEARTBEAT: Duration = Duration::from_millis(500);

/// The node that dies: `switchyard serve` as a process of its own, with a data directory and a
/// tmux server of its own, alone on the database at first, so it takes every agent.
struct Doomed {
    served: Served,
    /// Its data directory, until it dies.
    dir: Option<tempfile::TempDir>,
    socket: String,
    node: String,
    token: String,
    client: reqwest::Client,
}

impl Doomed {
    async fn start(fakes: &Fakes, database_url: &str) -> Doomed {
        let dir = tempfile::tempdir().expect("data dir");
        std::fs::write(dir.path().join("providers.toml"), fakes.providers()).expect("providers");
        let socket = format!("sy-test-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let mut cmd = switchyard(dir.path());
        cmd.env("DATABASE_URL", database_url)
            .env("SWITCHYARD_TMUX_SOCKET", &socket)
            .env("SWITCHYARD_HEARTBEAT_MS", HEARTBEAT.as_millis().to_string())
            .env("SWITCHYARD_RECONCILE_MS", "300")
            .env("HOME", dir.path().join("home"));
        let served = Served::start(cmd);
        let node = std::fs::read_to_string(dir.path().join("node_id")).expect("node id").trim().to_owned();
        let token = admin_token(database_url).await;
        Doomed { served, dir: Some(dir), socket, node, token, client: reqwest::Client::new() }
    }

    async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        let url = format!("{}{path}", self.served.api);
        self.client.post(url).bearer_auth(&self.token).json(&body).send().await.expect("post")
    }

    async fn get(&self, path: &str) -> Value {
        let url = format!("{}{path}", self.served.api);
        let response = self.client.get(url).bearer_auth(&self.token).send().await.expect("get");
        response.json().await.expect("json")
    }

    /// Project `project` (`location`: its `repo_path` or `repo_url`) with the fakes as its agents,
    /// and the wish `split` of two parallel groups, `a` and `b`, planned.
    async fn split_wish(&self, project: &str, location: Value) {
        let mut body = json!({"slug": project, "name": project,
                              "conductor_config": {"provider": "fake", "max_agents": 4, "review": "none",
                                                   "keep_clones": true}});
        body.as_object_mut().unwrap().extend(location.as_object().unwrap().clone());
        assert_json(self.post("/api/v1/projects", body).await, 201).await;
        let wish = json!({"slug": "split", "project": project, "title": "t",
                          "groups": [{"key": "a", "title": "A"}, {"key": "b", "title": "B"}]});
        assert_json(self.post("/api/v1/wishes", wish).await, 201).await;
        let planned = self.post("/api/v1/wishes/split/plan", json!({})).await;
        assert!(planned.status().is_success(), "planned: {}", planned.status());
    }

    /// Waits until `a` is done and `b`'s engineer works in a pane here, and `ready` holds of
    /// the wish: the engineer's name.
    async fn engineer_of_b_at_work(&self, ready: impl Fn(&Value) -> bool) -> String {
        let deadline = std::time::Instant::now() + RUN;
        loop {
            let wish = self.get("/api/v1/wishes/split").await;
            let groups = wish["groups"].as_array().cloned().unwrap_or_default();
            let a_done = groups.iter().any(|g| g["key"] == "a" && g["status"] == "done");
            let b = groups.iter().find(|g| g["key"] == "b" && g["status"] == "in_progress");
            if let (true, Some(name)) = (a_done, b.and_then(|b| b["assignee"].as_str())) {
                let agent = self.get(&format!("/api/v1/agents/{name}")).await;
                if agent["node_id"] == self.node.as_str() && agent["tmux_pane"].is_string() && ready(&wish) {
                    return name.to_owned();
                }
            }
            let log = self.served.log();
            assert!(
                std::time::Instant::now() < deadline,
                "`a` done and `b` at work on the doomed node: {wish:#}\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Its machine dies: the process without any cleanup, its panes with it, and its disk out
    /// of reach (its data directory removed: its mirror and clones with it).
    fn die(&mut self) {
        self.kill();
        let dir = self.dir.take().expect("alive until now");
        let path = dir.path().to_owned();
        drop(dir);
        assert!(!path.exists(), "the lost node's data directory is gone: {}", path.display());
    }

    /// SIGKILL to the process, and its tmux server ended (with the agents' processes in it).
    fn kill(&mut self) {
        let _ = self.served.child.kill();
        let _ = self.served.child.wait();
        end_tmux_server(&self.socket);
    }
}

impl Drop for Doomed {
    /// A test that failed before the node died leaves no process (nor its connections) behind.
    fn drop(&mut self) {
        if self.dir.is_some() {
            self.kill();
        }
    }
}

/// The live node that joins: the conductor (and the merge queue if `merging`), the same heartbeat.
async fn live_node(fakes: &Fakes, database: (String, String), merging: bool) -> TestApp {
    TestApp::builder()
        .on(database.0, database.1)
        .providers(&fakes.providers())
        .worker(|w| {
            w.conductor = true;
            w.merge_queue = merging;
            w.heartbeat_every = HEARTBEAT;
        })
        .spawn()
        .await
}

/// What every takeover shows: the same agent carried `b` on the live node, marked lost once,
/// told its task again, and nothing went to a person.
async fn assert_taken_over(live: &TestApp, done: &Value, engineer: &str, doomed_node: &str) {
    assert!(done["groups"].as_array().unwrap().iter().all(|g| g["status"] == "done"), "{done}");
    let b = done["groups"].as_array().unwrap().iter().find(|g| g["key"] == "b").unwrap();
    assert_eq!(b["assignee"], engineer, "the same agent carried the group on: {b}");
    let agent = live.agent(engineer).await;
    assert_ne!(agent["node_id"], doomed_node, "it runs on the live node now: {agent}");
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
    .bind(engineer)
    .fetch_all(&live.pool)
    .await
    .expect("messages");
    assert!(told.iter().any(|m| m.contains("starting again on another machine")), "{told:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_live_node_takes_over_a_killed_nodes_agents_and_finishes_the_wish() {
    let fakes = Fakes::new();
    // Group `b`'s engineer holds (mid-work) until the test says go, after its node is gone.
    fakes.say("hold-b", "");
    let database = fresh_database().await;
    let mut doomed = Doomed::start(&fakes, &database.0).await;
    let repos = tempfile::tempdir().expect("repos");
    let repo = repos.path().join("omega");
    init_repo(&repo);
    doomed.split_wish("omega", json!({"repo_path": repo})).await;

    // Alone, the doomed node finishes `a` and has `b`'s engineer at work in a pane.
    let engineer = doomed.engineer_of_b_at_work(|_| true).await;
    let doomed_node = doomed.node.clone();
    let live = live_node(&fakes, database, false).await;
    doomed.die();
    fakes.say("go-b", "");

    let done =
        wait_for_wish(&live, "split", "the live node finishes the wish alone", |w| w["status"] == "completed").await;
    assert_taken_over(&live, &done, &engineer, &doomed_node).await;
    let files = git(&repo, &["ls-tree", "--name-only", "wish/split"]);
    assert!(files.contains("a.txt") && files.contains("b.txt"), "both groups' work on the wish's branch: {files}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_live_node_takes_a_killed_nodes_agent_over_from_its_pushed_branch_on_a_remote_and_merges_the_wish_there() {
    let remote = Remote::start().await;
    let fakes = Fakes::new();
    // Group `b`'s engineer pushes its work so far (`switchyard group push`), then holds mid-work.
    fakes.say("push-b", "");
    fakes.say("hold-b", "");
    let database = fresh_database().await;
    let mut doomed = Doomed::start(&fakes, &database.0).await;
    doomed.split_wish("far", json!({"repo_url": remote.url()})).await;

    // `b`'s early work is on the remote, on its branch, while its engineer holds.
    let branch_of_b = |wish: &Value| {
        let groups = wish["groups"].as_array().cloned().unwrap_or_default();
        let b = groups.into_iter().find(|g| g["key"] == "b").expect("b");
        b["branch"].as_str().map(str::to_owned)
    };
    let pushed = |wish: &Value| {
        branch_of_b(wish).is_some_and(|branch| remote.files(&branch).contains(&"b-early.txt".to_owned()))
    };
    let engineer = doomed.engineer_of_b_at_work(pushed).await;
    let branch = branch_of_b(&doomed.get("/api/v1/wishes/split").await).expect("b's branch");
    let early = remote.head(&branch).expect("b's branch on the remote");
    let doomed_node = doomed.node.clone();

    let live = live_node(&fakes, database, true).await;
    doomed.die();
    fakes.say("go-b", "");

    let merged =
        wait_for_wish(&live, "split", "the live node merges the wish on the remote", |w| w["status"] == "merged").await;
    assert_taken_over(&live, &merged, &engineer, &doomed_node).await;
    // The agent started again from what it had pushed: its new clone had the early work.
    let found = std::fs::read_to_string(fakes.path().join("found-early-b")).unwrap_or_default();
    assert_eq!(found.trim(), engineer, "the agent started again on its pushed branch");
    // The remote's main has both groups' work and the commit the lost agent pushed.
    let files = remote.files("main");
    for file in ["a.txt", "b.txt", "b-early.txt"] {
        assert!(files.contains(&file.to_owned()), "{file} on the remote's main: {files:?}");
    }
    git(&remote.repo(), &["merge-base", "--is-ancestor", &early, "main"]);
    // The live node worked from its own mirror: the agent's new clone is under its data
    // directory, and its `origin` is that mirror.
    let mirrors = mirrors(&live);
    assert_eq!(mirrors.len(), 1, "{mirrors:?}");
    let agent = live.agent(&engineer).await;
    let clone = Path::new(agent["clone_path"].as_str().expect("a kept clone")).to_owned();
    assert!(clone.starts_with(live._data_dir.path()), "{}", clone.display());
    let origin = git(&clone, &["config", "remote.origin.url"]);
    assert_eq!(Path::new(origin.trim()), mirrors[0], "the clone's origin");
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
