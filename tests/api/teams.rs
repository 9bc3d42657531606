//! Teams with a real project repository: the team's clone is a real `git clone --shared` on the
//! team's new branch, made by the worker that spawns its first agent (the team is then pinned to
//! that node: other nodes leave its agents alone), agents spawned into the team work in it,
//! disbanding keeps unmerged work unless forced, the lifecycle refuses illegal moves, and the chat
//! keeps its order.

use std::path::PathBuf;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_json, assert_problem, engineer, eventually, git, merged, repo_of, spawn_app, TestApp};
use switchyard::domain::agent::AgentState;

async fn team(app: &TestApp, name: &str) -> Value {
    app.get_ok(&format!("/api/v1/teams/{name}")).await
}

/// A project `alpha` over a repository with one commit on `main`, and a team `login` made from
/// it; returns the repository and the team.
async fn login_team(app: &TestApp) -> (PathBuf, Value) {
    let repo = repo_of(&app.create_project("alpha").await);
    let made = app.post("/api/v1/teams", json!({"name": "login", "project": "alpha", "base_branch": "main"})).await;
    (repo, assert_json(made, 201).await)
}

/// A shell agent `name` in team `login`; answers once the worker made the team's clone for it.
async fn team_member(app: &TestApp, name: &str) -> PathBuf {
    let body = merged(engineer("alpha", name), json!({"provider": "shell", "team": "login"}));
    app.create_agent(body).await;
    eventually("the worker makes the team's clone", std::time::Duration::from_secs(20), || async {
        team(app, "login").await["clone_path"].is_string()
    })
    .await;
    PathBuf::from(team(app, "login").await["clone_path"].as_str().expect("clone_path"))
}

