//! `switchyard hook`: what Claude Code's hooks run in an agent's pane. It reads the hook JSON on
//! stdin and posts it to `POST {SWITCHYARD_URL}/api/v1/agents/{SWITCHYARD_AGENT}/hooks` with the
//! agent's own token ([`super::client::Credentials`]).
//!
//! A hook must never break Claude Code: whatever happens, this exits 0 with nothing on stdout
//! (Claude Code reads a hook's stdout), gives up after 2 seconds, and reports failures on stderr
//! only — never the token.

use std::io::Read;
use std::time::Duration;

use serde_json::Value;

const TIMEOUT: Duration = Duration::from_secs(2);
/// Stdin beyond this is not read: no hook payload is this large.
const STDIN_LIMIT: u64 = 16 * 1024 * 1024;
/// Above this the tool's input and output are dropped: the state does not depend on them, and the
/// server refuses hook bodies over 1 MiB.
const TRIM_ABOVE: usize = 256 * 1024;

/// Runs the hook; always "succeeds".
pub fn run() {
    if let Err(message) = forward() {
        eprintln!("switchyard hook: {message}");
    }
}

fn forward() -> Result<(), String> {
    let credentials = super::client::Credentials::from_env()?;
    let url = credentials.url.clone().ok_or("SWITCHYARD_URL is not set; not reporting")?;
    let agent = credentials.agent.clone().ok_or("SWITCHYARD_AGENT is not set; not reporting")?;
    let token = credentials.token;
    let mut input = Vec::new();
    std::io::stdin().take(STDIN_LIMIT).read_to_end(&mut input).map_err(|e| format!("reading stdin: {e}"))?;
    let body = trim(&input)?;
    let (client, base) = super::client::http_client(&url, TIMEOUT)?;
    let endpoint = format!("{base}/api/v1/agents/{agent}/hooks");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    runtime.block_on(async {
        let response = client
            .post(&endpoint)
            .bearer_auth(token)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| format!("posting to {endpoint}: {e}"))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let text = response.text().await.unwrap_or_default();
        let text: String = text.chars().take(300).collect();
        Err(format!("{endpoint} answered {status}: {text}"))
    })
}

/// The body to send: the input as it is, or without the tool's input and output when it is large.
fn trim(input: &[u8]) -> Result<Vec<u8>, String> {
    if input.len() <= TRIM_ABOVE {
        return Ok(input.to_vec());
    }
    let mut value: Value = serde_json::from_slice(input).map_err(|e| format!("the hook input is not JSON: {e}"))?;
    if let Some(object) = value.as_object_mut() {
        for field in ["tool_input", "tool_response"] {
            if object.contains_key(field) {
                object.insert(field.to_owned(), Value::Null);
            }
        }
        object.insert("switchyard_trimmed".to_owned(), Value::Bool(true));
    }
    serde_json::to_vec(&value).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_payload_is_sent_as_it_is_and_a_large_one_without_the_tool_input() {
        let small = br#"{"hook_event_name":"Stop"}"#;
        assert_eq!(trim(small).unwrap(), small);
        let content = "x".repeat(TRIM_ABOVE);
        let large = serde_json::json!({"hook_event_name": "PreToolUse", "tool_name": "Write",
            "tool_input": {"content": content}});
        let sent: Value = serde_json::from_slice(&trim(&serde_json::to_vec(&large).unwrap()).unwrap()).unwrap();
        assert_eq!(sent["hook_event_name"], "PreToolUse");
        assert_eq!(sent["tool_name"], "Write");
        assert!(sent["tool_input"].is_null());
    }
}
