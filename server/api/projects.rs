//! `/api/v1/projects`: create, list, read, update (with `If-Match`) and delete projects
//! ([`crate::app::projects`]). A project's repository is `repo_path` (a git repository on the
//! server) or `repo_url` (a git remote each node mirrors); the slug never changes.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::idempotency::{self, IdempotentJson};
use crate::api::json::{nullable, ApiJson};
use crate::app::projects::{self as projects_app, no_project, CreatedProject, NewProject, ProjectPatch};
use crate::db::projects::{self, Project};
use crate::domain::project::{ConductorConfig, ForkConfig, MergeQueueConfig, PrShepherdConfig};
use crate::http::error::{ApiResult, Problem};
use crate::http::etag::{etag, IfMatch};
use crate::http::extract::ApiPath;
use crate::http::pagination::{page, Page, PageQuery, Position};
use crate::http::query::ApiQuery;
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
    #[schema(pattern = "^[a-z0-9][a-z0-9-]{0,62}$")]
    pub slug: String,
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub name: String,
    /// Absolute path of a git repository on the server (the repository itself, not a folder in it).
    /// Give this or `repo_url`.
    #[schema(max_length = 4096, pattern = "^/")]
    pub repo_path: Option<String>,
    /// The repository as a git remote: a `file://`, `git://`, `ssh://` or `https://` URL, without
    /// a password. Each node keeps its own mirror of it; branches move there by a push with a lease.
    #[schema(max_length = 2048)]
    pub repo_url: Option<String>,
    /// The credential for `repo_url` when the nodes' git configuration has none: `user:password`,
    /// or a token. Never shown, never given to agents.
    #[schema(value_type = Option<String>, max_length = 4096, write_only)]
    pub repo_secret: Option<secrecy::SecretString>,
    /// The remote of `repo_path` the merge queue pushes the merged target to, with a lease: unset
    /// means `origin` when the repository has one; empty means none.
    #[schema(max_length = 200)]
    pub push_remote: Option<String>,
    /// Defaults to `main`.
    pub target_branch: Option<String>,
    pub github_url: Option<String>,
    pub fork_config: Option<ForkConfig>,
    pub merge_queue_config: Option<MergeQueueConfig>,
    pub pr_shepherd_config: Option<PrShepherdConfig>,
    /// How the conductor runs the project's wishes; omitted fields take their defaults.
    pub conductor_config: Option<ConductorConfig>,
}

/// Only the fields sent change; `github_url: null` clears it. A config object replaces the
/// whole config. The slug cannot be changed.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Switchyard (main)", "pr_shepherd_config": {"enabled": true, "track_mode": "author"}}))]
pub struct UpdateProject {
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub name: Option<String>,
    #[schema(max_length = 4096, pattern = "^/")]
    pub repo_path: Option<String>,
    /// Moves the project to a git remote (its `repo_path` goes); `null` moves it back (give
    /// `repo_path` then).
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, max_length = 2048)]
    pub repo_url: Option<Option<String>>,
    /// Replaces the remote's credential; `null` forgets it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, max_length = 4096, write_only)]
    pub repo_secret: Option<Option<secrecy::SecretString>>,
    /// `null`: `origin` when the repository has one; empty: none.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, max_length = 200)]
    pub push_remote: Option<Option<String>>,
    pub target_branch: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub github_url: Option<Option<String>>,
    pub fork_config: Option<ForkConfig>,
    pub merge_queue_config: Option<MergeQueueConfig>,
    pub pr_shepherd_config: Option<PrShepherdConfig>,
    /// How the conductor runs the project's wishes; omitted fields take their defaults.
    pub conductor_config: Option<ConductorConfig>,
}

/// Creates a project over an existing git repository.
#[utoipa::path(post, path = "/projects", tag = "projects", request_body = CreateProject,
    params(("Idempotency-Key" = Option<String>, Header, description = "Makes the request safe to retry: the same key with the same body within 24 hours answers the first response again (nothing is created); with another body, 422.")),
    responses(
        (status = 201, body = CreatedProject, description = "Created",
            headers(("ETag" = String, description = "The project's version, quoted"), ("Location" = String))),
        (status = 409, body = Problem, description = "A project with this slug exists"),
        (status = 422, body = Problem, description = "A field is invalid, e.g. `repo_path` is not a git repository, `repo_url` cannot be read, or both or neither are given")))]
#[tracing::instrument(skip_all, fields(slug = ?body.slug), err(level = "debug"))]
pub async fn create_project(
    State(state): State<AppState>,
    IdempotentJson(body, idem): IdempotentJson<CreateProject>,
) -> ApiResult<Response> {
    if let Some(first) = idempotency::replay(&state, idem.as_ref()).await? {
        return Ok(first);
    }
    let created = projects_app::create(&state, body.into(), idem.as_ref()).await?;
    let location = [(header::LOCATION, format!("/api/v1/projects/{}", created.project.slug))];
    Ok((StatusCode::CREATED, etag(created.project.version), location, Json(created)).into_response())
}

impl From<CreateProject> for NewProject {
    fn from(body: CreateProject) -> NewProject {
        NewProject {
            slug: body.slug,
            name: body.name,
            repo_path: body.repo_path.unwrap_or_default(),
            repo_url: body.repo_url,
            repo_secret: body.repo_secret,
            push_remote: body.push_remote,
            target_branch: body.target_branch,
            github_url: body.github_url,
            fork_config: body.fork_config,
            merge_queue_config: body.merge_queue_config,
            pr_shepherd_config: body.pr_shepherd_config,
            conductor_config: body.conductor_config,
        }
    }
}

/// Lists projects, oldest first, a page at a time.
#[utoipa::path(get, path = "/projects", tag = "projects", params(PageQuery),
    responses((status = 200, body = Page<Project>, description = "One page of projects"), (status = 422, body = Problem, description = "Bad cursor or limit")))]
#[tracing::instrument(skip_all, err(level = "debug"))]
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
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
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
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn update_project(
    State(state): State<AppState>,
    ApiPath(slug): ApiPath<String>,
    if_match: IfMatch,
    ApiJson(patch): ApiJson<UpdateProject>,
) -> ApiResult<impl IntoResponse> {
    let patch = ProjectPatch {
        name: patch.name,
        repo_path: patch.repo_path,
        repo_url: patch.repo_url,
        repo_secret: patch.repo_secret,
        push_remote: patch.push_remote,
        target_branch: patch.target_branch,
        github_url: patch.github_url,
        fork_config: patch.fork_config,
        merge_queue_config: patch.merge_queue_config,
        pr_shepherd_config: patch.pr_shepherd_config,
        conductor_config: patch.conductor_config,
    };
    let project = projects_app::update(&state, &slug, &if_match, patch).await?;
    Ok((etag(project.version), Json(project)))
}

/// Deletes a project and its boards. Refused while tasks or wishes still belong to it.
#[utoipa::path(delete, path = "/projects/{slug}", tag = "projects", params(("slug" = String, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = Problem, description = "Not found"),
        (status = 409, body = Problem, description = "The project still has tasks or wishes; the detail says how many")))]
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn delete_project(State(state): State<AppState>, ApiPath(slug): ApiPath<String>) -> ApiResult<StatusCode> {
    projects_app::delete(&state, &slug).await?;
    Ok(StatusCode::NO_CONTENT)
}
