//! The task state machine through the API: actions, illegal transitions, dependencies released
//! exactly once, and concurrent completions.

use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

use switchyard::db::tasks::{self, Applied, Change, NewTask};
use switchyard::domain::task::{TaskEvent, TaskStatus};

use crate::helpers::{assert_json, assert_problem, id, spawn_app, TestApp};

/// Task `task`'s `action`, with `body` if there is one.
async fn act(app: &TestApp, task: &Uuid, action: &str, body: Option<Value>) -> reqwest::Response {
    app.send(Method::POST, &format!("/api/v1/tasks/{task}/{action}"), body).await
}

/// Runs an action that must succeed and returns the task.
async fn ok(app: &TestApp, task: &Uuid, action: &str, body: Option<Value>) -> Value {
    assert_json(act(app, task, action, body).await, 200).await
}

#[tokio::test]
async fn a_task_goes_from_start_through_a_question_to_done() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let task = id(&app.create_task(json!({"project": "alpha", "title": "t"})).await);
    let started = ok(&app, &task, "start", None).await;
    assert_eq!((started["status"].as_str(), started["iterations"].as_i64()), (Some("in_progress"), Some(1)));
    assert!(started["started_at"].is_string());
    let asked = ok(&app, &task, "ask", Some(json!({"question": "SSO?"}))).await;
    assert_eq!((asked["status"].as_str(), asked["question"].as_str()), (Some("waiting_input"), Some("SSO?")));
    let answered = ok(&app, &task, "answer", Some(json!({"answer": "no"}))).await;
    assert_eq!((answered["status"].as_str(), answered["question"].is_null()), (Some("in_progress"), true));
    let done = ok(&app, &task, "complete", Some(json!({"result": "shipped"}))).await;
    assert_eq!((done["status"].as_str(), done["result"].as_str()), (Some("done"), Some("shipped")));
    assert!(done["completed_at"].is_string());
    for event in ["task.started", "task.asked", "task.answered", "task.completed"] {
        assert_eq!(app.count_events(event, &format!("task:{task}")).await, 1, "{event}");
    }
    let answer: Value = sqlx::query_scalar("SELECT payload FROM events WHERE type = 'task.answered'")
        .fetch_one(&app.pool)
        .await
        .expect("event");
    assert_eq!((answer["from"].as_str(), answer["answer"].as_str()), (Some("waiting_input"), Some("no")));
}

#[tokio::test]
async fn an_illegal_action_is_a_409_with_the_current_state() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let task = id(&app.create_task(json!({"project": "alpha", "title": "t"})).await);
    let cases = [("complete", "ready"), ("answer", "ready"), ("retry", "ready")];
    for (action, state) in cases {
        let body = (action == "answer").then(|| json!({"answer": "x"}));
        let problem = assert_problem(act(&app, &task, action, body).await, 409).await;
        assert_eq!(problem["current_state"], state, "{action}");
    }
    ok(&app, &task, "start", None).await;
    let twice = assert_problem(act(&app, &task, "start", None).await, 409).await;
    assert_eq!(twice["current_state"], "in_progress");
    let empty = assert_problem(act(&app, &task, "ask", Some(json!({"question": " "}))).await, 422).await;
    assert_eq!(empty["errors"][0]["field"], "question");
    let failed = ok(&app, &task, "fail", Some(json!({"reason": "tests broke"}))).await;
    assert_eq!((failed["status"].as_str(), failed["result"].as_str()), (Some("failed"), Some("tests broke")));
    let cancel = assert_problem(act(&app, &task, "cancel", None).await, 409).await;
    assert_eq!(cancel["current_state"], "failed");
    let retried = ok(&app, &task, "retry", None).await;
    assert_eq!((retried["status"].as_str(), retried["result"].is_null()), (Some("ready"), true));
    let empty_json = app
        .admin(Method::POST, &format!("/api/v1/tasks/{task}/cancel"))
        .header("content-type", "application/json")
        .send()
        .await
        .expect("request");
    assert_eq!(empty_json.status(), 200, "an empty body is no outcome, not broken JSON");
    let untyped =
        app.admin(Method::POST, &format!("/api/v1/tasks/{task}/fail")).body("x").send().await.expect("request");
    assert_problem(untyped, 415).await;
    assert_eq!(app.count_events("task.retried", &format!("task:{task}")).await, 1);
}

