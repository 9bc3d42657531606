//! The mailbox with real tmux, real PostgreSQL and a fake agent that logs every prompt submitted
//! in its pane (`tests/fake_agent/fake-inbox.pl`): messages wait for an idle agent, arrive
//! exactly once, in order, byte for byte, and survive a pane that dies mid-delivery.

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::Method;
use uuid::Uuid;

use crate::fake_inbox::{prompts, providers_toml, submitted};
use crate::helpers::{eventually, TestApp};
use switchyard::domain::agent::AgentState;

/// The app with the fake agent and quick message settle and confirmation times.
async fn app_with_fake_agents(log_dir: &std::path::Path, settle_ms: u64) -> TestApp {
    TestApp::builder()
        .providers(&providers_toml(log_dir, &[]))
        .worker(|worker| {
            worker.message_settle = Duration::from_millis(settle_ms);
            worker.message_confirm = Duration::from_secs(3);
        })
        .spawn()
        .await
}

/// When delivery recorded the paste and the Enter of a message.
async fn steps(app: &TestApp, id: Uuid) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
    sqlx::query_as("SELECT pasted_at, submitted_at FROM messages WHERE id = $1")
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .expect("message row")
}

/// When the agent's state first became `to` after `since`.
async fn became_after(app: &TestApp, name: &str, to: &str, since: DateTime<Utc>) -> DateTime<Utc> {
    sqlx::query_scalar(
        "SELECT min(created_at) FROM events
         WHERE type = 'agent.state_changed' AND subject = $1 AND payload->>'to' = $2 AND created_at > $3",
    )
    .bind(format!("agent:{name}"))
    .bind(to)
    .bind(since)
    .fetch_one(&app.pool)
    .await
    .expect("events")
}

#[tokio::test]
async fn a_message_to_a_working_agent_waits_and_is_delivered_once_as_soon_as_it_is_idle() {
    let logs = tempfile::tempdir().expect("logs");
    let app = app_with_fake_agents(logs.path(), 50).await;
    app.create_project("alpha").await;
    app.idle_inbox_agent("alpha", "fox").await;

    // The first message starts a long turn.
    let first = app.send_message("fox", "work 1500ms").await;
    let first = app.delivered(first, Duration::from_secs(10)).await;
    let working_from: DateTime<Utc> = first["delivered_at"].as_str().expect("delivered_at").parse().expect("time");
    eventually("fox is working", Duration::from_secs(5), || async {
        app.agent_state("fox").await == AgentState::Working
    })
    .await;
    let second = app.send_message("fox", "hello after work").await;
    // While it works, the second message is only stored.
    let waiting = app.message(second).await;
    assert_eq!(waiting["state"], "pending", "{waiting}");
    assert_eq!(app.agent_state("fox").await, AgentState::Working);

    let delivered = app.delivered(second, Duration::from_secs(15)).await;
    assert_eq!(delivered["attempts"], 1, "typed once: {delivered}");
    assert_eq!(delivered["confirmed_by"], "hook", "the UserPromptSubmit hook carried its text: {delivered}");
    // The end of the long turn.
    let idle_at = became_after(&app, "fox", "idle", working_from).await;
    let (pasted, _) = steps(&app, second).await;
    let pasted = pasted.expect("pasted");
    assert!(pasted >= idle_at - chrono::Duration::milliseconds(5), "pasted only once idle: {pasted} vs {idle_at}");
    let delivered_at: DateTime<Utc> = delivered["delivered_at"].as_str().expect("delivered_at").parse().expect("time");
    let took = (delivered_at - idle_at).to_std().expect("after idle");
    assert!(took < Duration::from_secs(2), "delivered within one detection cycle of going idle ({took:?})");
    assert_eq!(prompts(logs.path(), "fox"), ["work 1500ms", "hello after work"]);
    let typed = submitted(logs.path(), "fox");
    assert_eq!(typed[1], "[message from the operator]\nhello after work", "the sender's line first");
    let sent: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE type = 'message.delivered'")
        .fetch_one(&app.pool)
        .await
        .expect("events");
    assert_eq!(sent, 2, "one on_message_sent event each");
}

#[tokio::test]
async fn a_hundred_rapid_messages_and_ten_agents_at_once_each_get_theirs_once_in_order() {
    let logs = tempfile::tempdir().expect("logs");
    let app = app_with_fake_agents(logs.path(), 15).await;
    app.create_project("alpha").await;
    let names: Vec<String> = (0..10).map(|i| format!("a{i}")).collect();
    for name in &names {
        app.idle_inbox_agent("alpha", name).await;
    }
    let wanted = |i: usize| if i == 0 { 100 } else { 10 };
    let bodies = |i: usize| -> Vec<String> { (0..wanted(i)).map(|n| format!("to {} #{n}; next", names[i])).collect() };
    // All agents' messages go out at once; each agent's in its own order.
    let sends = (0..names.len()).map(|i| {
        let app = &app;
        let (name, bodies) = (names[i].clone(), bodies(i));
        async move {
            for body in &bodies {
                app.send_message(&name, body).await;
            }
        }
    });
    futures_util::future::join_all(sends).await;

    eventually("every message is delivered", Duration::from_secs(180), || async {
        let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM messages WHERE delivered_at IS NULL")
            .fetch_one(&app.pool)
            .await
            .expect("count");
        pending == 0
    })
    .await;
    for (i, name) in names.iter().enumerate() {
        assert_eq!(prompts(logs.path(), name), bodies(i), "{name} got exactly its messages, once each, in order");
    }
    let retyped: i64 = sqlx::query_scalar("SELECT count(*) FROM messages WHERE attempts <> 1")
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(retyped, 0, "each message was typed once");
    assert_eq!(app.status().await["pending_messages"], 0);
}

