//! The dashboard's forms in headless Chromium, used as a person uses them: a project made from the
//! boards page, two shell agents registered, a team made, joined and given a leader, a webhook
//! subscribed (refused first, beside its field), disabled, enabled and given a new secret, and a
//! task edited and made to wait for another on its page; a live change keeps a form being filled
//! in. Each step checks what the page then shows and what the API then says. One browser and one
//! app for all of it.

use std::time::{Duration, Instant};

use fantoccini::error::CmdError;
use fantoccini::{Client, Locator};
use serde_json::json;

use super::browser::{browser, click_button, login_link, screenshot, until_text};
use crate::helpers::{eventually, git_repo, TestApp};

/// Fills each field (a `<select>` by its option's value), presses `button` and waits for `css` to
/// say `text`. A live update keeps a form being filled in, but may replace one just before the
/// first key reaches it (the team page's head refreshes when the team changes): then the form is
/// filled again from the start, until a deadline.
async fn submit(client: &Client, fields: &[(&str, &str)], button: &str, css: &str, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if fill_in(client, fields).await.is_ok() {
            click_button(client, button).await;
        }
        if shows(client, css, text, Duration::from_secs(5)).await {
            return;
        }
        assert!(Instant::now() < deadline, "after {button}, `{css}` never said `{text}`");
        eprintln!("{button}: the form was replaced while it was filled in; filling it in again");
    }
}

async fn fill_in(client: &Client, fields: &[(&str, &str)]) -> Result<(), CmdError> {
    for (css, value) in fields {
        let field = client.find(Locator::Css(css)).await?;
        if field.tag_name().await? == "select" {
            field.select_by_value(value).await?;
        } else {
            field.clear().await?;
            field.send_keys(value).await?;
        }
    }
    Ok(())
}

