//! The openai wire format of the scripted model (see the module above): OpenAI's Responses API
//! as Codex speaks it, `POST /v1/responses` with `"stream": true` (an answer is SSE:
//! `response.created`, per output item `response.output_item.added` / `.done` — text also as
//! `response.output_text.delta` — then `response.completed` with the usage). Codex 0.169 reads it
//! with `codex-api`'s `sse/responses.rs`; a request with `"stream": false` gets the same response
//! as one JSON object.
//!
//! Reading a request: the typed prompt is the last `role: "user"` message that is not one Codex
//! wrote itself (`<environment_context>`, `# AGENTS.md instructions …`, any `<tag>` wrapper);
//! the results are the `function_call_output` / `custom_tool_call_output` items after it (the
//! typed messages before it are the earlier turns a resumed session carries); the
//! working directory is `<cwd>` of the last environment context; the instructions are Codex's
//! own messages (its `AGENTS.md` among them) and its system prompt.
//!
//! Writing an action: [`Action::Write`] is an `apply_patch` call (the freeform tool Codex offers
//! its known models, a `custom_tool_call` whose input is the patch; as a function with an
//! `input` argument where offered so; else the `apply_patch` command through `exec_command`,
//! which Codex intercepts as a patch too); [`Action::Run`] is `exec_command` (`cmd`, waiting up
//! to 30 s for it: no `write_stdin` polling), [`Action::RunUnsandboxed`] the same with
//! `sandbox_permissions: "require_escalated"` and a `justification`; [`Action::Ask`] a
//! `request_user_input` call (one question with an `id`, a `header` and its options' labels and
//! descriptions: offered only where the user's configuration turns the tool on in Codex's
//! default mode, `features.default_mode_request_user_input`); [`Action::Say`] an assistant
//! message, which ends the turn.
//!
//! Cues: a usage limit is the 429 ChatGPT's backend sends (`error.type = "usage_limit_reached"`
//! with `resets_at`, and the `x-codex-primary-*` headers), which Codex words "You've hit your
//! usage limit. … try again at 4:36 PM."; an overload is a 503 `server_is_overloaded`, which Codex
//! retries (5 times) before "Selected model is at capacity".

use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

use super::{Action, Answer, Cue, ScriptedModel, Turn, Usage};

pub fn routes() -> Router<ScriptedModel> {
    Router::new().route("/v1/responses", post(responses)).route("/v1/models", get(models))
}

/// No models to list: Codex falls back to the metadata it ships with.
async fn models() -> Json<Value> {
    Json(json!({"object": "list", "data": [], "models": []}))
}

async fn responses(State(model): State<ScriptedModel>, Json(request): Json<Value>) -> Response {
    let turn = turn(&request);
    match model.answer("openai", &turn) {
        Answer::Cue(cue) => cued(&cue),
        Answer::Act { action, usage, pause } => {
            let item = item(&action, &request);
            let response_id = format!("resp_{}", uuid::Uuid::new_v4().simple());
            if request["stream"] == false {
                let mut response = response_object(&response_id, &usage);
                response["output"] = json!([item]);
                return Json(response).into_response();
            }
            stream(events(&response_id, &item, &usage), pause)
        }
    }
}

/// The turn a Responses request asks for.
pub fn turn(request: &Value) -> Turn {
    let input = request["input"].as_array().map(Vec::as_slice).unwrap_or_default();
    let cwd = input.iter().rev().filter_map(|i| between(&text_of(i), "<cwd>", "</cwd>")).next();
    // Codex's own messages (`# AGENTS.md instructions …`, its environment) and its system prompt.
    let own = input.iter().filter(|i| i["type"] == "message").map(text_of).filter(|t| !is_typed(t));
    let instructions = own.chain(request["instructions"].as_str().map(str::to_owned)).collect::<Vec<_>>().join("\n");
    let typed = input.iter().rposition(|i| i["type"] == "message" && i["role"] == "user" && is_typed(&text_of(i)));
    let Some(at) = typed else { return Turn { cwd, instructions, ..Turn::default() } };
    let results = input[at + 1..]
        .iter()
        .filter(|i| ["function_call_output", "custom_tool_call_output"].contains(&i["type"].as_str().unwrap_or("")))
        .map(|i| output_text(&i["output"]))
        .collect();
    // What was typed before, newest first: a resumed session's notice to go on refers to it.
    let earlier = input[..at]
        .iter()
        .rev()
        .filter(|i| i["type"] == "message" && i["role"] == "user")
        .map(text_of)
        .filter(|t| is_typed(t))
        .collect();
    Turn { prompt: text_of(&input[at]), results, cwd, earlier, instructions }
}

