//! Agents are untrusted clients: a pane gets its own variables and token, not the server's
//! environment, the tmux server or another agent's token; a token stops with its agent and
//! reaches only its own team; an agent cannot take the name of a person or of Switchyard.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, engineer, eventually, merged, spawn_app, TestApp};

/// The environment a process started with, from `/proc/<pid>/environ`.
fn environ(pid: u64) -> HashMap<String, String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).expect("read the pane's environ");
    raw.split(|b| *b == 0)
        .filter(|entry| !entry.is_empty())
        .filter_map(|entry| String::from_utf8_lossy(entry).split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect()
}

/// `GET /api/v1/agents/{name}` with `token`: its status.
async fn read_self(app: &TestApp, name: &str, token: &str) -> u16 {
    let url = app.url(&format!("/api/v1/agents/{name}"));
    app.client.get(url).bearer_auth(token).send().await.expect("get").status().as_u16()
}

/// Waits until the `shell` agent `name` has a pane, and returns it.
pub(crate) async fn with_pane(app: &TestApp, name: &str) -> Value {
    eventually("the worker gives the agent a pane", Duration::from_secs(20), || async {
        app.agent(name).await["pid"].is_u64()
    })
    .await;
    app.agent(name).await
}

#[tokio::test]
async fn a_pane_gets_its_own_variables_and_a_token_of_its_own_but_not_the_servers_environment_or_tmux() {
    // Tests share this process's environment: a name no other test uses. The app under test
    // (and so the tmux server it starts) runs with this canary in its environment.
    let canary = format!("SY_CANARY_{}", uuid::Uuid::new_v4().simple());
    std::env::set_var(&canary, "a server secret");
    let app = TestApp::builder().worker(|_| {}).spawn().await;
    app.create_project("alpha").await;
    let shell = |name: &str| merged(engineer("alpha", name), json!({"provider": "shell", "clone": "none"}));
    app.create_agent(shell("fox")).await;
    app.create_agent(shell("owl")).await;
    let fox = with_pane(&app, "fox").await;
    with_pane(&app, "owl").await;

    let env = environ(fox["pid"].as_u64().expect("pid"));
    assert!(!env.contains_key(&canary), "the server's environment reached the pane: {env:?}");
    assert!(!env.contains_key("DATABASE_URL"), "{env:?}");
    assert!(!env.contains_key("TMUX") && !env.contains_key("TMUX_PANE"), "the pane is told where tmux is: {env:?}");
    assert_eq!(env.get("SWITCHYARD_AGENT").map(String::as_str), Some("fox"));
    assert_eq!(env.get("SWITCHYARD_URL"), Some(&app.address));
    assert!(env.contains_key("PATH") && env.contains_key("HOME"), "{env:?}");

    // The token file's directory holds fox's token and nothing of owl's.
    let token_file = Path::new(env.get("SWITCHYARD_TOKEN_FILE").expect("a token file"));
    let listed: Vec<String> = std::fs::read_dir(token_file.parent().expect("its directory"))
        .expect("list")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let own = token_file.file_name().expect("a file name").to_string_lossy().into_owned();
    assert_eq!(listed, [own], "{token_file:?}");
    let token = std::fs::read_to_string(token_file).expect("the token");
    assert_eq!(read_self(&app, "fox", &token).await, 200);

    // Killed, its token stops working; resumed, its new pane gets a new one in a file of its
    // own, and the old pane's file is gone: a closing pane's late hooks find no token.
    app.post_ok("/api/v1/agents/fox/kill", json!({})).await;
    assert_eq!(read_self(&app, "fox", &token).await, 401, "a killed agent's token is revoked");
    app.post_ok("/api/v1/agents/fox/resume", json!({})).await;
    let resumed = with_pane(&app, "fox").await;
    let renewed_file = environ(resumed["pid"].as_u64().expect("pid"))["SWITCHYARD_TOKEN_FILE"].clone();
    assert_ne!(Path::new(&renewed_file), token_file);
    assert!(!token_file.exists(), "the old pane's token file is still there: {token_file:?}");
    let renewed = std::fs::read_to_string(&renewed_file).expect("the new token");
    assert_ne!(renewed, token);
    assert_eq!(read_self(&app, "fox", &renewed).await, 200);
    std::env::remove_var(&canary);
}

#[tokio::test]
async fn an_agents_token_is_revoked_when_it_is_killed_and_gone_when_it_is_deleted() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let fox = app.create_agent(engineer("alpha", "fox")).await;
    let token = app.agent_token(&fox).await;
    assert_eq!(read_self(&app, "fox", &token).await, 200);
    app.post_ok("/api/v1/agents/fox/kill", json!({})).await;
    assert_eq!(read_self(&app, "fox", &token).await, 401);
    assert_eq!(app.count_events("agent.stopped", "agent:fox").await, 1);

    let owl = app.create_agent(engineer("alpha", "owl")).await;
    let token = app.agent_token(&owl).await;
    let deleted = app.admin(Method::DELETE, "/api/v1/agents/owl?force=true").send().await.expect("delete");
    assert_eq!(deleted.status(), 200, "{:?}", deleted.text().await);
    assert_eq!(read_self(&app, "owl", &token).await, 401);
}

