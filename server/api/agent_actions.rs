//! `POST /api/v1/agents/{name}/input|interrupt|suspend|resume|kill` and
//! `GET /api/v1/agents/{name}/screen`: acting on an agent's pane. Text goes in literally (a paste
//! buffer, never `send-keys` with the text), state changes are written before tmux is touched.

use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::error::{ApiError, ApiResult, Problem};
use crate::api::json::ApiJson;
use crate::api::query::ApiQuery;
use crate::app::panes::{interrupt_key, LocalPanes};
use crate::db::agents::{self, Agent, Applied, Cause};
use crate::domain::agent::AgentEvent;
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

/// The largest input accepted in one call.
const INPUT_LIMIT: usize = 256 * 1024;

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"text": "Use the existing session middleware; do not add a new one.", "submit": true}))]
pub struct Input {
    /// Delivered byte for byte: `;`, `C-c`, escape sequences and newlines arrive as text.
    pub text: String,
    /// Press Enter after the text (default true); false leaves it in the input line.
    #[serde(default = "yes")]
    pub submit: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"agent": "clever-fox", "pane": "%7", "bytes": 58, "submitted": true}))]
pub struct Delivered {
    pub agent: String,
    pub pane: String,
    pub bytes: usize,
    pub submitted: bool,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ScreenQuery {
    /// Lines of history above the visible screen (0–2000, default 0).
    pub lines: Option<u32>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"agent": "clever-fox", "pane": "%7", "text": "✻ Thinking… (esc to interrupt)\n"}))]
pub struct Screen {
    pub agent: String,
    pub pane: String,
    /// The pane's text, colour codes removed.
    pub text: String,
}

async fn agent(state: &AppState, name: &str) -> ApiResult<Agent> {
    let mut conn = state.db.acquire().await?;
    agents::by_name(&mut conn, name).await?.ok_or_else(|| ApiError::NotFound(format!("no agent `{name}`")))
}

fn panes(state: &AppState) -> ApiResult<&LocalPanes> {
    state.panes.as_ref().ok_or_else(|| ApiError::conflict("no worker runs beside this API", None))
}

/// The agent's pane on this node, or 409 saying why it cannot be reached.
fn pane<'a>(state: &AppState, agent: &'a Agent) -> ApiResult<&'a str> {
    panes(state)?.pane(agent).map_err(|e| ApiError::conflict(e.to_string(), Some(agent.state.as_str())))
}

/// A pane that vanished between the lookup and the call is the agent's state, not a server
/// fault: 409, and the reconciler settles the agent. Anything else from tmux is a 500.
fn tmux_failed(e: crate::tmux::TmuxError) -> ApiError {
    if e.is_missing() {
        ApiError::conflict("the agent's pane is gone; the worker will settle the agent", None)
    } else {
        ApiError::Internal(anyhow::anyhow!(e))
    }
}

/// Types text into the agent's pane, literally, and (by default) presses Enter.
#[utoipa::path(post, path = "/agents/{name}/input", tag = "agents", params(("name" = String, Path)),
    request_body = Input,
    responses((status = 200, body = Delivered), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "No pane, or the agent runs on another node"),
        (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = %name), err)]
pub async fn send_input(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiJson(input): ApiJson<Input>,
) -> ApiResult<Json<Delivered>> {
    Ok(Json(deliver_input(&state, &name, &input.text, input.submit).await?))
}

/// Types `text` into the agent's pane, literally, and presses Enter when `submit` (the API's
/// input and the dashboard's answers).
pub(crate) async fn deliver_input(state: &AppState, name: &str, text: &str, submit: bool) -> ApiResult<Delivered> {
    if text.is_empty() || text.len() > INPUT_LIMIT {
        return Err(ApiError::validation("text", format!("must be 1 to {INPUT_LIMIT} bytes")));
    }
    let agent = agent(state, name).await?;
    let pane = pane(state, &agent)?;
    let tmux = &panes(state)?.tmux;
    tmux.paste(pane, text).await.map_err(tmux_failed)?;
    if submit {
        // Let the TUI take the paste in before Enter, or Enter may land inside the paste.
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        tmux.send_key(pane, Key::Enter).await.map_err(tmux_failed)?;
    }
    Ok(Delivered { agent: agent.name.clone(), pane: pane.to_owned(), bytes: text.len(), submitted: submit })
}

