//! `/api/v1/wishes`: create a wish with its plan (a DAG of execution groups), list and show
//! wishes. Lifecycle actions live in `wish_actions.rs`, group actions in `wish_groups.rs`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::error::{ApiError, ApiResult, FieldError, Problem};
use crate::api::json::ApiJson;
use crate::api::pagination::{page, Page, PageQuery, Position};
use crate::api::projects::project_id;
use crate::api::query::ApiQuery;
use crate::db::wishes::{self, Blocker, Group, NewGroup, NewWish, Wish};
use crate::domain::plan::{self, PlanError};
use crate::domain::wish::WishStatus;
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
    #[schema(example = "backend")]
    pub key: String,
    #[schema(example = "API for the login form")]
    pub title: String,
    #[serde(default)]
    pub goal: String,
    /// Keys of the groups that must be done first.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Attempts before a failure fails the wish (default 10).
    pub max_iterations: Option<i32>,
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
    pub review_cap: Option<i32>,
    /// Slugs of wishes that must merge before this one may start executing.
    #[serde(default)]
    pub blocked_by: Vec<String>,
    /// The plan; may also be given later with `plan`.
    #[serde(default)]
    pub groups: Vec<GroupInput>,
}

/// A wish with its groups (states and dependencies) and what it waits for.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WishDetail {
    #[serde(flatten)]
    pub wish: Wish,
    pub groups: Vec<Group>,
    pub blocked_by: Vec<Blocker>,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct WishFilter {
    /// Only this project's wishes (slug).
    pub project: Option<String>,
    /// Only wishes in this state.
    pub status: Option<String>,
    pub cursor: Option<String>,
    pub limit: Option<i64>,
}

/// Creates a wish in `draft`, with its plan when `groups` are given. The plan is checked: unknown
/// group keys and cycles are refused (422) naming the keys.
#[utoipa::path(post, path = "/wishes", tag = "wishes", request_body = CreateWish, responses(
    (status = 201, body = WishDetail), (status = 409, body = Problem), (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, fields(slug = %body.slug), err)]
pub async fn create_wish(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateWish>,
) -> ApiResult<(StatusCode, Json<WishDetail>)> {
    let mut tx = state.db.begin().await?;
    let detail = insert_wish(&mut tx, body).await?;
    state.feed.commit(tx).await?;
    Ok((StatusCode::CREATED, Json(detail)))
}

/// Validates and inserts a wish with its plan in the caller's transaction (the API and inbound
/// hooks).
pub(crate) async fn insert_wish(tx: &mut sqlx::PgConnection, body: CreateWish) -> ApiResult<WishDetail> {
    if !plan::is_valid_key(&body.slug) {
        return Err(ApiError::validation("slug", "use lowercase letters, digits and '-' (at most 63)"));
    }
    if body.title.trim().is_empty() || body.title.len() > 300 {
        return Err(ApiError::validation("title", "must be 1 to 300 characters"));
    }
    if body.review_cap.is_some_and(|c| c < 1) {
        return Err(ApiError::validation("review_cap", "must be at least 1"));
    }
    let groups = to_groups(body.groups)?;
    let order = if groups.is_empty() { Vec::new() } else { validate_plan(&groups)? };
    let project_id = project_id(tx, &body.project, "project").await?;
    let blocked_by = blocker_ids(tx, &body.blocked_by).await?;
    let new = NewWish {
        slug: body.slug,
        project_id,
        title: body.title.trim().to_owned(),
        description: body.description,
        branch: body.branch,
        review_cap: body.review_cap,
        blocked_by,
    };
    let wish = wishes::insert(tx, &new).await.map_err(|e| match e {
        sqlx::Error::Database(d) if d.is_unique_violation() => {
            ApiError::conflict(format!("a wish `{}` exists already", new.slug), None)
        }
        other => other.into(),
    })?;
    let wish = wishes::insert_groups(tx, &wish, &groups, &order).await?;
    detail(tx, wish).await
}

/// Wishes in creation order, optionally of one project and state.
#[utoipa::path(get, path = "/wishes", tag = "wishes", params(WishFilter),
    responses((status = 200, body = Page<Wish>), (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, err)]
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
#[tracing::instrument(skip_all, fields(slug = %slug), err)]
pub async fn get_wish(State(state): State<AppState>, Path(slug): Path<String>) -> ApiResult<Json<WishDetail>> {
    let mut conn = state.db.acquire().await?;
    let wish = find(&mut conn, &slug).await?;
    Ok(Json(detail(&mut conn, wish).await?))
}

pub async fn find(conn: &mut sqlx::PgConnection, slug: &str) -> ApiResult<Wish> {
    wishes::get(conn, slug).await?.ok_or_else(|| ApiError::NotFound(format!("no wish `{slug}`")))
}

pub async fn detail(conn: &mut sqlx::PgConnection, wish: Wish) -> ApiResult<WishDetail> {
    let groups = wishes::groups(conn, wish.id).await?;
    let blocked_by = wishes::blockers(conn, wish.id).await?;
    Ok(WishDetail { wish, groups, blocked_by })
}

pub fn to_groups(input: Vec<GroupInput>) -> ApiResult<Vec<NewGroup>> {
    input
        .into_iter()
        .enumerate()
        .map(|(i, g)| {
            if g.title.trim().is_empty() || g.title.len() > 300 {
                return Err(ApiError::validation(format!("groups[{i}].title"), "must be 1 to 300 characters"));
            }
            if g.max_iterations.is_some_and(|m| m < 1) {
                return Err(ApiError::validation(format!("groups[{i}].max_iterations"), "must be at least 1"));
            }
            Ok(NewGroup {
                key: g.key,
                title: g.title.trim().to_owned(),
                goal: g.goal,
                depends_on: g.depends_on,
                max_iterations: g.max_iterations,
            })
        })
        .collect()
}

/// Checks the plan and returns its topological order; errors name the offending keys.
pub fn validate_plan(groups: &[NewGroup]) -> ApiResult<Vec<usize>> {
    let specs: Vec<_> = groups.iter().map(NewGroup::spec).collect();
    let index_of = |key: &str| groups.iter().position(|g| g.key == key).unwrap_or(0);
    plan::validate(&specs).map_err(|error| {
        let field = match &error {
            PlanError::Empty => "groups".to_owned(),
            PlanError::InvalidKey { key } | PlanError::DuplicateKey { key } => {
                format!("groups[{}].key", index_of(key))
            }
            PlanError::SelfDependency { key } => format!("groups[{}].depends_on", index_of(key)),
            PlanError::UnknownDependency { group, .. } => format!("groups[{}].depends_on", index_of(group)),
            PlanError::Cycle { .. } => "groups".to_owned(),
        };
        let message = error.to_string();
        ApiError::Validation { detail: format!("{field}: {message}"), errors: vec![FieldError::new(field, message)] }
    })
}

async fn blocker_ids(conn: &mut sqlx::PgConnection, slugs: &[String]) -> ApiResult<Vec<uuid::Uuid>> {
    let found = wishes::ids_by_slug(conn, slugs).await?;
    let missing: Vec<&str> = slugs.iter().filter(|s| !found.iter().any(|(f, _)| f == *s)).map(String::as_str).collect();
    if !missing.is_empty() {
        return Err(ApiError::validation("blocked_by", format!("no such wish: {}", missing.join(", "))));
    }
    Ok(found.into_iter().map(|(_, id)| id).collect())
}
