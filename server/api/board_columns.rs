//! `/api/v1/boards/{id}/columns`: add, change, reorder and delete a board's columns. Each change
//! locks the board, honours `If-Match` on the board's version, and answers with the whole board
//! (positions of other columns may have moved).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::api::boards::{column_name, locked_board, no_board};
use crate::api::error::{ApiError, ApiResult, Problem};
use crate::api::etag::{etag, IfMatch};
use crate::api::extract::ApiPath;
use crate::api::json::{nullable, ApiJson};
use crate::db::board_columns::{self as columns_db, Moved};
use crate::db::boards::{self, Board, Column};
use crate::domain::board::{validate_action_skill, validate_wip_limit, ColumnSpec, Gate, MAX_COLUMNS};
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
    pub name: String,
    #[serde(default)]
    pub gate: Gate,
    pub action_skill: Option<String>,
    /// Greater than 0; absent means no limit.
    pub wip_limit: Option<i32>,
    /// Where to insert it, 0..=n (later columns shift right); absent appends.
    pub position: Option<i32>,
}

/// Only the fields sent change; `null` clears `action_skill` or `wip_limit`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"wip_limit": 5, "gate": "human"}))]
pub struct UpdateColumn {
    pub name: Option<String>,
    pub gate: Option<Gate>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub action_skill: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<i32>)]
    pub wip_limit: Option<Option<i32>>,
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"column_ids": ["7c9e6679-7425-40de-944b-e07fc1f90ae7", "9b2d5f1e-3c4a-4d8e-8f10-2a6b7c8d9e0f", "1f0e2d3c-4b5a-4697-8877-665544332211"]}))]
pub struct ReorderColumns {
    /// Every column of the board, exactly once, in the new order.
    pub column_ids: Vec<Uuid>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ColumnDeleted {
    /// The tasks and wishes moved out of the deleted column.
    pub moved: Moved,
    /// Where they went: the board's first remaining column.
    #[schema(example = "7c9e6679-7425-40de-944b-e07fc1f90ae7")]
    pub moved_to: Option<Uuid>,
    pub board: Board,
}

type BoardPath = ApiPath<Uuid>;
type ColumnPath = ApiPath<(Uuid, Uuid)>;

/// Adds a column at `position`, or at the end.
#[utoipa::path(post, path = "/boards/{id}/columns", tag = "boards", request_body = AddColumn,
    params(("id" = Uuid, Path), ("If-Match" = Option<String>, Header, description = "The board version")),
    responses((status = 201, body = Board, description = "The board, with its columns in order", headers(("ETag" = String))), (status = 404, body = Problem, description = "Not found"),
        (status = 409, body = Problem, description = "A column has this name, or the board has 30 columns"),
        (status = 412, body = Problem, description = "If-Match names another version"), (status = 422, body = Problem, description = "Invalid request")))]
#[tracing::instrument(skip_all, fields(board = %id), err)]
pub async fn add_column(
    State(state): State<AppState>,
    ApiPath(id): BoardPath,
    if_match: IfMatch,
    ApiJson(body): ApiJson<AddColumn>,
) -> ApiResult<impl IntoResponse> {
    let column = ColumnSpec {
        name: column_name("name", &body.name)?,
        gate: body.gate,
        action_skill: validate_action_skill("action_skill", body.action_skill.as_deref())?,
        wip_limit: body.wip_limit,
    };
    validate_wip_limit("wip_limit", column.wip_limit)?;
    let mut tx = state.db.begin().await?;
    locked_board(&mut tx, id, &if_match).await?;
    let columns = boards::columns_of(&mut tx, &[id]).await?;
    name_is_free(&columns, &column.name, None)?;
    let count = columns.len() as i32;
    if count as usize >= MAX_COLUMNS {
        return Err(ApiError::conflict(format!("the board already has {MAX_COLUMNS} columns"), None));
    }
    let position = body.position.unwrap_or(count);
    if !(0..=count).contains(&position) {
        return Err(ApiError::validation("position", format!("must be between 0 and {count}")));
    }
    columns_db::add(&mut tx, id, &column, position).await.map_err(ApiError::unique_as(
        "board_columns_board_id_name_key",
        format!("the board has a column named `{}`", column.name),
    ))?;
    let board = boards::get(&mut tx, id).await?.ok_or_else(|| no_board(id))?;
    state.feed.commit(tx).await?;
    Ok((StatusCode::CREATED, etag(board.version), Json(board)))
}

