//! The anthropic wire format of the scripted model (see the module above): its routes read a
//! [`super::Turn`] from each request and write [`super::ScriptedModel::answer`] back.
//!
//! Claude Code (`ANTHROPIC_BASE_URL` + any `ANTHROPIC_API_KEY`) sends `POST /v1/messages?beta=true`
//! with `"stream": true`: the answer is then server-sent events (`message_start`, per content
//! block `content_block_start` / `content_block_delta` / `content_block_stop`, `message_delta`
//! with the stop reason and usage, `message_stop`); without it, one `message` object. The typed
//! prompt is the last `text` block of a `user` message that is not a `<system-reminder>`, the
//! tool results since are `tool_result` blocks, and the working directory is named in the
//! system prompt ("Primary working directory: …"). An action is written as Claude Code's own
//! tools: `Write` (`file_path` absolute, `content`), `Bash` (`command`, `description`) and
//! `AskUserQuestion` (`questions`: one, with its `options`' labels and descriptions).
//!
//! Requests without tools are Claude Code's side calls (a session's title, a summary): they are
//! answered with a short text and neither meet a cue nor enter the log, so a test's cues and
//! verdicts meet the agent's own turns only.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use futures_util::StreamExt;
use serde_json::{json, Value};

use super::{Action, Answer, Cue, ScriptedModel, Turn, Usage};

pub fn routes() -> Router<ScriptedModel> {
    Router::new().route("/v1/messages", post(messages)).route("/v1/messages/count_tokens", post(count_tokens))
}

/// `count_tokens`: a rough count of the request's text (Claude Code uses it to size context).
async fn count_tokens(Json(request): Json<Value>) -> Json<Value> {
    Json(json!({"input_tokens": 1 + request.to_string().len() / 4}))
}

async fn messages(State(model): State<ScriptedModel>, headers: HeaderMap, Json(request): Json<Value>) -> Response {
    let stream = request["stream"].as_bool().unwrap_or(false);
    let model_name = request["model"].as_str().unwrap_or("claude-scripted").to_owned();
    let tools = request["tools"].as_array().is_some_and(|t| !t.is_empty());
    if !tools {
        let usage = Usage { input_tokens: 100, output_tokens: 10 };
        let blocks = vec![Block::Text("Scripted work".to_owned())];
        return reply(&model_name, blocks, "end_turn", usage, stream, None);
    }
    let turn = turn(&request);
    match model.answer("anthropic", &turn) {
        Answer::Cue(cue) => refusal(&cue, headers.contains_key("x-api-key")),
        Answer::Act { action, usage, pause } => {
            let (blocks, stop) = match action {
                Action::Write { path, content } => {
                    let file_path = absolute(&path, turn.cwd.as_deref());
                    (vec![Block::Tool("Write", json!({"file_path": file_path, "content": content}))], "tool_use")
                }
                Action::Run { command } | Action::RunUnsandboxed { command } => {
                    let description = "Run the next step";
                    (vec![Block::Tool("Bash", json!({"command": command, "description": description}))], "tool_use")
                }
                Action::Ask { question, options } => {
                    let options: Vec<_> =
                        options.iter().map(|o| json!({"label": o, "description": Action::description(o)})).collect();
                    let asked =
                        json!({"question": question, "header": "Choice", "options": options, "multiSelect": false});
                    (vec![Block::Tool("AskUserQuestion", json!({"questions": [asked]}))], "tool_use")
                }
                Action::Say(text) => (vec![Block::Text(text)], "end_turn"),
            };
            reply(&model_name, blocks, stop, usage, stream, pause)
        }
    }
}