/// Interrupts the agent's turn (Escape for Claude Code, Codex and Gemini; Ctrl-C otherwise).
#[utoipa::path(post, path = "/agents/{name}/interrupt", tag = "agents", params(("name" = String, Path)),
    responses((status = 200, body = Agent), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = %name), err)]
pub async fn interrupt_agent(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Agent>> {
    Ok(Json(interrupt(&state, &name).await?))
}

pub(crate) async fn interrupt(state: &AppState, name: &str) -> ApiResult<Agent> {
    let agent = agent(state, name).await?;
    let pane = pane(state, &agent)?;
    panes(state)?.tmux.send_key(pane, interrupt_key(&agent.provider)).await.map_err(tmux_failed)?;
    Ok(agent)
}

/// Applies a state change first, then closes the window: the record never lags what tmux did.
pub(crate) async fn stop(state: &AppState, name: &str, event: AgentEvent, reason: &str) -> ApiResult<Agent> {
    let agent = agent(state, name).await?;
    let window = agent.tmux_window.clone();
    let local = panes(state).ok().and_then(|p| p.pane(&agent).ok().map(|_| p.clone()));
    let cause = Cause { detail: Some(reason.to_owned()), ..Cause::from("api") };
    let mut tx = state.db.begin().await?;
    let agent = match agents::apply(&mut tx, agent.id, None, event, &cause).await? {
        Some(Applied::Changed { agent, .. }) | Some(Applied::Unchanged(agent)) => agent,
        Some(Applied::Refused { current, message }) => return Err(ApiError::conflict(message, Some(current.as_str()))),
        Some(Applied::Stale { current }) => {
            return Err(ApiError::conflict("the agent changed meanwhile; try again", Some(current.as_str())))
        }
        None => return Err(ApiError::NotFound(format!("no agent `{name}`"))),
    };
    state.feed.commit(tx).await?;
    if let (Some(panes), Some(window)) = (local, window) {
        if let Err(e) = panes.tmux.kill_window(&window).await {
            if !e.is_missing() {
                tracing::warn!(agent = %agent.name, error = %e, "closing the agent's window");
            }
        }
    }
    Ok(agent)
}

/// Suspends the agent: its pane is closed, its provider session kept for `resume`.
#[utoipa::path(post, path = "/agents/{name}/suspend", tag = "agents", params(("name" = String, Path)),
    responses((status = 200, body = Agent), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = %name), err)]
pub async fn suspend_agent(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Agent>> {
    Ok(Json(stop(&state, &name, AgentEvent::Suspend, "suspended through the API").await?))
}

/// Stops the agent now: it becomes `error` ("killed through the API") and its window closes; it
/// can still be resumed.
#[utoipa::path(post, path = "/agents/{name}/kill", tag = "agents", params(("name" = String, Path)),
    responses((status = 200, body = Agent), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = %name), err)]
pub async fn kill_agent(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Agent>> {
    Ok(Json(stop(&state, &name, AgentEvent::Fail, "killed through the API").await?))
}

/// Resumes a suspended or failed agent: back to `spawning`, and a worker starts its provider's
/// resume command in a new pane.
#[utoipa::path(post, path = "/agents/{name}/resume", tag = "agents", params(("name" = String, Path)),
    responses((status = 200, body = Agent), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = %name), err)]
pub async fn resume_agent(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Json<Agent>> {
    Ok(Json(stop(&state, &name, AgentEvent::Resume, "resumed through the API").await?))
}

/// The last lines of the agent's pane.
#[utoipa::path(get, path = "/agents/{name}/screen", tag = "agents", params(("name" = String, Path), ScreenQuery),
    responses((status = 200, body = Screen), (status = 404, body = Problem), (status = 409, body = Problem),
        (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = %name), err)]
pub async fn agent_screen(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiQuery(query): ApiQuery<ScreenQuery>,
) -> ApiResult<Json<Screen>> {
    Ok(Json(screen(&state, &name, query.lines.unwrap_or(0)).await?))
}

/// The agent's pane text (colour codes removed) with `lines` of history above the screen.
pub(crate) async fn screen(state: &AppState, name: &str, lines: u32) -> ApiResult<Screen> {
    if lines > 2000 {
        return Err(ApiError::validation("lines", "must be at most 2000"));
    }
    let agent = agent(state, name).await?;
    let pane = pane(state, &agent)?;
    let text = panes(state)?.tmux.capture(pane, lines).await.map_err(tmux_failed)?;
    Ok(Screen { agent: agent.name.clone(), pane: pane.to_owned(), text })
}
