//! Teams: a branch-named group of agents sharing one `git clone --shared` of the
//! project's repository. The clone is made by the worker of the node that runs the team's agents
//! (when it spawns the first of them), never by the process that served the call: an API replica
//! on another machine could not make it there.

use std::path::PathBuf;

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::clones;
use super::idempotency::{self, Idempotency};
use super::{Ctx, Error, Fields, IfMatch, Result};
use crate::db::teams::{self, NewTeam, Team};
use crate::db::{agents, projects};
use crate::domain::agent_kind::is_valid_branch;
use crate::domain::team::{is_valid_name, transition, TeamStatus};
use crate::git::clones::{branch_exists, UnmergedWork};

pub fn not_found(name: &str) -> Error {
    Error::NotFound(format!("no team `{name}`"))
}

/// What a new team is made of.
#[derive(Debug, Default)]
pub struct NewTeamInput {
    /// Also the branch of the team's clone.
    pub name: String,
    /// The project's slug.
    pub project: String,
    /// Default: the project's target branch.
    pub base_branch: Option<String>,
    pub leader: Option<String>,
    pub members: Vec<String>,
}

/// Creates a team with its members and leader. Its clone (a new branch named like the team, made
/// from `base_branch`) comes from the worker that spawns its first agent.
#[tracing::instrument(skip_all, fields(team = ?input.name), err(level = "debug"))]
pub async fn create(ctx: &Ctx, input: NewTeamInput, idem: Option<&Idempotency>) -> Result<Team> {
    let name = input.name.trim().to_owned();
    // Every bad field is named at once: the name, the project, the base branch, each member.
    let mut errors = Fields::default();
    errors.check(
        "name",
        is_valid_name(&name),
        "must be 1 to 63 lowercase letters, digits, `-`, `.` or `_`, starting with a letter or digit, and a branch name git accepts",
    );
    let mut conn = ctx.db.acquire().await?;
    let project = projects::find(&mut conn, &input.project, false).await?;
    errors.check("project", project.is_some(), format!("no project `{}`", input.project));
    let base = input.base_branch.map(|b| b.trim().to_owned());
    let base_ok = base.as_deref().is_none_or(is_valid_branch);
    errors.check("base_branch", base_ok, "is not a branch name git accepts");
    let mut members = Vec::new();
    for (i, member) in input.members.iter().chain(input.leader.iter()).enumerate() {
        let field = if i < input.members.len() { format!("members[{i}]") } else { "leader".to_owned() };
        let Some(agent) = agents::by_name(&mut conn, member.trim()).await? else {
            errors.check(field, false, format!("no agent `{member}`"));
            continue;
        };
        if let Some(project) = &project {
            errors.check(
                field.clone(),
                agent.project_id == project.id,
                format!("agent `{member}` works on another project"),
            );
        }
        if let Some(other) = &agent.team {
            errors.check(field, false, format!("agent `{member}` is in team `{other}`"));
        }
        if !members.contains(&agent.name) {
            members.push(agent.name);
        }
    }
    errors.finish()?;
    let project = project.expect("checked above");
    if teams::get(&mut conn, &name).await?.is_some() {
        return Err(Error::conflict(format!("a team named `{name}` exists"), None));
    }
    let base = base.unwrap_or_else(|| project.target_branch.clone());
    if !is_valid_branch(&base) {
        return Err(Error::invalid("base_branch", "the project's target branch is not a branch name git accepts"));
    }
    // Asked of the project's repository before anything is written; nothing is changed there.
    drop(conn);
    let repo = super::repository::open(&ctx.db, &ctx.data_dir, project.id).await?;
    let repo = repo.path();
    if !branch_exists(repo, &base).await? {
        return Err(Error::invalid("base_branch", format!("the project's repository has no branch `{base}`")));
    }
    if branch_exists(repo, &name).await? {
        return Err(Error::conflict(
            format!("the project's repository already has a branch `{name}`; a team starts a new branch"),
            None,
        ));
    }
    let mut tx = ctx.db.begin().await?;
    let new = NewTeam { id: Uuid::new_v4(), name: name.clone(), project_id: project.id, base_branch: base };
    let mut team = teams::insert(&mut tx, &new)
        .await
        .map_err(Error::unique_as("teams_name_key", format!("a team named `{name}` exists")))?;
    for member in &members {
        team = join(&mut tx, &team, member).await?;
    }
    if let Some(leader) = &input.leader {
        team = teams::set_leader(&mut tx, &team, Some(leader.trim())).await?;
    }
    idempotency::record(&mut tx, idem, &team).await?;
    ctx.feed.commit(tx).await?;
    Ok(team)
}