#[tokio::test]
async fn an_agent_may_not_be_named_after_a_person_or_switchyard() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    for name in ["operator", "human", "switchyard"] {
        let problem = assert_problem(app.post("/api/v1/agents", engineer("alpha", name)).await, 422).await;
        assert_eq!(problem["errors"][0]["field"], "name", "{problem}");
        assert!(problem["detail"].as_str().unwrap_or_default().contains("reserved"), "{problem}");
    }
    app.create_agent(engineer("alpha", "operator-2")).await;
}

#[tokio::test]
async fn an_agents_token_reads_its_own_team_only() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    for team in ["login", "billing"] {
        app.post_ok("/api/v1/teams", json!({"name": team, "project": "alpha"})).await;
    }
    let fox = app.create_agent(merged(engineer("alpha", "fox"), json!({"team": "login"}))).await;
    let token = app.agent_token(&fox).await;
    let read = |team: &'static str| {
        let request = app.client.get(app.url(&format!("/api/v1/teams/{team}"))).bearer_auth(&token);
        async move { request.send().await.expect("get") }
    };
    assert_eq!(read("login").await.status(), 200);
    let problem = assert_problem(read("billing").await, 403).await;
    assert!(problem["detail"].as_str().unwrap_or_default().contains("not a member"), "{problem}");
    assert_eq!(app.get_ok("/api/v1/teams/billing").await["name"], "billing", "other tokens read any team");
}

/// A provider whose agents run a plain shell under bubblewrap.
pub(crate) const SANDBOXED_SHELL: &str = r#"
[providers.boxed]
command = ["bash", "--norc", "--noprofile"]
screen_rules = "shell"
sandbox = "bwrap"
"#;

#[tokio::test]
async fn a_bwrap_agent_reads_its_own_clone_and_token_but_not_another_agents() {
    let app = app_with_bwrap(SANDBOXED_SHELL).await;
    app.create_project("alpha").await;
    app.create_agent(merged(engineer("alpha", "owl"), json!({"provider": "shell", "clone": "agent"}))).await;
    app.create_agent(merged(engineer("alpha", "fox"), json!({"provider": "boxed", "clone": "agent"}))).await;
    let owl = with_pane(&app, "owl").await;
    let fox = with_pane(&app, "fox").await;
    let data_dir = app._data_dir.path();
    let owl_token = PathBuf::from(&environ(owl["pid"].as_u64().expect("pid"))["SWITCHYARD_TOKEN_FILE"]);
    let owl_clone = Path::new(owl["clone_path"].as_str().expect("owl's clone"));
    let fox_clone = Path::new(fox["clone_path"].as_str().expect("fox's clone"));
    // Outside the sandbox both are there, readable by the user the agents run as.
    let owl_secret = std::fs::read_to_string(&owl_token).expect("owl's token, read from outside");
    assert!(owl_clone.join(".git").exists(), "{owl_clone:?}");

    // Typed into fox's sandboxed shell; its answers land in its own (writable) clone.
    let commands = format!(
        "test -s \"$SWITCHYARD_TOKEN_FILE\" && echo own-token-readable; git status --short >/dev/null && echo own-clone-usable; \
         cat '{token}' || echo other-token-hidden; ls '{clone}' || echo other-clone-hidden; \
         ls '{data}/agents' ; touch /usr/sandbox-probe || echo system-read-only;",
        token = owl_token.display(),
        clone = owl_clone.display(),
        data = data_dir.display(),
    );
    let answer = probe(&app, "fox", fox_clone, &commands).await;
    for expected in
        ["own-token-readable", "own-clone-usable", "other-token-hidden", "other-clone-hidden", "system-read-only"]
    {
        assert!(answer.contains(expected), "{expected} missing from:\n{answer}");
    }
    assert!(!answer.contains(owl_secret.trim()), "fox read owl's token:\n{answer}");
    assert!(!answer.lines().any(|line| line.trim() == "owl"), "fox listed owl's directory:\n{answer}");
}

/// A provider whose agents run a plain shell under bubblewrap with no network.
const OFFLINE_SHELL: &str = r#"
[providers.offline]
command = ["bash", "--norc", "--noprofile"]
screen_rules = "shell"
sandbox = "bwrap"
network = "none"
"#;

