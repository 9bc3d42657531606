//! The operator's command line, run as the built binary against the real app: `switchyard
//! agents`, `tasks`, `wish new|show|ls`, `attach` (into a real terminal: a pane of another tmux
//! server), and the clients' `--help`.

use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

use crate::binary::BIN;
use crate::helpers::{engineer, eventually, spawn_app, TestApp};
use crate::messages::cli;
use crate::worker::shell_agent;

fn operator(app: &TestApp) -> [(&str, &str); 2] {
    [("SWITCHYARD_URL", app.address.as_str()), ("SWITCHYARD_TOKEN", app.admin_token.as_str())]
}

fn json_lines(out: &str) -> Vec<Value> {
    out.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_operator_lists_agents_and_tasks_and_makes_shows_and_lists_wishes() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_project("beta").await;
    app.create_agent(json!({"name": "fox", "project": "alpha", "kind": "worker", "role": "engineer",
        "provider": "claude", "task": "Add a login page\nwith a form"}))
        .await;
    app.create_agent(engineer("beta", "owl")).await;
    app.create_task(json!({"project": "alpha", "title": "Write the docs"})).await;
    let env = operator(&app);

    let (ok, out, err) = cli(&["agents"], &env, None).await;
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("NAME") && lines[0].contains("LAST ACTIVITY") && lines[0].ends_with("TASK"), "{out}");
    let fox = lines.iter().find(|l| l.starts_with("fox ")).expect("fox listed");
    assert!(fox.contains("spawning") && fox.contains("claude") && fox.ends_with("Add a login page"), "{out}");
    // Times read as people say them.
    sqlx::query("UPDATE agents SET last_activity = now() - interval '3 minutes' WHERE name = 'fox'")
        .execute(&app.pool)
        .await
        .expect("fox's last activity");
    let (_, out, _) = cli(&["agents", "--project", "alpha"], &env, None).await;
    assert!(out.lines().any(|l| l.starts_with("fox ") && l.contains(" 3 min ago ")), "{out}");
    let (ok, out, err) = cli(&["agents", "--project", "beta", "--json"], &env, None).await;
    assert!(ok, "{err}");
    let names: Vec<Value> = json_lines(&out).iter().map(|a| a["name"].clone()).collect();
    assert_eq!(names, [json!("owl")]);

    let (ok, out, err) = cli(&["tasks"], &env, None).await;
    assert!(ok, "{err}");
    assert!(out.lines().any(|l| l.ends_with("Write the docs") && l.contains("ready")), "{out}");
    let (ok, out, _) = cli(&["tasks", "--status", "done", "--json"], &env, None).await;
    assert!(ok && out.is_empty(), "no task is done: {out}");
    let (ok, _, err) = cli(&["tasks", "--status", "bogus"], &env, None).await;
    assert!(!ok && err.contains("status"), "the API's refusal, naming the field: {err}");

    let (ok, out, err) =
        cli(&["wish", "new", "Dark mode for the dashboard\nEvery page.", "--project", "alpha"], &env, None).await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "dark-mode-for-the-dashboard (draft)");
    let (ok, out, err) = cli(&["wish", "show", "dark-mode-for-the-dashboard", "--json"], &env, None).await;
    assert!(ok, "{err}");
    let wish: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(
        (&wish["title"], &wish["description"]),
        (&json!("Dark mode for the dashboard"), &json!("Dark mode for the dashboard\nEvery page."))
    );
    let (ok, out, err) = cli(&["wish", "show", "dark-mode-for-the-dashboard"], &env, None).await;
    assert!(ok && out.contains("draft") && out.contains("no plan yet"), "{out}{err}");
    let (ok, _, err) =
        cli(&["wish", "new", "Again", "--project", "alpha", "--slug", "dark-mode-for-the-dashboard"], &env, None).await;
    assert!(!ok && err.contains("409"), "a taken slug is the API's conflict: {err}");
    // `-` reads what is wished for from standard input, as `msg send -` reads its body.
    let (ok, out, err) =
        cli(&["wish", "new", "-", "--project", "alpha"], &env, Some("Faster builds\nCache more.\n")).await;
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "faster-builds (draft)");
    let piped = app.get_ok("/api/v1/wishes/faster-builds").await;
    assert_eq!(piped["title"], "Faster builds", "{piped}");
    assert!(piped["description"].as_str().is_some_and(|d| d.starts_with("Faster builds\nCache more.")), "{piped}");
    let (ok, _, err) = cli(&["wish", "new", "Nowhere", "--project", "ghost"], &env, None).await;
    assert!(!ok && err.contains("ghost"), "{err}");

    let (ok, out, err) = cli(&["wish", "ls", "--state", "draft"], &env, None).await;
    assert!(ok, "{err}");
    assert!(out.lines().nth(1).is_some_and(|l| l.starts_with("dark-mode-for-the-dashboard")), "{out}");
    let (ok, out, err) = cli(&["wish", "ls", "--state", "merged", "--json"], &env, None).await;
    assert!(ok && out.is_empty(), "{out}{err}");
    let (ok, _, err) = cli(&["wish", "show", "ghost"], &env, None).await;
    assert!(!ok && err.contains("404"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn attach_shows_the_agents_pane_in_the_persons_terminal_and_names_the_node_of_one_elsewhere() {
    let app = TestApp::builder().worker(|_| {}).spawn().await;
    app.create_project("alpha").await;
    let fox = shell_agent(&app, "fox").await;
    let pane = fox["tmux_pane"].as_str().expect("pane").to_owned();
    let data_dir = app._data_dir.path().to_str().expect("utf-8").to_owned();

    // The person's terminal: a pane of a tmux server of its own, running `switchyard attach`.
    let terminal = format!("person-{}", uuid::Uuid::new_v4().simple());
    let _server = KillServer(terminal.clone());
    let status = Command::new("tmux")
        .args(["-f", "/dev/null", "-L", &terminal, "new-session", "-d", "-x", "120", "-y", "30", "--"])
        .args(["env", "-u", "TMUX", &format!("SWITCHYARD_URL={}", app.address)])
        .arg(format!("SWITCHYARD_TOKEN={}", app.admin_token))
        .arg(format!("SWITCHYARD_DATA_DIR={data_dir}"))
        .arg(format!("SWITCHYARD_TMUX_SOCKET={}", app.tmux_socket))
        .args([BIN, "attach", "fox"])
        .status()
        .expect("tmux");
    assert!(status.success());
    let clients = || {
        let out = Command::new("tmux")
            .args(["-L", &app.tmux_socket, "list-clients", "-F", "#{pane_id}"])
            .output()
            .expect("list-clients");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let attached = || clients().lines().any(|client| client == pane);
    eventually("a client is attached to fox's pane", Duration::from_secs(10), || async { attached() }).await;

    // From another node (its data directory names another node id), fox cannot be attached:
    // the command says where it runs.
    let elsewhere = tempfile::tempdir().expect("dir");
    std::fs::write(elsewhere.path().join("node_id"), "node-elsewhere").expect("node id");
    let mut env = operator(&app).to_vec();
    let elsewhere = elsewhere.path().to_str().expect("utf-8").to_owned();
    env.extend([("SWITCHYARD_DATA_DIR", elsewhere.as_str()), ("SWITCHYARD_TMUX_SOCKET", app.tmux_socket.as_str())]);
    let (ok, _, err) = cli(&["attach", "fox"], &env, None).await;
    let node = fox["node_id"].as_str().expect("node");
    assert!(!ok && err.contains(&format!("runs on node `{node}`, not on this one (`node-elsewhere`)")), "{err}");
    let (ok, _, err) = cli(&["attach", "ghost"], &env, None).await;
    assert!(!ok && err.contains("no agent `ghost`"), "{err}");
}

struct KillServer(String);

impl Drop for KillServer {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.0, "kill-server"]).status();
    }
}

