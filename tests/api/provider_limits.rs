//! Usage limits and overloads with the real CLIs (Claude Code, Codex, Gemini CLI, the versions
//! `./dev deps` pins), each pointed at the scripted model on loopback, which answers on cue with
//! the vendor's own 429 (error body, reset headers) or overload. What the CLI prints is read by
//! its screen rules: at a limit the agent is suspended until the reset the CLI names, its
//! provider is given no new group until then (a group that allows any provider goes to the
//! project's fallback), and after the reset the same session is resumed; through an overload
//! the CLI's own retries are `working`, never `error`. No test waits a real reset: the reset is
//! brought forward in the database, as the clock reaching it would. Skipped, saying why, as
//! `real_clis` is when the CLIs are not installed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard::providers::Providers;

use crate::fake_agent::state_changes;
use crate::helpers::TestApp;
use crate::real_clis::{agent_clis, located, record, screen, story, version, wait_for, walk, START};
use crate::scripted_model::{Cue, ScriptedModel};
use switchyard::domain::agent::AgentState;

/// A made-up key: nothing but the scripted model ever sees it.
const CLAUDE_KEY: &str = "sk-ant-switchyard-test-not-a-key-0123456789";

/// A wish's groups done by real CLIs starting slowly on a loaded machine.
const RUN: Duration = Duration::from_secs(300);

/// The built-in `claude` (an API key), `codex` and `gemini`, each run from `bin` and pointed at
/// `model` (Codex through the user's `config.toml`, see [`crate::unattended_codex::user_home`]).
fn providers_toml(bin: &Path, model: &ScriptedModel) -> String {
    let builtin = Providers::builtin();
    let identity = |who: &str| {
        format!(
            "GIT_AUTHOR_NAME = \"{who}\", GIT_AUTHOR_EMAIL = \"{who}@example.com\", \
             GIT_COMMITTER_NAME = \"{who}\", GIT_COMMITTER_EMAIL = \"{who}@example.com\""
        )
    };
    let mut toml = String::new();
    for (name, env) in [
        ("claude", format!("ANTHROPIC_BASE_URL = {:?}, ANTHROPIC_API_KEY = {CLAUDE_KEY:?}", model.url)),
        ("codex", "OPENAI_API_KEY = \"sk-switchyard-test-not-a-key\"".to_owned()),
        ("gemini", format!("GEMINI_API_KEY = \"switchyard-test-not-a-key\", GOOGLE_GEMINI_BASE_URL = {:?}", model.url)),
    ] {
        let provider = builtin.get(name).expect("built in");
        toml.push_str(&format!(
            "[providers.{name}]\ncommand = {}\nresume = {}\nscreen_rules = \"{name}\"\nsetup = \"{name}\"\n\
             env = {{ {env}, {} }}\n\n",
            located(bin, &provider.command),
            located(bin, provider.resume.as_ref().expect("resumable")),
            identity(name),
        ));
    }
    toml
}

/// The app (with the conductor when `conducted`), its CLIs talking to a fresh scripted model,
/// and the project `alpha`.
struct Setup {
    app: TestApp,
    model: ScriptedModel,
    _home: tempfile::TempDir,
    bin: PathBuf,
}

async fn setup(conducted: bool) -> Option<Setup> {
    let bin = agent_clis()?;
    let model = ScriptedModel::start().await;
    let home = crate::unattended_codex::user_home(&model);
    let path = home.path().to_path_buf();
    let app = TestApp::builder()
        .providers(&providers_toml(&bin, &model))
        .worker(|w| {
            w.provider_home = Some(path);
            w.conductor = conducted;
        })
        .spawn()
        .await;
    app.create_project("alpha").await;
    Some(Setup { app, model, _home: home, bin })
}

/// An agent of `provider` in its own clone, idle.
async fn idle_agent(app: &TestApp, name: &str, provider: &str) -> Value {
    app.create_agent(json!({"name": name, "project": "alpha", "kind": "worker", "role": "engineer",
        "provider": provider, "clone": "agent"}))
        .await;
    wait_for(app, name, "idle", START).await
}

