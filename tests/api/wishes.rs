use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, spawn_app, TestApp};

fn group<'a>(wish: &'a Value, key: &str) -> &'a Value {
    wish["groups"].as_array().and_then(|g| g.iter().find(|g| g["key"] == key)).expect("group")
}

/// Wish `slug` with groups `api` and `ui` (after `api`), of a project `alpha` made for it.
async fn two_step_wish(app: &TestApp, slug: &str) -> Value {
    app.create_project("alpha").await;
    app.skip_reviews("alpha").await;
    let wish = app
        // A branch: a wish enters the merge queue with the branch it merges.
        .create_wish(json!({"slug": slug, "project": "alpha", "title": "Login page", "branch": format!("wish/{slug}"), "groups": [
            {"key": "api", "title": "API"},
            {"key": "ui", "title": "UI", "depends_on": ["api"]}
        ]}))
        .await;
    assert_eq!(wish["status"], "draft");
    wish
}

#[tokio::test]
async fn a_wish_with_dependent_groups_runs_to_merged() {
    let app = spawn_app().await;
    let wish = two_step_wish(&app, "login").await;
    assert_eq!(group(&wish, "api")["status"], "ready");
    assert_eq!(group(&wish, "ui")["status"], "blocked");
    assert_eq!(group(&wish, "ui")["depends_on"], json!(["api"]));
    app.start_wish("login").await;
    app.post_ok("/api/v1/wishes/login/groups/api/start", json!({})).await;
    let after = app.post_ok("/api/v1/wishes/login/groups/api/complete", json!({"result": "done"})).await;
    assert_eq!(after["group"]["status"], "done");
    assert_eq!(after["group"]["result"], "done");
    assert_eq!(after["now_ready"], json!(["ui"]), "completing the dependency says which group it unblocked");
    assert_eq!(after["status"], "executing");
    let wish = app.get_ok("/api/v1/wishes/login").await;
    assert_eq!(group(&wish, "ui")["status"], "ready");
    app.post_ok("/api/v1/wishes/login/groups/ui/start", json!({})).await;
    let done = app.post_ok("/api/v1/wishes/login/groups/ui/complete", json!({})).await;
    assert_eq!(done["status"], "completed");
    app.post_ok("/api/v1/wishes/login/submit", json!({})).await;
    let merged = app.post_ok("/api/v1/wishes/login/merge-result", json!({"outcome": "merged"})).await;
    assert_eq!(merged["status"], "merged");
    let listed = app.get_ok("/api/v1/wishes?status=merged").await;
    assert_eq!(listed["items"][0]["slug"], "login");
}

#[tokio::test]
async fn a_plan_with_an_unknown_key_or_a_cycle_is_refused_naming_them() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let unknown = app
        .post(
            "/api/v1/wishes",
            json!({"slug": "w1", "project": "alpha", "title": "t", "groups": [
        {"key": "a", "title": "A"}, {"key": "b", "title": "B", "depends_on": ["ghost"]}]}),
        )
        .await;
    let body = assert_problem(unknown, 422).await;
    assert_eq!(body["errors"][0]["field"], "groups[1].depends_on");
    assert!(body["detail"].as_str().unwrap_or("").contains("ghost"), "{body}");
    let cycle = app
        .post(
            "/api/v1/wishes",
            json!({"slug": "w2", "project": "alpha", "title": "t", "groups": [
        {"key": "a", "title": "A", "depends_on": ["c"]}, {"key": "b", "title": "B", "depends_on": ["a"]},
        {"key": "c", "title": "C", "depends_on": ["b"]}]}),
        )
        .await;
    let body = assert_problem(cycle, 422).await;
    let detail = body["detail"].as_str().unwrap_or("");
    assert!(detail.contains('a') && detail.contains('b') && detail.contains('c'), "{body}");
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM wishes").fetch_one(&app.pool).await.expect("count");
    assert_eq!(count, 0, "nothing is stored from a refused plan");
}

#[tokio::test]
async fn an_illegal_transition_is_409_with_the_current_state() {
    let app = spawn_app().await;
    two_step_wish(&app, "early").await;
    let body = assert_problem(app.post("/api/v1/wishes/early/start", json!({})).await, 409).await;
    assert_eq!(body["current_state"], "draft");
    let body = assert_problem(app.post("/api/v1/wishes/early/groups/api/start", json!({})).await, 409).await;
    assert_eq!(body["current_state"], "draft");
    assert_problem(app.post("/api/v1/wishes/nope/plan", json!({})).await, 404).await;
}

#[tokio::test]
async fn a_held_wish_refuses_every_transition_until_released() {
    let app = spawn_app().await;
    two_step_wish(&app, "held").await;
    app.post_ok("/api/v1/wishes/held/plan", json!({})).await;
    app.post_ok("/api/v1/wishes/held/hold", json!({})).await;
    for action in ["queue", "cancel", "hold"] {
        assert_problem(app.post(&format!("/api/v1/wishes/held/{action}"), json!({})).await, 409).await;
    }
    app.post_ok("/api/v1/wishes/held/release", json!({})).await;
    let queued = app.post_ok("/api/v1/wishes/held/queue", json!({})).await;
    assert_eq!(queued["status"], "queued");
}

