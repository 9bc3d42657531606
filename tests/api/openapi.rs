use crate::helpers::spawn_app;

const COMMITTED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");

/// The committed spec is what the code generates. `UPDATE_OPENAPI=1` rewrites it.
#[test]
fn the_committed_openapi_document_matches_the_code() {
    let generated = serde_json::to_string_pretty(&switchyard::api::openapi()).expect("serialize") + "\n";
    if std::env::var_os("UPDATE_OPENAPI").is_some() {
        std::fs::write(COMMITTED, &generated).expect("write openapi/openapi.json");
    }
    let committed = std::fs::read_to_string(COMMITTED).unwrap_or_default();
    assert!(
        committed == generated,
        "openapi/openapi.json is stale; regenerate it with:\n    UPDATE_OPENAPI=1 cargo test --test api openapi"
    );
}

#[tokio::test]
async fn the_spec_and_swagger_ui_are_served() {
    let app = spawn_app().await;
    let spec: serde_json::Value =
        app.client.get(app.url("/api/v1/openapi.json")).send().await.expect("request").json().await.expect("json");
    assert!(spec["paths"]["/api/v1/tokens"]["post"].is_object(), "{spec}");
    assert!(spec["components"]["securitySchemes"]["bearer"].is_object());
    let ui = app.client.get(app.url("/api/docs/")).send().await.expect("request");
    assert_eq!(ui.status(), 200);
    let html = ui.text().await.expect("text");
    assert!(html.contains("swagger"), "{html}");
    assert!(!html.contains("https://"), "Swagger UI must load nothing from the network");
}
