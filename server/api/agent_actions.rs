//! `POST /api/v1/agents/{name}/input|interrupt|suspend|resume|kill` and
//! `GET /api/v1/agents/{name}/screen`: acting on an agent's pane, through the use cases of
//! [`crate::app::agent_panes`].

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::json::ApiJson;
use crate::app::agent_panes;
pub use crate::app::agent_panes::{Delivered, Screen};
use crate::db::agents::Agent;
use crate::domain::agent::AgentEvent;
use crate::http::error::{ApiError, ApiResult, Problem};
use crate::http::query::ApiQuery;
use crate::http::AppState;
use crate::tmux::Key;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(send_input))
        .routes(routes!(interrupt_agent))
        .routes(routes!(suspend_agent))
        .routes(routes!(resume_agent))
        .routes(routes!(kill_agent))
        .routes(routes!(agent_screen))
}

/// Either `text` (typed as text, then Enter unless `submit` is false) or `keys` (pressed by
/// name, in order), never both.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(examples(
    json!({"text": "Use the existing session middleware; do not add a new one.", "submit": true}),
    json!({"keys": ["Down", "Enter"]})
))]
pub struct Input {
    /// Typed as text, byte for byte: `;`, `C-c` and newlines arrive as text. Control characters
    /// other than tab and newline (LF or CRLF) are refused (422 naming the byte and its offset):
    /// press keys with `keys`.
    pub text: Option<String>,
    /// Press Enter after the text (default true); false leaves it in the input line. Only with
    /// `text`.
    pub submit: Option<bool>,
    /// Keys to press, in order, by name (instead of `text`): e.g. `["Down", "Enter"]`.
    pub keys: Option<Vec<Key>>,
    /// Answer the menu on the agent's screen (a permission dialog, a question) with this option
    /// (instead of `text`): the highlight is moved to it with the arrow keys and Enter pressed
    /// once the screen shows it there; answered once the menu is gone (`chosen`). A `text` that
    /// is the number of an option the screen offers is answered the same way.
    #[schema(minimum = 1, maximum = 99)]
    pub option: Option<u32>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ScreenQuery {
    /// Lines of history above the visible screen (0–2000, default 0).
    #[param(maximum = 2000)]
    pub lines: Option<u32>,
}

/// Types text into the agent's pane, literally, and (by default) presses Enter; or presses
/// named keys; or answers the menu on its screen with an option, checked on the screen.
#[utoipa::path(post, path = "/agents/{name}/input", tag = "agents", params(("name" = String, Path)),
    request_body = Input,
    responses((status = 200, body = Delivered), (status = 404, body = Problem),
        (status = 409, body = Problem,
            description = "No pane, the agent runs on another node, or its screen has no such option or did not take it"),
        (status = 422, body = Problem,
            description = "Text with control characters, an unknown key name, or both or neither of text and keys")))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn send_input(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiJson(input): ApiJson<Input>,
) -> ApiResult<Json<Delivered>> {
    if let Some(option) = input.option {
        if input.text.is_some() || input.keys.is_some() || input.submit.is_some() {
            return Err(ApiError::validation("option", "send `option` alone, without `text`, `keys` or `submit`"));
        }
        if !(1..=99).contains(&option) {
            return Err(ApiError::validation("option", "must be 1 to 99"));
        }
        return Ok(Json(agent_panes::choose(&state.app, &name, option).await?));
    }
    let delivered = match (input.text, input.keys) {
        (Some(text), None) => agent_panes::input(&state.app, &name, &text, input.submit.unwrap_or(true)).await?,
        (None, Some(keys)) if input.submit.is_none() => agent_panes::press_keys(&state.app, &name, &keys).await?,
        (None, Some(_)) => {
            return Err(ApiError::validation("submit", "applies to `text` only; press `Enter` in `keys`"))
        }
        (Some(_), Some(_)) => return Err(ApiError::validation("keys", "send either `text` or `keys`, not both")),
        (None, None) => return Err(ApiError::validation("text", "send `text`, `keys` or `option`")),
    };
    Ok(Json(delivered))
}

/// Interrupts the agent's turn (Escape for Claude Code, Codex and Gemini; Ctrl-C otherwise).
#[utoipa::path(post, path = "/agents/{name}/interrupt", tag = "agents", params(("name" = String, Path)),
    responses((status = 200, body = Agent), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn interrupt_agent(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Agent>> {
    Ok(Json(agent_panes::interrupt(&state.app, &name).await?))
}

/// Suspends the agent: its pane is closed, its provider session kept for `resume`.
#[utoipa::path(post, path = "/agents/{name}/suspend", tag = "agents", params(("name" = String, Path)),
    responses((status = 200, body = Agent), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn suspend_agent(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Agent>> {
    Ok(Json(agent_panes::stop(&state.app, &name, AgentEvent::Suspend, "suspended through the API").await?))
}

/// Stops the agent now: it becomes `error` ("killed through the API") and its window closes; it
/// can still be resumed.
#[utoipa::path(post, path = "/agents/{name}/kill", tag = "agents", params(("name" = String, Path)),
    responses((status = 200, body = Agent), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn kill_agent(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Agent>> {
    Ok(Json(agent_panes::stop(&state.app, &name, AgentEvent::Fail, "killed through the API").await?))
}

/// Resumes a suspended or failed agent: back to `spawning`, and a worker starts its provider's
/// resume command in a new pane.
#[utoipa::path(post, path = "/agents/{name}/resume", tag = "agents", params(("name" = String, Path)),
    responses((status = 200, body = Agent), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn resume_agent(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Agent>> {
    Ok(Json(agent_panes::stop(&state.app, &name, AgentEvent::Resume, "resumed through the API").await?))
}

/// The last lines of the agent's pane.
#[utoipa::path(get, path = "/agents/{name}/screen", tag = "agents", params(("name" = String, Path), ScreenQuery),
    responses((status = 200, body = Screen), (status = 404, body = Problem), (status = 409, body = Problem),
        (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn agent_screen(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiQuery(query): ApiQuery<ScreenQuery>,
) -> ApiResult<Json<Screen>> {
    Ok(Json(agent_panes::screen(&state.app, &name, query.lines.unwrap_or(0)).await?))
}
