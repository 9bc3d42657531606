//! A menu an agent shows (a permission dialog, a question with options) is answered with key
//! presses checked on its screen, never by typing the option's number as text: menus ignore a
//! pasted "3", and the Enter after it picks whatever is highlighted — "1. Yes". The fake agent
//! (`tests/fake_agent/menu.py`) behaves as the CLIs' menus do; the real CLIs' dialogs are
//! answered in their own tests.

use std::time::Duration;

use serde_json::{json, Value};

use switchyard::domain::agent::AgentState;

use crate::helpers::{assert_json, assert_problem, eventually, TestApp};

fn providers_toml() -> String {
    let script = format!("{}/tests/fake_agent/menu.py", env!("CARGO_MANIFEST_DIR"));
    format!("[providers.menu]\ncommand = [\"{script}\"]\nscreen_rules = \"generic\"\n")
}

async fn screen(app: &TestApp, name: &str) -> String {
    let screen = app.get_ok(&format!("/api/v1/agents/{name}/screen")).await;
    screen["text"].as_str().unwrap_or_default().to_owned()
}

async fn shows(app: &TestApp, name: &str, text: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let now = screen(app, name).await;
        if now.contains(text) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{name}'s screen does not show {text:?}:\n{now}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Has the fake agent ask again (a pasted line with "ask"), and waits for its menu.
async fn ask_again(app: &TestApp) {
    assert_json(input(app, "fox", json!({"text": "ask again", "submit": false})).await, 200).await;
    shows(app, "fox", "❯ 1. Yes").await;
}

async fn input(app: &TestApp, name: &str, body: Value) -> reqwest::Response {
    app.post(&format!("/api/v1/agents/{name}/input"), body).await
}

/// The app with agent `fox`, the fake, showing its menu.
async fn menu_agent() -> TestApp {
    let app = TestApp::builder().providers(&providers_toml()).worker(|_| {}).spawn().await;
    app.create_project("alpha").await;
    app.create_agent(
        json!({"name": "fox", "project": "alpha", "kind": "worker", "role": "engineer", "provider": "menu"}),
    )
    .await;
    eventually("fox has a pane", Duration::from_secs(60), || async {
        app.get_ok("/api/v1/agents/fox").await["state"] != "spawning"
    })
    .await;
    shows(&app, "fox", "❯ 1. Yes").await;
    app
}

#[tokio::test]
async fn an_options_number_answers_the_menu_with_that_option_and_only_once_the_screen_shows_it() {
    let app = menu_agent().await;

    // "3" typed as text, as the dashboard's button and scripts send it, is option 3: No.
    let answered = assert_json(input(&app, "fox", json!({"text": "3"})).await, 200).await;
    assert_eq!(answered["chosen"]["option"], 3, "{answered}");
    assert!(answered["chosen"]["label"].as_str().unwrap().starts_with("No"), "{answered}");
    assert_eq!(answered["keys"], json!(["Down", "Down", "Enter"]), "{answered}");
    let now = screen(&app, "fox").await;
    assert!(now.contains("chose 3: No"), "{now}");
    assert!(!now.contains("chose 1"), "nothing else was chosen: {now}");

    // `option` chooses too; the highlight is read, not assumed.
    ask_again(&app).await;
    let answered = assert_json(input(&app, "fox", json!({"option": 2})).await, 200).await;
    assert_eq!(answered["chosen"]["option"], 2, "{answered}");
    shows(&app, "fox", "chose 2: Yes, and don't ask again").await;
    ask_again(&app).await;
    let answered = assert_json(input(&app, "fox", json!({"option": 1})).await, 200).await;
    assert_eq!(answered["keys"], json!(["Enter"]), "{answered}");
    shows(&app, "fox", "chose 1: Yes").await;

    // An option the screen does not offer is refused, naming what it offers; nothing is pressed.
    let problem = assert_problem(input(&app, "fox", json!({"option": 1})).await, 409).await;
    assert!(problem["detail"].as_str().unwrap().contains("no option 1: it shows no menu"), "{problem}");
    ask_again(&app).await;
    let problem = assert_problem(input(&app, "fox", json!({"option": 7})).await, 409).await;
    assert!(problem["detail"].as_str().unwrap().contains("no option 7: it offers 1 to 3"), "{problem}");
    let problem = assert_problem(input(&app, "fox", json!({"option": 1, "text": "1"})).await, 422).await;
    assert_eq!(problem["errors"][0]["field"], "option", "{problem}");
    let problem = assert_problem(input(&app, "fox", json!({"option": 0})).await, 422).await;
    assert_eq!(problem["errors"][0]["field"], "option", "{problem}");
    let now = screen(&app, "fox").await;
    assert_eq!(now.matches("chose").count(), 3, "{now}");
}

/// The agent page's option buttons post the option (`option=N`), chosen on the menu as the API's
/// `option` is: "3" is No, not the highlighted "1. Yes"; a button without a number is refused.
#[tokio::test]
async fn the_agent_pages_option_button_chooses_that_option_on_the_menu() {
    let app = menu_agent().await;
    let dashboard = crate::dashboard::Dashboard::login(&app).await;

    let answered = dashboard.post_form("/agents/fox/answer", &[("option", "3")]).await;
    assert_eq!(crate::dashboard::redirected(answered).await, "/agents/fox");
    let now = screen(&app, "fox").await;
    assert!(now.contains("chose 3: No"), "{now}");
    assert!(!now.contains("chose 1"), "nothing else was chosen: {now}");

    ask_again(&app).await;
    let refused = dashboard.post_form("/agents/fox/answer", &[("option", "yes")]).await;
    assert_eq!(refused.status(), 422);
    assert!(refused.text().await.expect("body").contains("option"), "the field is named");
    assert_eq!(screen(&app, "fox").await.matches("chose").count(), 1, "nothing pressed");

    // An answer given on another page comes back to it, if it is a page of this site.
    let answered = dashboard.post_form("/agents/fox/answer", &[("option", "2"), ("back", "/wishes/login")]).await;
    assert_eq!(crate::dashboard::redirected(answered).await, "/wishes/login");
    shows(&app, "fox", "chose 2: Yes, and don't ask again").await;
    ask_again(&app).await;
    let answered = dashboard.post_form("/agents/fox/answer", &[("option", "1"), ("back", "//evil.example/")]).await;
    assert_eq!(crate::dashboard::redirected(answered).await, "/", "never to another site");
}

/// An agent whose hooks speak, as Claude Code's do: its `PermissionRequest` hook says
/// `permission`, and no hook follows the dialog's answer (its `PreToolUse` runs for its question
/// tool alone). Answered through Switchyard, the agent no longer asks the moment the answer is
/// given — not only once the hook's word has aged — and "needs you" no longer lists it.
#[tokio::test]
async fn a_permission_its_hook_announced_is_over_once_answered_and_leaves_needs_you() {
    let app = menu_agent().await;
    let token = app.agent_token(&app.get_ok("/api/v1/agents/fox").await).await;
    let asked = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash",
                       "tool_input": {"command": "rm -rf build"}});
    let hooked = app.client.post(app.url("/api/v1/agents/fox/hooks")).bearer_auth(&token).json(&asked).send().await;
    assert_json(hooked.expect("the hook"), 200).await;
    assert_eq!(app.agent_state("fox").await, AgentState::Permission);
    let listed =
        |needs: &Value| needs["items"].as_array().is_some_and(|items| items.iter().any(|n| n["agent"] == "fox"));
    assert!(listed(&app.get_ok("/api/v1/needs").await), "fox needs a person while it asks");

    let answered = assert_json(input(&app, "fox", json!({"option": 1})).await, 200).await;
    assert_eq!(answered["chosen"]["option"], 1, "{answered}");
    assert_eq!(app.agent_state("fox").await, AgentState::Working, "the answered dialog still shows");
    assert!(!listed(&app.get_ok("/api/v1/needs").await), "fox is still listed as needing a person");
    let changes = crate::fake_agent::state_change_events(&app, "fox").await;
    let last = changes.last().expect("a state change");
    assert_eq!((&last["to"], &last["source"]), (&json!("working"), &json!("answer")), "{changes:?}");
}