#[tokio::test]
async fn an_agent_without_a_network_reaches_the_api_on_its_socket_and_nothing_else() {
    let app = app_with_bwrap(OFFLINE_SHELL).await;
    app.create_project("alpha").await;
    app.create_agent(merged(engineer("alpha", "fox"), json!({"provider": "offline", "clone": "agent"}))).await;
    let fox = with_pane(&app, "fox").await;
    let fox_clone = Path::new(fox["clone_path"].as_str().expect("fox's clone"));
    let port = app.address.rsplit(':').next().expect("port");
    // The API's TCP port is out of reach; its socket, with fox's own token, is not.
    let commands = format!(
        "echo \"url=$SWITCHYARD_URL\"; (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo tcp-reached || echo tcp-unreachable; \
         '{exe}' msg send --to operator 'hello from a sandbox without a network' && echo sent;",
        exe = env!("CARGO_BIN_EXE_switchyard"),
    );
    let answer = probe(&app, "fox", fox_clone, &commands).await;
    assert!(answer.contains("url=unix:") && answer.contains("tcp-unreachable"), "{answer}");
    assert!(answer.contains("sent"), "{answer}");
    let inbox = app.get_ok("/api/v1/messages?to=operator").await;
    let sent: Vec<_> = inbox["items"].as_array().expect("items").iter().filter(|m| m["from"] == "fox").collect();
    assert_eq!(sent.len(), 1, "{inbox}");
    assert_eq!(sent[0]["body"], "hello from a sandbox without a network");
}

/// The app with a worker whose providers are `providers`, once bubblewrap is known installed.
pub(crate) async fn app_with_bwrap(providers: &str) -> crate::helpers::TestApp {
    if std::process::Command::new("bwrap").arg("--version").output().is_err() {
        panic!("bubblewrap (bwrap) is not installed: ./dev deps installs it");
    }
    crate::helpers::TestApp::builder().providers(providers).worker(|_| {}).spawn().await
}

/// Types `commands` into the agent's shell with their output going to `probe.txt` in `clone`,
/// and answers that output once they finished.
pub(crate) async fn probe(app: &crate::helpers::TestApp, agent: &str, clone: &Path, commands: &str) -> String {
    let text = format!("{{ {commands} }} > probe.txt 2>&1; echo probe-done >> probe.txt");
    app.post_ok(&format!("/api/v1/agents/{agent}/input"), json!({"text": text})).await;
    let out = clone.join("probe.txt");
    eventually("the shell answers the probe", Duration::from_secs(20), || async {
        std::fs::read_to_string(&out).is_ok_and(|text| text.contains("probe-done"))
    })
    .await;
    std::fs::read_to_string(&out).expect("probe.txt")
}

/// A process's niceness, from `/proc/<pid>/stat`: the 19th field, counted after the command
/// name's parentheses (the name may hold spaces).
fn niceness(pid: &str) -> i64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after = &stat[stat.rfind(')').expect("the command name") + 2..];
    after.split(' ').nth(16).expect("the nice field").parse().expect("a number")
}

#[tokio::test]
async fn agents_run_niced_below_switchyard_unless_their_provider_says_otherwise() {
    let providers = "[providers.eager]\ncommand = [\"bash\"]\nnice = 0\n";
    let app = crate::helpers::TestApp::builder().providers(providers).worker(|w| w.nice_sessions = true).spawn().await;
    app.create_project("alpha").await;
    for (name, provider) in [("fox", "shell"), ("owl", "eager")] {
        app.create_agent(merged(engineer("alpha", name), json!({"provider": provider, "clone": "none"}))).await;
    }
    let pid = |agent: Value| agent["pid"].as_u64().expect("pid").to_string();
    let (fox, owl) = (pid(with_pane(&app, "fox").await), pid(with_pane(&app, "owl").await));
    // The tmux server, and so every pane, starts from this process's niceness.
    let ours = niceness("self");
    let default = i64::from(switchyard::providers::AGENT_NICE);
    assert_eq!(niceness(&fox), (ours + default).min(19), "the default: the lowest priority");
    assert_eq!(niceness(&owl), ours, "`nice = 0`: as Switchyard");
    // `nice` replaced itself with the agent's program: the pane's process is the agent's.
    let comm = std::fs::read_to_string(format!("/proc/{fox}/comm")).expect("comm");
    assert_ne!(comm.trim(), "nice");
    // Where the kernel shares the CPU between sessions first (autogroups), a pane's nice value
    // orders it only within its own session: the session is niced as well.
    if std::path::Path::new("/proc/self/autogroup").exists() {
        eventually("fox's session is niced", Duration::from_secs(10), || async { session_niceness(&fox) == default })
            .await;
        assert_eq!(session_niceness(&owl), 0, "`nice = 0`: its session as any other");
    }
}

/// The niceness of the autogroup (the session's CPU share) of `pid`: `/autogroup-7 nice 10`.
fn session_niceness(pid: &str) -> i64 {
    let line = std::fs::read_to_string(format!("/proc/{pid}/autogroup")).expect("autogroup");
    line.split_whitespace().last().expect("the nice value").parse().expect("a number")
}
