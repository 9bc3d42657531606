//! The dashboard's forms in headless Chromium, used as a person uses them: a project made from the
//! boards page, two shell agents registered, a team made, joined and given a leader, a webhook
//! subscribed (refused first, beside its field), disabled, enabled and given a new secret, and a
//! task edited and made to wait for another on its page. Each step checks what the page then
//! shows and what the API then says. One browser and one app for all of it.

use std::time::Duration;

use fantoccini::{Client, Locator};
use serde_json::json;

use super::browser::{browser, click_button, fill, login_link, screenshot, until_text};
use crate::helpers::{eventually, git_repo, spawn_app_with, TestApp};

/// Chooses the option whose value is `value` in the `<select>` at `css`.
async fn choose(client: &Client, css: &str, value: &str) {
    let select = client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"));
    select.select_by_value(value).await.unwrap_or_else(|e| panic!("{css} = {value}: {e}"));
}

/// Replaces what the field at `css` holds with `text`.
async fn retype(client: &Client, css: &str, text: &str) {
    client.find(Locator::Css(css)).await.expect(css).clear().await.expect("clear");
    fill(client, css, text).await;
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
    let app = spawn_app_with(crate::webhooks::test_settings()).await;
    let base = app.address.clone();
    let repo = git_repo();
    client.goto(&login_link(&app).await).await.expect("login link");
    until_text(&client, "h1", "Overview").await;

    // A project, from the boards page.
    client.goto(&format!("{base}/boards")).await.expect("boards");
    fill(&client, "#np-slug", "gamma").await;
    fill(&client, "#np-name", "Gamma <docs>").await;
    fill(&client, "#np-repo", repo.path().to_str().expect("utf-8 path")).await;
    click_button(&client, "Create project").await;
    until_text(&client, "#boards h2", "Gamma <docs>").await;
    let project = app.get_ok("/api/v1/projects/gamma").await;
    assert_eq!((project["name"].as_str(), project["target_branch"].as_str()), (Some("Gamma <docs>"), Some("main")));

    // Two agents running a shell, from the agents page.
    for (name, task) in [("owl", "Proofread the guide"), ("fox", "Write the guide")] {
        client.goto(&format!("{base}/agents")).await.expect("agents");
        fill(&client, "#na-name", name).await;
        choose(&client, "#na-project", "gamma").await;
        choose(&client, "#na-provider", "shell").await;
        fill(&client, "#na-task", task).await;
        click_button(&client, "Register").await;
        until_text(&client, "#agent-h", name).await;
        until_text(&client, "#summary .task", task).await;
        let agent = app.agent(name).await;
        assert_eq!((agent["provider"].as_str(), agent["task"].as_str()), (Some("shell"), Some(task)));
    }

    // A team of owl; fox joins on its page and becomes its leader.
    client.goto(&format!("{base}/teams")).await.expect("teams");
    fill(&client, "#nt-name", "guide").await;
    choose(&client, "#nt-project", "gamma").await;
    fill(&client, "#nt-members", "owl").await;
    click_button(&client, "Create team").await;
    until_text(&client, "#team-h", "guide").await;
    fill(&client, "#add-member", "fox").await;
    click_button(&client, "Add").await;
    until_text(&client, "#head ul.rows", "fox").await;
    choose(&client, "#leader", "fox").await;
    click_button(&client, "Set leader").await;
    until_text(&client, "#head ul.rows", "fox (leader)").await;
    let team = app.get_ok("/api/v1/teams/guide").await;
    assert_eq!(team["leader"], "fox", "{team}");
    assert_eq!(team["members"], json!(["owl", "fox"]), "{team}");
    screenshot(&client, "form-team").await;

    // A webhook: a private address is refused beside the URL, what was typed kept; then made.
    client.goto(&format!("{base}/webhooks")).await.expect("webhooks");
    fill(&client, "#wh-url", "http://10.0.0.7/hook").await;
    client
        .find(Locator::Css("input[name='events'][value='on_agent_idle']"))
        .await
        .expect("box")
        .click()
        .await
        .expect("tick");
    fill(&client, "#wh-other", "task.*").await;
    choose(&client, "#wh-project", "gamma").await;
    choose(&client, "#wh-format", "slack").await;
    fill(&client, "#wh-description", "The <docs> channel").await;
    click_button(&client, "Create webhook").await;
    let refused = text_of(&client, "#wh-url ~ .field-error").await;
    let api = app.post("/api/v1/webhooks", json!({"url": "http://10.0.0.7/hook", "events": ["task.*"]})).await;
    let api = crate::helpers::assert_problem(api, 422).await;
    assert_eq!(refused, api["errors"][0]["message"].as_str().expect("message"), "the API's words");
    let kept = "return [document.getElementById('wh-url').value, document.getElementById('wh-format').value,
        document.querySelector(\"input[value='on_agent_idle']\").checked];";
    let kept = client.execute(kept, vec![]).await.expect("script");
    assert_eq!(kept, json!(["http://10.0.0.7/hook", "slack", true]), "what was typed is kept");
    screenshot(&client, "form-webhook-refused").await;
    retype(&client, "#wh-url", "http://127.0.0.1:9/guide").await;
    click_button(&client, "Create webhook").await;
    until_text(&client, "h1", "New webhook").await;
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
    retype(&client, "#edit-title", "Publish the <guide>").await;
    retype(&client, "#edit-assignee", "owl").await;
    retype(&client, "#edit-goal", "On the website").await;
    click_button(&client, "Save").await;
    until_text(&client, "#task-h", "Publish the <guide>").await;
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
