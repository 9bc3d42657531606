//! What an operator meets on every page: styled errors for bad addresses and filters, the icon,
//! a breadcrumb naming the page, events in people's words, and a page per task with its actions.

use serde_json::json;

use crate::dashboard::{redirected, Dashboard};
use crate::helpers::{engineer, spawn_app};
use switchyard::domain::task::TaskStatus;

#[tokio::test]
async fn bad_addresses_and_filters_get_the_styled_error_page() {
    let app = spawn_app().await;
    let dashboard = Dashboard::login(&app).await;
    for (path, status, says) in [
        ("/boards/not-a-uuid", 404, "`not-a-uuid` is not a board id"),
        ("/tasks/not-a-uuid", 404, "`not-a-uuid` is not a task id"),
        ("/webhooks/not-a-uuid", 404, "`not-a-uuid` is not a webhook id"),
        ("/wishes?state=bogus", 422, "unknown field `state`"),
        ("/wishes?status=bogus", 422, "bogus"),
        ("/agents?state=bogus", 422, "bogus"),
        ("/events?block=nope", 404, "nope"),
        ("/agents?block=agents&sort=name", 422, "sort"),
    ] {
        let (got, html) = dashboard.get(path).await;
        assert_eq!(got, status, "{path}: {html}");
        assert!(html.contains("class=\"flash flash-error\"") && html.contains("rel=\"icon\""), "{path}: {html}");
        assert!(html.contains(says), "{path} says why:\n{html}");
    }
    let icon = dashboard.request(reqwest::Method::GET, "/favicon.ico").send().await.expect("icon");
    assert_eq!(icon.status(), 200);
    assert_eq!(icon.headers()["content-type"], "image/svg+xml");
    assert!(icon.text().await.expect("svg").starts_with("<svg"));
}

#[tokio::test]
async fn the_breadcrumb_names_the_page_under_its_section_and_an_agent_shows_its_history() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "fox")).await;
    let dashboard = Dashboard::login(&app).await;
    let crumbs = |html: &str| {
        let start = html.find("aria-label=\"Breadcrumb\"").unwrap_or_else(|| panic!("no breadcrumb:\n{html}"));
        html[start..].split("</nav>").next().unwrap_or("").to_owned()
    };
    let (_, agent) = dashboard.get("/agents/fox").await;
    let trail = crumbs(&agent);
    assert!(
        trail.contains("<a href=\"/\">Overview</a>") && trail.contains("<a href=\"/agents\">Agents</a>"),
        "{trail}"
    );
    assert!(trail.contains("<li aria-current=\"page\">Agent fox</li>"), "{trail}");
    let history = agent.split("id=\"history\"").nth(1).expect("the agent's own history");
    assert!(history.contains("agent.spawned") && history.contains(">fox</a>"), "{history}");
    let (_, list) = dashboard.get("/agents").await;
    let trail = crumbs(&list);
    assert!(trail.contains("<li aria-current=\"page\">Agents</li>") && !trail.contains("href=\"/agents\""), "{trail}");
}

#[tokio::test]
async fn a_task_page_offers_what_is_legal_now_and_keeps_its_history() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let task = app.create_task(json!({"project": "alpha", "title": "Write docs", "goal": "For the CLI"})).await;
    let id = task["id"].as_str().expect("id");
    let other = app.create_task(json!({"project": "alpha", "title": "Ship it"})).await;
    let other = other["id"].as_str().expect("id");
    let dashboard = Dashboard::login(&app).await;
    let page = format!("/tasks/{id}");

    let (status, html) = dashboard.get(&page).await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("For the CLI") && html.contains(">ready<"), "{html}");
    assert!(html.contains(&format!("formaction=\"{page}/actions/start\"")), "start is offered");
    assert!(!html.contains("/actions/complete"), "a ready task cannot be completed yet");

    assert_eq!(redirected(dashboard.post_form(&format!("{page}/actions/start"), &[("result", "")]).await).await, page);
    let done = dashboard.post_form(&format!("{page}/actions/complete"), &[("result", "Merged in #42")]).await;
    assert_eq!(redirected(done).await, page);
    let task = app.task(id).await;
    assert_eq!((task["status"].as_str(), task["result"].as_str()), (Some("done"), Some("Merged in #42")));
    let refused = dashboard.post_form(&format!("{page}/actions/start"), &[]).await;
    assert_eq!(refused.status(), 409, "the same refusal as the API's");

    let edited = dashboard
        .post_form(&format!("/tasks/{other}/edit"), &[("title", "Ship it now"), ("goal", ""), ("assignee", "human")])
        .await;
    assert_eq!(redirected(edited).await, format!("/tasks/{other}"));
    assert_eq!(app.task(other).await["assignee"], "human");

    let (_, html) = dashboard.get(&page).await;
    let history = html.split("id=\"history\"").nth(1).expect("a history");
    assert!(history.contains("task.completed") && history.contains("in progress → done"), "{history}");
    assert!(history.contains("result: Merged in #42") && !history.contains(&format!("task:{id}")), "{history}");

    // The event log names the task and links its page, instead of its id.
    let (_, events) = dashboard.get("/events").await;
    assert!(events.contains(&format!("<a href=\"/tasks/{id}\">Write docs</a>")), "{events}");
}

