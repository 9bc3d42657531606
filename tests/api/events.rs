use serde_json::Value;

use crate::helpers::{assert_problem, spawn_app, TestApp};

/// Follows until at least `want` new events have arrived: writing transactions anywhere on the
/// test cluster (other tests' databases) may hold the horizon back for a moment.
async fn follow_until(app: &TestApp, after: Option<i64>, want: usize) -> (Vec<Value>, Option<i64>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (items, next) = follow(app, after).await;
        if items.len() >= want || std::time::Instant::now() > deadline {
            return (items, next);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

async fn follow(app: &TestApp, after: Option<i64>) -> (Vec<Value>, Option<i64>) {
    let path = match after {
        Some(after) => format!("/api/v1/events?after={after}&limit=1000"),
        None => "/api/v1/events?limit=1000".to_owned(),
    };
    let response = app.get(&path).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.expect("json");
    (body["items"].as_array().cloned().unwrap_or_default(), body["next_after"].as_i64())
}

#[tokio::test]
async fn a_script_can_follow_the_event_log_with_a_cursor() {
    let app = spawn_app().await;
    let (first, cursor) = follow_until(&app, None, 1).await;
    assert!(first.iter().any(|e| e["type"] == "token.created"), "{first:?}");
    let (nothing, same) = follow(&app, cursor).await;
    assert!(nothing.is_empty());
    assert_eq!(same, cursor, "an empty page keeps the cursor");
    app.token("read").await;
    let (new, next) = follow_until(&app, cursor, 1).await;
    assert_eq!(new.len(), 1);
    assert_eq!(new[0]["type"], "token.created");
    assert!(new[0]["payload"].get("secret").is_none());
    assert_eq!(next, new[0]["id"].as_i64());
}

#[tokio::test]
async fn bad_cursors_and_limits_are_422_naming_the_parameter() {
    let app = spawn_app().await;
    for (query, field) in [("after=999999", "after"), ("after=abc", "after"), ("limit=0", "limit"), ("limt=5", "limt")]
    {
        let response = app.get(&format!("/api/v1/events?{query}")).await;
        let body = assert_problem(response, 422).await;
        assert_eq!(body["errors"][0]["field"], field, "{query}: {body}");
    }
}

#[tokio::test]
async fn an_event_committed_late_is_not_skipped_by_a_follower() {
    let app = spawn_app().await;
    let (_, cursor) = follow_until(&app, None, 1).await;
    // An early transaction takes the lower position and commits last.
    let mut early = app.pool.begin().await.expect("begin");
    switchyard::db::events::record(&mut early, "test.early", "test:1", serde_json::json!({})).await.expect("record");
    let mut late = app.pool.begin().await.expect("begin");
    switchyard::db::events::record(&mut late, "test.late", "test:2", serde_json::json!({})).await.expect("record");
    late.commit().await.expect("commit");
    let (seen, held) = follow(&app, cursor).await;
    assert!(seen.iter().all(|e| e["type"] != "test.late"), "held back while an older transaction runs: {seen:?}");
    early.commit().await.expect("commit");
    let (seen, _) = follow_until(&app, held, 2).await;
    let types: Vec<&str> = seen.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types, ["test.early", "test.late"]);
}

/// The filtered log's items, following until `want` of them arrived.
async fn filtered(app: &TestApp, query: &str, want: usize) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let response = app.get(&format!("/api/v1/events?limit=1000&{query}")).await;
        assert_eq!(response.status(), 200, "{query}");
        let body: Value = response.json().await.expect("json");
        let items = body["items"].as_array().cloned().unwrap_or_default();
        if items.len() >= want || std::time::Instant::now() > deadline {
            return items;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn the_event_log_filters_by_type_project_and_subject() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_project("beta").await;
    let task = app.create_task(serde_json::json!({"project": "alpha", "title": "Write docs"})).await;
    app.create_task(serde_json::json!({"project": "beta", "title": "Fix bug"})).await;
    app.create_agent(crate::helpers::engineer("alpha", "fox")).await;
    let id = task["id"].as_str().expect("id");
    app.post_ok(&format!("/api/v1/tasks/{id}/start"), serde_json::json!({})).await;

    let about = filtered(&app, &format!("subject=task:{id}"), 2).await;
    let types: Vec<&str> = about.iter().map(|e| e["type"].as_str().unwrap_or("")).collect();
    assert_eq!(types, ["task.created", "task.started"], "one task's own history, in order");

    let alpha_tasks = filtered(&app, "types=task.*&project=alpha", 2).await;
    assert_eq!(alpha_tasks.len(), 2, "{alpha_tasks:?}");
    assert!(alpha_tasks
        .iter()
        .all(|e| e["project"] == "alpha" && e["type"].as_str().unwrap_or("").starts_with("task.")));

    // An agent's events belong to its project, so a hook name finds them there.
    let started = filtered(&app, "types=on_agent_started&project=alpha", 1).await;
    assert_eq!(started.len(), 1, "{started:?}");
    assert_eq!(started[0]["subject"], "agent:fox");
    assert!(filtered(&app, "types=on_agent_started&project=beta", 0).await.is_empty());

    for (query, field) in [("types=nope.*", "types"), ("types=", "types"), ("subject=", "")] {
        let response = app.get(&format!("/api/v1/events?{query}")).await;
        if field.is_empty() {
            assert_eq!(response.status(), 200, "{query}: an empty subject matches nothing, it is no error");
            continue;
        }
        let body = assert_problem(response, 422).await;
        assert_eq!(body["errors"][0]["field"], field, "{query}: {body}");
    }
}

#[tokio::test]
async fn a_cursor_of_0_reads_from_the_beginning_in_the_log_and_the_dashboards_notices() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(crate::helpers::engineer("alpha", "fox")).await;
    sqlx::query("UPDATE agents SET state = 'working' WHERE name = 'fox'").execute(&app.pool).await.expect("working");
    let asks = serde_json::json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash"});
    app.post_ok("/api/v1/agents/fox/hooks", asks).await;

    let (all, _) = follow_until(&app, None, 3).await;
    let from_zero = app.get_ok("/api/v1/events?after=0&limit=1000").await;
    assert_eq!(from_zero["items"][0]["id"], all[0]["id"], "after=0 is the start: {from_zero}");

    let dashboard = crate::dashboard::Dashboard::login(&app).await;
    let notices = |query: &'static str| {
        let dashboard = &dashboard;
        async move {
            let (status, body) = dashboard.get(&format!("/notifications{query}")).await;
            assert_eq!(status, 200, "{query}: {body}");
            serde_json::from_str::<Value>(&body).expect("json")["items"].clone()
        }
    };
    crate::helpers::eventually("fox's notice", std::time::Duration::from_secs(10), || async {
        notices("").await.as_array().is_some_and(|items| !items.is_empty())
    })
    .await;
    let everything = notices("").await;
    assert_eq!(everything[0]["title"], "fox asks for permission", "{everything}");
    assert_eq!(notices("?after=0").await, everything, "0 is the start, as no cursor is");
    let (status, _) = dashboard.get("/notifications?after=999999").await;
    assert_eq!(status, 422, "a cursor that is no event's is refused, as by the API");
}

#[tokio::test]
async fn an_unknown_project_filter_is_a_422_naming_project_but_a_deleted_ones_history_is_kept() {
    let app = spawn_app().await;
    for path in ["/api/v1/events?project=nope", "/api/v1/events/stream?project=nope"] {
        let body = assert_problem(app.get(path).await, 422).await;
        assert_eq!(body["errors"][0]["field"], "project", "{path}: {body}");
        assert!(body.to_string().contains("no project `nope`"), "{path}: {body}");
    }
    app.create_project("gone").await;
    let deleted = app.send(reqwest::Method::DELETE, "/api/v1/projects/gone", None).await;
    assert!(deleted.status().is_success(), "{}", deleted.status());
    let history = filtered(&app, "project=gone", 1).await;
    assert!(!history.is_empty() && history.iter().all(|e| e["project"] == "gone"), "{history:?}");
}
