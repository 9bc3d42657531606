//! `/api/v1/agents`: registering, listing, reading, editing and deleting agents, agent tokens, and
//! the db functions the worker calls. Hooks are in `agent_hooks.rs`, clones in `agent_clones.rs`.

use reqwest::Method;
use serde_json::{json, Value};
use switchyard::db::agents::{self, Applied, Cause};
use switchyard::domain::agent::{Activity, AgentEvent, AgentState};
use uuid::Uuid;

use crate::helpers::{assert_problem, engineer, id, merged, spawn_app};

#[tokio::test]
async fn registering_an_agent_writes_a_spawning_row_with_no_node_and_its_event() {
    let app = spawn_app().await;
    let project = app.create_project("alpha").await;
    let response = app
        .post(
            "/api/v1/agents",
            json!({"name": "clever-fox", "project": "alpha", "kind": "merge-queue", "role": "engineer",
            "provider": "claude", "task": "Add a login page"}),
        )
        .await;
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["etag"], "\"1\"");
    let agent: Value = response.json().await.unwrap();
    assert_eq!(agent["name"], "clever-fox");
    assert_eq!(agent["state"], "spawning");
    assert_eq!(agent["kind"], "merge-queue");
    assert_eq!(agent["node_id"], Value::Null);
    assert_eq!(agent["branch"], "switchyard/clever-fox");
    assert_eq!(agent["clone_mode"], "agent");
    assert_eq!(agent["repo"], project["repo_path"]);
    assert!(agent["provider_session_id"].as_str().is_some_and(|s| Uuid::parse_str(s).is_ok()));
    // Read back, it also says what it used (nothing yet).
    let read = app.agent("clever-fox").await;
    assert_eq!(read["usage"]["models"], json!([]), "{read}");
    assert_eq!(read, merged(agent, json!({"usage": read["usage"].clone()})));
    assert_eq!(app.count_events("agent.spawned", "agent:clever-fox").await, 1);
}

#[tokio::test]
async fn an_agent_without_a_name_is_named_after_its_kind() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let agent = app
        .create_agent(json!({"project": "alpha", "kind": "worker", "role": "qa", "provider": "shell", "clone": "none"}))
        .await;
    let name = agent["name"].as_str().unwrap();
    assert!(name.starts_with("worker-") && name.len() == "worker-".len() + 8, "{name}");
    assert_eq!(agent["branch"], Value::Null);
    assert_eq!(agent["clone_mode"], "none");
}

#[tokio::test]
async fn bad_fields_are_422s_naming_the_field() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let base = json!({"project": "alpha", "kind": "worker", "role": "engineer", "provider": "claude"});
    let with = |field: &str, value: Value| {
        let mut body = base.clone();
        body[field] = value;
        body
    };
    let cases = [
        (with("project", json!("nope")), "project"),
        (with("provider", json!("cursor")), "provider"),
        (with("kind", json!("boss")), "kind"),
        (with("role", json!("manager")), "role"),
        (with("name", json!("Bad Name")), "name"),
        (with("branch", json!("-rf")), "branch"),
        (with("wish", json!("missing")), "wish"),
        (with("group", json!("api")), "group"),
        (with("clone", json!("team")), "clone"),
        (with("colour", json!("red")), "colour"),
    ];
    for (body, field) in cases {
        let problem = assert_problem(app.post("/api/v1/agents", body).await, 422).await;
        assert_eq!(problem["errors"][0]["field"], field, "{problem}");
    }
    let problem = assert_problem(app.post("/api/v1/agents", with("provider", json!("cursor"))).await, 422).await;
    assert!(problem["detail"].as_str().unwrap().contains("claude, codex, gemini, shell"), "{problem}");
}

