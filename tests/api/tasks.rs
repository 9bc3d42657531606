//! `/api/v1/tasks`: creating, reading, listing, editing and placing tasks on boards. The state
//! machine and dependencies are in `task_flow.rs`.

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::helpers::{assert_problem, column_ids, id, spawn_app, TestApp};

#[tokio::test]
async fn creating_a_task_without_dependencies_makes_it_ready_and_records_it() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let response = app.post("/api/v1/tasks", json!({"project": "alpha", "title": " Login page ", "goal": "g"})).await;
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["etag"], "\"1\"");
    let task: Value = response.json().await.expect("json");
    assert_eq!(task["title"], "Login page");
    assert_eq!(task["status"], "ready");
    assert_eq!(task["iterations"], 0);
    assert_eq!(task["max_iterations"], 10);
    assert_eq!(task["unmet_dependencies"], 0);
    assert_eq!(app.count_events("task.created", &format!("task:{}", id(&task))).await, 1);
    let read = app.task(id(&task)).await;
    assert_eq!(read["dependencies"], json!([]));
    assert!(read["blocked_reason"].is_null());
}

#[tokio::test]
async fn creating_a_task_with_a_bad_field_is_a_422_naming_it() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_project("beta").await;
    let other = app.create_task(json!({"project": "beta", "title": "elsewhere"})).await;
    let board_id = id(&app.create_board("alpha", json!({"name": "Main", "columns": [{"name": "todo"}]})).await);
    let cases = [
        (json!({"project": "nope", "title": "t"}), "project"),
        (json!({"project": "alpha", "title": "  "}), "title"),
        (json!({"project": "alpha", "title": "t", "assignee": ""}), "assignee"),
        (json!({"project": "alpha", "title": "t", "max_iterations": 0}), "max_iterations"),
        (json!({"project": "alpha", "title": "t", "depends_on": [Uuid::new_v4()]}), "depends_on"),
        (json!({"project": "alpha", "title": "t", "depends_on": [id(&other)]}), "depends_on"),
        (json!({"project": "alpha", "title": "t", "depends_on": ["x"]}), "depends_on[0]"),
        (json!({"project": "alpha", "title": "t", "board_id": Uuid::new_v4()}), "board_id"),
        (json!({"project": "alpha", "title": "t", "board_id": board_id, "column_id": Uuid::new_v4()}), "column_id"),
        (json!({"project": "alpha", "title": "t", "colour": "red"}), "colour"),
        (json!({"title": "t"}), "project"),
    ];
    for (body, field) in cases {
        let problem = assert_problem(app.post("/api/v1/tasks", body.clone()).await, 422).await;
        assert_eq!(problem["errors"][0]["field"], field, "{body}");
    }
}

#[tokio::test]
async fn an_unknown_task_is_404_and_a_malformed_id_is_422_naming_id() {
    let app = spawn_app().await;
    let missing = app.get(&format!("/api/v1/tasks/{}", Uuid::new_v4())).await;
    assert_problem(missing, 404).await;
    let start = app.post(&format!("/api/v1/tasks/{}/start", Uuid::new_v4()), json!({})).await;
    assert_problem(start, 404).await;
    for path in ["/api/v1/tasks/not-a-uuid", "/api/v1/tasks/not-a-uuid/complete"] {
        let method = if path.ends_with("complete") { Method::POST } else { Method::GET };
        let problem = assert_problem(app.admin(method, path).send().await.expect("request"), 422).await;
        assert_eq!(problem["errors"][0]["field"], "id");
    }
}