#[tokio::test]
async fn dependencies_are_chosen_on_the_task_page_and_a_cycle_is_refused() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let first = app.create_task(json!({"project": "alpha", "title": "Schema"})).await;
    let second = app.create_task(json!({"project": "alpha", "title": "API"})).await;
    let (first, second) = (first["id"].as_str().expect("id"), second["id"].as_str().expect("id"));
    let dashboard = Dashboard::login(&app).await;

    let (_, html) = dashboard.get(&format!("/tasks/{second}")).await;
    assert!(html.contains(&format!("name=\"depends_on\" value=\"{first}\"")), "the project's tasks are offered");
    let chosen = dashboard.post_form(&format!("/tasks/{second}/dependencies"), &[("depends_on", first)]).await;
    assert_eq!(redirected(chosen).await, format!("/tasks/{second}"));
    let (_, html) = dashboard.get(&format!("/tasks/{second}")).await;
    assert!(html.contains(">blocked<") && html.contains(&format!("<a href=\"/tasks/{first}\">Schema</a>")), "{html}");

    let cycle = dashboard.post_form(&format!("/tasks/{first}/dependencies"), &[("depends_on", second)]).await;
    assert_eq!(cycle.status(), 422);
    assert!(cycle.text().await.expect("page").contains("a cycle"));
    let none = dashboard.post_form(&format!("/tasks/{second}/dependencies"), &[]).await;
    assert_eq!(redirected(none).await, format!("/tasks/{second}"));
    assert_eq!(app.task_status(second).await, TaskStatus::Ready);
}

#[tokio::test]
async fn the_wish_page_links_each_groups_agent_and_moves_its_groups() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_wish(json!({"slug": "login", "project": "alpha", "title": "Login",
        "groups": [{"key": "api", "title": "API"}, {"key": "ui", "title": "UI", "depends_on": ["api"]}]}))
        .await;
    app.start_wish("login").await;
    let fox = crate::helpers::merged(engineer("alpha", "fox"), json!({"wish": "login", "group": "api"}));
    app.create_agent(fox).await;
    let dashboard = Dashboard::login(&app).await;

    let (_, html) = dashboard.get("/wishes/login").await;
    let api = html.split("id=\"group-api\"").nth(1).and_then(|r| r.split("</tr>").next()).expect("the api row");
    assert!(api.contains("<a href=\"/agents/fox\">fox</a>") && api.contains("href=\"/tasks/"), "{api}");
    assert!(api.contains("/groups/api/actions/start") && !api.contains("/actions/complete"), "{api}");
    let ui = html.split("id=\"group-ui\"").nth(1).and_then(|r| r.split("</tr>").next()).expect("the ui row");
    assert!(!ui.contains("/actions/"), "a blocked group offers nothing: {ui}");

    for action in ["start", "complete"] {
        let moved = dashboard.post_form(&format!("/wishes/login/groups/api/actions/{action}"), &[]).await;
        assert_eq!(redirected(moved).await, "/wishes/login#group-api");
    }
    let (_, html) = dashboard.get("/wishes/login").await;
    let ui = html.split("id=\"group-ui\"").nth(1).and_then(|r| r.split("</tr>").next()).expect("the ui row");
    assert!(ui.contains("data-state=\"ready\"") && ui.contains("/groups/ui/actions/start"), "{ui}");
    let refused = dashboard.post_form("/wishes/login/groups/api/actions/start", &[]).await;
    assert_eq!(refused.status(), 409);
    assert_eq!(dashboard.post_form("/wishes/login/groups/api/actions/dance", &[]).await.status(), 404);
}

