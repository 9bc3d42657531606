//! Every page at phone width (390 px) in headless Chromium: a screenshot of each under
//! `target/e2e-screenshots/` (`*-phone-full.png`), and the page's own layout checked — the body
//! never scrolls sideways, a list never needs its sideways scroller (lists become stacked cards),
//! and no table cell is too narrow for a word in it (its scrollWidth would exceed its
//! clientWidth). The plan graph is the one thing that may scroll: it is a drawing.

use fantoccini::Locator;
use serde_json::json;

use super::browser::{browser, login_link, screenshot};
use crate::helpers::{engineer, merged, spawn_app_with, TestApp};

/// What does not fit, as sentences (empty when everything does).
const OVERFLOWS: &str = r#"
const out = [];
const doc = document.documentElement;
if (doc.scrollWidth > doc.clientWidth) out.push(`the page is ${doc.scrollWidth}px wide in ${doc.clientWidth}px`);
const shown = (e) => e.offsetParent !== null;
for (const box of document.querySelectorAll('.scroll:not(.dag)')) {
  if (shown(box) && box.scrollWidth > box.clientWidth + 1) out.push(`a list needs ${box.scrollWidth}px in ${box.clientWidth}px`);
}
// A list's column headings are kept for screen readers only (clipped to 1px) once rows are cards.
const clipped = (cell) => { const head = cell.closest('thead'); return head && head.getBoundingClientRect().height <= 1; };
for (const cell of document.querySelectorAll('td, th')) {
  if (shown(cell) && !clipped(cell) && cell.scrollWidth > cell.clientWidth + 1) {
    out.push(`cell "${cell.textContent.trim().slice(0, 60)}" needs ${cell.scrollWidth}px in ${cell.clientWidth}px`);
  }
}
return out;
"#;

/// Something to show on every page: a project with a board of tasks, a wish with a plan, agents
/// (one with a long name), a team, mail, a webhook and its deliveries.
async fn a_busy_day(app: &TestApp) -> (String, String, String) {
    app.create_project("alpha").await;
    let columns =
        json!([{"name": "Backlog"}, {"name": "Redelivery review", "gate": "human", "wip_limit": 3}, {"name": "Done"}]);
    let board = app.create_board("alpha", json!({"name": "Delivery", "columns": columns})).await;
    let board = board["id"].as_str().expect("id").to_owned();
    let task = app
        .create_task(json!({"project": "alpha", "title": "Redeliver the webhooks of the operator's integration",
            "board_id": board, "assignee": "human", "goal": "Configuration-management-compatible-identifiers everywhere"}))
        .await;
    let task = task["id"].as_str().expect("id").to_owned();
    let groups = json!([{"key": "api", "title": "Authentication API"}, {"key": "ui", "title": "Login page", "depends_on": ["api"]},
        {"key": "docs", "title": "Documentation", "depends_on": ["api"]}, {"key": "e2e", "title": "End to end tests", "depends_on": ["ui", "docs"]}]);
    app.create_wish(
        json!({"slug": "login", "project": "alpha", "title": "Operators log in with single sign-on", "groups": groups}),
    )
    .await;
    app.start_wish("login").await;
    for name in ["fox", "configuration-management-reviewer"] {
        app.create_agent(merged(
            engineer("alpha", name),
            json!({"provider": "shell", "task": "Review the operator's redelivery configuration"}),
        ))
        .await;
    }
    app.post_ok(
        "/api/v1/teams",
        json!({"name": "login-team", "project": "alpha", "members": ["fox"], "leader": "fox"}),
    )
    .await;
    app.post_ok("/api/v1/messages", json!({"from": "operator", "to": "configuration-management-reviewer", "body": "Redelivery: please check the operator's configuration before Friday."})).await;
    let hook = json!({"url": "https://hooks.example.com/switchyard/operators/redelivery-notifications", "events": ["on_pr_created", "task.*"], "description": "Release notes"});
    let webhook = app.post_ok("/api/v1/webhooks", hook).await["id"].as_str().expect("id").to_owned();
    app.post_ok(&format!("/api/v1/webhooks/{webhook}/test"), json!({})).await;
    (board, task, webhook)
}

#[tokio::test]
async fn every_page_fits_a_phone_without_sideways_scrolling_or_words_cut_by_their_cells() {
    let Some((client, _driver)) = browser().await else { return };
    let app = spawn_app_with(crate::webhooks::test_settings()).await;
    let (board, task, webhook) = a_busy_day(&app).await;
    let base = &app.address;
    client.set_window_size(390, 844).await.expect("phone size");
    client.goto(&login_link(&app).await).await.expect("login link");
    client.wait().for_element(Locator::Css("main h1, main section")).await.expect("logged in");
    let offered = client.execute("return !document.getElementById('notify-toggle').hidden;", vec![]).await.expect("js");
    assert_eq!(offered, json!(true), "a browser with the Notification API is offered notifications");

    let mut failures = Vec::new();
    for (name, path) in [
        ("overview", "/".to_owned()),
        ("wishes", "/wishes".to_owned()),
        ("wish", "/wishes/login".to_owned()),
        ("new-wish", "/new-wish".to_owned()),
        ("boards", "/boards".to_owned()),
        ("board", format!("/boards/{board}")),
        ("task", format!("/tasks/{task}")),
        ("agents", "/agents".to_owned()),
        ("agent", "/agents/configuration-management-reviewer".to_owned()),
        ("teams", "/teams".to_owned()),
        ("team", "/teams/login-team".to_owned()),
        ("mailbox", "/messages".to_owned()),
        ("webhooks", "/webhooks".to_owned()),
        ("webhook", format!("/webhooks/{webhook}")),
        ("events", "/events".to_owned()),
        ("not-found", "/boards/not-a-uuid".to_owned()),
    ] {
        client.goto(&format!("{base}{path}")).await.expect("page");
        client.wait().for_element(Locator::Css("main h1, main section, .flash")).await.expect("content");
        let overflows = client.execute(OVERFLOWS, vec![]).await.expect("layout");
        let overflows: Vec<String> = serde_json::from_value(overflows).expect("sentences");
        failures.extend(overflows.into_iter().map(|o| format!("{path}: {o}")));
        screenshot(&client, &format!("{name}-phone-full")).await;
    }
    client.close().await.expect("close the browser");
    assert!(failures.is_empty(), "at 390 px:\n{}", failures.join("\n"));
}
