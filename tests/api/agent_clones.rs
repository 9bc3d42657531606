//! Deleting an agent with its clone: a real project repository and a real `git clone --shared`,
//! made as the worker makes them; the clone goes only when nothing in it is unmerged.

use std::path::PathBuf;

use reqwest::Method;
use serde_json::{json, Value};
use switchyard::db::agents::{self, Cause};
use switchyard::domain::agent::{Activity, AgentEvent};
use switchyard::git::clones;

use crate::helpers::{assert_problem, engineer, git, id, repo_of, spawn_app, TestApp};

/// An engineer whose clone the worker made; returns the agent, the project's repository and
/// the clone.
async fn engineer_with_clone(app: &TestApp, name: &str) -> (Value, PathBuf, PathBuf) {
    let repo = repo_of(&app.create_project("alpha").await);
    let agent = app.create_agent(engineer("alpha", name)).await;
    let clone = clones::clone_dir(app._data_dir.path(), name);
    clones::make(&repo, &clone, &format!("switchyard/{name}"), "main").await.unwrap();
    let mut conn = app.pool.acquire().await.unwrap();
    agents::record_pane(&mut conn, id(&agent), "s", "@1", "%1", None, clone.to_str()).await.unwrap();
    (agent, repo, clone)
}

async fn delete(app: &TestApp, name: &str, query: &str) -> reqwest::Response {
    app.admin(Method::DELETE, &format!("/api/v1/agents/{name}{query}")).send().await.unwrap()
}

#[tokio::test]
async fn deleting_refuses_a_live_agent_and_a_clone_with_unmerged_work_and_says_what_it_is() {
    let app = spawn_app().await;
    let (fox, repo, clone) = engineer_with_clone(&app, "fox").await;
    let mut conn = app.pool.acquire().await.unwrap();
    let working = AgentEvent::Observed(Activity::Working);
    agents::apply(&mut conn, id(&fox), None, working, &Cause::from("hook")).await.unwrap();
    let problem = assert_problem(delete(&app, "fox", "").await, 409).await;
    assert_eq!(problem["current_state"], "working");

    agents::apply(&mut conn, id(&fox), None, AgentEvent::Finish, &Cause::from("hook")).await.unwrap();
    std::fs::write(clone.join("feature.rs"), "fn f() {}\n").unwrap();
    git(&clone, &["add", "-A"]);
    git(&clone, &["commit", "--quiet", "-m", "feature"]);
    std::fs::write(clone.join("wip.rs"), "todo\n").unwrap();
    let problem = assert_problem(delete(&app, "fox", "").await, 409).await;
    let detail = problem["detail"].as_str().unwrap();
    assert!(detail.contains("branch `switchyard/fox` has 1 commit not in `main` (1 not pushed)"), "{detail}");
    assert!(detail.contains("1 uncommitted file: wip.rs"), "{detail}");
    assert!(clone.is_dir());
    app.agent("fox").await;

    // Merged into the project and nothing left uncommitted: the clone goes with the agent.
    std::fs::remove_file(clone.join("wip.rs")).unwrap();
    git(&clone, &["push", "--quiet", "origin", "switchyard/fox"]);
    git(&repo, &["merge", "--quiet", "--ff-only", "switchyard/fox"]);
    let response = delete(&app, "fox", "").await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["clone_removed"], true);
    assert!(!clone.exists());
    assert_problem(app.get("/api/v1/agents/fox").await, 404).await;
    assert_eq!(app.count_events("agent.deleted", "agent:fox").await, 1);
}

#[tokio::test]
async fn force_deletes_a_clone_with_unmerged_work_and_reports_what_was_discarded() {
    let app = spawn_app().await;
    let (_, repo, clone) = engineer_with_clone(&app, "owl").await;
    std::fs::write(clone.join("wip.rs"), "todo\n").unwrap();
    let patched = app.admin(Method::PATCH, "/api/v1/agents/owl").json(&json!({"ready_for_cleanup": true})).send();
    assert_eq!(patched.await.unwrap().status(), 200);
    let problem = assert_problem(delete(&app, "owl", "").await, 409).await;
    assert!(problem["detail"].as_str().unwrap().contains("wip.rs"), "{problem}");
    let response = delete(&app, "owl", "?force=true").await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["discarded"]["dirty_files"], json!(["wip.rs"]));
    assert!(!clone.exists());
    // The project's repository is untouched.
    assert!(repo.join("README.md").is_file());
}

#[tokio::test]
async fn deleting_an_agent_without_a_clone_never_touches_the_projects_repository() {
    let app = spawn_app().await;
    let repo = repo_of(&app.create_project("alpha").await);
    let cat = app
        .create_agent(json!({"name": "cat", "project": "alpha", "kind": "workspace", "role": "engineer",
            "provider": "shell", "clone": "none"}))
        .await;
    let mut conn = app.pool.acquire().await.unwrap();
    agents::record_pane(&mut conn, id(&cat), "s", "@1", "%1", None, repo.to_str()).await.unwrap();
    std::fs::write(repo.join("dirty.txt"), "x").unwrap();
    let response = delete(&app, "cat", "?force=true").await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["clone_removed"], false);
    assert!(repo.join("dirty.txt").is_file());
}