/// Until `check` holds of the model's log; on the deadline, fails showing `name`'s screen.
async fn model_until(s: &Setup, name: &str, what: &str, check: impl Fn(&[crate::scripted_model::Logged]) -> bool) {
    let started = Instant::now();
    while !check(&s.model.log()) {
        if started.elapsed() > START {
            let log: Vec<String> = s.model.log().iter().map(|l| format!("{:?} {:?}", l.action, l.cue)).collect();
            panic!(
                "timed out waiting for: {what}\n{}\n{}\n{}\nmodel: {log:#?}",
                s.app.agent(name).await,
                story(&s.app, name).await,
                screen(&s.app, name)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether the model answered a turn whose prompt holds `words`.
fn answered(log: &[crate::scripted_model::Logged], words: &str) -> bool {
    log.iter().any(|l| l.prompt.contains(words) && l.action.is_some())
}

/// Watches `name` until `state`, recording each distinct screen that holds `words`; returns the
/// agent and the screens seen (oldest first).
async fn screens_until(app: &TestApp, name: &str, state: &str, words: &str, within: Duration) -> (Value, Vec<String>) {
    let started = Instant::now();
    let mut seen: Vec<String> = Vec::new();
    loop {
        let now = screen(app, name);
        if now.contains(words) && seen.last() != Some(&now) {
            seen.push(now);
        }
        let agent = app.agent(name).await;
        if agent["state"] == state {
            return (agent, seen);
        }
        if started.elapsed() > within {
            panic!(
                "{name} is not {state} after {within:?}: {agent}\n{}\n{}",
                story(app, name).await,
                screen(app, name)
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The reset the agent is held until, as a time.
fn suspended_until(agent: &Value) -> chrono::DateTime<chrono::Utc> {
    agent["suspended_until"].as_str().unwrap_or_else(|| panic!("a reset time: {agent}")).parse().expect("a timestamp")
}

/// The reset comes: brought forward to now, as the clock reaching it would.
async fn reset_now(app: &TestApp, name: &str) {
    sqlx::query("UPDATE agents SET suspended_until = now() WHERE name = $1")
        .bind(name)
        .execute(&app.pool)
        .await
        .unwrap();
}

/// The CLI's own session records under the app's data directory that hold every one of `words`
/// (one file: one conversation).
fn conversation_files(app: &TestApp, words: &[&str]) -> Vec<PathBuf> {
    walk(app._data_dir.path())
        .into_iter()
        .filter(|p| {
            std::fs::read(p)
                .map(|bytes| {
                    let text = String::from_utf8_lossy(&bytes);
                    words.iter().all(|w| text.contains(w))
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Gemini CLI, a message at a time: an overload (503s) it retries through is `working`, then
/// the answer, never `error`. At a usage limit (a 429 with Google's `RESOURCE_EXHAUSTED` body,
/// its `QuotaFailure` and a `RetryInfo` delay of 10 minutes: more than the CLI retries on its
/// own) it says "Usage limit reached for …" and "Access resets at <time>.", and the agent is
/// suspended until that time. After the reset the same session is resumed: it answers the next
/// message in the conversation it had.
#[tokio::test(flavor = "multi_thread")]
async fn gemini_cli_at_its_usage_limit_is_suspended_until_the_reset_it_names_and_an_overload_is_working() {
    let Some(s) = setup(false).await else { return };
    let v = version(&s.bin, "gemini");
    idle_agent(&s.app, "owl", "gemini").await;

    s.model.cue(Cue::Overload, 2);
    let before = state_changes(&s.app, "owl").await.len();
    s.app.send_message("owl", "First question.").await;
    let overloaded =
        |log: &[crate::scripted_model::Logged]| log.iter().filter(|l| l.cue == Some(Cue::Overload)).count();
    model_until(&s, "owl", "the model overloaded", |log| overloaded(log) >= 1).await;
    // Gemini CLI waits seconds before each retry: the agent is working meanwhile.
    s.app
        .get_until("/api/v1/agents/owl", "owl working while Gemini CLI retries", START, &[], |a| {
            a["state"] == "working"
        })
        .await;
    model_until(&s, "owl", "the first question answered", |log| answered(log, "First question.")).await;
    wait_for(&s.app, "owl", "idle", START).await;
    assert_eq!(overloaded(&s.model.log()), 2, "Gemini CLI retried each 503");
    let changes = state_changes(&s.app, "owl").await.split_off(before);
    assert_eq!(changes, ["working", "idle"], "one turn, working through the retries: {}", story(&s.app, "owl").await);

    s.model.cue(Cue::RateLimit { resets_in: Duration::from_secs(600) }, 1);
    let asked = Instant::now();
    s.app.send_message("owl", "Second question.").await;
    let (owl, limited) = screens_until(&s.app, "owl", "suspended", "Usage limit reached", START).await;
    eprintln!("gemini {v}: usage limit to suspended in {:?}: {owl}", asked.elapsed());
    if let Some(last) = limited.last() {
        eprintln!("--- gemini usage limit screen:\n{last}");
        record("gemini", "usage_limit-api-key", &v, last);
        assert!(last.contains("Access resets at"), "{last}");
    }
    let ahead = suspended_until(&owl) - chrono::Utc::now();
    assert!(ahead > chrono::Duration::minutes(8) && ahead <= chrono::Duration::minutes(10), "{owl}");

    // The resumed session shows the conversation it had (Gemini CLI loads it only after drawing
    // its prompt; the worker counts it at its prompt once loaded).
    resumed_in_the_same_conversation(&s, &owl, Some("Second question.")).await;
}

/// Claude Code with an API key (not a subscription) at its organisation's rate limit: a 429
/// with the API's `anthropic-ratelimit-requests-reset` and `retry-after` headers. A short one
/// (3 s, twice) Claude Code waits out itself — "API error · retrying in 4s · attempt 1/10" —
/// and the agent is `working` throughout, then answers, never `error`. A long one (an hour) it
/// does not wait: "API Error: Request rejected (429) · This request would exceed the rate
/// limit …", the turn stopped; the agent is suspended for a minute (the API's limits are per
/// minute, and the words name no reset), then resumed in the same session, which answers the
/// next message in the conversation it had.
#[tokio::test(flavor = "multi_thread")]
async fn claude_code_with_an_api_key_waits_out_a_short_rate_limit_working_and_is_suspended_at_a_long_one() {
    let Some(s) = setup(false).await else { return };
    let v = version(&s.bin, "claude");
    idle_agent(&s.app, "fox", "claude").await;

    s.model.cue(Cue::RateLimit { resets_in: Duration::from_secs(3) }, 2);
    let before = state_changes(&s.app, "fox").await.len();
    let message = s.app.send_message("fox", "First question.").await;
    s.app.delivered(message, START).await;
    let (_, retrying) = screens_until(&s.app, "fox", "idle", "retrying in", START).await;
    model_until(&s, "fox", "the first question answered", |log| answered(log, "First question.")).await;
    wait_for(&s.app, "fox", "idle", START).await;
    if let Some(first) = retrying.first() {
        record("claude", "working-api-key-rate-limit-retrying", &v, first);
    }
    let limited = s.model.log().iter().filter(|l| matches!(l.cue, Some(Cue::RateLimit { .. }))).count();
    assert_eq!(limited, 2, "Claude Code retried each 429");
    let changes = state_changes(&s.app, "fox").await.split_off(before);
    assert_eq!(changes, ["working", "idle"], "one turn, working through the retries: {}", story(&s.app, "fox").await);

    s.model.cue(Cue::RateLimit { resets_in: Duration::from_secs(3600) }, 1);
    s.app.send_message("fox", "Second question.").await;
    let (fox, seen) = screens_until(&s.app, "fox", "suspended", "Request rejected (429)", START).await;
    // The pane goes as the agent is suspended: under load the test may never see the screen.
    if let Some(last) = seen.last() {
        record("claude", "usage_limit-api-key-rate-limit", &v, last);
        assert!(last.contains("exceed the rate limit for your organization"), "{last}");
    }
    let ahead = suspended_until(&fox) - chrono::Utc::now();
    assert!(ahead > chrono::Duration::zero() && ahead <= chrono::Duration::seconds(61), "{fox}");

    resumed_in_the_same_conversation(&s, &fox, None).await;
}

/// The suspended `agent`'s reset come: it is resumed in its own session (showing `shown` of
/// its conversation first, when given), answers "Third question." in the conversation that
/// holds "First question.", and was suspended once.
async fn resumed_in_the_same_conversation(s: &Setup, agent: &Value, shown: Option<&str>) {
    let name = agent["name"].as_str().expect("a name");
    reset_now(&s.app, name).await;
    let resumed = s
        .app
        .get_until(&format!("/api/v1/agents/{name}"), "resumed and idle", START, &[], |a| a["state"] == "idle")
        .await;
    assert_eq!(resumed["provider_session_id"], agent["provider_session_id"], "{resumed}");
    if let Some(words) = shown {
        crate::real_clis::screen_shows(&s.app, name, words).await;
        wait_for(&s.app, name, "idle", START).await;
    }
    s.app.send_message(name, "Third question.").await;
    model_until(s, name, "the third question answered", |log| answered(log, "Third question.")).await;
    wait_for(&s.app, name, "idle", START).await;
    let suspensions = state_changes(&s.app, name).await.iter().filter(|c| *c == "suspended").count();
    assert_eq!(suspensions, 1, "{}", story(&s.app, name).await);
    let files = conversation_files(&s.app, &["First question.", "Third question."]);
    assert!(!files.is_empty(), "one conversation holds the first and the third question");
}

fn group<'a>(wish: &'a Value, key: &str) -> &'a Value {
    wish["groups"].as_array().expect("groups").iter().find(|g| g["key"] == key).expect("the group")
}

/// A real `limited` CLI at its usage limit while a wish is conducted: its provider is given no
/// new group until the reset — the group on the project's provider waits, `ready`, while the
/// group that allows any provider goes to the project's fallback (a real `fallback` CLI), which
/// does it. After the reset the limited agent is resumed in its own session (it answers the next
/// message in the same conversation) and the waiting group goes to a `limited` agent, which
/// does it: the wish completes.
async fn a_provider_at_its_limit_gets_no_new_group_until_the_reset(limited: &str, fallback: &str, words: &str) {
    let Some(s) = setup(true).await else { return };
    let app = &s.app;
    let config = json!({"provider": limited, "fallback_providers": [fallback], "review": "none", "max_agents": 4});
    app.patch_ok("/api/v1/projects/alpha", json!({"conductor_config": config})).await;
    idle_agent(app, "owl", limited).await;
    s.model.cue(Cue::RateLimit { resets_in: Duration::from_secs(600) }, 1);
    s.app.send_message("owl", "Second question.").await;
    let (owl, seen) = screens_until(app, "owl", "suspended", words, START).await;
    eprintln!("{limited} at its limit: {}", seen.last().map(String::as_str).unwrap_or("(not seen)"));
    // Ten minutes on, as the CLI says: longer than the rest of the test takes before the reset.
    assert!(suspended_until(&owl) - chrono::Utc::now() > chrono::Duration::minutes(8), "{owl}");

    app.create_wish(json!({"slug": "later", "project": "alpha", "title": "Letters",
        "groups": [{"key": "waits", "title": "Add a.txt", "goal": "Add a.txt saying a"},
                   {"key": "falls-back", "title": "Add b.txt", "goal": "Add b.txt saying b", "provider": "any"}]}))
        .await;
    app.post_ok("/api/v1/wishes/later/plan", json!({})).await;
    let context = ["/api/v1/agents?limit=100"];
    let wish = app
        .get_until("/api/v1/wishes/later", "the group that allows any provider is done", RUN, &context, |w| {
            group(w, "falls-back")["status"] == "done"
        })
        .await;
    let helper = app.agent(group(&wish, "falls-back")["assignee"].as_str().expect("its agent")).await;
    assert_eq!(helper["provider"], fallback, "{helper}");
    // The conductor went round many times meanwhile: the other group still waits for the reset.
    let waits = group(&wish, "waits");
    assert_eq!((&waits["status"], &waits["assignee"]), (&json!("ready"), &Value::Null), "{wish:#}");
    assert_eq!(app.agent_state("owl").await, AgentState::Suspended);

    let session = owl["provider_session_id"].clone();
    let reset = chrono::Utc::now();
    reset_now(app, "owl").await;
    let done = app
        .get_until("/api/v1/wishes/later", "the wish completes after the reset", RUN, &context, |w| {
            w["status"] == "completed"
        })
        .await;
    let engineer = app.agent(group(&done, "waits")["assignee"].as_str().expect("its agent")).await;
    assert_eq!(engineer["provider"], limited, "{engineer}");
    let assigned: Vec<Value> =
        app.events_until("types=task.assigned&limit=50", "the assignments", |e| e.len() >= 2).await;
    let waited = assigned.iter().find(|e| e["payload"]["group"] == "waits").expect("waits assigned");
    let at: chrono::DateTime<chrono::Utc> = waited["created_at"].as_str().unwrap().parse().unwrap();
    assert!(at >= reset, "`waits` was given to {limited} at {at}, before the reset at {reset}");
    let repo = crate::helpers::repo_of(&app.get_ok("/api/v1/projects/alpha").await);
    let branch = done["branch"].as_str().expect("the wish's branch");
    for (file, text) in [("a.txt", "a\n"), ("b.txt", "b\n")] {
        assert_eq!(crate::helpers::git(&repo, &["show", &format!("{branch}:{file}")]), text, "{file}");
    }

    // The limited agent came back in its own session, and goes on in the same conversation.
    let owl = app.get_until("/api/v1/agents/owl", "owl resumed and idle", START, &[], |a| a["state"] == "idle").await;
    assert_eq!(owl["provider_session_id"], session, "{owl}");
    crate::real_clis::screen_shows(app, "owl", "Second question.").await;
    wait_for(app, "owl", "idle", START).await;
    app.send_message("owl", "Third question.").await;
    model_until(&s, "owl", "the third question answered", |log| answered(log, "Third question.")).await;
    let files = conversation_files(app, &["Second question.", "Third question."]);
    assert!(!files.is_empty(), "one conversation holds the second and the third question");
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_cli_at_its_limit_gets_no_new_group_until_the_reset_and_a_group_for_any_goes_to_codex() {
    a_provider_at_its_limit_gets_no_new_group_until_the_reset("gemini", "codex", "Usage limit reached").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn codex_at_its_limit_gets_no_new_group_until_the_reset_and_a_group_for_any_goes_to_gemini_cli() {
    a_provider_at_its_limit_gets_no_new_group_until_the_reset("codex", "gemini", "hit your usage limit").await;
}
