//! A board's columns: add, change, reorder and delete them. Each change locks the board, honours
//! `If-Match` on the board's version, and answers with the whole board (positions of other
//! columns may have moved).

use serde::Serialize;
use uuid::Uuid;

use super::{locked, no_board};
use crate::app::{Ctx, Error, Fields, IfMatch, Result};
use crate::db::board_columns::{self as columns_db, Moved};
use crate::db::boards::{self, Board, Column};
use crate::domain::board::{
    validate_action_skill, validate_column_name, validate_wip_limit, ColumnSpec, Gate, MAX_COLUMNS,
};

/// A column to add.
#[derive(Debug, Default)]
pub struct NewColumn {
    pub name: String,
    pub gate: Gate,
    pub action_skill: Option<String>,
    /// Greater than 0; `None` means no limit.
    pub wip_limit: Option<i32>,
    /// Where to insert it, 0..=n (later columns shift right); `None` appends.
    pub position: Option<i32>,
}

/// A change to a column: only the fields given change; `Some(None)` clears `action_skill` or
/// `wip_limit`.
#[derive(Debug, Default)]
pub struct ColumnPatch {
    pub name: Option<String>,
    pub gate: Option<Gate>,
    pub action_skill: Option<Option<String>>,
    pub wip_limit: Option<Option<i32>>,
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

/// Adds a column at `position`, or at the end; a board has at most [`MAX_COLUMNS`].
#[tracing::instrument(skip_all, fields(board = ?id), err(level = "debug"))]
pub async fn add(ctx: &Ctx, id: Uuid, if_match: &IfMatch, new: NewColumn) -> Result<Board> {
    let mut errors = Fields::default();
    let name = errors.take(validate_column_name("name", &new.name).map_err(Error::from))?;
    let action_skill =
        errors.take(validate_action_skill("action_skill", new.action_skill.as_deref()).map_err(Error::from))?;
    errors.take(validate_wip_limit("wip_limit", new.wip_limit).map_err(Error::from))?;
    errors.check("position", new.position.is_none_or(|p| p >= 0), "must be 0 or more");
    errors.finish()?;
    let (Some(name), Some(action_skill)) = (name, action_skill) else { unreachable!("every None recorded an error") };
    let column = ColumnSpec { name, gate: new.gate, action_skill, wip_limit: new.wip_limit };
    let mut tx = ctx.db.begin().await?;
    locked(&mut tx, id, if_match).await?;
    let columns = boards::columns_of(&mut tx, &[id]).await?;
    name_is_free(&columns, &column.name, None)?;
    let count = columns.len() as i32;
    if count as usize >= MAX_COLUMNS {
        return Err(Error::conflict(format!("the board already has {MAX_COLUMNS} columns"), None));
    }
    let position = new.position.unwrap_or(count);
    if !(0..=count).contains(&position) {
        return Err(Error::invalid("position", format!("must be between 0 and {count}")));
    }
    columns_db::add(&mut tx, id, &column, position).await.map_err(Error::unique_as(
        "board_columns_board_id_name_key",
        format!("the board has a column named `{}`", column.name),
    ))?;
    let board = boards::get(&mut tx, id).await?.ok_or_else(|| no_board(id))?;
    ctx.feed.commit(tx).await?;
    Ok(board)
}

/// Changes a column's name, gate, action skill or WIP limit. A limit below the cards the column
/// holds now is refused, so a limit is never born broken.
#[tracing::instrument(skip_all, fields(board = ?id, column = ?column_id), err(level = "debug"))]
pub async fn update(ctx: &Ctx, id: Uuid, column_id: Uuid, if_match: &IfMatch, patch: ColumnPatch) -> Result<Board> {
    let mut tx = ctx.db.begin().await?;
    locked(&mut tx, id, if_match).await?;
    let columns = boards::columns_of(&mut tx, &[id]).await?;
    let current = find_column(&columns, id, column_id)?;
    let mut errors = Fields::default();
    let name = match &patch.name {
        Some(name) => errors.take(validate_column_name("name", name).map_err(Error::from))?,
        None => Some(current.name.clone()),
    };
    let action_skill = match patch.action_skill {
        Some(skill) => errors.take(validate_action_skill("action_skill", skill.as_deref()).map_err(Error::from))?,
        None => Some(current.action_skill.clone()),
    };
    let wip_limit = patch.wip_limit.unwrap_or(current.wip_limit);
    errors.take(validate_wip_limit("wip_limit", wip_limit).map_err(Error::from))?;
    errors.finish()?;
    let (Some(name), Some(action_skill)) = (name, action_skill) else { unreachable!("every None recorded an error") };
    let new = ColumnSpec { name, gate: patch.gate.unwrap_or(current.gate), action_skill, wip_limit };
    name_is_free(&columns, &new.name, Some(column_id))?;
    if let Some(limit) = new.wip_limit.filter(|&l| i64::from(l) < current.cards()) {
        return Err(Error::conflict(
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
        columns_db::update(&mut tx, id, column_id, &new, &changed).await.map_err(Error::unique_as(
            "board_columns_board_id_name_key",
            format!("the board has a column named `{}`", new.name),
        ))?;
    }
    let board = boards::get(&mut tx, id).await?.ok_or_else(|| no_board(id))?;
    ctx.feed.commit(tx).await?;
    Ok(board)
}

/// Sets the order of a board's columns: `column_ids` must list each of them exactly once.
#[tracing::instrument(skip_all, fields(board = ?id), err(level = "debug"))]
pub async fn reorder(ctx: &Ctx, id: Uuid, if_match: &IfMatch, column_ids: &[Uuid]) -> Result<Board> {
    let mut tx = ctx.db.begin().await?;
    locked(&mut tx, id, if_match).await?;
    let columns = boards::columns_of(&mut tx, &[id]).await?;
    check_permutation(&columns, column_ids)?;
    let current: Vec<Uuid> = columns.iter().map(|c| c.id).collect();
    if current != column_ids {
        columns_db::reorder(&mut tx, id, column_ids).await?;
    }
    let board = boards::get(&mut tx, id).await?.ok_or_else(|| no_board(id))?;
    ctx.feed.commit(tx).await?;
    Ok(board)
}

/// Deletes a column, first moving its tasks and wishes to the board's first remaining column;
/// the last column is deleted only while it holds no cards.
#[tracing::instrument(skip_all, fields(board = ?id, column = ?column_id), err(level = "debug"))]
pub async fn delete(ctx: &Ctx, id: Uuid, column_id: Uuid, if_match: &IfMatch) -> Result<ColumnDeleted> {
    let mut tx = ctx.db.begin().await?;
    locked(&mut tx, id, if_match).await?;
    let columns = boards::columns_of(&mut tx, &[id]).await?;
    let column = find_column(&columns, id, column_id)?;
    let target = columns.iter().find(|c| c.id != column_id).map(|c| c.id);
    if target.is_none() && column.cards() > 0 {
        return Err(Error::conflict(
            format!(
                "`{}` is the board's last column and holds {} tasks and {} wishes; there is nowhere to move them",
                column.name, column.task_count, column.wish_count
            ),
            None,
        ));
    }
    let moved = columns_db::delete(&mut tx, id, column_id, target).await?;
    let board = boards::get(&mut tx, id).await?.ok_or_else(|| no_board(id))?;
    ctx.feed.commit(tx).await?;
    Ok(ColumnDeleted { moved, moved_to: target, board })
}

/// Column names are unique per board regardless of case, as in templates: "Done" and "done"
/// side by side would confuse anyone. (The table's own constraint is case-sensitive.)
fn name_is_free(columns: &[Column], name: &str, except: Option<Uuid>) -> Result<()> {
    let taken = columns.iter().any(|c| Some(c.id) != except && c.name.to_lowercase() == name.to_lowercase());
    if taken {
        return Err(Error::conflict(format!("the board has a column named `{name}`"), None));
    }
    Ok(())
}

fn find_column(columns: &[Column], board: Uuid, column_id: Uuid) -> Result<Column> {
    columns
        .iter()
        .find(|c| c.id == column_id)
        .cloned()
        .ok_or_else(|| Error::NotFound(format!("board {board} has no column {column_id}")))
}

/// Each of the board's columns exactly once, nothing else; the first fault is named by index.
fn check_permutation(columns: &[Column], ids: &[Uuid]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for (i, id) in ids.iter().enumerate() {
        if !columns.iter().any(|c| c.id == *id) {
            return Err(Error::invalid(format!("column_ids[{i}]"), "is not a column of this board"));
        }
        if !seen.insert(*id) {
            return Err(Error::invalid(format!("column_ids[{i}]"), "appears more than once"));
        }
    }
    let missing: Vec<String> = columns.iter().filter(|c| !seen.contains(&c.id)).map(|c| c.name.clone()).collect();
    if !missing.is_empty() {
        return Err(Error::invalid(
            "column_ids",
            format!("must list every column of the board; missing: {}", missing.join(", ")),
        ));
    }
    Ok(())
}
