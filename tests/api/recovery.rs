//! An engineer whose pane went without its report — the pane killed, the whole tmux server
//! killed, or the machine rebooted (`serve` stopped, tmux gone, `serve` started again) — is
//! resumed into its own provider session on its own, told to go on, and finishes its group,
//! which stays its own throughout; a person's suspend stays a suspend. With the fake agents
//! (`tests/fake_agent/conductor-agent.sh`), whose provider resumes them with `--resumed`.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};

use crate::conductor::Fakes;
use crate::helpers::*;

/// Long enough for agents to spawn, be resumed, commit and report on a loaded machine.
const RUN: Duration = Duration::from_secs(180);

/// The fake agent as the `fake` provider, resumed with `--resumed`.
fn providers(fakes: &Fakes) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let script = format!("{root}/tests/fake_agent/conductor-agent.sh");
    format!(
        r#"[providers.fake]
command = ["bash", "--norc", "--noprofile", "{script}"]
resume = ["bash", "--norc", "--noprofile", "{script}", "--resumed"]
screen_rules = "generic"
install_hooks = false
env = {{ SWITCHYARD_BIN = "{bin}", FAKE_DIR = "{dir}" }}
"#,
        bin = env!("CARGO_BIN_EXE_switchyard"),
        dir = fakes.path().display()
    )
}

/// The worker with the conductor and the merge queue running.
fn conducted(w: &mut switchyard::worker::WorkerConfig) {
    w.conductor = true;
    w.merge_queue = true;
}

/// A project of the fakes without a review, whose repository has its target branch free for the
/// merge queue (nothing checked out); a wish `slug` with groups `keys`, planned. Answers the
/// repository.
async fn wish_running(app: &TestApp, slug: &str, keys: &[&str]) -> PathBuf {
    let project = app.create_project("alpha").await;
    let repo = PathBuf::from(project["repo_path"].as_str().expect("repo"));
    git(&repo, &["checkout", "--quiet", "--detach"]);
    let config = json!({"conductor_config": {"provider": "fake", "max_agents": 4, "review": "none"}});
    app.patch_ok("/api/v1/projects/alpha", config).await;
    let groups: Vec<Value> = keys.iter().map(|k| json!({"key": k, "title": format!("Group {k}")})).collect();
    app.create_wish(json!({"slug": slug, "project": "alpha", "title": "t", "groups": groups})).await;
    app.post_ok(&format!("/api/v1/wishes/{slug}/plan"), json!({})).await;
    repo
}

fn group<'a>(wish: &'a Value, key: &str) -> &'a Value {
    wish["groups"].as_array().expect("groups").iter().find(|g| g["key"] == key).expect("group")
}

/// The engineer of group `key`, once its pane runs (held by `hold-<key>`): its name and pane.
async fn engineer_at_work(app: &TestApp, slug: &str, key: &str) -> (String, String) {
    let wish = app
        .get_until(&format!("/api/v1/wishes/{slug}"), "the group has its engineer", RUN, &[], |w| {
            group(w, key)["assignee"].as_str().is_some_and(|a| a.starts_with("engineer-"))
        })
        .await;
    let name = group(&wish, key)["assignee"].as_str().expect("assignee").to_owned();
    let agent = app
        .get_until(&format!("/api/v1/agents/{name}"), "the engineer's pane runs", RUN, &[], |a| {
            a["tmux_pane"].is_string() && matches!(a["state"].as_str(), Some("working" | "idle"))
        })
        .await;
    (name, agent["tmux_pane"].as_str().expect("pane").to_owned())
}

