//! `POST /api/v1/agents/{name}/hooks`: Claude Code's hook JSON, forwarded by `switchyard hook`
//! with the agent's own token. The hook is recorded on the agent (`last_hook_at`,
//! `last_hook_state`, which the arbiter uses to let a recent hook win over the screen) and its
//! state applied with a conditional update and its event; the agent's task follows
//! (`db::agents::apply`). A `UserPromptSubmit` whose `prompt` is the message being delivered to
//! the agent confirms that message (`delivered_at`), in the same transaction.

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::error::{ApiError, ApiResult, Problem};
use crate::api::json::ApiJson;
use crate::db::agents::{self, Applied, Cause};
use crate::detect::hooks::{signal, HookSignal};
use crate::domain::agent::{AgentEvent, AgentState};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(post_hook)).layer(DefaultBodyLimit::max(HOOK_LIMIT))
}

/// The largest hook body kept: a `PreToolUse` for a big `Write` carries the whole file, which
/// `switchyard hook` drops before sending; anything still larger is refused.
pub const HOOK_LIMIT: usize = 1024 * 1024;

/// The question or permission the hook is about, shown on the agent's task.
fn detail(payload: &Value) -> Option<String> {
    let field = |name: &str| payload.get(name).and_then(Value::as_str).filter(|s| !s.is_empty());
    match field("hook_event_name")? {
        "PermissionRequest" => field("tool_name").map(|tool| format!("permission to use {tool}")),
        "Notification" => field("message").map(str::to_owned),
        _ => None,
    }
}

/// What the hook did to the agent.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"agent": "clever-fox", "hook_event_name": "PermissionRequest", "state": "permission", "changed": true,
    "delivered": null}))]
pub struct HookOutcome {
    pub agent: String,
    pub hook_event_name: String,
    /// The agent's state after the hook.
    pub state: AgentState,
    /// Whether the hook changed the state.
    pub changed: bool,
    /// The message this hook confirmed as delivered (a `UserPromptSubmit` carrying its text).
    pub delivered: Option<uuid::Uuid>,
}

/// Receives one Claude Code hook for the agent (any hook JSON object with `hook_event_name`).
#[utoipa::path(post, path = "/agents/{name}/hooks", tag = "agents",
    params(("name" = String, Path, description = "agent name")),
    request_body(content = Object, description = "Claude Code's hook JSON as given on the hook's stdin",
        example = json!({"session_id": "2c7d3a8e-1f4b-4e6a-9c0d-5b8e7f6a1d2c", "hook_event_name": "PermissionRequest",
            "tool_name": "Bash", "tool_input": {"command": "cargo test"}})),
    responses((status = 200, body = HookOutcome, description = "The agent's state after the hook"),
        (status = 403, body = Problem, description = "A token of another agent"), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "The agent is no longer live (done, error, suspended)"),
        (status = 413, body = Problem), (status = 422, body = Problem, description = "Not an object with `hook_event_name`")))]
#[tracing::instrument(skip_all, fields(agent = %name), err)]
pub async fn post_hook(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiJson(payload): ApiJson<Value>,
) -> ApiResult<Json<HookOutcome>> {
    let event_name = payload
        .as_object()
        .and_then(|o| o.get("hook_event_name"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::validation("hook_event_name", "the hook JSON must be an object naming its event"))?
        .to_owned();
    tracing::debug!(hook = %event_name, "hook received");
    let signal = signal(&payload);
    let event = match signal {
        Some(HookSignal::Activity(activity)) => Some(AgentEvent::Observed(activity)),
        Some(HookSignal::SessionEnded) => Some(AgentEvent::Finish),
        None => None,
    };
    let mapped = match signal {
        Some(HookSignal::Activity(activity)) => Some(activity.state()),
        Some(HookSignal::SessionEnded) => Some(AgentState::Done),
        None => None,
    };
    let mut tx = state.db.begin().await?;
    let agent =
        agents::by_name(&mut tx, &name).await?.ok_or_else(|| ApiError::NotFound(format!("no agent `{name}`")))?;
    agents::record_hook(&mut tx, agent.id, mapped).await?;
    // The prompt a turn started with: if it is the message being delivered, that is its
    // confirmation, committed with the state it causes.
    let delivered = match (event_name.as_str(), payload.get("prompt").and_then(Value::as_str)) {
        ("UserPromptSubmit", Some(prompt)) => {
            crate::db::messages::delivery::confirm_by_prompt(&mut tx, agent.id, prompt).await?.map(|m| m.id)
        }
        _ => None,
    };
    // A refusal keeps the hook's record all the same: the arbiter should know a late hook came.
    let outcome = match event {
        None => Ok((agent.state, false)),
        Some(event) => {
            let cause = Cause { source: "hook", detail: detail(&payload), suspended_until: None };
            match agents::apply(&mut tx, agent.id, None, event, &cause).await? {
                None => return Err(ApiError::NotFound(format!("no agent `{name}`"))),
                Some(Applied::Changed { agent, .. }) => Ok((agent.state, true)),
                Some(Applied::Unchanged(agent)) => Ok((agent.state, false)),
                Some(Applied::Refused { current, message }) => Err(ApiError::conflict(message, Some(current.as_str()))),
                // Not with `expected: None`; answered like a refusal all the same.
                Some(Applied::Stale { current }) => {
                    Err(ApiError::conflict("the agent changed meanwhile", Some(current.as_str())))
                }
            }
        }
    };
    // Most hooks change nothing but the hook's own record: those record no event.
    if matches!(outcome, Ok((_, true))) || delivered.is_some() {
        state.feed.commit(tx).await?;
    } else {
        tx.commit().await?;
    }
    state.feed.hook_recorded();
    let (state_now, changed) = outcome?;
    Ok(Json(HookOutcome { agent: name, hook_event_name: event_name, state: state_now, changed, delivered }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_permission_request_names_its_tool_for_the_task() {
        let payload = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash"});
        assert_eq!(detail(&payload).as_deref(), Some("permission to use Bash"));
        let note = json!({"hook_event_name": "Notification", "message": "Claude needs your permission to use Bash"});
        assert_eq!(detail(&note).as_deref(), Some("Claude needs your permission to use Bash"));
    }
}
