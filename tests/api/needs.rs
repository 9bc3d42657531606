//! "Needs you" says what is asked and is answered in one tap wherever a person is: an agent
//! asking permission shows its command and its menu's options on the overview, its wish's page
//! and its own page (at the top, so a phone shows them without scrolling), each option a button
//! that answers the menu with that option; `GET /api/v1/needs` lists the same for scripts. The
//! fake agent (`tests/fake_agent/menu.py`, read with Claude Code's rules) asks to run
//! `rm -rf build` with a menu that takes key presses and prints what was chosen.

use std::time::Duration;

use fantoccini::{Client, Locator};
use serde_json::{json, Value};

use crate::dashboard::browser::{browser, click_button, login_link, screenshot, until_text};
use crate::helpers::{assert_json, assert_problem, eventually, TestApp};
use switchyard::domain::agent::AgentState;

fn providers_toml() -> String {
    let script = format!("{}/tests/fake_agent/menu.py", env!("CARGO_MANIFEST_DIR"));
    format!("[providers.menu]\ncommand = [\"{script}\"]\nscreen_rules = \"claude\"\ninstall_hooks = false\n")
}

const NO: &str = "No, and tell the agent what to do differently (esc)";

/// The app with agent `fox` (the fake) on group `api` of wish `login`, asking permission with
/// its menu on its screen.
async fn asking_agent() -> TestApp {
    let app = TestApp::builder().providers(&providers_toml()).worker(|_| {}).spawn().await;
    app.create_project("alpha").await;
    app.create_wish(
        json!({"slug": "login", "project": "alpha", "title": "Login", "groups": [{"key": "api", "title": "API"}]}),
    )
    .await;
    app.start_wish("login").await;
    app.create_agent(json!({"name": "fox", "project": "alpha", "kind": "worker", "role": "engineer",
        "provider": "menu", "clone": "none", "wish": "login", "group": "api"}))
        .await;
    eventually("fox asks for permission", Duration::from_secs(60), || async {
        app.agent_state("fox").await == AgentState::Permission
    })
    .await;
    app
}

async fn screen(app: &TestApp) -> String {
    app.get_ok("/api/v1/agents/fox/screen").await["text"].as_str().unwrap_or_default().to_owned()
}

/// Waits until the fake's screen says `text`.
async fn shows(app: &TestApp, text: &str) {
    eventually(&format!("fox's screen shows {text:?}"), Duration::from_secs(30), || async {
        screen(app).await.contains(text)
    })
    .await;
}

/// Has the fake ask again (a pasted line with "ask"), and waits for its menu.
async fn ask_again(app: &TestApp) {
    let asked = app.post("/api/v1/agents/fox/input", json!({"text": "ask again", "submit": false})).await;
    assert_json(asked, 200).await;
    shows(app, "❯ 1. Yes").await;
}

/// Whether fox's permission is listed with its three options.
fn lists_fox(needs: &Value) -> bool {
    needs["items"].as_array().is_some_and(|items| {
        items.iter().any(|n| n["agent"] == "fox" && n["options"].as_array().is_some_and(|o| o.len() == 3))
    })
}

/// The needs listed, once fox's is there with its three options (they are read off its screen).
async fn needs_with_fox(app: &TestApp, path: &str) -> Value {
    eventually("fox's permission is listed with its options", Duration::from_secs(30), || async {
        lists_fox(&app.get_ok(path).await)
    })
    .await;
    app.get_ok(path).await
}

#[tokio::test]
async fn needs_lists_an_agents_permission_with_its_command_and_options_and_pages_for_a_read_token() {
    let app = asking_agent().await;
    // Something else that waits for a person: a task handed to a human.
    app.create_task(json!({"project": "alpha", "title": "Sign the release off", "assignee": "human"})).await;

    let needs = needs_with_fox(&app, "/api/v1/needs").await;
    let items = needs["items"].as_array().expect("items");
    let fox = items.iter().find(|n| n["agent"] == "fox").expect("fox");
    assert_eq!((fox["kind"].as_str(), fox["wish"].as_str()), (Some("permission"), Some("login")), "{fox}");
    assert_eq!(fox["link"], "/agents/fox");
    let asked = fox["asked"].as_str().expect("what is asked");
    assert_eq!(asked, "Bash command\nrm -rf build\nDo you want to proceed?", "the dialog, not the lines above it");
    let options: Vec<(u64, &str)> = fox["options"]
        .as_array()
        .expect("options")
        .iter()
        .map(|o| (o["option"].as_u64().expect("number"), o["label"].as_str().expect("label")))
        .collect();
    assert_eq!(options, [(1, "Yes"), (2, "Yes, and don't ask again for this command"), (3, NO)]);
    let task = items.iter().find(|n| n["kind"] == "task").expect("the human task");
    assert_eq!(task["name"], "Sign the release off");
    assert_eq!(items.len(), 2, "{needs}");

    // A page at a time, as the other lists: two pages of one, then no cursor.
    let first = app.get_ok("/api/v1/needs?limit=1").await;
    let cursor = first["next_cursor"].as_str().expect("a next page");
    let second = app.get_ok(&format!("/api/v1/needs?limit=1&cursor={cursor}")).await;
    assert!(second["next_cursor"].is_null(), "{second}");
    let kinds: Vec<&Value> = [&first, &second].iter().map(|p| &p["items"][0]["kind"]).collect();
    assert!(kinds.contains(&&json!("permission")) && kinds.contains(&&json!("task")), "{first} {second}");
    assert_eq!(assert_problem(app.get("/api/v1/needs?limit=0").await, 422).await["errors"][0]["field"], "limit");
    assert_eq!(assert_problem(app.get("/api/v1/needs?cursor=nope").await, 422).await["errors"][0]["field"], "cursor");

    // A read token reads it.
    let read = app.token("read").await;
    let answer = app.client.get(app.url("/api/v1/needs")).bearer_auth(&read).send().await.expect("request");
    assert_eq!(assert_json(answer, 200).await["items"].as_array().map(Vec::len), Some(2));

    // The option a script picks from the list reaches the agent: "No" is No.
    let no = options.iter().find(|(_, label)| label.starts_with("No")).expect("a No").0;
    let answered = assert_json(app.post("/api/v1/agents/fox/input", json!({"option": no})).await, 200).await;
    assert_eq!(answered["chosen"]["option"], 3, "{answered}");
    shows(&app, &format!("chose 3: {NO}")).await;
    assert!(!screen(&app).await.contains("chose 1"), "nothing else was chosen");
}