/// What Codex adds as user messages of its own (its environment, AGENTS.md, a `<tag>` block)
/// is not what was typed.
fn is_typed(text: &str) -> bool {
    let text = text.trim_start();
    !text.is_empty() && !text.starts_with('<') && !text.starts_with("# AGENTS.md instructions")
}

/// A message's text: its `input_text` parts joined.
fn text_of(item: &Value) -> String {
    match &item["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// A tool output: a string, or content items with text.
fn output_text(output: &Value) -> String {
    match output {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        other => other["content"].as_str().unwrap_or_default().to_owned(),
    }
}

fn between(text: &str, start: &str, end: &str) -> Option<String> {
    let rest = &text[text.find(start)? + start.len()..];
    Some(rest[..rest.find(end)?].trim().to_owned())
}

/// The output item that does `action`, with the tools the request offers.
fn item(action: &Action, request: &Value) -> Value {
    let call_id = format!("call_{}", uuid::Uuid::new_v4().simple());
    match action {
        Action::Say(text) => json!({
            "type": "message", "id": format!("msg_{}", uuid::Uuid::new_v4().simple()), "role": "assistant",
            "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]
        }),
        Action::Run { command } => exec(&call_id, command),
        Action::Ask { question, options } => {
            let options: Vec<_> =
                options.iter().map(|o| json!({"label": o, "description": Action::description(o)})).collect();
            let asked = json!({"id": "choice", "header": "Choice", "question": question, "options": options});
            json!({
                "type": "function_call", "id": format!("fc_{}", uuid::Uuid::new_v4().simple()), "status": "completed",
                "call_id": call_id, "name": "request_user_input",
                "arguments": json!({"questions": [asked]}).to_string()
            })
        }
        Action::RunUnsandboxed { command } => {
            let mut call = exec(&call_id, command);
            let mut arguments: Value = serde_json::from_str(call["arguments"].as_str().unwrap_or("{}")).expect("json");
            arguments["sandbox_permissions"] = json!("require_escalated");
            arguments["justification"] = json!("The test asks to run this outside the sandbox");
            call["arguments"] = json!(arguments.to_string());
            call
        }
        Action::Write { path, content } => {
            let patch = patch(path, content);
            let offered = request["tools"].as_array().and_then(|t| t.iter().find(|t| t["name"] == "apply_patch"));
            match offered.map(|t| t["type"].as_str().unwrap_or_default()) {
                Some("custom") => json!({
                    "type": "custom_tool_call", "id": format!("ctc_{}", uuid::Uuid::new_v4().simple()),
                    "status": "completed", "call_id": call_id, "name": "apply_patch", "input": patch
                }),
                Some("function") => json!({
                    "type": "function_call", "id": format!("fc_{}", uuid::Uuid::new_v4().simple()),
                    "status": "completed", "call_id": call_id, "name": "apply_patch",
                    "arguments": json!({"input": patch}).to_string()
                }),
                _ => exec(&call_id, &format!("apply_patch <<'PATCH'\n{patch}PATCH")),
            }
        }
    }
}

/// `exec_command` running `command`, waiting the longest Codex allows for it to finish.
fn exec(call_id: &str, command: &str) -> Value {
    json!({
        "type": "function_call", "id": format!("fc_{}", uuid::Uuid::new_v4().simple()), "status": "completed",
        "call_id": call_id, "name": "exec_command",
        "arguments": json!({"cmd": command, "yield_time_ms": 30_000}).to_string()
    })
}

/// A patch that writes `content` to `path` (an added file replaces one that is there).
pub fn patch(path: &str, content: &str) -> String {
    let mut patch = format!("*** Begin Patch\n*** Add File: {path}\n");
    for line in content.lines() {
        patch.push_str(&format!("+{line}\n"));
    }
    patch.push_str("*** End Patch\n");
    patch
}

fn usage_object(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens + usage.output_tokens
    })
}

fn response_object(id: &str, usage: &Usage) -> Value {
    json!({"id": id, "object": "response", "status": "completed", "output": [], "usage": usage_object(usage)})
}

/// The SSE events of one response with one output item.
fn events(id: &str, item: &Value, usage: &Usage) -> Vec<Value> {
    let mut events = vec![
        json!({"type": "response.created", "response": {"id": id, "object": "response", "status": "in_progress"}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
    ];
    if let Some(text) = item["content"][0]["text"].as_str() {
        events.push(json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0,
            "item_id": item["id"], "delta": text}));
    }
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    events.push(json!({"type": "response.completed", "response": response_object(id, usage)}));
    events
}

