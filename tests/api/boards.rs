//! Boards, their columns, reconcile and templates through `/api/v1`. Tasks and wishes are
//! inserted directly: this file tests where cards go, not how they are created.

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::helpers::{assert_json, assert_problem, column_ids, id, spawn_app, TestApp};

fn names(board: &Value) -> Vec<String> {
    board["columns"].as_array().expect("columns").iter().map(|c| c["name"].as_str().unwrap_or("").to_owned()).collect()
}

/// Inserts a task on `board` in `column` (either may be None) and returns its id.
async fn insert_task(app: &TestApp, project: Uuid, board: Option<Uuid>, column: Option<Uuid>) -> Uuid {
    let task = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO tasks (id, project_id, title, status, board_id, column_id) VALUES ($1, $2, 'T', 'ready', $3, $4)",
    )
    .bind(task)
    .bind(project)
    .bind(board)
    .bind(column)
    .execute(&app.pool)
    .await
    .expect("insert task");
    task
}

/// Inserts wish `w` on `board` in `column` and returns its id.
async fn insert_wish(app: &TestApp, project: Uuid, board: Uuid, column: Uuid) -> Uuid {
    let wish = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO wishes (id, slug, project_id, title, board_id, column_id) VALUES ($1, 'w', $2, 'W', $3, $4)",
    )
    .bind(wish)
    .bind(project)
    .bind(board)
    .bind(column)
    .execute(&app.pool)
    .await
    .expect("insert wish");
    wish
}

async fn task_column(app: &TestApp, task: Uuid) -> Option<Uuid> {
    sqlx::query_scalar("SELECT column_id FROM tasks WHERE id = $1").bind(task).fetch_one(&app.pool).await.expect("task")
}

#[tokio::test]
async fn a_board_without_columns_gets_the_default_set_and_reads_back_with_counts() {
    let app = spawn_app().await;
    let project = app.create_project("acme").await;
    let board = app.create_board("acme", json!({"name": "Main"})).await;
    assert_eq!(names(&board), ["Backlog", "In progress", "Review", "Done"]);
    assert_eq!(board["columns"][2]["gate"], "human");
    assert_eq!(board["project"], "acme");

    let backlog = column_ids(&board)[0];
    insert_task(&app, id(&project), Some(id(&board)), Some(backlog)).await;
    let response = app.get(&format!("/api/v1/boards/{}", id(&board))).await;
    assert_eq!(response.headers()["etag"], format!("\"{}\"", board["version"]));
    let read = assert_json(response, 200).await;
    assert_eq!(read["columns"][0]["task_count"], 1);
    assert_eq!(read["columns"][1]["task_count"], 0);

    let listed = app.get_ok("/api/v1/projects/acme/boards").await;
    assert_eq!(listed["items"][0]["id"], board["id"]);
    assert_eq!(listed["items"][0]["columns"].as_array().map(Vec::len), Some(4));
}

#[tokio::test]
async fn bad_columns_are_a_422_naming_the_field_and_columns_with_a_template_is_refused() {
    let app = spawn_app().await;
    app.create_project("acme").await;
    let cases = [
        (
            json!({"name": "B", "columns": [{"name": "a"}, {"name": "b"}, {"name": "c", "gate": "robot"}]}),
            "columns[2].gate",
        ),
        (json!({"name": "B", "columns": [{"name": "a", "wip_limit": 0}]}), "columns[0].wip_limit"),
        (json!({"name": "B", "columns": [{"name": "a"}, {"name": "A"}]}), "columns[1].name"),
        (json!({"name": "B", "columns": []}), "columns"),
        (json!({"name": "B", "columns": [{"name": "a", "colour": "red"}]}), "columns[0].colour"),
        (json!({"name": "B", "columns": [{"name": "a"}], "template": "t"}), "template"),
        (json!({"name": "B", "template": "no-such-template"}), "template"),
        (json!({"name": " "}), "name"),
    ];
    for (body, field) in cases {
        let response = app.post("/api/v1/projects/acme/boards", body.clone()).await;
        let problem = assert_problem(response, 422).await;
        assert_eq!(problem["errors"][0]["field"], field, "{body}: {problem}");
    }
    let missing = app.post("/api/v1/projects/nope/boards", json!({"name": "B"})).await;
    assert_problem(missing, 404).await;
    app.create_board("acme", json!({"name": "Same"})).await;
    let twice = app.post("/api/v1/projects/acme/boards", json!({"name": "Same"})).await;
    assert_problem(twice, 409).await;
}