/// Changes a column's name, gate, action skill or WIP limit. A limit below the number of tasks
/// the column holds now is refused (409), so a limit is never born broken.
#[utoipa::path(patch, path = "/boards/{id}/columns/{column_id}", tag = "boards", request_body = UpdateColumn,
    params(("id" = Uuid, Path), ("column_id" = Uuid, Path), ("If-Match" = Option<String>, Header, description = "The board version")),
    responses((status = 200, body = Board, description = "The board, with its columns in order", headers(("ETag" = String))), (status = 404, body = Problem, description = "Not found"),
        (status = 409, body = Problem, description = "Name taken, or the WIP limit is below the tasks in the column"),
        (status = 412, body = Problem, description = "If-Match names another version"), (status = 422, body = Problem, description = "Invalid request")))]
#[tracing::instrument(skip_all, fields(board = %id, column = %column_id), err)]
pub async fn update_column(
    State(state): State<AppState>,
    ApiPath((id, column_id)): ColumnPath,
    if_match: IfMatch,
    ApiJson(patch): ApiJson<UpdateColumn>,
) -> ApiResult<impl IntoResponse> {
    let mut tx = state.db.begin().await?;
    locked_board(&mut tx, id, &if_match).await?;
    let columns = boards::columns_of(&mut tx, &[id]).await?;
    let current = find_column(&columns, id, column_id)?;
    let new = ColumnSpec {
        name: match &patch.name {
            Some(name) => column_name("name", name)?,
            None => current.name.clone(),
        },
        gate: patch.gate.unwrap_or(current.gate),
        action_skill: match patch.action_skill {
            Some(skill) => validate_action_skill("action_skill", skill.as_deref())?,
            None => current.action_skill.clone(),
        },
        wip_limit: patch.wip_limit.unwrap_or(current.wip_limit),
    };
    validate_wip_limit("wip_limit", new.wip_limit)?;
    name_is_free(&columns, &new.name, Some(column_id))?;
    if let Some(limit) = new.wip_limit.filter(|&l| i64::from(l) < current.cards()) {
        return Err(ApiError::conflict(
            format!(
                "column `{}` holds {} tasks and {} wishes; a WIP limit of {limit} would already be exceeded — move \
                 cards out first",
                current.name, current.task_count, current.wish_count
            ),
            None,
        ));
    }
    let changed: Vec<&str> = [
        ("name", new.name != current.name),
        ("gate", new.gate != current.gate),
        ("action_skill", new.action_skill != current.action_skill),
        ("wip_limit", new.wip_limit != current.wip_limit),
    ]
    .into_iter()
    .filter_map(|(field, differs)| differs.then_some(field))
    .collect();
    if !changed.is_empty() {
        columns_db::update(&mut tx, id, column_id, &new, &changed).await.map_err(ApiError::unique_as(
            "board_columns_board_id_name_key",
            format!("the board has a column named `{}`", new.name),
        ))?;
    }
    let board = boards::get(&mut tx, id).await?.ok_or_else(|| no_board(id))?;
    state.feed.commit(tx).await?;
    Ok((etag(board.version), Json(board)))
}

/// Sets the order of a board's columns: `column_ids` must list each of them exactly once.
#[utoipa::path(put, path = "/boards/{id}/columns/order", tag = "boards", request_body = ReorderColumns,
    params(("id" = Uuid, Path), ("If-Match" = Option<String>, Header, description = "The board version")),
    responses((status = 200, body = Board, description = "The board, with its columns in order", headers(("ETag" = String))), (status = 404, body = Problem, description = "Not found"),
        (status = 412, body = Problem, description = "If-Match names another version"), (status = 422, body = Problem, description = "Not a permutation of the board's columns")))]