/// Makes `agent` a member; the first member starts a `created` team. Returns the team as it is now.
pub async fn join(conn: &mut PgConnection, team: &Team, agent: &str) -> Result<Team> {
    if !teams::add_member(conn, team, agent).await? {
        return Ok(team.clone());
    }
    started(conn, team).await
}

/// A member joined: a `created` team is now `in_progress`.
pub async fn started(conn: &mut PgConnection, team: &Team) -> Result<Team> {
    let team = teams::get(conn, &team.name).await?.ok_or_else(|| not_found(&team.name))?;
    if team.status == TeamStatus::Created {
        return Ok(teams::set_status(conn, &team, TeamStatus::InProgress).await?);
    }
    Ok(team)
}

/// A change of status or leader; `leader: Some(None)` clears the leader.
#[derive(Debug, Default)]
pub struct TeamEdit {
    pub status: Option<TeamStatus>,
    pub leader: Option<Option<String>>,
}

/// Changes a team's status (as its lifecycle allows) or leader (a member), if the caller's
/// version still matches.
#[tracing::instrument(skip_all, fields(team = ?name), err(level = "debug"))]
pub async fn update(ctx: &Ctx, name: &str, if_match: &IfMatch, edit: TeamEdit) -> Result<Team> {
    let mut tx = ctx.db.begin().await?;
    let mut team = teams::lock(&mut tx, name).await?.ok_or_else(|| not_found(name))?;
    if_match.check("the team", team.version)?;
    if let Some(to) = edit.status {
        transition(team.status, to).map_err(|e| Error::conflict(e.to_string(), Some(team.status.as_str())))?;
        team = teams::set_status(&mut tx, &team, to).await?;
    }
    if let Some(leader) = edit.leader {
        let leader = leader.map(|l| l.trim().to_owned());
        if let Some(l) = &leader {
            if !team.members.contains(l) {
                return Err(Error::invalid("leader", format!("`{l}` is not a member of team `{name}`")));
            }
        }
        team = teams::set_leader(&mut tx, &team, leader.as_deref()).await?;
    }
    ctx.feed.commit(tx).await?;
    Ok(team)
}

/// Adds an existing agent of the team's project; the first member starts a `created` team. One
/// running in a clone of its own goes on there and moves into the team's clone at its next
/// start (the team's `moving` lists it until then).
#[tracing::instrument(skip_all, fields(team = ?name, agent = ?agent), err(level = "debug"))]
pub async fn add_member(ctx: &Ctx, name: &str, agent: &str) -> Result<Team> {
    let mut tx = ctx.db.begin().await?;
    let team = teams::lock(&mut tx, name).await?.ok_or_else(|| not_found(name))?;
    let agent_name = agent.trim();
    let agent = agents::lock(&mut tx, agent_name)
        .await?
        .ok_or_else(|| Error::invalid("agent", format!("no agent `{agent_name}`")))?;
    if agent.project_id != team.project_id {
        return Err(Error::invalid("agent", format!("agent `{agent_name}` works on another project")));
    }
    if let Some(other) = agent.team.as_deref().filter(|other| *other != name) {
        return Err(Error::conflict(format!("agent `{agent_name}` is in team `{other}`; remove it there first"), None));
    }
    // It will work in the team's clone, which lives on the team's node.
    if let (Some(runs_on), Some(pinned)) = (agent.node_id.as_deref(), team.node_id.as_deref()) {
        if runs_on != pinned && agent.clone_mode != "none" {
            return Err(Error::conflict(
                format!(
                    "agent `{agent_name}` runs on node `{runs_on}`; team `{name}` and its clone are on node `{pinned}`"
                ),
                None,
            ));
        }
    }
    let team = join(&mut tx, &team, agent_name).await?;
    ctx.feed.commit(tx).await?;
    Ok(team)
}