/// The turn a request asks for: walking back from the last message, the tool results until
/// the text that was typed, and the texts typed before it.
pub fn turn(request: &Value) -> Turn {
    let mut results = Vec::new();
    let mut prompt: Option<String> = None;
    let mut earlier = Vec::new();
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    for message in messages.iter().rev() {
        if message["role"] != "user" {
            continue;
        }
        let blocks = match &message["content"] {
            Value::String(text) => vec![json!({"type": "text", "text": text})],
            Value::Array(blocks) => blocks.clone(),
            _ => Vec::new(),
        };
        for block in blocks.iter().rev() {
            match block["type"].as_str() {
                Some("tool_result") if prompt.is_none() => results.push(text_of(&block["content"])),
                Some("text") => {
                    let text = block["text"].as_str().unwrap_or_default();
                    if !text.trim_start().starts_with("<system-reminder>") {
                        match prompt {
                            None => prompt = Some(text.to_owned()),
                            Some(_) => earlier.push(text.to_owned()),
                        }
                    }
                }
                _ => {}
            }
        }
    }
    results.reverse();
    Turn { prompt: prompt.unwrap_or_default(), results, cwd: cwd(request), earlier, instructions: String::new() }
}

/// A tool result's content: a string, or text blocks.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// The working directory the system prompt (or a `system` message) names.
fn cwd(request: &Value) -> Option<String> {
    let mut texts = vec![text_of(&request["system"])];
    for message in request["messages"].as_array().into_iter().flatten() {
        texts.push(text_of(&message["content"]));
    }
    texts.iter().find_map(|text| {
        let at = text.find("working directory: ")? + "working directory: ".len();
        let line = text[at..].lines().next()?.trim();
        (!line.is_empty()).then(|| line.to_owned())
    })
}

fn absolute(path: &str, cwd: Option<&str>) -> String {
    match cwd {
        Some(cwd) if !path.starts_with('/') => format!("{}/{path}", cwd.trim_end_matches('/')),
        _ => path.to_owned(),
    }
}

enum Block {
    Text(String),
    Tool(&'static str, Value),
}

fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

fn usage_json(usage: Usage) -> Value {
    json!({"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
}

/// The answer, as one message or as its stream of events (`pause` between them).
fn reply(model: &str, blocks: Vec<Block>, stop: &str, usage: Usage, stream: bool, pause: Option<Duration>) -> Response {
    let id = new_id("msg");
    let blocks: Vec<Value> = blocks
        .into_iter()
        .map(|b| match b {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::Tool(name, input) => {
                json!({"type": "tool_use", "id": new_id("toolu"), "name": name, "input": input})
            }
        })
        .collect();
    if !stream {
        let message = json!({"id": id, "type": "message", "role": "assistant", "model": model, "content": blocks,
            "stop_reason": stop, "stop_sequence": null, "usage": usage_json(usage)});
        return (request_id(), Json(message)).into_response();
    }
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
            "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": usage_json(Usage { output_tokens: 1, ..usage })}}),
    )];
    for (index, block) in blocks.iter().enumerate() {
        let (start, delta) = match block["type"].as_str() {
            Some("tool_use") => (
                json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                json!({"type": "input_json_delta", "partial_json": block["input"].to_string()}),
            ),
            _ => (json!({"type": "text", "text": ""}), json!({"type": "text_delta", "text": block["text"]})),
        };
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        events.push(("content_block_delta", json!({"type": "content_block_delta", "index": index, "delta": delta})));
        events.push(("content_block_stop", json!({"type": "content_block_stop", "index": index})));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": usage_json(usage)}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    let frames =
        futures_util::stream::iter(events.into_iter().enumerate()).then(move |(i, (event, data))| async move {
            if let (Some(pause), true) = (pause, i > 0) {
                tokio::time::sleep(pause).await;
            }
            Ok::<_, std::convert::Infallible>(format!("event: {event}\ndata: {data}\n\n"))
        });
    let mut headers = request_id();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    (headers, Body::from_stream(frames)).into_response()
}

fn request_id() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("request-id", HeaderValue::from_str(&new_id("req")).expect("ascii"));
    headers
}

