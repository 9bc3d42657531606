//! Agents: register one (a worker then claims and spawns it), edit what it is asked to do and
//! what it did, delete it with its clone. States are observed (hooks, screen), never set here;
//! acting on a pane is [`super::local_panes`].

use std::path::PathBuf;

use serde::Serialize;
use uuid::Uuid;

use super::clones;
use super::idempotency::{self, Idempotency};
use super::{Ctx, Error, Fields, IfMatch, Result};
use crate::db::agents::{self, Edit, NewAgent};
use crate::db::projects::Project;
use crate::db::{projects, teams, wishes};
use crate::domain::agent::AgentState;
use crate::domain::agent_kind::{default_name, is_reserved_name, is_valid_branch, is_valid_name, AgentKind, AgentRole};
use crate::domain::team::TeamStatus;
use crate::git::clones::{default_branch, UnmergedWork};

pub use crate::db::agents::{Agent, Cause};

/// The agent with id `id`, if it exists.
pub async fn get(conn: &mut sqlx::PgConnection, id: Uuid) -> Result<Option<Agent>> {
    Ok(agents::get(conn, id).await?)
}

pub fn not_found(name: &str) -> Error {
    Error::NotFound(format!("no agent `{name}`"))
}

/// The agent's own directory on the node that runs it, `<data_dir>/agents/<name>` (0700): it
/// holds the agent's token and nothing of any other agent, so the path an agent is given
/// (`SWITCHYARD_TOKEN_FILE`) lists no other agent's token.
pub fn own_dir(data_dir: &std::path::Path, name: &str) -> PathBuf {
    data_dir.join("agents").join(name)
}

/// The token file of one of the agent's panes, `<data_dir>/agents/<name>/token-<pane_key>` (0600;
/// written by the worker that spawns the pane, replaced by the next pane's, removed with the
/// agent). Each pane has its own: a pane that was replaced (its window closing, its late hooks
/// still running) finds no token to act on the agent's new pane with.
pub fn token_file(data_dir: &std::path::Path, name: &str, pane_key: &str) -> PathBuf {
    own_dir(data_dir, name).join(format!("{TOKEN_FILE_PREFIX}{pane_key}"))
}

/// What the names of an agent's token files start with.
pub const TOKEN_FILE_PREFIX: &str = "token-";

/// Free text that may be absent; present means 1 to `max` characters once trimmed.
pub fn text(field: &str, value: Option<String>, max: usize) -> Result<Option<String>> {
    let Some(value) = value else { return Ok(None) };
    let value = value.trim();
    if value.is_empty() || value.chars().count() > max {
        return Err(Error::invalid(field, format!("must be 1 to {max} characters")));
    }
    Ok(Some(value.to_owned()))
}

/// Where a new agent works.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Workspace {
    /// Its own `git clone --shared` of the project's repository, on its own branch.
    #[default]
    OwnClone,
    /// No clone: the project's repository itself.
    ProjectRepo,
}

/// What a new agent is made of.
#[derive(Debug)]
pub struct NewAgentInput {
    /// Default: the kind and a short id.
    pub name: Option<String>,
    /// The project's slug.
    pub project: String,
    pub kind: AgentKind,
    pub role: AgentRole,
    pub provider: String,
    pub task: Option<String>,
    /// A wish's slug; with `group`, the agent works on that group's task.
    pub wish: Option<String>,
    pub group: Option<String>,
    /// `None`: not said (its own clone, or the team's with `team`).
    pub workspace: Option<Workspace>,
    pub branch: Option<String>,
    pub team: Option<String>,
}