#[tokio::test]
async fn a_patch_with_a_stale_if_match_is_412_and_status_is_not_patchable() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let task = app.create_task(json!({"project": "alpha", "title": "t", "assignee": "worker-1"})).await;
    let path = format!("/api/v1/tasks/{}", id(&task));
    let patch = |if_match: &str, body: Value| {
        app.admin(Method::PATCH, &path).header("if-match", if_match.to_owned()).json(&body).send()
    };
    let ok = patch("\"1\"", json!({"title": "renamed", "assignee": null, "max_iterations": 3})).await.expect("request");
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.headers()["etag"], "\"2\"");
    let body: Value = ok.json().await.expect("json");
    assert_eq!(
        (body["title"].as_str(), body["assignee"].is_null(), body["max_iterations"].as_i64()),
        (Some("renamed"), true, Some(3))
    );
    let stale = patch("\"1\"", json!({"title": "again"})).await.expect("request");
    assert_problem(stale, 412).await;
    let bare = patch("2", json!({"goal": "new goal"})).await.expect("request");
    assert_eq!(bare.status(), 200);
    let status = patch("\"3\"", json!({"status": "done"})).await.expect("request");
    assert_eq!(assert_problem(status, 422).await["errors"][0]["field"], "status");
    let garbage = patch("three", json!({"goal": "x"})).await.expect("request");
    assert_eq!(assert_problem(garbage, 422).await["errors"][0]["field"], "If-Match");
    let any = patch("*", json!({"goal": "any version"})).await.expect("request");
    assert_eq!(any.headers()["etag"], "\"4\"");
    let unconditional =
        app.admin(Method::PATCH, &path).json(&json!({"provider": "codex"})).send().await.expect("request");
    assert_eq!(unconditional.status(), 200);
    assert_eq!(app.count_events("task.updated", &format!("task:{}", id(&task))).await, 4);
    let missing = app.admin(Method::PATCH, &format!("/api/v1/tasks/{}", Uuid::new_v4())).json(&json!({})).send();
    assert_problem(missing.await.expect("request"), 404).await;
}

#[tokio::test]
async fn listing_filters_by_project_status_column_and_assignee_across_pages() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_project("beta").await;
    let board =
        app.create_board("alpha", json!({"name": "Main", "columns": [{"name": "todo"}, {"name": "doing"}]})).await;
    let (board_id, columns) = (id(&board), column_ids(&board));
    let mut wanted = Vec::new();
    for i in 0..5 {
        let task = app
            .create_task(json!({"project": "alpha", "title": format!("a{i}"), "assignee": "human",
            "board_id": board_id, "column_id": columns[1]}))
            .await;
        wanted.push(id(&task));
        app.create_task(json!({"project": "alpha", "title": format!("other{i}"), "assignee": "worker-1"})).await;
        app.create_task(json!({"project": "beta", "title": format!("b{i}"), "assignee": "human"})).await;
    }
    app.post(&format!("/api/v1/tasks/{}/start", wanted[4]), json!({})).await;
    let base = format!("/api/v1/tasks?project=alpha&status=ready&assignee=human&column={}&limit=2", columns[1]);
    let (mut seen, mut cursor) = (Vec::new(), None::<String>);
    loop {
        let url = match &cursor {
            Some(c) => format!("{base}&cursor={c}"),
            None => base.clone(),
        };
        let page = app.get_ok(&url).await;
        seen.extend(page["items"].as_array().expect("items").iter().map(id));
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen, wanted[..4]);
    let all = app.get_ok("/api/v1/tasks").await;
    assert_eq!(all["items"].as_array().map(Vec::len), Some(15));
    for (query, field) in [("status=running", "status"), ("project=nope", "project"), ("column=x", "column")] {
        let response = app.get(&format!("/api/v1/tasks?{query}")).await;
        assert_eq!(assert_problem(response, 422).await["errors"][0]["field"], field);
    }
}

async fn move_to(app: &TestApp, task: &Value, column: Uuid) -> reqwest::Response {
    app.post(&format!("/api/v1/tasks/{}/move", id(task)), json!({"column_id": column})).await
}

