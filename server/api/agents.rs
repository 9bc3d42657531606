//! `/api/v1/agents`: register an agent (the worker then spawns it), list, read, edit and delete
//! agents. State changes are observed, not commanded: they come through the hooks
//! ([`super::agent_hooks`]) and the worker, never through PATCH.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::idempotency::{self, IdempotentJson};
use crate::api::json::{nullable, ApiJson};
use crate::api::{agent_actions, agent_branches, agent_hooks, agent_reports, agent_states};
pub use crate::app::agents::DeletedAgent;
use crate::app::agents::{self as agents_app, text, NewAgentInput, Workspace};
use crate::app::projects::id as project_id;
use crate::db::agents::{self, Agent, Edit, ListFilter};
use crate::domain::agent::AgentState;
use crate::domain::agent_kind::{AgentKind, AgentRole};
use crate::http::error::{ApiError, ApiResult, Problem};
use crate::http::etag::{etag, IfMatch};
use crate::http::pagination::{page, Page, PageQuery, Position};
use crate::http::query::{filter, ApiQuery};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_agent, list_agents))
        .routes(routes!(get_agent, update_agent, delete_agent))
        .merge(agent_hooks::router())
        .merge(agent_actions::router())
        .merge(agent_reports::router())
        .merge(agent_branches::router())
        .merge(agent_states::router())
}

/// The response for one agent, with its version as the `ETag`.
fn with_etag(agent: Agent) -> Response {
    (etag(agent.version), Json(agent)).into_response()
}

fn not_found(name: &str) -> ApiError {
    agents_app::not_found(name).into()
}

/// Where the agent works.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CloneMode {
    /// Its own `git clone --shared` of the project's repository, on its own branch (default).
    #[default]
    Agent,
    /// No clone: it runs in the project's repository itself.
    None,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "clever-fox", "project": "switchyard", "kind": "worker", "role": "engineer",
    "provider": "claude", "task": "Add a login page", "wish": "login-page", "group": "backend", "clone": "agent"}))]
pub struct CreateAgent {
    /// A slug, unique among agents; default: the kind and a short id (`worker-3f2a9c1d`).
    pub name: Option<String>,
    /// The project's slug.
    pub project: String,
    pub kind: AgentKind,
    pub role: AgentRole,
    /// A provider from the providers config: `claude`, `codex`, `gemini`, `shell`, or custom.
    pub provider: String,
    /// What the agent is asked to do.
    pub task: Option<String>,
    /// A wish's slug (same project); with `group`, the agent works on that group's task.
    pub wish: Option<String>,
    /// The key of one of the wish's execution groups.
    pub group: Option<String>,
    /// `agent` (default): its own clone; `none`: the project's repository. With `team`, the
    /// team's clone (leave `clone` and `branch` out).
    pub clone: Option<CloneMode>,
    /// The clone's branch; default `switchyard/<name>`.
    pub branch: Option<String>,
    /// A team of the same project: the agent joins it and works in the team's clone, on its branch.
    pub team: Option<String>,
}

/// Registers an agent in state `spawning`; a worker claims it, makes its clone and its tmux
/// window, and starts the provider there. The agent's token is issued to the worker, not here.
#[utoipa::path(post, path = "/agents", tag = "agents", request_body = CreateAgent,
    params(("Idempotency-Key" = Option<String>, Header, description = "Makes the request safe to retry: the same key with the same body within 24 hours answers the first response again (nothing is created); with another body, 422.")),
    responses((status = 201, body = Agent, description = "The new agent, `spawning`",
            headers(("ETag" = String, description = "the version, quoted"))),
        (status = 409, body = Problem, description = "An agent with this name exists"),
        (status = 422, body = Problem, description = "A bad field: unknown project, provider, wish or group")))]
#[tracing::instrument(skip_all, fields(project = ?body.project, provider = ?body.provider), err(level = "debug"))]
pub async fn create_agent(
    State(state): State<AppState>,
    IdempotentJson(body, idem): IdempotentJson<CreateAgent>,
) -> ApiResult<Response> {
    if let Some(first) = idempotency::replay(&state, idem.as_ref()).await? {
        return Ok(first);
    }
    let input = NewAgentInput {
        name: body.name,
        project: body.project,
        kind: body.kind,
        role: body.role,
        provider: body.provider,
        task: body.task,
        wish: body.wish,
        group: body.group,
        workspace: body.clone.map(|mode| match mode {
            CloneMode::Agent => Workspace::OwnClone,
            CloneMode::None => Workspace::ProjectRepo,
        }),
        branch: body.branch,
        team: body.team,
    };
    let mut response = with_etag(agents_app::create(&state, input, idem.as_ref()).await?);
    *response.status_mut() = StatusCode::CREATED;
    Ok(response)
}

/// Filters for listing agents; they combine with AND.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct AgentFilters {
    /// A project's slug.
    pub project: Option<String>,
    /// One state, e.g. `working` or `permission`.
    #[param(value_type = Option<crate::domain::agent::AgentState>)]
    pub state: Option<String>,
    /// One kind, e.g. `worker` or `merge-queue`.
    #[param(value_type = Option<AgentKind>)]
    pub kind: Option<String>,
    pub team: Option<String>,
    /// A worker node's id.
    pub node: Option<String>,
}

