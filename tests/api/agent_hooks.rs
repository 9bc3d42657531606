//! `POST /api/v1/agents/{name}/hooks` and the `switchyard hook` command that Claude Code's hooks
//! run: the registry shows each state in order, and the agent's task follows.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use crate::binary::BIN;
use crate::helpers::{assert_problem, engineer, eventually, merged, spawn_app, TestApp};
use switchyard::domain::agent::AgentState;
use switchyard::domain::task::TaskStatus;

async fn hook(app: &TestApp, token: &str, name: &str, body: Value) -> reqwest::Response {
    app.client
        .post(app.url(&format!("/api/v1/agents/{name}/hooks")))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("request")
}

/// An agent working on an `in_progress` wish group; returns the agent and the group's task id.
async fn agent_on_a_started_group(app: &TestApp) -> (Value, String) {
    app.create_project("alpha").await;
    app.create_wish(
        json!({"slug": "login", "project": "alpha", "title": "Login", "groups": [{"key": "api", "title": "API"}]}),
    )
    .await;
    app.start_wish("login").await;
    app.post_ok("/api/v1/wishes/login/groups/api/start", json!({})).await;
    let agent = app.create_agent(merged(engineer("alpha", "fox"), json!({"wish": "login", "group": "api"}))).await;
    let task_id = agent["task_id"].as_str().unwrap().to_owned();
    assert_eq!(app.task_status(&task_id).await, TaskStatus::InProgress);
    (agent, task_id)
}

#[tokio::test]
async fn hooks_drive_the_agent_through_its_states_and_its_task_waits_while_it_asks() {
    let app = spawn_app().await;
    let (agent, task_id) = agent_on_a_started_group(&app).await;
    let token = app.agent_token(&agent).await;
    let steps = [
        (json!({"hook_event_name": "SessionStart", "source": "startup"}), "idle", "in_progress"),
        (json!({"hook_event_name": "UserPromptSubmit", "prompt": "Build the API"}), "working", "in_progress"),
        (json!({"hook_event_name": "PreToolUse", "tool_name": "Edit"}), "working", "in_progress"),
        (json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash"}), "permission", "waiting_input"),
        (json!({"hook_event_name": "PreToolUse", "tool_name": "Bash"}), "working", "in_progress"),
        (
            json!({"hook_event_name": "Notification", "notification_type": "elicitation_dialog", "message": "Which DB?"}),
            "question",
            "waiting_input",
        ),
        (json!({"hook_event_name": "UserPromptSubmit", "prompt": "Postgres"}), "working", "in_progress"),
        (json!({"hook_event_name": "Stop"}), "idle", "in_progress"),
        // Its session's end while it owes its group's report does not finish it (see below).
        (json!({"hook_event_name": "SessionEnd", "reason": "prompt_input_exit"}), "idle", "in_progress"),
    ];
    for (body, state, task) in steps {
        let event = body["hook_event_name"].clone();
        let response = hook(&app, &token, "fox", body).await;
        assert_eq!(response.status(), 200, "{event}");
        let outcome: Value = response.json().await.unwrap();
        assert_eq!(outcome["state"], state, "{event}");
        let agent = app.agent("fox").await;
        assert_eq!(agent["state"], state, "{event}");
        assert_eq!(agent["last_hook_state"], state, "{event}");
        assert!(agent["last_hook_at"].is_string());
        assert_eq!(app.task(&task_id).await["status"], task, "{event}");
    }
    // One state_changed per change (the second PreToolUse changed nothing), from the hook.
    assert_eq!(app.count_events("agent.state_changed", "agent:fox").await, 7);
    let sources: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT payload->>'source' FROM events WHERE type = 'agent.state_changed' AND subject = 'agent:fox'",
    )
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(sources, ["hook"]);
    let question: Option<String> =
        sqlx::query_scalar("SELECT payload->>'question' FROM events WHERE type = 'task.asked' ORDER BY id LIMIT 1")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(question.as_deref(), Some("permission to use Bash"));
    // Once its work is over, its session's end is the agent's.
    app.patch_ok("/api/v1/agents/fox", json!({"ready_for_cleanup": true})).await;
    let ended = json!({"hook_event_name": "SessionEnd", "reason": "prompt_input_exit"});
    let outcome: Value = hook(&app, &token, "fox", ended).await.json().await.unwrap();
    assert_eq!(outcome["state"], "done");
    // A late hook does not revive a finished agent: its token went with its work.
    assert_problem(hook(&app, &token, "fox", json!({"hook_event_name": "Stop"})).await, 401).await;
    assert_eq!(app.agent_state("fox").await, AgentState::Done);
}

