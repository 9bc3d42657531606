//! Browser notifications in real Chromium: with "Notify me" on, an agent that starts asking for
//! permission reaches the page over its live stream and the page shows a notification saying so,
//! linking to the agent.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::{json, Value};

use super::browser::{browser, login_link, until_text};
use crate::helpers::{engineer, eventually, spawn_app};

#[tokio::test]
async fn a_notification_appears_when_an_agent_starts_asking_for_permission() {
    let Some((client, _driver)) = browser().await else { return };
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "fox")).await;
    sqlx::query("UPDATE agents SET state = 'working' WHERE name = 'fox'").execute(&app.pool).await.expect("working");

    client.goto(&login_link(&app).await).await.expect("login link");
    until_text(&client, "h1", "Overview").await;
    let permission = client.execute("return Notification.permission;", vec![]).await.expect("script");
    assert_eq!(permission, json!("granted"), "the browser's setting grants it, as a person's answer would");
    client.find(Locator::Css("#notify-toggle")).await.expect("toggle").click().await.expect("click");
    until_text(&client, "#notify-toggle", "Notifications on").await;
    // Every notification the page makes is still made by the browser's own Notification; this
    // only keeps a note of each, since a headless browser has no screen to show them on.
    let spy = "window.shown = []; const Real = window.Notification;
        window.Notification = class extends Real {
            constructor(title, options) { super(title, options); window.shown.push({title, body: options.body}); }
        };";
    client.execute(spy, vec![]).await.expect("spy");

    app.post_ok("/api/v1/agents/fox/hooks", json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash"})).await;
    let shown = || async { client.execute("return window.shown;", vec![]).await.unwrap_or(Value::Null) };
    eventually("a notification is shown", Duration::from_secs(20), || async {
        shown().await.as_array().is_some_and(|s| !s.is_empty())
    })
    .await;
    let notices = shown().await;
    assert_eq!(notices[0]["title"], "fox asks for permission", "{notices}");
    assert_eq!(notices.as_array().map(Vec::len), Some(1), "one notice for one need: {notices}");
}
