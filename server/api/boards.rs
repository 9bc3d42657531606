//! `/api/v1/projects/{slug}/boards` and `/api/v1/boards/{id}`: a project's boards — created
//! from explicit columns, a template, or the default set — read with their columns and card
//! counts, renamed, deleted, and reconciled (cards that lost their column put back on it).

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::api::error::{ApiError, ApiResult, Problem};
use crate::api::etag::{etag, IfMatch};
use crate::api::extract::ApiPath;
use crate::api::json::ApiJson;
use crate::api::pagination::{page, Page, PageQuery, Position};
use crate::api::query::ApiQuery;
use crate::api::{board_columns, board_templates};
use crate::db::board_columns::{self as columns_db, Moved};
use crate::db::boards::{self, Board, BoardHead};
use crate::db::{board_templates as templates_db, projects};
use crate::domain::board::{default_columns, validate_column_name, validate_columns, ColumnSpec, InvalidColumn};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_board, list_boards))
        .routes(routes!(get_board, rename_board, delete_board))
        .routes(routes!(reconcile_board))
        .merge(board_columns::router())
        .merge(board_templates::router())
}

impl From<InvalidColumn> for ApiError {
    fn from(invalid: InvalidColumn) -> ApiError {
        ApiError::validation(invalid.field, invalid.message)
    }
}

/// Give `columns` or `template`, not both; with neither the board gets Backlog, In progress,
/// Review (gate `human`) and Done.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Delivery", "columns": [{"name": "Todo"}, {"name": "Review", "gate": "human", "wip_limit": 3}, {"name": "Done"}]}))]
pub struct CreateBoard {
    pub name: String,
    pub columns: Option<Vec<ColumnSpec>>,
    /// The name of a board template to copy the columns from.
    pub template: Option<String>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "Delivery (Q3)"}))]
pub struct RenameBoard {
    pub name: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"moved": 3, "tasks": 2, "wishes": 1, "column_id": "9a0e6c1e-3f7d-4b5a-8d0e-2b7c4e9f1a11"}))]
pub struct Reconciled {
    /// Tasks plus wishes put back on the board.
    pub moved: i64,
    pub tasks: i64,
    pub wishes: i64,
    /// The column they were put in: the board's first.
    pub column_id: Option<Uuid>,
}

/// Creates a board in a project.
#[utoipa::path(post, path = "/projects/{slug}/boards", tag = "boards", request_body = CreateBoard,
    params(("slug" = String, Path, description = "The project's slug")),
    responses(
        (status = 201, body = Board, description = "The board, with its columns in order", headers(("ETag" = String), ("Location" = String))),
        (status = 404, body = Problem, description = "No such project"),
        (status = 409, body = Problem, description = "The project has a board with this name"),
        (status = 422, body = Problem, description = "A bad field, e.g. `columns[2].gate`, or an unknown `template`")))]
#[tracing::instrument(skip_all, fields(project = %slug), err)]
pub async fn create_board(
    State(state): State<AppState>,
    ApiPath(slug): ApiPath<String>,
    ApiJson(body): ApiJson<CreateBoard>,
) -> ApiResult<impl IntoResponse> {
    let mut tx = state.db.begin().await?;
    let board = create(&mut tx, &slug, body).await?;
    state.feed.commit(tx).await?;
    let location = [(header::LOCATION, format!("/api/v1/boards/{}", board.id))];
    Ok((StatusCode::CREATED, etag(board.version), location, Json(board)))
}

/// Validates and creates a board in project `slug`, in the caller's transaction (the API and the
/// dashboard).
pub(crate) async fn create(tx: &mut sqlx::PgConnection, slug: &str, body: CreateBoard) -> ApiResult<Board> {
    let name = board_name(&body.name)?;
    let project = projects::find(&mut *tx, slug, false)
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no project `{slug}`")))?;
    let columns = match (body.columns, &body.template) {
        (Some(_), Some(_)) => {
            return Err(ApiError::validation("template", "give either columns or a template, not both"))
        }
        (Some(columns), None) => validate_columns("columns", &columns)?,
        (None, Some(template)) => {
            templates_db::find_by_name(&mut *tx, template)
                .await?
                .ok_or_else(|| ApiError::validation("template", format!("no board template named `{template}`")))?
                .columns
        }
        (None, None) => default_columns(),
    };
    boards::create(tx, project.id, &project.slug, &name, &columns, body.template.as_deref()).await.map_err(
        ApiError::unique_as("boards_project_id_name_key", format!("project `{slug}` has a board named `{name}`")),
    )
}

