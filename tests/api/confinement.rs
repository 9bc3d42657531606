//! A sandboxed wish's (or task's) work goes only to providers at least as confined as its own: a
//! plan, a redispatch and a task dispatch that name an unsandboxed provider, one with more
//! network, or one that is not configured at all are refused, naming the group.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::*;
use switchyard::domain::task::TaskStatus;

/// `boxed`: bubblewrap without a network; `boxed-online`: bubblewrap with the machine's network.
/// (`shell`, built in, runs unsandboxed.)
const PROVIDERS: &str = r#"
[providers.boxed]
command = ["bash", "--norc", "--noprofile"]
screen_rules = "shell"
sandbox = "bwrap"
network = "none"

[providers.boxed-online]
command = ["bash", "--norc", "--noprofile"]
screen_rules = "shell"
sandbox = "bwrap"
"#;

/// An app whose project `alpha` runs its agents with `boxed` (no worker: agents are only
/// recorded, and report with their tokens as they would from their panes).
async fn sandboxed_project() -> TestApp {
    let app = TestApp::builder().providers(PROVIDERS).spawn().await;
    app.create_project("alpha").await;
    app.patch_ok("/api/v1/projects/alpha", json!({"conductor_config": {"provider": "boxed"}})).await;
    app
}

fn group(key: &str, provider: &str) -> Value {
    json!({"key": key, "title": format!("Group {key}"), "goal": "run the goal", "provider": provider})
}

/// The message of the problem's error for `field`, asserting there is one.
fn error_for(problem: &Value, field: &str) -> String {
    let errors = problem["errors"].as_array().unwrap_or_else(|| panic!("no errors in {problem}"));
    let found =
        errors.iter().find(|e| e["field"] == field).unwrap_or_else(|| panic!("no error for {field}: {problem}"));
    found["message"].as_str().expect("message").to_owned()
}

#[tokio::test]
async fn a_sandboxed_planners_plan_handing_groups_to_an_unsandboxed_or_unknown_provider_is_refused_and_it_is_told_why()
{
    let app = sandboxed_project().await;
    app.create_wish(json!({"slug": "login", "project": "alpha", "title": "Login", "description": "a login page"}))
        .await;
    let planner = app
        .create_agent(json!({"name": "planner-1", "project": "alpha", "kind": "worker", "role": "planner",
                             "provider": "boxed", "wish": "login"}))
        .await;
    let token = app.agent_token(&planner).await;
    let report = |groups: Value| {
        let body = json!({"kind": "plan", "groups": groups});
        let request = app.client.post(app.url("/api/v1/agents/planner-1/report")).bearer_auth(&token).json(&body);
        async move { request.send().await.expect("report") }
    };

    // As the planner's pane would send it (`switchyard wish plan`).
    let groups = json!([
        group("api", "boxed"),
        group("host", "shell"),
        group("online", "boxed-online"),
        group("x", "../../bin/sh")
    ]);
    let problem = assert_problem(report(groups).await, 422).await;
    assert!(error_for(&problem, "groups[1].provider").contains("group `host`: provider `shell` runs unsandboxed"));
    assert!(error_for(&problem, "groups[2].provider").contains("has the machine's network, and `boxed` has none"));
    assert!(error_for(&problem, "groups[3].provider").starts_with("group `x`: unknown provider `../../bin/sh`"));
    assert!(problem["errors"].as_array().expect("errors").iter().all(|e| e["field"] != "groups[0].provider"));

    let wish = app.get_ok("/api/v1/wishes/login").await;
    assert_eq!(wish["status"], "draft", "{wish}");
    assert_eq!(wish["groups"], json!([]), "the plan is not recorded: {wish}");
    let told = app.get_ok("/api/v1/messages?to=planner-1").await;
    let told: Vec<&str> = told["items"].as_array().expect("items").iter().filter_map(|m| m["body"].as_str()).collect();
    assert!(told.iter().any(|body| body.contains("groups[1].provider") && body.contains("unsandboxed")), "{told:?}");

    // The same planner's plan with its own provider (and the wish's default) is accepted.
    let accepted = report(json!([group("api", "boxed"), {"key": "ui", "title": "UI"}])).await;
    assert_eq!(accepted.status(), 200, "{:?}", accepted.text().await);
    assert_eq!(app.get_ok("/api/v1/wishes/login").await["groups"].as_array().expect("groups").len(), 2);
}

#[tokio::test]
async fn through_the_api_a_sandboxed_wishs_groups_may_name_only_providers_as_confined_as_its_own() {
    let app = sandboxed_project().await;
    let wish = |slug: &str, provider: &str| json!({"slug": slug, "project": "alpha", "title": "t", "groups": [group("api", "boxed"), group("ui", provider)]});
    for (provider, says) in [
        ("shell", "runs unsandboxed"),
        ("boxed-online", "has the machine's network"),
        ("../../bin/sh", "unknown provider"),
    ] {
        let problem = assert_problem(app.post("/api/v1/wishes", wish("w", provider)).await, 422).await;
        assert!(error_for(&problem, "groups[1].provider").contains(says), "{provider}: {problem}");
    }
    // `any` stands for the project's provider and its fallbacks: each must be confined enough.
    app.patch_ok(
        "/api/v1/projects/alpha",
        json!({"conductor_config": {"provider": "boxed", "fallback_providers": ["shell"]}}),
    )
    .await;
    let problem = assert_problem(app.post("/api/v1/wishes", wish("w", "any")).await, 422).await;
    assert!(error_for(&problem, "groups[1].provider").contains("`shell` runs unsandboxed"), "{problem}");
    app.patch_ok(
        "/api/v1/projects/alpha",
        json!({"conductor_config": {"provider": "boxed", "fallback_providers": []}}),
    )
    .await;
    app.create_wish(wish("w", "any")).await;

    // A draft's plan, given through the API.
    app.create_wish(json!({"slug": "draft", "project": "alpha", "title": "t"})).await;
    let plan = json!({"groups": [group("api", "shell")]});
    let problem = assert_problem(app.post("/api/v1/wishes/draft/plan", plan).await, 422).await;
    assert!(error_for(&problem, "groups[0].provider").contains("runs unsandboxed"), "{problem}");
    assert_eq!(app.get_ok("/api/v1/wishes/draft").await["status"], "draft");

    // An unsandboxed project's wishes may name any provider it has.
    app.create_project("beta").await;
    app.patch_ok("/api/v1/projects/beta", json!({"conductor_config": {"provider": "shell"}})).await;
    app.create_wish(json!({"slug": "free", "project": "beta", "title": "t", "groups": [group("api", "boxed-online")]}))
        .await;
}

