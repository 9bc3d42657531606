//! `/api/v1/projects`: creation over real git repositories, listing, partial updates with
//! `If-Match`, and deletion guarded by the project's tasks and wishes.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, git, git_repo, id, spawn_app};

#[tokio::test]
async fn a_project_is_created_with_defaults_and_read_back_with_its_etag() {
    let app = spawn_app().await;
    let repo = git_repo();
    let response = app
        .post(
            "/api/v1/projects",
            json!({"slug": "alpha", "name": "Alpha", "repo_path": repo.path(),
               "merge_queue_config": {"enabled": false, "track_mode": "assigned"}}),
        )
        .await;
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["etag"], "\"1\"");
    assert_eq!(response.headers()["location"], "/api/v1/projects/alpha");
    let created: Value = response.json().await.expect("json");
    assert_eq!(created["target_branch"], "main");
    assert_eq!(created["merge_queue_config"], json!({"enabled": false, "track_mode": "assigned"}));
    assert_eq!(created["pr_shepherd_config"], json!({"enabled": false, "track_mode": "author"}));
    assert_eq!(created["fork_config"]["is_fork"], false);
    assert_eq!(created["version"], 1);

    let fetched = app.get("/api/v1/projects/alpha").await;
    assert_eq!(fetched.status(), 200);
    assert_eq!(fetched.headers()["etag"], "\"1\"");
    let fetched: Value = fetched.json().await.expect("json");
    // The created project is the one read back, with what its creator was told besides.
    let mut told = created.clone();
    told.as_object_mut().expect("an object").remove("warnings").expect("its warnings");
    assert_eq!(fetched, told);

    assert_eq!(app.count_events("project.created", "project:alpha").await, 1);
}

#[tokio::test]
async fn a_repo_path_that_is_not_a_git_repository_is_a_422_naming_repo_path() {
    let app = spawn_app().await;
    let plain = tempfile::tempdir().expect("temp dir");
    let inside = git_repo();
    let folder = inside.path().join("src");
    std::fs::create_dir(&folder).expect("mkdir");
    for path in [plain.path().to_path_buf(), plain.path().join("missing"), folder, "relative/path".into()] {
        let response = app.post("/api/v1/projects", json!({"slug": "beta", "name": "Beta", "repo_path": path})).await;
        let body = assert_problem(response, 422).await;
        assert_eq!(body["errors"][0]["field"], "repo_path", "{path:?}: {body}");
    }
}

#[tokio::test]
async fn a_bad_slug_an_unknown_field_or_a_bad_track_mode_is_a_422_naming_it() {
    let app = spawn_app().await;
    let repo = git_repo();
    let cases = [
        (json!({"slug": "Bad_Slug", "name": "x", "repo_path": repo.path()}), "slug"),
        (json!({"slug": "-x", "name": "x", "repo_path": repo.path()}), "slug"),
        (json!({"slug": "ok", "name": "x", "repo_path": repo.path(), "colour": "red"}), "colour"),
        (json!({"slug": "ok", "name": "  ", "repo_path": repo.path()}), "name"),
        (
            json!({"slug": "ok", "name": "x", "repo_path": repo.path(), "pr_shepherd_config": {"enabled": true, "track_mode": "mine"}}),
            "pr_shepherd_config.track_mode",
        ),
        (
            json!({"slug": "ok", "name": "x", "repo_path": repo.path(), "fork_config": {"is_fork": true, "upstream": "y"}}),
            "fork_config.upstream",
        ),
    ];
    for (body, field) in cases {
        let response = app.post("/api/v1/projects", body.clone()).await;
        let problem = assert_problem(response, 422).await;
        assert_eq!(problem["errors"][0]["field"], field, "{body}: {problem}");
    }
}

#[tokio::test]
async fn a_duplicate_slug_is_a_409() {
    let app = spawn_app().await;
    app.create_project("twice").await;
    let other = git_repo();
    let response =
        app.post("/api/v1/projects", json!({"slug": "twice", "name": "Again", "repo_path": other.path()})).await;
    let body = assert_problem(response, 409).await;
    assert!(body["detail"].as_str().unwrap_or("").contains("twice"), "{body}");
}

