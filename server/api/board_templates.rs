//! `/api/v1/board-templates`: reusable column lists that new boards copy (`template` on board
//! creation).

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::json::ApiJson;
use crate::app::boards;
use crate::db::board_templates::{self, BoardTemplate};
use crate::domain::board::ColumnSpec;
use crate::http::error::{ApiResult, Problem};
use crate::http::pagination::{page, Page, PageQuery, Position};
use crate::http::query::ApiQuery;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_template, list_templates))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "review-heavy", "description": "Two review stages before done",
    "columns": [{"name": "Todo"}, {"name": "Code review", "gate": "agent", "action_skill": "review-pr", "wip_limit": 3},
                {"name": "Sign-off", "gate": "human"}, {"name": "Done"}]}))]
pub struct CreateTemplate {
    /// Unique; boards name it in `template`.
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: String,
    #[schema(max_length = 2000)]
    pub description: Option<String>,
    /// 1 to 30 columns with distinct names.
    #[schema(min_items = 1, max_items = 30)]
    pub columns: Vec<ColumnSpec>,
}

/// Creates a board template.
#[utoipa::path(post, path = "/board-templates", tag = "boards", request_body = CreateTemplate,
    responses((status = 201, body = BoardTemplate, description = "The template"),
        (status = 409, body = Problem, description = "A template has this name"),
        (status = 422, body = Problem, description = "A bad field, named by its path, e.g. `columns[2].gate`")))]
#[tracing::instrument(skip_all, fields(name = ?body.name), err(level = "debug"))]
pub async fn create_template(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<CreateTemplate>,
) -> ApiResult<(StatusCode, Json<BoardTemplate>)> {
    let template = boards::create_template(&state, &body.name, body.description.as_deref(), &body.columns).await?;
    Ok((StatusCode::CREATED, Json(template)))
}

/// Lists board templates, oldest first, a page at a time.
#[utoipa::path(get, path = "/board-templates", tag = "boards", params(PageQuery),
    responses((status = 200, body = Page<BoardTemplate>, description = "One page of templates"), (status = 422, body = Problem, description = "Invalid request")))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list_templates(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<BoardTemplate>>> {
    let (limit, after) = query.parse()?;
    let mut conn = state.db.acquire().await?;
    let rows = board_templates::list(&mut conn, after.map(|p| (p.created_at, p.id)), limit).await?;
    Ok(Json(page(rows, limit, |t| Position { created_at: t.created_at, id: t.id })))
}