#[tokio::test]
async fn a_template_is_validated_listed_and_copied_into_a_new_board() {
    let app = spawn_app().await;
    app.create_project("acme").await;
    let bad = app
        .post(
            "/api/v1/board-templates",
            json!({"name": "t", "columns": [{"name": "a"}, {"name": "b"}, {"name": "c", "gate": "sometimes"}]}),
        )
        .await;
    assert_eq!(assert_problem(bad, 422).await["errors"][0]["field"], "columns[2].gate");

    let columns = json!([{"name": "Todo"}, {"name": "Code review", "gate": "agent", "action_skill": "review-pr", "wip_limit": 3}, {"name": "Done"}]);
    for name in ["lean", "other", "third"] {
        let body = json!({"name": name, "description": "d", "columns": columns});
        assert_json(app.post("/api/v1/board-templates", body).await, 201).await;
    }
    let twice = app.post("/api/v1/board-templates", json!({"name": "lean", "columns": columns})).await;
    assert_problem(twice, 409).await;

    // The built-in templates (`software`, `simple`) come first: they were there before.
    let first = app.get_ok("/api/v1/board-templates?limit=4").await;
    assert_eq!(first["items"].as_array().map(Vec::len), Some(4));
    assert_eq!(first["items"][0]["name"], "software");
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let second = app.get_ok(&format!("/api/v1/board-templates?limit=4&cursor={cursor}")).await;
    assert_eq!(second["items"][0]["name"], "third");
    assert!(second["next_cursor"].is_null());

    let board = app.create_board("acme", json!({"name": "From template", "template": "lean"})).await;
    assert_eq!(names(&board), ["Todo", "Code review", "Done"]);
    assert_eq!(board["columns"][1]["gate"], "agent");
    assert_eq!(board["columns"][1]["action_skill"], "review-pr");
    assert_eq!(board["columns"][1]["wip_limit"], 3);
}

#[tokio::test]
async fn a_board_is_renamed_with_if_match_and_deleted_leaving_its_tasks_off_board() {
    let app = spawn_app().await;
    let project = app.create_project("acme").await;
    let board = app.create_board("acme", json!({"name": "Old"})).await;
    let path = format!("/api/v1/boards/{}", id(&board));
    let stale = app.admin(Method::PATCH, &path).header("if-match", "\"99\"").json(&json!({"name": "New"})).send().await;
    assert_problem(stale.expect("request"), 412).await;
    let unknown = app.send(Method::PATCH, &path, Some(json!({"name": "New", "columns": []}))).await;
    assert_eq!(assert_problem(unknown, 422).await["errors"][0]["field"], "columns");
    let renamed = app
        .admin(Method::PATCH, &path)
        .header("if-match", format!("\"{}\"", board["version"]))
        .json(&json!({"name": "New"}));
    let renamed = assert_json(renamed.send().await.expect("request"), 200).await;
    assert_eq!(renamed["name"], "New");
    assert_eq!(renamed["version"], board["version"].as_i64().unwrap_or(0) + 1);

    let column = column_ids(&board)[1];
    let task = insert_task(&app, id(&project), Some(id(&board)), Some(column)).await;
    assert_eq!(app.send(Method::DELETE, &path, None).await.status(), 204);
    assert_problem(app.get(&path).await, 404).await;
    let (board_id, column_id): (Option<Uuid>, Option<Uuid>) =
        sqlx::query_as("SELECT board_id, column_id FROM tasks WHERE id = $1")
            .bind(task)
            .fetch_one(&app.pool)
            .await
            .expect("task");
    assert_eq!((board_id, column_id), (None, None));
    assert_problem(app.get("/api/v1/boards/not-a-uuid").await, 404).await;
}

