//! An agent's report is never lost to a race: sent while a permission hook holds its group in
//! `waiting_input` it is accepted; refused, it names the state it found; an agent that went idle
//! without reporting is on "needs you"; sent while `serve` restarts, the `switchyard` command
//! keeps sending it (with one `Idempotency-Key`) until it lands, once.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::conductor::Fakes;
use crate::helpers::*;
use crate::mailbox_crash::Installation;
use switchyard::domain::agent::AgentState;
use switchyard::domain::task::TaskStatus;

/// Long enough for an agent to spawn, clone, commit and report on a loaded machine.
const RUN: Duration = Duration::from_secs(120);

/// A project whose agents are the conductor's fakes, without a review.
async fn fake_project(app: &TestApp, slug: &str) {
    app.create_project(slug).await;
    let config = json!({"provider": "fake", "max_agents": 4, "review": "none"});
    app.patch_ok(&format!("/api/v1/projects/{slug}"), json!({"conductor_config": config})).await;
}

fn group<'a>(wish: &'a Value, key: &str) -> &'a Value {
    wish["groups"].as_array().expect("groups").iter().find(|g| g["key"] == key).expect("the group")
}

/// The wish `slug` once `check` holds of it.
async fn wish_until(app: &TestApp, slug: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    app.get_until(&format!("/api/v1/wishes/{slug}"), what, RUN, &["/api/v1/agents?limit=100"], check).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_reported_done_while_a_permission_holds_it_is_accepted_and_a_late_report_names_its_state() {
    let fakes = Fakes::new();
    fakes.say("hold-a", "");
    // Sent once, by the command alone: a refused report is not tried again until a person
    // (or the screen) moves the group back.
    fakes.say("no-retry", "");
    let app = TestApp::builder().providers(&fakes.providers()).worker(|w| w.conductor = true).spawn().await;
    fake_project(&app, "alpha").await;
    app.create_wish(json!({"slug": "perm", "project": "alpha", "title": "t", "groups": [{"key": "a", "title": "A"}]}))
        .await;
    app.post_ok("/api/v1/wishes/perm/plan", json!({})).await;
    let wish = wish_until(&app, "perm", "group a has its agent", |w| group(w, "a")["assignee"].is_string()).await;
    let agent = group(&wish, "a")["assignee"].as_str().expect("the agent").to_owned();
    eventually("the agent runs", Duration::from_secs(60), || async {
        app.agent(&agent).await["tmux_pane"].is_string()
    })
    .await;

    // Claude Code's PermissionRequest hook: the group waits for a person's answer. The answer
    // is given in the pane; the agent works on and reports before any hook says it went on.
    // (The worker reads the pane too: a reading taken before it heard of the hook may answer
    // it at once, so the hook is sent until the group is seen waiting for a while.)
    let task_id = group(&app.get_ok("/api/v1/wishes/perm").await, "a")["task_id"].as_str().expect("id").to_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    'ask: loop {
        let asked = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash"});
        let hooked = app.post_ok(&format!("/api/v1/agents/{agent}/hooks"), asked).await;
        assert_eq!(hooked["state"], "permission", "{hooked}");
        let held_until = std::time::Instant::now() + Duration::from_millis(1500);
        while std::time::Instant::now() < held_until {
            if app.task_status(&task_id).await != TaskStatus::WaitingInput {
                assert!(std::time::Instant::now() < deadline, "the group never waited for the answer");
                continue 'ask;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        break;
    }
    fakes.say("go-a", "");

    let done =
        wish_until(&app, "perm", "the report lands and the wish completes", |w| w["status"] == "completed").await;
    assert_eq!(group(&done, "a")["status"], "done", "{done}");
    let answered: Vec<String> = sqlx::query_scalar(
        "SELECT payload->>'answer' FROM events WHERE type = 'task.answered' AND subject = $1 ORDER BY id",
    )
    .bind(format!("task:{task_id}"))
    .fetch_all(&app.pool)
    .await
    .expect("answers");
    assert_eq!(
        answered.last(),
        Some(&format!("{agent} went on and reported")),
        "the report answered the permission: {answered:?}"
    );

    // A report after that names what it found.
    let late = app.post(&format!("/api/v1/agents/{agent}/report"), json!({"kind": "group_done"})).await;
    let late = assert_problem(late, 409).await;
    assert!(late["detail"].as_str().unwrap_or_default().contains("group `a` is `done` already"), "{late}");
    assert_eq!(late["current_state"], "done", "{late}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_agent_whose_group_is_unreported_is_on_needs_you() {
    let fakes = Fakes::new();
    fakes.say("idle-a", "");
    let app = TestApp::builder().providers(&fakes.providers()).worker(|w| w.conductor = true).spawn().await;
    fake_project(&app, "alpha").await;
    app.create_wish(json!({"slug": "quiet", "project": "alpha", "title": "t", "groups": [{"key": "a", "title": "A"}]}))
        .await;
    app.post_ok("/api/v1/wishes/quiet/plan", json!({})).await;
    let wish = wish_until(&app, "quiet", "group a has its agent", |w| group(w, "a")["assignee"].is_string()).await;
    let agent = group(&wish, "a")["assignee"].as_str().expect("the agent").to_owned();

    let dashboard = crate::dashboard::Dashboard::login(&app).await;
    let deadline = std::time::Instant::now() + RUN;
    loop {
        let (status, needs) = dashboard.get("/?block=needs").await;
        assert_eq!(status, 200);
        if needs.contains(&format!("/agents/{agent}")) {
            assert!(needs.contains("idle, not reported"), "{needs}");
            assert!(needs.contains("stopped without reporting group `a` of wish `quiet`"), "{needs}");
            break;
        }
        let state = app.agent(&agent).await;
        assert!(std::time::Instant::now() < deadline, "not on needs you: {needs}\nthe agent: {state}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(app.agent_state(&agent).await, AgentState::Idle);
    assert_eq!(group(&app.get_ok("/api/v1/wishes/quiet").await, "a")["status"], "in_progress");
}

#[tokio::test]
async fn a_report_sent_again_with_its_key_is_answered_once_and_without_one_names_the_state() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_wish(
        json!({"slug": "login", "project": "alpha", "title": "Login", "groups": [{"key": "api", "title": "API"}]}),
    )
    .await;
    app.start_wish("login").await;
    app.post_ok("/api/v1/wishes/login/groups/api/start", json!({})).await;
    let agent = app.create_agent(merged(engineer("alpha", "fox"), json!({"wish": "login", "group": "api"}))).await;
    let task_id = agent["task_id"].as_str().expect("task").to_owned();
    // The group is the agent's, as the conductor's dispatch makes it.
    sqlx::query("UPDATE tasks SET assignee = 'fox' WHERE id = $1::uuid")
        .bind(&task_id)
        .execute(&app.pool)
        .await
        .expect("assign");
    app.post_ok("/api/v1/agents/fox/hooks", json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash"})).await;
    assert_eq!(app.task_status(&task_id).await, TaskStatus::WaitingInput);

    let blocked = json!({"kind": "group_blocked", "reason": "the schema is not mine to change"});
    let report = |key: Option<&str>| {
        let mut request = app.admin(Method::POST, "/api/v1/agents/fox/report").json(&blocked);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        async move { request.send().await.expect("report") }
    };
    let first = report(Some("report-1")).await;
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first = assert_json(first, 200).await;
    assert_eq!(first["accepted"], "group_blocked", "accepted while the group waited for an answer: {first}");
    // The same report again (its answer was lost to a restart, say): the first answer, nothing new.
    let again = report(Some("report-1")).await;
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers().get("idempotent-replayed").map(|v| v.to_str().unwrap_or_default()), Some("true"));
    assert_eq!(again.json::<Value>().await.expect("json"), first);
    let handed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM events WHERE type = 'task.assigned' AND subject = $1 AND payload->>'assignee' = 'human'",
    )
    .bind(format!("task:{task_id}"))
    .fetch_one(&app.pool)
    .await
    .expect("count");
    assert_eq!(handed, 1, "handed to a person once");
    // Without its key it is a new report, refused with the state it found.
    let refused = assert_problem(report(None).await, 409).await;
    assert!(
        refused["detail"].as_str().unwrap_or_default().contains("group `api` is assigned to human now"),
        "{refused}"
    );
    assert_eq!(refused["current_state"], "waiting_input", "{refused}");
}

/// Counts rows of a query over the installation's database.
async fn count(installation: &Installation, sql: &str) -> i64 {
    let pool = installation.pool().await;
    let n = sqlx::query_scalar(sql).fetch_one(&pool).await.expect("count");
    pool.close().await;
    n
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_done_sent_while_serve_is_down_lands_once_when_it_is_back() {
    let fakes = Fakes::new();
    fakes.say("hold-a", "");
    fakes.say("no-retry", "");
    let logs = tempfile::tempdir().expect("logs");
    let mut installation = Installation::with_providers(&fakes.providers(), logs).await;
    installation.start(50, 3000);
    let token = installation.token().await;
    let (client, api) = (installation.client.clone(), installation.api());
    let call = |method: Method, path: &str, body: Value| {
        client.request(method, format!("{api}/api/v1{path}")).bearer_auth(&token).json(&body).send()
    };
    let project = json!({"slug": "alpha", "name": "Alpha", "repo_path": installation.repo.path(),
                         "conductor_config": {"provider": "fake", "review": "none"},
                         "merge_queue_config": {"enabled": false, "track_mode": "all"}});
    assert_eq!(call(Method::POST, "/projects", project).await.expect("project").status(), 201);
    let wish = json!({"slug": "restart", "project": "alpha", "title": "t", "groups": [{"key": "a", "title": "A"}]});
    assert_eq!(call(Method::POST, "/wishes", wish).await.expect("wish").status(), 201);
    assert_eq!(call(Method::POST, "/wishes/restart/plan", json!({})).await.expect("plan").status(), 200);
    eventually("the group's agent runs", Duration::from_secs(90), || async {
        count(&installation, "SELECT count(*) FROM agents WHERE task_id IS NOT NULL AND tmux_pane IS NOT NULL").await
            == 1
    })
    .await;

    // The server dies; the agent commits and runs `switchyard group done` against it.
    installation.crash();
    fakes.say("go-a", "");
    eventually("the command keeps trying", Duration::from_secs(60), || async {
        installation.screens().contains("trying again")
    })
    .await;
    installation.start(50, 3000);
    let done = "SELECT count(*) FROM tasks WHERE group_key = 'a' AND status = 'done'";
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while count(&installation, done).await != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the report did not land; the panes:\n{}",
            installation.screens()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let completed = "SELECT count(*) FROM events WHERE type = 'task.completed'";
    assert_eq!(count(&installation, completed).await, 1, "the group was done once");
    assert!(!installation.screens().contains("gave up"), "{}", installation.screens());
}