#[tokio::test]
async fn a_wish_group_links_the_agent_to_the_groups_task() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let wish = app
        .create_wish(json!({"slug": "login", "project": "alpha", "title": "Login",
            "groups": [{"key": "api", "title": "API"}]}))
        .await;
    let base = json!({"project": "alpha", "kind": "worker", "role": "engineer", "provider": "claude", "wish": "login"});
    let mut body = base.clone();
    body["group"] = json!("ui");
    let problem = assert_problem(app.post("/api/v1/agents", body).await, 422).await;
    assert_eq!(problem["errors"][0]["field"], "group");
    let mut body = base.clone();
    body["group"] = json!("api");
    let agent = app.create_agent(body).await;
    assert_eq!(agent["wish_id"], wish["id"]);
    assert_eq!(agent["task_id"], wish["groups"][0]["task_id"]);
    app.create_project("beta").await;
    let mut body = base;
    body["project"] = json!("beta");
    let problem = assert_problem(app.post("/api/v1/agents", body).await, 422).await;
    assert_eq!(problem["errors"][0]["field"], "wish");
}

#[tokio::test]
async fn a_taken_name_is_a_409_and_an_unknown_agent_a_404() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let body = engineer("alpha", "owl");
    app.create_agent(body.clone()).await;
    let problem = assert_problem(app.post("/api/v1/agents", body).await, 409).await;
    assert!(problem["detail"].as_str().unwrap().contains("`owl`"), "{problem}");
    for method in [Method::GET, Method::PATCH, Method::DELETE] {
        let request = app.admin(method.clone(), "/api/v1/agents/nobody");
        let request = if method == Method::PATCH { request.json(&json!({})) } else { request };
        assert_problem(request.send().await.unwrap(), 404).await;
    }
}

#[tokio::test]
async fn agents_are_listed_by_project_state_kind_and_node_a_page_at_a_time() {
    let app = spawn_app().await;
    let (a, b) = ("alpha", "beta");
    for project in [a, b] {
        app.create_project(project).await;
    }
    for (name, project, kind) in [("a1", a, "worker"), ("a2", a, "review"), ("b1", b, "worker")] {
        app.create_agent(
            json!({"name": name, "project": project, "kind": kind, "role": "engineer", "provider": "claude"}),
        )
        .await;
    }
    let mut conn = app.pool.acquire().await.unwrap();
    switchyard::db::nodes::register(&mut conn, "node-x", "host", "worker", chrono::Utc::now()).await.unwrap();
    let claimed = agents::claim_spawning(&mut conn, "node-x", 1).await.unwrap();
    assert_eq!(claimed.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(), ["a1"]);
    let app = &app;
    let names = move |query: &str| {
        let url = format!("/api/v1/agents?{query}");
        async move {
            let response = app.get(&url).await;
            assert_eq!(response.status(), 200, "{url}");
            let page: Value = response.json().await.unwrap();
            page["items"].as_array().unwrap().iter().map(|a| a["name"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
        }
    };
    assert_eq!(names("").await, ["a1", "a2", "b1"]);
    assert_eq!(names(&format!("project={a}")).await, ["a1", "a2"]);
    assert_eq!(names("kind=worker").await, ["a1", "b1"]);
    assert_eq!(names("node=node-x").await, ["a1"]);
    assert_eq!(names("state=spawning&kind=review").await, ["a2"]);
    assert!(names("state=working").await.is_empty());
    let first = app.get_ok("/api/v1/agents?limit=2").await;
    assert_eq!(first["items"].as_array().unwrap().len(), 2);
    let cursor = first["next_cursor"].as_str().unwrap();
    let second = app.get_ok(&format!("/api/v1/agents?limit=2&cursor={cursor}")).await;
    assert_eq!(second["items"][0]["name"], "b1");
    for query in ["state=busy", "kind=boss", "project=nope", "limit=0"] {
        let response = app.get(&format!("/api/v1/agents?{query}")).await;
        assert_problem(response, 422).await;
    }
}

#[tokio::test]
async fn patching_checks_if_match_and_refuses_the_state() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "fox")).await;
    let patch = |body: Value, if_match: Option<&str>| {
        let mut request = app.admin(Method::PATCH, "/api/v1/agents/fox").json(&body);
        if let Some(tag) = if_match {
            request = request.header("If-Match", tag);
        }
        request.send()
    };
    let response = patch(json!({"summary": "Did it", "ready_for_cleanup": true}), Some("\"1\"")).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["etag"], "\"2\"");
    let agent: Value = response.json().await.unwrap();
    assert_eq!((agent["summary"].as_str(), agent["ready_for_cleanup"].as_bool()), (Some("Did it"), Some(true)));
    assert_problem(patch(json!({"task": "again"}), Some("\"1\"")).await.unwrap(), 412).await;
    let cleared: Value = patch(json!({"summary": null}), None).await.unwrap().json().await.unwrap();
    assert_eq!(cleared["summary"], Value::Null);
    let problem = assert_problem(patch(json!({"state": "done"}), None).await.unwrap(), 422).await;
    assert_eq!(problem["errors"][0]["field"], "state");
    assert_eq!(app.count_events("agent.updated", "agent:fox").await, 2);
}