#[tokio::test]
async fn a_webhook_is_disabled_enabled_given_a_new_secret_and_deleted_from_its_page() {
    let app = crate::helpers::TestApp::builder().webhooks(crate::webhooks::test_settings()).spawn().await;
    let hook = app.post_ok("/api/v1/webhooks", json!({"url": "http://127.0.0.1:9/hook", "events": ["task.*"]})).await;
    let (id, first_secret) = (hook["id"].as_str().expect("id"), hook["secret"].as_str().expect("secret"));
    let dashboard = Dashboard::login(&app).await;
    let page = format!("/webhooks/{id}");

    assert_eq!(redirected(dashboard.post_form(&format!("{page}/disable"), &[]).await).await, page);
    assert_eq!(app.get_ok(&format!("/api/v1/webhooks/{id}")).await["enabled"], false);
    let (_, html) = dashboard.get(&page).await;
    assert!(html.contains(&format!("action=\"{page}/enable\"")), "a disabled webhook offers Enable");
    assert_eq!(redirected(dashboard.post_form(&format!("{page}/enable"), &[]).await).await, page);
    assert_eq!(app.get_ok(&format!("/api/v1/webhooks/{id}")).await["enabled"], true);

    let rotated = dashboard.post_form(&format!("{page}/rotate-secret"), &[]).await;
    assert_eq!(rotated.status(), 200);
    assert_eq!(rotated.headers()["cache-control"], "no-store");
    let html = rotated.text().await.expect("page");
    let secret = html.split("<code class=\"secret\">").nth(1).and_then(|r| r.split('<').next()).expect("the secret");
    assert!(secret.starts_with("whsec_") && secret != first_secret, "{secret}");
    let (_, again) = dashboard.get(&page).await;
    assert!(!again.contains(secret), "the secret is shown once");

    assert_eq!(redirected(dashboard.post_form(&format!("{page}/delete"), &[]).await).await, "/webhooks");
    assert_eq!(app.get(&format!("/api/v1/webhooks/{id}")).await.status(), 404);
}

#[tokio::test]
async fn a_project_is_created_and_deleted_from_the_boards_page() {
    let app = spawn_app().await;
    let repo = crate::helpers::git_repo();
    let dashboard = Dashboard::login(&app).await;
    let (_, empty) = dashboard.get("/boards").await;
    assert!(empty.contains("action=\"/projects\""), "the form is there before any project");

    let repo_path = repo.path().to_str().expect("utf-8 path");
    let fields = [("slug", "gamma"), ("name", "Gamma"), ("repo_path", repo_path), ("target_branch", "")];
    assert_eq!(redirected(dashboard.post_form("/projects", &fields).await).await, "/boards");
    let project = app.get_ok("/api/v1/projects/gamma").await;
    assert_eq!((project["name"].as_str(), project["target_branch"].as_str()), (Some("Gamma"), Some("main")));
    let bad = dashboard
        .post_form(
            "/projects",
            &[("slug", "Bad Slug"), ("name", "x"), ("repo_path", "/nowhere"), ("target_branch", "")],
        )
        .await;
    assert_eq!(bad.status(), 422);
    assert!(bad.text().await.expect("page").contains("slug"), "the page names the bad field");

    app.create_task(json!({"project": "gamma", "title": "Keep me"})).await;
    let refused = dashboard.post_form("/projects/gamma/delete", &[]).await;
    assert_eq!(refused.status(), 409, "a project with tasks stays");
    let empty_one = crate::helpers::git_repo();
    let path = empty_one.path().to_str().expect("utf-8 path");
    let fields = [("slug", "delta"), ("name", "Delta"), ("repo_path", path), ("target_branch", "main")];
    redirected(dashboard.post_form("/projects", &fields).await).await;
    assert_eq!(redirected(dashboard.post_form("/projects/delta/delete", &[]).await).await, "/boards");
    assert_eq!(app.get("/api/v1/projects/delta").await.status(), 404);
}

#[tokio::test]
async fn an_agent_is_registered_and_deleted_from_the_agents_pages() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let dashboard = Dashboard::login(&app).await;
    let (_, list) = dashboard.get("/agents").await;
    assert!(list.contains("action=\"/agents\"") && list.contains("<option value=\"shell\">shell</option>"), "{list}");

    let fields = [
        ("name", "owl"),
        ("project", "alpha"),
        ("provider", "shell"),
        ("kind", "worker"),
        ("role", "qa"),
        ("task", "Check the docs"),
    ];
    assert_eq!(redirected(dashboard.post_form("/agents", &fields).await).await, "/agents/owl");
    let owl = app.agent("owl").await;
    assert_eq!((owl["role"].as_str(), owl["task"].as_str()), (Some("qa"), Some("Check the docs")));
    let bad =
        [("name", ""), ("project", "alpha"), ("provider", "shell"), ("kind", "boss"), ("role", "qa"), ("task", "")];
    let refused = dashboard.post_form("/agents", &bad).await;
    assert_eq!(refused.status(), 422);
    assert!(refused.text().await.expect("page").contains("boss"));

    let live = dashboard.post_form("/agents/owl/delete", &[]).await;
    assert_eq!(live.status(), 409, "a live agent is stopped first");
    redirected(dashboard.post_form("/agents/owl/kill", &[]).await).await;
    let (_, page) = dashboard.get("/agents/owl").await;
    assert!(page.contains("action=\"/agents/owl/delete\""), "a stopped agent can be deleted");
    assert_eq!(redirected(dashboard.post_form("/agents/owl/delete", &[]).await).await, "/agents");
    assert_eq!(app.get("/api/v1/agents/owl").await.status(), 404);
}