#[test]
fn the_clients_help_shows_their_own_options_and_no_environment_values() {
    let help = |args: &[&str]| {
        let out =
            Command::new(BIN).args(args).arg("--help").env("SWITCHYARD_LISTEN", "127.0.0.1:7").output().expect("run");
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    for args in [&["msg"][..], &["msg", "send"], &["chat", "post"], &["agents"], &["wish", "new"], &["tasks"]] {
        let text = help(args);
        assert!(text.contains("--listen"), "{args:?}: {text}");
        assert!(!text.contains("--database-url") && !text.contains("--webhook-timeout"), "{args:?}: {text}");
        assert!(!text.contains("127.0.0.1:7") && !text.contains("=]"), "no environment values: {text}");
    }
    assert!(help(&["chat", "post"]).contains("--team"));
    assert!(help(&["attach"]).contains("--tmux-socket"));
    let serve = help(&["serve"]);
    assert!(serve.contains("--database-url") && serve.contains("--webhook-timeout"), "{serve}");
    // The top level lists the commands; the server's settings are `serve --help`'s.
    let top = help(&[]);
    assert!(top.contains("serve") && top.contains("wish") && !top.contains("--database-url"), "{top}");
    assert!(!top.contains("--listen") && !top.contains("--webhook-timeout"), "{top}");
    // Hidden is not refused: a client still takes a server setting (one shell profile for all).
    let out = Command::new(BIN)
        .args(["msg", "inbox", "--tmux-socket", "x"])
        .env_remove("SWITCHYARD_TOKEN")
        .env_remove("SWITCHYARD_TOKEN_FILE")
        .env_remove("SWITCHYARD_AGENT")
        .output()
        .expect("run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("SWITCHYARD_TOKEN"), "parsed, then asked for a token");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reader_that_closes_stdout_ends_a_listing_quietly() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    app.create_agent(engineer("alpha", "fox")).await;
    app.create_task(json!({"project": "alpha", "title": "Write the docs"})).await;
    let env: Vec<(String, String)> = operator(&app).iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    for args in [["agents", "--json"], ["agents", "--state=spawning"], ["tasks", "--json"], ["wish", "ls"]] {
        let env = env.clone();
        let out = tokio::task::spawn_blocking(move || {
            // As `| head` leaves it once it has read enough: nobody reads stdout any more.
            let (reader, writer) = std::io::pipe().expect("a pipe");
            drop(reader);
            Command::new(BIN).args(args).envs(env).stdout(writer).stderr(std::process::Stdio::piped()).output()
        })
        .await
        .expect("join")
        .expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !err.contains("panicked"), "{args:?}: {:?} {err}", out.status);
    }
}
