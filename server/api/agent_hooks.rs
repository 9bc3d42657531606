//! `POST /api/v1/agents/{name}/hooks`: Claude Code's hook JSON, forwarded by `switchyard hook`
//! with the agent's own token. What it records (the hook, the state it means, the message it
//! confirms) is the use case [`crate::app::hooks::record_agent_hook`].

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::Json;
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::json::ApiJson;
use crate::app::hooks;
pub use crate::app::hooks::HookOutcome;
use crate::http::error::{ApiResult, Problem};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(post_hook)).layer(DefaultBodyLimit::max(HOOK_LIMIT))
}

/// The largest hook body kept: a `PreToolUse` for a big `Write` carries the whole file, which
/// `switchyard hook` drops before sending; anything still larger is refused.
pub const HOOK_LIMIT: usize = 1024 * 1024;

/// What the schema says of a hook: an object naming its event; every other field is the hook's own.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)] // documents the body, which is kept as the JSON it is
pub struct HookBody {
    #[schema(example = "Stop", min_length = 1)]
    hook_event_name: String,
}

/// Receives one Claude Code hook for the agent (any hook JSON object with `hook_event_name`).
#[utoipa::path(post, path = "/agents/{name}/hooks", tag = "agents",
    params(("name" = String, Path, description = "agent name")),
    request_body(content = HookBody, description = "Claude Code's hook JSON as given on the hook's stdin",
        example = json!({"session_id": "2c7d3a8e-1f4b-4e6a-9c0d-5b8e7f6a1d2c", "hook_event_name": "PermissionRequest",
            "tool_name": "Bash", "tool_input": {"command": "cargo test"}})),
    responses((status = 200, body = HookOutcome, description = "The agent's state after the hook"),
        (status = 403, body = Problem, description = "A token of another agent"), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "The agent is no longer live (done, error, suspended)"),
        (status = 413, body = Problem), (status = 422, body = Problem, description = "Not an object with `hook_event_name`")))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn post_hook(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiJson(payload): ApiJson<Value>,
) -> ApiResult<Json<HookOutcome>> {
    Ok(Json(hooks::record_agent_hook(&state, &name, &payload).await?))
}