/// Whether the button labelled `label` is in the window as the page opened (not scrolled).
async fn in_first_screen(client: &Client, label: &str) -> bool {
    let script = "const b = [...document.querySelectorAll('button')].find(b => b.textContent.trim() === arguments[0]);
        if (!b) return false;
        const r = b.getBoundingClientRect();
        return window.scrollY === 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth;";
    client.execute(script, vec![json!(label)]).await.expect("script") == json!(true)
}

/// Where the browser is now (the path).
async fn path(client: &Client) -> String {
    client.current_url().await.expect("url").path().to_owned()
}

#[tokio::test]
async fn a_permission_is_answered_in_one_tap_with_the_option_tapped_on_the_overview_the_wish_page_and_the_agent_page() {
    let Some((client, _driver)) = browser().await else { return };
    let app = asking_agent().await;
    let base = &app.address;
    client.goto(&login_link(&app).await).await.expect("login link");
    until_text(&client, "h1", "Overview").await;

    // The overview: what is asked, its options as buttons; "No" is No.
    until_text(&client, "#needs pre.asked", "rm -rf build").await;
    until_text(&client, "#needs", "wish login").await;
    let no = format!("3. {NO}");
    client
        .wait()
        .for_element(Locator::XPath(&format!("//section[@id='needs']//button[normalize-space()=\"{no}\"]")))
        .await
        .expect("No");
    screenshot(&client, "needs-overview").await;
    click_button(&client, &no).await;
    shows(&app, &format!("chose 3: {NO}")).await;
    assert!(!screen(&app).await.contains("chose 1"), "nothing else was chosen");
    until_text(&client, "h1", "Overview").await;
    assert_eq!(path(&client).await, "/", "the answer comes back to the page it was given on");

    // The wish's page.
    ask_again(&app).await;
    client.goto(&format!("{base}/wishes/login")).await.expect("wish page");
    until_text(&client, "#needs pre.asked", "Do you want to proceed?").await;
    click_button(&client, "2. Yes, and don't ask again for this command").await;
    shows(&app, "chose 2: Yes, and don't ask again for this command").await;
    until_text(&client, "#wish-h", "Login").await;
    assert_eq!(path(&client).await, "/wishes/login");

    // The agent's page on a phone: the ask and its buttons come first, in the first screen.
    ask_again(&app).await;
    client.set_window_size(390, 844).await.expect("phone size");
    client.goto(&format!("{base}/agents/fox")).await.expect("agent page");
    until_text(&client, "#prompt pre.asked", "rm -rf build").await;
    let yes = "1. Yes";
    client
        .wait()
        .for_element(Locator::XPath(&format!("//section[@id='prompt']//button[normalize-space()='{yes}']")))
        .await
        .expect("Yes");
    for label in [yes, no.as_str()] {
        assert!(in_first_screen(&client, label).await, "`{label}` shows without scrolling at 390 px");
    }
    screenshot(&client, "needs-agent-phone").await;
    click_button(&client, yes).await;
    shows(&app, "chose 1: Yes").await;
    until_text(&client, "#agent-h", "fox").await;
    assert_eq!(path(&client).await, "/agents/fox");

    // The overview on a phone too: the ask's buttons fit its width.
    ask_again(&app).await;
    client.goto(&format!("{base}/")).await.expect("overview");
    until_text(&client, "#needs pre.asked", "rm -rf build").await;
    client
        .wait()
        .for_element(Locator::XPath(&format!("//section[@id='needs']//button[normalize-space()='{yes}']")))
        .await
        .expect("Yes");
    let wide = client
        .execute("return document.documentElement.scrollWidth > document.documentElement.clientWidth;", vec![])
        .await
        .expect("script");
    assert_eq!(wide, json!(false), "the page does not scroll sideways at 390 px");
    screenshot(&client, "needs-overview-phone").await;
    client.close().await.expect("close the browser");
}
