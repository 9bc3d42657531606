//! Moving a wish's card between board columns: `POST /api/v1/wishes/{slug}/move`, its checks, its
//! WIP limit (tasks and wishes both count, for task and wish moves alike) and its event.

use serde_json::{json, Value};
use uuid::Uuid;

use crate::helpers::{assert_json, assert_problem, column_ids, id, spawn_app, TestApp};

/// Wish `slug` of `project`, on no board yet.
async fn wish(app: &TestApp, project: &str, slug: &str) -> Value {
    app.create_wish(json!({"slug": slug, "project": project, "title": "Login page"})).await
}

async fn move_wish(app: &TestApp, slug: &str, column: Uuid) -> reqwest::Response {
    app.post(&format!("/api/v1/wishes/{slug}/move"), json!({"column_id": column})).await
}

/// The payloads of the wish's `wish.moved` events, oldest first.
async fn moves(app: &TestApp, slug: &str) -> Vec<Value> {
    sqlx::query_scalar("SELECT payload FROM events WHERE type = 'wish.moved' AND subject = $1 ORDER BY id")
        .bind(format!("wish:{slug}"))
        .fetch_all(&app.pool)
        .await
        .expect("events")
}

#[tokio::test]
async fn a_wish_on_no_board_moves_onto_a_board_of_its_project_then_between_its_columns_with_an_event() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let board =
        app.create_board("alpha", json!({"name": "Delivery", "columns": [{"name": "Todo"}, {"name": "Doing"}]})).await;
    let (board_id, columns) = (id(&board), column_ids(&board));
    let created = wish(&app, "alpha", "login").await;
    assert_eq!((&created["board_id"], &created["column_id"]), (&Value::Null, &Value::Null));

    let placed = assert_json(move_wish(&app, "login", columns[1]).await, 200).await;
    assert_eq!(placed["board_id"], board_id.to_string(), "the column's board becomes the wish's");
    assert_eq!(placed["column_id"], columns[1].to_string());
    assert_eq!(placed["status"], "draft", "a move is no lifecycle change");
    assert!(placed["groups"].is_array(), "answered like the wish's other actions: {placed}");
    assert_eq!(placed["version"], created["version"].as_i64().expect("version") + 1);
    let back = assert_json(move_wish(&app, "login", columns[0]).await, 200).await;
    assert_eq!(back["column_id"], columns[0].to_string());

    let events = moves(&app, "login").await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!((&events[0]["from_column"], &events[0]["to_column"]), (&Value::Null, &json!(columns[1])));
    assert_eq!((&events[1]["from_column"], &events[1]["to_column"]), (&json!(columns[1]), &json!(columns[0])));
    assert_eq!(events[1]["board_id"], json!(board_id), "the board's page hears of it");
    let shown = app.get_ok(&format!("/api/v1/boards/{board_id}")).await;
    assert_eq!((&shown["columns"][0]["wish_count"], &shown["columns"][1]["wish_count"]), (&json!(1), &json!(0)));
}

#[tokio::test]
async fn a_column_off_the_wish_s_board_is_a_422_naming_column_id_and_moves_nothing() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_project("beta").await;
    let board = app.create_board("alpha", json!({"name": "Delivery", "columns": [{"name": "Todo"}]})).await;
    let (board_id, columns) = (id(&board), column_ids(&board));
    let other_board =
        column_ids(&app.create_board("alpha", json!({"name": "Ops", "columns": [{"name": "Queue"}]})).await);
    let foreign =
        column_ids(&app.create_board("beta", json!({"name": "Theirs", "columns": [{"name": "Inbox"}]})).await);
    wish(&app, "alpha", "login").await;

    // On no board yet: any board of its project, but not another project's.
    let refused = move_wish(&app, "login", foreign[0]).await;
    assert_eq!(assert_problem(refused, 422).await["errors"][0]["field"], "column_id");
    assert_json(move_wish(&app, "login", columns[0]).await, 200).await;
    // On a board: only that board's columns.
    for column in [other_board[0], foreign[0], Uuid::new_v4()] {
        let refused = move_wish(&app, "login", column).await;
        let problem = assert_problem(refused, 422).await;
        assert_eq!(problem["errors"][0]["field"], "column_id", "{problem}");
    }
    let now = app.get_ok("/api/v1/wishes/login").await;
    assert_eq!((&now["board_id"], &now["column_id"]), (&json!(board_id), &json!(columns[0])));
    assert_eq!(moves(&app, "login").await.len(), 1);
    assert_problem(move_wish(&app, "nope", columns[0]).await, 404).await;
}

#[tokio::test]
async fn a_full_column_refuses_a_wish_with_409_and_nothing_changes_and_wishes_count_for_task_moves_too() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let board = app
        .create_board(
            "alpha",
            json!({"name": "Delivery", "columns": [{"name": "Todo"}, {"name": "Review", "wip_limit": 1}]}),
        )
        .await;
    let (board_id, columns) = (id(&board), column_ids(&board));
    let task = json!({"project": "alpha", "title": "Fix bug", "board_id": board_id, "column_id": columns[1]});
    let task = app.create_task(task).await;
    wish(&app, "alpha", "login").await;
    let placed = assert_json(move_wish(&app, "login", columns[0]).await, 200).await;

    // The task fills Review: the wish may not follow.
    let full = move_wish(&app, "login", columns[1]).await;
    let problem = assert_problem(full, 409).await;
    assert!(problem["detail"].as_str().unwrap_or("").contains("column `Review` is full"), "{problem}");
    let now = app.get_ok("/api/v1/wishes/login").await;
    assert_eq!((&now["column_id"], &now["version"]), (&json!(columns[0]), &placed["version"]));
    assert_eq!(moves(&app, "login").await.len(), 1, "no event for a refused move");

    // Once the task leaves, the wish takes the slot, and then a task may not come back.
    let task_move = format!("/api/v1/tasks/{}/move", task["id"].as_str().expect("id"));
    assert_json(app.post(&task_move, json!({"column_id": columns[0]})).await, 200).await;
    assert_json(move_wish(&app, "login", columns[1]).await, 200).await;
    assert_json(move_wish(&app, "login", columns[1]).await, 200).await;
    let refused = app.post(&task_move, json!({"column_id": columns[1]})).await;
    assert!(assert_problem(refused, 409).await["detail"].as_str().unwrap_or("").contains("full"));
    let created = app.post("/api/v1/tasks", json!({"project": "alpha", "title": "x", "column_id": columns[1]})).await;
    assert_problem(created, 409).await;
}

#[tokio::test]
async fn an_unknown_field_in_a_wish_move_is_a_422_naming_it() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let columns =
        column_ids(&app.create_board("alpha", json!({"name": "Delivery", "columns": [{"name": "Todo"}]})).await);
    wish(&app, "alpha", "login").await;
    let body = json!({"column_id": columns[0], "position": 2});
    let refused = app.post("/api/v1/wishes/login/move", body).await;
    assert_eq!(assert_problem(refused, 422).await["errors"][0]["field"], "position");
    let missing = app.post("/api/v1/wishes/login/move", json!({})).await;
    assert_eq!(assert_problem(missing, 422).await["errors"][0]["field"], "column_id");
    assert_eq!(app.get_ok("/api/v1/wishes/login").await["column_id"], Value::Null);
}