#[tokio::test]
async fn a_session_end_while_the_agent_is_spawning_is_its_earlier_panes_and_finishes_nothing() {
    // A suspended Claude Code runs its SessionEnd hook as its window closes; when the agent was
    // resumed at once, that hook arrives while the new pane starts.
    let app = spawn_app().await;
    let (agent, _) = agent_on_a_started_group(&app).await;
    assert_eq!(agent["state"], "spawning");
    let token = app.agent_token(&agent).await;
    let ended = json!({"hook_event_name": "SessionEnd", "reason": "other"});
    let outcome: Value = hook(&app, &token, "fox", ended.clone()).await.json().await.unwrap();
    assert_eq!((&outcome["state"], &outcome["changed"]), (&json!("spawning"), &json!(false)));
    assert_eq!(app.agent_state("fox").await, AgentState::Spawning);
    // Once its session started and its work is over, its end is the agent's.
    hook(&app, &token, "fox", json!({"hook_event_name": "SessionStart", "source": "resume"})).await;
    app.patch_ok("/api/v1/agents/fox", json!({"ready_for_cleanup": true})).await;
    let outcome: Value = hook(&app, &token, "fox", ended).await.json().await.unwrap();
    assert_eq!(outcome["state"], "done");
}

#[tokio::test]
async fn a_session_end_of_an_agent_that_owes_its_report_leaves_it_to_the_pane_being_gone_or_not() {
    // Claude Code ends its session on a signal too: its pane killed, its tmux server gone
    // (`reason: other`), or a person's /exit (`prompt_input_exit`). The agent is not `done` while
    // its group is unreported: only a pane really gone suspends it, and it is resumed.
    let app = spawn_app().await;
    let (agent, task_id) = agent_on_a_started_group(&app).await;
    let token = app.agent_token(&agent).await;
    hook(&app, &token, "fox", json!({"hook_event_name": "SessionStart", "source": "startup"})).await;
    for reason in ["other", "prompt_input_exit", "logout"] {
        let ended = json!({"hook_event_name": "SessionEnd", "reason": reason, "session_id": "0b6c"});
        let response = hook(&app, &token, "fox", ended).await;
        assert_eq!(response.status(), 200, "{reason}");
        let outcome: Value = response.json().await.unwrap();
        assert_eq!((&outcome["state"], &outcome["changed"]), (&json!("idle"), &json!(false)), "{reason}");
    }
    let fox = app.agent("fox").await;
    assert_eq!(fox["state"], "idle");
    assert_eq!(app.task_status(&task_id).await, TaskStatus::InProgress);
    // Its token still acts: its report would be taken.
    let state = hook(&app, &token, "fox", json!({"hook_event_name": "UserPromptSubmit", "prompt": "go on"})).await;
    assert_eq!(state.status(), 200);
}

#[tokio::test]
async fn a_hook_body_must_be_an_object_naming_its_event() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let agent = app.create_agent(engineer("alpha", "owl")).await;
    let token = app.agent_token(&agent).await;
    // No body is anything but an object: an array is refused as the body itself.
    for (body, field) in [
        (json!([1, 2]), "body"),
        (json!({"event": "Stop"}), "hook_event_name"),
        (json!({"hook_event_name": 3}), "hook_event_name"),
    ] {
        let problem = assert_problem(hook(&app, &token, "owl", body).await, 422).await;
        assert_eq!(problem["errors"][0]["field"], field);
    }
    let huge = json!({"hook_event_name": "PreToolUse", "tool_input": {"content": "x".repeat(2 * 1024 * 1024)}});
    assert_problem(hook(&app, &token, "owl", huge).await, 413).await;
    // A hook that says nothing about the state is recorded and changes nothing.
    let response = hook(&app, &token, "owl", json!({"hook_event_name": "PreCompact"})).await;
    assert_eq!(response.status(), 200);
    let agent = app.agent("owl").await;
    assert_eq!(agent["state"], "spawning");
    assert!(agent["last_hook_at"].is_string());
}

/// Runs `switchyard hook` as Claude Code would, with `stdin` and the agent's environment.
fn run_hook(env: &[(&str, &str)], stdin: &str) -> std::process::Output {
    let mut command = Command::new(BIN);
    command.arg("hook").env_remove("SWITCHYARD_URL").env_remove("SWITCHYARD_AGENT").env_remove("SWITCHYARD_TOKEN");
    // Settings that would make the server refuse to start must not matter to a hook.
    command.env("DATABASE_URL", "mysql://nonsense").env("SWITCHYARD_LISTEN", "not-an-address");
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child =
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn hook");
    // A hook that gives up before reading (no environment) may close its stdin first.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().expect("hook output")
}

