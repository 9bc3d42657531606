//! `/api/v1/agents`: register an agent (the worker then spawns it), list, read, edit and delete
//! agents. State changes are observed, not commanded: they come through the hooks
//! ([`super::agent_hooks`]) and the worker, never through PATCH.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::api::error::{ApiError, ApiResult, Problem};
use crate::api::etag::{etag, IfMatch};
use crate::api::json::{nullable, ApiJson};
use crate::api::pagination::{page, Page, PageQuery, Position};
use crate::api::query::{filter, ApiQuery};
use crate::api::{agent_actions, agent_hooks};
use crate::app::projects::id as project_id;
use crate::db::agents::{self, Agent, Edit, ListFilter, NewAgent};
use crate::db::{projects, teams, wishes};
use crate::domain::agent::AgentState;
use crate::domain::agent_kind::{default_name, is_valid_branch, is_valid_name, AgentKind, AgentRole};
use crate::domain::team::TeamStatus;
use crate::git::clones::{self, UnmergedWork};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_agent, list_agents))
        .routes(routes!(get_agent, update_agent, delete_agent))
        .merge(agent_hooks::router())
        .merge(agent_actions::router())
}

/// The response for one agent, with its version as the `ETag`.
fn with_etag(agent: Agent) -> Response {
    (etag(agent.version), Json(agent)).into_response()
}

fn not_found(name: &str) -> ApiError {
    ApiError::NotFound(format!("no agent `{name}`"))
}

/// Free text that may be absent; present means 1 to `max` characters once trimmed.
fn text(field: &str, value: Option<String>, max: usize) -> Result<Option<String>, ApiError> {
    let Some(value) = value else { return Ok(None) };
    let value = value.trim();
    if value.is_empty() || value.chars().count() > max {
        return Err(ApiError::validation(field, format!("must be 1 to {max} characters")));
    }
    Ok(Some(value.to_owned()))
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
    responses((status = 201, body = Agent, description = "The new agent, `spawning`",
            headers(("ETag" = String, description = "the version, quoted"))),
        (status = 409, body = Problem, description = "An agent with this name exists"),
        (status = 422, body = Problem, description = "A bad field: unknown project, provider, wish or group")))]
