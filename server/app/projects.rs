//! Projects: a named scope over one git repository — create one, change it (with `If-Match`),
//! delete it while nothing belongs to it. `repo_path` must be a git repository when it is set;
//! the slug never changes.

use std::path::Path;

use sqlx::PgConnection;
use uuid::Uuid;

use super::{Ctx, Error, IfMatch, Result};
use crate::db::projects::{self, Project, ProjectFields};
use crate::domain::project::{is_valid_slug, ForkConfig, MergeQueueConfig, PrShepherdConfig};
use crate::git::{self, GitError};

/// What a new project is made of; what is not given takes its default (`main`, configs off).
#[derive(Debug, Default)]
pub struct NewProject {
    pub slug: String,
    pub name: String,
    /// Absolute path of a git repository on this server (the repository itself, not a folder in it).
    pub repo_path: String,
    pub target_branch: Option<String>,
    pub github_url: Option<String>,
    pub fork_config: Option<ForkConfig>,
    pub merge_queue_config: Option<MergeQueueConfig>,
    pub pr_shepherd_config: Option<PrShepherdConfig>,
}

/// A change to a project: only the fields given change; `github_url: Some(None)` clears it, a
/// config replaces the whole config.
#[derive(Debug, Default)]
pub struct ProjectPatch {
    pub name: Option<String>,
    pub repo_path: Option<String>,
    pub target_branch: Option<String>,
    pub github_url: Option<Option<String>>,
    pub fork_config: Option<ForkConfig>,
    pub merge_queue_config: Option<MergeQueueConfig>,
    pub pr_shepherd_config: Option<PrShepherdConfig>,
}

/// The id of the project named by `slug` in `field`; an unknown slug is a bad `field`.
pub async fn id(conn: &mut PgConnection, slug: &str, field: &str) -> Result<Uuid> {
    projects::id_by_slug(conn, slug).await?.ok_or_else(|| Error::invalid(field, format!("no project `{slug}`")))
}

pub fn no_project(slug: &str) -> Error {
    Error::NotFound(format!("no project `{slug}`"))
}

/// Creates a project over an existing git repository.
#[tracing::instrument(skip_all, fields(slug = ?new.slug), err(level = "debug"))]
pub async fn create(ctx: &Ctx, new: NewProject) -> Result<Project> {
    if !is_valid_slug(&new.slug) {
        return Err(Error::invalid("slug", "must match ^[a-z0-9][a-z0-9-]{0,62}$"));
    }
    let fields = validate(ProjectFields {
        name: new.name,
        repo_path: new.repo_path,
        target_branch: new.target_branch.unwrap_or_else(|| "main".to_owned()),
        github_url: new.github_url,
        fork_config: new.fork_config.unwrap_or_default(),
        merge_queue_config: new.merge_queue_config.unwrap_or_default(),
        pr_shepherd_config: new.pr_shepherd_config.unwrap_or_default(),
    })?;
    check_repository(&fields.repo_path).await?;
    let mut tx = ctx.db.begin().await?;
    let project = projects::create(&mut tx, &new.slug, &fields)
        .await
        .map_err(Error::unique_as("projects_slug_key", format!("a project with slug `{}` exists", new.slug)))?;
    ctx.feed.commit(tx).await?;
    Ok(project)
}

/// Changes some of a project's fields, if it is still at a version `if_match` names. A patch
/// that changes nothing keeps the version (and records nothing).
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn update(ctx: &Ctx, slug: &str, if_match: &IfMatch, patch: ProjectPatch) -> Result<Project> {
    let mut tx = ctx.db.begin().await?;
    let current = projects::find(&mut tx, slug, true).await?.ok_or_else(|| no_project(slug))?;
    if_match.check(&format!("project `{slug}`"), current.version)?;
    let old = current.fields();
    let new = validate(ProjectFields {
        name: patch.name.unwrap_or_else(|| old.name.clone()),
        repo_path: patch.repo_path.unwrap_or_else(|| old.repo_path.clone()),
        target_branch: patch.target_branch.unwrap_or_else(|| old.target_branch.clone()),
        github_url: patch.github_url.unwrap_or_else(|| old.github_url.clone()),
        fork_config: patch.fork_config.unwrap_or_else(|| old.fork_config.clone()),
        merge_queue_config: patch.merge_queue_config.unwrap_or_else(|| old.merge_queue_config.clone()),
        pr_shepherd_config: patch.pr_shepherd_config.unwrap_or_else(|| old.pr_shepherd_config.clone()),
    })?;
    let changed = changed_fields(&old, &new);
    if changed.is_empty() {
        return Ok(current);
    }
    // Only a new path is checked: a repository that went missing must not block a rename.
    if new.repo_path != old.repo_path {
        check_repository(&new.repo_path).await?;
    }
    let project = projects::update(&mut tx, &current, &new, &changed).await?;
    ctx.feed.commit(tx).await?;
    Ok(project)
}

