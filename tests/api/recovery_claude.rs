//! The real Claude Code interrupted mid-work: its pane (or the whole tmux server) killed while
//! the scripted model streams its answer after the first step of the engineer's brief.
//! Switchyard resumes it into its own session
//! (`claude --resume <session id>`), tells it to go on, and the conversation goes on — the
//! scripted model finds the assignment further up it — to the group done and the wish merged.
//! Skipped, saying why, exactly as `real_clis` is when the CLIs are not installed. The kill and
//! what must hold after it ([`killed_mid_turn_and_merged`]) are shared with `recovery_codex` and
//! `recovery_gemini`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use switchyard::worker::WorkerConfig;

use crate::helpers::{git, TestApp};
use crate::real_clis::{agent_clis, tmux};
use crate::scripted_model::script::unframed;
use crate::scripted_model::{Action, Cue, ScriptedModel, Turn};

/// Long enough for Claude Code to start, be resumed and do its group on a loaded machine.
const RUN: Duration = Duration::from_secs(300);

/// A made-up key: nothing but the scripted model ever sees it.
const KEY: &str = "sk-ant-switchyard-test-not-a-key-0123456789";

/// A made-up subscription token: Claude Code words a usage limit with its reset time only when
/// signed in with one.
const TOKEN: &str = "sk-ant-oat01-switchyard-test-not-a-token";

/// Claude Code as the built-in `claude` provider (started with the agent's session id, which its
/// resume names), pointed at `model`, committing as "Claude".
fn providers_toml(bin: &Path, model: &ScriptedModel) -> String {
    providers_toml_signed_in(bin, model, &format!("ANTHROPIC_API_KEY = {KEY:?}"))
}

/// [`providers_toml`] with `auth` (a key, or a subscription's token) in the pane's environment.
fn providers_toml_signed_in(bin: &Path, model: &ScriptedModel, auth: &str) -> String {
    let claude = bin.join("claude").to_string_lossy().into_owned();
    format!(
        "[providers.claude]\ncommand = [{claude:?}, \"--session-id\", \"{{session_id}}\"]\nresume = [{claude:?}, \"--resume\", \"{{session_id}}\"]\n\
         screen_rules = \"claude\"\nsetup = \"claude\"\n\
         env = {{ ANTHROPIC_BASE_URL = {url:?}, {auth}, \
         GIT_AUTHOR_NAME = \"Claude\", GIT_AUTHOR_EMAIL = \"claude@example.com\", \
         GIT_COMMITTER_NAME = \"Claude\", GIT_COMMITTER_EMAIL = \"claude@example.com\" }}\n",
        url = model.url
    )
}

fn group<'a>(wish: &'a Value, key: &str) -> &'a Value {
    wish["groups"].as_array().expect("groups").iter().find(|g| g["key"] == key).expect("group")
}

/// Files under `dir` named `name`, at any depth.
fn find(dir: &Path, name: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() && !path.is_symlink() {
            found.extend(find(&path, name));
        } else if entry.file_name() == name {
            found.push(path);
        }
    }
    found
}

