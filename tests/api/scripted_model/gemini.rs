//! The gemini wire format of the scripted model (see the module above): its routes read a
//! [`super::Turn`] from each request and write [`super::ScriptedModel::answer`] back.
//!
//! Gemini CLI (through the genai SDK, `GOOGLE_GEMINI_BASE_URL`) posts
//! `/v1beta/models/<model>:streamGenerateContent?alt=sse` for the agent's turns and
//! `…:generateContent` for its helpers (a router's complexity score, a next-speaker check),
//! which ask for JSON (`generationConfig.responseMimeType`) and carry no tools. A request is
//! `{contents: [{role, parts}], systemInstruction, tools: [{functionDeclarations}]}`: the typed
//! prompt is a user `text` part (the first user content also holds the CLI's own
//! `<session_context>`, which names the workspace directory), and tool results come back as
//! `functionResponse` parts (`response.output`). An answer is
//! `{candidates: [{content: {role: "model", parts}, finishReason}], usageMetadata}`, streamed as
//! SSE `data:` events, one candidate chunk each; a tool call is a `functionCall` part
//! (`write_file {file_path, content}`, `run_shell_command {command, description}`,
//! `ask_user {questions}`: one `choice` question with its options' labels and descriptions).
//!
//! Helper requests are answered from their JSON schema (an enum says `user` where it can, so
//! the next-speaker check hands the turn back) and do not take cues: a cue is for the turn.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::{Action, Answer, Cue, ScriptedModel, Turn, Usage};

pub fn routes() -> Router<ScriptedModel> {
    Router::new().route("/{version}/models/{call}", post(call))
}

/// `<model>:<method>`, as the SDK names a model's method in the path.
async fn call(
    State(model): State<ScriptedModel>,
    Path((_version, call)): Path<(String, String)>,
    Json(request): Json<Value>,
) -> Response {
    let Some((name, method)) = call.rsplit_once(':') else {
        return error(StatusCode::NOT_FOUND, "NOT_FOUND", &format!("no method in {call:?}"), json!([]), None);
    };
    match method {
        "countTokens" => Json(json!({"totalTokens": estimate(&request)})).into_response(),
        "generateContent" | "streamGenerateContent" => {
            let stream = method == "streamGenerateContent";
            if is_helper(&request) {
                let parts = json!([{"text": helper_answer(&request).to_string()}]);
                return respond(stream, name, vec![chunk(name, parts, Some(Usage::default()))], None);
            }
            let turn = turn(&request);
            match model.answer("gemini", &turn) {
                Answer::Act { action, usage, pause } => {
                    respond(stream, name, chunks(name, &action, &turn, usage), pause)
                }
                Answer::Cue(cue) => cued(&cue, name),
            }
        }
        _ => error(StatusCode::NOT_FOUND, "NOT_FOUND", &format!("no method {method}"), json!([]), None),
    }
}

/// A request of the CLI's own (routing, next-speaker check, a summary), not the agent's turn:
/// the agent's turns always offer it tools.
fn is_helper(request: &Value) -> bool {
    let json =
        request.pointer("/generationConfig/responseMimeType").and_then(Value::as_str) == Some("application/json");
    let tools = request["tools"].as_array().is_some_and(|t| !t.is_empty());
    json || !tools
}

/// A value of the helper's schema: the smallest that fits (`user` for an enum that has it).
fn helper_answer(request: &Value) -> Value {
    let config = &request["generationConfig"];
    let schema = config.get("responseJsonSchema").or_else(|| config.get("responseSchema"));
    match schema {
        Some(schema) => from_schema(schema),
        None => json!("Noted."),
    }
}

fn from_schema(schema: &Value) -> Value {
    if let Some(options) = schema["enum"].as_array() {
        return options.iter().find(|o| *o == "user").or(options.first()).cloned().unwrap_or(json!(""));
    }
    match schema["type"].as_str().unwrap_or_default().to_ascii_lowercase().as_str() {
        "object" => {
            let fields = schema["properties"].as_object().into_iter().flatten();
            Value::Object(fields.map(|(k, v)| (k.clone(), from_schema(v))).collect())
        }
        "integer" | "number" => json!(1),
        "boolean" => json!(false),
        "array" => json!([]),
        _ => json!("ok"),
    }
}

