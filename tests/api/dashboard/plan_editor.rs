//! Editing a draft wish's plan from its page: the stored groups come back as a form, a plan the
//! API would refuse is refused with each message beside its field, a good one replaces the
//! plan (the wish stays a draft), and a wish that moved on offers no form.

use serde_json::json;

use super::{redirected, Dashboard};
use crate::helpers::spawn_app;

#[tokio::test]
async fn a_drafts_plan_is_edited_on_its_page_and_refused_beside_the_field_as_the_api_refuses_it() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_wish(json!({"slug": "login", "project": "alpha", "title": "Login", "groups": [
        {"key": "api", "title": "API", "goal": "the endpoints"},
        {"key": "ui", "title": "UI", "depends_on": ["api"]}]}))
        .await;
    let dashboard = Dashboard::login(&app).await;
    let (_, wish_page) = dashboard.get("/wishes/login").await;
    assert!(wish_page.contains("href=\"/wishes/login/plan\""), "a draft offers its plan editor");
    let (status, form) = dashboard.get("/wishes/login/plan").await;
    assert_eq!(status, 200);
    assert!(form.contains(".depends_on\" value=\"api\""), "the stored plan, row by row: {form}");
    assert!(form.contains("value=\"the endpoints\"") && form.contains("name=\"groups[2].key\" value=\"\""), "{form}");

    // An unknown dependency: the message beside that row's field, what was typed kept.
    let unknown = [
        ("groups[0].key", "api"),
        ("groups[0].title", "API"),
        ("groups[1].key", "ui"),
        ("groups[1].title", "UI"),
        ("groups[1].depends_on", "api, nope"),
    ];
    let refused = dashboard.post_form("/wishes/login/plan", &unknown).await;
    assert_eq!(refused.status(), 422);
    let html = refused.text().await.expect("body");
    assert!(html.contains("The plan was not saved"), "{html}");
    let row = html.find("name=\"groups[1].depends_on\" value=\"api, nope\"").expect("kept as typed");
    let cell = html[row..].split("</div>").next().unwrap_or_default();
    assert!(cell.contains("field-error") && cell.contains("nope"), "{html}");

    // A cycle is refused in the API's words, above the rows.
    let cycle = [
        ("groups[0].key", "api"),
        ("groups[0].title", "API"),
        ("groups[0].depends_on", "ui"),
        ("groups[1].key", "ui"),
        ("groups[1].title", "UI"),
        ("groups[1].depends_on", "api"),
    ];
    let refused = dashboard.post_form("/wishes/login/plan", &cycle).await;
    assert_eq!(refused.status(), 422);
    let html = refused.text().await.expect("body");
    let api = app.post(
        "/api/v1/wishes/login/plan",
        json!({"groups": [
        {"key": "api", "title": "API", "depends_on": ["ui"]}, {"key": "ui", "title": "UI", "depends_on": ["api"]}]}),
    );
    let api = crate::helpers::assert_problem(api.await, 422).await;
    let words = api["errors"][0]["message"].as_str().expect("message").replace('\'', "&#39;");
    assert!(html.contains(&format!("<p class=\"field-error\">{words}</p>")), "the API's words: {api}\n{html}");

    // "Add a group" keeps the rows and adds one; a good plan replaces the stored one.
    let more = dashboard.post_form("/wishes/login/plan", &[("groups[0].key", "db"), ("add_group", "1")]).await;
    assert!(more.text().await.expect("body").contains("name=\"groups[1].key\""));
    let good = [
        ("groups[0].key", "db"),
        ("groups[0].title", "Schema"),
        ("groups[1].key", ""),
        ("groups[2].key", "api"),
        ("groups[2].title", "API"),
        ("groups[2].goal", "on the new schema"),
        ("groups[2].depends_on", "db"),
    ];
    let saved = dashboard.post_form("/wishes/login/plan", &good).await;
    assert_eq!(redirected(saved).await, "/wishes/login");
    let wish = app.get_ok("/api/v1/wishes/login").await;
    assert_eq!(wish["status"], "draft", "editing is not planning");
    let mut groups: Vec<_> = wish["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| (g["key"].to_string(), g["depends_on"].clone(), g["goal"].clone()))
        .collect();
    groups.sort_by(|a, b| a.0.cmp(&b.0));
    let api = ("\"api\"".to_owned(), json!(["db"]), json!("on the new schema"));
    assert_eq!(groups, [api, ("\"db\"".to_owned(), json!([]), json!(""))]);
    assert_eq!(app.count_events("wish.plan_changed", "wish:login").await, 1);

    // Planned, it is no longer editable: the page says so, and a stale form is refused.
    app.post_ok("/api/v1/wishes/login/plan", json!({})).await;
    let (_, moved_on) = dashboard.get("/wishes/login/plan").await;
    assert!(moved_on.contains("Only a draft's plan can be edited") && !moved_on.contains("Save the plan"));
    let stale = dashboard.post_form("/wishes/login/plan", &good).await;
    assert_eq!(stale.status(), 409);
    let (status, _) = dashboard.get("/wishes/ghost/plan").await;
    assert_eq!(status, 404);
}
