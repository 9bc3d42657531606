//! Creating and deleting projects from the dashboard (the boards page lists them with their
//! boards): the use cases of [`crate::app::projects`], as the API's.

use axum::extract::State;
use axum::routing::post;
use axum::Router;
use serde::Deserialize;

use crate::app::projects::{self as projects_app, NewProject};
use crate::http::AppState;
use crate::pages::view::{filled, see_other, PageForm, PagePath, PageResult};

pub fn router() -> Router<AppState> {
    Router::new().route("/projects", post(create)).route("/projects/{slug}/delete", post(delete))
}

#[derive(Debug, Deserialize)]
struct ProjectForm {
    slug: String,
    name: String,
    /// A path on this server, or a git remote's URL.
    repo_path: String,
    /// Empty: `main`.
    target_branch: String,
    /// The page the form was on (`overview`: the overview's first steps); else Boards.
    #[serde(default)]
    back: String,
}

#[tracing::instrument(skip_all, fields(slug = ?form.slug), err(Debug, level = "debug"))]
async fn create(State(state): State<AppState>, PageForm(form): PageForm<ProjectForm>) -> PageResult {
    // One field for both: a URL is a remote, anything else a path.
    let repo = form.repo_path.trim().to_owned();
    let (repo_path, repo_url) = match repo.contains("://") {
        true => (String::new(), Some(repo)),
        false => (repo, None),
    };
    let new = NewProject {
        slug: form.slug.trim().to_owned(),
        name: form.name,
        repo_path,
        repo_url,
        target_branch: filled(&form.target_branch),
        ..NewProject::default()
    };
    projects_app::create(&state, new, None).await?;
    Ok(see_other(if form.back == "overview" { "/" } else { "/boards" }))
}

#[tracing::instrument(skip_all, fields(slug = ?slug), err(Debug, level = "debug"))]
async fn delete(State(state): State<AppState>, PagePath(slug): PagePath<String>) -> PageResult {
    projects_app::delete(&state, &slug).await?;
    Ok(see_other("/boards"))
}
