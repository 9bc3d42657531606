//! The mailbox API without a worker: a message is stored pending before anything else, shows in
//! the recipient's inbox and the outbox file, can be marked read; agents speak only as
//! themselves; bad messages are refused naming the field. And the `msg`/`chat` commands an agent
//! runs in its pane.

use std::process::Command;

use reqwest::Method;
use serde_json::{json, Value};

use crate::binary::BIN;
use crate::helpers::{assert_problem, engineer, merged, spawn_app, TestApp};

async fn send_as(app: &TestApp, token: &str, body: Value) -> reqwest::Response {
    app.client.post(app.url("/api/v1/messages")).bearer_auth(token).json(&body).send().await.expect("send")
}

#[tokio::test]
async fn a_message_is_stored_pending_first_shows_in_the_inbox_and_the_outbox_and_can_be_marked_read() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "fox")).await;
    let sent = send_as(&app, &app.admin_token, json!({"to": "fox", "body": "rebase; then test"})).await;
    assert_eq!(sent.status(), 201);
    let sent: Value = sent.json().await.expect("json");
    assert_eq!((&sent["from"], &sent["state"], &sent["read"]), (&json!("operator"), &json!("pending"), &json!(false)));
    assert!(sent["delivered_at"].is_null(), "no worker runs: stored, not delivered");

    let inbox = app.get_ok("/api/v1/agents/fox/messages").await;
    assert_eq!(inbox["items"][0]["id"], sent["id"]);
    let outbox = std::fs::read_to_string(app._data_dir.path().join("outbox.jsonl")).expect("outbox file");
    let line: Value = serde_json::from_str(outbox.lines().last().expect("a line")).expect("json line");
    assert_eq!((&line["id"], &line["to"], &line["body"]), (&sent["id"], &json!("fox"), &json!("rebase; then test")));

    let id = sent["id"].as_str().expect("id");
    let read = app.admin(Method::POST, &format!("/api/v1/messages/{id}/read")).send().await.expect("read");
    assert_eq!(read.status(), 200);
    let again = app.admin(Method::POST, &format!("/api/v1/messages/{id}/read")).send().await.expect("read");
    let again: Value = again.json().await.expect("json");
    assert_eq!(again["read"], true);
    let unread = app.get_ok("/api/v1/agents/fox/messages?unread=true").await;
    assert_eq!(unread["items"], json!([]));
    let counts: Vec<(String, i64)> =
        sqlx::query_as("SELECT type, count(*) FROM events WHERE type LIKE 'message.%' GROUP BY type ORDER BY type")
            .fetch_all(&app.pool)
            .await
            .expect("events");
    assert_eq!(counts, [("message.created".to_owned(), 1), ("message.read".to_owned(), 1)], "read once");
}

#[tokio::test]
async fn agents_send_and_read_only_as_themselves_and_mail_to_the_operator_is_delivered_by_being_stored() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    // Agents of one wish: they may message each other.
    app.create_wish(json!({"slug": "login", "project": "alpha", "title": "Login"})).await;
    let fox = app.create_agent(merged(engineer("alpha", "fox"), json!({"wish": "login"}))).await;
    app.create_agent(merged(engineer("alpha", "owl"), json!({"wish": "login"}))).await;
    let fox_token = app.agent_token(&fox).await;

    let forged = send_as(&app, &fox_token, json!({"from": "owl", "to": "operator", "body": "hi"})).await;
    assert_problem(forged, 403).await;
    let forged = send_as(&app, &app.admin_token, json!({"from": "owl", "to": "fox", "body": "hi"})).await;
    assert_problem(forged, 403).await;
    let to_owl = send_as(&app, &fox_token, json!({"to": "owl", "body": "review my branch"})).await;
    assert_eq!(to_owl.status(), 201);
    let to_owl: Value = to_owl.json().await.expect("json");
    assert_eq!(to_owl["from"], "fox");
    let theirs = app.client.get(app.url("/api/v1/agents/owl/messages")).bearer_auth(&fox_token).send().await;
    assert_problem(theirs.expect("get"), 403).await;
    let not_to_fox = app
        .client
        .post(app.url(&format!("/api/v1/messages/{}/read", to_owl["id"].as_str().expect("id"))))
        .bearer_auth(&fox_token)
        .send()
        .await
        .expect("read");
    assert_problem(not_to_fox, 403).await;

    let report = send_as(&app, &fox_token, json!({"to": "operator", "body": "done with the login page"})).await;
    let report: Value = report.json().await.expect("json");
    assert_eq!((&report["state"], &report["confirmed_by"]), (&json!("delivered"), &json!("operator")));
    let operator = app.get_ok("/api/v1/messages?to=operator").await;
    assert_eq!(operator["items"][0]["body"], "done with the login page");
    // Delivered means `on_message_sent`.
    let sent: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE type = 'message.delivered'")
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(sent, 1);
}

