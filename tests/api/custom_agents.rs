//! A custom agent whose program is a script with a shebang (`#!/usr/bin/env python3`, as aider
//! and most agent CLIs are) is seen idle at its prompt and working while a command it gave the
//! terminal to runs: the pane's process groups decide, not the program's name (tmux names the
//! interpreter, `python3`), whether it runs plain or under bubblewrap.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::helpers::{engineer, eventually, merged, TestApp};
use switchyard::domain::agent::AgentState;

/// The provider `py`: `tests/fake_agent/py-agent.py`, sandboxed or not.
fn providers(sandboxed: bool) -> String {
    let dir = format!("{}/tests/fake_agent", env!("CARGO_MANIFEST_DIR"));
    let sandbox = if sandboxed { format!("sandbox = \"bwrap\"\nsandbox_paths = [\"{dir}\"]") } else { String::new() };
    // The system's python3: a version manager's shim on the test's PATH may need more of the
    // machine than the sandbox shows.
    format!(
        "[providers.py]\ncommand = [\"{dir}/py-agent.py\"]\nscreen_rules = \"generic\"\ninstall_hooks = false\n\
         env = {{ PATH = \"/usr/bin:/bin\" }}\n{sandbox}\n"
    )
}

/// Idle at its prompt, working all through a quiet command it runs in the foreground, idle again.
async fn idle_working_idle(app: &TestApp) {
    app.create_project("alpha").await;
    app.create_agent(merged(engineer("alpha", "py"), json!({"provider": "py", "clone": "agent"}))).await;
    let context = ["/api/v1/events?subject=agent:py"];
    app.get_until("/api/v1/agents/py", "the script is idle at its prompt", Duration::from_secs(60), &context, |a| {
        a["state"] == "idle"
    })
    .await;
    let command = app.get_ok("/api/v1/agents/py/state/explain").await;
    assert_eq!(command["screen"]["foreground"], json!(null), "its own process holds the terminal: {command}");

    let sent = Instant::now();
    app.post_ok("/api/v1/agents/py/input", json!({"text": "run sleep 12"})).await;
    eventually("the command is seen running", Duration::from_secs(20), || async {
        app.agent_state("py").await == AgentState::Working
    })
    .await;
    let why = app.get_ok("/api/v1/agents/py/state/explain").await;
    assert_eq!(why["screen"]["foreground"], "sleep", "{why}");
    // The screen is still for seconds: only the terminal's foreground says the agent is busy.
    let quiet_until = sent + Duration::from_secs(8);
    while Instant::now() < quiet_until {
        assert_eq!(app.agent_state("py").await, AgentState::Working, "not working while its command runs");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eventually("idle once the command ends", Duration::from_secs(30), || async {
        app.agent_state("py").await == AgentState::Idle
    })
    .await;
}

#[tokio::test]
async fn a_python_script_agent_is_idle_at_its_prompt_and_working_while_its_command_runs() {
    let app = crate::helpers::TestApp::builder().providers(&providers(false)).worker(|_| {}).spawn().await;
    idle_working_idle(&app).await;
}

#[tokio::test]
async fn a_sandboxed_python_script_agent_is_idle_at_its_prompt_and_working_while_its_command_runs() {
    let app = crate::isolation::app_with_bwrap(&providers(true)).await;
    idle_working_idle(&app).await;
}
