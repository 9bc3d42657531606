//! Pages say things in people's words: a token or webhook by its name in the event log, a bad
//! id in an address as what it is not.

use serde_json::json;

use crate::dashboard::Dashboard;
use crate::helpers::TestApp;

#[tokio::test]
async fn the_event_log_names_tokens_and_webhooks_instead_of_showing_their_ids() {
    let app = TestApp::builder().webhooks(crate::webhooks::test_settings()).spawn().await;
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

#[tokio::test]
async fn a_bad_id_in_an_address_is_said_to_be_no_id_of_its_kind_with_the_navigation_at_hand() {
    let app = crate::helpers::spawn_app().await;
    let dashboard = Dashboard::login(&app).await;
    for (path, says) in
        [("/boards/not-a-uuid", "`not-a-uuid` is not a board id"), ("/webhooks/12345", "`12345` is not a webhook id")]
    {
        let (status, html) = dashboard.get(path).await;
        assert_eq!(status, 404, "{path}: {html}");
        assert!(html.contains(says), "{path} says {says:?}:\n{html}");
        assert!(!html.contains("Invalid URL") && !html.contains("UUID parsing failed"), "{path}:\n{html}");
        assert!(html.contains("<nav aria-label=\"Main\">") && html.contains("href=\"/wishes\""), "{path}:\n{html}");
    }
    let problem = crate::helpers::assert_problem(app.get("/api/v1/webhooks/not-a-uuid").await, 404).await;
    assert_eq!(problem["detail"], "`not-a-uuid` is not a webhook id", "the API says it alike: {problem}");
}

#[tokio::test]
async fn a_provider_whose_program_is_not_installed_is_never_called_available() {
    let providers = "[providers.ghost]\ncommand = [\"switchyard-test-no-such-cli\", \"--flag\"]\n";
    let app = crate::helpers::TestApp::builder().providers(providers).spawn().await;
    let dashboard = Dashboard::login(&app).await;
    let (_, html) = dashboard.get("/").await;
    let ghost = html.split(r#"data-provider="ghost""#).nth(1).and_then(|s| s.split("</span></span>").next());
    let ghost = ghost.expect("ghost listed");
    assert!(
        ghost.contains("command not found: switchyard-test-no-such-cli") && !ghost.contains("available"),
        "{ghost}"
    );
    let shell = html.split(r#"data-provider="shell""#).nth(1).expect("shell listed");
    assert!(shell.contains("available"), "the shell is installed: {shell}");
}
