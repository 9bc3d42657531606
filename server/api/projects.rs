//! `/api/v1/projects`: create, list, read, update (with `If-Match`) and delete projects. A
//! project's `repo_path` must be a git repository when it is set; the slug never changes.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::error::{ApiError, ApiResult, Problem};
use crate::api::etag::{etag, IfMatch};
use crate::api::extract::ApiPath;
use crate::api::json::{nullable, ApiJson};
use crate::api::pagination::{page, Page, PageQuery, Position};
use crate::api::query::ApiQuery;
use crate::db::projects::{self, Project, ProjectFields};
use crate::domain::project::{is_valid_slug, ForkConfig, MergeQueueConfig, PrShepherdConfig};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_project, list_projects)).routes(routes!(
        get_project,
        update_project,
        delete_project
    ))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"slug": "switchyard", "name": "Switchyard", "repo_path": "/srv/repos/switchyard",
    "merge_queue_config": {"enabled": true, "track_mode": "author"}}))]
pub struct CreateProject {
    /// `^[a-z0-9][a-z0-9-]{0,62}$`; names the project in URLs and never changes.
    pub slug: String,
    pub name: String,
    /// Absolute path of a git repository on the server (the repository itself, not a folder in it).
    pub repo_path: String,
    /// Defaults to `main`.
    pub target_branch: Option<String>,
    pub github_url: Option<String>,
    pub fork_config: Option<ForkConfig>,
    pub merge_queue_config: Option<MergeQueueConfig>,
    pub pr_shepherd_config: Option<PrShepherdConfig>,
}

/// Only the fields sent change; `github_url: null` clears it. A config object replaces the
/// whole config. The slug cannot be changed.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Switchyard (main)", "pr_shepherd_config": {"enabled": true, "track_mode": "author"}}))]
pub struct UpdateProject {
    pub name: Option<String>,
    pub repo_path: Option<String>,
    pub target_branch: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub github_url: Option<Option<String>>,
    pub fork_config: Option<ForkConfig>,
    pub merge_queue_config: Option<MergeQueueConfig>,
    pub pr_shepherd_config: Option<PrShepherdConfig>,
}

/// Creates a project over an existing git repository.
#[utoipa::path(post, path = "/projects", tag = "projects", request_body = CreateProject,
    responses(
        (status = 201, body = Project, description = "Created",
            headers(("ETag" = String, description = "The project's version, quoted"), ("Location" = String))),
        (status = 409, body = Problem, description = "A project with this slug exists"),
        (status = 422, body = Problem, description = "A field is invalid, e.g. `repo_path` is not a git repository")))]
#[tracing::instrument(skip_all, fields(slug = %body.slug), err)]
pub async fn create_project(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateProject>,
) -> ApiResult<impl IntoResponse> {
    if !is_valid_slug(&body.slug) {
        return Err(ApiError::validation("slug", "must match ^[a-z0-9][a-z0-9-]{0,62}$"));
    }
    let fields = validate(ProjectFields {
        name: body.name,
        repo_path: body.repo_path,
        target_branch: body.target_branch.unwrap_or_else(|| "main".to_owned()),
        github_url: body.github_url,
        fork_config: body.fork_config.unwrap_or_default(),
        merge_queue_config: body.merge_queue_config.unwrap_or_default(),
        pr_shepherd_config: body.pr_shepherd_config.unwrap_or_default(),
    })?;
    check_git_repository(&fields.repo_path).await?;
    let mut tx = state.db.begin().await?;
    let project = projects::create(&mut tx, &body.slug, &fields)
        .await
        .map_err(ApiError::unique_as("projects_slug_key", format!("a project with slug `{}` exists", body.slug)))?;
    state.feed.commit(tx).await?;
    let location = [(header::LOCATION, format!("/api/v1/projects/{}", project.slug))];
    Ok((StatusCode::CREATED, etag(project.version), location, Json(project)))
}

/// Lists projects, oldest first, a page at a time.
#[utoipa::path(get, path = "/projects", tag = "projects", params(PageQuery),
    responses((status = 200, body = Page<Project>, description = "One page of projects"), (status = 422, body = Problem, description = "Bad cursor or limit")))]
#[tracing::instrument(skip_all, err)]
pub async fn list_projects(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<Project>>> {
    let (limit, after) = query.parse()?;
    let mut conn = state.db.acquire().await?;
    let rows = projects::list(&mut conn, after.map(|p| (p.created_at, p.id)), limit).await?;
    Ok(Json(page(rows, limit, |p| Position { created_at: p.created_at, id: p.id })))
}

/// One project, with its version as the `ETag`.
#[utoipa::path(get, path = "/projects/{slug}", tag = "projects", params(("slug" = String, Path)),
    responses((status = 200, body = Project, description = "The project", headers(("ETag" = String))), (status = 404, body = Problem, description = "Not found")))]
#[tracing::instrument(skip_all, fields(slug = %slug), err)]
pub async fn get_project(
    State(state): State<AppState>,
    ApiPath(slug): ApiPath<String>,
) -> ApiResult<impl IntoResponse> {
    let mut conn = state.db.acquire().await?;
    let project = projects::find(&mut conn, &slug, false).await?.ok_or_else(|| no_project(&slug))?;
    Ok((etag(project.version), Json(project)))
}