/// The turn in `request`: the last user text that is not the CLI's session context, the
/// function responses after it, the user texts before it (newest first), and the workspace
/// directory the session context names.
pub fn turn(request: &Value) -> Turn {
    let contents = request["contents"].as_array().map(Vec::as_slice).unwrap_or_default();
    let system = request["systemInstruction"]["parts"].as_array().into_iter().flatten();
    let instructions = system.filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n");
    let mut turn = Turn { cwd: workspace(contents), instructions, ..Turn::default() };
    let mut results = Vec::new();
    let mut prompt: Option<String> = None;
    for content in contents.iter().rev() {
        let parts = content["parts"].as_array().map(Vec::as_slice).unwrap_or_default();
        for part in parts.iter().rev() {
            if let Some(response) = part.get("functionResponse") {
                if prompt.is_none() {
                    results.push(output(&response["response"]));
                }
            } else if let Some(text) = part["text"].as_str() {
                if content["role"] == "user" && !text.trim_start().starts_with("<session_context>") {
                    // The first typed text walking back is the prompt; those before it are the
                    // earlier turns a resumed session carries, newest first.
                    match prompt {
                        None => prompt = Some(text.to_owned()),
                        Some(_) => turn.earlier.push(text.to_owned()),
                    }
                }
            }
        }
    }
    turn.prompt = prompt.unwrap_or_default();
    results.reverse();
    turn.results = results;
    turn
}

/// A tool's output as the CLI sends it back (`{output}`, or `{error}` when it failed).
fn output(response: &Value) -> String {
    response["output"]
        .as_str()
        .or(response["error"].as_str())
        .map(str::to_owned)
        .unwrap_or_else(|| response.to_string())
}

/// The first directory under "Workspace Directories" in the CLI's session context.
fn workspace(contents: &[Value]) -> Option<String> {
    let texts =
        contents.iter().flat_map(|c| c["parts"].as_array().into_iter().flatten()).filter_map(|p| p["text"].as_str());
    for text in texts {
        if let Some(rest) = text.split("Workspace Directories:**").nth(1) {
            let dir = rest.lines().map(str::trim).find_map(|l| l.strip_prefix("- "))?;
            return Some(dir.trim().to_owned());
        }
    }
    None
}

/// A rough token count of the request (for `countTokens`).
fn estimate(request: &Value) -> u64 {
    request.to_string().len() as u64 / 4
}

/// The answer's chunks: a tool call in one, a text in a few (so a slow stream pauses inside it).
fn chunks(model: &str, action: &Action, turn: &Turn, usage: Usage) -> Vec<Value> {
    let absolute = |path: &str| match &turn.cwd {
        Some(cwd) if !path.starts_with('/') => format!("{}/{path}", cwd.trim_end_matches('/')),
        _ => path.to_owned(),
    };
    match action {
        Action::Write { path, content } => {
            let call = json!({"functionCall": {"name": "write_file",
                "args": {"file_path": absolute(path), "content": content}}});
            vec![chunk(model, json!([call]), Some(usage))]
        }
        Action::Run { command } | Action::RunUnsandboxed { command } => {
            let call = json!({"functionCall": {"name": "run_shell_command",
                "args": {"command": command, "description": "Run the step"}}});
            vec![chunk(model, json!([call]), Some(usage))]
        }
        Action::Ask { question, options } => {
            let options: Vec<_> =
                options.iter().map(|o| json!({"label": o, "description": Action::description(o)})).collect();
            let asked = json!({"question": question, "header": "Choice", "type": "choice", "options": options});
            let call = json!({"functionCall": {"name": "ask_user", "args": {"questions": [asked]}}});
            vec![chunk(model, json!([call]), Some(usage))]
        }
        Action::Say(text) => {
            let words: Vec<&str> = text.split_inclusive(' ').collect();
            let pieces: Vec<String> = words.chunks(words.len().div_ceil(3).max(1)).map(|w| w.concat()).collect();
            let last = pieces.len().saturating_sub(1);
            pieces
                .iter()
                .enumerate()
                .map(|(i, piece)| chunk(model, json!([{"text": piece}]), (i == last).then_some(usage)))
                .collect()
        }
    }
}

/// One `GenerateContentResponse`; the last of an answer (with `usage`) says why it stopped.
fn chunk(model: &str, parts: Value, usage: Option<Usage>) -> Value {
    let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
    let mut response = json!({"modelVersion": model, "responseId": "scripted"});
    if let Some(usage) = usage {
        candidate["finishReason"] = json!("STOP");
        response["usageMetadata"] = json!({
            "promptTokenCount": usage.input_tokens,
            "candidatesTokenCount": usage.output_tokens,
            "totalTokenCount": usage.input_tokens + usage.output_tokens,
        });
    }
    response["candidates"] = json!([candidate]);
    response
}

