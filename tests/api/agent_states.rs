//! Agent states that can be trusted: a suspended agent names no dead pane, and an agent's events
//! belong to its project (so a project's webhooks hear about its agents).

use serde_json::json;

use crate::helpers::{engineer, eventually, spawn_app, spawn_app_with};

#[tokio::test]
async fn a_suspended_agent_keeps_no_dead_pane_or_pid() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "fox")).await;
    // As a worker would have recorded it when the pane opened.
    sqlx::query("UPDATE agents SET state = 'idle', tmux_pane = '%9', pid = 4242 WHERE name = 'fox'")
        .execute(&app.pool)
        .await
        .expect("a pane");
    let suspended = app.post_ok("/api/v1/agents/fox/suspend", json!({})).await;
    assert_eq!(suspended["state"], "suspended");
    assert_eq!((suspended["tmux_pane"].clone(), suspended["pid"].clone()), (json!(null), json!(null)), "{suspended}");
    assert_eq!(app.agent("fox").await["tmux_pane"], json!(null));
}

#[tokio::test]
async fn a_project_scoped_webhook_is_sent_its_agents_idle_and_stopped_events() {
    let app = spawn_app_with(crate::webhooks::test_settings()).await;
    app.create_project("alpha").await;
    let hook = json!({"url": "http://127.0.0.1:9/hook", "project": "alpha",
        "events": ["on_agent_started", "on_agent_idle", "on_agent_stopped"]});
    let hook = app.post_ok("/api/v1/webhooks", hook).await;
    app.create_agent(engineer("alpha", "fox")).await;
    sqlx::query("UPDATE agents SET state = 'working' WHERE name = 'fox'").execute(&app.pool).await.expect("working");
    // Idle as the worker's observation makes it; then stopped.
    app.post_ok("/api/v1/agents/fox/hooks", json!({"hook_event_name": "Stop"})).await;
    app.post_ok("/api/v1/agents/fox/suspend", json!({})).await;
    let id = hook["id"].as_str().expect("id").to_owned();
    eventually("the webhook's deliveries", std::time::Duration::from_secs(10), || {
        let (pool, id) = (app.pool.clone(), id.clone());
        async move {
            let types: Vec<String> = sqlx::query_scalar(
                "SELECT e.type FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
                 WHERE d.subscription_id = $1::uuid ORDER BY e.id",
            )
            .bind(&id)
            .fetch_all(&pool)
            .await
            .unwrap_or_default();
            types.iter().any(|t| t == "agent.spawned")
                && types.iter().any(|t| t == "agent.state_changed")
                && types.iter().any(|t| t == "agent.stopped")
        }
    })
    .await;
}