/// Lists agents oldest first, filtered, a page at a time.
#[utoipa::path(get, path = "/agents", tag = "agents", params(AgentFilters, PageQuery),
    responses((status = 200, body = Page<Agent>, description = "One page of agents, oldest first"),
        (status = 422, body = Problem, description = "A bad filter or cursor")))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list_agents(
    State(state): State<AppState>,
    ApiQuery(filters): ApiQuery<AgentFilters>,
    ApiQuery(paging): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<Agent>>> {
    let (limit, position) = paging.parse()?;
    let agent_state = filter::<AgentState>("state", filters.state.as_deref())?;
    let kind = filter::<AgentKind>("kind", filters.kind.as_deref())?;
    let mut conn = state.db.acquire().await?;
    let project_id = match &filters.project {
        Some(slug) => Some(project_id(&mut conn, slug, "project").await?),
        None => None,
    };
    let filter = ListFilter {
        project_id,
        state: agent_state,
        kind,
        team: filters.team,
        node_id: filters.node,
        after: position.map(|p| (p.created_at, p.id)),
        ..ListFilter::default()
    };
    let rows = agents::list(&mut conn, &filter, limit + 1).await?;
    Ok(Json(page(rows, limit, |a| Position { created_at: a.created_at, id: a.id })))
}

/// An agent with the tokens it used and what they cost.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct AgentDetail {
    #[serde(flatten)]
    pub agent: Agent,
    /// Tokens used per model, summed from its Claude Code transcript as its hooks name it, and
    /// their cost; an agent of a provider that reports none is listed in `unreported`.
    pub usage: crate::app::usage::UsageReport,
}

/// Reads an agent, with the tokens it used. An agent's own token may read itself.
#[utoipa::path(get, path = "/agents/{name}", tag = "agents", params(("name" = String, Path, description = "agent name")),
    responses((status = 200, body = AgentDetail, description = "The agent", headers(("ETag" = String, description = "the version, quoted"))),
        (status = 403, body = Problem, description = "An agent token reading another agent"), (status = 404, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn get_agent(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Response> {
    let mut conn = state.db.acquire().await?;
    let agent = agents::by_name(&mut conn, &name).await?.ok_or_else(|| not_found(&name))?;
    let scope = crate::db::agent_usage::Scope { agent: Some(agent.id), ..Default::default() };
    let usage = crate::app::usage::report(&mut conn, &state.providers, &scope).await?;
    Ok((etag(agent.version), Json(AgentDetail { agent, usage })).into_response())
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"summary": "Added the login page and its tests", "ready_for_cleanup": true}))]
pub struct UpdateAgent {
    /// What the agent did; `null` clears it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 20000, pattern = r"\S")]
    pub summary: Option<Option<String>>,
    /// What the agent is asked to do; `null` clears it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 20000, pattern = r"\S")]
    pub task: Option<Option<String>>,
    /// The agent's work is finished: it may be deleted (and its clone removed if fully merged).
    pub ready_for_cleanup: Option<bool>,
    /// Not patchable: accepted only to explain that states are observed.
    #[serde(default)]
    #[schema(ignore)]
    pub state: Option<serde_json::Value>,
}

/// Edits an agent's summary, task text or `ready_for_cleanup`. Send `If-Match: "<version>"` to make
/// sure nobody changed it since you read it.
#[utoipa::path(patch, path = "/agents/{name}", tag = "agents", request_body = UpdateAgent,
    params(("name" = String, Path, description = "agent name"),
        ("If-Match" = Option<String>, Header, description = "the version you read, e.g. \"3\"")),
    responses((status = 200, body = Agent, description = "The edited agent", headers(("ETag" = String, description = "the new version, quoted"))),
        (status = 404, body = Problem), (status = 412, body = Problem, description = "The version moved on"),
        (status = 422, body = Problem, description = "A bad field, or `state` (states are observed)")))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn update_agent(
    State(state): State<AppState>,
    Path(name): Path<String>,
    if_match: IfMatch,
    ApiJson(body): ApiJson<UpdateAgent>,
) -> ApiResult<Response> {
    if body.state.is_some() {
        return Err(ApiError::validation(
            "state",
            "is not patchable: an agent's state is observed (hooks, screen) by the worker",
        ));
    }
    let edit = Edit {
        summary: body.summary.map(|s| text("summary", s, 20_000)).transpose()?,
        task: body.task.map(|t| text("task", t, 20_000)).transpose()?,
        ready_for_cleanup: body.ready_for_cleanup,
    };
    Ok(with_etag(agents_app::update(&state, &name, &if_match, edit).await?))
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    /// Delete even a live agent, and remove its clone even with unmerged work.
    #[serde(default)]
    pub force: bool,
}

/// Deletes an agent that is not live (or is `ready_for_cleanup`) and removes its clone — only when
/// the clone holds nothing unmerged: no commits missing from the project's target branch, no
/// uncommitted files. Otherwise 409 saying exactly what is unmerged. `?force=true` overrides both.
#[utoipa::path(delete, path = "/agents/{name}", tag = "agents",
    params(("name" = String, Path, description = "agent name"), DeleteQuery),
    responses((status = 200, body = DeletedAgent, description = "Deleted"), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "The agent is live, or its clone holds unmerged work")))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn delete_agent(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiQuery(query): ApiQuery<DeleteQuery>,
) -> ApiResult<Json<DeletedAgent>> {
    Ok(Json(agents_app::delete(&state, &name, query.force).await?))
}