#[tracing::instrument(skip_all, fields(board = %id), err)]
pub async fn reorder_columns(
    State(state): State<AppState>,
    ApiPath(id): BoardPath,
    if_match: IfMatch,
    ApiJson(body): ApiJson<ReorderColumns>,
) -> ApiResult<impl IntoResponse> {
    let mut tx = state.db.begin().await?;
    locked_board(&mut tx, id, &if_match).await?;
    let columns = boards::columns_of(&mut tx, &[id]).await?;
    check_permutation(&columns, &body.column_ids)?;
    let current: Vec<Uuid> = columns.iter().map(|c| c.id).collect();
    if current != body.column_ids {
        columns_db::reorder(&mut tx, id, &body.column_ids).await?;
    }
    let board = boards::get(&mut tx, id).await?.ok_or_else(|| no_board(id))?;
    state.feed.commit(tx).await?;
    Ok((etag(board.version), Json(board)))
}

/// Deletes a column, first moving its tasks and wishes to the board's first remaining column.
#[utoipa::path(delete, path = "/boards/{id}/columns/{column_id}", tag = "boards",
    params(("id" = Uuid, Path), ("column_id" = Uuid, Path), ("If-Match" = Option<String>, Header, description = "The board version")),
    responses((status = 200, body = ColumnDeleted, description = "What moved, and the board as it is now", headers(("ETag" = String))), (status = 404, body = Problem, description = "Not found"),
        (status = 409, body = Problem, description = "It is the last column and still holds cards"), (status = 412, body = Problem, description = "If-Match names another version")))]
#[tracing::instrument(skip_all, fields(board = %id, column = %column_id), err)]
pub async fn delete_column(
    State(state): State<AppState>,
    ApiPath((id, column_id)): ColumnPath,
    if_match: IfMatch,
) -> ApiResult<impl IntoResponse> {
    let mut tx = state.db.begin().await?;
    locked_board(&mut tx, id, &if_match).await?;
    let columns = boards::columns_of(&mut tx, &[id]).await?;
    let column = find_column(&columns, id, column_id)?;
    let target = columns.iter().find(|c| c.id != column_id).map(|c| c.id);
    if target.is_none() && column.cards() > 0 {
        return Err(ApiError::conflict(
            format!(
                "`{}` is the board's last column and holds {} tasks and {} wishes; there is nowhere to move them",
                column.name, column.task_count, column.wish_count
            ),
            None,
        ));
    }
    let moved = columns_db::delete(&mut tx, id, column_id, target).await?;
    let board = boards::get(&mut tx, id).await?.ok_or_else(|| no_board(id))?;
    state.feed.commit(tx).await?;
    Ok((etag(board.version), Json(ColumnDeleted { moved, moved_to: target, board })))
}

/// The refusal of a card (task or wish) that one more would put over the column's WIP limit.
/// Column names are unique per board regardless of case, as in templates: "Done" and "done"
/// side by side would confuse anyone. (The table's own constraint is case-sensitive.)
fn name_is_free(columns: &[Column], name: &str, except: Option<Uuid>) -> ApiResult<()> {
    let taken = columns.iter().any(|c| Some(c.id) != except && c.name.to_lowercase() == name.to_lowercase());
    if taken {
        return Err(ApiError::conflict(format!("the board has a column named `{name}`"), None));
    }
    Ok(())
}

fn find_column(columns: &[Column], board: Uuid, column_id: Uuid) -> ApiResult<Column> {
    columns
        .iter()
        .find(|c| c.id == column_id)
        .cloned()
        .ok_or_else(|| ApiError::NotFound(format!("board {board} has no column {column_id}")))
}

/// Each of the board's columns exactly once, nothing else; the first fault is named by index.
fn check_permutation(columns: &[Column], ids: &[Uuid]) -> ApiResult<()> {
    let mut seen = std::collections::HashSet::new();
    for (i, id) in ids.iter().enumerate() {
        if !columns.iter().any(|c| c.id == *id) {
            return Err(ApiError::validation(format!("column_ids[{i}]"), "is not a column of this board"));
        }
        if !seen.insert(*id) {
            return Err(ApiError::validation(format!("column_ids[{i}]"), "appears more than once"));
        }
    }
    let missing: Vec<String> = columns.iter().filter(|c| !seen.contains(&c.id)).map(|c| c.name.clone()).collect();
    if !missing.is_empty() {
        return Err(ApiError::validation(
            "column_ids",
            format!("must list every column of the board; missing: {}", missing.join(", ")),
        ));
    }
    Ok(())
}