#[tokio::test]
async fn a_blocked_wish_starts_when_its_blocker_merges() {
    let app = spawn_app().await;
    two_step_wish(&app, "first").await;
    app.create_wish(json!({"slug": "second", "project": "alpha", "title": "t", "blocked_by": ["first"],
        "groups": [{"key": "x", "title": "X"}]}))
        .await;
    app.post_ok("/api/v1/wishes/second/plan", json!({})).await;
    app.post_ok("/api/v1/wishes/second/queue", json!({})).await;
    let body = assert_problem(app.post("/api/v1/wishes/second/start", json!({})).await, 409).await;
    assert!(body["detail"].as_str().unwrap_or("").contains("blocked"), "{body}");
    app.start_wish("first").await;
    for key in ["api", "ui"] {
        app.post_ok(&format!("/api/v1/wishes/first/groups/{key}/start"), json!({})).await;
        app.post_ok(&format!("/api/v1/wishes/first/groups/{key}/complete"), json!({})).await;
    }
    app.post_ok("/api/v1/wishes/first/submit", json!({})).await;
    app.post_ok("/api/v1/wishes/first/merge-result", json!({"outcome": "merged"})).await;
    let second = app.get_ok("/api/v1/wishes/second").await;
    assert_eq!(second["status"], "executing");
    assert_eq!(second["blocked_by"], json!([{"slug": "first", "merged": true}]));
}

#[tokio::test]
async fn a_group_out_of_iterations_fails_the_wish_and_resume_retries_it() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_wish(json!({"slug": "flaky", "project": "alpha", "title": "t",
        "groups": [{"key": "only", "title": "Only", "max_iterations": 2}]}))
        .await;
    app.start_wish("flaky").await;
    app.post_ok("/api/v1/wishes/flaky/groups/only/start", json!({})).await;
    let once = app.post_ok("/api/v1/wishes/flaky/groups/only/fail", json!({"result": "tests red"})).await;
    assert_eq!(once["status"], "executing");
    assert_eq!(once["group"]["status"], "ready", "an iteration was left");
    app.post_ok("/api/v1/wishes/flaky/groups/only/start", json!({})).await;
    let failed = app.post_ok("/api/v1/wishes/flaky/groups/only/fail", json!({"result": "tests red"})).await;
    assert_eq!(failed["status"], "failed");
    assert!(failed["failure_reason"].as_str().unwrap_or("").contains("only"));
    let resumed = app.post_ok("/api/v1/wishes/flaky/resume", json!({})).await;
    assert_eq!(resumed["status"], "queued", "resume goes back to the last good state");
    app.post_ok("/api/v1/wishes/flaky/start", json!({})).await;
    let body = assert_problem(app.post("/api/v1/wishes/flaky/groups/only/retry", json!({})).await, 409).await;
    assert!(body["detail"].as_str().unwrap_or("").contains("higher max_iterations"), "{body}");
    let retried = app.post_ok("/api/v1/wishes/flaky/groups/only/retry", json!({"max_iterations": 3})).await;
    assert_eq!(retried["group"]["status"], "ready");
    assert_eq!(
        (retried["group"]["iterations"].as_i64(), retried["group"]["max_iterations"].as_i64()),
        (Some(2), Some(3))
    );
    assert_eq!(retried["now_ready"], json!([]));
    let again = app.post_ok("/api/v1/wishes/flaky/groups/only/start", json!({})).await;
    assert_eq!(
        (again["group"]["status"].as_str(), again["group"]["iterations"].as_i64()),
        (Some("in_progress"), Some(3))
    );
}

#[tokio::test]
async fn a_group_that_used_all_its_iterations_cannot_start_again() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let wish = app
        .create_wish(json!({"slug": "capped", "project": "alpha", "title": "t",
        "groups": [{"key": "only", "title": "Only", "max_iterations": 2}]}))
        .await;
    app.start_wish("capped").await;
    app.post_ok("/api/v1/wishes/capped/groups/only/start", json!({})).await;
    let requeued = app.post_ok("/api/v1/wishes/capped/groups/only/fail", json!({})).await;
    assert_eq!(requeued["group"]["status"], "ready");
    let task = group(&wish, "only")["task_id"].as_str().expect("task id").to_owned();
    let lowered = app
        .admin(Method::PATCH, &format!("/api/v1/tasks/{task}"))
        .json(&json!({"max_iterations": 1}))
        .send()
        .await
        .expect("patch");
    assert_eq!(lowered.status(), 200, "{}", lowered.text().await.unwrap_or_default());
    let body = assert_problem(app.post("/api/v1/wishes/capped/groups/only/start", json!({})).await, 409).await;
    assert!(body["detail"].as_str().unwrap_or("").contains("has used all 1 of its iterations"), "{body}");
    assert_eq!(body["current_state"], "ready");
}