#[tokio::test]
async fn a_team_gets_a_shared_clone_on_its_new_branch_from_the_worker_that_runs_its_agents() {
    let app = TestApp::builder().worker(|_| {}).spawn().await;
    let (repo, login) = login_team(&app).await;
    assert_eq!(login["status"], "created");
    assert_eq!((&login["branch"], &login["base_branch"]), (&json!("login"), &json!("main")));
    assert_eq!((&login["clone_path"], &login["node_id"]), (&Value::Null, &Value::Null), "no clone before an agent");

    let clone = team_member(&app, "fox").await;
    let clone = clone.as_path();
    assert!(clone.starts_with(app._data_dir.path()), "under the worker's data directory: {clone:?}");
    assert!(clone.join(".git/objects/info/alternates").is_file(), "--shared borrows the project's objects");
    assert!(clone.join(".git").is_dir(), "a real clone, not a worktree");
    assert_eq!(git(clone, &["symbolic-ref", "--short", "HEAD"]).trim(), "login");
    assert_eq!(git(clone, &["rev-parse", "HEAD"]), git(&repo, &["rev-parse", "main"]), "made from main");
    let fox = app.agent("fox").await;
    assert_eq!((&fox["team"], &fox["clone_mode"], &fox["branch"]), (&json!("login"), &json!("team"), &json!("login")));
    let login = team(&app, "login").await;
    assert_eq!(login["node_id"], fox["node_id"], "pinned to the node that runs its agents");
    assert_eq!(login["members"], json!(["fox"]));
    assert_eq!(login["status"], "in_progress", "its first member started it");
    // An existing agent joins; the leader must be a member. (In the project's repository: one
    // no node has claimed yet would move into the team's clone, and could not leave while there.)
    app.create_agent(merged(engineer("alpha", "owl"), json!({"clone": "none"}))).await;
    let bad =
        app.admin(Method::PATCH, "/api/v1/teams/login").json(&json!({"leader": "owl"})).send().await.expect("patch");
    let problem = assert_problem(bad, 422).await;
    assert_eq!(problem["errors"][0]["field"], "leader");
    let joined = app.post("/api/v1/teams/login/members", json!({"agent": "owl"})).await;
    assert_eq!(joined.status(), 200);
    let led =
        app.admin(Method::PATCH, "/api/v1/teams/login").json(&json!({"leader": "owl"})).send().await.expect("patch");
    assert_eq!(led.status(), 200);
    let login = team(&app, "login").await;
    assert_eq!((&login["members"], &login["leader"]), (&json!(["fox", "owl"]), &json!("owl")));
    let left = app.admin(Method::DELETE, "/api/v1/teams/login/members/owl").send().await.expect("delete");
    assert_eq!(left.status(), 200);
    let login: Value = left.json().await.expect("json");
    assert_eq!((&login["members"], &login["leader"]), (&json!(["fox"]), &Value::Null), "off the lead too");
    let listed = app.get_ok("/api/v1/teams?status=in_progress").await;
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn disbanding_refuses_to_delete_a_clone_holding_unmerged_commits_unless_forced_and_says_so() {
    let app = TestApp::builder().worker(|_| {}).spawn().await;
    login_team(&app).await;
    let clone = team_member(&app, "fox").await;
    std::fs::write(clone.join("login.rs"), "fn login() {}\n").expect("write");
    git(&clone, &["add", "-A"]);
    git(&clone, &["commit", "--quiet", "-m", "login"]);

    // A member working in the clone holds it first.
    let refused = app.admin(Method::DELETE, "/api/v1/teams/login").send().await.expect("delete");
    let problem = assert_problem(refused, 409).await;
    assert!(problem["detail"].as_str().unwrap_or("").contains("fox"), "{problem}");
    app.admin(Method::POST, "/api/v1/agents/fox/kill").send().await.expect("kill");
    let refused = app.admin(Method::DELETE, "/api/v1/teams/login").send().await.expect("delete");
    let problem = assert_problem(refused, 409).await;
    let detail = problem["detail"].as_str().unwrap_or("");
    assert!(detail.contains("branch `login` has 1 commit not in `main`"), "{detail}");
    assert!(clone.join("login.rs").is_file(), "nothing removed");
    assert_eq!(team(&app, "login").await["name"], "login");

    let forced = app.admin(Method::DELETE, "/api/v1/teams/login?force=true").send().await.expect("delete");
    assert_eq!(forced.status(), 200);
    let forced: Value = forced.json().await.expect("json");
    assert_eq!(forced["clone_removed"], true);
    assert_eq!(forced["discarded"]["commits_ahead"], 1);
    assert_eq!(forced["members"], json!(["fox"]));
    assert!(!clone.exists());
    let gone = app.get("/api/v1/teams/login").await;
    assert_problem(gone, 404).await;
    let fox = app.get_ok("/api/v1/agents/fox").await;
    assert_eq!(fox["team"], Value::Null, "no longer in a team");
    let disbanded: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE type = 'team.disbanded'")
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(disbanded, 1);
}

#[tokio::test]
async fn a_fully_merged_team_disbands_without_force() {
    let app = TestApp::builder().worker(|_| {}).spawn().await;
    login_team(&app).await;
    let clone = team_member(&app, "fox").await;
    app.admin(Method::POST, "/api/v1/agents/fox/kill").send().await.expect("kill");
    let done = app.admin(Method::DELETE, "/api/v1/teams/login").send().await.expect("delete");
    assert_eq!(done.status(), 200, "{:?}", done.text().await);
    assert!(!clone.exists());
}

#[tokio::test]
async fn a_teams_agents_are_claimed_only_by_the_node_it_is_pinned_to() {
    let app = spawn_app().await;
    login_team(&app).await;
    let member = |name: &str| merged(engineer("alpha", name), json!({"provider": "shell", "team": "login"}));
    app.create_agent(member("fox")).await;
    let mut conn = app.pool.acquire().await.expect("conn");
    for node in ["node-a", "node-b"] {
        switchyard::db::nodes::register(&mut conn, node, "host", "worker", chrono::Utc::now()).await.expect("node");
    }
    let names = |agents: Vec<switchyard::db::agents::Agent>| agents.into_iter().map(|a| a.name).collect::<Vec<_>>();
    let claimed = switchyard::db::agents::claim_spawning(&mut conn, "node-a", 10).await.expect("claim");
    assert_eq!(names(claimed), ["fox"]);
    assert_eq!(team(&app, "login").await["node_id"], "node-a", "the first claim pins the team");
    app.create_agent(member("owl")).await;
    let elsewhere = switchyard::db::agents::claim_spawning(&mut conn, "node-b", 10).await.expect("claim");
    assert!(elsewhere.is_empty(), "another node leaves the team's agents alone: {:?}", names(elsewhere));
    let claimed = switchyard::db::agents::claim_spawning(&mut conn, "node-a", 10).await.expect("claim");
    assert_eq!(names(claimed), ["owl"]);
}

#[tokio::test]
async fn bad_teams_are_refused_naming_the_field_and_the_lifecycle_only_moves_forward() {
    let app = spawn_app().await;
    let (repo, _) = login_team(&app).await;
    for (body, field) in [
        (json!({"name": "Bad Name", "project": "alpha"}), "name"),
        (json!({"name": "x", "project": "nope"}), "project"),
        (json!({"name": "x", "project": "alpha", "base_branch": "develop"}), "base_branch"),
        (json!({"name": "x", "project": "alpha", "members": ["ghost"]}), "members[0]"),
    ] {
        let refused = app.post("/api/v1/teams", body).await;
        let problem = assert_problem(refused, 422).await;
        assert_eq!(problem["errors"][0]["field"], field, "{problem}");
    }
    let again = app.post("/api/v1/teams", json!({"name": "login", "project": "alpha"})).await;
    assert_problem(again, 409).await;
    // A branch of that name in the repository already: a team starts a new one.
    git(&repo, &["branch", "taken"]);
    let taken = app.post("/api/v1/teams", json!({"name": "taken", "project": "alpha"})).await;
    let problem = assert_problem(taken, 409).await;
    assert!(problem["detail"].as_str().unwrap_or("").contains("already has a branch `taken`"), "{problem}");

    let patch = |status: &str| app.admin(Method::PATCH, "/api/v1/teams/login").json(&json!({"status": status})).send();
    assert_problem(patch("done").await.expect("patch"), 409).await;
    for status in ["in_progress", "blocked", "in_progress", "done"] {
        let moved = patch(status).await.expect("patch");
        assert_eq!(moved.status(), 200, "→ {status}");
    }
    let problem = assert_problem(patch("in_progress").await.expect("patch"), 409).await;
    assert_eq!(problem["current_state"], "done");
    let changes: Vec<String> = sqlx::query_scalar(
        "SELECT payload->>'to' FROM events WHERE type = 'team.status_changed' AND subject = 'team:login' ORDER BY id",
    )
    .fetch_all(&app.pool)
    .await
    .expect("events");
    assert_eq!(changes, ["in_progress", "blocked", "in_progress", "done"]);
}

#[tokio::test]
async fn the_team_chat_keeps_its_order_pages_by_cursor_and_lets_only_members_speak_as_themselves() {
    let app = spawn_app().await;
    login_team(&app).await;
    let fox = app.create_agent(merged(engineer("alpha", "fox"), json!({"team": "login"}))).await;
    let owl = app.create_agent(engineer("alpha", "owl")).await;
    for body in ["one", "two; three", "four"] {
        let posted = app.post("/api/v1/teams/login/chat", json!({"body": body})).await;
        assert_eq!(posted.status(), 201);
    }
    let fox_token = app.agent_token(&fox).await;
    let as_fox = app
        .client
        .post(app.url("/api/v1/teams/login/chat"))
        .bearer_auth(&fox_token)
        .json(&json!({"body": "fox here"}))
        .send()
        .await
        .expect("post");
    assert_eq!(as_fox.status(), 201);
    let as_owl = app
        .client
        .post(app.url("/api/v1/teams/login/chat"))
        .bearer_auth(&fox_token)
        .json(&json!({"from": "owl", "body": "not me"}))
        .send()
        .await
        .expect("post");
    assert_problem(as_owl, 403).await;
    let owl_token = app.agent_token(&owl).await;
    let outsider =
        app.client.get(app.url("/api/v1/teams/login/chat")).bearer_auth(&owl_token).send().await.expect("get");
    assert_problem(outsider, 403).await;

    let first = app.get_ok("/api/v1/teams/login/chat?limit=3").await;
    let cursor = first["next_cursor"].as_str().expect("more");
    let rest: Value = app
        .client
        .get(app.url(&format!("/api/v1/teams/login/chat?limit=3&cursor={cursor}")))
        .bearer_auth(&fox_token)
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    let posts: Vec<(Value, Value)> = [first["items"].as_array(), rest["items"].as_array()]
        .into_iter()
        .flatten()
        .flatten()
        .map(|p| (p["from"].clone(), p["body"].clone()))
        .collect();
    let want = [("operator", "one"), ("operator", "two; three"), ("operator", "four"), ("fox", "fox here")];
    assert_eq!(posts, want.map(|(f, b)| (json!(f), json!(b))).to_vec());
    assert!(rest["next_cursor"].is_null());
    let events: Vec<Value> = sqlx::query_scalar(
        "SELECT payload FROM events WHERE type = 'chat.posted' AND subject = 'team:login' ORDER BY id",
    )
    .fetch_all(&app.pool)
    .await
    .expect("events");
    assert_eq!(events.len(), 4, "each post is an event for the live dashboard and webhooks");
    assert_eq!((&events[3]["from"], &events[3]["body"]), (&json!("fox"), &json!("fox here")));
}

#[tokio::test]
async fn a_leader_registered_before_its_team_works_in_the_teams_clone() {
    // No worker yet: fox is registered and made the leader of a new team before any node claims it.
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(merged(engineer("alpha", "fox"), json!({"provider": "shell"}))).await;
    app.create_agent(merged(engineer("alpha", "owl"), json!({"provider": "shell"}))).await;
    let body =
        json!({"name": "login", "project": "alpha", "base_branch": "main", "leader": "fox", "members": ["fox", "owl"]});
    assert_json(app.post("/api/v1/teams", body).await, 201).await;
    let fox = app.agent("fox").await;
    assert_eq!((&fox["clone_mode"], &fox["branch"]), (&json!("team"), &json!("login")), "{fox}");
    // Leaving before it runs gives it its own clone back.
    app.admin(Method::DELETE, "/api/v1/teams/login/members/owl").send().await.expect("remove");
    let owl = app.agent("owl").await;
    assert_eq!(
        (&owl["team"], &owl["clone_mode"], &owl["branch"]),
        (&Value::Null, &json!("agent"), &json!("switchyard/owl"))
    );

    // A node comes up: fox runs in the team's clone, on the team's branch.
    let node = crate::helpers::spawn_node_beside(&app, "", |_| {}).await;
    eventually("fox runs in the team's clone", std::time::Duration::from_secs(20), || async {
        team(&app, "login").await["clone_path"].is_string() && app.agent("fox").await["clone_path"].is_string()
    })
    .await;
    let clone = team(&app, "login").await["clone_path"].as_str().expect("clone").to_owned();
    assert_eq!(app.agent("fox").await["clone_path"], json!(clone));
    assert_eq!(git(std::path::Path::new(&clone), &["symbolic-ref", "--short", "HEAD"]).trim(), "login");
    drop(node);
}

#[tokio::test]
async fn a_team_with_several_bad_fields_is_refused_naming_each_at_once() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let body = json!({"name": "Bad Name", "project": "nope", "base_branch": "a..b", "members": ["ghost", "wraith"]});
    let problem = assert_problem(app.post("/api/v1/teams", body).await, 422).await;
    let fields: Vec<&str> =
        problem["errors"].as_array().expect("errors").iter().filter_map(|e| e["field"].as_str()).collect();
    assert_eq!(fields, ["name", "project", "base_branch", "members[0]", "members[1]"], "{problem}");
}

