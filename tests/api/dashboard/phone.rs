//! Every page at phone width (390 px) in headless Chromium: a screenshot of each under
//! `target/e2e-screenshots/` (`*-phone-full.png`), and the page's own layout checked — the body
//! never scrolls sideways, a list never needs its sideways scroller (lists become stacked cards),
//! and no table cell is too narrow for a word in it (its scrollWidth would exceed its
//! clientWidth). The plan graph is the one thing that may scroll: it is a drawing.

use fantoccini::Locator;
use serde_json::json;

use super::browser::{browser, login_link, screenshot};
use crate::helpers::{engineer, git, merged, repo_of, TestApp};

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
    let project = app.create_project("alpha").await;
    finished_work(app, &repo_of(&project)).await;
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

/// Work that is over or waiting: a wish whose long-named branch has changes (its diff), completed
/// and submitted to the merge queue, a worker that finished on it (history) and one that failed,
/// and a draft wish (its plan editor).
async fn finished_work(app: &TestApp, repo: &std::path::Path) {
    let branch = "wish/configuration-management-compatible-identifiers";
    git(repo, &["switch", "--quiet", "-c", branch]);
    let line =
        "pub const IDENTIFIERS: &str = \"configuration-management-compatible-identifiers-for-every-operator\";\n";
    std::fs::write(repo.join("identifiers.rs"), line).expect("write");
    git(repo, &["add", "-A"]);
    git(repo, &["commit", "--quiet", "-m", "identifiers"]);
    git(repo, &["switch", "--quiet", "main"]);
    let groups = json!([{"key": "identifiers", "title": "Configuration-management-compatible identifiers"}]);
    app.create_wish(json!({"slug": "identifiers", "project": "alpha", "branch": branch,
        "title": "Configuration-management-compatible identifiers everywhere", "groups": groups}))
        .await;
    app.start_wish("identifiers").await;
    app.post_ok("/api/v1/wishes/identifiers/groups/identifiers/start", json!({})).await;
    app.post_ok("/api/v1/wishes/identifiers/groups/identifiers/complete", json!({"result": "done"})).await;
    if app.get_ok("/api/v1/wishes/identifiers").await["status"] == "executing" {
        app.post_ok("/api/v1/wishes/identifiers/review", json!({"verdict": "pass"})).await;
    }
    app.post_ok("/api/v1/wishes/identifiers/submit", json!({})).await;
    for (name, state, reason) in [
        ("identifier-writer", "done", None),
        ("identifier-reviewer", "error", Some("the configuration-management-compatible-identifiers test failed")),
    ] {
        let worker = app
            .create_agent(merged(
                engineer("alpha", name),
                json!({"wish": "identifiers", "task": "Rename the configuration-management identifiers"}),
            ))
            .await;
        sqlx::query("UPDATE agents SET state = $2, failure_reason = $3, summary = $4 WHERE id = $1::uuid")
            .bind(worker["id"].as_str().expect("id"))
            .bind(state)
            .bind(reason)
            .bind("Renamed the configuration-management-compatible identifiers in every module")
            .execute(&app.pool)
            .await
            .expect("finished");
    }
    let plan = json!([{"key": "invoices", "title": "Invoices-and-credit-notes-for-every-customer"},
        {"key": "reminders", "title": "Payment reminders", "depends_on": ["invoices"]}]);
    app.create_wish(json!({"slug": "billing", "project": "alpha", "title": "Billing", "groups": plan})).await;
}

#[tokio::test]
async fn every_page_fits_a_phone_without_sideways_scrolling_or_words_cut_by_their_cells() {
    let Some((client, _driver)) = browser().await else { return };
    let app = TestApp::builder().webhooks(crate::webhooks::test_settings()).spawn().await;
    let (board, task, webhook) = a_busy_day(&app).await;
    let base = &app.address;
    client.set_window_size(390, 844).await.expect("phone size");
    client.goto(&login_link(&app).await).await.expect("login link");
    client.wait().for_element(Locator::Css("main h1, main section")).await.expect("logged in");
    let offered = client.execute("return !document.getElementById('notify-toggle').hidden;", vec![]).await.expect("js");
    assert_eq!(offered, json!(true), "a browser with the Notification API is offered notifications");

    let mut failures = Vec::new();
    // Each page, and what it must show (a list, the diff, …) before its layout is measured.
    let page = "main h1, main section, .flash";
    for (name, path, shows) in [
        ("overview", "/".to_owned(), page),
        ("wishes", "/wishes".to_owned(), page),
        ("wish", "/wishes/login".to_owned(), page),
        ("new-wish", "/new-wish".to_owned(), page),
        ("boards", "/boards".to_owned(), page),
        ("board", format!("/boards/{board}"), page),
        ("task", format!("/tasks/{task}"), page),
        ("agents", "/agents".to_owned(), page),
        ("agent", "/agents/configuration-management-reviewer".to_owned(), page),
        ("teams", "/teams".to_owned(), page),
        ("team", "/teams/login-team".to_owned(), page),
        ("mailbox", "/messages".to_owned(), page),
        ("webhooks", "/webhooks".to_owned(), page),
        ("webhook", format!("/webhooks/{webhook}"), page),
        ("events", "/events".to_owned(), page),
        ("merge-queue", "/merge-queue".to_owned(), "#queues table tbody tr"),
        ("history", "/history".to_owned(), "main table tbody tr"),
        ("plan-editor", "/wishes/billing/plan".to_owned(), "input[name='groups[1].key']"),
        ("wish-completed", "/wishes/identifiers".to_owned(), "#conductor pre.commands"),
        ("changes", "/wishes/identifiers/changes".to_owned(), "table.diff tr.d-add"),
        ("project-conductor", "/projects/alpha/conductor".to_owned(), "main form"),
        ("not-found", "/boards/not-a-uuid".to_owned(), page),
    ] {
        client.goto(&format!("{base}{path}")).await.expect("page");
        client.wait().for_element(Locator::Css(shows)).await.unwrap_or_else(|e| panic!("{path} shows {shows}: {e}"));
        let overflows = client.execute(OVERFLOWS, vec![]).await.expect("layout");
        let overflows: Vec<String> = serde_json::from_value(overflows).expect("sentences");
        failures.extend(overflows.into_iter().map(|o| format!("{path}: {o}")));
        screenshot(&client, &format!("{name}-phone-full")).await;
    }
    client.close().await.expect("close the browser");
    assert!(failures.is_empty(), "at 390 px:\n{}", failures.join("\n"));
}
