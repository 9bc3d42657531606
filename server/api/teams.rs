//! `/api/v1/teams`: teams ([`crate::app::teams`]). A team is a branch-named group of
//! agents sharing one `git clone --shared` of the project's repository (under
//! `<data_dir>/teams/<name>` of the node that runs them), on a new branch (the team's name) made
//! from `base_branch`. Members, a leader, a lifecycle
//! (`created → in_progress → done | blocked`) and a chat ([`super::team_chat`]).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::auth::Authenticated;
use crate::api::idempotency::{self, IdempotentJson};
use crate::api::json::{nullable, ApiJson};
use crate::api::team_chat;
use crate::app::projects::id as project_id;
pub use crate::app::teams::DisbandedTeam;
use crate::app::teams::{self as teams_app, NewTeamInput, TeamEdit};
use crate::db::teams::{self, ListFilter, Team};
use crate::domain::team::TeamStatus;
use crate::http::error::{ApiError, ApiResult, Problem};
use crate::http::etag::{etag, IfMatch};
use crate::http::pagination::{page, Page, PageQuery, Position};
use crate::http::query::{filter, ApiQuery};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_team, list_teams))
        .routes(routes!(get_team, update_team, disband_team))
        .routes(routes!(add_member))
        .routes(routes!(remove_member))
        .merge(team_chat::router())
}

fn with_etag(team: Team) -> Response {
    (etag(team.version), Json(team)).into_response()
}

pub(crate) fn not_found(name: &str) -> ApiError {
    teams_app::not_found(name).into()
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "login-team", "project": "switchyard", "base_branch": "main",
    "leader": "clever-fox", "members": ["clever-fox", "quiet-owl"]}))]
pub struct CreateTeam {
    /// Also the branch of the team's clone: lowercase letters, digits, `-`, `.`, `_`.
    pub name: String,
    /// The project's slug.
    pub project: String,
    /// The branch the team's branch starts from; default: the project's target branch.
    pub base_branch: Option<String>,
    /// One of the members (added if it is not among them).
    pub leader: Option<String>,
    /// Existing agents of the project to make members.
    #[serde(default)]
    pub members: Vec<String>,
}

/// Creates a team. Its clone (`git clone --shared` of the project's repository, checked out on a
/// new branch named like the team, made from `base_branch`) is made by the worker that spawns
/// its first agent, on that agent's node; `clone_path` and `node_id` say where once it is.
#[utoipa::path(post, path = "/teams", tag = "teams", request_body = CreateTeam,
    params(("Idempotency-Key" = Option<String>, Header, description = "Makes the request safe to retry: the same key with the same body within 24 hours answers the first response again (nothing is created); with another body, 422.")),
    responses((status = 201, body = Team, headers(("ETag" = String, description = "the version, quoted"))),
        (status = 409, body = Problem, description = "A team, or a branch in the repository, has this name"),
        (status = 422, body = Problem, description = "A bad name, project, base branch, member or leader")))]
#[tracing::instrument(skip_all, fields(team = ?body.name), err(level = "debug"))]
pub async fn create_team(
    State(state): State<AppState>,
    IdempotentJson(body, idem): IdempotentJson<CreateTeam>,
) -> ApiResult<Response> {
    if let Some(first) = idempotency::replay(&state, idem.as_ref()).await? {
        return Ok(first);
    }
    let input = NewTeamInput {
        name: body.name,
        project: body.project,
        base_branch: body.base_branch,
        leader: body.leader,
        members: body.members,
    };
    let mut response = with_etag(teams_app::create(&state, input, idem.as_ref()).await?);
    *response.status_mut() = StatusCode::CREATED;
    Ok(response)
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TeamFilters {
    /// A project's slug.
    pub project: Option<String>,
    /// `created`, `in_progress`, `done` or `blocked`.
    pub status: Option<String>,
}

/// Lists teams oldest first, with their members.
#[utoipa::path(get, path = "/teams", tag = "teams", params(TeamFilters, PageQuery),
    responses((status = 200, body = Page<Team>), (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list_teams(
    State(state): State<AppState>,
    ApiQuery(filters): ApiQuery<TeamFilters>,
    ApiQuery(paging): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<Team>>> {
    let (limit, position) = paging.parse()?;
    let status = filter::<TeamStatus>("status", filters.status.as_deref())?;
    let mut conn = state.db.acquire().await?;
    let project_id = match &filters.project {
        Some(slug) => Some(project_id(&mut conn, slug, "project").await?),
        None => None,
    };
    let filter =
        ListFilter { project_id, status, after: position.map(|p| (p.created_at, p.id)), ..ListFilter::default() };
    let rows = teams::list(&mut conn, &filter, limit + 1).await?;
    Ok(Json(page(rows, limit, |t| Position { created_at: t.created_at, id: t.id })))
}

/// Reads a team (an agent's token only its own team).
#[utoipa::path(get, path = "/teams/{name}", tag = "teams", params(("name" = String, Path)),
    responses((status = 200, body = Team, headers(("ETag" = String, description = "the version, quoted"))),
        (status = 403, body = Problem, description = "An agent's token, and the agent is not a member"),
        (status = 404, body = Problem)))]
#[tracing::instrument(skip_all, fields(team = ?name), err(level = "debug"))]
pub async fn get_team(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    Ok(with_etag(team_chat::team_for(&state, &caller, &name).await?))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"status": "blocked", "leader": "quiet-owl"}))]
pub struct UpdateTeam {
    /// `in_progress`, `done` or `blocked` (from `created`: `in_progress`; `done` is final).
    pub status: Option<TeamStatus>,
    /// A member's name; `null` clears the leader.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub leader: Option<Option<String>>,
}

