//! Token use and cost (`GET /api/v1/usage`, the agent's `usage`): summed per model from Claude
//! Code transcripts (a real recorded one), per agent, wish group, wish and project; providers that
//! report none say so.

use std::collections::{BTreeMap, HashSet};

use serde_json::{json, Value};

use crate::helpers::{assert_problem, engineer, merged, spawn_app, TestApp};

/// A transcript Claude Code 2.1.14 wrote (see `tests/fixtures/transcripts/README.md`).
pub const RECORDED: &str = include_str!("../fixtures/transcripts/claude-2.1.14.jsonl");

/// Tokens per model as `[input, output, cache write, cache read]`, summed here apart from the
/// server: each assistant message (by id) once.
pub fn expected(transcript: &str) -> BTreeMap<String, [i64; 4]> {
    let mut seen = HashSet::new();
    let mut sums = BTreeMap::<String, [i64; 4]>::new();
    for line in transcript.lines() {
        let line: Value = serde_json::from_str(line).expect("JSON");
        let message = &line["message"];
        if line["type"] != "assistant" || !seen.insert(message["id"].clone()) {
            continue;
        }
        let sum = sums.entry(message["model"].as_str().expect("model").to_owned()).or_default();
        let kinds = ["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"];
        for (sum, kind) in sum.iter_mut().zip(kinds) {
            *sum += message["usage"][kind].as_i64().expect("a count");
        }
    }
    sums
}

/// A usage report's tokens per model, as [`expected`] gives them.
pub fn tokens(usage: &Value) -> BTreeMap<String, [i64; 4]> {
    let count = |m: &Value, kind: &str| m[kind].as_i64().expect("a count");
    usage["models"]
        .as_array()
        .expect("models")
        .iter()
        .map(|m| {
            let kinds = ["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"];
            (m["model"].as_str().expect("model").to_owned(), kinds.map(|k| count(m, k)))
        })
        .collect()
}

/// `1234567` as the pages write it: `1,234,567`.
pub use switchyard::domain::cost::group_digits as digits;

/// Posts a turn's end for `agent` whose transcript (in `dir`) holds `text`.
pub async fn turn_ended(app: &TestApp, dir: &std::path::Path, agent: &str, text: &str) {
    let path = dir.join(format!("{agent}.jsonl"));
    std::fs::write(&path, text).expect("write the transcript");
    let hook = json!({"hook_event_name": "Stop", "session_id": "s", "transcript_path": path});
    app.post_ok(&format!("/api/v1/agents/{agent}/hooks"), hook).await;
}

/// Project `alpha` with wish `login` (groups `api`, `ui`): `fox` (Claude Code) on group `api`
/// read the recorded transcript, `crow` (Codex) works on the wish too, and `wolf` (Claude Code,
/// no wish) used a model without a price.
pub async fn fleet_with_usage(app: &TestApp) {
    app.create_project("alpha").await;
    let groups = json!([{"key": "api", "title": "API"}, {"key": "ui", "title": "UI", "depends_on": ["api"]}]);
    app.create_wish(json!({"slug": "login", "project": "alpha", "title": "Login", "groups": groups})).await;
    app.start_wish("login").await;
    app.post_ok("/api/v1/wishes/login/groups/api/start", json!({})).await;
    app.create_agent(merged(engineer("alpha", "fox"), json!({"wish": "login", "group": "api"}))).await;
    app.create_agent(merged(engineer("alpha", "crow"), json!({"provider": "codex", "wish": "login"}))).await;
    app.create_agent(engineer("alpha", "wolf")).await;
    let dir = tempfile::tempdir().expect("dir");
    turn_ended(app, dir.path(), "fox", RECORDED).await;
    let unpriced = r#"{"type":"assistant","message":{"id":"m1","model":"mystery-1","usage":{"input_tokens":7,"output_tokens":5}}}"#;
    turn_ended(app, dir.path(), "wolf", &format!("{unpriced}\n")).await;
}

/// The recorded transcript's cost at the built-in price of Claude Opus 4.5 ($5 input, $25
/// output, $6.25 cache write, $0.50 cache read per million tokens).
pub fn recorded_cost() -> f64 {
    let [input, output, write, read] = expected(RECORDED)["claude-opus-4-5-20251101"];
    (input as f64 * 5.0 + output as f64 * 25.0 + write as f64 * 6.25 + read as f64 * 0.5) / 1e6
}

