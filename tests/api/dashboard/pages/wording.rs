//! Pages say things in people's words: a token or webhook by its name in the event log, a bad
//! id in an address as what it is not.

use serde_json::json;

use crate::dashboard::Dashboard;
use crate::helpers::spawn_app_with;

#[tokio::test]
async fn the_event_log_names_tokens_and_webhooks_instead_of_showing_their_ids() {
    let app = spawn_app_with(crate::webhooks::test_settings()).await;
    let token = app.post_ok("/api/v1/tokens", json!({"name": "ci-runner", "scope": "read"})).await;
    let described = json!({"url": "http://127.0.0.1:9/hook", "events": ["task.*"], "description": "Deploy alerts"});
    let described = app.post_ok("/api/v1/webhooks", described).await;
    let bare = app.post_ok("/api/v1/webhooks", json!({"url": "http://127.0.0.1:9/other", "events": ["task.*"]})).await;
    let rotate = format!("/api/v1/webhooks/{}/rotate-secret", described["id"].as_str().expect("id"));
    app.post_ok(&rotate, json!({})).await;

    let dashboard = Dashboard::login(&app).await;
    let (_, page) = dashboard.get("/events").await;
    for id in [&token["id"], &described["id"], &bare["id"]] {
        let short = format!("{}…", &id.as_str().expect("an id")[..8]);
        assert!(!page.contains(&short), "{short} is shown by name:\n{page}");
    }
    assert!(page.contains("ci-runner"), "the token by its name:\n{page}");
    assert!(page.matches("Deploy alerts").count() >= 2, "created and rotated, by its description:\n{page}");
    assert!(page.contains("127.0.0.1:9<"), "a webhook without a description by its host:\n{page}");
}
