//! The new-webhook form on `/webhooks`: it makes what `POST /api/v1/webhooks` makes, refuses what
//! it refuses with each message beside its field (what was typed kept), and shows the secret once.

use serde_json::json;

use crate::dashboard::Dashboard;
use crate::helpers::TestApp;

/// The message shown beside the field whose control carries `marker`.
fn beside<'a>(html: &'a str, marker: &str) -> &'a str {
    let at = html.find(marker).unwrap_or_else(|| panic!("no `{marker}` in:\n{html}"));
    let rest = &html[at..];
    let end = ["</div>", "</fieldset>"].iter().filter_map(|close| rest.find(close)).min().unwrap_or(rest.len());
    &rest[..end]
}

#[tokio::test]
async fn a_webhook_is_made_from_the_form_as_the_api_makes_it_and_refused_beside_the_field() {
    let app = TestApp::builder().webhooks(crate::webhooks::test_settings()).spawn().await;
    app.create_project("alpha").await;
    let dashboard = Dashboard::login(&app).await;
    let (_, page) = dashboard.get("/webhooks").await;
    assert!(page.contains("action=\"/webhooks\"") && page.contains("value=\"on_agent_idle\""), "{page}");
    assert!(page.contains("<option value=\"alpha\">alpha</option>") && page.contains("<option value=\"ntfy\">"));

    // A private address and an unknown event: the API's words, beside each field, typed text kept.
    let bad = [
        ("url", "http://10.0.0.7/hook"),
        ("events", "on_pr_created"),
        ("other_events", "task.*, tsak.done"),
        ("project", "alpha"),
        ("format", "slack"),
        ("description", "<b>CI</b>"),
    ];
    let refused = dashboard.post_form("/webhooks", &bad).await;
    assert_eq!(refused.status(), 422);
    let html = refused.text().await.expect("page");
    let api = app.post("/api/v1/webhooks", json!({"url": "http://10.0.0.7/hook", "events": ["task.*"]})).await;
    let api = crate::helpers::assert_problem(api, 422).await;
    let words = api["errors"][0]["message"].as_str().expect("message").replace('\'', "&#39;");
    let url = beside(&html, "id=\"wh-url\"");
    assert!(url.contains("value=\"http://10.0.0.7/hook\"") && url.contains(&words), "{api}\n{url}");
    let events = app.post("/api/v1/webhooks", json!({"url": "http://127.0.0.1:9/", "events": ["tsak.done"]})).await;
    assert_eq!(crate::helpers::assert_problem(events, 422).await["errors"][0]["field"], "events[0]");
    let url_ok =
        [("url", "http://127.0.0.1:9/hook"), ("events", "on_pr_created"), ("other_events", "task.*, tsak.done")];
    let refused = dashboard.post_form("/webhooks", &url_ok).await;
    assert_eq!(refused.status(), 422);
    let html = refused.text().await.expect("page");
    let events = beside(&html, "id=\"wh-other\"");
    assert!(events.contains("field-error") && events.contains("tsak.done"), "{events}");
    assert!(html.contains("value=\"on_pr_created\" checked"), "the ticked box stays ticked");
    assert_eq!(app.get_ok("/api/v1/webhooks").await["items"], json!([]), "nothing was made");

    // A good one: the secret on this answer only, the subscription as the API shows it.
    let good = [
        ("url", "http://127.0.0.1:9/hook"),
        ("events", "on_pr_created"),
        ("events", "on_agent_idle"),
        ("other_events", "task.*"),
        ("project", "alpha"),
        ("format", "ntfy"),
        ("description", "<b>CI</b>"),
    ];
    let made = dashboard.post_form("/webhooks", &good).await;
    assert_eq!(made.status(), 200);
    assert_eq!(made.headers()["cache-control"], "no-store", "a secret is never kept by a cache");
    let html = made.text().await.expect("page");
    let secret = html.split("<code class=\"secret\">").nth(1).and_then(|r| r.split('<').next()).expect("the secret");
    assert!(secret.starts_with("whsec_") && html.contains("New webhook"), "{html}");
    let hooks = app.get_ok("/api/v1/webhooks").await;
    let hook = &hooks["items"][0];
    assert_eq!(hook["events"], json!(["on_pr_created", "on_agent_idle", "task.*"]));
    assert_eq!((hook["project"].as_str(), hook["format"].as_str()), (Some("alpha"), Some("ntfy")));
    assert_eq!(hook["description"], "<b>CI</b>");
    let (_, list) = dashboard.get("/webhooks").await;
    assert!(list.contains("&#60;b&#62;CI&#60;/b&#62;") && !list.contains("<b>CI"), "shown as text");
    assert!(!list.contains(secret), "the secret is shown once");
}
