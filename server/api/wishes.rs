//! `/api/v1/wishes`: create a wish with its plan (a DAG of execution groups), list and show
//! wishes. Lifecycle actions live in `wish_actions.rs`, group actions in `wish_groups.rs`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::idempotency::{self, IdempotentJson};
use crate::app::projects::id as project_id;
use crate::app::wish_lifecycle;
pub use crate::app::wish_lifecycle::WishDetail;
use crate::app::wishes::{self as wishes_app, NewWish};
use crate::db::wishes::{self, NewGroup, Wish};
use crate::domain::wish::WishStatus;
use crate::http::error::{ApiError, ApiResult, Problem};
use crate::http::pagination::{page, Page, PageQuery, Position};
use crate::http::query::ApiQuery;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_wish, list_wishes))
        .routes(routes!(get_wish))
        .merge(super::wish_actions::router())
        .merge(super::wish_groups::router())
}

/// One execution group of the plan.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupInput {
    /// Unique within the wish: lowercase letters, digits, `-`, `_`.
    #[schema(example = "backend", pattern = "^[a-z0-9][a-z0-9_-]{0,62}$")]
    pub key: String,
    #[schema(example = "API for the login form")]
    pub title: String,
    #[serde(default)]
    pub goal: String,
    /// Keys of the groups that must be done first.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Attempts before a failure fails the wish (default 10).
    #[schema(minimum = 1)]
    pub max_iterations: Option<i32>,
    /// The provider of the group's agent; `any`: the project's, or the first of its fallback
    /// providers not at a usage limit. Default: the wish's, else the project's. It must be at
    /// least as confined as that default (the planner's): a sandboxed wish's groups run
    /// sandboxed, with no more network (422 naming the group otherwise).
    #[schema(example = "claude")]
    pub provider: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWish {
    #[schema(example = "login-page")]
    pub slug: String,
    /// The project's slug.
    pub project: String,
    #[schema(example = "Add a login page")]
    pub title: String,
    #[serde(default)]
    pub description: String,
    pub branch: Option<String>,
    /// Failed reviews allowed before the wish fails (default 3).
    #[schema(minimum = 1)]
    pub review_cap: Option<i32>,
    /// Slugs of wishes that must merge before this one may start executing.
    #[serde(default)]
    pub blocked_by: Vec<String>,
    /// The plan; may also be given later with `plan`.
    #[serde(default)]
    pub groups: Vec<GroupInput>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct WishFilter {
    /// Only this project's wishes (slug).
    pub project: Option<String>,
    /// Only wishes in this state.
    pub status: Option<String>,
    /// `next_cursor` from the previous page; omit for the first page.
    pub cursor: Option<String>,
    /// Items per page, 1 to 200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
}

/// Creates a wish in `draft`, with its plan when `groups` are given. The plan is checked: unknown
/// group keys and cycles are refused (422) naming the keys.
#[utoipa::path(post, path = "/wishes", tag = "wishes", request_body = CreateWish,
    params(("Idempotency-Key" = Option<String>, Header, description = "Makes the request safe to retry: the same key with the same body within 24 hours answers the first response again (nothing is created); with another body, 422.")),
    responses(
    (status = 201, body = WishDetail), (status = 409, body = Problem), (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, fields(slug = ?body.slug), err(level = "debug"))]
pub async fn create_wish(
    State(state): State<AppState>,
    IdempotentJson(body, idem): IdempotentJson<CreateWish>,
) -> ApiResult<Response> {
    if let Some(first) = idempotency::replay(&state, idem.as_ref()).await? {
        return Ok(first);
    }
    let detail = wishes_app::create_now(&state, body.into(), idem.as_ref()).await?;
    Ok((StatusCode::CREATED, Json(detail)).into_response())
}

impl From<CreateWish> for NewWish {
    fn from(body: CreateWish) -> NewWish {
        NewWish {
            slug: body.slug,
            project: body.project,
            title: body.title,
            description: body.description,
            branch: body.branch,
            review_cap: body.review_cap,
            blocked_by: body.blocked_by,
            groups: to_groups(body.groups),
        }
    }
}

/// Wishes in creation order, optionally of one project and state.
#[utoipa::path(get, path = "/wishes", tag = "wishes", params(WishFilter),
    responses((status = 200, body = Page<Wish>), (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list_wishes(
    State(state): State<AppState>,
    ApiQuery(filter): ApiQuery<WishFilter>,
) -> ApiResult<Json<Page<Wish>>> {
    let (limit, after) = PageQuery { cursor: filter.cursor, limit: filter.limit }.parse()?;
    let status = filter
        .status
        .as_deref()
        .map(|s| s.parse::<WishStatus>().map_err(|e| ApiError::validation("status", e.to_string())))
        .transpose()?;
    let mut conn = state.db.acquire().await?;
    let project_id = match &filter.project {
        Some(slug) => Some(project_id(&mut conn, slug, "project").await?),
        None => None,
    };
    let rows = wishes::list(&mut conn, project_id, status, after.map(|p| (p.created_at, p.id)), limit + 1).await?;
    Ok(Json(page(rows, limit, |w| Position { created_at: w.created_at, id: w.id })))
}

/// A wish with its groups, their states and dependencies, and its blockers.
#[utoipa::path(get, path = "/wishes/{slug}", tag = "wishes", params(("slug" = String, Path)),
    responses((status = 200, body = WishDetail), (status = 404, body = Problem)))]
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn get_wish(State(state): State<AppState>, Path(slug): Path<String>) -> ApiResult<Json<WishDetail>> {
    let mut conn = state.db.acquire().await?;
    let wish = wish_lifecycle::find(&mut conn, &slug).await?;
    Ok(Json(wish_lifecycle::detail(&mut conn, wish).await?))
}

/// The plan as the application layer takes it (it checks titles and iterations).
pub fn to_groups(input: Vec<GroupInput>) -> Vec<NewGroup> {
    input
        .into_iter()
        .map(|g| NewGroup {
            key: g.key,
            title: g.title,
            goal: g.goal,
            depends_on: g.depends_on,
            max_iterations: g.max_iterations,
            provider: g.provider,
        })
        .collect()
}
