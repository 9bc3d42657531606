//! Boards: a project's Kanban pipeline, its columns, and cards moving between them.

use super::Error;
use crate::db::board_columns::LockedColumn;

/// The conflict of a card sent to a column at its WIP limit.
pub fn column_full(column: &LockedColumn) -> Error {
    let limit = column.wip_limit.unwrap_or_default();
    Error::conflict(format!("column `{}` is full: its WIP limit is {limit}", column.name), None)
}
