//! `/api/v1/projects/{slug}/boards` and `/api/v1/boards/{id}`: a project's boards — created
//! from explicit columns, a template, or the default set — read with their columns and card
//! counts, renamed, deleted, and reconciled (cards that lost their column put back on it).

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::api::json::ApiJson;
use crate::api::{board_columns, board_templates};
pub use crate::app::boards::Reconciled;
use crate::app::boards::{self as boards_app, no_board, NewBoard};
use crate::db::boards::{self, Board};
use crate::db::projects;
use crate::domain::board::ColumnSpec;
use crate::http::error::{ApiError, ApiResult, Problem};
use crate::http::etag::{etag, IfMatch};
use crate::http::extract::ApiPath;
use crate::http::pagination::{page, Page, PageQuery, Position};
use crate::http::query::ApiQuery;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_board, list_boards))
        .routes(routes!(get_board, rename_board, delete_board))
        .routes(routes!(reconcile_board))
        .merge(board_columns::router())
        .merge(board_templates::router())
}

/// Give `columns` or `template`, not both; with neither the board gets Backlog, In progress,
/// Review (gate `human`) and Done.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Delivery", "columns": [{"name": "Todo"}, {"name": "Review", "gate": "human", "wip_limit": 3}, {"name": "Done"}]}))]
pub struct CreateBoard {
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub name: String,
    pub columns: Option<Vec<ColumnSpec>>,
    /// The name of a board template to copy the columns from.
    pub template: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Delivery (Q3)"}))]
pub struct RenameBoard {
    #[schema(min_length = 1, max_length = 200, pattern = r"\S")]
    pub name: String,
}

/// Creates a board in a project.
#[utoipa::path(post, path = "/projects/{slug}/boards", tag = "boards", request_body = CreateBoard,
    params(("slug" = String, Path, description = "The project's slug")),
    responses(
        (status = 201, body = Board, description = "The board, with its columns in order", headers(("ETag" = String), ("Location" = String))),
        (status = 404, body = Problem, description = "No such project"),
        (status = 409, body = Problem, description = "The project has a board with this name"),
        (status = 422, body = Problem, description = "A bad field, e.g. `columns[2].gate`, or an unknown `template`")))]
#[tracing::instrument(skip_all, fields(project = ?slug), err(level = "debug"))]
pub async fn create_board(
    State(state): State<AppState>,
    ApiPath(slug): ApiPath<String>,
    ApiJson(body): ApiJson<CreateBoard>,
) -> ApiResult<impl IntoResponse> {
    let board = boards_app::create_now(&state, &slug, body.into()).await?;
    let location = [(header::LOCATION, format!("/api/v1/boards/{}", board.id))];
    Ok((StatusCode::CREATED, etag(board.version), location, Json(board)))
}

impl From<CreateBoard> for NewBoard {
    fn from(body: CreateBoard) -> NewBoard {
        NewBoard { name: body.name, columns: body.columns, template: body.template }
    }
}

/// Lists a project's boards with their columns, oldest first, a page at a time.
#[utoipa::path(get, path = "/projects/{slug}/boards", tag = "boards",
    params(("slug" = String, Path, description = "The project's slug"), PageQuery),
    responses((status = 200, body = Page<Board>, description = "One page of the project's boards"), (status = 404, body = Problem, description = "Not found"), (status = 422, body = Problem, description = "Invalid request")))]
#[tracing::instrument(skip_all, fields(project = ?slug), err(level = "debug"))]
pub async fn list_boards(
    State(state): State<AppState>,
    ApiPath(slug): ApiPath<String>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<Board>>> {
    let (limit, after) = query.parse()?;
    let mut conn = state.db.acquire().await?;
    let project = projects::find(&mut conn, &slug, false)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no project `{slug}`")))?;
    let rows = boards::list(&mut conn, project.id, after.map(|p| (p.created_at, p.id)), limit).await?;
    Ok(Json(page(rows, limit, |b| Position { created_at: b.created_at, id: b.id })))
}

/// One board: its columns in order, each with how many tasks and wishes it holds.
#[utoipa::path(get, path = "/boards/{id}", tag = "boards", params(("id" = Uuid, Path)),
    responses((status = 200, body = Board, description = "The board, with its columns in order", headers(("ETag" = String))), (status = 404, body = Problem, description = "Not found")))]
#[tracing::instrument(skip_all, fields(board = ?id), err(level = "debug"))]
pub async fn get_board(State(state): State<AppState>, ApiPath(id): ApiPath<Uuid>) -> ApiResult<impl IntoResponse> {
    let mut conn = state.db.acquire().await?;
    let board = boards::get(&mut conn, id).await?.ok_or_else(|| no_board(id))?;
    Ok((etag(board.version), Json(board)))
}

/// Renames a board; honours `If-Match`.
#[utoipa::path(patch, path = "/boards/{id}", tag = "boards", request_body = RenameBoard,
    params(("id" = Uuid, Path), ("If-Match" = Option<String>, Header, description = "The board version the change is based on")),
    responses((status = 200, body = Board, description = "The board, with its columns in order", headers(("ETag" = String))), (status = 404, body = Problem, description = "Not found"),
        (status = 409, body = Problem, description = "Another board of the project has this name"),
        (status = 412, body = Problem, description = "If-Match names another version"), (status = 422, body = Problem, description = "Invalid request")))]
#[tracing::instrument(skip_all, fields(board = ?id), err(level = "debug"))]
pub async fn rename_board(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    if_match: IfMatch,
    ApiJson(body): ApiJson<RenameBoard>,
) -> ApiResult<impl IntoResponse> {
    let board = boards_app::rename(&state, id, &if_match, &body.name).await?;
    Ok((etag(board.version), Json(board)))
}

/// Deletes a board and its columns. Its tasks and wishes stay, on no board.
#[utoipa::path(delete, path = "/boards/{id}", tag = "boards", params(("id" = Uuid, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = Problem, description = "Not found")))]
#[tracing::instrument(skip_all, fields(board = ?id), err(level = "debug"))]
pub async fn delete_board(State(state): State<AppState>, ApiPath(id): ApiPath<Uuid>) -> ApiResult<StatusCode> {
    boards_app::delete(&state, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Puts every task and wish of this board that sits in no column of it (none, or another
/// board's) into the board's first column, and says how many moved.
#[utoipa::path(post, path = "/boards/{id}/reconcile", tag = "boards", params(("id" = Uuid, Path)),
    responses((status = 200, body = Reconciled, description = "How many cards were put back"), (status = 404, body = Problem, description = "Not found"),
        (status = 409, body = Problem, description = "Cards need a column but the board has none")))]
#[tracing::instrument(skip_all, fields(board = ?id), err(level = "debug"))]
pub async fn reconcile_board(State(state): State<AppState>, ApiPath(id): ApiPath<Uuid>) -> ApiResult<Json<Reconciled>> {
    Ok(Json(boards_app::reconcile_now(&state, id).await?))
}