#[tokio::test]
async fn columns_are_added_at_a_position_and_updated_and_a_wip_limit_below_the_load_is_refused() {
    let app = spawn_app().await;
    let project = app.create_project("acme").await;
    let board = app.create_board("acme", json!({"name": "B", "columns": [{"name": "A"}, {"name": "C"}]})).await;
    let base = format!("/api/v1/boards/{}/columns", id(&board));
    let added = assert_json(app.post(&base, json!({"name": "B", "gate": "agent", "position": 1})).await, 201).await;
    assert_eq!(names(&added), ["A", "B", "C"]);
    let appended = assert_json(app.post(&base, json!({"name": "D"})).await, 201).await;
    assert_eq!(names(&appended), ["A", "B", "C", "D"]);
    let positions: Vec<i64> =
        appended["columns"].as_array().expect("cols").iter().map(|c| c["position"].as_i64().unwrap_or(-1)).collect();
    assert_eq!(positions, [0, 1, 2, 3]);
    let far = app.post(&base, json!({"name": "E", "position": 9})).await;
    assert_eq!(assert_problem(far, 422).await["errors"][0]["field"], "position");
    assert_problem(app.post(&base, json!({"name": "a"})).await, 409).await;

    let b = column_ids(&added)[1];
    for _ in 0..3 {
        insert_task(&app, id(&project), Some(id(&board)), Some(b)).await;
    }
    let column = format!("{base}/{b}");
    let too_low = app.send(Method::PATCH, &column, Some(json!({"wip_limit": 2}))).await;
    let problem = assert_problem(too_low, 409).await;
    assert!(problem["detail"].as_str().unwrap_or("").contains("3 tasks"), "{problem}");
    let zero = app.send(Method::PATCH, &column, Some(json!({"wip_limit": 0}))).await;
    assert_eq!(assert_problem(zero, 422).await["errors"][0]["field"], "wip_limit");
    let updated = assert_json(
        app.send(Method::PATCH, &column, Some(json!({"wip_limit": 3, "name": "Build", "action_skill": "build"}))).await,
        200,
    )
    .await;
    assert_eq!(updated["columns"][1]["name"], "Build");
    assert_eq!(updated["columns"][1]["wip_limit"], 3);
    let cleared = assert_json(
        app.send(Method::PATCH, &column, Some(json!({"wip_limit": null, "action_skill": null}))).await,
        200,
    )
    .await;
    assert_eq!(cleared["columns"][1]["wip_limit"], Value::Null);
    assert_eq!(cleared["columns"][1]["action_skill"], Value::Null);
    assert_eq!(cleared["columns"][1]["gate"], "agent");
}

#[tokio::test]
async fn a_reorder_must_be_a_permutation_of_the_boards_columns() {
    let app = spawn_app().await;
    app.create_project("acme").await;
    let board = app.create_board("acme", json!({"name": "B"})).await;
    let other = app.create_board("acme", json!({"name": "Other"})).await;
    let ids: Vec<String> =
        board["columns"].as_array().expect("cols").iter().map(|c| c["id"].as_str().unwrap_or("").to_owned()).collect();
    let path = format!("/api/v1/boards/{}/columns/order", id(&board));
    let cases = [
        (json!([ids[0], ids[1], ids[2]]), "column_ids"),
        (json!([ids[0], ids[1], ids[2], ids[2]]), "column_ids[3]"),
        (json!([ids[0], ids[1], ids[2], other["columns"][0]["id"]]), "column_ids[3]"),
        (json!([ids[0], ids[1], ids[2], ids[3], Uuid::new_v4()]), "column_ids[4]"),
    ];
    for (column_ids, field) in cases {
        let response = app.send(Method::PUT, &path, Some(json!({"column_ids": column_ids}))).await;
        assert_eq!(assert_problem(response, 422).await["errors"][0]["field"], field, "{column_ids}");
    }
    let reversed: Vec<&String> = ids.iter().rev().collect();
    let response = assert_json(app.send(Method::PUT, &path, Some(json!({"column_ids": reversed}))).await, 200).await;
    assert_eq!(names(&response), ["Done", "Review", "In progress", "Backlog"]);
    let positions: Vec<i64> =
        response["columns"].as_array().expect("cols").iter().map(|c| c["position"].as_i64().unwrap_or(-1)).collect();
    assert_eq!(positions, [0, 1, 2, 3]);
}