#[tokio::test]
async fn usage_is_summed_per_group_wish_and_project_at_the_configured_prices() {
    let app = spawn_app().await;
    fleet_with_usage(&app).await;
    let recorded = expected(RECORDED);

    for scope in ["wish=login", "wish=login&group=api", "agent=fox"] {
        let usage = app.get_ok(&format!("/api/v1/usage?{scope}")).await;
        assert_eq!(tokens(&usage), recorded, "{scope}");
        let cost = usage["cost_usd"].as_f64().expect("a cost");
        assert!((cost - recorded_cost()).abs() < 1e-9, "{scope}: {cost}");
        assert_eq!(usage["unpriced"], json!([]), "{scope}");
    }
    let wish = app.get_ok("/api/v1/usage?wish=login").await;
    assert_eq!(wish["unreported"], json!([{"provider": "codex", "agents": 1}]), "Codex reports no usage");
    let ui = app.get_ok("/api/v1/usage?wish=login&group=ui").await;
    assert_eq!((ui["models"].clone(), ui["cost_usd"].clone()), (json!([]), json!(0.0)), "no agent on `ui`");

    // The project: both Claude Code agents; a model without a price shows its tokens, no cost.
    let project = app.get_ok("/api/v1/usage?project=alpha").await;
    let mut both = recorded.clone();
    both.insert("mystery-1".to_owned(), [7, 5, 0, 0]);
    assert_eq!(tokens(&project), both);
    assert_eq!(project["unpriced"], json!(["mystery-1"]));
    let models = project["models"].as_array().expect("models");
    let mystery = models.iter().find(|m| m["model"] == "mystery-1").expect("mystery-1");
    assert_eq!(mystery["cost_usd"], Value::Null, "never a made-up figure");
    assert!((project["cost_usd"].as_f64().expect("cost") - recorded_cost()).abs() < 1e-9);
    let all = app.get_ok("/api/v1/usage").await;
    assert_eq!(tokens(&all), both, "no filter: every agent");

    // The agent's own answer says so for a provider that reports nothing.
    let crow = app.agent("crow").await;
    assert_eq!(crow["usage"]["unreported"], json!([{"provider": "codex", "agents": 1}]));
    assert_eq!(crow["usage"]["models"], json!([]));

    let problem = assert_problem(app.get("/api/v1/usage?wish=nope").await, 422).await;
    assert!(problem.to_string().contains("no wish `nope`"), "{problem}");
    let problem = assert_problem(app.get("/api/v1/usage?group=api").await, 422).await;
    assert!(problem.to_string().contains("give `wish` too"), "{problem}");
}

#[tokio::test]
async fn a_provider_one_of_whose_agents_reported_usage_is_never_said_to_report_none() {
    // A provider of the config's own, without hooks installed, whose agents post them anyway.
    let app = crate::helpers::TestApp::builder()
        .providers("[providers.fakeclaude]\ncommand = [\"fakeclaude\"]\n")
        .spawn()
        .await;
    app.create_project("alpha").await;
    for name in ["fox", "owl"] {
        app.create_agent(merged(engineer("alpha", name), json!({"provider": "fakeclaude"}))).await;
    }
    app.create_agent(merged(engineer("alpha", "kit"), json!({"provider": "shell"}))).await;
    let before = app.get_ok("/api/v1/usage?project=alpha").await;
    let silent = json!([{"provider": "fakeclaude", "agents": 2}, {"provider": "shell", "agents": 1}]);
    assert_eq!(before["unreported"], silent, "none reported yet");

    let dir = tempfile::tempdir().expect("dir");
    turn_ended(&app, dir.path(), "fox", RECORDED).await;
    let after = app.get_ok("/api/v1/usage?project=alpha").await;
    assert_eq!(after["unreported"], json!([{"provider": "shell", "agents": 1}]), "{after}");
    let dashboard = crate::dashboard::Dashboard::login(&app).await;
    let (_, page) = dashboard.get("/").await;
    assert!(
        page.contains("no usage reported by shell") && !page.contains("no usage reported by fakeclaude"),
        "the overview says so too: {page}"
    );
}
