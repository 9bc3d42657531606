//! The dashboard end to end in headless Chromium (Debian's `chromium` and `chromium-driver`, which
//! `./dev deps` installs), driven through WebDriver with fantoccini. One browser session walks
//! through it all: log in with the one-time link, make a wish with two dependent groups from the
//! form and watch the second turn `ready` without a reload when the first is completed through
//! the API, make a board and move a card (button, then drag and drop) and a wish card (its button,
//! from the keyboard), answer a fake Claude Code's permission prompt and its question. Each page is
//! saved as a screenshot under `target/e2e-screenshots/`, at laptop and at phone width.
//!
//! Without a Chromium and a chromedriver on the machine the test says so and passes: it is the one
//! test that needs a browser.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use reqwest::Method;
use serde_json::json;

use crate::fake_agent::{fake_agent_on_a_task, go_on, providers_toml, wait_for_state};
use crate::helpers::{eventually, TestApp};

/// chromedriver and the Chromium it starts, in a process group of their own: all of them are
/// stopped when the test ends, however it ends.
pub(crate) struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let group = nix::unistd::Pid::from_raw(self.0.id() as i32);
        let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        let _ = self.0.wait();
    }
}

fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name))).find(|p| p.is_file())
}

/// Starts chromedriver on a free port and opens a headless Chromium session; `None` (with a
/// message) when either is not installed.
pub(crate) async fn browser() -> Option<(Client, Driver)> {
    let (Some(chromium), Some(chromedriver)) =
        (on_path(&["chromium", "chromium-browser", "google-chrome"]), on_path(&["chromedriver"]))
    else {
        eprintln!("SKIPPED: the dashboard browser test needs chromium and chromedriver (`./dev deps` installs them)");
        return None;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
    let child = Command::new(chromedriver)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("start chromedriver");
    let driver = Driver(child);
    eventually("chromedriver listens", Duration::from_secs(15), || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok()
    })
    .await;
    let args = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--disable-sync",
        "--disable-crash-reporter",
        "--disable-breakpad",
        "--window-size=1366,900",
    ];
    // Notifications allowed for every site, as a person answering the permission prompt would
    // (headless Chromium has no prompt to click).
    let prefs = json!({"profile.default_content_setting_values.notifications": 1});
    let capabilities =
        json!({"browserName": "chrome", "goog:chromeOptions": {"binary": chromium, "args": args, "prefs": prefs}});
    let capabilities = capabilities.as_object().expect("an object").clone();
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("a WebDriver session");
    Some((client, driver))
}

/// A one-time login link for the app's admin token, as `serve` prints at first start.
pub(crate) async fn login_link(app: &TestApp) -> String {
    let token_id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM tokens WHERE name LIKE 'test-admin-%'")
        .fetch_one(&app.pool)
        .await
        .expect("token");
    let mut conn = app.pool.acquire().await.expect("conn");
    let code = switchyard::db::sessions::create_login_code(&mut conn, token_id).await.expect("code");
    format!("{}/login?code={code}", app.address)
}

fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("target dir").join("e2e-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

pub(crate) async fn screenshot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("screenshot");
    std::fs::write(screenshots().join(format!("{name}.png")), png).expect("write screenshot");
}

/// Waits until `css` matches an element whose text contains `text`.
pub(crate) async fn until_text(client: &Client, css: &str, text: &str) {
    eventually(&format!("`{css}` says `{text}`"), Duration::from_secs(20), || async {
        match client.find(Locator::Css(css)).await {
            Ok(element) => element.text().await.is_ok_and(|t| t.contains(text)),
            Err(_) => false,
        }
    })
    .await;
}

/// Clicks the button labelled `label`. A live update may swap the part holding it between finding
/// and clicking (the element is then stale), as it would under a person's pointer: find it again.
pub(crate) async fn click_button(client: &Client, label: &str) {
    // XPath 1.0 has no escapes: a label with an apostrophe is quoted with double quotes.
    let xpath = if label.contains('\'') {
        format!("//button[normalize-space()=\"{label}\"]")
    } else {
        format!("//button[normalize-space()='{label}']")
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let button = client.wait().for_element(Locator::XPath(&xpath)).await.expect("the button");
        match button.click().await {
            Ok(()) => return,
            Err(fantoccini::error::CmdError::Standard(e))
                if e.error == fantoccini::error::ErrorStatus::StaleElementReference
                    && std::time::Instant::now() < deadline => {}
            Err(e) => panic!("click {label}: {e:?}"),
        }
    }
}

pub(super) async fn fill(client: &Client, css: &str, text: &str) {
    client.find(Locator::Css(css)).await.expect(css).send_keys(text).await.expect("type");
}