#[tokio::test]
async fn a_failed_review_asks_for_a_fix_and_one_at_the_cap_fails_the_wish_to_a_person() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    for (slug, cap) in [("rev", 2), ("capped", 1)] {
        app.create_wish(json!({"slug": slug, "project": "alpha", "title": "t", "review_cap": cap,
            "groups": [{"key": "g", "title": "G"}]}))
            .await;
        app.start_wish(slug).await;
        let early =
            assert_problem(app.post(&format!("/api/v1/wishes/{slug}/review"), json!({"verdict": "pass"})).await, 409)
                .await;
        assert!(early["detail"].as_str().unwrap_or("").contains("under review"), "{early}");
        app.post_ok(&format!("/api/v1/wishes/{slug}/groups/g/start"), json!({})).await;
        let done = app.post_ok(&format!("/api/v1/wishes/{slug}/groups/g/complete"), json!({})).await;
        assert_eq!((done["status"].as_str(), done["phase"].as_str()), (Some("executing"), Some("agent_review")));
    }
    let first = app.post_ok("/api/v1/wishes/rev/review", json!({"verdict": "fail", "notes": "missing tests"})).await;
    assert_eq!((first["review_iteration"].as_i64(), first["status"].as_str()), (Some(1), Some("executing")));
    assert_eq!((first["phase"].as_str(), first["review_notes"].as_str()), (Some("fix"), Some("missing tests")));
    let again = assert_problem(app.post("/api/v1/wishes/rev/review", json!({"verdict": "pass"})).await, 409).await;
    assert!(again["detail"].as_str().unwrap_or("").contains("(fix)"), "a fix comes before the next review: {again}");

    let last = app.post_ok("/api/v1/wishes/capped/review", json!({"verdict": "fail"})).await;
    assert_eq!((last["review_iteration"].as_i64(), last["status"].as_str()), (Some(1), Some("failed")));
    assert_eq!(last["assignee"], "human");
    let body = assert_problem(app.post("/api/v1/wishes/rev/review", json!({"verdict": "maybe"})).await, 422).await;
    assert_eq!(body["errors"][0]["field"], "verdict");
}

#[tokio::test]
async fn fifty_concurrent_completions_of_one_group_have_exactly_one_winner() {
    let app = spawn_app().await;
    two_step_wish(&app, "race").await;
    app.start_wish("race").await;
    app.post_ok("/api/v1/wishes/race/groups/api/start", json!({})).await;
    let calls = (0..50).map(|_| app.post("/api/v1/wishes/race/groups/api/complete", json!({})));
    let statuses: Vec<u16> = futures::future::join_all(calls).await.into_iter().map(|r| r.status().as_u16()).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 409).count(), 49, "{statuses:?}");
    let ui: uuid::Uuid =
        sqlx::query_scalar("SELECT id FROM tasks WHERE group_key = 'ui'").fetch_one(&app.pool).await.expect("ui");
    let readied = app.count_events("task.ready", &format!("task:{ui}")).await;
    assert_eq!(readied, 1, "the dependent became ready exactly once");
}

#[tokio::test]
async fn twenty_groups_completed_at_once_complete_their_wish_exactly_once() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.skip_reviews("alpha").await;
    let groups: Vec<Value> = (0..20).map(|i| json!({"key": format!("g{i}"), "title": "part"})).collect();
    let wish = app.create_wish(json!({"slug": "wide", "project": "alpha", "title": "Wide", "groups": groups})).await;
    assert_eq!(wish["groups_open"], 20);
    app.start_wish("wide").await;
    for i in 0..20 {
        app.post_ok(&format!("/api/v1/wishes/wide/groups/g{i}/start"), json!({})).await;
    }
    let paths: Vec<String> = (0..20).map(|i| format!("/api/v1/wishes/wide/groups/g{i}/complete")).collect();
    let calls = paths.iter().map(|path| app.post(path, json!({})));
    let answers = futures::future::join_all(calls).await;
    assert!(answers.iter().all(|r| r.status() == 200), "every completion succeeds");
    let wish = app.get_ok("/api/v1/wishes/wide").await;
    assert_eq!((wish["status"].as_str(), wish["groups_open"].as_i64()), (Some("completed"), Some(0)));
    let completed = app.count_events("wish.completed", "wish:wide").await;
    assert_eq!(completed, 1, "the last of the concurrent completions, and only it, completed the wish");
}

#[tokio::test]
async fn a_wish_branch_is_a_branch_name_that_is_not_head_or_the_target() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    for branch in ["HEAD", "main", "-rf", "a b"] {
        let body = json!({"slug": "w", "project": "alpha", "title": "t", "branch": branch});
        let problem = assert_problem(app.post("/api/v1/wishes", body).await, 422).await;
        assert_eq!(problem["errors"][0]["field"], "branch", "{branch}: {problem}");
    }
    let body = json!({"slug": "w", "project": "alpha", "title": "t".repeat(301), "description": "d".repeat(100_001)});
    let problem = assert_problem(app.post("/api/v1/wishes", body).await, 422).await;
    assert_eq!(problem["errors"].as_array().map(Vec::len), Some(2), "{problem}");
    app.create_wish(json!({"slug": "ok", "project": "alpha", "title": "t", "branch": "feature/ok"})).await;
}
