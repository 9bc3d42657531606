//! What a person does to teams from the dashboard: make one, change its status or leader, add and
//! remove members, disband it — the use cases of [`crate::app::teams`], as the API's. The forms
//! are on the teams pages ([`super::teams`]).

use axum::extract::State;
use axum::routing::post;
use axum::Router;
use serde::Deserialize;

use crate::app::teams::{self as teams_app, NewTeamInput, TeamEdit};
use crate::app::IfMatch;
use crate::domain::team::TeamStatus;
use crate::http::AppState;
use crate::pages::view::{filled, list, see_other, PageForm, PagePath, PageResult};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/teams", post(create))
        .route("/teams/{name}/status", post(set_status))
        .route("/teams/{name}/leader", post(set_leader))
        .route("/teams/{name}/members", post(add_member))
        .route("/teams/{name}/members/{agent}/remove", post(remove_member))
        .route("/teams/{name}/disband", post(disband))
}

#[derive(Debug, Deserialize)]
struct TeamForm {
    name: String,
    project: String,
    /// Empty: the project's target branch.
    base_branch: String,
    /// Agents' names, separated by commas or spaces.
    members: String,
    /// Empty: none.
    leader: String,
}

#[tracing::instrument(skip_all, fields(team = ?form.name), err(Debug, level = "debug"))]
async fn create(State(state): State<AppState>, PageForm(form): PageForm<TeamForm>) -> PageResult {
    let input = NewTeamInput {
        name: form.name,
        project: form.project,
        base_branch: filled(&form.base_branch),
        leader: filled(&form.leader),
        members: list(&form.members),
    };
    let team = teams_app::create(&state, input, None).await?;
    Ok(see_other(&format!("/teams/{}", team.name)))
}

#[derive(Debug, Deserialize)]
struct StatusForm {
    status: String,
}

#[tracing::instrument(skip_all, fields(team = ?name), err(Debug, level = "debug"))]
async fn set_status(
    State(state): State<AppState>,
    PagePath(name): PagePath<String>,
    PageForm(form): PageForm<StatusForm>,
) -> PageResult {
    let status = crate::http::query::filter::<TeamStatus>("status", Some(form.status.as_str()))?;
    teams_app::update(&state, &name, &IfMatch::new(None), TeamEdit { status, leader: None }).await?;
    Ok(see_other(&format!("/teams/{name}")))
}

#[derive(Debug, Deserialize)]
struct LeaderForm {
    /// Empty: no leader.
    leader: String,
}

#[tracing::instrument(skip_all, fields(team = ?name), err(Debug, level = "debug"))]
async fn set_leader(
    State(state): State<AppState>,
    PagePath(name): PagePath<String>,
    PageForm(form): PageForm<LeaderForm>,
) -> PageResult {
    let edit = TeamEdit { status: None, leader: Some(filled(&form.leader)) };
    teams_app::update(&state, &name, &IfMatch::new(None), edit).await?;
    Ok(see_other(&format!("/teams/{name}")))
}

#[derive(Debug, Deserialize)]
struct MemberForm {
    agent: String,
}

#[tracing::instrument(skip_all, fields(team = ?name), err(Debug, level = "debug"))]
async fn add_member(
    State(state): State<AppState>,
    PagePath(name): PagePath<String>,
    PageForm(form): PageForm<MemberForm>,
) -> PageResult {
    teams_app::add_member(&state, &name, form.agent.trim()).await?;
    Ok(see_other(&format!("/teams/{name}")))
}

#[tracing::instrument(skip_all, fields(team = ?name, agent = ?agent), err(Debug, level = "debug"))]
async fn remove_member(
    State(state): State<AppState>,
    PagePath((name, agent)): PagePath<(String, String)>,
) -> PageResult {
    teams_app::remove_member(&state, &name, &agent).await?;
    Ok(see_other(&format!("/teams/{name}")))
}

/// Disbands the team; refused while its clone holds work not merged (the API's `force` is not
/// offered here: throwing work away is a decision for a script that says so).
#[tracing::instrument(skip_all, fields(team = ?name), err(Debug, level = "debug"))]
async fn disband(State(state): State<AppState>, PagePath(name): PagePath<String>) -> PageResult {
    teams_app::disband(&state, &name, false).await?;
    Ok(see_other("/teams"))
}