#[tokio::test]
async fn projects_are_listed_oldest_first_across_pages() {
    let app = spawn_app().await;
    for i in 0..5 {
        app.create_project(&format!("p{i}")).await;
    }
    let mut slugs = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut request = app.admin(Method::GET, "/api/v1/projects").query(&[("limit", "2")]);
        if let Some(c) = &cursor {
            request = request.query(&[("cursor", c)]);
        }
        let page: Value = request.send().await.expect("request").json().await.expect("json");
        pages += 1;
        slugs.extend(
            page["items"].as_array().expect("items").iter().map(|p| p["slug"].as_str().unwrap_or("").to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(slugs, ["p0", "p1", "p2", "p3", "p4"]);
    assert_eq!(pages, 3);
    let bad = app.get("/api/v1/projects?limit=0").await;
    assert_eq!(assert_problem(bad, 422).await["errors"][0]["field"], "limit");
    let garbled = app.get("/api/v1/projects?limit=abc").await;
    assert_eq!(assert_problem(garbled, 422).await["errors"][0]["field"], "limit");
}

#[tokio::test]
async fn a_patch_changes_only_the_fields_sent_and_bumps_the_version() {
    let app = spawn_app().await;
    app.create_project("gamma").await;
    let response = app
        .admin(Method::PATCH, "/api/v1/projects/gamma")
        .header("if-match", "\"1\"")
        .json(&json!({"name": "Gamma 2", "github_url": "https://github.com/acme/gamma",
                      "pr_shepherd_config": {"enabled": true, "track_mode": "all"}}))
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["etag"], "\"2\"");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["name"], "Gamma 2");
    assert_eq!(body["target_branch"], "main");
    assert_eq!(body["pr_shepherd_config"]["enabled"], true);

    // A bare version works as well as a quoted ETag; null clears the URL.
    let cleared = app
        .admin(Method::PATCH, "/api/v1/projects/gamma")
        .header("if-match", "2")
        .json(&json!({"github_url": null}))
        .send()
        .await
        .expect("request");
    let cleared: Value = cleared.json().await.expect("json");
    assert_eq!(cleared["github_url"], Value::Null);
    assert_eq!(cleared["version"], 3);

    // Nothing changes, nothing is bumped.
    let same = app.admin(Method::PATCH, "/api/v1/projects/gamma").json(&json!({"name": "Gamma 2"})).send().await;
    assert_eq!(same.expect("request").headers()["etag"], "\"3\"");
}

#[tokio::test]
async fn a_stale_if_match_is_a_412_and_changes_nothing() {
    let app = spawn_app().await;
    app.create_project("delta").await;
    let response = app
        .admin(Method::PATCH, "/api/v1/projects/delta")
        .header("if-match", "\"7\"")
        .json(&json!({"name": "Nope"}))
        .send()
        .await
        .expect("request");
    assert_problem(response, 412).await;
    let project = app.get_ok("/api/v1/projects/delta").await;
    assert_eq!(project["name"], "Project delta");
    assert_eq!(project["version"], 1);
}

#[tokio::test]
async fn a_patch_cannot_change_the_slug_or_point_at_a_non_repository() {
    let app = spawn_app().await;
    app.create_project("eps").await;
    let plain = tempfile::tempdir().expect("temp dir");
    for (body, field) in [(json!({"slug": "other"}), "slug"), (json!({"repo_path": plain.path()}), "repo_path")] {
        let response = app.admin(Method::PATCH, "/api/v1/projects/eps").json(&body).send().await.expect("request");
        assert_eq!(assert_problem(response, 422).await["errors"][0]["field"], field);
    }
    let missing = app.admin(Method::PATCH, "/api/v1/projects/nope").json(&json!({"name": "x"})).send().await;
    assert_problem(missing.expect("request"), 404).await;
}

#[tokio::test]
async fn a_project_with_tasks_or_wishes_cannot_be_deleted_and_says_how_many() {
    let app = spawn_app().await;
    let id = id(&app.create_project("zeta").await);
    for title in ["one", "two"] {
        sqlx::query("INSERT INTO tasks (id, project_id, title, status) VALUES ($1, $2, $3, 'ready')")
            .bind(uuid::Uuid::new_v4())
            .bind(id)
            .bind(title)
            .execute(&app.pool)
            .await
            .expect("insert task");
    }
    sqlx::query("INSERT INTO wishes (id, slug, project_id, title) VALUES ($1, 'w', $2, 'Wish')")
        .bind(uuid::Uuid::new_v4())
        .bind(id)
        .execute(&app.pool)
        .await
        .expect("insert wish");
    let refused = app.admin(Method::DELETE, "/api/v1/projects/zeta").send().await.expect("request");
    let body = assert_problem(refused, 409).await;
    let detail = body["detail"].as_str().unwrap_or("");
    assert!(detail.contains("2 tasks") && detail.contains("1 wish"), "{detail}");

    sqlx::query("DELETE FROM wishes").execute(&app.pool).await.expect("delete wishes");
    sqlx::query("DELETE FROM tasks").execute(&app.pool).await.expect("delete tasks");
    let deleted = app.admin(Method::DELETE, "/api/v1/projects/zeta").send().await.expect("request");
    assert_eq!(deleted.status(), 204);
    let gone = app.get("/api/v1/projects/zeta").await;
    assert_problem(gone, 404).await;
}

