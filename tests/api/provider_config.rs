//! `providers.toml` is read again when it changes, without a restart; a broken file keeps the
//! last good providers and says why; a built-in CLI without an API key or login is "installed,
//! not configured", never "available".

use std::time::Duration;

use serde_json::{json, Value};

use crate::dashboard::Dashboard;
use crate::helpers::{engineer, merged, TestApp};

/// Claude Code's setup on a program that is surely installed: what counts is its key or login.
const UNKEYED: &str = "[providers.claude]\ncommand = [\"bash\"]\n";

fn status<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list["providers"].as_array()?.iter().find(|p| p["name"] == name)
}

#[tokio::test]
async fn an_edited_providers_file_takes_effect_without_a_restart_and_a_broken_one_keeps_the_last_good_set() {
    let app = TestApp::builder().providers(UNKEYED).spawn().await;
    let file = app._data_dir.path().join("providers.toml");
    let list = app.get_ok("/api/v1/providers").await;
    let claude = status(&list, "claude").expect("claude listed");
    assert_eq!(claude["status"], "not_configured", "{list}");
    let missing = claude["detail"].as_str().unwrap_or_default();
    assert!(missing.contains("ANTHROPIC_API_KEY") && missing.contains("login"), "{list}");
    assert!(status(&list, "aider").is_none(), "{list}");
    assert!(list.get("config_error").is_none(), "{list}");
    let dashboard = Dashboard::login(&app).await;
    let (_, overview) = dashboard.get("/").await;
    let shown = overview.split(r#"data-provider="claude""#).nth(1).expect("claude listed");
    let shown = shown.split("</span></span>").next().unwrap_or_default();
    assert!(shown.contains("installed, not configured: ANTHROPIC_API_KEY"), "{shown}");
    assert!(!shown.contains(">available<"), "{shown}");

    let keyed =
        format!("{UNKEYED}env = {{ ANTHROPIC_API_KEY = \"sk-ant-test\" }}\n[providers.aider]\ncommand = [\"bash\"]\n");
    std::fs::write(&file, keyed).expect("edit providers.toml");
    let list = app
        .get_until("/api/v1/providers", "the edited file in use", Duration::from_secs(60), &[], |list| {
            status(list, "aider").is_some()
        })
        .await;
    assert_eq!(status(&list, "claude").expect("claude")["status"], "available", "{list}");
    assert_eq!(status(&list, "aider").expect("aider")["status"], "available", "{list}");
    // The new provider is one agents may run at once.
    app.create_project("alpha").await;
    let body = merged(engineer("alpha", "ada"), json!({"provider": "aider", "clone": "none"}));
    assert_eq!(app.create_agent(body).await["provider"], "aider");

    std::fs::write(&file, "[providers.aider\ncommand = [\"bash\"]\n").expect("break providers.toml");
    let list = app
        .get_until("/api/v1/providers", "the broken file reported", Duration::from_secs(60), &[], |list| {
            list.get("config_error").is_some()
        })
        .await;
    let error = list["config_error"].as_str().unwrap_or_default();
    assert!(error.contains("providers.toml"), "names the file: {list}");
    assert!(status(&list, "aider").is_some(), "the last good set stays: {list}");
    let (_, overview) = dashboard.get("/").await;
    assert!(overview.contains("providers-error") && overview.contains("providers.toml"), "{overview}");
}