#[tokio::test]
async fn bad_messages_are_refused_naming_the_field() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "fox")).await;
    let huge = "x".repeat(256 * 1024 + 1);
    for (body, field) in [
        (json!({"to": "ghost", "body": "hi"}), "to"),
        (json!({"to": "fox", "body": ""}), "body"),
        (json!({"to": "fox", "body": "a\u{0}b"}), "body"),
        (json!({"to": "fox", "body": huge}), "body"),
    ] {
        let refused = send_as(&app, &app.admin_token, body).await;
        let problem = assert_problem(refused, 422).await;
        assert_eq!(problem["errors"][0]["field"], field, "{problem}");
    }
    // A body is typed into a pane: text, never keys.
    for (body, why) in [
        ("done \u{1b}[201~echo pwned\n", "contains control byte 0x1b at offset 5"),
        ("\u{3}", "contains control byte 0x03 at offset 0"),
    ] {
        let refused = send_as(&app, &app.admin_token, json!({"to": "fox", "body": body})).await;
        let problem = assert_problem(refused, 422).await;
        assert_eq!(problem["errors"][0]["field"], "body", "{problem}");
        assert!(problem["errors"][0]["message"].as_str().unwrap_or("").starts_with(why), "{problem}");
    }
    let stored = app.get_ok("/api/v1/messages?to=fox").await;
    assert_eq!(stored["items"], json!([]), "nothing refused was stored");
    let text = send_as(&app, &app.admin_token, json!({"to": "fox", "body": "tab\there\r\nand\nlines"})).await;
    assert_eq!(text.status(), 201, "tab and newline are text");
    let missing = app.get("/api/v1/messages/not-an-id").await;
    assert_problem(missing, 404).await;
    let state = app.get("/api/v1/messages?state=lost").await;
    assert_eq!(assert_problem(state, 422).await["errors"][0]["field"], "state");
}

/// `switchyard ARGS` with the environment the worker gives an agent's pane (or an operator's),
/// off the runtime that serves the app.
pub async fn cli(args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> (bool, String, String) {
    let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let (args, stdin) = (owned(args), stdin.map(str::to_owned));
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    tokio::task::spawn_blocking(move || run_cli(&args, &env, stdin.as_deref())).await.expect("cli")
}

fn run_cli(args: &[String], env: &[(String, String)], stdin: Option<&str>) -> (bool, String, String) {
    use std::io::Write;
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("SWITCHYARD_URL")
        .env_remove("SWITCHYARD_LISTEN")
        .env_remove("SWITCHYARD_TOKEN")
        .env_remove("SWITCHYARD_AGENT")
        .env_remove("SWITCHYARD_TOKEN_FILE")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.unwrap_or("").as_bytes()).expect("write stdin");
    drop(input);
    let out = child.wait_with_output().expect("run");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_uses_msg_and_chat_from_its_pane_environment_without_curl() {
    let app = spawn_app().await;
    let dir = tempfile::tempdir().expect("dir");
    app.create_project("alpha").await;
    let made = app.post("/api/v1/teams", json!({"name": "login", "project": "alpha"})).await;
    assert_eq!(made.status(), 201);
    let fox = app.create_agent(merged(engineer("alpha", "fox"), json!({"team": "login"}))).await;
    let token_file = dir.path().join("fox.token");
    std::fs::write(&token_file, app.agent_token(&fox).await).expect("token file");
    let token_file = token_file.to_str().expect("utf-8");
    let pane =
        [("SWITCHYARD_URL", app.address.as_str()), ("SWITCHYARD_AGENT", "fox"), ("SWITCHYARD_TOKEN_FILE", token_file)];
    let operator = [("SWITCHYARD_URL", app.address.as_str()), ("SWITCHYARD_TOKEN", app.admin_token.as_str())];

    let (ok, out, err) =
        cli(&["msg", "send", "--to", "operator", "the login page is done; review?"], &pane, None).await;
    assert!(ok, "{err}");
    assert!(out.contains("to operator (delivered)"), "{out}");
    let (ok, out, err) = cli(&["msg", "inbox", "--unread", "--mark-read"], &operator, None).await;
    assert!(ok, "{err}");
    assert!(out.contains("from fox to operator") && out.contains("the login page is done; review?"), "{out}");
    let (_, out, _) = cli(&["msg", "inbox", "--unread"], &operator, None).await;
    assert_eq!(out, "", "marked read");

    // The body from standard input, byte for byte; the agent reads its inbox as JSON.
    let (ok, _, err) = cli(&["msg", "send", "--to", "fox", "-"], &operator, Some("line one\nline; two\n")).await;
    assert!(ok, "{err}");
    let (ok, out, err) = cli(&["msg", "inbox", "--json"], &pane, None).await;
    assert!(ok, "{err}");
    let message: Value = serde_json::from_str(out.lines().next().expect("a message")).expect("json");
    assert_eq!((&message["from"], &message["body"]), (&json!("operator"), &json!("line one\nline; two\n")));
    let (ok, _, err) = cli(&["msg", "send", "--to", "ghost", "hi"], &pane, None).await;
    assert!(!ok && err.contains("no agent `ghost`"), "{err}");

    let (ok, out, err) = cli(&["chat", "post", "session middleware merged"], &pane, None).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("posted to login"), "{out}");
    let (ok, out, err) = cli(&["chat", "read", "--team", "login"], &operator, None).await;
    assert!(ok, "{err}");
    assert!(out.trim_end().ends_with("fox: session middleware merged"), "{out}");
    let (ok, _, err) = cli(&["chat", "read"], &operator, None).await;
    assert!(!ok && err.contains("--team"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn msg_finds_the_server_at_the_configured_listen_address_without_switchyard_url() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "fox")).await;
    let listen = app.address.trim_start_matches("http://").to_owned();
    let operator = [("SWITCHYARD_LISTEN", listen.as_str()), ("SWITCHYARD_TOKEN", app.admin_token.as_str())];
    let (ok, out, err) = cli(&["msg", "send", "--to", "fox", "found by the listen address"], &operator, None).await;
    assert!(ok, "{err}");
    assert!(out.contains("to fox"), "{out}");
    let elsewhere = [("SWITCHYARD_LISTEN", "127.0.0.1:9"), ("SWITCHYARD_TOKEN", app.admin_token.as_str())];
    let (ok, _, err) = cli(&["msg", "inbox"], &elsewhere, None).await;
    assert!(!ok && err.contains("127.0.0.1:9"), "it called the configured address, not :8080: {err}");
}
