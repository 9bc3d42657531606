//! The conductor's pages: the overview's hand-offs and their actions, plans waiting for approval
//! and providers at a usage limit; the wish page's phase, branches and agents, its diff and a
//! person's review with comments on lines; a project's conductor settings form. The states are
//! reached the way the conductor reaches them (an agent's own `group blocked` report, a review at
//! its cap), without a worker, so each test drives exactly one step.

use fantoccini::Locator;
use serde_json::{json, Value};

use super::browser::{browser, click_button, fill, login_link, screenshot, until_text};
use super::{redirected, Dashboard};
use crate::helpers::*;

/// A project `alpha` whose wish `login` (groups `api`, then `ui`) runs, with an engineer `fox` on
/// `api` that reported it cannot do it: the group is handed to a person with fox's reason.
async fn handed_off(app: &TestApp, reason: &str) -> Value {
    app.create_project("alpha").await;
    let groups = json!([{"key": "api", "title": "The API"}, {"key": "ui", "title": "The page", "depends_on": ["api"]}]);
    app.create_wish(json!({"slug": "login", "project": "alpha", "title": "A login page", "groups": groups})).await;
    app.start_wish("login").await;
    app.post_ok("/api/v1/wishes/login/groups/api/start", json!({})).await;
    let fox = app.create_agent(merged(engineer("alpha", "fox"), json!({"wish": "login", "group": "api"}))).await;
    let task = fox["task_id"].as_str().expect("the group's task").to_owned();
    app.patch_ok(&format!("/api/v1/tasks/{task}"), json!({"assignee": "fox"})).await;
    let token = app.agent_token(&fox).await;
    let report = reqwest::Client::new()
        .post(app.url("/api/v1/agents/fox/report"))
        .bearer_auth(token)
        .json(&json!({"kind": "group_blocked", "reason": reason}))
        .send()
        .await
        .expect("report");
    assert_json(report, 200).await;
    assert_eq!(app.task(&task).await["assignee"], "human");
    app.get_ok("/api/v1/wishes/login").await
}

fn group<'a>(wish: &'a Value, key: &str) -> &'a Value {
    wish["groups"].as_array().expect("groups").iter().find(|g| g["key"] == key).expect("group")
}