#[tokio::test]
async fn a_running_agent_that_joins_moves_into_the_teams_clone_at_its_next_start() {
    let app = TestApp::builder().worker(|_| {}).spawn().await;
    let (_, _) = login_team(&app).await;
    app.create_agent(merged(engineer("alpha", "owl"), json!({"provider": "shell"}))).await;
    eventually("owl runs in its own clone", std::time::Duration::from_secs(20), || async {
        app.agent_state("owl").await == AgentState::Idle
    })
    .await;
    let own = app.agent("owl").await["clone_path"].as_str().expect("its clone").to_owned();
    let session = app.agent("owl").await["provider_session_id"].clone();

    // It joins and leads: the team says it moves at its next start; it works on where it is.
    let joined = assert_json(app.post("/api/v1/teams/login/members", json!({"agent": "owl"})).await, 200).await;
    assert_eq!((&joined["members"], &joined["moving"]), (&json!(["owl"]), &json!(["owl"])), "{joined}");
    let led =
        app.admin(Method::PATCH, "/api/v1/teams/login").json(&json!({"leader": "owl"})).send().await.expect("patch");
    assert_eq!(led.status(), 200);
    let owl = app.agent("owl").await;
    assert_eq!(
        (&owl["clone_mode"], &owl["branch"], &owl["clone_path"]),
        (&json!("team"), &json!("login"), &json!(own))
    );
    assert_ne!(owl["provider_session_id"], session, "a new session for the new directory");

    // Its next start is in the team's clone, on the team's branch.
    app.post_ok("/api/v1/agents/owl/suspend", json!({})).await;
    eventually("owl is suspended", std::time::Duration::from_secs(20), || async {
        app.agent_state("owl").await == AgentState::Suspended
    })
    .await;
    app.post_ok("/api/v1/agents/owl/resume", json!({})).await;
    eventually("owl runs in the team's clone", std::time::Duration::from_secs(20), || async {
        let login = team(&app, "login").await;
        login["clone_path"].is_string() && app.agent("owl").await["clone_path"] == login["clone_path"]
    })
    .await;
    let login = team(&app, "login").await;
    assert_eq!((&login["moving"], &login["leader"]), (&json!([]), &json!("owl")));
    let clone = std::path::PathBuf::from(login["clone_path"].as_str().expect("clone"));
    assert_eq!(git(&clone, &["symbolic-ref", "--short", "HEAD"]).trim(), "login");
}
