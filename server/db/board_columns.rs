//! A board's columns in the database: add, change, reorder and delete them, keeping positions
//! dense (0..n-1), put cards that lost their column back on the board, and lock a column to place
//! a card in it under its WIP limit. The caller locks the board first
//! (`boards::find(.., lock: true)`), so two changes to one board never interleave.

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::{boards, events};
use crate::domain::board::{self, ColumnSpec};

/// How many cards a change moved, and where to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"tasks": 3, "wishes": 1}))]
pub struct Moved {
    pub tasks: i64,
    pub wishes: i64,
}

impl Moved {
    pub fn total(&self) -> i64 {
        self.tasks + self.wishes
    }
}

/// A card on a board, by id: a task or a wish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Card {
    Task(Uuid),
    Wish(Uuid),
}

/// A board column locked for placing a card in it, with the cards it holds.
#[derive(Debug, Clone)]
pub struct LockedColumn {
    pub id: Uuid,
    pub board_id: Uuid,
    pub project_id: Uuid,
    pub name: String,
    pub wip_limit: Option<i32>,
    /// Tasks and wishes in the column now, not counting the card being moved.
    pub occupied: i64,
}

impl LockedColumn {
    /// Whether one more card would go over the WIP limit.
    pub fn is_full(&self) -> bool {
        board::is_full(self.wip_limit, self.occupied)
    }

    /// Locks the column (so two placements cannot both take its last slot) and counts its tasks
    /// and wishes, leaving out `moving`. `column_id = None` picks the board's first column. `None`
    /// when there is no such column (or board). Task and wish moves both come through here, so
    /// the WIP limit counts the same cards whichever kind moves.
    pub async fn lock(
        conn: &mut PgConnection,
        board_id: Option<Uuid>,
        column_id: Option<Uuid>,
        moving: Option<Card>,
    ) -> Result<Option<LockedColumn>, sqlx::Error> {
        let row = sqlx::query!(
            "SELECT c.id, c.board_id, b.project_id, c.name, c.wip_limit
             FROM board_columns c JOIN boards b ON b.id = c.board_id
             WHERE ($1::uuid IS NULL OR c.id = $1) AND ($2::uuid IS NULL OR c.board_id = $2)
               AND ($1::uuid IS NOT NULL OR $2::uuid IS NOT NULL)
             ORDER BY c.position LIMIT 1
             FOR UPDATE OF c",
            column_id,
            board_id
        )
        .fetch_optional(&mut *conn)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let (task, wish) = match moving {
            Some(Card::Task(id)) => (Some(id), None),
            Some(Card::Wish(id)) => (None, Some(id)),
            None => (None, None),
        };
        let occupied = sqlx::query_scalar!(
            r#"SELECT (SELECT count(*) FROM tasks WHERE column_id = $1 AND ($2::uuid IS NULL OR id <> $2))
                    + (SELECT count(*) FROM wishes WHERE column_id = $1 AND ($3::uuid IS NULL OR id <> $3))
                    AS "count!""#,
            row.id,
            task,
            wish
        )
        .fetch_one(&mut *conn)
        .await?;
        Ok(Some(LockedColumn {
            id: row.id,
            board_id: row.board_id,
            project_id: row.project_id,
            name: row.name,
            wip_limit: row.wip_limit,
            occupied,
        }))
    }
}

pub(crate) async fn insert_row(
    conn: &mut PgConnection,
    board_id: Uuid,
    column: &ColumnSpec,
    position: i32,
) -> Result<Uuid, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO board_columns (id, board_id, name, position, gate, action_skill, wip_limit)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id",
        Uuid::new_v4(),
        board_id,
        column.name,
        position,
        column.gate.as_str(),
        column.action_skill,
        column.wip_limit
    )
    .fetch_one(conn)
    .await
}

/// Inserts a column at `position` (0..=n), shifting the later ones right.
#[tracing::instrument(skip_all, fields(board = %board_id, position), err(level = "debug"))]
pub async fn add(
    conn: &mut PgConnection,
    board_id: Uuid,
    column: &ColumnSpec,
    position: i32,
) -> Result<Uuid, sqlx::Error> {
    // Shifting one by one would collide with the neighbour's position mid-statement.
    sqlx::query!("SET CONSTRAINTS board_columns_position DEFERRED").execute(&mut *conn).await?;
    sqlx::query!(
        "UPDATE board_columns SET position = position + 1, updated_at = now() WHERE board_id = $1 AND position >= $2",
        board_id,
        position
    )
    .execute(&mut *conn)
    .await?;
    let id = insert_row(conn, board_id, column, position).await?;
    let payload = serde_json::json!({"column_id": id, "name": column.name, "position": position});
    boards::changed(conn, board_id, "board.column_added", payload).await?;
    Ok(id)
}

/// Overwrites a column's settings (the caller merged the patch into `column`).
#[tracing::instrument(skip_all, fields(board = %board_id, column = %column_id), err(level = "debug"))]
pub async fn update(
    conn: &mut PgConnection,
    board_id: Uuid,
    column_id: Uuid,
    column: &ColumnSpec,
    changed: &[&str],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE board_columns SET name = $3, gate = $4, action_skill = $5, wip_limit = $6, updated_at = now()
         WHERE id = $1 AND board_id = $2",
        column_id,
        board_id,
        column.name,
        column.gate.as_str(),
        column.action_skill,
        column.wip_limit
    )
    .execute(&mut *conn)
    .await?;
    let payload = serde_json::json!({"column_id": column_id, "changed": changed});
    boards::changed(conn, board_id, "board.column_updated", payload).await?;
    Ok(())
}