/// Whether `css` says `text` within `wait` (polled).
async fn shows(client: &Client, css: &str, text: &str, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    while Instant::now() < deadline {
        if let Ok(element) = client.find(Locator::Css(css)).await {
            if element.text().await.is_ok_and(|t| t.contains(text)) {
                return true;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// The text of the element at `css`, once there is one.
async fn text_of(client: &Client, css: &str) -> String {
    client.wait().for_element(Locator::Css(css)).await.expect(css).text().await.expect("text")
}

/// Waits until the API's view of `path` satisfies `check`.
async fn api_says(app: &TestApp, path: &str, what: &str, check: impl Fn(&serde_json::Value) -> bool) {
    eventually(what, Duration::from_secs(10), || async { check(&app.get_ok(path).await) }).await;
}

#[tokio::test]
async fn a_person_makes_and_changes_projects_agents_teams_webhooks_and_tasks_from_their_forms() {
    let Some((client, _driver)) = browser().await else { return };
    let app = TestApp::builder().webhooks(crate::webhooks::test_settings()).spawn().await;
    let base = app.address.clone();
    let repo = git_repo();
    client.goto(&login_link(&app).await).await.expect("login link");
    until_text(&client, "h1", "Overview").await;

    // A project, from the boards page.
    client.goto(&format!("{base}/boards")).await.expect("boards");
    let repo_path = repo.path().to_str().expect("utf-8 path");
    let project = [("#np-slug", "gamma"), ("#np-name", "Gamma <docs>"), ("#np-repo", repo_path)];
    submit(&client, &project, "Create project", "#boards h2", "Gamma <docs>").await;
    let project = app.get_ok("/api/v1/projects/gamma").await;
    assert_eq!((project["name"].as_str(), project["target_branch"].as_str()), (Some("Gamma <docs>"), Some("main")));

    // Two agents running a shell, from the agents page.
    for (name, task) in [("owl", "Proofread the guide"), ("fox", "Write the guide")] {
        client.goto(&format!("{base}/agents")).await.expect("agents");
        let agent = [("#na-name", name), ("#na-project", "gamma"), ("#na-provider", "shell"), ("#na-task", task)];
        submit(&client, &agent, "Register", "#agent-h", name).await;
        until_text(&client, "#summary .task", task).await;
        let agent = app.agent(name).await;
        assert_eq!((agent["provider"].as_str(), agent["task"].as_str()), (Some("shell"), Some(task)));
    }

    // A team of owl; fox joins on its page and becomes its leader.
    client.goto(&format!("{base}/teams")).await.expect("teams");
    let team = [("#nt-name", "guide"), ("#nt-project", "gamma"), ("#nt-members", "owl")];
    submit(&client, &team, "Create team", "#team-h", "guide").await;
    submit(&client, &[("#add-member", "fox")], "Add", "#head ul.rows", "fox").await;
    submit(&client, &[("#leader", "fox")], "Set leader", "#head ul.rows", "fox (leader)").await;
    let team = app.get_ok("/api/v1/teams/guide").await;
    assert_eq!(team["leader"], "fox", "{team}");
    assert_eq!(team["members"], json!(["owl", "fox"]), "{team}");
    screenshot(&client, "form-team").await;

    // A live change never replaces a form being filled in: while `#add-member` holds what was
    // typed, the team's head keeps it (and its old status) through a change; cleared, the next
    // change refreshes it.
    let held = "window.heldSwaps = 0; document.addEventListener('htmx:beforeSwap', function (e) { \
                if (!e.detail.shouldSwap) window.heldSwaps++; });";
    client.execute(held, vec![]).await.expect("count held swaps");
    let field = client.find(Locator::Css("#add-member")).await.expect("the member field");
    field.send_keys("ow").await.expect("type");
    app.patch_ok("/api/v1/teams/guide", json!({"status": "blocked"})).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.execute("return window.heldSwaps", vec![]).await.expect("held").as_u64() == Some(0) {
        assert!(Instant::now() < deadline, "the change never reached the page");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let field = client.find(Locator::Css("#add-member")).await.expect("the member field");
    assert_eq!(field.prop("value").await.expect("value").as_deref(), Some("ow"), "what was typed is kept");
    assert!(!text_of(&client, "#team-h").await.to_lowercase().contains("blocked"), "the head was not replaced");
    field.clear().await.expect("clear");
    client.find(Locator::Css("#members-h")).await.expect("heading").click().await.expect("leave the field");
    app.patch_ok("/api/v1/teams/guide", json!({"status": "in_progress"})).await;
    until_text(&client, "#team-h", "progress").await;

    // A webhook: a private address is refused beside the URL, what was typed kept; then made.
    client.goto(&format!("{base}/webhooks")).await.expect("webhooks");
    let idle = client.find(Locator::Css("input[name='events'][value='on_agent_idle']")).await.expect("box");
    idle.click().await.expect("tick");
    let webhook = [
        ("#wh-url", "http://10.0.0.7/hook"),
        ("#wh-other", "task.*"),
        ("#wh-project", "gamma"),
        ("#wh-format", "slack"),
        ("#wh-description", "The <docs> channel"),
    ];
    submit(&client, &webhook, "Create webhook", "#wh-url ~ .field-error", "10.0.0.7").await;
    let refused = text_of(&client, "#wh-url ~ .field-error").await;
    let api = app.post("/api/v1/webhooks", json!({"url": "http://10.0.0.7/hook", "events": ["task.*"]})).await;
    let api = crate::helpers::assert_problem(api, 422).await;
    assert_eq!(refused, api["errors"][0]["message"].as_str().expect("message"), "the API's words");
    let kept = "return [document.getElementById('wh-url').value, document.getElementById('wh-format').value,
        document.querySelector(\"input[value='on_agent_idle']\").checked];";
    let kept = client.execute(kept, vec![]).await.expect("script");
    assert_eq!(kept, json!(["http://10.0.0.7/hook", "slack", true]), "what was typed is kept");
    screenshot(&client, "form-webhook-refused").await;
    submit(&client, &[("#wh-url", "http://127.0.0.1:9/guide")], "Create webhook", "h1", "New webhook").await;
    let first_secret = text_of(&client, "code.secret").await;
    assert!(first_secret.starts_with("whsec_"), "{first_secret}");
    let hooks = app.get_ok("/api/v1/webhooks").await;
    let hook = &hooks["items"][0];
    assert_eq!(hook["events"], json!(["on_agent_idle", "task.*"]), "{hook}");
    assert_eq!((hook["project"].as_str(), hook["format"].as_str()), (Some("gamma"), Some("slack")));
    assert_eq!(hook["description"], "The <docs> channel");
    let webhook = format!("/api/v1/webhooks/{}", hook["id"].as_str().expect("id"));

    // Its page: disabled, enabled again, a new secret shown once.
    client.find(Locator::LinkText("Back to the webhook")).await.expect("link").click().await.expect("click");
    until_text(&client, ".status-line .badge", "enabled").await;
    until_text(&client, "main", "The <docs> channel").await;
    click_button(&client, "Disable").await;
    until_text(&client, ".status-line .badge", "disabled").await;
    api_says(&app, &webhook, "the webhook is disabled", |h| h["enabled"] == false).await;
    click_button(&client, "Enable").await;
    until_text(&client, ".status-line .badge", "enabled").await;
    api_says(&app, &webhook, "the webhook is enabled", |h| h["enabled"] == true).await;
    click_button(&client, "Rotate the secret").await;
    until_text(&client, "h1", "New signing secret").await;
    let second_secret = text_of(&client, "code.secret").await;
    assert!(second_secret.starts_with("whsec_") && second_secret != first_secret, "{second_secret}");
    client.find(Locator::LinkText("Back to the webhook")).await.expect("link").click().await.expect("click");
    until_text(&client, ".status-line", "format slack").await;
    let page = client.source().await.expect("html");
    assert!(!page.contains(&second_secret) && !page.contains(&first_secret), "a secret is shown once");

    // A task, edited and made to wait for another on its page.
    let draft = app.create_task(json!({"project": "gamma", "title": "Draft the guide"})).await;
    let publish = app.create_task(json!({"project": "gamma", "title": "Publish"})).await;
    let (draft, publish) = (draft["id"].as_str().expect("id"), publish["id"].as_str().expect("id"));
    client.goto(&format!("{base}/tasks/{publish}")).await.expect("task page");
    until_text(&client, "#task-h", "Publish").await;
    let edit = [("#edit-title", "Publish the <guide>"), ("#edit-assignee", "owl"), ("#edit-goal", "On the website")];
    submit(&client, &edit, "Save", "#task-h", "Publish the <guide>").await;
    until_text(&client, "#summary .facts", "owl").await;
    until_text(&client, "#summary .description", "On the website").await;
    let task = app.task(publish).await;
    assert_eq!(
        (task["title"].as_str(), task["assignee"].as_str(), task["goal"].as_str()),
        (Some("Publish the <guide>"), Some("owl"), Some("On the website"))
    );
    let draft_box = format!("input[name='depends_on'][value='{draft}']");
    client.find(Locator::Css(&draft_box)).await.expect("the draft's box").click().await.expect("tick");
    click_button(&client, "Save dependencies").await;
    until_text(&client, "#deps-h + ul.rows", "Draft the guide").await;
    until_text(&client, "#task-h .badge", "blocked").await;
    let task = app.task(publish).await;
    assert_eq!((task["status"].as_str(), task["unmet_dependencies"].as_i64()), (Some("blocked"), Some(1)), "{task}");
    screenshot(&client, "form-task").await;
    client.close().await.expect("close the browser");
}