#[tokio::test]
async fn bodies_arrive_byte_exact_whatever_they_hold() {
    let logs = tempfile::tempdir().expect("logs");
    let app = app_with_fake_agents(logs.path(), 30).await;
    app.create_project("alpha").await;
    app.idle_inbox_agent("alpha", "fox").await;
    let big: String = (0..2300).map(|i| format!("line {i:05} of a hundred kilobytes; with text\n")).collect();
    assert!(big.len() >= 100_000, "{}", big.len());
    let corpus: Vec<String> = [
        "semi;colon",
        "trailing semicolon;",
        "C-c",
        "send-keys -t %1 Enter \\; kill-server",
        // Control characters other than tab and newline are refused when sent (messages.rs).
        "^[[201~ and \\x1b look like escapes but are text",
        "first line\nsecond line\n\nfourth line\n",
        "emoji 🦀🚂✅ and ünïcödé",
        "'single' \"double\" `back` $HOME \\ \ttab",
        big.as_str(),
    ]
    .map(str::to_owned)
    .to_vec();
    let mut ids = Vec::new();
    for body in &corpus {
        ids.push(app.send_message("fox", body).await);
    }
    for id in ids {
        app.delivered(id, Duration::from_secs(30)).await;
    }
    let got = prompts(logs.path(), "fox");
    assert_eq!(got.len(), corpus.len(), "each arrived once");
    for (got, sent) in got.iter().zip(&corpus) {
        assert_eq!(got.as_bytes(), sent.as_bytes(), "byte-exact: {:?}", &sent[..sent.len().min(40)]);
    }
}

#[tokio::test]
async fn a_pane_that_dies_mid_delivery_loses_nothing_and_types_nothing_twice() {
    let logs = tempfile::tempdir().expect("logs");
    // A long settle: the pane dies between the paste and the Enter. An agent without hooks,
    // whose Enter waits for the settle; one with hooks gets it as soon as its line shows the
    // paste (a few milliseconds here).
    let app = TestApp::builder()
        .providers(&providers_toml(logs.path(), &[("FAKE_HOOKS", "0")]))
        .worker(|worker| {
            worker.message_settle = Duration::from_millis(2500);
            worker.message_confirm = Duration::from_secs(3);
        })
        .spawn()
        .await;
    app.create_project("alpha").await;
    let fox = app.idle_inbox_agent("alpha", "fox").await;
    let id = app.send_message("fox", "survive the pane").await;
    eventually("the message is pasted, Enter not yet pressed", Duration::from_secs(10), || async {
        matches!(steps(&app, id).await, (Some(_), None))
    })
    .await;
    let window = fox["tmux_window"].as_str().expect("window");
    let killed = std::process::Command::new("tmux")
        .args(["-L", &app.tmux_socket, "kill-window", "-t", window])
        .status()
        .expect("tmux");
    assert!(killed.success());
    eventually("fox is suspended", Duration::from_secs(10), || async {
        app.agent_state("fox").await == AgentState::Suspended
    })
    .await;
    let waiting = app.message(id).await;
    assert_eq!(waiting["state"], "pending", "kept while the agent is down: {waiting}");
    assert_eq!(app.status().await["pending_messages"], 1, "the worker reports what it still has to deliver");
    // Nothing was submitted in the dead pane.
    assert!(prompts(logs.path(), "fox").is_empty());

    let resumed = app.send(Method::POST, "/api/v1/agents/fox/resume", None).await;
    assert_eq!(resumed.status(), 200, "{:?}", resumed.text().await);
    let delivered = app.delivered(id, Duration::from_secs(30)).await;
    assert_eq!(delivered["attempts"], 2, "typed once in each pane: {delivered}");
    assert_eq!(prompts(logs.path(), "fox"), ["survive the pane"]);
}

#[tokio::test]
async fn an_agent_without_hooks_busy_under_load_gets_enter_only_once_it_shows_the_paste() {
    // A TUI that takes 800 ms to take in a paste and loses keys meanwhile, and sends no hooks:
    // only its screen can say whether Enter took the text. An Enter pressed after the settle
    // (50 ms) would be lost while the line, not yet redrawn, looks as it did before the paste.
    let logs = tempfile::tempdir().expect("logs");
    let providers = providers_toml(logs.path(), &[("FAKE_HOOKS", "0"), ("FAKE_DRAW_MS", "800")]);
    // A long confirm time: it bounds the wait for the paste to show, which a loaded machine
    // stretches; a delivery that goes well ends as soon as the line empties.
    let app = TestApp::builder()
        .providers(&providers)
        .worker(|worker| {
            worker.message_settle = Duration::from_millis(50);
            worker.message_confirm = Duration::from_secs(10);
        })
        .spawn()
        .await;
    app.create_project("alpha").await;
    app.idle_inbox_agent("alpha", "fox").await;
    let id = app.send_message("fox", "taken in slowly").await;
    let delivered = app.delivered(id, Duration::from_secs(30)).await;
    // No hook: the emptied line confirmed it, or the turn it started did (a loaded machine may
    // see the turn first).
    assert!(["screen", "state"].contains(&delivered["confirmed_by"].as_str().unwrap_or_default()), "{delivered}");
    assert_eq!(prompts(logs.path(), "fox"), ["taken in slowly"], "submitted, not only recorded: {delivered}");
    assert_eq!(delivered["attempts"], 1, "{delivered}");
}