#[tokio::test]
async fn a_read_token_can_list_projects_but_not_create_one() {
    let app = spawn_app().await;
    let token = app.token("read").await;
    let list = app.client.get(app.url("/api/v1/projects")).bearer_auth(&token).send().await.expect("request");
    assert_eq!(list.status(), 200);
    let repo = git_repo();
    let create = app
        .client
        .post(app.url("/api/v1/projects"))
        .bearer_auth(&token)
        .json(&json!({"slug": "ro", "name": "x", "repo_path": repo.path()}))
        .send()
        .await
        .expect("request");
    assert_problem(create, 403).await;
}

#[tokio::test]
async fn three_bad_fields_are_all_named_in_one_422() {
    let app = spawn_app().await;
    let body = json!({"slug": "Bad Slug", "name": "x".repeat(201), "repo_path": "relative/path"});
    let response = app.post("/api/v1/projects", body).await;
    let body = assert_problem(response, 422).await;
    let mut fields: Vec<&str> =
        body["errors"].as_array().expect("errors").iter().filter_map(|e| e["field"].as_str()).collect();
    fields.sort_unstable();
    assert_eq!(fields, ["name", "repo_path", "slug"], "{body}");
}

#[tokio::test]
async fn a_huge_repo_path_is_a_422_not_a_500() {
    let app = spawn_app().await;
    let path = format!("/{}", "a".repeat(200_000));
    let response = app.post("/api/v1/projects", json!({"slug": "huge", "name": "Huge", "repo_path": path})).await;
    let body = assert_problem(response, 422).await;
    assert_eq!(body["errors"][0]["field"], "repo_path", "{body}");
}

#[tokio::test]
async fn a_git_directory_or_a_path_in_the_data_directory_is_not_a_repo_path() {
    let app = spawn_app().await;
    let repo = git_repo();
    let inside = app._data_dir.path().join("repo");
    std::fs::create_dir_all(&inside).expect("mkdir");
    for path in [repo.path().join(".git"), inside] {
        let response = app.post("/api/v1/projects", json!({"slug": "bad", "name": "Bad", "repo_path": path})).await;
        let body = assert_problem(response, 422).await;
        assert_eq!(body["errors"][0]["field"], "repo_path", "{path:?}: {body}");
    }
}

#[tokio::test]
async fn a_target_branch_must_exist_in_the_repository_and_not_be_head() {
    let app = spawn_app().await;
    let repo = git_repo();
    for branch in ["no-such-branch", "HEAD"] {
        let response = app
            .post(
                "/api/v1/projects",
                json!({"slug": "tb", "name": "Tb", "repo_path": repo.path(), "target_branch": branch}),
            )
            .await;
        let body = assert_problem(response, 422).await;
        assert_eq!(body["errors"][0]["field"], "target_branch", "{branch}: {body}");
    }
    app.create_project("alpha").await;
    let response = app
        .admin(Method::PATCH, "/api/v1/projects/alpha")
        .json(&json!({"target_branch": "develop"}))
        .send()
        .await
        .expect("request");
    let body = assert_problem(response, 422).await;
    assert_eq!(body["errors"][0]["field"], "target_branch", "{body}");
}

#[tokio::test]
async fn a_project_whose_target_is_checked_out_is_accepted_with_a_warning_on_the_response_and_the_boards_page() {
    let app = spawn_app().await;
    // The helper's repository has `main` checked out in its own working tree.
    let checked_out = app.create_project("alpha").await;
    let warnings = checked_out["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{checked_out}");
    let warning = warnings[0].as_str().expect("a sentence");
    assert!(
        warning.contains("`main` is checked out in") && warning.contains("the merge queue will advance"),
        "{warning}"
    );

    // A bare repository has no working tree to move: nothing to say.
    let source = git_repo();
    let bare = tempfile::tempdir().expect("temp dir");
    let bare_repo = bare.path().join("repo.git");
    git(bare.path(), &["clone", "--quiet", "--bare", &source.path().to_string_lossy(), &bare_repo.to_string_lossy()]);
    let body = json!({"slug": "beta", "name": "Beta", "repo_path": bare_repo});
    let quiet = crate::helpers::assert_json(app.post("/api/v1/projects", body).await, 201).await;
    assert_eq!(quiet["warnings"], json!([]), "{quiet}");

    let dashboard = crate::dashboard::Dashboard::login(&app).await;
    let (_, boards) = dashboard.get("/boards").await;
    assert_eq!(boards.matches("the merge queue will advance that working tree").count(), 1, "alpha's only: {boards}");
}