#[tokio::test]
async fn completing_the_last_dependency_makes_the_dependent_ready_exactly_once() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let a = id(&app.create_task(json!({"project": "alpha", "title": "Schema"})).await);
    let b = id(&app.create_task(json!({"project": "alpha", "title": "API"})).await);
    let c = app.create_task(json!({"project": "alpha", "title": "UI", "depends_on": [a, b, a]})).await;
    assert_eq!((c["status"].as_str(), c["unmet_dependencies"].as_i64()), (Some("blocked"), Some(2)));
    let c = id(&c);
    assert_eq!(assert_problem(act(&app, &c, "start", None).await, 409).await["current_state"], "blocked");
    for task in [&a, &b] {
        ok(&app, task, "start", None).await;
    }
    ok(&app, &a, "complete", None).await;
    let waiting = app.task(c).await;
    assert_eq!(waiting["status"], "blocked");
    let reason = waiting["blocked_reason"].as_str().expect("a reason");
    assert!(
        reason.contains("1 of 2") && reason.contains("`API` is in_progress") && !reason.contains("Schema"),
        "{reason}"
    );
    assert_eq!(app.count_events("task.ready", &format!("task:{c}")).await, 0);
    ok(&app, &b, "complete", None).await;
    let ready = app.task(c).await;
    assert_eq!((ready["status"].as_str(), ready["unmet_dependencies"].as_i64()), (Some("ready"), Some(0)));
    assert!(ready["blocked_reason"].is_null());
    assert_eq!(ready["dependencies"].as_array().map(Vec::len), Some(2));
    assert_eq!(app.count_events("task.ready", &format!("task:{c}")).await, 1);
    let late = app.create_task(json!({"project": "alpha", "title": "docs", "depends_on": [a]})).await;
    assert_eq!(late["status"], "ready", "a dependency already done counts as met");
}

#[tokio::test]
async fn a_failed_dependency_blocks_the_dependent_until_it_is_retried_and_completed() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let a = id(&app.create_task(json!({"project": "alpha", "title": "Schema"})).await);
    let b = id(&app.create_task(json!({"project": "alpha", "title": "UI", "depends_on": [a]})).await);
    ok(&app, &a, "start", None).await;
    ok(&app, &a, "fail", Some(json!({"result": "migration error"}))).await;
    let blocked = app.task(b).await;
    assert_eq!(blocked["status"], "blocked");
    let reason = blocked["blocked_reason"].as_str().expect("a reason");
    assert!(reason.contains("`Schema` is failed and needs a retry"), "{reason}");
    assert_eq!(ok(&app, &a, "retry", None).await["status"], "ready");
    ok(&app, &a, "start", None).await;
    ok(&app, &a, "complete", None).await;
    assert_eq!(app.task_status(b).await, TaskStatus::Ready);
    assert_eq!(app.count_events("task.ready", &format!("task:{b}")).await, 1);
    let retried = app.task(a).await;
    assert_eq!(retried["iterations"], 2);
}

#[tokio::test]
async fn a_cancelled_dependent_retried_after_its_dependencies_finish_comes_back_ready() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let a = id(&app.create_task(json!({"project": "alpha", "title": "a"})).await);
    let b = id(&app.create_task(json!({"project": "alpha", "title": "b", "depends_on": [a]})).await);
    ok(&app, &b, "cancel", None).await;
    ok(&app, &a, "start", None).await;
    ok(&app, &a, "complete", None).await;
    assert_eq!(app.task_status(b).await, TaskStatus::Cancelled, "completion does not revive a cancelled task");
    assert_eq!(ok(&app, &b, "retry", None).await["status"], "ready");
}

#[tokio::test]
async fn fifty_concurrent_completions_of_one_task_succeed_exactly_once() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let task = id(&app.create_task(json!({"project": "alpha", "title": "hot"})).await);
    let mut dependents = Vec::new();
    for i in 0..3 {
        dependents.push(id(&app
            .create_task(json!({"project": "alpha", "title": format!("d{i}"), "depends_on": [task]}))
            .await));
    }
    ok(&app, &task, "start", None).await;
    let url = app.url(&format!("/api/v1/tasks/{task}/complete"));
    let calls: Vec<_> = (0..50)
        .map(|_| {
            let (client, url, token) = (app.client.clone(), url.clone(), app.admin_token.clone());
            tokio::spawn(async move { client.post(url).bearer_auth(token).send().await.expect("request").status() })
        })
        .collect();
    let mut statuses = Vec::new();
    for call in calls {
        statuses.push(call.await.expect("join").as_u16());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), 49, "{statuses:?}");
    assert_eq!(app.count_events("task.completed", &format!("task:{task}")).await, 1);
    for dependent in &dependents {
        assert_eq!(app.count_events("task.ready", &format!("task:{dependent}")).await, 1);
        assert_eq!(app.task_status(dependent).await, TaskStatus::Ready);
    }
}