/// Lists a project's boards with their columns, oldest first, a page at a time.
#[utoipa::path(get, path = "/projects/{slug}/boards", tag = "boards",
    params(("slug" = String, Path, description = "The project's slug"), PageQuery),
    responses((status = 200, body = Page<Board>, description = "One page of the project's boards"), (status = 404, body = Problem, description = "Not found"), (status = 422, body = Problem, description = "Invalid request")))]
#[tracing::instrument(skip_all, fields(project = %slug), err)]
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
#[tracing::instrument(skip_all, fields(board = %id), err)]
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
#[tracing::instrument(skip_all, fields(board = %id), err)]
pub async fn rename_board(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    if_match: IfMatch,
    ApiJson(body): ApiJson<RenameBoard>,
) -> ApiResult<impl IntoResponse> {
    let name = board_name(&body.name)?;
    let mut tx = state.db.begin().await?;
    let head = locked_board(&mut tx, id, &if_match).await?;
    if head.name != name {
        boards::rename(&mut tx, &head, &name).await.map_err(ApiError::unique_as(
            "boards_project_id_name_key",
            format!("the project has a board named `{name}`"),
        ))?;
    }
    let board = boards::get(&mut tx, id).await?.ok_or_else(|| no_board(id))?;
    state.feed.commit(tx).await?;
    Ok((etag(board.version), Json(board)))
}

/// Deletes a board and its columns. Its tasks and wishes stay, on no board.
#[utoipa::path(delete, path = "/boards/{id}", tag = "boards", params(("id" = Uuid, Path)),
    responses((status = 204, description = "Deleted"), (status = 404, body = Problem, description = "Not found")))]
#[tracing::instrument(skip_all, fields(board = %id), err)]
pub async fn delete_board(State(state): State<AppState>, ApiPath(id): ApiPath<Uuid>) -> ApiResult<StatusCode> {
    let mut tx = state.db.begin().await?;
    let head = boards::find(&mut tx, id, true).await?.ok_or_else(|| no_board(id))?;
    boards::delete(&mut tx, &head).await?;
    state.feed.commit(tx).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Puts every task and wish of this board that sits in no column of it (none, or another
/// board's) into the board's first column, and says how many moved.
#[utoipa::path(post, path = "/boards/{id}/reconcile", tag = "boards", params(("id" = Uuid, Path)),
    responses((status = 200, body = Reconciled, description = "How many cards were put back"), (status = 404, body = Problem, description = "Not found"),
        (status = 409, body = Problem, description = "Cards need a column but the board has none")))]
#[tracing::instrument(skip_all, fields(board = %id), err)]
pub async fn reconcile_board(State(state): State<AppState>, ApiPath(id): ApiPath<Uuid>) -> ApiResult<Json<Reconciled>> {
    let mut tx = state.db.begin().await?;
    let reconciled = reconcile(&mut tx, id).await?;
    state.feed.commit(tx).await?;
    Ok(Json(reconciled))
}

/// Puts the board's stray cards into its first column, in the caller's transaction.
pub(crate) async fn reconcile(tx: &mut sqlx::PgConnection, id: Uuid) -> ApiResult<Reconciled> {
    boards::find(&mut *tx, id, true).await?.ok_or_else(|| no_board(id))?;
    let first = boards::columns_of(&mut *tx, &[id]).await?.first().map(|c| c.id);
    if first.is_none() {
        let strays = columns_db::strays(&mut *tx, id).await?;
        if strays.total() > 0 {
            return Err(ApiError::conflict(
                format!(
                    "{} tasks and {} wishes need a column, but the board has none; add one first",
                    strays.tasks, strays.wishes
                ),
                None,
            ));
        }
    }
    let Moved { tasks, wishes } = columns_db::reconcile(tx, id, first).await?;
    Ok(Reconciled { moved: tasks + wishes, tasks, wishes, column_id: first })
}

pub(crate) fn no_board(id: Uuid) -> ApiError {
    ApiError::NotFound(format!("no board {id}"))
}

/// Locks the board for a change and checks `If-Match` against its version.
pub(crate) async fn locked_board(conn: &mut sqlx::PgConnection, id: Uuid, if_match: &IfMatch) -> ApiResult<BoardHead> {
    let head = boards::find(conn, id, true).await?.ok_or_else(|| no_board(id))?;
    if_match.check(&format!("board {id}"), head.version)?;
    Ok(head)
}

fn board_name(name: &str) -> ApiResult<String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(ApiError::validation("name", "must be 1 to 200 characters"));
    }
    Ok(name.to_owned())
}

/// Column names are checked by the domain rule, reported under this request's field.
pub(crate) fn column_name(field: &str, name: &str) -> ApiResult<String> {
    Ok(validate_column_name(field, name)?)
}
