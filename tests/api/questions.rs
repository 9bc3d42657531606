//! A question asked with each real CLI's own question tool — Claude Code's `AskUserQuestion`,
//! Codex's `request_user_input`, Gemini CLI's `ask_user` — on the scripted model's cue
//! (`Ask: QUESTION | OPTION | …`), answered through the API and the dashboard: the agent is
//! `question` ("needs you"), its screen's options are listed by label (not their
//! descriptions), and the option chosen is the answer the model gets back in the tool's result.
//! A permission answered "No" in the dashboard runs nothing. Skipped, saying why, as `real_clis`
//! is, when the CLIs are not installed.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard::providers::Providers;

use crate::dashboard::browser::until_text;
use crate::helpers::{assert_json, TestApp};
use crate::real_clis::{agent_clis, located, screen, start, until, wait_for, START};
use crate::scripted_model::{Action, ScriptedModel};

/// The question agent `name` is asked, and its options: option 2 is the answer the tests choose.
fn ask(name: &str) -> String {
    format!("Ask: Which colour should {name} use? | Red | Blue | Green")
}
const OPTIONS: [&str; 3] = ["Red", "Blue", "Green"];

/// The policies a provider is configured with, by the suffix of its name here.
const POLICIES: [(&str, &str); 3] = [
    ("auto", ""),
    ("ask", "sandbox = \"none\"\npermissions = \"ask\"\n"),
    ("listed", "sandbox = \"none\"\npermissions = \"allow-list\"\n"),
];

/// The built-in providers run from `bin` and pointed at `model`, as they are (`claude-auto`,
/// `codex-auto`, `gemini-auto`: under the sandbox, where bubblewrap is installed, in policy
/// `auto`) and outside the sandbox in policy `ask` (`-ask`) and `allow-list` (`-listed`,
/// allowing nothing more).
fn providers_toml(bin: &Path, model: &ScriptedModel) -> String {
    let builtin = Providers::builtin();
    let url = &model.url;
    let mut toml = String::new();
    for (cli, env) in [
        ("claude", format!("ANTHROPIC_BASE_URL = {url:?}, ANTHROPIC_API_KEY = \"sk-ant-switchyard-test-not-a-key\"")),
        ("codex", "OPENAI_API_KEY = \"sk-switchyard-test-not-a-key\"".to_owned()),
        ("gemini", format!("GEMINI_API_KEY = \"switchyard-test-not-a-key\", GOOGLE_GEMINI_BASE_URL = {url:?}")),
    ] {
        let provider = builtin.get(cli).expect("built in");
        for (suffix, policy) in POLICIES {
            toml.push_str(&format!(
                "[providers.{cli}-{suffix}]\ncommand = {}\nresume = {}\nscreen_rules = \"{cli}\"\nsetup = \"{cli}\"\n\
                 {policy}env = {{ {env} }}\n\n",
                located(bin, &provider.command),
                located(bin, provider.resume.as_ref().expect("resumable")),
            ));
        }
    }
    toml
}

/// The user's own home: Codex's `config.toml` names the scripted model as its provider and
/// turns on its question tool outside plan mode (`features.default_mode_request_user_input`:
/// without it Codex 0.169 offers `request_user_input` in plan mode only).
fn user_home(model: &ScriptedModel) -> tempfile::TempDir {
    crate::unattended_codex::user_home_with(model, "\n[features]\ndefault_mode_request_user_input = true\n")
}

/// An app whose agents are the real CLIs talking to a fresh scripted model, with the project
/// `alpha`; the home lives as long as the app is used.
async fn app_with_clis() -> Option<(TestApp, ScriptedModel, tempfile::TempDir)> {
    let bin = agent_clis()?;
    let model = ScriptedModel::start().await;
    let home = user_home(&model);
    let path = home.path().to_path_buf();
    let app = TestApp::builder()
        .providers(&providers_toml(&bin, &model))
        .worker(|w| w.provider_home = Some(path))
        .spawn()
        .await;
    app.create_project("alpha").await;
    Some((app, model, home))
}

