//! `/api/v1/teams`: Genie's teams. A team is a branch-named group of agents sharing one
//! `git clone --shared` of the project's repository (under `<data_dir>/teams/<name>`), on a new
//! branch (the team's name) made from `base_branch`. Members, a leader, a lifecycle
//! (`created → in_progress → done | blocked`) and a chat ([`super::team_chat`]).

use std::path::{Path as FsPath, PathBuf};

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
use crate::api::team_chat;
use crate::app::projects::id as project_id;
use crate::db::teams::{self, ListFilter, NewTeam, Team};
use crate::db::{agents, projects};
use crate::domain::agent_kind::is_valid_branch;
use crate::domain::team::{is_valid_name, transition, TeamStatus};
use crate::git::clones::{self, UnmergedWork};
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
    ApiError::NotFound(format!("no team `{name}`"))
}

/// Where a team's clone lives.
pub fn clone_dir(data_dir: &FsPath, team: &str) -> PathBuf {
    data_dir.join("teams").join(team)
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

/// Creates a team and its clone: `git clone --shared` of the project's repository under the data
/// directory, checked out on a new branch named like the team, made from `base_branch`.
#[utoipa::path(post, path = "/teams", tag = "teams", request_body = CreateTeam,
    responses((status = 201, body = Team, headers(("ETag" = String, description = "the version, quoted"))),
        (status = 409, body = Problem, description = "A team, or a branch in the repository, has this name"),
        (status = 422, body = Problem, description = "A bad name, project, base branch, member or leader")))]
#[tracing::instrument(skip_all, fields(team = %body.name), err)]
pub async fn create_team(State(state): State<AppState>, ApiJson(body): ApiJson<CreateTeam>) -> ApiResult<Response> {
    let name = body.name.trim().to_owned();
    if !is_valid_name(&name) {
        return Err(ApiError::validation(
            "name",
            "must be 1 to 63 lowercase letters, digits, `-`, `.` or `_`, starting with a letter or digit, and a branch name git accepts",
        ));
    }
    let mut conn = state.db.acquire().await?;
    let project = projects::find(&mut conn, &body.project, false)
        .await?
        .ok_or_else(|| ApiError::validation("project", format!("no project `{}`", body.project)))?;
    if teams::get(&mut conn, &name).await?.is_some() {
        return Err(ApiError::conflict(format!("a team named `{name}` exists"), None));
    }
    let base = body.base_branch.map(|b| b.trim().to_owned()).unwrap_or_else(|| project.target_branch.clone());
    if !is_valid_branch(&base) {
        return Err(ApiError::validation("base_branch", "is not a branch name git accepts"));
    }
    let mut members = Vec::new();
    for (i, member) in body.members.iter().chain(body.leader.iter()).enumerate() {
        let field = if i < body.members.len() { format!("members[{i}]") } else { "leader".to_owned() };
        let agent = agents::by_name(&mut conn, member.trim())
            .await?
            .ok_or_else(|| ApiError::validation(field.clone(), format!("no agent `{member}`")))?;
        if agent.project_id != project.id {
            return Err(ApiError::validation(field, format!("agent `{member}` works on another project")));
        }
        if let Some(other) = &agent.team {
            return Err(ApiError::validation(field, format!("agent `{member}` is in team `{other}`")));
        }
        if !members.contains(&agent.name) {
            members.push(agent.name);
        }
    }
    drop(conn);
    let repo = FsPath::new(&project.repo_path);
    let git = |e: crate::git::GitError| ApiError::Internal(e.into());
    if !clones::branch_exists(repo, &base).await.map_err(git)? {
        return Err(ApiError::validation("base_branch", format!("the project's repository has no branch `{base}`")));
    }
    if clones::branch_exists(repo, &name).await.map_err(git)? {
        return Err(ApiError::conflict(
            format!("the project's repository already has a branch `{name}`; a team starts a new branch"),
            None,
        ));
    }
    let dest = clone_dir(&state.data_dir, &name);
    if dest.exists() {
        return Err(ApiError::conflict(format!("{} is in the way of the team's clone", dest.display()), None));
    }
    clones::make(repo, &dest, &name, &base).await.map_err(git)?;
    let made = async {
        let mut tx = state.db.begin().await?;
        let new = NewTeam {
            id: Uuid::new_v4(),
            name: name.clone(),
            project_id: project.id,
            base_branch: base,
            clone_path: dest.to_string_lossy().into_owned(),
        };
        let mut team = teams::insert(&mut tx, &new)
            .await
            .map_err(ApiError::unique_as("teams_name_key", format!("a team named `{name}` exists")))?;
        for member in &members {
            team = join(&mut tx, &team, member).await?;
        }
        if let Some(leader) = &body.leader {
            team = teams::set_leader(&mut tx, &team, Some(leader.trim())).await?;
        }
        state.feed.commit(tx).await?;
        ApiResult::Ok(team)
    };
    match made.await {
        Ok(team) => {
            let mut response = with_etag(team);
            *response.status_mut() = StatusCode::CREATED;
            Ok(response)
        }
        Err(e) => {
            // Nothing refers to the clone: do not leave it in the way of the next try.
            let _ = clones::remove(&dest).await;
            Err(e)
        }
    }
}