/// Polls until `check` holds; on the deadline, fails as [`timed_out`] says.
async fn until(app: &TestApp, model: &ScriptedModel, what: &str, check: impl Fn() -> bool) {
    let started = std::time::Instant::now();
    while !check() {
        if started.elapsed() > RUN {
            timed_out(app, model, what, &Value::Null).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls the wish `letters` until it is merged, and answers it; on the deadline, fails as
/// [`timed_out`] says.
async fn merged(app: &TestApp, model: &ScriptedModel) -> Value {
    let started = std::time::Instant::now();
    loop {
        let wish = app.get_ok("/api/v1/wishes/letters").await;
        if wish["status"] == "merged" {
            return wish;
        }
        if started.elapsed() > RUN {
            timed_out(app, model, "the wish merges", &wish).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Fails waiting for `what`, showing `wish`, the agents, their screens and what the model was
/// asked (the start of each prompt, how many results and earlier prompts it came with) and did.
async fn timed_out(app: &TestApp, model: &ScriptedModel, what: &str, wish: &Value) -> ! {
    let agents = app.get_ok("/api/v1/agents?limit=100").await;
    let mut screens = String::new();
    for agent in agents["items"].as_array().into_iter().flatten() {
        let name = agent["name"].as_str().unwrap_or_default();
        let mail = app.get_ok(&format!("/api/v1/agents/{name}/messages")).await;
        let (story, screen) = (crate::real_clis::story(app, name).await, crate::real_clis::screen(app, name));
        screens.push_str(&format!("\n--- {name} ({}):\n{story}\nmessages: {mail:#}\n{screen}", agent["state"]));
    }
    let log: Vec<String> = model
        .log()
        .iter()
        .map(|l| {
            let prompt: String = unframed(&l.prompt).chars().take(60).collect();
            let (results, earlier) = (l.results.len(), l.earlier.len());
            format!("{prompt:?} ({results} results, {earlier} earlier): {:?} {:?}", l.action, l.cue)
        })
        .collect();
    panic!("timed out waiting for: {what}\n{wish:#}\n{agents:#}\n{screens}\nmodel: {log:#?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_whose_pane_is_killed_goes_on_in_its_own_conversation_and_its_group_lands() {
    interrupted_and_resumed(Kill::Pane).await;
}

/// The whole tmux server killed, every pane with it, as a reboot would.
#[tokio::test(flavor = "multi_thread")]
async fn claude_code_whose_tmux_server_is_killed_goes_on_in_its_own_conversation_and_its_group_lands() {
    interrupted_and_resumed(Kill::Server).await;
}

/// What the test kills under the working engineer.
#[derive(Clone, Copy)]
pub(crate) enum Kill {
    Pane,
    Server,
}

async fn interrupted_and_resumed(kill: Kill) {
    let Some(bin) = agent_clis() else { return };
    let model = ScriptedModel::start().await;
    let (app, repo) = conducted(&providers_toml(&bin, &model)).await;
    let (name, engineer) = killed_mid_turn_and_merged(&app, &repo, &model, kill).await;
    // The same agent in the same session: resumed, not replaced.
    let session = engineer["provider_session_id"].as_str().expect("its session").to_owned();
    assert_eq!(app.agent(&name).await["provider_session_id"], session.as_str());
    // Its transcript goes on: one file holds the brief's turn and the turn after the resume.
    let transcripts = find(app._data_dir.path(), &format!("{session}.jsonl"));
    assert_eq!(transcripts.len(), 1, "{transcripts:?}");
    let transcript = std::fs::read_to_string(&transcripts[0]).unwrap();
    let brief_at = transcript.find("Your assignment: group").expect("the brief's turn");
    let resumed_at = transcript.find("Your session was interrupted").expect("the turn after the resume");
    assert!(brief_at < resumed_at, "the old turn, then the new one");
}

/// The engineer's request after its first step (its write of a.txt): a session with a turn to
/// resume, mid-turn. Only the engineer's own requests count (not a title its CLI asks for).
fn engineers_second_step(turn: &Turn) -> bool {
    turn.prompt.contains("Your assignment: group") && turn.results.len() == 1
}

/// The wish `letters` planned in `app` (its project conducted by the CLI under test, no review),
/// its engineer's pane — or the whole tmux server, as `kill` says — killed while the model
/// streams the answer to its second step, and the wish merged with no person: the group done
/// by the same engineer (the only one), a.txt on the target, and the model, told to go on,
/// finding the assignment further up the conversation (the resumed request carries it) and
/// doing it. Answers the engineer's name and the engineer as it was before the kill.
pub(crate) async fn killed_mid_turn_and_merged(
    app: &TestApp,
    repo: &Path,
    model: &ScriptedModel,
    kill: Kill,
) -> (String, Value) {
    let stalled = Cue::Slow { pause: Duration::from_secs(600) };
    model.cue_when(stalled.clone(), 1, engineers_second_step);
    plan_letters(app).await;

    until(app, model, "the engineer's brief is being answered", || {
        model.log().iter().any(|l| l.cue.as_ref() == Some(&stalled) && l.prompt.contains("Your assignment: group"))
    })
    .await;
    let wish = app.get_ok("/api/v1/wishes/letters").await;
    let name = group(&wish, "a")["assignee"].as_str().expect("the engineer").to_owned();
    let engineer = app.agent(&name).await;
    let pane = engineer["tmux_pane"].as_str().expect("its pane").to_owned();
    match kill {
        Kill::Pane => tmux(app, &["kill-pane", "-t", &pane]),
        Kill::Server => tmux(app, &["kill-server"]),
    };

    let merged = merged(app, model).await;
    let g = group(&merged, "a");
    assert_eq!((&g["status"], &g["assignee"]), (&json!("done"), &json!(name)), "{g}");
    assert_eq!(git(repo, &["show", "main:a.txt"]), "a\n");
    let agents = app.get_ok("/api/v1/agents?limit=100").await;
    let engineers = agents["items"].as_array().unwrap().iter().filter(|a| a["role"] == "engineer").count();
    assert_eq!(engineers, 1, "{agents:#}");
    // Told to go on, it did the assignment it found further up its conversation.
    let went_on = model.log().into_iter().find(|l| unframed(&l.prompt).starts_with("Your session was interrupted"));
    let went_on = went_on.unwrap_or_else(|| panic!("the model was told to go on: {:#?}", model.log()));
    assert!(went_on.earlier.iter().any(|p| p.contains("Your assignment: group `a`")), "{:#?}", went_on.earlier);
    assert!(matches!(&went_on.action, Some(Action::Write { path, .. }) if path == "a.txt"), "{:?}", went_on.action);
    (name, engineer)
}

/// The app with its conductor and merge queue, Claude Code as `providers` says, and the project
/// `alpha` conducted by it with no review; the project's repository.
async fn conducted(providers: &str) -> (TestApp, PathBuf) {
    let (app, repo) = conducted_by("claude", providers, |_| {}).await;
    // Until the policies are written by Switchyard, the user's own settings allow both tools.
    let home = app._data_dir.path().join("home/.claude");
    std::fs::create_dir_all(&home).unwrap();
    let settings =
        json!({"permissions": {"allow": ["Write", "Bash"], "defaultMode": "default", "disableAutoMode": "disable"}});
    std::fs::write(home.join("settings.json"), settings.to_string()).unwrap();
    (app, repo)
}

/// The app with its conductor and merge queue (and the worker's settings as `tweak` says), its
/// providers as `providers` says, and the project `alpha` conducted by `provider` with no
/// review; the project's repository, its target branch free for the merge queue.
pub(crate) async fn conducted_by(
    provider: &str,
    providers: &str,
    tweak: impl FnOnce(&mut WorkerConfig),
) -> (TestApp, PathBuf) {
    let app = TestApp::builder()
        .providers(providers)
        .worker(|w| {
            w.conductor = true;
            w.merge_queue = true;
            tweak(w);
        })
        .spawn()
        .await;
    let project = app.create_project("alpha").await;
    let repo = PathBuf::from(project["repo_path"].as_str().expect("repo"));
    git(&repo, &["checkout", "--quiet", "--detach"]);
    let config = json!({"conductor_config": {"provider": provider, "review": "none", "max_agents": 2}});
    app.patch_ok("/api/v1/projects/alpha", config).await;
    (app, repo)
}

/// The wish `letters`, one group adding a.txt, planned (so started).
async fn plan_letters(app: &TestApp) {
    app.create_wish(json!({"slug": "letters", "project": "alpha", "title": "Letters",
                           "groups": [{"key": "a", "title": "Add a.txt", "goal": "Add a.txt saying a"}]}))
        .await;
    app.post_ok("/api/v1/wishes/letters/plan", json!({})).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn claude_code_at_its_usage_limit_mid_group_is_resumed_after_the_reset_told_to_go_on_and_its_group_lands() {
    let Some(bin) = agent_clis() else { return };
    let model = ScriptedModel::start().await;
    let (app, repo) =
        conducted(&providers_toml_signed_in(&bin, &model, &format!("CLAUDE_CODE_OAUTH_TOKEN = {TOKEN:?}"))).await;
    // The engineer's first step (its `Write`) is answered; the request after it meets the limit.
    let limit = Cue::RateLimit { resets_in: Duration::from_secs(3600) };
    model.cue(Cue::Slow { pause: Duration::ZERO }, 1);
    model.cue(limit.clone(), 1);
    plan_letters(&app).await;

    until(&app, &model, "the engineer meets its usage limit", || {
        model.log().iter().any(|l| l.cue.as_ref() == Some(&limit))
    })
    .await;
    let wish = app.get_ok("/api/v1/wishes/letters").await;
    let name = group(&wish, "a")["assignee"].as_str().expect("the engineer").to_owned();
    let limited = app
        .get_until(&format!("/api/v1/agents/{name}"), "the engineer suspended until the reset", RUN, &[], |a| {
            a["state"] == "suspended"
        })
        .await;
    let session = limited["provider_session_id"].as_str().expect("its session").to_owned();
    let until_reset: chrono::DateTime<chrono::Utc> =
        limited["suspended_until"].as_str().expect("a reset time").parse().unwrap();
    assert!(until_reset > chrono::Utc::now(), "the reset Claude Code named: {limited}");
    // The hour passes.
    sqlx::query("UPDATE agents SET suspended_until = now() WHERE name = $1")
        .bind(&name)
        .execute(&app.pool)
        .await
        .unwrap();

    let story = format!("/api/v1/events?types=agent.state_changed&subject=agent:{name}&limit=50");
    let merged = app
        .get_until("/api/v1/wishes/letters", "the wish merges", RUN, &["/api/v1/agents?limit=100", &story], |w| {
            w["status"] == "merged"
        })
        .await;
    let g = group(&merged, "a");
    assert_eq!((&g["status"], &g["assignee"]), (&json!("done"), &json!(name)), "{g}");
    assert_eq!(git(&repo, &["show", "main:a.txt"]), "a\n");
    // The same agent in the same session, told why it stopped and to go on.
    assert_eq!(app.agent(&name).await["provider_session_id"], session.as_str());
    let went_on = model.log().into_iter().find(|l| l.prompt.contains("Your session was interrupted"));
    let went_on = went_on.unwrap_or_else(|| panic!("the model was told to go on: {:#?}", model.log()));
    assert!(went_on.prompt.contains("usage limit was reached; it has reset"), "{}", went_on.prompt);
}