#[tokio::test]
async fn a_group_handed_to_a_person_is_on_the_overview_with_the_reason_and_a_retry_gives_it_a_new_agent() {
    let app = spawn_app().await;
    handed_off(&app, "the <b>API key</b> is missing").await;
    let dashboard = Dashboard::login(&app).await;

    let (status, html) = dashboard.get("/").await;
    assert_eq!(status, 200);
    assert!(html.contains(r#"id="handoff-login-api""#), "{html}");
    assert!(html.contains("agent `fox` is blocked: the &#60;b&#62;API key&#60;/b&#62; is missing"), "escaped: {html}");
    assert!(html.contains(r#"<a href="/agents/fox">fox</a>"#));
    for action in [
        r#"action="/wishes/login/groups/api/redispatch""#,
        r#"action="/wishes/login/groups/api/done""#,
        r#"action="/wishes/login/actions/cancel""#,
        r#"action="/wishes/login/answer""#,
    ] {
        assert!(html.contains(action), "{action} offered");
    }
    assert!(!html.contains("handed to a human"), "the group is not listed twice (as a plain task too)");

    let to = redirected(dashboard.post_form("/wishes/login/groups/api/redispatch", &[]).await).await;
    assert_eq!(to, "/wishes/login");
    let wish = app.get_ok("/api/v1/wishes/login").await;
    assert_eq!(group(&wish, "api")["status"], "ready", "back in the queue for a new agent: {wish}");
    assert!(group(&wish, "api")["assignee"].is_null());
    let (_, html) = dashboard.get("/?block=needs").await;
    assert!(!html.contains("handoff-login-api"), "no longer waiting for a person: {html}");
}

#[tokio::test]
async fn a_person_marks_a_handed_off_group_done_and_its_dependent_becomes_ready() {
    let app = spawn_app().await;
    handed_off(&app, "done by hand").await;
    let dashboard = Dashboard::login(&app).await;

    redirected(dashboard.post_form("/wishes/login/groups/api/done", &[]).await).await;

    let wish = app.get_ok("/api/v1/wishes/login").await;
    assert_eq!(group(&wish, "api")["status"], "done");
    assert_eq!(group(&wish, "ui")["status"], "ready");
    // Twice is refused in the API's words, as a page.
    let again = dashboard.post_form("/wishes/login/groups/api/done", &[]).await;
    assert_eq!(again.status(), 409);
}

#[tokio::test]
async fn answering_a_handed_off_agent_sends_it_a_message_from_the_operator() {
    let app = spawn_app().await;
    handed_off(&app, "which database?").await;
    let dashboard = Dashboard::login(&app).await;

    let to = redirected(
        dashboard.post_form("/wishes/login/answer", &[("to", "fox"), ("body", "Use PostgreSQL <15>")]).await,
    )
    .await;
    assert_eq!(to, "/wishes/login");

    let mail = app.get_ok("/api/v1/agents/fox/messages").await;
    let bodies: Vec<&Value> = mail["items"].as_array().expect("items").iter().collect();
    assert!(
        bodies.iter().any(|m| m["from"] == "operator" && m["body"] == "Use PostgreSQL <15>"),
        "the answer waits for fox: {mail}"
    );
    let empty = dashboard.post_form("/wishes/login/answer", &[("to", "fox"), ("body", "")]).await;
    assert_eq!(empty.status(), 422, "an empty answer is refused");
}

#[tokio::test]
async fn a_planned_wish_waits_on_the_overview_and_its_queue_button_queues_it() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_wish(json!({"slug": "later", "project": "alpha", "title": "Plan <approval>",
                           "groups": [{"key": "a", "title": "A"}]}))
        .await;
    app.post_ok("/api/v1/wishes/later/plan", json!({})).await;
    let dashboard = Dashboard::login(&app).await;

    let (_, html) = dashboard.get("/").await;
    assert!(html.contains("Plans waiting for approval"), "{html}");
    assert!(html.contains("Plan &#60;approval&#62;"));
    assert!(html.contains(r#"action="/wishes/later/actions/queue""#));

    redirected(dashboard.post_form("/wishes/later/actions/queue", &[]).await).await;
    assert_eq!(app.get_ok("/api/v1/wishes/later").await["status"], "queued");
    let (_, html) = dashboard.get("/?block=needs").await;
    assert!(!html.contains("Plans waiting for approval"));
}

#[tokio::test]
async fn the_overview_says_which_provider_is_at_a_usage_limit_and_until_when() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "limited")).await;
    // What the status detector records when a pane shows a usage limit with its reset time.
    sqlx::query(
        "UPDATE agents SET state = 'suspended', suspended_until = '2999-01-02T03:04:05Z' WHERE name = 'limited'",
    )
    .execute(&app.pool)
    .await
    .expect("suspend");
    let dashboard = Dashboard::login(&app).await;

    let (_, html) = dashboard.get("/").await;
    let claude = html.split(r#"data-provider="claude""#).nth(1).expect("claude listed");
    assert!(claude.contains("at a usage limit until") && claude.contains("2999-01-02 03:04:05 UTC"), "{html}");
    let shell = html.split(r#"data-provider="shell""#).nth(1).expect("shell listed");
    assert!(shell.trim_start().starts_with(">shell <span class=\"badge st-idle\">available"), "{shell}");
}

/// A project `slug` whose wishes a person reviews, and its wish `review` (cap `cap`) with one
/// group done on `wish/review`, where `src/app.rs` was added: the wish waits for the review.
async fn under_human_review(app: &TestApp, slug: &str, cap: u32) -> std::path::PathBuf {
    let project = app.create_project(slug).await;
    app.patch_ok(&format!("/api/v1/projects/{slug}"), json!({"conductor_config": {"review": "human"}})).await;
    let repo = repo_of(&project);
    git(&repo, &["switch", "--quiet", "-c", "wish/review"]);
    std::fs::create_dir_all(repo.join("src")).expect("mkdir");
    std::fs::write(repo.join("src/app.rs"), "fn main() {\n    println!(\"<hi>\");\n}\n").expect("write");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "--quiet", "-m", "the app"]);
    git(&repo, &["switch", "--quiet", "main"]);
    app.create_wish(json!({"slug": "review", "project": slug, "title": "Say hi", "branch": "wish/review",
                           "review_cap": cap, "groups": [{"key": "app", "title": "The app"}]}))
        .await;
    app.start_wish("review").await;
    app.post_ok("/api/v1/wishes/review/groups/app/start", json!({})).await;
    app.post_ok("/api/v1/wishes/review/groups/app/complete", json!({"result": "done"})).await;
    assert_eq!(app.get_ok("/api/v1/wishes/review").await["phase"], "human_review");
    repo
}

#[tokio::test]
async fn the_wish_page_shows_its_phase_branch_checkout_commands_and_each_groups_agent() {
    let app = spawn_app().await;
    let wish = handed_off(&app, "stuck").await;
    assert!(wish["branch"].is_null(), "no branch until the conductor starts it");
    let dashboard = Dashboard::login(&app).await;

    let (status, html) = dashboard.get("/wishes/login").await;
    assert_eq!(status, 200);
    assert!(html.contains(r#"data-phase="groups""#), "{html}");
    assert!(html.contains(r#"<li id="run-api"><code>api</code>"#));
    assert!(html.contains(r#"agent <a href="/agents/fox">fox</a>"#), "the group's agent, linked");
    assert!(html.contains(r#"href="/projects/alpha/conductor""#));
    let (_, part) = dashboard.get("/wishes/login?block=conductor").await;
    assert!(part.trim_start().starts_with("<section id=\"conductor\""), "a live part of its own: {part}");

    let repo = under_human_review(&app, "beta", 3).await;
    let (_, html) = dashboard.get("/wishes/review").await;
    assert!(html.contains(r#"data-phase="human_review""#));
    let repo = repo.display().to_string();
    assert!(html.contains(&format!("git clone --branch wish/review {repo} review")), "{html}");
    assert!(html.contains(&format!("git fetch {repo} wish/review &#38;&#38; git switch --detach FETCH_HEAD")));
}

#[tokio::test]
async fn the_diff_lists_each_file_with_its_counts_and_lines_a_person_can_comment_on() {
    let app = spawn_app().await;
    under_human_review(&app, "beta", 3).await;
    let dashboard = Dashboard::login(&app).await;

    let (status, html) = dashboard.get("/wishes/review/changes").await;
    assert_eq!(status, 200);
    assert!(html.contains("1 file changed"), "{html}");
    assert!(html.contains("<code>src/app.rs</code> <span class=\"d-plus\">+3</span>"));
    assert!(html.contains("+    println!(&#34;&#60;hi&#62;&#34;);"), "the code is text: {html}");
    assert!(html.contains(r#"data-at="src/app.rs:2""#), "each line names its place");
    assert!(html.contains(r#"<form id="review""#), "the review is offered");
    let (_, part) = dashboard.get("/wishes/review/changes?block=changes").await;
    assert!(
        part.trim_start().starts_with("<div id=\"changes-body\">") && !part.contains("<html"),
        "the part alone: {part}"
    );
    // Nothing to review on a wish without a branch; no form where no review is due.
    handed_off(&app, "stuck").await;
    let (_, html) = dashboard.get("/wishes/login/changes").await;
    assert!(html.contains("no branch yet") && !html.contains(r#"<form id="review""#), "{html}");
}

#[tokio::test]
async fn a_failed_human_review_sends_its_line_comments_as_one_verdict_with_file_and_line() {
    let app = spawn_app().await;
    under_human_review(&app, "alpha", 3).await;
    let dashboard = Dashboard::login(&app).await;

    let nothing = dashboard.post_form("/wishes/review/review", &[("verdict", "fail"), ("notes", " ")]).await;
    assert_eq!(nothing.status(), 422, "a fail must say what to change");
    assert!(nothing.text().await.expect("body").contains("notes"));
    assert_eq!(app.get_ok("/api/v1/wishes/review").await["phase"], "human_review");

    let fields = [
        ("verdict", "fail"),
        ("notes", "Nearly."),
        ("comment_at", "src/app.rs:2"),
        ("comment", "Say <hello> instead"),
        ("comment_at", "src/app.rs:3"),
        ("comment", "   "),
    ];
    let to = redirected(dashboard.post_form("/wishes/review/review", &fields).await).await;
    assert_eq!(to, "/wishes/review");

    let wish = app.get_ok("/api/v1/wishes/review").await;
    assert_eq!(wish["phase"], "fix", "the notes go to a fix agent: {wish}");
    assert_eq!(wish["review_iteration"], 1);
    assert_eq!(wish["review_notes"], "Nearly.\n\nComments on lines:\n- src/app.rs:2: Say <hello> instead");
    let (_, html) = dashboard.get("/wishes/review").await;
    assert!(html.contains("src/app.rs:2: Say &#60;hello&#62; instead"), "shown escaped: {html}");
}

#[tokio::test]
async fn a_review_failed_at_its_cap_hands_the_wish_to_a_person_who_can_hand_it_back() {
    let app = spawn_app().await;
    under_human_review(&app, "alpha", 1).await;
    let dashboard = Dashboard::login(&app).await;
    let fields = [("verdict", "fail"), ("comment_at", "src/app.rs:1"), ("comment", "No.")];
    redirected(dashboard.post_form("/wishes/review/review", &fields).await).await;
    let wish = app.get_ok("/api/v1/wishes/review").await;
    assert_eq!((wish["status"].as_str(), wish["assignee"].as_str()), (Some("failed"), Some("human")), "{wish}");

    let (_, html) = dashboard.get("/").await;
    assert!(html.contains(r#"id="handoff-review""#), "{html}");
    assert!(html.contains("review failed 1 times (cap 1)"));
    assert!(html.contains(r#"action="/wishes/review/hand-back""#));

    redirected(dashboard.post_form("/wishes/review/hand-back", &[]).await).await;
    assert!(app.get_ok("/api/v1/wishes/review").await["assignee"].is_null());
    let again = dashboard.post_form("/wishes/review/hand-back", &[]).await;
    assert_eq!(again.status(), 409, "no longer waiting for a person");
}

#[tokio::test]
async fn a_passed_human_review_completes_the_wish() {
    let app = spawn_app().await;
    under_human_review(&app, "alpha", 3).await;
    let dashboard = Dashboard::login(&app).await;
    let (_, html) = dashboard.get("/").await;
    assert!(html.contains(r##"href="/wishes/review#changes">Review Say hi</a>"##), "waiting for review: {html}");

    redirected(dashboard.post_form("/wishes/review/review", &[("verdict", "pass")]).await).await;
    assert_eq!(app.get_ok("/api/v1/wishes/review").await["status"], "completed");
    let bad = dashboard.post_form("/wishes/review/review", &[("verdict", "maybe")]).await;
    assert_eq!(bad.status(), 422);
}

#[tokio::test]
async fn the_conductor_settings_form_changes_the_projects_config_and_names_a_bad_field() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let dashboard = Dashboard::login(&app).await;

    let (status, html) = dashboard.get("/projects/alpha/conductor").await;
    assert_eq!(status, 200);
    assert!(html.contains(r#"<option value="agent" selected>a reviewer agent</option>"#), "{html}");
    let version = html.split(r#"name="version" value=""#).nth(1).and_then(|s| s.split('"').next()).expect("version");
    let bad = post_settings(&dashboard, "0", version).await;
    assert_eq!(bad.status(), 422);
    let html = bad.text().await.expect("body");
    assert!(html.contains("must be 1 to 1000"), "the field says why: {html}");
    assert!(html.contains(r#"value="claude, codex""#), "what was typed is kept");

    let to = redirected(post_settings(&dashboard, "2", version).await).await;
    assert_eq!(to, "/projects/alpha/conductor?saved=1");
    let config = &app.get_ok("/api/v1/projects/alpha").await["conductor_config"];
    assert_eq!(
        *config,
        json!({"planning": "human", "plan_approval": "human", "review": "both", "provider": "shell",
               "fallback_providers": ["claude", "codex"], "max_agents": 2, "keep_clones": true, "max_iterations": 3,
               "permissions": {"claude": "auto", "shell": "allow-list"}})
    );
    assert!(dashboard.get(&to).await.1.contains(r#"value="claude=auto, shell=allow-list""#), "the policies as typed");
    let (_, html) = dashboard.get(&to).await;
    assert!(html.contains("Saved.") && html.contains(r#"<option value="both" selected>"#));

    let stale = post_settings(&dashboard, "3", version).await;
    assert_eq!(stale.status(), 409, "a form read before another change does not overwrite it");
    assert_eq!(app.get_ok("/api/v1/projects/alpha").await["conductor_config"]["max_agents"], 2);
    assert_eq!(dashboard.get("/projects/nope/conductor").await.0, 404);

    // `auto` for a provider outside the sandbox is refused, on the field.
    let version = app.get_ok("/api/v1/projects/alpha").await["version"].to_string();
    let mut fields = settings_fields("2", &version);
    fields.retain(|(name, _)| *name != "permissions");
    fields.push(("permissions", "shell=auto"));
    let refused = dashboard.post_form("/projects/alpha/conductor", &fields).await;
    assert_eq!(refused.status(), 422);
    assert!(refused.text().await.expect("body").contains("needs the provider to run under the sandbox"));
}

/// The settings form posted with every field changed, `max_agents` as given, at `version`.
async fn post_settings(dashboard: &Dashboard, max_agents: &str, version: &str) -> reqwest::Response {
    dashboard.post_form("/projects/alpha/conductor", &settings_fields(max_agents, version)).await
}

/// The settings form's fields with every one changed.
fn settings_fields<'a>(max_agents: &'a str, version: &'a str) -> Vec<(&'static str, &'a str)> {
    vec![
        ("planning", "human"),
        ("plan_approval", "human"),
        ("review", "both"),
        ("provider", "shell"),
        ("fallback_providers", "claude, codex"),
        ("max_agents", max_agents),
        ("keep_clones", "on"),
        ("permissions", "claude=auto, shell=allow-list"),
        ("version", version),
    ]
}

/// Whether the page scrolls sideways (its content wider than the window).
async fn overflows(client: &fantoccini::Client) -> bool {
    let wide = "const d = document.documentElement; return d.scrollWidth > d.clientWidth;";
    client.execute(wide, vec![]).await.expect("script") == json!(true)
}

#[tokio::test]
async fn a_person_retries_a_handed_off_group_and_fails_a_review_with_a_line_comment_in_a_real_browser() {
    let Some((client, _driver)) = browser().await else { return };
    let app = spawn_app().await;
    handed_off(&app, "the tests need a database").await;
    client.set_window_size(390, 844).await.expect("phone size");
    client.goto(&login_link(&app).await).await.expect("login");

    // The overview, at phone width: the hand-off with its reason; a retry from there.
    until_text(&client, "#handoff-login-api .reason", "the tests need a database").await;
    assert!(!overflows(&client).await, "the overview fits a phone");
    screenshot(&client, "conductor-needs-phone").await;
    click_button(&client, "Retry with a new agent").await;
    screenshot(&client, "conductor-retried-phone").await;
    until_text(&client, "#run-api", "not dispatched").await;
    let wish = app.get_ok("/api/v1/wishes/login").await;
    assert_eq!(group(&wish, "api")["status"], "ready");

    // A wish waiting for a person's review: a click on a diff line, a comment, a fail.
    let base = app.address.clone();
    under_human_review(&app, "beta", 3).await;
    client.goto(&format!("{base}/wishes/review")).await.expect("wish page");
    let line = "tr[data-at='src/app.rs:2'] .comment-on";
    client.wait().for_element(Locator::Css(line)).await.expect("the diff, loaded after the page");
    assert!(!overflows(&client).await, "the diff fits a phone");
    client.find(Locator::Css(line)).await.expect("line").click().await.expect("click the line");
    fill(&client, "tr.comment-row textarea", "Greet <everyone>").await;
    screenshot(&client, "conductor-review-phone").await;
    click_button(&client, "Fail with comments").await;
    client.wait().for_element(Locator::Css("[data-phase='fix']")).await.expect("the wish page, in its fix phase");
    let wish = app.get_ok("/api/v1/wishes/review").await;
    assert_eq!(wish["review_notes"], "Comments on lines:\n- src/app.rs:2: Greet <everyone>", "{wish}");
    client.close().await.expect("close the browser");
}
