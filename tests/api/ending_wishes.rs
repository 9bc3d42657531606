//! Ending a wish ends its agents: a cancelled wish's agents are stopped, a held wish's parked
//! (suspended) until it is released, and none of them is left on "Needs you" — also when the
//! wish was cancelled while no conductor ran (found at the next start).

use std::time::Duration;

use serde_json::{json, Value};

use crate::dashboard::Dashboard;
use crate::helpers::*;

/// Long enough for a planner to spawn and draw its dialog on a loaded machine.
const WAIT: Duration = Duration::from_secs(60);

/// A provider read with Claude Code's rules whose screen is a permission dialog, then nothing.
fn asker() -> String {
    let dialog = format!("{}/tests/fixtures/screens/claude/permission.txt", env!("CARGO_MANIFEST_DIR"));
    format!(
        "[providers.asker]\ncommand = [\"sh\", \"-c\", \"cat '{dialog}'; exec sleep 600\"]\nscreen_rules = \"claude\"\ninstall_hooks = false\n"
    )
}

/// The app with its conductor on, a project planned by `asker`, and draft `slug`, whose planner
/// asks permission: answers the planner.
async fn planner_asking(slug: &str) -> (TestApp, Value) {
    let app = TestApp::builder().providers(&asker()).worker(|w| w.conductor = true).spawn().await;
    app.create_project("alpha").await;
    app.patch_ok("/api/v1/projects/alpha", json!({"conductor_config": {"provider": "asker", "planning": "agent"}}))
        .await;
    app.create_wish(json!({"slug": slug, "project": "alpha", "title": "Asks before it plans",
                           "description": "A planner plans it."}))
        .await;
    let planner = asking_planner(&app).await;
    (app, planner)
}

/// The wish's planner once it asks permission.
async fn asking_planner(app: &TestApp) -> Value {
    let asking = |agents: &Value| planner(agents).is_some_and(|p| p["state"] == "permission");
    let agents = app.get_until("/api/v1/agents?limit=100", "the planner asks permission", WAIT, &[], asking).await;
    planner(&agents).cloned().expect("a planner")
}

fn planner(agents: &Value) -> Option<&Value> {
    agents["items"].as_array().into_iter().flatten().find(|a| a["role"] == "planner")
}

/// The overview's "Needs you" part.
async fn needs(dashboard: &Dashboard) -> String {
    let (status, html) = dashboard.get("/?block=needs").await;
    assert_eq!(status, 200, "{html}");
    html
}

async fn state_becomes(app: &TestApp, name: &str, state: &str) -> Value {
    let path = format!("/api/v1/agents/{name}");
    app.get_until(&path, &format!("{name} is {state}"), WAIT, &[], |a| a["state"] == state).await
}

/// Waits until agent `name` has no window on the app's tmux server.
async fn window_closes(app: &TestApp, name: &str) {
    eventually(&format!("{name}'s window closes"), WAIT, || async {
        let windows = std::process::Command::new("tmux")
            .args(["-L", &app.tmux_socket, "list-windows", "-a", "-F", "#{window_name}"])
            .output()
            .expect("tmux");
        !String::from_utf8_lossy(&windows.stdout).lines().any(|n| n == name)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_wish_stops_its_planner_asking_permission_and_it_leaves_needs_you() {
    let (app, planner) = planner_asking("asks").await;
    let name = planner["name"].as_str().expect("name").to_owned();
    let dashboard = Dashboard::login(&app).await;
    assert!(needs(&dashboard).await.contains(&name), "the planner asks the person first");
    let (_, page) = dashboard.get("/wishes/asks?block=plan").await;
    assert!(page.contains(&format!(">{name}</a> is planning this wish")), "{page}");
    let (_, overview) = dashboard.get("/?block=wishes").await;
    assert!(
        overview.contains("asks") && !overview.contains("No wish is"),
        "being planned, it is in flight: {overview}"
    );

    app.post_ok("/api/v1/wishes/asks/cancel", json!({})).await;

    state_becomes(&app, &name, "done").await;
    window_closes(&app, &name).await;
    assert!(!needs(&dashboard).await.contains(&name), "a cancelled wish's planner needs nobody");
    let events = app.get_ok(&format!("/api/v1/events?subject=agent:{name}&limit=100")).await;
    assert!(events.to_string().contains("its wish ended"), "its event says why it stopped: {events}");
}

#[tokio::test(flavor = "multi_thread")]
async fn holding_a_wish_parks_its_planner_and_releasing_it_resumes_the_planner() {
    let (app, planner) = planner_asking("held").await;
    let name = planner["name"].as_str().expect("name").to_owned();
    let dashboard = Dashboard::login(&app).await;

    app.post_ok("/api/v1/wishes/held/hold", json!({})).await;
    state_becomes(&app, &name, "suspended").await;
    window_closes(&app, &name).await;
    assert!(!needs(&dashboard).await.contains(&name), "a held wish's planner needs nobody");

    app.post_ok("/api/v1/wishes/held/release", json!({})).await;
    // Resumed, it draws its dialog again: the same agent, asking again.
    state_becomes(&app, &name, "permission").await;
    assert!(needs(&dashboard).await.contains(&name), "released, its planner asks again");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_planner_of_a_wish_cancelled_while_no_conductor_ran_is_stopped_at_the_next_start() {
    let (app, planner) = planner_asking("gone").await;
    let name = planner["name"].as_str().expect("name").to_owned();
    let stopped = stop(app).await;
    // Cancelled behind the conductor's back, as an older version left its wishes: the planner's
    // step was never concluded and its pane still asks.
    let pool = sqlx::PgPool::connect(&stopped.database_url).await.expect("connect");
    sqlx::query("UPDATE wishes SET status = 'cancelled' WHERE slug = 'gone'").execute(&pool).await.expect("cancel");
    pool.close().await;

    let app = restart_with(stopped, |w| w.conductor = true).await;
    state_becomes(&app, &name, "done").await;
    let dashboard = Dashboard::login(&app).await;
    assert!(!needs(&dashboard).await.contains(&name), "after the restart, nobody is asked");
}