/// Puts the board's columns in this order; `ids` must be a permutation of them (the caller
/// checks).
#[tracing::instrument(skip_all, fields(board = %board_id), err(level = "debug"))]
pub async fn reorder(conn: &mut PgConnection, board_id: Uuid, ids: &[Uuid]) -> Result<(), sqlx::Error> {
    // A reorder swaps positions, which only the end state keeps unique.
    sqlx::query!("SET CONSTRAINTS board_columns_position DEFERRED").execute(&mut *conn).await?;
    sqlx::query!(
        "UPDATE board_columns c SET position = o.ord - 1, updated_at = now()
         FROM unnest($2::uuid[]) WITH ORDINALITY AS o(id, ord)
         WHERE c.id = o.id AND c.board_id = $1 AND c.position <> o.ord - 1",
        board_id,
        ids
    )
    .execute(&mut *conn)
    .await?;
    boards::changed(conn, board_id, "board.columns_reordered", serde_json::json!({"column_ids": ids})).await?;
    Ok(())
}

/// Moves the column's tasks and wishes to `target` (the board's first remaining column), then
/// deletes the column and closes the gap in positions. With no target, the caller has made sure
/// the column is empty.
#[tracing::instrument(skip_all, fields(board = %board_id, column = %column_id), err(level = "debug"))]
pub async fn delete(
    conn: &mut PgConnection,
    board_id: Uuid,
    column_id: Uuid,
    target: Option<Uuid>,
) -> Result<Moved, sqlx::Error> {
    lock_columns(conn, board_id).await?;
    let mut moved = Moved::default();
    if let Some(target) = target {
        moved.tasks = sqlx::query!(
            "UPDATE tasks SET column_id = $2, board_id = $3, updated_at = now() WHERE column_id = $1",
            column_id,
            target,
            board_id
        )
        .execute(&mut *conn)
        .await?
        .rows_affected() as i64;
        moved.wishes = sqlx::query!(
            "UPDATE wishes SET column_id = $2, board_id = $3, updated_at = now() WHERE column_id = $1",
            column_id,
            target,
            board_id
        )
        .execute(&mut *conn)
        .await?
        .rows_affected() as i64;
    }
    let position = sqlx::query_scalar!(
        "DELETE FROM board_columns WHERE id = $1 AND board_id = $2 RETURNING position",
        column_id,
        board_id
    )
    .fetch_one(&mut *conn)
    .await?;
    sqlx::query!(
        "UPDATE board_columns SET position = position - 1, updated_at = now() WHERE board_id = $1 AND position > $2",
        board_id,
        position
    )
    .execute(&mut *conn)
    .await?;
    let payload = serde_json::json!({"column_id": column_id, "moved_to": target, "moved": moved});
    boards::changed(conn, board_id, "board.column_deleted", payload).await?;
    Ok(moved)
}

/// Locks the board's column rows before cards are moved between them. A card move locks its
/// target column first ([`LockedColumn::lock`]) and then the task or wish; taking column locks
/// before card locks here too keeps the two in one order, so they wait for each other instead of
/// deadlocking.
async fn lock_columns(conn: &mut PgConnection, board_id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query!("SELECT id FROM board_columns WHERE board_id = $1 ORDER BY id FOR UPDATE", board_id)
        .fetch_all(conn)
        .await?;
    Ok(())
}

/// How many cards claim this board but sit in no column of it (none, or another board's).
pub async fn strays(conn: &mut PgConnection, board_id: Uuid) -> Result<Moved, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT
             (SELECT count(*) FROM tasks t WHERE t.board_id = $1 AND (t.column_id IS NULL OR NOT EXISTS
                (SELECT 1 FROM board_columns c WHERE c.id = t.column_id AND c.board_id = $1))) AS "tasks!",
             (SELECT count(*) FROM wishes w WHERE w.board_id = $1 AND (w.column_id IS NULL OR NOT EXISTS
                (SELECT 1 FROM board_columns c WHERE c.id = w.column_id AND c.board_id = $1))) AS "wishes!""#,
        board_id
    )
    .fetch_one(conn)
    .await?;
    Ok(Moved { tasks: row.tasks, wishes: row.wishes })
}

/// Puts every stray card of the board (see [`strays`]) into `target`, the board's first column.
#[tracing::instrument(skip_all, fields(board = %board_id), err(level = "debug"))]
pub async fn reconcile(conn: &mut PgConnection, board_id: Uuid, target: Option<Uuid>) -> Result<Moved, sqlx::Error> {
    lock_columns(conn, board_id).await?;
    let mut moved = Moved::default();
    if let Some(target) = target {
        moved.tasks = sqlx::query!(
            "UPDATE tasks t SET column_id = $2, updated_at = now()
             WHERE t.board_id = $1 AND (t.column_id IS NULL OR NOT EXISTS
                (SELECT 1 FROM board_columns c WHERE c.id = t.column_id AND c.board_id = $1))",
            board_id,
            target
        )
        .execute(&mut *conn)
        .await?
        .rows_affected() as i64;
        moved.wishes = sqlx::query!(
            "UPDATE wishes w SET column_id = $2, updated_at = now()
             WHERE w.board_id = $1 AND (w.column_id IS NULL OR NOT EXISTS
                (SELECT 1 FROM board_columns c WHERE c.id = w.column_id AND c.board_id = $1))",
            board_id,
            target
        )
        .execute(&mut *conn)
        .await?
        .rows_affected() as i64;
    }
    // Cards moved, the board itself did not change: an event, but no new version.
    let payload = serde_json::json!({"moved_to": target, "moved": moved});
    events::record(conn, "board.reconciled", &format!("board:{board_id}"), payload).await?;
    Ok(moved)
}