/// Waits until the API says the task or wish at `api_path` is in `column`, and the page shows its
/// card (`element`: `t-<task id>` or `w-<wish id>`) there.
async fn card_lands_in(app: &TestApp, client: &Client, api_path: &str, element: &str, column: &str) {
    eventually(&format!("{api_path} is in column {column}"), Duration::from_secs(10), || async {
        app.get_ok(api_path).await["column_id"] == column
    })
    .await;
    let shown = format!("form[data-column='{column}'] #{element}");
    client.wait().for_element(Locator::Css(&shown)).await.expect("the card shown in its new column");
}

#[tokio::test]
async fn the_dashboard_works_end_to_end_in_a_real_browser() {
    let Some((client, _driver)) = browser().await else { return };
    let app = TestApp::builder().providers(&providers_toml()).worker(|_| {}).spawn().await;
    // A project `alpha`, its wish `login`, and a fake Claude Code `fox` working on that wish's group.
    fake_agent_on_a_task(&app, "fox").await;
    let base = &app.address;

    // Log in with a one-time link, as `serve` prints at first start.
    client.goto(&format!("{base}/login")).await.expect("login page");
    screenshot(&client, "login").await;
    client.goto(&login_link(&app).await).await.expect("login link");
    until_text(&client, "h1", "Overview").await;

    // A wish with two dependent groups, from the form.
    client.goto(&format!("{base}/new-wish")).await.expect("form");
    fill(&client, "#slug", "checkout").await;
    fill(&client, "#title", "Checkout <b>flow</b>").await;
    fill(&client, "#g0-key", "api").await;
    fill(&client, "#g0-title", "Payment API").await;
    fill(&client, "#g1-key", "ui").await;
    fill(&client, "#g1-title", "Checkout page").await;
    fill(&client, "#g1-deps", "api").await;
    screenshot(&client, "wish-form").await;
    click_button(&client, "Make the wish").await;
    until_text(&client, "#wish-h", "Checkout <b>flow</b>").await;
    for step in ["Plan", "Queue", "Start"] {
        click_button(&client, step).await;
        let next = match step {
            "Plan" => "planned",
            "Queue" => "queued",
            _ => "executing",
        };
        until_text(&client, "#head .status-line", next).await;
    }
    until_text(&client, "#group-ui .badge", "blocked").await;
    client.execute("window.notReloaded = true;", vec![]).await.expect("mark the page");

    // The first group is completed through the API; the page shows the second become ready.
    app.post_ok("/api/v1/wishes/checkout/groups/api/start", json!({})).await;
    app.post_ok("/api/v1/wishes/checkout/groups/api/complete", json!({"result": "done"})).await;
    until_text(&client, "#group-ui .badge", "ready").await;
    until_text(&client, "#group-api .badge", "done").await;
    let class =
        client.find(Locator::Css("g[data-group='ui']")).await.expect("node").attr("class").await.expect("class");
    assert_eq!(class.as_deref(), Some("node st-ready"), "the drawing follows too");
    let same_page = client.execute("return window.notReloaded === true;", vec![]).await.expect("script");
    assert_eq!(same_page, json!(true), "the page was never reloaded");
    screenshot(&client, "wish").await;

    // A board from the default template, a task added from its form, then moved.
    client.goto(&format!("{base}/boards")).await.expect("boards");
    fill(&client, "#nb-name", "Delivery").await;
    click_button(&client, "Create board").await;
    until_text(&client, "h1", "Delivery").await;
    fill(&client, "#nt-title", "Write the docs").await;
    click_button(&client, "Add task").await;
    until_text(&client, "#board", "Write the docs").await;
    let tasks = app.get_ok("/api/v1/tasks?project=alpha").await;
    let task = tasks["items"].as_array().expect("items").iter().find(|t| t["title"] == "Write the docs").expect("task");
    let task_id = task["id"].as_str().expect("id").to_owned();
    let board_id = task["board_id"].as_str().expect("board").to_owned();
    let board = app.get_ok(&format!("/api/v1/boards/{board_id}")).await;
    let column = |name: &str| {
        board["columns"].as_array().expect("columns").iter().find(|c| c["name"] == name).expect("column")["id"]
            .as_str()
            .expect("id")
            .to_owned()
    };
    screenshot(&client, "board").await;
    // From the keyboard: focus the card's → button and press Enter.
    let right = client.find(Locator::Css(&format!("#r-{task_id}"))).await.expect("move button");
    right.send_keys("\u{E007}").await.expect("Enter");
    let (task_path, task_card) = (format!("/api/v1/tasks/{task_id}"), format!("t-{task_id}"));
    card_lands_in(&app, &client, &task_path, &task_card, &column("In progress")).await;
    // By drag and drop (the browser's own drag events, dispatched as a mouse drag would).
    let done = column("Done");
    let drag = "const card = document.getElementById(arguments[0]);
        const column = document.querySelector(`[data-column='${arguments[1]}']`);
        const data = new DataTransfer();
        for (const [target, type] of [[card, 'dragstart'], [column, 'dragover'], [column, 'drop'], [card, 'dragend']]) {
            target.dispatchEvent(new DragEvent(type, {bubbles: true, cancelable: true, dataTransfer: data}));
        }";
    client.execute(drag, vec![json!(task_card), json!(done)]).await.expect("drag");
    card_lands_in(&app, &client, &task_path, &task_card, &done).await;
    // A wish card: put on the board through the API, it appears by itself; then, from the
    // keyboard, its → button moves it to the next column, without a reload.
    client.execute("window.notReloaded = true;", vec![]).await.expect("mark the page");
    let wish_card = format!("w-{}", app.get_ok("/api/v1/wishes/checkout").await["id"].as_str().expect("id"));
    app.post_ok("/api/v1/wishes/checkout/move", json!({"column_id": column("Backlog")})).await;
    let shown = format!("form[data-column='{}'] #{wish_card}", column("Backlog"));
    client.wait().for_element(Locator::Css(&shown)).await.expect("the wish card shown on the board");
    let right = client.find(Locator::Css(&format!("#{wish_card} button[name='right']"))).await.expect("→");
    right.send_keys("\u{E007}").await.expect("Enter");
    card_lands_in(&app, &client, "/api/v1/wishes/checkout", &wish_card, &column("In progress")).await;
    let same_page = client.execute("return window.notReloaded === true;", vec![]).await.expect("script");
    assert_eq!(same_page, json!(true), "the board was never reloaded");
    screenshot(&client, "board-wish-moved").await;
    // A task added through the API appears by itself; a full column refuses it, and the page
    // says so in its flash area.
    let limit = app
        .admin(Method::PATCH, &format!("/api/v1/boards/{board_id}/columns/{done}"))
        .json(&json!({"wip_limit": 1}))
        .send()
        .await
        .expect("limit");
    assert_eq!(limit.status(), 200, "{:?}", limit.text().await);
    let second = app.create_task(json!({"project": "alpha", "title": "Second task", "board_id": board_id})).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    until_text(&client, "#board", "Second task").await;
    until_text(&client, &format!("form[data-column='{done}'] .wip"), "WIP 1 / 1 (full)").await;
    client.execute(drag, vec![json!(format!("t-{second}")), json!(done)]).await.expect("drag");
    until_text(&client, "#flash", "column `Done` is full").await;
    screenshot(&client, "board-full").await;

    // The fake agent asks for permission, then asks a question: both answered from its page.
    wait_for_state(&app, "fox", "idle").await;
    go_on(&app, "fox").await;
    wait_for_state(&app, "fox", "working").await;
    client.goto(&format!("{base}/agents/fox")).await.expect("agent page");
    go_on(&app, "fox").await;
    wait_for_state(&app, "fox", "permission").await;
    until_text(&client, "#prompt", "asks for permission").await;
    screenshot(&client, "agent-permission").await;
    click_button(&client, "1. Yes").await;
    wait_for_state(&app, "fox", "working").await;
    go_on(&app, "fox").await;
    wait_for_state(&app, "fox", "question").await;
    until_text(&client, "#prompt", "Retry up to 3 times").await;
    until_text(&client, "#summary .badge", "question").await;
    screenshot(&client, "agent-question").await;
    click_button(&client, "1. Retry up to 3 times").await;
    wait_for_state(&app, "fox", "working").await;
    until_text(&client, "#summary .badge", "working").await;

    // The other pages, at laptop width and then at phone width.
    let hook = json!({"url": "https://hooks.example.com/switchyard", "events": ["on_pr_created"],
        "description": "Release notes"});
    let webhook = app.post_ok("/api/v1/webhooks", hook).await["id"].as_str().expect("id").to_owned();
    app.post_ok(&format!("/api/v1/webhooks/{webhook}/test"), json!({})).await;
    for width in [1366, 390] {
        if width == 390 {
            client.set_window_size(390, 844).await.expect("phone size");
        }
        let suffix = if width == 390 { "-phone" } else { "" };
        for (name, path) in [
            ("overview", "/".to_owned()),
            ("wishes", "/wishes".to_owned()),
            ("wish-detail", "/wishes/checkout".to_owned()),
            ("boards", "/boards".to_owned()),
            ("board-moved", format!("/boards/{board_id}")),
            ("agents", "/agents".to_owned()),
            ("agent", "/agents/fox".to_owned()),
            ("webhooks", "/webhooks".to_owned()),
            ("webhook", format!("/webhooks/{webhook}")),
            ("events", "/events".to_owned()),
        ] {
            client.goto(&format!("{base}{path}")).await.expect("page");
            client.wait().for_element(Locator::Css("main h1, main section")).await.expect("content");
            screenshot(&client, &format!("{name}{suffix}")).await;
        }
    }
    client.close().await.expect("close the browser");
}