#[tokio::test]
async fn an_agent_token_may_only_read_itself_and_post_its_own_hooks() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    for name in ["fox", "owl"] {
        app.create_agent(engineer("alpha", name)).await;
    }
    let fox = app.agent("fox").await;
    let token = app.agent_token(&fox).await;
    let call = |method: Method, path: &str| app.client.request(method, app.url(path)).bearer_auth(&token);
    assert_eq!(call(Method::GET, "/api/v1/agents/fox").send().await.unwrap().status(), 200);
    let hook = json!({"hook_event_name": "SessionStart"});
    assert_eq!(call(Method::POST, "/api/v1/agents/fox/hooks").json(&hook).send().await.unwrap().status(), 200);
    let forbidden = [
        call(Method::GET, "/api/v1/agents/owl"),
        call(Method::POST, "/api/v1/agents/owl/hooks").json(&hook),
        call(Method::GET, "/api/v1/agents"),
        call(Method::PATCH, "/api/v1/agents/fox").json(&json!({"summary": "x"})),
        call(Method::DELETE, "/api/v1/agents/fox"),
        call(Method::GET, "/api/v1/tasks"),
        call(Method::GET, "/api/v1/me"),
    ];
    for request in forbidden {
        assert_problem(request.send().await.unwrap(), 403).await;
    }
    // A new token (a respawn) revokes the old one.
    let newer = app.agent_token(&fox).await;
    assert_problem(call(Method::GET, "/api/v1/agents/fox").send().await.unwrap(), 401).await;
    let response = app.client.get(app.url("/api/v1/agents/fox")).bearer_auth(&newer).send().await.unwrap();
    assert_eq!(response.status(), 200);
    // Nobody makes an agent token through the tokens API.
    let problem = assert_problem(app.post("/api/v1/tokens", json!({"name": "x", "scope": "agent"})).await, 422).await;
    assert_eq!(problem["errors"][0]["field"], "scope");
}

