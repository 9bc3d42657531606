//! Placing a wish on its board: moving its card to a column. Not a lifecycle change, so it goes
//! past [`super::apply`]: only `board_id`/`column_id` move, with a `wish.moved` event.

use serde_json::json;
use sqlx::PgConnection;

use super::{subject, Wish, WishRow};
use crate::db::board_columns::LockedColumn;
use crate::db::events;

/// Moves the wish to `column` (the caller has locked it and checked its WIP limit), setting its
/// board when it had none. Conditional on the wish still being on no board or on the column's:
/// `None` when it is gone or was put on another board meanwhile.
#[tracing::instrument(skip_all, fields(wish = %wish.slug, column = %column.id), err(level = "debug"))]
pub async fn move_to_column(
    conn: &mut PgConnection,
    wish: &Wish,
    column: &LockedColumn,
) -> Result<Option<Wish>, sqlx::Error> {
    let before = sqlx::query!(
        "SELECT column_id FROM wishes WHERE id = $1 AND (board_id IS NULL OR board_id = $2) FOR UPDATE",
        wish.id,
        column.board_id
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(before) = before else { return Ok(None) };
    let row = sqlx::query_as!(
        WishRow,
        "UPDATE wishes SET board_id = $2, column_id = $3, version = version + 1, updated_at = now()
         WHERE id = $1 RETURNING *",
        wish.id,
        column.board_id,
        column.id
    )
    .fetch_one(&mut *conn)
    .await?;
    let moved = Wish::try_from(row)?;
    let payload = json!({
        "slug": moved.slug, "from_column": before.column_id, "to_column": column.id, "board_id": column.board_id,
    });
    events::record(conn, "wish.moved", &subject(&moved), payload).await?;
    Ok(Some(moved))
}