/// Registers an agent in state `spawning`; a worker claims it, makes its clone and its pane.
#[tracing::instrument(skip_all, fields(project = ?input.project, provider = ?input.provider), err(level = "debug"))]
pub async fn create(ctx: &Ctx, input: NewAgentInput, idem: Option<&Idempotency>) -> Result<Agent> {
    let id = Uuid::new_v4();
    let mut errors = Fields::default();
    let name = match input.name.as_deref().map(str::trim) {
        Some(name) => {
            errors.check("name", is_valid_name(name), "must be lowercase letters, digits and dashes (1 to 63)");
            errors.check(
                "name",
                !is_reserved_name(name),
                format!("`{name}` is reserved (for people and Switchyard itself)"),
            );
            name.to_owned()
        }
        None => default_name(input.kind, id),
    };
    if input.provider.len() > MAX_NAME {
        errors.max_len("provider", &input.provider, MAX_NAME);
    } else if ctx.providers.current().get(&input.provider).is_none() {
        let known = ctx.providers.current().names().join(", ");
        errors.check("provider", false, format!("unknown provider `{}`; known: {known}", input.provider));
    }
    errors.max_len("project", &input.project, MAX_NAME);
    for (field, value) in [("wish", &input.wish), ("group", &input.group), ("team", &input.team)] {
        errors.max_len_opt(field, value.as_deref(), MAX_NAME);
    }
    let branch_given = input.branch.is_some();
    let workspace = input.workspace.unwrap_or_default();
    let branch = match (workspace, input.branch) {
        (Workspace::ProjectRepo, Some(_)) => {
            errors.check("branch", false, "only an agent with its own clone has a branch");
            None
        }
        (Workspace::ProjectRepo, None) => None,
        (Workspace::OwnClone, Some(b)) => {
            let b = b.trim().to_owned();
            errors.check("branch", is_valid_branch(&b), "is not a branch name git accepts (nor HEAD)");
            Some(b)
        }
        (Workspace::OwnClone, None) => Some(default_branch(&name)),
    };
    let clone_mode = match workspace {
        Workspace::OwnClone => "agent",
        Workspace::ProjectRepo => "none",
    };
    let task = errors.take(text("task", input.task, 20_000))?.flatten();
    errors.finish()?;
    let mut tx = ctx.db.begin().await?;
    let project = projects::find(&mut tx, &input.project, false)
        .await?
        .ok_or_else(|| Error::invalid("project", format!("no project `{}`", input.project)))?;
    let team = match input.team.as_deref().map(str::trim) {
        None => None,
        Some(_) if input.workspace.is_some() || branch_given => {
            return Err(Error::invalid(
                "team",
                "an agent in a team works in the team's clone: leave out `clone` and `branch`",
            ))
        }
        Some(name) => {
            let team =
                teams::lock(&mut tx, name).await?.ok_or_else(|| Error::invalid("team", format!("no team `{name}`")))?;
            if team.project_id != project.id {
                return Err(Error::invalid("team", format!("team `{name}` works on another project")));
            }
            if team.status == TeamStatus::Done {
                return Err(Error::conflict(format!("team `{name}` is done"), Some(team.status.as_str())));
            }
            Some(team)
        }
    };
    let (clone_mode, branch) = match &team {
        Some(team) => ("team", Some(team.branch.clone())),
        None => (clone_mode, branch),
    };
    if let (true, Some(branch)) = (branch_given, &branch) {
        check_branch_is_free(&mut tx, &project, branch).await?;
    }
    let (wish_id, task_id) = match (input.wish, input.group) {
        (None, None) => (None, None),
        (None, Some(_)) => return Err(Error::invalid("group", "needs `wish`: the wish the group belongs to")),
        (Some(slug), group) => {
            let wish = wishes::get(&mut tx, &slug)
                .await?
                .filter(|w| w.project_id == project.id)
                .ok_or_else(|| Error::invalid("wish", format!("no wish `{slug}` in project `{}`", project.slug)))?;
            let task_id = match group {
                Some(key) => Some(
                    wishes::group_task(&mut tx, wish.id, &key)
                        .await?
                        .ok_or_else(|| Error::invalid("group", format!("wish `{slug}` has no group `{key}`")))?,
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
        kind: input.kind,
        role: input.role,
        provider: input.provider,
        clone_mode: clone_mode.to_owned(),
        branch,
        repo: project.repo_url.unwrap_or(project.repo_path),
        team: team.as_ref().map(|t| t.name.clone()),
        wish_id,
        task_id,
        task,
    };
    let agent = agents::insert(&mut tx, &new)
        .await
        .map_err(Error::unique_as("agents_name_key", format!("an agent named `{name}` exists")))?;
    if let Some(team) = &team {
        teams::member_event(&mut tx, team, &agent.name, "team.member_added").await?;
        super::teams::started(&mut tx, team).await?;
    }
    idempotency::record(&mut tx, idem, &agent).await?;
    ctx.feed.commit(tx).await?;
    Ok(agent)
}

/// The longest name of a project, wish, group, team or provider an agent may refer to.
const MAX_NAME: usize = 100;

/// A branch asked for must be the agent's own: not the project's target branch (its work merges
/// there) and not the branch of another agent of the project that may still work on it.
async fn check_branch_is_free(conn: &mut sqlx::PgConnection, project: &Project, branch: &str) -> Result<()> {
    if branch == project.target_branch {
        return Err(Error::invalid(
            "branch",
            format!("is the project's target branch; an agent's work merges into `{branch}`, not onto it"),
        ));
    }
    if let Some((other, slug)) = agents::on_branch(&mut *conn, branch).await? {
        let busy = agents::by_name(&mut *conn, &other)
            .await?
            .is_some_and(|a| a.state.is_live() || a.state == AgentState::Suspended);
        if slug == project.slug && busy {
            return Err(Error::invalid("branch", format!("agent `{other}` works on `{branch}`")));
        }
    }
    Ok(())
}

/// Edits an agent's summary, task text or `ready_for_cleanup`, if the caller's version matches.
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn update(ctx: &Ctx, name: &str, if_match: &IfMatch, edit: Edit) -> Result<Agent> {
    let mut tx = ctx.db.begin().await?;
    let current = agents::lock(&mut tx, name).await?.ok_or_else(|| not_found(name))?;
    if_match.check("the agent", current.version)?;
    let agent = match agents::update_fields(&mut tx, name, Some(current.version), &edit).await? {
        Ok(Some(agent)) => agent,
        Ok(None) => return Err(not_found(name)),
        // The row is locked, so only a bug could get here; say what happened all the same.
        Err(now) => return Err(Error::Stale(format!("the agent is at version {}; read it again", now.version))),
    };
    ctx.feed.commit(tx).await?;
    Ok(agent)
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

/// Deletes an agent that is not live (or is `ready_for_cleanup`) and removes its own clone — only
/// when the clone holds nothing unmerged into the project's target branch; `force` overrides
/// both. git runs before the agent's row is locked and files are removed after the commit; an
/// agent that changed meanwhile is refused (try again).
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn delete(ctx: &Ctx, name: &str, force: bool) -> Result<DeletedAgent> {
    let (seen, target) = {
        let mut conn = ctx.db.acquire().await?;
        let agent = agents::by_name(&mut conn, name).await?.ok_or_else(|| not_found(name))?;
        refuse_live(&agent, force)?;
        let target = agents::project_target_branch(&mut conn, agent.project_id).await?;
        (agent, target)
    };
    let repo = super::repository::open(&ctx.db, &ctx.data_dir, seen.project_id).await?.path;
    let own_clone = own_clone(ctx, &seen);
    let owner = format!("agent `{name}`");
    let discarded = match &own_clone {
        Some(path) => clones::check_before_removing(path, (&repo, &target), &owner, seen.state.as_str(), force).await?,
        None => None,
    };
    let mut tx = ctx.db.begin().await?;
    let agent = agents::lock(&mut tx, name).await?.ok_or_else(|| not_found(name))?;
    if agent.version != seen.version {
        return Err(Error::conflict(
            format!("agent `{name}` changed meanwhile; try again"),
            Some(agent.state.as_str()),
        ));
    }
    agents::delete(&mut tx, &agent, own_clone.is_some()).await?;
    ctx.feed.commit(tx).await?;
    let clone_removed = match &own_clone {
        Some(path) => clones::remove_after_commit(path, &owner).await,
        None => false,
    };
    // Its token went with the row; the directory that held its file goes too.
    if let Err(e) = std::fs::remove_dir_all(own_dir(&ctx.data_dir, name)) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!(agent = %name, error = %e, "removing the agent's token file");
        }
    }
    Ok(DeletedAgent { name: name.to_owned(), clone_path: agent.clone_path, clone_removed, discarded })
}

fn refuse_live(agent: &Agent, force: bool) -> Result<()> {
    if agent.state.is_live() && !agent.ready_for_cleanup && !force {
        return Err(Error::conflict(
            format!(
                "agent `{}` is {}: stop it first, or mark it ready_for_cleanup (or pass force=true)",
                agent.name, agent.state
            ),
            Some(agent.state.as_str()),
        ));
    }
    Ok(())
}

/// Only the agent's own clone, and only under our clones directory, is ever removed: never the
/// project's repository an agent without a clone ran in.
fn own_clone(ctx: &Ctx, agent: &Agent) -> Option<PathBuf> {
    let clones_root = ctx.data_dir.join("clones");
    agent
        .clone_path
        .as_deref()
        .map(PathBuf::from)
        .filter(|p| agent.clone_mode == "agent" && p.starts_with(&clones_root) && p != &clones_root)
}