#[tokio::test]
async fn deleting_a_column_moves_its_tasks_and_wishes_to_the_first_remaining_column() {
    let app = spawn_app().await;
    let project = app.create_project("acme").await;
    let board = app.create_board("acme", json!({"name": "B"})).await;
    let column = column_ids(&board);
    let (backlog, review) = (column[0], column[2]);
    let tasks = [
        insert_task(&app, id(&project), Some(id(&board)), Some(backlog)).await,
        insert_task(&app, id(&project), Some(id(&board)), Some(backlog)).await,
    ];
    insert_wish(&app, id(&project), id(&board), backlog).await;

    let path = format!("/api/v1/boards/{}/columns/{backlog}", id(&board));
    let deleted = assert_json(app.send(Method::DELETE, &path, None).await, 200).await;
    assert_eq!(deleted["moved"], json!({"tasks": 2, "wishes": 1}));
    assert_eq!(deleted["moved_to"], column[1].to_string());
    assert_eq!(names(&deleted["board"]), ["In progress", "Review", "Done"]);
    assert_eq!(deleted["board"]["columns"][0]["position"], 0);
    assert_eq!(deleted["board"]["columns"][0]["task_count"], 2);
    for task in tasks {
        assert_eq!(task_column(&app, task).await, Some(column[1]));
    }
    assert_problem(app.send(Method::DELETE, &path, None).await, 404).await;

    // Down to one column holding tasks: it cannot go.
    for i in [1, 3] {
        assert_json(
            app.send(Method::DELETE, &format!("/api/v1/boards/{}/columns/{}", id(&board), column[i]), None).await,
            200,
        )
        .await;
    }
    let last = app.send(Method::DELETE, &format!("/api/v1/boards/{}/columns/{review}", id(&board)), None).await;
    let problem = assert_problem(last, 409).await;
    assert!(problem["detail"].as_str().unwrap_or("").contains("2 tasks"), "{problem}");
}

#[tokio::test]
async fn reconcile_puts_stray_cards_on_the_first_column_and_reports_how_many() {
    let app = spawn_app().await;
    let project = app.create_project("acme").await;
    let board = app.create_board("acme", json!({"name": "B"})).await;
    let other = app.create_board("acme", json!({"name": "Other"})).await;
    let first = column_ids(&board)[0];
    let second = column_ids(&board)[1];
    let foreign = column_ids(&other)[2];
    let columnless = insert_task(&app, id(&project), Some(id(&board)), None).await;
    let misplaced = insert_task(&app, id(&project), Some(id(&board)), Some(foreign)).await;
    let settled = insert_task(&app, id(&project), Some(id(&board)), Some(second)).await;
    let elsewhere = insert_task(&app, id(&project), Some(id(&other)), None).await;

    let path = format!("/api/v1/boards/{}/reconcile", id(&board));
    let result = assert_json(app.send(Method::POST, &path, None).await, 200).await;
    assert_eq!(result["moved"], 2);
    assert_eq!(result["tasks"], 2);
    assert_eq!(result["column_id"], first.to_string());
    assert_eq!(task_column(&app, columnless).await, Some(first));
    assert_eq!(task_column(&app, misplaced).await, Some(first));
    assert_eq!(task_column(&app, settled).await, Some(second));
    assert_eq!(task_column(&app, elsewhere).await, None);

    let again = assert_json(app.send(Method::POST, &path, None).await, 200).await;
    assert_eq!(again["moved"], 0);
    let events: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE type = 'board.reconciled'")
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(events, 2);
}

#[tokio::test]
async fn reconcile_puts_a_wish_whose_column_is_gone_on_the_first_column_and_counts_it() {
    let app = spawn_app().await;
    let project = app.create_project("acme").await;
    let board = app.create_board("acme", json!({"name": "B"})).await;
    let column = column_ids(&board);
    let wish = insert_wish(&app, id(&project), id(&board), column[3]).await;
    // The column goes without the API (which would move its cards first): the wish keeps its
    // board but loses its column.
    sqlx::query("DELETE FROM board_columns WHERE id = $1").bind(column[3]).execute(&app.pool).await.expect("delete");

    let path = format!("/api/v1/boards/{}/reconcile", id(&board));
    let result = assert_json(app.send(Method::POST, &path, None).await, 200).await;
    assert_eq!((&result["moved"], &result["tasks"], &result["wishes"]), (&json!(1), &json!(0), &json!(1)));
    let placed: (Option<Uuid>, Option<Uuid>) = sqlx::query_as("SELECT board_id, column_id FROM wishes WHERE id = $1")
        .bind(wish)
        .fetch_one(&app.pool)
        .await
        .expect("wish");
    assert_eq!(placed, (Some(id(&board)), Some(column[0])));
    assert_eq!(assert_json(app.send(Method::POST, &path, None).await, 200).await["wishes"], 0);
}