#[tokio::test]
async fn the_hook_command_posts_its_stdin_as_the_agent_and_always_exits_0_quietly() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let agent = app.create_agent(engineer("alpha", "cat")).await;
    let token = app.agent_token(&agent).await;
    let env = [("SWITCHYARD_URL", app.address.as_str()), ("SWITCHYARD_AGENT", "cat"), ("SWITCHYARD_TOKEN", &token)];
    let input = r#"{"session_id":"x","hook_event_name":"UserPromptSubmit","prompt":"go"}"#;
    let output = tokio::task::spawn_blocking({
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move || {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            run_hook(&env, input)
        }
    })
    .await
    .unwrap();
    assert!(output.status.success());
    assert!(output.stdout.is_empty(), "Claude Code reads a hook's stdout");
    assert!(output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
    eventually("the agent is working", Duration::from_secs(5), || async {
        app.agent_state("cat").await == AgentState::Working
    })
    .await;

    // Failures: no environment, a wrong token, a server that is not there, garbage on stdin.
    let address = app.address.clone();
    let failures = tokio::task::spawn_blocking(move || {
        [
            run_hook(&[], input),
            run_hook(
                &[("SWITCHYARD_URL", &address), ("SWITCHYARD_AGENT", "cat"), ("SWITCHYARD_TOKEN", "sy_wrong")],
                input,
            ),
            run_hook(
                &[("SWITCHYARD_URL", "http://127.0.0.1:9"), ("SWITCHYARD_AGENT", "cat"), ("SWITCHYARD_TOKEN", "t")],
                input,
            ),
            run_hook(
                &[("SWITCHYARD_URL", &address), ("SWITCHYARD_AGENT", "cat"), ("SWITCHYARD_TOKEN", "t")],
                "not json",
            ),
        ]
    })
    .await
    .unwrap();
    for output in failures {
        assert!(output.status.success());
        assert!(output.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.starts_with("switchyard hook: "), "{stderr}");
        assert!(!stderr.contains(&token), "the token is never printed");
    }
}

#[tokio::test]
async fn an_agents_tokens_are_summed_per_model_from_its_transcript_a_turn_at_a_time() {
    // A price of $1 per million tokens of every kind, set in providers.toml, so the cost is the
    // tokens over a million.
    let prices = "[prices.\"claude-opus-4-5\"]\ninput = 1.0\noutput = 1.0\ncache_write = 1.0\ncache_read = 1.0\n";
    let app = crate::helpers::TestApp::builder().providers(prices).spawn().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "fox")).await;
    let dir = tempfile::tempdir().expect("dir");
    let transcript = dir.path().join("session.jsonl");
    let recorded = crate::usage::RECORDED;
    let lines: Vec<&str> = recorded.lines().collect();
    // The first turns so far, cut between two of one message's three lines (it counts once).
    let head = lines[..11].join("\n") + "\n";
    std::fs::write(&transcript, &head).expect("write");
    let path = transcript.to_str().expect("utf-8");
    let hook = |name: &str| json!({"hook_event_name": name, "session_id": "s", "transcript_path": path});
    assert_eq!(app.agent("fox").await["usage"]["models"], json!([]), "nothing read yet");
    app.post_ok("/api/v1/agents/fox/hooks", hook("Stop")).await;
    let usage = app.agent("fox").await["usage"].clone();
    assert_eq!(crate::usage::tokens(&usage), crate::usage::expected(&head), "{usage}");

    // The rest arrives, a line half-written at first: a hook mid-turn reads nothing, the turn's
    // end reads the whole lines, the next the rest.
    let rest = lines[11..].join("\n") + "\n";
    let (written, tail) = rest.split_at(rest.len() - 20);
    std::fs::write(&transcript, head.clone() + written).expect("append");
    app.post_ok("/api/v1/agents/fox/hooks", hook("PreToolUse")).await;
    assert_eq!(app.agent("fox").await["usage"], usage, "only a turn's end reads");
    app.post_ok("/api/v1/agents/fox/hooks", hook("Stop")).await;
    std::fs::write(&transcript, recorded).expect("finished");
    assert_eq!(tail.len(), 20);
    app.post_ok("/api/v1/agents/fox/hooks", hook("Stop")).await;
    let usage = app.agent("fox").await["usage"].clone();
    let expected = crate::usage::expected(recorded);
    assert_eq!(crate::usage::tokens(&usage), expected, "each message once, however the file was cut");
    let total: i64 = expected.values().flat_map(|kinds| kinds.iter()).sum();
    let cost = usage["cost_usd"].as_f64().expect("a cost");
    assert!((cost - total as f64 / 1e6).abs() < 1e-9, "{cost} for {total} tokens at $1 per million");
    assert_eq!(usage["unpriced"], json!([]));
    app.post_ok("/api/v1/agents/fox/hooks", hook("Stop")).await;
    assert_eq!(app.agent("fox").await["usage"], usage, "read once");

    // Not a transcript: nothing is read (an agent names the path; the server reads only .jsonl files).
    let elsewhere = json!({"hook_event_name": "Stop", "transcript_path": "/etc/passwd"});
    app.post_ok("/api/v1/agents/fox/hooks", elsewhere).await;
    assert_eq!(app.agent("fox").await["usage"], usage);
    let dashboard = crate::dashboard::Dashboard::login(&app).await;
    let (_, page) = dashboard.get("/agents/fox").await;
    let summary = format!("<strong>Cost:</strong> ${cost:.2} ({} tokens)", crate::usage::digits(total));
    assert!(page.contains(&summary), "{summary} in {page}");
    assert!(page.contains("<li>claude-opus-4-5-20251101: "), "{page}");
}