/// Changes some of a project's fields. With `If-Match: "<version>"` it applies only if the
/// project is still at that version. A patch that changes nothing keeps the version.
#[utoipa::path(patch, path = "/projects/{slug}", tag = "projects", request_body = UpdateProject,
    params(("slug" = String, Path),
        ("If-Match" = Option<String>, Header, description = "The version the change is based on, e.g. `\"3\"`")),
    responses(
        (status = 200, body = Project, description = "The project", headers(("ETag" = String))),
        (status = 404, body = Problem, description = "Not found"),
        (status = 412, body = Problem, description = "The project changed since that version"),
        (status = 422, body = Problem, description = "A field is invalid or unknown (the slug cannot be changed)")))]
#[tracing::instrument(skip_all, fields(slug = %slug), err)]
pub async fn update_project(
    State(state): State<AppState>,
    ApiPath(slug): ApiPath<String>,
    if_match: IfMatch,
    ApiJson(patch): ApiJson<UpdateProject>,
) -> ApiResult<impl IntoResponse> {
    let mut tx = state.db.begin().await?;
    let current = projects::find(&mut tx, &slug, true).await?.ok_or_else(|| no_project(&slug))?;
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
        return Ok((etag(current.version), Json(current)));
    }
    // Only a new path is checked: a repository that went missing must not block a rename.
    if new.repo_path != old.repo_path {
        check_git_repository(&new.repo_path).await?;
    }
    let project = projects::update(&mut tx, &current, &new, &changed).await?;
    state.feed.commit(tx).await?;
    Ok((etag(project.version), Json(project)))
}

/// Deletes a project and its boards. Refused while tasks or wishes still belong to it.
#[utoipa::path(delete, path = "/projects/{slug}", tag = "projects", params(("slug" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = Problem, description = "Not found"),
        (status = 409, body = Problem, description = "The project still has tasks or wishes; the detail says how many")))]
#[tracing::instrument(skip_all, fields(slug = %slug), err)]
pub async fn delete_project(State(state): State<AppState>, ApiPath(slug): ApiPath<String>) -> ApiResult<StatusCode> {
    let mut tx = state.db.begin().await?;
    // The row lock makes a task or wish created meanwhile wait, then fail its foreign key.
    let project = projects::find(&mut tx, &slug, true).await?.ok_or_else(|| no_project(&slug))?;
    let dependents = projects::dependents(&mut tx, project.id).await?;
    if dependents.tasks > 0 || dependents.wishes > 0 || dependents.agents > 0 {
        return Err(ApiError::conflict(
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
    state.feed.commit(tx).await?;
    Ok(StatusCode::NO_CONTENT)
}

fn no_project(slug: &str) -> ApiError {
    ApiError::NotFound(format!("no project `{slug}`"))
}

fn plural(n: i64, noun: &str) -> String {
    match (n, noun) {
        (1, _) => format!("1 {noun}"),
        (_, "wish") => format!("{n} wishes"),
        _ => format!("{n} {noun}s"),
    }
}

/// Trims and checks the fields every create and update must satisfy.
fn validate(mut f: ProjectFields) -> ApiResult<ProjectFields> {
    f.name = f.name.trim().to_owned();
    if f.name.is_empty() || f.name.chars().count() > 200 {
        return Err(ApiError::validation("name", "must be 1 to 200 characters"));
    }
    f.target_branch = f.target_branch.trim().to_owned();
    let branch_ok = !f.target_branch.is_empty()
        && f.target_branch.len() <= 200
        && !f.target_branch.starts_with('-')
        && !f.target_branch.chars().any(|c| c.is_whitespace() || c.is_control());
    if !branch_ok {
        return Err(ApiError::validation("target_branch", "must be a branch name (no spaces, not starting with -)"));
    }
    f.github_url = f.github_url.map(|u| u.trim().to_owned()).filter(|u| !u.is_empty());
    if let Some(url) = &f.github_url {
        if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() > 500 {
            return Err(ApiError::validation("github_url", "must be an http(s) URL of at most 500 characters"));
        }
    }
    f.repo_path = f.repo_path.trim().to_owned();
    if !Path::new(&f.repo_path).is_absolute() {
        return Err(ApiError::validation("repo_path", "must be an absolute path"));
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

/// `repo_path` must be a git repository itself: `git rev-parse --git-dir` run in it, with the
/// parent as a ceiling so a folder inside some other repository does not pass for one.
async fn check_git_repository(path: &str) -> ApiResult<()> {
    let parent = Path::new(path).parent().unwrap_or(Path::new("/"));
    let run = tokio::process::Command::new("git")
        .arg("-C")
        .arg(path)
        .args(["rev-parse", "--git-dir"])
        .env("GIT_CEILING_DIRECTORIES", parent)
        // Set by git hooks, these would make git answer about another repository.
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(Duration::from_secs(10), run).await {
        Err(_) => return Err(ApiError::validation("repo_path", "git did not answer within 10 seconds")),
        Ok(Err(e)) => return Err(ApiError::Internal(anyhow::Error::new(e).context("running git"))),
        Ok(Ok(output)) => output,
    };
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    let why = stderr.lines().next().unwrap_or("").trim().trim_start_matches("fatal: ");
    Err(ApiError::validation("repo_path", format!("is not a git repository ({why})")))
}