#[tokio::test]
async fn a_group_is_not_given_or_dispatched_again_to_a_provider_less_confined_than_its_wishs() {
    let app = sandboxed_project().await;
    // Planned while the project ran its agents unsandboxed; sandboxed since.
    app.patch_ok("/api/v1/projects/alpha", json!({"conductor_config": {"provider": "shell"}})).await;
    let created = app
        .create_wish(json!({"slug": "w", "project": "alpha", "title": "t", "groups": [group("api", "shell")]}))
        .await;
    app.start_wish("w").await;
    app.post_ok("/api/v1/wishes/w/groups/api/start", json!({})).await;
    app.patch_ok("/api/v1/projects/alpha", json!({"conductor_config": {"provider": "boxed"}})).await;
    let task = created["groups"][0]["task_id"].as_str().expect("the group's task").to_owned();

    let problem = assert_problem(app.post("/api/v1/wishes/w/groups/api/redispatch", json!({})).await, 422).await;
    assert!(error_for(&problem, "provider").starts_with("group `api`: provider `shell` runs unsandboxed"), "{problem}");
    assert_eq!(app.task_status(&task).await, TaskStatus::InProgress, "still with its agent, not queued again");

    // Nor can the group be given such a provider by an edit.
    let path = format!("/api/v1/tasks/{task}");
    let edited = app.send(Method::PATCH, &path, Some(json!({"provider": "boxed-online"}))).await;
    let problem = assert_problem(edited, 422).await;
    assert!(error_for(&problem, "provider").contains("has the machine's network"), "{problem}");
    app.patch_ok(&path, json!({"provider": "boxed"})).await;
    app.post_ok("/api/v1/wishes/w/groups/api/redispatch", json!({})).await;
    assert_eq!(app.task_status(&task).await, TaskStatus::Ready);
}

#[tokio::test]
async fn a_task_of_a_sandboxed_project_is_dispatched_only_to_a_provider_as_confined_as_its_own() {
    let app = sandboxed_project().await;
    let task = app.create_task(json!({"project": "alpha", "title": "Fix the login", "goal": "fix it"})).await;
    let path = format!("/api/v1/tasks/{}/dispatch", id(&task));
    let dispatch = |provider: &str| app.post(&path, json!({"provider": provider}));
    for (provider, says) in [
        ("shell", "runs unsandboxed"),
        ("boxed-online", "has the machine's network"),
        ("../../bin/sh", "unknown provider"),
    ] {
        let problem = assert_problem(dispatch(provider).await, 422).await;
        assert!(error_for(&problem, "provider").contains(says), "{provider}: {problem}");
    }
    assert_eq!(app.task_status(id(&task)).await, TaskStatus::Ready, "nothing was dispatched");
    let dispatched = dispatch("boxed").await;
    assert!(dispatched.status().is_success(), "{:?}", dispatched.text().await);

    // A task whose own provider is unsandboxed may go anywhere.
    let free = app.create_task(json!({"project": "alpha", "title": "Free", "provider": "shell"})).await;
    let sent = app.post(&format!("/api/v1/tasks/{}/dispatch", id(&free)), json!({"provider": "boxed-online"})).await;
    assert!(sent.status().is_success(), "{:?}", sent.text().await);
}

#[tokio::test]
async fn a_project_chooses_its_agents_permission_policy_and_auto_only_for_a_provider_under_the_sandbox() {
    let app = sandboxed_project().await;
    let set = |permissions: Value| {
        let body = json!({"conductor_config": {"provider": "boxed", "permissions": permissions}});
        app.send(Method::PATCH, "/api/v1/projects/alpha", Some(body))
    };

    let problem = assert_problem(set(json!({"shell": "auto", "nobody": "ask"})).await, 422).await;
    assert!(
        error_for(&problem, "conductor_config.permissions.shell")
            .contains("needs the provider to run under the sandbox"),
        "{problem}"
    );
    assert_eq!(error_for(&problem, "conductor_config.permissions.nobody"), "unknown provider");
    let problem = assert_problem(set(json!({"boxed": "sometimes"})).await, 422).await;
    assert!(problem.to_string().contains("permissions"), "{problem}");
    assert_eq!(
        app.get_ok("/api/v1/projects/alpha").await["conductor_config"]["permissions"],
        json!({}),
        "nothing changed"
    );

    assert_eq!(set(json!({"boxed": "auto", "shell": "allow-list"})).await.status(), 200);
    let project = app.get_ok("/api/v1/projects/alpha").await;
    assert_eq!(
        project["conductor_config"]["permissions"],
        json!({"boxed": "auto", "shell": "allow-list"}),
        "{project}"
    );
}