/// The options `GET /agents/{name}/screen` lists once it lists `count` of them.
async fn listed_options(app: &TestApp, name: &str, count: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let screen = app.get_ok(&format!("/api/v1/agents/{name}/screen")).await;
        let options = screen["options"].as_array().cloned().unwrap_or_default();
        if options.len() >= count {
            return options;
        }
        assert!(started.elapsed() < START, "{name}'s screen lists no {count} options: {screen:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What the question tool gave the model back on the turn after it asked `asked` (the CLI's
/// words holding the answer), once the model has it.
fn answer_given(model: &ScriptedModel, asked: &str) -> Option<String> {
    model.log().into_iter().find(|l| l.prompt.contains(asked) && !l.results.is_empty()).map(|l| l.results[0].clone())
}

/// The agent `name`, idle, is sent the question's cue: it shows `question`, its screen's
/// options are listed by label (the three asked first, without their descriptions), and option
/// 2 chosen through the API is the answer the model reads in the tool's result.
async fn option_two_answers_the_question(app: &TestApp, model: &ScriptedModel, name: &str) {
    let asked = ask(name);
    app.send_message(name, &asked).await;
    let asking = wait_for(app, name, "question", START).await;
    let options = listed_options(app, name, OPTIONS.len()).await;
    let shown = screen(app, name);
    eprintln!("{name} asks:\n{shown}");
    // With SWITCHYARD_RECORD_SCREENS, how `tests/fixtures/screens/*/question-asked-*` were made.
    let cli = name.split('-').next().expect("named after its CLI");
    let bin = agent_clis().expect("installed");
    crate::real_clis::record(cli, "question-asked", &crate::real_clis::version(&bin, cli), &shown);
    let labels: Vec<&str> = options.iter().filter_map(|o| o["label"].as_str()).collect();
    assert_eq!(labels[..OPTIONS.len()], OPTIONS, "{options:#?}\n{asking}\n{}", screen(app, name));
    assert!(!labels.iter().any(|l| l.contains(&Action::description("Blue"))), "a description in a label: {labels:?}");
    assert_eq!(options[1]["option"], 2, "{options:#?}");

    let answered = app.post(&format!("/api/v1/agents/{name}/input"), json!({"option": 2})).await;
    let answered = assert_json(answered, 200).await;
    assert_eq!(answered["chosen"], json!({"option": 2, "label": "Blue"}), "{answered}");
    until(app, model, name, "the model is given the answer", || answer_given(model, &asked).is_some()).await;
    let answer = answer_given(model, &asked).expect("an answer");
    eprintln!("{name}'s model was given: {answer}");
    assert!(answer.contains("Blue"), "option 2 is Blue: {answer}");
    assert!(!answer.contains("Red") && !answer.contains("Green"), "only option 2 was chosen: {answer}");
    wait_for(app, name, "idle", START).await;
}

/// `cli`'s agents in each of `policies` (of `auto`, `ask`, `listed`) ask their question, and
/// option 2 chosen through the API is each one's answer: a question is no permission, which a
/// policy would decide. Answers the app, for more.
async fn in_each_policy_option_two_answers_the_question(
    cli: &str,
    policies: &[&str],
) -> Option<(TestApp, ScriptedModel, tempfile::TempDir)> {
    let (app, model, home) = app_with_clis().await?;
    let names: Vec<String> = policies.iter().map(|policy| format!("{cli}-{policy}")).collect();
    for name in &names {
        start(&app, name, name).await;
    }
    for name in &names {
        wait_for(&app, name, "idle", START).await;
        option_two_answers_the_question(&app, &model, name).await;
    }
    Some((app, model, home))
}

/// Claude Code asks in policies `auto` and `ask`. In `allow-list` (its `denyInsteadOfPrompting`:
/// no one is waited for) Claude Code itself takes `AskUserQuestion` away, allow rule or not: the
/// model is told the tool is disabled and goes on, and the agent never waits on a person.
#[tokio::test(flavor = "multi_thread")]
async fn claude_codes_question_is_answered_through_the_api_with_the_option_chosen_and_in_allow_list_not_asked() {
    let Some((app, model, _home)) = in_each_policy_option_two_answers_the_question("claude", &["auto", "ask"]).await
    else {
        return;
    };
    let name = "claude-listed";
    start(&app, name, name).await;
    wait_for(&app, name, "idle", START).await;
    let asked = ask(name);
    app.send_message(name, &asked).await;
    until(&app, &model, name, "the model is told", || answer_given(&model, &asked).is_some()).await;
    let told = answer_given(&model, &asked).expect("told");
    assert!(told.contains("AskUserQuestion is disabled for this session"), "{told}");
    wait_for(&app, name, "idle", START).await;
    let changes = crate::fake_agent::state_changes(&app, name).await;
    assert!(!changes.iter().any(|c| c == "question"), "{changes:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn codexs_question_is_answered_through_the_api_with_the_option_chosen_in_every_policy() {
    in_each_policy_option_two_answers_the_question("codex", &["auto", "ask", "listed"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn gemini_clis_question_is_answered_through_the_api_with_the_option_chosen_in_every_policy() {
    in_each_policy_option_two_answers_the_question("gemini", &["auto", "ask", "listed"]).await;
}

/// The clone of agent `name`.
async fn clone_of(app: &TestApp, name: &str) -> PathBuf {
    PathBuf::from(app.agent(name).await["clone_path"].as_str().expect("a clone"))
}

/// In the dashboard, in a real browser, with real Claude Code in policy `ask`: a command it
/// wants to run asks for permission on the agent's page, and tapping "No" there runs nothing;
/// then its question's options are buttons by label, and tapping option 2 is the answer the
/// model reads.
#[tokio::test(flavor = "multi_thread")]
async fn in_the_dashboard_claude_codes_permission_answered_no_runs_nothing_and_its_question_takes_the_option_tapped() {
    let Some((app, model, _home)) = app_with_clis().await else { return };
    let Some((client, _driver)) = crate::dashboard::browser::browser().await else { return };
    start(&app, "fox", "claude-ask").await;
    wait_for(&app, "fox", "idle", START).await;
    let clone = clone_of(&app, "fox").await;
    let asked = ask("fox");
    client.goto(&crate::dashboard::browser::login_link(&app).await).await.expect("log in");
    client.goto(&format!("{}/agents/fox", app.address)).await.expect("the agent's page");

    app.send_message("fox", "Run: python3 -c \"open('no.txt', 'w').write('ran')\"").await;
    wait_for(&app, "fox", "permission", START).await;
    until_text(&client, "#prompt", "asks for permission").await;
    let options = listed_options(&app, "fox", 2).await;
    let no = options.iter().find(|o| o["label"].as_str().is_some_and(|l| l.starts_with("No")));
    let no = no.unwrap_or_else(|| panic!("a No: {options:#?}"));
    let button = format!("{}. {}", no["option"], no["label"].as_str().unwrap());
    until_text(&client, "#prompt", &button).await;
    crate::dashboard::browser::screenshot(&client, "claude-permission").await;
    crate::dashboard::browser::click_button(&client, &button).await;
    // Claude Code ends the turn on "No" (the command refused, nothing run): its agent is idle.
    wait_for(&app, "fox", "idle", START).await;
    assert!(!clone.join("no.txt").exists(), "No ran it");

    app.send_message("fox", &asked).await;
    wait_for(&app, "fox", "question", START).await;
    until_text(&client, "#prompt", "2. Blue").await;
    crate::dashboard::browser::screenshot(&client, "claude-question").await;
    crate::dashboard::browser::click_button(&client, "2. Blue").await;
    until(&app, &model, "fox", "the model is given the answer", || answer_given(&model, &asked).is_some()).await;
    let answer = answer_given(&model, &asked).expect("an answer");
    assert!(answer.contains("Blue") && !answer.contains("Red"), "{answer}");
    wait_for(&app, "fox", "idle", START).await;
    client.close().await.expect("close the browser");
}