#[tokio::test]
async fn a_swap_between_working_and_idle_writes_what_apply_writes_and_leaves_other_states_to_it() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let fox = id(&app.create_agent(engineer("alpha", "fox")).await);
    let mut conn = app.pool.acquire().await.unwrap();
    // In pane %1, as its worker recorded.
    sqlx::query("UPDATE agents SET tmux_pane = '%1' WHERE id = $1").bind(fox).execute(&mut *conn).await.unwrap();
    let cause = Cause { source: "screen", detail: Some("shown".into()), ..Cause::default() };
    let observe = |activity| AgentEvent::Observed(activity);
    // From spawning (or any state but the other of the two) a swap writes nothing.
    assert_eq!(agents::swap(&mut conn, fox, "%1", AgentState::Working, &cause).await.unwrap(), None);
    agents::apply(&mut conn, fox, None, observe(Activity::Working), &cause).await.unwrap();
    assert_eq!(agents::swap(&mut conn, fox, "%1", AgentState::Working, &cause).await.unwrap(), None, "already working");
    assert_eq!(
        agents::swap(&mut conn, fox, "%9", AgentState::Idle, &cause).await.unwrap(),
        None,
        "a reading of a pane the agent is not in"
    );
    assert_eq!(
        agents::swap(&mut conn, fox, "%1", AgentState::Idle, &cause).await.unwrap(),
        Some(("fox".into(), AgentState::Working))
    );
    let swapped = agents::get(&mut conn, fox).await.unwrap().expect("agent");
    agents::apply(&mut conn, fox, None, observe(Activity::Working), &cause).await.unwrap();
    agents::apply(&mut conn, fox, None, observe(Activity::Idle), &cause).await.unwrap();
    let applied = agents::get(&mut conn, fox).await.unwrap().expect("agent");
    assert_eq!((swapped.state, applied.state), (AgentState::Idle, AgentState::Idle));
    assert_eq!(applied.version, swapped.version + 2);
    let payloads: Vec<Value> = sqlx::query_scalar(
        "SELECT payload FROM events WHERE type = 'agent.state_changed' AND subject = 'agent:fox' ORDER BY id",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(payloads.len(), 4);
    assert_eq!(payloads[1], payloads[3], "the swap's event is the one apply writes");
    assert_eq!(payloads[1], json!({"from": "working", "to": "idle", "source": "screen", "detail": "shown"}));
    agents::apply(&mut conn, fox, None, observe(Activity::Question), &cause).await.unwrap();
    assert_eq!(
        agents::swap(&mut conn, fox, "%1", AgentState::Working, &cause).await.unwrap(),
        None,
        "a task may follow"
    );
    assert_eq!(agents::get(&mut conn, fox).await.unwrap().map(|a| a.state), Some(AgentState::Question));
}