/// Makes `agent` a member; the first member starts a `created` team. Returns the team as it is now.
pub(crate) async fn join(conn: &mut sqlx::PgConnection, team: &Team, agent: &str) -> ApiResult<Team> {
    if !teams::add_member(conn, team, agent).await? {
        return Ok(team.clone());
    }
    started(conn, team).await
}

/// A member joined: a `created` team is now `in_progress`.
pub(crate) async fn started(conn: &mut sqlx::PgConnection, team: &Team) -> ApiResult<Team> {
    let team = teams::get(conn, &team.name).await?.ok_or_else(|| not_found(&team.name))?;
    if team.status == TeamStatus::Created {
        return Ok(teams::set_status(conn, &team, TeamStatus::InProgress).await?);
    }
    Ok(team)
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
#[tracing::instrument(skip_all, err)]
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

/// Reads a team (an agent's token may read any team; it sees only names and states).
#[utoipa::path(get, path = "/teams/{name}", tag = "teams", params(("name" = String, Path)),
    responses((status = 200, body = Team, headers(("ETag" = String, description = "the version, quoted"))),
        (status = 404, body = Problem)))]
#[tracing::instrument(skip_all, fields(team = %name), err)]
pub async fn get_team(State(state): State<AppState>, Path(name): Path<String>) -> ApiResult<Response> {
    let mut conn = state.db.acquire().await?;
    Ok(with_etag(teams::get(&mut conn, &name).await?.ok_or_else(|| not_found(&name))?))
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
#[tracing::instrument(skip_all, fields(team = %name), err)]
pub async fn update_team(
    State(state): State<AppState>,
    Path(name): Path<String>,
    if_match: IfMatch,
    ApiJson(body): ApiJson<UpdateTeam>,
) -> ApiResult<Response> {
    let mut tx = state.db.begin().await?;
    let mut team = teams::lock(&mut tx, &name).await?.ok_or_else(|| not_found(&name))?;
    if_match.check("the team", team.version)?;
    if let Some(to) = body.status {
        transition(team.status, to).map_err(|e| ApiError::conflict(e.to_string(), Some(team.status.as_str())))?;
        team = teams::set_status(&mut tx, &team, to).await?;
    }
    if let Some(leader) = body.leader {
        let leader = leader.map(|l| l.trim().to_owned());
        if let Some(l) = &leader {
            if !team.members.contains(l) {
                return Err(ApiError::validation("leader", format!("`{l}` is not a member of team `{name}`")));
            }
        }
        team = teams::set_leader(&mut tx, &team, leader.as_deref()).await?;
    }
    state.feed.commit(tx).await?;
    Ok(with_etag(team))
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
#[tracing::instrument(skip_all, fields(team = %name), err)]
pub async fn add_member(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<AddMember>,
) -> ApiResult<Json<Team>> {
    let mut tx = state.db.begin().await?;
    let team = teams::lock(&mut tx, &name).await?.ok_or_else(|| not_found(&name))?;
    let agent_name = body.agent.trim();
    let agent = agents::lock(&mut tx, agent_name)
        .await?
        .ok_or_else(|| ApiError::validation("agent", format!("no agent `{agent_name}`")))?;
    if agent.project_id != team.project_id {
        return Err(ApiError::validation("agent", format!("agent `{agent_name}` works on another project")));
    }
    match agent.team.as_deref() {
        Some(other) if other != name => {
            return Err(ApiError::conflict(
                format!("agent `{agent_name}` is in team `{other}`; remove it there first"),
                None,
            ))
        }
        _ => {}
    }
    let team = join(&mut tx, &team, agent_name).await?;
    state.feed.commit(tx).await?;
    Ok(Json(team))
}

/// Takes an agent out of the team (and off its lead). An agent working in the team's clone must
/// be stopped first.
#[utoipa::path(delete, path = "/teams/{name}/members/{agent}", tag = "teams",
    params(("name" = String, Path), ("agent" = String, Path)),
    responses((status = 200, body = Team), (status = 404, body = Problem, description = "No such team or member"),
        (status = 409, body = Problem, description = "The member is live in the team's clone")))]