/// Changes a team's status or leader. Send `If-Match: "<version>"` to be sure nobody changed it.
#[utoipa::path(patch, path = "/teams/{name}", tag = "teams", request_body = UpdateTeam,
    params(("name" = String, Path), ("If-Match" = Option<String>, Header, description = "the version you read")),
    responses((status = 200, body = Team), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "A status change the lifecycle does not allow"),
        (status = 412, body = Problem), (status = 422, body = Problem, description = "A leader who is not a member")))]
#[tracing::instrument(skip_all, fields(team = ?name), err(level = "debug"))]
pub async fn update_team(
    State(state): State<AppState>,
    Path(name): Path<String>,
    if_match: IfMatch,
    ApiJson(body): ApiJson<UpdateTeam>,
) -> ApiResult<Response> {
    let edit = TeamEdit { status: body.status, leader: body.leader };
    Ok(with_etag(teams_app::update(&state, &name, &if_match, edit).await?))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"agent": "quiet-owl"}))]
pub struct AddMember {
    /// An agent of the team's project.
    pub agent: String,
}

/// Adds an existing agent to the team (it keeps working where it is; agents created with
/// `team` work in the team's clone). The first member starts a `created` team.
#[utoipa::path(post, path = "/teams/{name}/members", tag = "teams", params(("name" = String, Path)),
    request_body = AddMember,
    responses((status = 200, body = Team), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "The agent is in another team"),
        (status = 422, body = Problem, description = "No such agent, or one of another project")))]
#[tracing::instrument(skip_all, fields(team = ?name), err(level = "debug"))]
pub async fn add_member(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<AddMember>,
) -> ApiResult<Json<Team>> {
    Ok(Json(teams_app::add_member(&state, &name, &body.agent).await?))
}

/// Takes an agent out of the team (and off its lead). An agent working in the team's clone must
/// be stopped first.
#[utoipa::path(delete, path = "/teams/{name}/members/{agent}", tag = "teams",
    params(("name" = String, Path), ("agent" = String, Path)),
    responses((status = 200, body = Team), (status = 404, body = Problem, description = "No such team or member"),
        (status = 409, body = Problem, description = "The member is live in the team's clone")))]
#[tracing::instrument(skip_all, fields(team = ?name, agent = ?agent), err(level = "debug"))]
pub async fn remove_member(
    State(state): State<AppState>,
    Path((name, agent)): Path<(String, String)>,
) -> ApiResult<Json<Team>> {
    Ok(Json(teams_app::remove_member(&state, &name, &agent).await?))
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DisbandQuery {
    /// Disband even with members working in the clone, and remove the clone even with unmerged work.
    #[serde(default)]
    pub force: bool,
}

/// Disbands a team: its members leave it, its chat goes, and its clone is removed — only when
/// no member is live in it and it holds nothing unmerged into `base_branch` (commits or
/// uncommitted files); otherwise 409 saying exactly what. `?force=true` overrides both.
#[utoipa::path(delete, path = "/teams/{name}", tag = "teams", params(("name" = String, Path), DisbandQuery),
    responses((status = 200, body = DisbandedTeam), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "Members work in the clone, or it holds unmerged work")))]
#[tracing::instrument(skip_all, fields(team = ?name), err(level = "debug"))]
pub async fn disband_team(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiQuery(query): ApiQuery<DisbandQuery>,
) -> ApiResult<Json<DisbandedTeam>> {
    Ok(Json(teams_app::disband(&state, &name, query.force).await?))
}
