//! `/api/v1/boards/{id}/columns`: add, change, reorder and delete a board's columns
//! ([`crate::app::boards::columns`]). Each change honours `If-Match` on the board's version and
//! answers with the whole board (positions of other columns may have moved).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::api::json::{nullable, ApiJson};
pub use crate::app::boards::columns::ColumnDeleted;
use crate::app::boards::columns::{self, ColumnPatch, NewColumn};
use crate::db::boards::Board;
use crate::domain::board::Gate;
use crate::http::error::{ApiResult, Problem};
use crate::http::etag::{etag, IfMatch};
use crate::http::extract::ApiPath;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(add_column))
        .routes(routes!(update_column, delete_column))
        .routes(routes!(reorder_columns))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"name": "QA", "gate": "agent", "action_skill": "run-qa", "wip_limit": 2, "position": 2}))]
pub struct AddColumn {
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: String,
    #[serde(default)]
    pub gate: Gate,
    pub action_skill: Option<String>,
    /// Greater than 0; absent means no limit.
    #[schema(minimum = 1)]
    pub wip_limit: Option<i32>,
    /// Where to insert it, 0..=n (later columns shift right); absent appends.
    #[schema(minimum = 0)]
    pub position: Option<i32>,
}

/// Only the fields sent change; `null` clears `action_skill` or `wip_limit`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"wip_limit": 5, "gate": "human"}))]
pub struct UpdateColumn {
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: Option<String>,
    pub gate: Option<Gate>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub action_skill: Option<Option<String>>,
    /// Greater than 0; `null` removes the limit.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<i32>, minimum = 1)]
    pub wip_limit: Option<Option<i32>>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"column_ids": ["7c9e6679-7425-40de-944b-e07fc1f90ae7", "9b2d5f1e-3c4a-4d8e-8f10-2a6b7c8d9e0f", "1f0e2d3c-4b5a-4697-8877-665544332211"]}))]
pub struct ReorderColumns {
    /// Every column of the board, exactly once, in the new order.
    pub column_ids: Vec<Uuid>,
}

type BoardPath = ApiPath<Uuid>;
type ColumnPath = ApiPath<(Uuid, Uuid)>;

/// Adds a column at `position`, or at the end.
#[utoipa::path(post, path = "/boards/{id}/columns", tag = "boards", request_body = AddColumn,
    params(("id" = Uuid, Path), ("If-Match" = Option<String>, Header, description = "The board version")),
    responses((status = 201, body = Board, description = "The board, with its columns in order", headers(("ETag" = String))), (status = 404, body = Problem, description = "Not found"),
        (status = 409, body = Problem, description = "A column has this name, or the board has 30 columns"),
        (status = 412, body = Problem, description = "If-Match names another version"), (status = 422, body = Problem, description = "Invalid request")))]
#[tracing::instrument(skip_all, fields(board = ?id), err(level = "debug"))]
pub async fn add_column(
    State(state): State<AppState>,
    ApiPath(id): BoardPath,
    if_match: IfMatch,
    ApiJson(body): ApiJson<AddColumn>,
) -> ApiResult<impl IntoResponse> {
    let new = NewColumn {
        name: body.name,
        gate: body.gate,
        action_skill: body.action_skill,
        wip_limit: body.wip_limit,
        position: body.position,
    };
    let board = columns::add(&state, id, &if_match, new).await?;
    Ok((StatusCode::CREATED, etag(board.version), Json(board)))
}

/// Changes a column's name, gate, action skill or WIP limit. A limit below the number of tasks
/// the column holds now is refused (409), so a limit is never born broken.
#[utoipa::path(patch, path = "/boards/{id}/columns/{column_id}", tag = "boards", request_body = UpdateColumn,
    params(("id" = Uuid, Path), ("column_id" = Uuid, Path), ("If-Match" = Option<String>, Header, description = "The board version")),
    responses((status = 200, body = Board, description = "The board, with its columns in order", headers(("ETag" = String))), (status = 404, body = Problem, description = "Not found"),
        (status = 409, body = Problem, description = "Name taken, or the WIP limit is below the tasks in the column"),
        (status = 412, body = Problem, description = "If-Match names another version"), (status = 422, body = Problem, description = "Invalid request")))]
#[tracing::instrument(skip_all, fields(board = ?id, column = ?column_id), err(level = "debug"))]
pub async fn update_column(
    State(state): State<AppState>,
    ApiPath((id, column_id)): ColumnPath,
    if_match: IfMatch,
    ApiJson(patch): ApiJson<UpdateColumn>,
) -> ApiResult<impl IntoResponse> {
    let patch = ColumnPatch {
        name: patch.name,
        gate: patch.gate,
        action_skill: patch.action_skill,
        wip_limit: patch.wip_limit,
    };
    let board = columns::update(&state, id, column_id, &if_match, patch).await?;
    Ok((etag(board.version), Json(board)))
}

/// Sets the order of a board's columns: `column_ids` must list each of them exactly once.
#[utoipa::path(put, path = "/boards/{id}/columns/order", tag = "boards", request_body = ReorderColumns,
    params(("id" = Uuid, Path), ("If-Match" = Option<String>, Header, description = "The board version")),
    responses((status = 200, body = Board, description = "The board, with its columns in order", headers(("ETag" = String))), (status = 404, body = Problem, description = "Not found"),
        (status = 412, body = Problem, description = "If-Match names another version"), (status = 422, body = Problem, description = "Not a permutation of the board's columns")))]
#[tracing::instrument(skip_all, fields(board = ?id), err(level = "debug"))]
pub async fn reorder_columns(
    State(state): State<AppState>,
    ApiPath(id): BoardPath,
    if_match: IfMatch,
    ApiJson(body): ApiJson<ReorderColumns>,
) -> ApiResult<impl IntoResponse> {
    let board = columns::reorder(&state, id, &if_match, &body.column_ids).await?;
    Ok((etag(board.version), Json(board)))
}

/// Deletes a column, first moving its tasks and wishes to the board's first remaining column.
#[utoipa::path(delete, path = "/boards/{id}/columns/{column_id}", tag = "boards",
    params(("id" = Uuid, Path), ("column_id" = Uuid, Path), ("If-Match" = Option<String>, Header, description = "The board version")),
    responses((status = 200, body = ColumnDeleted, description = "What moved, and the board as it is now", headers(("ETag" = String))), (status = 404, body = Problem, description = "Not found"),
        (status = 409, body = Problem, description = "It is the last column and still holds cards"), (status = 412, body = Problem, description = "If-Match names another version")))]
#[tracing::instrument(skip_all, fields(board = ?id, column = ?column_id), err(level = "debug"))]
pub async fn delete_column(
    State(state): State<AppState>,
    ApiPath((id, column_id)): ColumnPath,
    if_match: IfMatch,
) -> ApiResult<impl IntoResponse> {
    let deleted = columns::delete(&state, id, column_id, &if_match).await?;
    Ok((etag(deleted.board.version), Json(deleted)))
}