/// Takes an agent out of the team (and off its lead); one live in the team's clone must be
/// stopped first.
#[tracing::instrument(skip_all, fields(team = ?name, agent = ?agent), err(level = "debug"))]
pub async fn remove_member(ctx: &Ctx, name: &str, agent: &str) -> Result<Team> {
    let mut tx = ctx.db.begin().await?;
    let team = teams::lock(&mut tx, name).await?.ok_or_else(|| not_found(name))?;
    if teams::live_in_clone(&mut tx, name).await?.iter().any(|live| live == agent) {
        return Err(Error::conflict(
            format!("agent `{agent}` is working in the team's clone; stop it first, then remove it"),
            None,
        ));
    }
    if !teams::remove_member(&mut tx, &team, agent).await? {
        return Err(Error::NotFound(format!("agent `{agent}` is not a member of team `{name}`")));
    }
    let team = teams::get(&mut tx, name).await?.ok_or_else(|| not_found(name))?;
    ctx.feed.commit(tx).await?;
    Ok(team)
}

/// What disbanding a team did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct DisbandedTeam {
    pub name: String,
    pub clone_path: Option<String>,
    pub clone_removed: bool,
    /// The members, now in no team.
    pub members: Vec<String>,
    /// With `force`: the work that was thrown away.
    pub discarded: Option<UnmergedWork>,
}

/// Disbands a team: its members leave it, its chat goes, and its clone is removed — only when no
/// member is live in it and it holds nothing unmerged into `base_branch`; `force` overrides both.
/// git runs before the team's row is locked, and the clone is removed after the commit; a team
/// that changed meanwhile is refused (try again).
#[tracing::instrument(skip_all, fields(team = ?name), err(level = "debug"))]
pub async fn disband(ctx: &Ctx, name: &str, force: bool) -> Result<DisbandedTeam> {
    let seen = {
        let mut conn = ctx.db.acquire().await?;
        let team = teams::get(&mut conn, name).await?.ok_or_else(|| not_found(name))?;
        refuse_live_members(&mut conn, &team, force).await?;
        team
    };
    let clone = own_clone(ctx, &seen, force)?;
    let owner = format!("team `{name}`");
    let work = match &clone {
        Some(clone) => {
            let repo = super::repository::open(&ctx.db, &ctx.data_dir, seen.project_id).await?;
            let against = (repo.path(), seen.base_branch.as_str());
            clones::check_before_removing(clone, against, &owner, seen.status.as_str(), force).await?
        }
        None => None,
    };
    let mut tx = ctx.db.begin().await?;
    let team = teams::lock(&mut tx, name).await?.ok_or_else(|| not_found(name))?;
    if team.version != seen.version {
        return Err(Error::conflict(format!("team `{name}` changed meanwhile; try again"), Some(team.status.as_str())));
    }
    refuse_live_members(&mut tx, &team, force).await?;
    teams::delete(&mut tx, &team, clone.is_some()).await?;
    ctx.feed.commit(tx).await?;
    let clone_removed = match &clone {
        Some(clone) => clones::remove_after_commit(clone, &owner).await,
        None => false,
    };
    Ok(DisbandedTeam {
        name: team.name,
        clone_path: team.clone_path,
        clone_removed,
        members: team.members,
        discarded: work,
    })
}

async fn refuse_live_members(conn: &mut PgConnection, team: &Team, force: bool) -> Result<()> {
    let live = teams::live_in_clone(conn, &team.name).await?;
    if !live.is_empty() && !force {
        return Err(Error::conflict(
            format!(
                "team `{}` has members working in its clone ({}); stop them first, or pass force=true",
                team.name,
                live.join(", ")
            ),
            Some(team.status.as_str()),
        ));
    }
    Ok(())
}

/// The team's clone, when it is on this node and under our teams directory (nothing else is
/// ever removed). A clone on another node can only be checked there.
/// With `force`, a clone elsewhere is left where it is.
fn own_clone(ctx: &Ctx, team: &Team, force: bool) -> Result<Option<PathBuf>> {
    let Some(path) = team.clone_path.as_deref().map(PathBuf::from) else { return Ok(None) };
    if team.node_id.as_deref().is_some_and(|node| node != ctx.node.node_id) {
        if force {
            return Ok(None);
        }
        return Err(Error::conflict(
            format!(
                "team `{}`'s clone is on node `{}`; disband it through an API served beside that node's worker",
                team.name,
                team.node_id.as_deref().unwrap_or_default()
            ),
            Some(team.status.as_str()),
        ));
    }
    Ok(path.starts_with(ctx.data_dir.join("teams")).then_some(path))
}