#[tokio::test]
async fn the_worker_claims_each_spawning_agent_once_and_applies_only_legal_changes() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let fox = app.create_agent(engineer("alpha", "fox")).await;
    let mut conn = app.pool.acquire().await.unwrap();
    for node in ["node-a", "node-b"] {
        switchyard::db::nodes::register(&mut conn, node, "host", "worker", chrono::Utc::now()).await.unwrap();
    }
    let (mut c1, mut c2) = (app.pool.begin().await.unwrap(), app.pool.begin().await.unwrap());
    let first = agents::claim_spawning(&mut c1, "node-a", 10).await.unwrap();
    // The row is locked by the first claim: SKIP LOCKED passes over it instead of waiting.
    let second = agents::claim_spawning(&mut c2, "node-b", 10).await.unwrap();
    c1.commit().await.unwrap();
    c2.commit().await.unwrap();
    assert_eq!((first.len(), second.len()), (1, 0));
    assert!(agents::claim_spawning(&mut conn, "node-b", 10).await.unwrap().is_empty());
    let id = id(&fox);
    let agent = agents::record_pane(&mut conn, id, "sy-node-a", "@1", "%1", Some(42), Some("/clones/fox"))
        .await
        .unwrap()
        .expect("agent");
    assert_eq!((agent.tmux_pane.as_deref(), agent.pid), (Some("%1"), Some(42)));
    let live = agents::list_live_on_node(&mut conn, "node-a").await.unwrap();
    assert_eq!(live.len(), 1);
    let working = AgentEvent::Observed(Activity::Working);
    let stale = agents::apply(&mut conn, id, Some(AgentState::Idle), working, &Cause::from("screen")).await.unwrap();
    assert!(matches!(stale, Some(Applied::Stale { current: AgentState::Spawning })), "{stale:?}");
    let changed =
        agents::apply(&mut conn, id, Some(AgentState::Spawning), working, &Cause::from("screen")).await.unwrap();
    assert!(matches!(changed, Some(Applied::Changed { from: AgentState::Spawning, .. })), "{changed:?}");
    assert!(matches!(
        agents::apply(&mut conn, id, None, working, &Cause::from("screen")).await.unwrap(),
        Some(Applied::Unchanged(_))
    ));
    assert_eq!(agents::record_nudge(&mut conn, id).await.unwrap(), Some(1));
    assert_eq!(agents::touch_activity(&mut conn, &[id, uuid::Uuid::new_v4()]).await.unwrap(), 1);
    let cause = Cause {
        source: "worker",
        detail: Some("usage limit".into()),
        suspended_until: Some(chrono::Utc::now()),
        ..Cause::default()
    };
    let suspended = agents::apply(&mut conn, id, None, AgentEvent::Suspend, &cause).await.unwrap();
    assert!(matches!(suspended, Some(Applied::Changed { .. })));
    assert!(agents::list_live_on_node(&mut conn, "node-a").await.unwrap().is_empty());
    let refused = agents::apply(&mut conn, id, None, working, &Cause::from("hook")).await.unwrap();
    assert!(matches!(refused, Some(Applied::Refused { current: AgentState::Suspended, .. })), "{refused:?}");
    assert_eq!(app.count_events("agent.state_changed", "agent:fox").await, 2);
    assert_eq!(app.count_events("agent.stopped", "agent:fox").await, 1);
    // Resuming puts it back in the queue, for any node.
    agents::apply(&mut conn, id, None, AgentEvent::Resume, &Cause::from("api")).await.unwrap();
    let again = agents::claim_spawning(&mut conn, "node-b", 10).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].tmux_pane, None);
    assert_eq!(again[0].nudge_count, 0);
    let stale_nodes = switchyard::db::nodes::stale_nodes(&mut conn, std::time::Duration::ZERO).await.unwrap();
    assert_eq!(stale_nodes.len(), 2);
    assert!(switchyard::db::nodes::heartbeat(&mut conn, "node-a").await.unwrap());
    let stale_nodes = switchyard::db::nodes::stale_nodes(&mut conn, std::time::Duration::from_secs(60)).await.unwrap();
    assert!(stale_nodes.is_empty());
}

#[tokio::test]
async fn a_project_with_agents_is_not_deleted_from_under_them() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "fox")).await;
    let refused = app.admin(Method::DELETE, "/api/v1/projects/alpha").send().await.unwrap();
    let problem = assert_problem(refused, 409).await;
    assert!(problem["detail"].as_str().unwrap().contains("1 agent"), "{problem}");
    let deleted = app.admin(Method::DELETE, "/api/v1/agents/fox").send().await.unwrap();
    assert_problem(deleted, 409).await;
    let forced = app.admin(Method::DELETE, "/api/v1/agents/fox?force=true").send().await.unwrap();
    assert_eq!(forced.status(), 200);
    let deleted = app.admin(Method::DELETE, "/api/v1/projects/alpha").send().await.unwrap();
    assert_eq!(deleted.status(), 204);
}

#[tokio::test]
async fn an_agents_branch_is_not_head_the_target_branch_or_another_agents() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(merged(engineer("alpha", "first"), json!({"branch": "feature/pay"}))).await;
    for branch in ["HEAD", "main", "feature/pay"] {
        let body = merged(engineer("alpha", "second"), json!({"branch": branch}));
        let problem = assert_problem(app.post("/api/v1/agents", body).await, 422).await;
        assert_eq!(problem["errors"][0]["field"], "branch", "{branch}: {problem}");
    }
    let long = merged(engineer("alpha", "third"), json!({"task": "x".repeat(20_001), "provider": "p".repeat(200)}));
    let problem = assert_problem(app.post("/api/v1/agents", long).await, 422).await;
    assert_eq!(problem["errors"].as_array().map(Vec::len), Some(2), "{problem}");
}