/// Deletes a project and its boards. Refused while tasks, wishes or agents still belong to it.
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn delete(ctx: &Ctx, slug: &str) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    // The row lock makes a task or wish created meanwhile wait, then fail its foreign key.
    let project = projects::find(&mut tx, slug, true).await?.ok_or_else(|| no_project(slug))?;
    let dependents = projects::dependents(&mut tx, project.id).await?;
    if dependents.tasks > 0 || dependents.wishes > 0 || dependents.agents > 0 {
        return Err(Error::conflict(
            format!(
                "project `{slug}` still has {}, {} and {}; delete or move them first",
                plural(dependents.tasks, "task"),
                plural(dependents.wishes, "wish"),
                plural(dependents.agents, "agent")
            ),
            None,
        ));
    }
    projects::delete(&mut tx, &project).await?;
    ctx.feed.commit(tx).await?;
    Ok(())
}

fn plural(n: i64, noun: &str) -> String {
    match (n, noun) {
        (1, _) => format!("1 {noun}"),
        (_, "wish") => format!("{n} wishes"),
        _ => format!("{n} {noun}s"),
    }
}

/// Trims and checks the fields every create and update must satisfy.
fn validate(mut f: ProjectFields) -> Result<ProjectFields> {
    f.name = f.name.trim().to_owned();
    if f.name.is_empty() || f.name.chars().count() > 200 {
        return Err(Error::invalid("name", "must be 1 to 200 characters"));
    }
    f.target_branch = f.target_branch.trim().to_owned();
    let branch_ok = !f.target_branch.is_empty()
        && f.target_branch.len() <= 200
        && !f.target_branch.starts_with('-')
        && !f.target_branch.chars().any(|c| c.is_whitespace() || c.is_control());
    if !branch_ok {
        return Err(Error::invalid("target_branch", "must be a branch name (no spaces, not starting with -)"));
    }
    f.github_url = f.github_url.map(|u| u.trim().to_owned()).filter(|u| !u.is_empty());
    if let Some(url) = &f.github_url {
        if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() > 500 {
            return Err(Error::invalid("github_url", "must be an http(s) URL of at most 500 characters"));
        }
    }
    f.repo_path = f.repo_path.trim().to_owned();
    if !Path::new(&f.repo_path).is_absolute() {
        return Err(Error::invalid("repo_path", "must be an absolute path"));
    }
    Ok(f)
}

fn changed_fields(old: &ProjectFields, new: &ProjectFields) -> Vec<&'static str> {
    [
        ("name", old.name != new.name),
        ("repo_path", old.repo_path != new.repo_path),
        ("target_branch", old.target_branch != new.target_branch),
        ("github_url", old.github_url != new.github_url),
        ("fork_config", old.fork_config != new.fork_config),
        ("merge_queue_config", old.merge_queue_config != new.merge_queue_config),
        ("pr_shepherd_config", old.pr_shepherd_config != new.pr_shepherd_config),
    ]
    .into_iter()
    .filter_map(|(name, differs)| differs.then_some(name))
    .collect()
}

/// `repo_path` must be a git repository itself ([`git::check_repository`]); what git says is
/// the caller's to fix, so it is a bad `repo_path`, not our failure.
async fn check_repository(path: &str) -> Result<()> {
    git::check_repository(Path::new(path)).await.map_err(|e| match e {
        GitError::Failed { stderr, .. } => Error::invalid("repo_path", format!("is not a git repository ({stderr})")),
        GitError::Timeout { .. } => Error::invalid("repo_path", "git did not answer within 10 seconds"),
        io @ GitError::Io(_) => Error::internal(io),
    })
}