#[tokio::test]
async fn a_team_is_made_led_moved_on_and_disbanded_from_its_pages() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    for name in ["fox", "owl"] {
        app.create_agent(engineer("alpha", name)).await;
    }
    let dashboard = Dashboard::login(&app).await;
    let fields =
        [("name", "login"), ("project", "alpha"), ("base_branch", ""), ("members", "fox, owl"), ("leader", "")];
    assert_eq!(redirected(dashboard.post_form("/teams", &fields).await).await, "/teams/login");
    let page = "/teams/login";
    assert_eq!(redirected(dashboard.post_form(&format!("{page}/leader"), &[("leader", "owl")]).await).await, page);
    assert_eq!(
        redirected(dashboard.post_form(&format!("{page}/status"), &[("status", "in_progress")]).await).await,
        page
    );
    let team = app.get_ok("/api/v1/teams/login").await;
    assert_eq!((team["leader"].as_str(), team["status"].as_str()), (Some("owl"), Some("in_progress")));
    let backwards = dashboard.post_form(&format!("{page}/status"), &[("status", "created")]).await;
    assert_eq!(backwards.status(), 409, "the lifecycle decides, as in the API");

    assert_eq!(redirected(dashboard.post_form(&format!("{page}/members/fox/remove"), &[]).await).await, page);
    let (_, html) = dashboard.get(page).await;
    assert!(!html.contains("/members/fox/remove") && html.contains("/members/owl/remove"), "{html}");
    assert_eq!(redirected(dashboard.post_form(&format!("{page}/members"), &[("agent", "fox")]).await).await, page);
    assert_eq!(app.get_ok("/api/v1/teams/login").await["members"].as_array().map(Vec::len), Some(2));

    assert_eq!(redirected(dashboard.post_form(&format!("{page}/disband"), &[]).await).await, "/teams");
    assert_eq!(app.get("/api/v1/teams/login").await.status(), 404);
}

#[tokio::test]
async fn notifications_tell_what_needs_a_person_after_the_cursor_once() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "fox")).await;
    let dashboard = Dashboard::login(&app).await;
    let (status, first) = dashboard.get("/notifications").await;
    assert_eq!(status, 200);
    let first: serde_json::Value = serde_json::from_str(&first).expect("json");
    assert_eq!(first["items"], json!([]), "registering an agent needs nobody");
    let cursor = first["after"].as_i64().expect("a cursor");

    sqlx::query("UPDATE agents SET state = 'working' WHERE name = 'fox'").execute(&app.pool).await.expect("working");
    let asks = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash",
        "tool_input": {"command": "rm -rf build", "description": "Clean the build"}});
    app.post_ok("/api/v1/agents/fox/hooks", asks).await;
    let read = || async {
        let (_, body) = dashboard.get(&format!("/notifications?after={cursor}")).await;
        serde_json::from_str::<serde_json::Value>(&body).expect("json")
    };
    crate::helpers::eventually("the notice", std::time::Duration::from_secs(10), || async {
        read().await["items"].as_array().is_some_and(|items| !items.is_empty())
    })
    .await;
    let notices = read().await;
    let notice = &notices["items"][0];
    assert_eq!(notice["title"], "fox asks for permission", "{notices}");
    assert_eq!(
        (notice["body"].as_str(), notice["link"].as_str()),
        (Some("permission to use Bash: rm -rf build"), Some("/agents/fox")),
        "the notice says the command asked for, and opens the page that answers it"
    );
    let next = notices["after"].as_i64().expect("the next cursor");
    let (_, again) = dashboard.get(&format!("/notifications?after={next}")).await;
    assert_eq!(serde_json::from_str::<serde_json::Value>(&again).expect("json")["items"], json!([]), "told once");
    // Without a screen to read (no worker here), what it asks is what its hook said, on the
    // list and on the overview, which sends the person to the agent's page to answer.
    let needs = app.get_ok("/api/v1/needs").await;
    let fox = &needs["items"][0];
    assert_eq!(
        (fox["kind"].as_str(), fox["asked"].as_str()),
        (Some("permission"), Some("permission to use Bash: rm -rf build")),
        "{needs}"
    );
    assert_eq!(fox["options"], json!([]), "no screen to read options from: {needs}");
    let (_, page) = dashboard.get("/").await;
    assert!(page.contains("permission to use Bash: rm -rf build") && page.contains("answer on its page"), "{page}");
    assert!(page.contains("id=\"notify-toggle\""), "the opt-in is offered on every page");
}