#[tracing::instrument(skip_all, fields(team = %name, agent = %agent), err)]
pub async fn remove_member(
    State(state): State<AppState>,
    Path((name, agent)): Path<(String, String)>,
) -> ApiResult<Json<Team>> {
    let mut tx = state.db.begin().await?;
    let team = teams::lock(&mut tx, &name).await?.ok_or_else(|| not_found(&name))?;
    if teams::live_in_clone(&mut tx, &name).await?.contains(&agent) {
        return Err(ApiError::conflict(
            format!("agent `{agent}` is working in the team's clone; stop it first, then remove it"),
            None,
        ));
    }
    if !teams::remove_member(&mut tx, &team, &agent).await? {
        return Err(ApiError::NotFound(format!("agent `{agent}` is not a member of team `{name}`")));
    }
    let team = teams::get(&mut tx, &name).await?.ok_or_else(|| not_found(&name))?;
    state.feed.commit(tx).await?;
    Ok(Json(team))
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct DisbandQuery {
    /// Disband even with members working in the clone, and remove the clone even with unmerged work.
    #[serde(default)]
    pub force: bool,
}

/// What disbanding a team did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DisbandedTeam {
    pub name: String,
    pub clone_path: String,
    pub clone_removed: bool,
    /// The members, now in no team.
    pub members: Vec<String>,
    /// With `force`: the work that was thrown away.
    pub discarded: Option<UnmergedWork>,
}

/// Disbands a team: its members leave it, its chat goes, and its clone is removed — only when
/// no member is live in it and it holds nothing unmerged into `base_branch` (commits or
/// uncommitted files); otherwise 409 saying exactly what. `?force=true` overrides both.
#[utoipa::path(delete, path = "/teams/{name}", tag = "teams", params(("name" = String, Path), DisbandQuery),
    responses((status = 200, body = DisbandedTeam), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "Members work in the clone, or it holds unmerged work")))]
#[tracing::instrument(skip_all, fields(team = %name), err)]
pub async fn disband_team(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiQuery(query): ApiQuery<DisbandQuery>,
) -> ApiResult<Json<DisbandedTeam>> {
    let mut tx = state.db.begin().await?;
    let team = teams::lock(&mut tx, &name).await?.ok_or_else(|| not_found(&name))?;
    let live = teams::live_in_clone(&mut tx, &name).await?;
    if !live.is_empty() && !query.force {
        return Err(ApiError::conflict(
            format!(
                "team `{name}` has members working in its clone ({}); stop them first, or pass force=true",
                live.join(", ")
            ),
            Some(team.status.as_str()),
        ));
    }
    // Only a clone under our teams directory is ever removed.
    let clone = PathBuf::from(&team.clone_path);
    let ours = clone.starts_with(state.data_dir.join("teams"));
    let work = match clones::unmerged_work(&clone, &team.base_branch).await {
        Ok(work) => work,
        Err(e) if !query.force => {
            return Err(ApiError::conflict(
                format!("cannot tell whether team `{name}`'s clone holds unmerged work ({e}); pass force=true to remove it anyway"),
                Some(team.status.as_str()),
            ))
        }
        Err(_) => None,
    };
    if let (Some(work), false) = (&work, query.force) {
        return Err(ApiError::conflict(
            format!(
                "team `{name}`'s clone {} holds work not merged into `{}`: {}; merge or push it, or pass force=true",
                clone.display(),
                team.base_branch,
                work.describe()
            ),
            Some(team.status.as_str()),
        ));
    }
    teams::delete(&mut tx, &team, ours).await?;
    // Removed before the commit: a failed removal leaves the team, which disbanding again settles.
    if ours {
        clones::remove(&clone).await.map_err(|e| ApiError::Internal(e.into()))?;
    }
    state.feed.commit(tx).await?;
    Ok(Json(DisbandedTeam {
        name,
        clone_path: team.clone_path,
        clone_removed: ours,
        members: team.members,
        discarded: work,
    }))
}
