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
