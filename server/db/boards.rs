//! Boards in the database: a project's Kanban pipelines, read with their ordered columns and how
//! many cards sit in each. Column changes live in `board_columns`; every change to a board or
//! its columns increments the board's `version` (the API's ETag).

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::{board_columns, events};
use crate::domain::board::{self, ColumnSpec, Gate};

/// A board without its columns: what a change needs to know and lock.
#[derive(Debug, Clone)]
pub struct BoardHead {
    pub id: Uuid,
    pub project_id: Uuid,
    pub project: String,
    pub name: String,
    pub version: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A board as the API shows it: its columns in order, each with its card counts.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "5c1d1b0e-8a3e-4d8e-9a51-0c9e1f0f3b20", "project_id": "0b9f6a86-4c5e-4a43-9a59-7d5f6e1e8c11",
    "project": "switchyard", "name": "Delivery", "version": 3,
    "columns": [{"id": "9a0e6c1e-3f7d-4b5a-8d0e-2b7c4e9f1a11", "name": "Backlog", "position": 0, "gate": "auto",
                 "action_skill": null, "wip_limit": null, "task_count": 4, "wish_count": 1}],
    "created_at": "2025-01-15T10:30:00Z", "updated_at": "2025-01-15T10:31:00Z"}))]
pub struct Board {
    pub id: Uuid,
    pub project_id: Uuid,
    /// The project's slug.
    pub project: String,
    pub name: String,
    /// Incremented by every change to the board or its columns.
    pub version: i32,
    pub columns: Vec<Column>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// One column of a board, with how many tasks and wishes are in it now.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "7c9e6679-7425-40de-944b-e07fc1f90ae7", "board_id": "9b2d5f1e-3c4a-4d8e-8f10-2a6b7c8d9e0f", "name": "Review", "position": 2, "gate": "human", "action_skill": "review-pr", "wip_limit": 3, "task_count": 2, "wish_count": 1}))]
pub struct Column {
    pub id: Uuid,
    #[serde(skip)]
    pub board_id: Uuid,
    pub name: String,
    /// 0-based and dense: a board's columns are at 0..n-1.
    pub position: i32,
    pub gate: Gate,
    pub action_skill: Option<String>,
    pub wip_limit: Option<i32>,
    pub task_count: i64,
    pub wish_count: i64,
}

impl Column {
    /// Tasks and wishes in the column: what its WIP limit counts.
    pub fn cards(&self) -> i64 {
        self.task_count + self.wish_count
    }

    pub fn is_full(&self) -> bool {
        board::is_full(self.wip_limit, self.cards())
    }
}

impl Board {
    pub fn assemble(head: BoardHead, columns: Vec<Column>) -> Board {
        Board {
            id: head.id,
            project_id: head.project_id,
            project: head.project,
            name: head.name,
            version: head.version,
            columns,
            created_at: head.created_at,
            updated_at: head.updated_at,
        }
    }
}

/// Creates a board with these (already validated) columns, in order.
#[tracing::instrument(skip_all, fields(project = %project, name = %name), err(level = "debug"))]
pub async fn create(
    conn: &mut PgConnection,
    project_id: Uuid,
    project: &str,
    name: &str,
    columns: &[ColumnSpec],
    template: Option<&str>,
) -> Result<Board, sqlx::Error> {
    let id = Uuid::new_v4();
    sqlx::query!("INSERT INTO boards (id, project_id, name) VALUES ($1, $2, $3)", id, project_id, name)
        .execute(&mut *conn)
        .await?;
    for (position, column) in columns.iter().enumerate() {
        board_columns::insert_row(conn, id, column, position as i32).await?;
    }
    let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    let payload = serde_json::json!({"project": project, "name": name, "columns": names, "template": template});
    events::record(conn, "board.created", &format!("board:{id}"), payload).await?;
    let head = find(conn, id, false).await?.ok_or(sqlx::Error::RowNotFound)?;
    let columns = columns_of(conn, &[id]).await?;
    Ok(Board::assemble(head, columns))
}

/// The board with this id, without its columns; with `lock`, its row stays locked until the
/// transaction ends, which serialises every change to the board's columns.
pub async fn find(conn: &mut PgConnection, id: Uuid, lock: bool) -> Result<Option<BoardHead>, sqlx::Error> {
    if lock {
        // Lock first, then read the joined row: `FOR UPDATE` on a join would lock the project too.
        let locked = sqlx::query_scalar!("SELECT id FROM boards WHERE id = $1 FOR UPDATE", id)
            .fetch_optional(&mut *conn)
            .await?;
        if locked.is_none() {
            return Ok(None);
        }
    }
    sqlx::query_as!(
        BoardHead,
        "SELECT b.id, b.project_id, p.slug AS project, b.name, b.version, b.created_at, b.updated_at
         FROM boards b JOIN projects p ON p.id = b.project_id WHERE b.id = $1",
        id
    )
    .fetch_optional(conn)
    .await
}

/// The board with its columns.
/// The names of these boards, by id (those that exist).
pub async fn names(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, String>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(std::collections::HashMap::new());
    }
    let rows = sqlx::query!("SELECT id, name FROM boards WHERE id = ANY($1)", ids).fetch_all(conn).await?;
    Ok(rows.into_iter().map(|r| (r.id, r.name)).collect())
}