/// A cue's answer, as Anthropic's API gives it. A usage limit is worded as the account meets it:
/// an API key (`keyed`, sent as `x-api-key`) at its organisation's rate limit, with the API's
/// `anthropic-ratelimit-requests-*` / `-tokens-*` headers (resets as RFC 3339 times) and
/// `retry-after`; a subscription at its 5-hour limit, with the `anthropic-ratelimit-unified-*`
/// headers Claude Code words "You've hit your 5-hour limit · resets …" from.
fn refusal(cue: &Cue, keyed: bool) -> Response {
    let mut headers = request_id();
    let (status, kind, message) = match cue {
        Cue::RateLimit { resets_in } if keyed => {
            let reset = chrono::Utc::now() + *resets_in;
            let reset = reset.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            for (name, value) in [
                ("anthropic-ratelimit-requests-limit", "50".to_owned()),
                ("anthropic-ratelimit-requests-remaining", "0".to_owned()),
                ("anthropic-ratelimit-requests-reset", reset.clone()),
                ("anthropic-ratelimit-tokens-limit", "40000".to_owned()),
                ("anthropic-ratelimit-tokens-remaining", "40000".to_owned()),
                ("anthropic-ratelimit-tokens-reset", reset.clone()),
                ("retry-after", resets_in.as_secs().max(1).to_string()),
            ] {
                headers.insert(name, HeaderValue::from_str(&value).expect("ascii"));
            }
            (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "This request would exceed the rate limit for your organization of 50 requests per minute. \
                 For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response \
                 headers for current usage. Please reduce the prompt length or the maximum tokens requested, \
                 or try again later.",
            )
        }
        Cue::RateLimit { resets_in } => {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970");
            let reset = (now + *resets_in).as_secs().to_string();
            for (name, value) in [
                ("anthropic-ratelimit-unified-status", "rejected".to_owned()),
                ("anthropic-ratelimit-unified-reset", reset.clone()),
                ("anthropic-ratelimit-unified-5h-status", "rejected".to_owned()),
                ("anthropic-ratelimit-unified-5h-reset", reset.clone()),
                ("anthropic-ratelimit-unified-5h-utilization", "1.0".to_owned()),
                ("anthropic-ratelimit-unified-representative-claim", "five_hour".to_owned()),
                ("anthropic-ratelimit-unified-overage-status", "rejected".to_owned()),
                ("anthropic-ratelimit-unified-overage-disabled-reason", "org_level_disabled".to_owned()),
                ("retry-after", resets_in.as_secs().max(1).to_string()),
            ] {
                headers.insert(name, HeaderValue::from_str(&value).expect("ascii"));
            }
            (
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "This request would exceed your account's rate limit. Please try again later.",
            )
        }
        Cue::Overload => (StatusCode::from_u16(529).expect("a status"), "overloaded_error", "Overloaded"),
        Cue::Slow { .. } => unreachable!("a slow stream still answers"),
    };
    let body = json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": new_id("req")});
    (status, headers, Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_the_typed_text_the_tool_results_since_and_the_working_directory() {
        let request = json!({
            "system": [{"type": "text", "text": "You are Claude Code."}],
            "messages": [
                {"role": "user", "content": [
                    {"type": "text", "text": "<system-reminder>\nattribution\n</system-reminder>\n"},
                    {"type": "text", "text": "Your assignment: group `a`"}]},
                {"role": "system", "content": [{"type": "text", "text": "# Environment\n - Primary working directory: /tmp/clone\n - Is a git repository: true"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Write", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "written"},
                    {"type": "text", "text": "<system-reminder>todo</system-reminder>"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "Bash", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2",
                    "content": [{"type": "text", "text": "ran"}]}]},
            ],
        });
        let turn = turn(&request);
        assert_eq!(turn.prompt, "Your assignment: group `a`");
        assert_eq!(turn.results, ["written", "ran"]);
        assert_eq!(turn.cwd.as_deref(), Some("/tmp/clone"));
        assert_eq!(absolute("a.txt", turn.cwd.as_deref()), "/tmp/clone/a.txt");
    }
}