/// The chunks as an SSE stream (pausing `pause` between them, or before the only one), or
/// merged into one JSON answer.
fn respond(stream: bool, model: &str, chunks: Vec<Value>, pause: Option<Duration>) -> Response {
    if !stream {
        let parts: Vec<Value> = chunks
            .iter()
            .flat_map(|c| c["candidates"][0]["content"]["parts"].as_array().cloned().unwrap_or_default())
            .collect();
        let mut whole = chunks.last().cloned().unwrap_or_else(|| chunk(model, json!([]), Some(Usage::default())));
        whole["candidates"][0]["content"]["parts"] = Value::Array(parts);
        return Json(whole).into_response();
    }
    // A tool call is one chunk: a slow stream pauses before it, so the call is still coming
    // (an agent mid-turn) for as long as the pause lasts.
    let alone = chunks.len() == 1;
    let events = futures::stream::unfold((chunks.into_iter(), true), move |(mut rest, first)| async move {
        let next = rest.next()?;
        if let (Some(pause), false) = (pause, first && !alone) {
            tokio::time::sleep(pause).await;
        }
        let event = Bytes::from(format!("data: {next}\r\n\r\n"));
        Some((Ok::<_, Infallible>(event), (rest, false)))
    });
    ([(header::CONTENT_TYPE, "text/event-stream")], Body::from_stream(events)).into_response()
}

/// What the Gemini API answers instead when a cue is due.
fn cued(cue: &Cue, model: &str) -> Response {
    match cue {
        Cue::RateLimit { resets_in } => {
            // The free tier's per-minute request quota, as the API words it; the CLI reads the
            // `RetryInfo` delay (and, past 300 s, stops retrying: a terminal quota error).
            let secs = resets_in.as_secs().max(1);
            let message = format!(
                "You exceeded your current quota, please check your plan and billing details. For more \
                 information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n\
                 * Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, \
                 limit: 5, model: {model}\nPlease retry in {secs}s."
            );
            let details = json!([
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                    "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                    "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                    "quotaDimensions": {"location": "global", "model": model},
                    "quotaValue": "5"}]},
                {"@type": "type.googleapis.com/google.rpc.Help", "links": [{
                    "description": "Learn more about Gemini API quotas",
                    "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{secs}s")},
            ]);
            error(StatusCode::TOO_MANY_REQUESTS, "RESOURCE_EXHAUSTED", &message, details, Some(secs))
        }
        Cue::Overload => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
            json!([]),
            None,
        ),
        // A slow stream still answers: `answer` never gives it as a cue.
        Cue::Slow { .. } => {
            error(StatusCode::INTERNAL_SERVER_ERROR, "INTERNAL", "a slow cue answered", json!([]), None)
        }
    }
}

/// A Google API error body (`{error: {code, message, status, details}}`).
fn error(status: StatusCode, name: &str, message: &str, details: Value, retry_after: Option<u64>) -> Response {
    let body = json!({"error": {"code": status.as_u16(), "message": message, "status": name, "details": details}});
    let mut response = (status, Json(body)).into_response();
    if let Some(secs) = retry_after {
        response.headers_mut().insert(header::RETRY_AFTER, secs.into());
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_the_typed_text_after_the_session_context_with_the_results_since() {
        let request = json!({"contents": [
            {"role": "user", "parts": [
                {"text": "<session_context>\n- **Workspace Directories:**\n  - /clones/owl\n- **Directory Structure:**\n</session_context>"},
                {"text": "Run: true"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "true"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"output": "ok"}}}]},
        ], "tools": [{"functionDeclarations": []}]});
        let turn = turn(&request);
        assert_eq!(turn.prompt, "Run: true");
        assert_eq!(turn.results, ["ok"]);
        assert_eq!(turn.cwd.as_deref(), Some("/clones/owl"));
        assert!(turn.earlier.is_empty(), "{:?}", turn.earlier);
    }

    #[test]
    fn a_resumed_conversation_carries_what_was_typed_before_newest_first() {
        let request = json!({"contents": [
            {"role": "user", "parts": [{"text": "<session_context>\n</session_context>"}, {"text": "Your assignment: group `a`"}]},
            {"role": "model", "parts": [{"functionCall": {"name": "write_file", "args": {}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "write_file", "response": {"output": "ok"}}}]},
            {"role": "user", "parts": [{"text": "Your session was interrupted (the pane vanished): go on"}]},
        ], "tools": [{"functionDeclarations": []}]});
        let turn = turn(&request);
        assert!(turn.prompt.starts_with("Your session was interrupted"), "{}", turn.prompt);
        assert_eq!(turn.earlier, ["Your assignment: group `a`"]);
        assert!(turn.results.is_empty(), "{:?}", turn.results);
    }

    #[test]
    fn a_helper_gets_its_schema_and_the_next_speaker_is_the_user() {
        let request = json!({"generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {
            "type": "OBJECT", "properties": {"reasoning": {"type": "STRING"},
            "next_speaker": {"type": "STRING", "enum": ["user", "model"]}, "score": {"type": "INTEGER"}}}}});
        assert!(is_helper(&request));
        assert_eq!(helper_answer(&request), json!({"reasoning": "ok", "next_speaker": "user", "score": 1}));
    }
}