pub async fn get(conn: &mut PgConnection, id: Uuid) -> Result<Option<Board>, sqlx::Error> {
    let Some(head) = find(conn, id, false).await? else { return Ok(None) };
    let columns = columns_of(conn, &[id]).await?;
    Ok(Some(Board::assemble(head, columns)))
}

/// One page of a project's boards (with columns), oldest first, `limit + 1` rows.
pub async fn list(
    conn: &mut PgConnection,
    project_id: Uuid,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Board>, sqlx::Error> {
    let heads = sqlx::query_as!(
        BoardHead,
        "SELECT b.id, b.project_id, p.slug AS project, b.name, b.version, b.created_at, b.updated_at
         FROM boards b JOIN projects p ON p.id = b.project_id
         WHERE b.project_id = $1 AND ($2::timestamptz IS NULL OR (b.created_at, b.id) > ($2, $3))
         ORDER BY b.created_at, b.id
         LIMIT $4::bigint + 1",
        project_id,
        after.map(|a| a.0),
        after.map(|a| a.1),
        limit
    )
    .fetch_all(&mut *conn)
    .await?;
    let ids: Vec<Uuid> = heads.iter().map(|h| h.id).collect();
    let mut columns = columns_of(conn, &ids).await?;
    Ok(heads
        .into_iter()
        .map(|head| {
            let (mine, rest) = columns.drain(..).partition(|c| c.board_id == head.id);
            columns = rest;
            Board::assemble(head, mine)
        })
        .collect())
}

/// The columns of these boards, each board's in position order, with their card counts.
pub async fn columns_of(conn: &mut PgConnection, board_ids: &[Uuid]) -> Result<Vec<Column>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT c.id, c.board_id, c.name, c.position, c.gate, c.action_skill, c.wip_limit,
                  (SELECT count(*) FROM tasks t WHERE t.column_id = c.id) AS "task_count!",
                  (SELECT count(*) FROM wishes w WHERE w.column_id = c.id) AS "wish_count!"
           FROM board_columns c WHERE c.board_id = ANY($1) ORDER BY c.board_id, c.position"#,
        board_ids
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Column {
            id: r.id,
            board_id: r.board_id,
            name: r.name,
            position: r.position,
            gate: Gate::from_db(&r.gate),
            action_skill: r.action_skill,
            wip_limit: r.wip_limit,
            task_count: r.task_count,
            wish_count: r.wish_count,
        })
        .collect())
}

/// Marks a change to the board (or its columns) and records its event.
pub async fn changed(
    conn: &mut PgConnection,
    board_id: Uuid,
    event_type: &str,
    payload: serde_json::Value,
) -> Result<i32, sqlx::Error> {
    let version = sqlx::query_scalar!(
        "UPDATE boards SET version = version + 1, updated_at = now() WHERE id = $1 RETURNING version",
        board_id
    )
    .fetch_one(&mut *conn)
    .await?;
    events::record(conn, event_type, &format!("board:{board_id}"), payload).await?;
    Ok(version)
}

#[tracing::instrument(skip_all, fields(board = %board.id), err(level = "debug"))]
pub async fn rename(conn: &mut PgConnection, board: &BoardHead, name: &str) -> Result<(), sqlx::Error> {
    sqlx::query!("UPDATE boards SET name = $2 WHERE id = $1", board.id, name).execute(&mut *conn).await?;
    changed(conn, board.id, "board.updated", serde_json::json!({"from": board.name, "name": name})).await?;
    Ok(())
}

/// Deletes the board and its columns; tasks and wishes on it stay, off any board (the foreign
/// keys set their `board_id` and `column_id` to NULL).
#[tracing::instrument(skip_all, fields(board = %board.id), err(level = "debug"))]
pub async fn delete(conn: &mut PgConnection, board: &BoardHead) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM boards WHERE id = $1", board.id).execute(&mut *conn).await?;
    let payload = serde_json::json!({"project": board.project, "name": board.name});
    events::record(conn, "board.deleted", &format!("board:{}", board.id), payload).await?;
    Ok(())
}

/// A card waiting in a `human` column for a person to move it on.
#[derive(Debug, Clone)]
pub struct WaitingCard {
    pub task_id: Uuid,
    pub title: String,
    pub board_id: Uuid,
    pub column: String,
    pub updated_at: chrono::DateTime<chrono::Utc>,
}

/// Tasks in a `human` column that is not their board's last, oldest change first.
pub async fn waiting_on_a_person(conn: &mut PgConnection, limit: i64) -> Result<Vec<WaitingCard>, sqlx::Error> {
    sqlx::query_as!(
        WaitingCard,
        r#"SELECT t.id AS task_id, t.title, c.board_id, c.name AS column, t.updated_at FROM tasks t
           JOIN board_columns c ON c.id = t.column_id
           WHERE c.gate = 'human' AND t.status NOT IN ('done', 'cancelled')
             AND c.position < (SELECT max(position) FROM board_columns l WHERE l.board_id = c.board_id)
           ORDER BY t.updated_at LIMIT $1"#,
        limit
    )
    .fetch_all(conn)
    .await
}