#[tokio::test]
async fn column_changes_honour_if_match_on_the_board_version() {
    let app = spawn_app().await;
    app.create_project("acme").await;
    let board = app.create_board("acme", json!({"name": "B"})).await;
    let base = format!("/api/v1/boards/{}/columns", id(&board));
    let stale = app.admin(Method::POST, &base).header("if-match", "\"0\"").json(&json!({"name": "X"})).send().await;
    assert_problem(stale.expect("request"), 412).await;
    let current = format!("\"{}\"", board["version"]);
    let added = app.admin(Method::POST, &base).header("if-match", &current).json(&json!({"name": "X"})).send().await;
    let added = assert_json(added.expect("request"), 201).await;
    assert_eq!(added["version"], board["version"].as_i64().unwrap_or(0) + 1);
    // The old version no longer matches: the board changed.
    let column = &board["columns"][0]["id"];
    let patch =
        app.admin(Method::PATCH, &format!("{base}/{}", column.as_str().unwrap_or(""))).header("if-match", &current);
    assert_problem(patch.json(&json!({"name": "Y"})).send().await.expect("request"), 412).await;
}

#[tokio::test]
async fn reconciling_a_board_without_columns_is_a_409_when_cards_need_one() {
    let app = spawn_app().await;
    let project = app.create_project("acme").await;
    let board = app.create_board("acme", json!({"name": "B", "columns": [{"name": "Only"}]})).await;
    let only = &board["columns"][0]["id"];
    let path = format!("/api/v1/boards/{}/columns/{}", id(&board), only.as_str().unwrap_or(""));
    assert_json(app.send(Method::DELETE, &path, None).await, 200).await;
    let reconcile = format!("/api/v1/boards/{}/reconcile", id(&board));
    assert_eq!(assert_json(app.send(Method::POST, &reconcile, None).await, 200).await["moved"], 0);
    insert_task(&app, id(&project), Some(id(&board)), None).await;
    assert_problem(app.send(Method::POST, &reconcile, None).await, 409).await;
}

fn fields(problem: &Value) -> Vec<&str> {
    problem["errors"].as_array().expect("errors").iter().filter_map(|e| e["field"].as_str()).collect()
}

#[tokio::test]
async fn a_board_template_or_column_with_several_bad_fields_is_refused_naming_each_at_once() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let columns = json!([{"name": ""}, {"name": "Done", "wip_limit": 0}, {"name": "Review"}, {"name": "review"}]);
    let board = app.post("/api/v1/projects/alpha/boards", json!({"name": " ", "columns": columns})).await;
    let problem = assert_problem(board, 422).await;
    assert_eq!(fields(&problem), ["name", "columns[0].name", "columns[1].wip_limit", "columns[3].name"], "{problem}");

    let columns = json!([{"name": "A", "wip_limit": -1, "action_skill": "x".repeat(201)}, {"name": " "}]);
    let template = app.post("/api/v1/board-templates", json!({"name": "", "columns": columns})).await;
    let problem = assert_problem(template, 422).await;
    assert_eq!(
        fields(&problem),
        ["name", "columns[0].action_skill", "columns[0].wip_limit", "columns[1].name"],
        "{problem}"
    );

    let board = assert_json(app.post("/api/v1/projects/alpha/boards", json!({"name": "Delivery"})).await, 201).await;
    let path = format!("/api/v1/boards/{}/columns", board["id"].as_str().expect("id"));
    let column = app.post(&path, json!({"name": "", "action_skill": "x".repeat(201), "wip_limit": 0})).await;
    let problem = assert_problem(column, 422).await;
    assert_eq!(fields(&problem), ["name", "action_skill", "wip_limit"], "{problem}");
}
