//! The fake agent of the mailbox tests (`tests/fake_agent/fake-inbox.pl`) as a provider, and
//! what it logged: every prompt submitted in its pane, byte for byte, one hex line each.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use uuid::Uuid;

use crate::helpers::{eventually, TestApp};

/// The fake agent as provider `fake-inbox` (its resume command passes `resumed`), logging into
/// `log_dir`, with extra `KEY = "value"` environment entries.
pub fn providers_toml(log_dir: &Path, extra_env: &[(&str, &str)]) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let script = format!("{root}/tests/fake_agent/fake-inbox.pl");
    let mut env = format!(
        "SWITCHYARD_BIN = \"{}\", FAKE_LOG = \"{}\", FAKE_TURN_MS = \"5\"",
        env!("CARGO_BIN_EXE_switchyard"),
        log_dir.display()
    );
    for (key, value) in extra_env {
        env.push_str(&format!(", {key} = \"{value}\""));
    }
    format!(
        r#"[providers.fake-inbox]
command = ["{script}"]
resume = ["{script}", "resumed"]
screen_rules = "claude"
install_hooks = false
env = {{ {env} }}
"#
    )
}

/// Every prompt the agent `name` submitted, in order, byte for byte: a message's starts with the
/// line naming its sender.
pub fn submitted(log_dir: &Path, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(log_dir.join(format!("{name}.log"))).unwrap_or_default();
    text.lines()
        .map(|line| String::from_utf8(hex::decode(line).expect("a hex line")).expect("a UTF-8 prompt"))
        .collect()
}

/// Every prompt the agent `name` submitted, in order, each message's without its first line
/// (the one naming its sender): what was sent, as it arrived.
pub fn prompts(log_dir: &Path, name: &str) -> Vec<String> {
    submitted(log_dir, name)
        .into_iter()
        .map(|prompt| match prompt.split_once('\n') {
            Some((frame, body)) if frame.starts_with("[message from ") => body.to_owned(),
            _ => prompt,
        })
        .collect()
}

/// The names of the hooks the agent `name` has run (each reached the server or gave up), in order.
pub fn hooks_run(log_dir: &Path, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(log_dir.join(format!("{name}.log.hooks"))).unwrap_or_default();
    text.lines().map(str::to_owned).collect()
}

/// The body of an API request to `url` (the in-process app's, or a binary's).
pub async fn agent_json(client: &reqwest::Client, api: &str, token: &str, name: &str) -> Value {
    client
        .get(format!("{api}/api/v1/agents/{name}"))
        .bearer_auth(token)
        .send()
        .await
        .expect("get agent")
        .json()
        .await
        .expect("json")
}

/// Registers a fake-inbox agent in `project` (running in the project's repository) and waits
/// until it is idle at its prompt.
pub async fn idle_agent(client: &reqwest::Client, api: &str, token: &str, project: &str, name: &str) -> Value {
    let created = client
        .post(format!("{api}/api/v1/agents"))
        .bearer_auth(token)
        .json(&json!({"name": name, "project": project, "kind": "worker", "role": "engineer",
            "provider": "fake-inbox", "clone": "none"}))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 201, "{:?}", created.text().await);
    eventually(&format!("{name} is idle in its pane"), Duration::from_secs(30), || async {
        let agent = agent_json(client, api, token, name).await;
        agent["state"] == "idle" && agent["tmux_pane"].is_string()
    })
    .await;
    agent_json(client, api, token, name).await
}

/// Sends `body` to `to` as the operator; returns the message's id.
pub async fn send(client: &reqwest::Client, api: &str, token: &str, to: &str, body: &str) -> Uuid {
    let sent = client
        .post(format!("{api}/api/v1/messages"))
        .bearer_auth(token)
        .json(&json!({"to": to, "body": body}))
        .send()
        .await
        .expect("send");
    assert_eq!(sent.status(), 201, "{:?}", sent.text().await);
    let sent: Value = sent.json().await.expect("json");
    assert_eq!(sent["state"], "pending", "{sent}");
    sent["id"].as_str().and_then(|s| s.parse().ok()).expect("id")
}

/// The stored message.
pub async fn message(client: &reqwest::Client, api: &str, token: &str, id: Uuid) -> Value {
    client
        .get(format!("{api}/api/v1/messages/{id}"))
        .bearer_auth(token)
        .send()
        .await
        .expect("get message")
        .json()
        .await
        .expect("json")
}

pub async fn wait_delivered(client: &reqwest::Client, api: &str, token: &str, id: Uuid, within: Duration) -> Value {
    eventually(&format!("message {id} is delivered"), within, || async {
        message(client, api, token, id).await["state"] == "delivered"
    })
    .await;
    message(client, api, token, id).await
}

impl TestApp {
    /// A fake-inbox agent of this app, idle.
    pub async fn idle_inbox_agent(&self, project: &str, name: &str) -> Value {
        idle_agent(&self.client, &self.address, &self.admin_token, project, name).await
    }

    pub async fn send_message(&self, to: &str, body: &str) -> Uuid {
        send(&self.client, &self.address, &self.admin_token, to, body).await
    }

    pub async fn delivered(&self, id: Uuid, within: Duration) -> Value {
        wait_delivered(&self.client, &self.address, &self.admin_token, id, within).await
    }

    pub async fn message(&self, id: Uuid) -> Value {
        message(&self.client, &self.address, &self.admin_token, id).await
    }
}