#[tokio::test]
async fn a_wish_group_cannot_be_driven_through_the_tasks_routes() {
    let app = spawn_app().await;
    let alpha = id(&app.create_project("alpha").await);
    let wish_id = Uuid::new_v4();
    sqlx::query("INSERT INTO wishes (id, slug, project_id, title) VALUES ($1, 'login', $2, 'Login')")
        .bind(wish_id)
        .bind(alpha)
        .execute(&app.pool)
        .await
        .expect("insert wish");
    let mut tx = app.pool.begin().await.expect("begin");
    let new = NewTask {
        project_id: alpha,
        wish_id: Some(wish_id),
        group_key: Some("backend".into()),
        title: "Backend".into(),
        ..NewTask::default()
    };
    let group = tasks::insert(&mut tx, &new).await.expect("insert group");
    tx.commit().await.expect("commit");
    let problem = assert_problem(act(&app, &group.id, "start", None).await, 409).await;
    assert_eq!(problem["current_state"], "ready");
    assert!(problem["detail"].as_str().unwrap_or("").contains("/wishes/login/groups/backend/start"), "{problem}");
    let mut conn = app.pool.acquire().await.expect("acquire");
    let applied = tasks::apply(&mut conn, group.id, TaskEvent::Start, &Change::default()).await.expect("apply");
    assert!(matches!(applied, Some(Applied::Done(ref t, _)) if t.status == TaskStatus::InProgress), "{applied:?}");
    let payload: Value = sqlx::query_scalar("SELECT payload FROM events WHERE type = 'task.started'")
        .fetch_one(&app.pool)
        .await
        .expect("event");
    assert_eq!((payload["group_key"].as_str(), payload["to"].as_str()), (Some("backend"), Some("in_progress")));
}

/// POSTs concurrently, each on its own tokio task; returns the statuses and bodies in order.
async fn concurrently(app: &TestApp, requests: Vec<(String, Value)>) -> Vec<(u16, Value)> {
    let calls: Vec<_> = requests
        .into_iter()
        .map(|(path, body)| {
            let (client, url, token) = (app.client.clone(), app.url(&path), app.admin_token.clone());
            tokio::spawn(async move {
                let response = client.post(url).bearer_auth(token).json(&body).send().await.expect("request");
                (response.status().as_u16(), response.json::<Value>().await.unwrap_or_default())
            })
        })
        .collect();
    let mut results = Vec::new();
    for call in calls {
        results.push(call.await.expect("join"));
    }
    results
}

#[tokio::test]
async fn two_dependencies_completing_together_release_each_shared_dependent_once() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let a = id(&app.create_task(json!({"project": "alpha", "title": "a"})).await);
    let b = id(&app.create_task(json!({"project": "alpha", "title": "b"})).await);
    let mut dependents = Vec::new();
    for i in 0..10 {
        let body = json!({"project": "alpha", "title": format!("d{i}"), "depends_on": [a, b]});
        dependents.push(id(&app.create_task(body).await));
    }
    ok(&app, &a, "start", None).await;
    ok(&app, &b, "start", None).await;
    let completions = [&a, &b].map(|t| (format!("/api/v1/tasks/{t}/complete"), json!({})));
    let results = concurrently(&app, completions.to_vec()).await;
    assert!(results.iter().all(|(status, _)| *status == 200), "{results:?}");
    for dependent in &dependents {
        assert_eq!(app.count_events("task.ready", &format!("task:{dependent}")).await, 1);
        assert_eq!(app.task_status(dependent).await, TaskStatus::Ready);
    }
}

#[tokio::test]
async fn tasks_created_while_their_dependency_completes_are_never_left_blocked() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let a = id(&app.create_task(json!({"project": "alpha", "title": "a"})).await);
    ok(&app, &a, "start", None).await;
    let mut requests: Vec<(String, Value)> = (0..20)
        .map(|i| ("/api/v1/tasks".to_owned(), json!({"project": "alpha", "title": format!("d{i}"), "depends_on": [a]})))
        .collect();
    requests.insert(10, (format!("/api/v1/tasks/{a}/complete"), json!({})));
    let results = concurrently(&app, requests).await;
    assert!(results.iter().all(|(status, _)| *status == 200 || *status == 201), "{results:?}");
    for (_, task) in results.iter().filter(|(status, _)| *status == 201) {
        let now = app.task(id(task)).await;
        assert_eq!((now["status"].as_str(), now["unmet_dependencies"].as_i64()), (Some("ready"), Some(0)), "{task}");
        let ready_events = app.count_events("task.ready", &format!("task:{}", id(task))).await;
        assert_eq!(ready_events, i64::from(task["status"] == "blocked"), "released once, and only if it was blocked");
    }
}

#[tokio::test]
async fn a_task_that_used_all_its_iterations_is_retried_only_with_a_higher_cap() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let task = id(&app.create_task(json!({"project": "alpha", "title": "t", "max_iterations": 1})).await);
    ok(&app, &task, "start", None).await;
    ok(&app, &task, "fail", Some(json!({"result": "red"}))).await;
    let refused = assert_problem(act(&app, &task, "retry", None).await, 409).await;
    assert_eq!(refused["current_state"], "failed");
    assert!(refused["detail"].as_str().unwrap_or("").contains("higher max_iterations"), "{refused}");
    let invalid = assert_problem(act(&app, &task, "retry", Some(json!({"max_iterations": 0}))).await, 422).await;
    assert_eq!(invalid["errors"][0]["field"], "max_iterations");
    let retried = ok(&app, &task, "retry", Some(json!({"max_iterations": 2}))).await;
    assert_eq!((retried["status"].as_str(), retried["max_iterations"].as_i64()), (Some("ready"), Some(2)));
    let started = ok(&app, &task, "start", None).await;
    assert_eq!(started["iterations"], 2);
}