#[tokio::test]
async fn a_full_column_refuses_new_and_moved_tasks_with_409() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_project("beta").await;
    // Not `doing` last: the last column is done, and entering it completes the task.
    let columns = json!([{"name": "todo", "wip_limit": 1}, {"name": "doing", "wip_limit": 1}, {"name": "done"}]);
    let board = app.create_board("alpha", json!({"name": "Main", "columns": columns})).await;
    let (board_id, columns) = (id(&board), column_ids(&board));
    let other_board =
        column_ids(&app.create_board("alpha", json!({"name": "Other", "columns": [{"name": "elsewhere"}]})).await);
    let foreign =
        column_ids(&app.create_board("beta", json!({"name": "Theirs", "columns": [{"name": "theirs"}]})).await);
    let first = app.create_task(json!({"project": "alpha", "title": "first", "board_id": board_id})).await;
    assert_eq!(first["column_id"], columns[0].to_string(), "the board's first column by default");
    let full = app.post("/api/v1/tasks", json!({"project": "alpha", "title": "second", "board_id": board_id})).await;
    assert!(assert_problem(full, 409).await["detail"].as_str().unwrap_or("").contains("full"));
    let second = app.create_task(json!({"project": "alpha", "title": "second", "column_id": other_board[0]})).await;
    let moved = move_to(&app, &first, columns[1]).await;
    assert_eq!(moved.status(), 200);
    let moved: Value = moved.json().await.expect("json");
    assert_eq!(
        (moved["column_id"].as_str(), moved["status"].as_str()),
        (Some(columns[1].to_string().as_str()), Some("ready"))
    );
    let refused = move_to(&app, &second, columns[1]).await;
    assert!(assert_problem(refused, 409).await["detail"].as_str().unwrap_or("").contains("doing"));
    assert_eq!(move_to(&app, &first, columns[1]).await.status(), 200, "moving within its own column is no overflow");
    assert_eq!(move_to(&app, &second, columns[0]).await.status(), 200);
    let foreign_move = move_to(&app, &second, foreign[0]).await;
    assert_eq!(assert_problem(foreign_move, 422).await["errors"][0]["field"], "column_id");
    let mismatch = app
        .post(
            "/api/v1/tasks",
            json!({"project": "alpha", "title": "x", "board_id": board_id, "column_id": other_board[0]}),
        )
        .await;
    assert_eq!(assert_problem(mismatch, 422).await["errors"][0]["field"], "column_id");
    assert_eq!(app.count_events("task.moved", &format!("task:{}", id(&first))).await, 2);
}

#[tokio::test]
async fn a_read_token_can_read_tasks_but_not_change_them() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let task = app.create_task(json!({"project": "alpha", "title": "t"})).await;
    let read = app.token("read").await;
    let url = app.url(&format!("/api/v1/tasks/{}", id(&task)));
    let ok = app.client.get(&url).bearer_auth(&read).send().await.expect("request");
    assert_eq!(ok.status(), 200);
    let start = app.client.post(format!("{url}/start")).bearer_auth(&read).send().await.expect("request");
    assert_problem(start, 403).await;
}

#[tokio::test]
async fn a_malformed_list_parameter_is_a_422_naming_it() {
    let app = spawn_app().await;
    for (query, field) in [("limit=abc", "limit"), ("project=nope", "project"), ("status=asleep", "status")] {
        let response = app.get(&format!("/api/v1/tasks?{query}")).await;
        let body = assert_problem(response, 422).await;
        assert_eq!(body["errors"][0]["field"], field, "{query}: {body}");
    }
}

#[tokio::test]
async fn concurrent_moves_into_a_column_never_exceed_its_wip_limit() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let columns = json!([{"name": "todo"}, {"name": "doing", "wip_limit": 2}]);
    let board = app.create_board("alpha", json!({"name": "Main", "columns": columns})).await;
    let (board_id, columns) = (id(&board), column_ids(&board));
    let mut tasks = Vec::new();
    for i in 0..12 {
        tasks.push(app.create_task(json!({"project": "alpha", "title": format!("t{i}"), "board_id": board_id})).await);
    }
    let moves = tasks.iter().map(|task| move_to(&app, task, columns[1]));
    let statuses: Vec<u16> = futures::future::join_all(moves).await.iter().map(|r| r.status().as_u16()).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 2, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), 10, "{statuses:?}");
    let in_doing: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE column_id = $1")
        .bind(columns[1])
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(in_doing, 2);
}

#[tokio::test]
async fn a_task_names_a_known_provider_and_bounded_texts() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let body = json!({"project": "alpha", "title": "t", "provider": "cursor", "goal": "g".repeat(100_001)});
    let problem = assert_problem(app.post("/api/v1/tasks", body).await, 422).await;
    let fields: Vec<&str> =
        problem["errors"].as_array().expect("errors").iter().filter_map(|e| e["field"].as_str()).collect();
    assert_eq!(fields, ["goal", "provider"], "{problem}");
    let task = app.create_task(json!({"project": "alpha", "title": "t", "provider": "codex"})).await;
    let path = format!("/api/v1/tasks/{}", id(&task));
    let response = app.admin(Method::PATCH, &path).json(&json!({"provider": "cursor"})).send().await.expect("request");
    assert_eq!(assert_problem(response, 422).await["errors"][0]["field"], "provider");
}