fn tmux(socket: &str, args: &[&str]) {
    let out = std::process::Command::new("tmux").arg("-L").arg(socket).args(args).output().expect("tmux");
    assert!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Waits for the wish to merge; fails showing it and its agents.
async fn merged(app: &TestApp, slug: &str) -> Value {
    app.get_until(&format!("/api/v1/wishes/{slug}"), "the wish merges", RUN, &["/api/v1/agents?limit=100"], |w| {
        w["status"] == "merged"
    })
    .await
}

/// What a resumed engineer went through: suspended as interrupted, resumed, told to go on (the
/// fake notes that it read Switchyard's word), its group done by itself and never a person's.
async fn assert_resumed_and_finished(app: &TestApp, fakes: &Fakes, wish: &Value, key: &str, name: &str, why: &str) {
    let g = group(wish, key);
    assert_eq!((&g["status"], &g["assignee"]), (&json!("done"), &json!(name)), "{g}");
    let changes: Vec<Value> = sqlx::query_scalar(
        "SELECT payload FROM events WHERE type = 'agent.state_changed' AND subject = $1 ORDER BY id",
    )
    .bind(format!("agent:{name}"))
    .fetch_all(&app.pool)
    .await
    .expect("events");
    let suspended = changes.iter().position(|c| c["to"] == "suspended" && c["signal"] == "interrupted");
    let suspended = suspended.unwrap_or_else(|| panic!("{name} was suspended as interrupted: {changes:#?}"));
    assert!(changes[suspended + 1..].iter().any(|c| c["to"] == "spawning"), "then resumed: {changes:#?}");
    let went_on = std::fs::read_to_string(fakes.path().join(format!("went-on-{key}"))).unwrap_or_default();
    assert_eq!(went_on.lines().collect::<Vec<_>>(), [name], "{name} read the word to go on once");
    let inbox = app.get_ok(&format!("/api/v1/agents/{name}/messages")).await;
    let told: Vec<&Value> = inbox["items"]
        .as_array()
        .expect("inbox")
        .iter()
        .filter(|m| {
            m["from"] == "switchyard" && m["body"].as_str().unwrap_or("").starts_with("Your session was interrupted (")
        })
        .collect();
    assert_eq!(told.len(), 1, "told once: {inbox:#}");
    let body = told[0]["body"].as_str().unwrap();
    assert!(body.ends_with("): go on with your assignment, then report."), "{body}");
    assert!(body.contains(why), "{body} says why: {why}");
    let to_a_person: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM events WHERE type = 'task.assigned' AND payload->>'assignee' = 'human'",
    )
    .fetch_one(&app.pool)
    .await
    .expect("count");
    assert_eq!(to_a_person, 0, "no group went to a person");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_engineer_whose_pane_is_killed_is_resumed_told_to_go_on_and_its_group_lands() {
    let fakes = Fakes::new();
    fakes.say("hold-a", "");
    let app = TestApp::builder().providers(&providers(&fakes)).worker(conducted).spawn().await;
    let repo = wish_running(&app, "cut", &["a"]).await;
    let (name, pane) = engineer_at_work(&app, "cut", "a").await;

    tmux(&app.tmux_socket, &["kill-pane", "-t", &pane]);

    let wish = merged(&app, "cut").await;
    assert_resumed_and_finished(&app, &fakes, &wish, "a", &name, "(the pane vanished)").await;
    assert_eq!(git(&repo, &["show", "main:a.txt"]).trim(), "work of a");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_engineers_whose_tmux_server_is_killed_are_both_resumed_and_finish() {
    let fakes = Fakes::new();
    fakes.say("hold-a", "");
    fakes.say("hold-b", "");
    let app = TestApp::builder().providers(&providers(&fakes)).worker(conducted).spawn().await;
    let repo = wish_running(&app, "both", &["a", "b"]).await;
    let (a, _) = engineer_at_work(&app, "both", "a").await;
    let (b, _) = engineer_at_work(&app, "both", "b").await;

    tmux(&app.tmux_socket, &["kill-server"]);

    let wish = merged(&app, "both").await;
    let why = "with its tmux session";
    assert_resumed_and_finished(&app, &fakes, &wish, "a", &a, why).await;
    assert_resumed_and_finished(&app, &fakes, &wish, "b", &b, why).await;
    for key in ["a", "b"] {
        assert_eq!(git(&repo, &["show", &format!("main:{key}.txt")]).trim(), format!("work of {key}"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_reboot_the_engineer_is_resumed_by_the_restarted_server_and_finishes() {
    let fakes = Fakes::new();
    fakes.say("hold-a", "");
    let app = TestApp::builder().providers(&providers(&fakes)).worker(conducted).spawn().await;
    let repo = wish_running(&app, "boot", &["a"]).await;
    let (name, _) = engineer_at_work(&app, "boot", "a").await;

    // A reboot: the server stops, its tmux server (every pane) is gone, the server starts again
    // on the same database and data directory.
    let stopped = stop(app).await;
    tmux(&stopped.tmux_socket, &["kill-server"]);
    let app = restart_with(stopped, conducted).await;

    let wish = merged(&app, "boot").await;
    assert_resumed_and_finished(&app, &fakes, &wish, "a", &name, "with its tmux session").await;
    assert_eq!(git(&repo, &["show", "main:a.txt"]).trim(), "work of a");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_engineer_that_dies_each_time_it_is_resumed_goes_to_a_person_after_three_resumes() {
    let fakes = Fakes::new();
    fakes.say("hold-a", "");
    fakes.say("die-a", "");
    let app = TestApp::builder().providers(&providers(&fakes)).worker(conducted).spawn().await;
    wish_running(&app, "doomed", &["a"]).await;
    let (name, pane) = engineer_at_work(&app, "doomed", "a").await;

    tmux(&app.tmux_socket, &["kill-pane", "-t", &pane]);

    let wish = app
        .get_until("/api/v1/wishes/doomed", "the group goes to a person", RUN, &["/api/v1/agents?limit=100"], |w| {
            group(w, "a")["assignee"] == "human"
        })
        .await;
    assert_eq!(wish["status"], "executing");
    let agent = app.agent(&name).await;
    assert_eq!(agent["state"], "error", "{agent}");
    let reason = agent["failure_reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("the pane exited (exit status 1)") && reason.ends_with("after 3 resumes"), "{reason}");
    let resumes: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM events WHERE type = 'agent.state_changed' AND subject = $1 AND payload->>'to' = 'spawning'",
    )
    .bind(format!("agent:{name}"))
    .fetch_one(&app.pool)
    .await
    .expect("count");
    assert_eq!(resumes, 3, "resumed three times, no more");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_persons_suspend_is_not_resumed_on_its_own() {
    let fakes = Fakes::new();
    fakes.say("hold-a", "");
    let app = TestApp::builder().providers(&providers(&fakes)).worker(conducted).spawn().await;
    wish_running(&app, "pause", &["a"]).await;
    let (name, _) = engineer_at_work(&app, "pause", "a").await;

    let suspended = app.post_ok(&format!("/api/v1/agents/{name}/suspend"), json!({})).await;
    assert_eq!(suspended["state"], "suspended");

    // Reconcile passes well past the longest wait before an automatic resume (4 s).
    let after = chrono::Utc::now() + chrono::Duration::seconds(5);
    eventually("reconcile passes after the waits", Duration::from_secs(60), || async {
        let at = app.status().await["worker"]["last_reconcile_at"].as_str().unwrap_or_default().to_owned();
        at.parse::<chrono::DateTime<chrono::Utc>>().is_ok_and(|at| at > after)
    })
    .await;
    let agent = app.agent(&name).await;
    assert_eq!(agent["state"], "suspended", "{agent}");
    let resumes: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM events WHERE type = 'agent.state_changed' AND subject = $1 AND payload->>'to' = 'spawning'",
    )
    .bind(format!("agent:{name}"))
    .fetch_one(&app.pool)
    .await
    .expect("count");
    assert_eq!(resumes, 0, "never resumed");
    assert!(!fakes.path().join("went-on-a").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_suspended_agent_of_a_wish_that_ended_is_finished_and_its_waiting_mail_cancelled() {
    let fakes = Fakes::new();
    fakes.say("hold-a", "");
    let app = TestApp::builder().providers(&providers(&fakes)).worker(conducted).spawn().await;
    wish_running(&app, "gone", &["a"]).await;
    let (name, _) = engineer_at_work(&app, "gone", "a").await;
    app.post_ok(&format!("/api/v1/agents/{name}/suspend"), json!({})).await;
    app.post_ok("/api/v1/messages", json!({"to": name, "body": "one more thing"})).await;

    app.post_ok("/api/v1/wishes/gone/cancel", json!({})).await;

    let agent = app
        .get_until(&format!("/api/v1/agents/{name}"), "the agent is finished", RUN, &[], |a| a["state"] == "done")
        .await;
    assert_eq!(agent["ready_for_cleanup"], true);
    let inbox = app.get_ok(&format!("/api/v1/agents/{name}/messages")).await;
    let pending: Vec<&Value> =
        inbox["items"].as_array().expect("inbox").iter().filter(|m| m["state"] == "pending").collect();
    assert!(pending.is_empty(), "nothing waits for it: {inbox:#}");
    assert!(cancelled(&app).await >= 1, "its waiting mail was cancelled");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_a_redispatch_replaced_is_finished_once_the_wish_merged_and_its_mail_cancelled() {
    let fakes = Fakes::new();
    fakes.say("hold-a", "");
    let app = TestApp::builder().providers(&providers(&fakes)).worker(conducted).spawn().await;
    wish_running(&app, "again", &["a"]).await;
    let (first, _) = engineer_at_work(&app, "again", "a").await;
    app.post_ok(&format!("/api/v1/agents/{first}/suspend"), json!({})).await;
    app.post_ok("/api/v1/messages", json!({"to": first, "body": "are you there?"})).await;

    // A person gives the group to a new agent, which does it.
    std::fs::remove_file(fakes.path().join("hold-a")).expect("no more holding");
    app.post_ok("/api/v1/wishes/again/groups/a/redispatch", json!({})).await;
    let wish = merged(&app, "again").await;
    assert_ne!(group(&wish, "a")["assignee"], first.as_str());

    let agent = app
        .get_until(&format!("/api/v1/agents/{first}"), "the replaced agent is finished", RUN, &[], |a| {
            a["state"] == "done"
        })
        .await;
    assert_eq!(agent["ready_for_cleanup"], true);
    let inbox = app.get_ok(&format!("/api/v1/agents/{first}/messages")).await;
    let pending: Vec<&Value> =
        inbox["items"].as_array().expect("inbox").iter().filter(|m| m["state"] == "pending").collect();
    assert!(pending.is_empty(), "nothing waits for it: {inbox:#}");
    assert!(cancelled(&app).await >= 1, "its waiting mail was cancelled");
}

async fn cancelled(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM events WHERE type = 'message.cancelled'")
        .fetch_one(&app.pool)
        .await
        .expect("count")
}