#[tracing::instrument(skip_all, fields(project = %body.project, provider = %body.provider), err)]
pub async fn create_agent(State(state): State<AppState>, ApiJson(body): ApiJson<CreateAgent>) -> ApiResult<Response> {
    let id = Uuid::new_v4();
    let name = match body.name.as_deref().map(str::trim) {
        Some(name) if !is_valid_name(name) => {
            return Err(ApiError::validation("name", "must be lowercase letters, digits and dashes (1 to 63)"))
        }
        Some(name) => name.to_owned(),
        None => default_name(body.kind, id),
    };
    if state.providers.get(&body.provider).is_none() {
        let known = state.providers.names().join(", ");
        return Err(ApiError::validation("provider", format!("unknown provider `{}`; known: {known}", body.provider)));
    }
    let branch_given = body.branch.is_some();
    let clone_mode = body.clone.unwrap_or_default();
    let branch = match (clone_mode, body.branch) {
        (CloneMode::None, Some(_)) => {
            return Err(ApiError::validation("branch", "only an agent with its own clone has a branch"))
        }
        (CloneMode::None, None) => None,
        (CloneMode::Agent, Some(b)) if !is_valid_branch(b.trim()) => {
            return Err(ApiError::validation("branch", "is not a branch name git accepts"))
        }
        (CloneMode::Agent, Some(b)) => Some(b.trim().to_owned()),
        (CloneMode::Agent, None) => Some(clones::default_branch(&name)),
    };
    let clone_mode = match clone_mode {
        CloneMode::Agent => "agent",
        CloneMode::None => "none",
    };
    let task = text("task", body.task, 20_000)?;
    let mut tx = state.db.begin().await?;
    let project = projects::find(&mut tx, &body.project, false)
        .await?
        .ok_or_else(|| ApiError::validation("project", format!("no project `{}`", body.project)))?;
    let team = match body.team.as_deref().map(str::trim) {
        None => None,
        Some(_) if body.clone.is_some() || branch_given => {
            return Err(ApiError::validation(
                "team",
                "an agent in a team works in the team's clone: leave out `clone` and `branch`",
            ))
        }
        Some(name) => {
            let team = teams::lock(&mut tx, name)
                .await?
                .ok_or_else(|| ApiError::validation("team", format!("no team `{name}`")))?;
            if team.project_id != project.id {
                return Err(ApiError::validation("team", format!("team `{name}` works on another project")));
            }
            if team.status == TeamStatus::Done {
                return Err(ApiError::conflict(format!("team `{name}` is done"), Some(team.status.as_str())));
            }
            Some(team)
        }
    };
    let (clone_mode, branch) = match &team {
        Some(team) => ("team", Some(team.branch.clone())),
        None => (clone_mode, branch),
    };
    let (wish_id, task_id) = match (body.wish, body.group) {
        (None, None) => (None, None),
        (None, Some(_)) => return Err(ApiError::validation("group", "needs `wish`: the wish the group belongs to")),
        (Some(slug), group) => {
            let wish = wishes::get(&mut tx, &slug).await?.filter(|w| w.project_id == project.id).ok_or_else(|| {
                ApiError::validation("wish", format!("no wish `{slug}` in project `{}`", project.slug))
            })?;
            let task_id = match group {
                Some(key) => Some(
                    wishes::group_task(&mut tx, wish.id, &key)
                        .await?
                        .ok_or_else(|| ApiError::validation("group", format!("wish `{slug}` has no group `{key}`")))?,
                ),
                None => None,
            };
            (Some(wish.id), task_id)
        }
    };
    let new = NewAgent {
        id,
        name: name.clone(),
        project_id: project.id,
        kind: body.kind,
        role: body.role,
        provider: body.provider,
        clone_mode: clone_mode.to_owned(),
        branch,
        repo: project.repo_path,
        team: team.as_ref().map(|t| t.name.clone()),
        wish_id,
        task_id,
        task,
    };
    let agent = agents::insert(&mut tx, &new)
        .await
        .map_err(ApiError::unique_as("agents_name_key", format!("an agent named `{name}` exists")))?;
    if let Some(team) = &team {
        teams::member_event(&mut tx, team, &agent.name, "team.member_added").await?;
        crate::api::teams::started(&mut tx, team).await?;
    }
    state.feed.commit(tx).await?;
    let mut response = with_etag(agent);
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
    pub state: Option<String>,
    /// One kind, e.g. `worker` or `merge-queue`.
    pub kind: Option<String>,
    pub team: Option<String>,
    /// A worker node's id.
    pub node: Option<String>,
}

/// Lists agents oldest first, filtered, a page at a time.
#[utoipa::path(get, path = "/agents", tag = "agents", params(AgentFilters, PageQuery),
    responses((status = 200, body = Page<Agent>, description = "One page of agents, oldest first"),
        (status = 422, body = Problem, description = "A bad filter or cursor")))]
#[tracing::instrument(skip_all, err)]
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

/// Reads an agent. An agent's own token may read itself.
#[utoipa::path(get, path = "/agents/{name}", tag = "agents", params(("name" = String, Path, description = "agent name")),
    responses((status = 200, body = Agent, description = "The agent", headers(("ETag" = String, description = "the version, quoted"))),
        (status = 403, body = Problem, description = "An agent token reading another agent"), (status = 404, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = %name), err)]
pub async fn get_agent(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Response> {
    let mut conn = state.db.acquire().await?;
    let agent = agents::by_name(&mut conn, &name).await?.ok_or_else(|| not_found(&name))?;
    Ok(with_etag(agent))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"summary": "Added the login page and its tests", "ready_for_cleanup": true}))]