/// `events` as an SSE body, `pause` between them.
fn stream(events: Vec<Value>, pause: Option<Duration>) -> Response {
    let frames = events.into_iter().map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")));
    let frames: Vec<String> = frames.collect();
    let body = futures::stream::unfold((frames.into_iter(), false), move |(mut rest, started)| async move {
        let frame = rest.next()?;
        if let (Some(pause), true) = (pause, started) {
            tokio::time::sleep(pause).await;
        }
        Some((Ok::<_, std::convert::Infallible>(frame), (rest, true)))
    });
    let mut response = Response::new(Body::from_stream(body));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response
}

/// A cue in ChatGPT's backend's words.
fn cued(cue: &Cue) -> Response {
    match cue {
        Cue::RateLimit { resets_in } => {
            let now = chrono::Utc::now().timestamp();
            let (secs, at) = (resets_in.as_secs(), now + resets_in.as_secs() as i64);
            let body = json!({"error": {"type": "usage_limit_reached", "message": "The usage limit has been reached",
                "plan_type": "plus", "resets_at": at, "resets_in_seconds": secs}});
            let mut response = (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
            for (name, value) in [
                ("x-codex-primary-used-percent", "100".to_owned()),
                ("x-codex-primary-window-minutes", "300".to_owned()),
                ("x-codex-primary-reset-at", at.to_string()),
                ("x-codex-primary-reset-after-seconds", secs.to_string()),
                ("retry-after", secs.to_string()),
            ] {
                response.headers_mut().insert(name, HeaderValue::from_str(&value).expect("a header value"));
            }
            response
        }
        Cue::Overload => {
            let body = json!({"error": {"message": "The server is overloaded or not ready yet.",
                "type": "server_error", "param": null, "code": "server_is_overloaded"}});
            (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
        }
        // A slow stream still answers (`ScriptedModel::answer` gives it as a pause).
        Cue::Slow { .. } => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_typed_prompt_is_the_last_user_message_codex_did_not_write_and_results_follow_it() {
        let request = json!({"input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "# AGENTS.md instructions for /c\n\n<INSTRUCTIONS>x"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/clones/fox</cwd>\n</environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Plan the wish"}]},
            {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": "…"},
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "Success."},
            {"type": "function_call", "call_id": "c2", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c2", "output": "ran"}
        ]});
        let turn = turn(&request);
        assert_eq!(turn.prompt, "Plan the wish");
        assert_eq!(turn.results, ["Success.", "ran"]);
        assert_eq!(turn.cwd.as_deref(), Some("/clones/fox"));
        assert!(turn.earlier.is_empty(), "{:?}", turn.earlier);
    }

    #[test]
    fn a_resumed_conversation_carries_what_was_typed_before_newest_first() {
        let said = |role: &str, text: &str| json!({"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]});
        let request = json!({"input": [
            said("user", "<environment_context>\n  <cwd>/clones/fox</cwd>\n</environment_context>"),
            said("user", "Your assignment: group `a`"),
            {"type": "custom_tool_call_output", "call_id": "c1", "output": "Success."},
            said("user", "A message"),
            said("assistant", "Noted."),
            said("user", "Your session was interrupted (the pane vanished): go on"),
        ]});
        let turn = turn(&request);
        assert!(turn.prompt.starts_with("Your session was interrupted"), "{}", turn.prompt);
        assert_eq!(turn.earlier, ["A message", "Your assignment: group `a`"]);
        assert!(turn.results.is_empty());
    }

    #[test]
    fn a_write_is_codexs_own_patch_tool_where_offered_and_the_patch_command_otherwise() {
        let write = Action::Write { path: "a.txt".into(), content: "a\nb\n".into() };
        let custom = item(&write, &json!({"tools": [{"type": "custom", "name": "apply_patch"}]}));
        assert_eq!(custom["type"], "custom_tool_call");
        assert_eq!(custom["input"], "*** Begin Patch\n*** Add File: a.txt\n+a\n+b\n*** End Patch\n");
        let command = item(&write, &json!({"tools": []}));
        let args: Value = serde_json::from_str(command["arguments"].as_str().unwrap()).unwrap();
        assert!(args["cmd"].as_str().unwrap().starts_with("apply_patch <<'PATCH'\n*** Begin Patch"), "{args}");
    }
}
