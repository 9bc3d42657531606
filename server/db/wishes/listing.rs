//! Reads of many wishes at once for the dashboard: by state, on a board, and how far each one's
//! groups have got.

use std::collections::HashMap;

use sqlx::PgConnection;
use uuid::Uuid;

use super::{Wish, WishRow};

/// Wishes in any of `statuses`, most recently changed first.
pub async fn in_states(conn: &mut PgConnection, statuses: &[&str], limit: i64) -> Result<Vec<Wish>, sqlx::Error> {
    let statuses: Vec<String> = statuses.iter().map(|s| (*s).to_owned()).collect();
    let rows = sqlx::query_as!(
        WishRow,
        "SELECT * FROM wishes WHERE status = ANY($1) ORDER BY updated_at DESC, id LIMIT $2",
        &statuses,
        limit
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(Wish::try_from).collect()
}

/// The wishes placed on a board, oldest first.
pub async fn on_board(conn: &mut PgConnection, board_id: Uuid) -> Result<Vec<Wish>, sqlx::Error> {
    let rows = sqlx::query_as!(WishRow, "SELECT * FROM wishes WHERE board_id = $1 ORDER BY created_at, id", board_id)
        .fetch_all(conn)
        .await?;
    rows.into_iter().map(Wish::try_from).collect()
}

/// How far each wish has got: `(groups done, groups)`, for wishes that have groups.
pub async fn progress(conn: &mut PgConnection, wish_ids: &[Uuid]) -> Result<HashMap<Uuid, (i64, i64)>, sqlx::Error> {
    if wish_ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = sqlx::query!(
        r#"SELECT wish_id AS "wish_id!", count(*) FILTER (WHERE status = 'done') AS "done!", count(*) AS "total!"
           FROM tasks WHERE wish_id = ANY($1) GROUP BY wish_id"#,
        wish_ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.wish_id, (r.done, r.total))).collect())
}
