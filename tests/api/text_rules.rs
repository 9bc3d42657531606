//! One rule for text that may reach a pane, as for messages: titles and descriptions of wishes,
//! groups and tasks hold no ESC, lone CR, C1 control or DEL (a description keeps its lines and
//! tabs; a title is one line). A wish's branch is a plain branch name, and a project's
//! `repo_path` holds no control character (a line break would split the clones' alternates).

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;

/// The field of the problem's first error, asserting a 422.
async fn refused_field(response: reqwest::Response) -> Value {
    let problem = assert_problem(response, 422).await;
    problem["errors"][0]["field"].clone()
}

#[tokio::test]
async fn titles_and_descriptions_of_wishes_groups_and_tasks_refuse_escape_cr_c1_and_del() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let wish = |fields: Value| {
        let body = json!({"slug": "w", "project": "alpha", "title": "Login", "description": "d",
                          "groups": [{"key": "api", "title": "API", "goal": "g"}]});
        app.post("/api/v1/wishes", merged(body, fields))
    };
    assert_eq!(refused_field(wish(json!({"title": "Login \u{1b}[2J"})).await).await, "title");
    assert_eq!(refused_field(wish(json!({"title": "Login\nrm -rf /"})).await).await, "title");
    assert_eq!(refused_field(wish(json!({"description": "one\rtwo"})).await).await, "description");
    assert_eq!(refused_field(wish(json!({"description": "del\u{7f}"})).await).await, "description");
    let group = |g: Value| json!({"groups": [merged(json!({"key": "api", "title": "API"}), g)]});
    assert_eq!(refused_field(wish(group(json!({"title": "csi \u{9b}31m"}))).await).await, "groups[0].title");
    assert_eq!(refused_field(wish(group(json!({"goal": "\u{1b}[201~echo pwned"}))).await).await, "groups[0].goal");

    let task = |fields: Value| app.post("/api/v1/tasks", merged(json!({"project": "alpha", "title": "t"}), fields));
    assert_eq!(refused_field(task(json!({"title": "t\u{1b}]0;x\u{7}"})).await).await, "title");
    assert_eq!(refused_field(task(json!({"goal": "a\u{85}b"})).await).await, "goal");
    let created = app.create_task(json!({"project": "alpha", "title": "t"})).await;
    let path = format!("/api/v1/tasks/{}", id(&created));
    let edited = app.send(Method::PATCH, &path, Some(json!({"goal": "x\u{1b}[A"}))).await;
    assert_eq!(refused_field(edited).await, "goal");
}

#[tokio::test]
async fn multi_line_descriptions_and_goals_keep_their_newlines_and_tabs() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    // As a browser's text area sends it: CRLF line ends.
    let description = "Steps:\r\n\t1. the form\r\n\t2. the API\nünïcödé 🦀";
    let wish = app
        .create_wish(json!({"slug": "w", "project": "alpha", "title": "Login\tpage", "description": description,
                            "groups": [{"key": "api", "title": "API", "goal": "line 1\n\tline 2"}]}))
        .await;
    assert_eq!(wish["description"], description);
    let task = app.create_task(json!({"project": "alpha", "title": "t", "goal": "a\n\tb\r\nc"})).await;
    assert_eq!(task["goal"], "a\n\tb\r\nc");
}

#[tokio::test]
async fn a_wish_branch_must_be_a_plain_branch_name_not_a_full_ref() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    for branch in ["refs/heads/main", "refs/heads/login", "feature/\u{7f}"] {
        let body = json!({"slug": "w", "project": "alpha", "title": "t", "branch": branch});
        assert_eq!(refused_field(app.post("/api/v1/wishes", body).await).await, "branch", "{branch:?}");
    }
    let wish = app.create_wish(json!({"slug": "w", "project": "alpha", "title": "t", "branch": "heads/login"})).await;
    assert_eq!(wish["branch"], "heads/login");
}

#[tokio::test]
async fn a_repo_path_with_a_line_break_is_refused() {
    let app = spawn_app().await;
    let base = tempfile::tempdir().expect("dir");
    // A real repository whose path holds a line break: in a clone's alternates file it would be
    // read as two paths, the second an object directory of the caller's choosing.
    let repo = base.path().join("x\n").join("repo");
    init_repo(&repo);
    let body = json!({"slug": "alpha", "name": "Alpha", "repo_path": repo});
    assert_eq!(refused_field(app.post("/api/v1/projects", body).await).await, "repo_path");
    app.create_project("beta").await;
    let changed = app.send(Method::PATCH, "/api/v1/projects/beta", Some(json!({"repo_path": repo}))).await;
    assert_eq!(refused_field(changed).await, "repo_path");
}