pub struct UpdateAgent {
    /// What the agent did; `null` clears it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub summary: Option<Option<String>>,
    /// What the agent is asked to do; `null` clears it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
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
#[tracing::instrument(skip_all, fields(agent = %name), err)]
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
    let mut tx = state.db.begin().await?;
    let current = agents::lock(&mut tx, &name).await?.ok_or_else(|| not_found(&name))?;
    if_match.check("the agent", current.version)?;
    let agent = match agents::update_fields(&mut tx, &name, Some(current.version), &edit).await? {
        Ok(Some(agent)) => agent,
        Ok(None) => return Err(not_found(&name)),
        // The row is locked, so only a bug could get here; say what happened all the same.
        Err(now) => {
            return Err(ApiError::PreconditionFailed(format!("the agent is at version {}; read it again", now.version)))
        }
    };
    state.feed.commit(tx).await?;
    Ok(with_etag(agent))
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DeleteQuery {
    /// Delete even a live agent, and remove its clone even with unmerged work.
    #[serde(default)]
    pub force: bool,
}

/// What deleting an agent did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DeletedAgent {
    pub name: String,
    pub clone_path: Option<String>,
    /// Whether the agent's clone was removed (only its own clone, under the data directory).
    pub clone_removed: bool,
    /// With `force`: the work that was thrown away.
    pub discarded: Option<UnmergedWork>,
}

/// Deletes an agent that is not live (or is `ready_for_cleanup`) and removes its clone — only when
/// the clone holds nothing unmerged: no commits missing from the project's target branch, no
/// uncommitted files. Otherwise 409 saying exactly what is unmerged. `?force=true` overrides both.
#[utoipa::path(delete, path = "/agents/{name}", tag = "agents",
    params(("name" = String, Path, description = "agent name"), DeleteQuery),
    responses((status = 200, body = DeletedAgent, description = "Deleted"), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "The agent is live, or its clone holds unmerged work")))]
#[tracing::instrument(skip_all, fields(agent = %name), err)]
pub async fn delete_agent(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiQuery(query): ApiQuery<DeleteQuery>,
) -> ApiResult<Json<DeletedAgent>> {
    let mut tx = state.db.begin().await?;
    let agent = agents::lock(&mut tx, &name).await?.ok_or_else(|| not_found(&name))?;
    if agent.state.is_live() && !agent.ready_for_cleanup && !query.force {
        return Err(ApiError::conflict(
            format!(
                "agent `{name}` is {}: stop it first, or mark it ready_for_cleanup (or pass force=true)",
                agent.state
            ),
            Some(agent.state.as_str()),
        ));
    }
    // Only the agent's own clone, and only under our clones directory, is ever removed: never
    // the project's repository an agent without a clone ran in.
    let clones_root = state.data_dir.join("clones");
    let own_clone = agent
        .clone_path
        .as_deref()
        .map(std::path::PathBuf::from)
        .filter(|p| agent.clone_mode == "agent" && p.starts_with(&clones_root) && p != &clones_root);
    let mut discarded = None;
    if let Some(path) = &own_clone {
        let target = agents::project_target_branch(&mut tx, agent.project_id).await?;
        let work = match clones::unmerged_work(path, &target).await {
            Ok(work) => work,
            Err(e) if !query.force => {
                return Err(ApiError::conflict(
                    format!("cannot tell whether agent `{name}`'s clone holds unmerged work ({e}); pass force=true to remove it anyway"),
                    Some(agent.state.as_str()),
                ))
            }
            Err(_) => None,
        };
        match work {
            Some(work) if !query.force => {
                return Err(ApiError::conflict(
                    format!(
                        "agent `{name}`'s clone {} holds unmerged work: {}; merge or push it, or pass force=true",
                        path.display(),
                        work.describe()
                    ),
                    Some(agent.state.as_str()),
                ))
            }
            other => discarded = other,
        }
    }
    agents::delete(&mut tx, &agent, own_clone.is_some()).await?;
    // Removed before the commit: if removal fails the agent stays registered and can be retried;
    // a failed commit after it leaves a row whose clone is gone, which deleting again settles.
    if let Some(path) = &own_clone {
        clones::remove(path).await.map_err(|e| ApiError::Internal(e.into()))?;
    }
    state.feed.commit(tx).await?;
    // Its token went with the row; the file that held it goes too.
    let token_file = crate::worker::spawner::token_file(&state.data_dir, &name);
    if let Err(e) = std::fs::remove_file(&token_file) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(agent = %name, error = %e, "removing the agent's token file");
        }
    }
    Ok(Json(DeletedAgent { name, clone_path: agent.clone_path, clone_removed: own_clone.is_some(), discarded }))
}
