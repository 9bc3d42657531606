//! Choosing what a task waits for after it was created: `PUT /tasks/{id}/dependencies`.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{assert_json, assert_problem, spawn_app, TestApp};
use switchyard::domain::task::TaskStatus;

async fn task(app: &TestApp, title: &str) -> String {
    let task = app.create_task(json!({"project": "alpha", "title": title})).await;
    task["id"].as_str().expect("id").to_owned()
}

async fn set(app: &TestApp, id: &str, depends_on: &[&str]) -> reqwest::Response {
    app.send(Method::PUT, &format!("/api/v1/tasks/{id}/dependencies"), Some(json!({"depends_on": depends_on}))).await
}

#[tokio::test]
async fn new_dependencies_block_a_ready_task_until_they_are_done() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let (schema, api) = (task(&app, "Schema").await, task(&app, "API").await);

    let blocked = assert_json(set(&app, &api, &[&schema]).await, 200).await;
    assert_eq!(blocked["status"], "blocked");
    assert_eq!(blocked["unmet_dependencies"], 1);
    let detail = app.task(&api).await;
    assert_eq!(detail["dependencies"][0]["title"], "Schema");
    assert_eq!(app.count_events("task.dependencies_changed", &format!("task:{api}")).await, 1);

    // Its dependency done, it is released as any dependent is.
    app.post_ok(&format!("/api/v1/tasks/{schema}/start"), json!({})).await;
    app.post_ok(&format!("/api/v1/tasks/{schema}/complete"), json!({})).await;
    assert_eq!(app.task_status(&api).await, TaskStatus::Ready);

    // Waiting for nothing again: ready at once; waiting only for done tasks: ready too.
    let other = task(&app, "Docs").await;
    assert_json(set(&app, &other, &[&api]).await, 200).await;
    assert_eq!(app.task_status(&other).await, TaskStatus::Blocked);
    assert_eq!(assert_json(set(&app, &other, &[]).await, 200).await["status"], "ready");
    assert_eq!(assert_json(set(&app, &other, &[&schema]).await, 200).await["status"], "ready");
}

#[tokio::test]
async fn a_cycle_a_started_task_and_a_wish_group_are_refused() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let (a, b, c) = (task(&app, "A").await, task(&app, "B").await, task(&app, "C").await);
    assert_json(set(&app, &b, &[&a]).await, 200).await;
    assert_json(set(&app, &c, &[&b]).await, 200).await;

    let cycle = assert_problem(set(&app, &a, &[&c]).await, 422).await;
    assert_eq!(cycle["errors"][0]["field"], "depends_on", "{cycle}");
    assert!(cycle["detail"].as_str().unwrap_or("").contains("cycle"), "{cycle}");
    let itself = assert_problem(set(&app, &a, &[&a]).await, 422).await;
    assert_eq!(itself["errors"][0]["field"], "depends_on");
    let unknown = assert_problem(set(&app, &a, &["7c9e6679-7425-40de-944b-e07fc1f90ae7"]).await, 422).await;
    assert_eq!(unknown["errors"][0]["field"], "depends_on");
    assert_eq!(app.task_status(&a).await, TaskStatus::Ready, "nothing changed");

    app.post_ok(&format!("/api/v1/tasks/{a}/start"), json!({})).await;
    let started = assert_problem(set(&app, &a, &[]).await, 409).await;
    assert_eq!(started["current_state"], "in_progress", "{started}");

    app.create_wish(json!({"slug": "login", "project": "alpha", "title": "Login",
        "groups": [{"key": "api", "title": "API"}]}))
        .await;
    let group = app.get_ok("/api/v1/tasks?project=alpha&limit=100").await["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|t| t["group_key"] == "api")
        .map(|t| t["id"].as_str().expect("id").to_owned())
        .expect("the wish's group");
    assert_problem(set(&app, &group, &[&b]).await, 409).await;
    let malformed = assert_problem(
        app.send(Method::PUT, &format!("/api/v1/tasks/{b}/dependencies"), Some(json!({"depends_on": ["x"]}))).await,
        422,
    )
    .await;
    assert!(malformed["errors"][0]["field"].as_str().unwrap_or("").starts_with("depends_on"), "{malformed}");
}
