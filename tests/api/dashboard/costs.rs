//! What agents' tokens cost, on the wish page (the wish and each group) and the overview (in all
//! and per project), with unpriced models and providers that report nothing said plainly.

use crate::dashboard::Dashboard;
use crate::helpers::spawn_app;
use crate::usage::{digits, expected, fleet_with_usage, recorded_cost, RECORDED};

#[tokio::test]
async fn the_wish_page_and_the_overview_show_what_tokens_cost() {
    let app = spawn_app().await;
    fleet_with_usage(&app).await;
    let recorded: i64 = expected(RECORDED).values().flat_map(|kinds| kinds.iter()).sum();
    let fox = format!("${:.2} ({} tokens)", recorded_cost(), digits(recorded));
    let dashboard = Dashboard::login(&app).await;

    let (status, page) = dashboard.get("/wishes/login").await;
    assert_eq!(status, 200);
    let costs = &page[page.find("id=\"costs\"").expect("a costs section")..];
    assert!(costs.contains(&format!("<strong>Cost:</strong> {fox}; no usage reported by codex</p>")), "{costs}");
    assert!(costs.contains("<li>claude-opus-4-5-20251101: "), "{costs}");
    let api = &page[page.find("id=\"group-api\"").expect("group api")..];
    let api = &api[..api.find("</tr>").expect("row end")];
    assert!(api.contains(&fox), "the group's cost: {api}");
    let ui = &page[page.find("id=\"group-ui\"").expect("group ui")..];
    assert!(ui[..ui.find("</tr>").expect("row end")].contains("none reported"));

    let (status, page) = dashboard.get("/").await;
    assert_eq!(status, 200);
    let costs = &page[page.find("id=\"costs\"").expect("a costs section")..];
    let all = format!("({} tokens); no price for mystery-1; no usage reported by codex</p>", digits(recorded + 12));
    assert!(costs.contains(&all), "{all} in {costs}");
    assert!(costs.contains("<strong>alpha</strong> $"), "per project: {costs}");
}

/// Counting a transcript records `agent.usage_counted`: the overview, which keeps its costs while
/// agents only change state, shows the new tokens on its next load, and the log says what was
/// added.
#[tokio::test]
async fn tokens_counted_after_the_overview_was_loaded_show_on_its_next_load() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(crate::helpers::engineer("alpha", "fox")).await;
    let dashboard = Dashboard::login(&app).await;
    let costs = || async {
        let (status, page) = dashboard.get("/").await;
        assert_eq!(status, 200);
        let costs = &page[page.find("id=\"costs\"").expect("a costs section")..];
        costs[..costs.find("</section>").expect("its end")].to_owned()
    };
    let recorded: i64 = expected(RECORDED).values().flat_map(|kinds| kinds.iter()).sum();
    let tokens = format!("({} tokens)", digits(recorded));
    let before = costs().await;
    assert!(before.contains("no usage reported by claude") && !before.contains(&tokens), "{before}");
    // A state change alone (the agent starts working): the costs stay as they were.
    app.post_ok(
        "/api/v1/agents/fox/hooks",
        serde_json::json!({"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "go"}),
    )
    .await;
    assert_eq!(costs().await, before);

    let dir = tempfile::tempdir().expect("dir");
    crate::usage::turn_ended(&app, dir.path(), "fox", RECORDED).await;
    let after = costs().await;
    assert!(after.contains(&format!("${:.2} {tokens}", recorded_cost())), "{after}");
    let counted =
        app.events_until("types=agent.usage_counted", "the counting is in the log", |items| !items.is_empty()).await;
    assert_eq!(counted.len(), 1, "{counted:?}");
    assert_eq!(counted[0]["subject"], "agent:fox");
    let added = &counted[0]["payload"]["added"]["claude-opus-4-5-20251101"];
    assert_eq!(added["output_tokens"], expected(RECORDED)["claude-opus-4-5-20251101"][1], "{added}");
}
