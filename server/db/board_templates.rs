//! Board templates in the database: named, reusable column lists (jsonb), copied into a board
//! when it is created from one. A board does not follow later changes to its template.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::types::Json;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::events;
use crate::domain::board::ColumnSpec;

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "7d4c2b1a-0e9f-4a8b-8c7d-6e5f4a3b2c1d", "name": "review-heavy",
    "description": "Two review stages before done",
    "columns": [{"name": "Todo", "gate": "auto", "action_skill": null, "wip_limit": null},
                {"name": "Code review", "gate": "agent", "action_skill": "review-pr", "wip_limit": 3},
                {"name": "Done", "gate": "auto", "action_skill": null, "wip_limit": null}],
    "created_at": "2025-01-15T10:30:00Z", "updated_at": "2025-01-15T10:30:00Z"}))]
pub struct BoardTemplate {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub columns: Vec<ColumnSpec>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

struct TemplateRow {
    id: Uuid,
    name: String,
    description: String,
    columns: Json<Vec<ColumnSpec>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<TemplateRow> for BoardTemplate {
    fn from(r: TemplateRow) -> BoardTemplate {
        BoardTemplate {
            id: r.id,
            name: r.name,
            description: r.description,
            columns: r.columns.0,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

#[tracing::instrument(skip_all, fields(name = %name), err(level = "debug"))]
pub async fn create(
    conn: &mut PgConnection,
    name: &str,
    description: &str,
    columns: &[ColumnSpec],
) -> Result<BoardTemplate, sqlx::Error> {
    let row = sqlx::query_as!(
        TemplateRow,
        r#"INSERT INTO board_templates (id, name, description, columns) VALUES ($1, $2, $3, $4)
           RETURNING id, name, description, columns AS "columns: Json<Vec<ColumnSpec>>", created_at, updated_at"#,
        Uuid::new_v4(),
        name,
        description,
        Json(columns) as _
    )
    .fetch_one(&mut *conn)
    .await?;
    let payload = serde_json::json!({"name": name, "columns": columns.len()});
    events::record(conn, "board_template.created", &format!("board_template:{name}"), payload).await?;
    Ok(row.into())
}

pub async fn find_by_name(conn: &mut PgConnection, name: &str) -> Result<Option<BoardTemplate>, sqlx::Error> {
    let row = sqlx::query_as!(
        TemplateRow,
        r#"SELECT id, name, description, columns AS "columns: Json<Vec<ColumnSpec>>", created_at, updated_at
           FROM board_templates WHERE name = $1"#,
        name
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(BoardTemplate::from))
}

/// One page of templates, oldest first, `limit + 1` rows.
pub async fn list(
    conn: &mut PgConnection,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<BoardTemplate>, sqlx::Error> {
    let rows = sqlx::query_as!(
        TemplateRow,
        r#"SELECT id, name, description, columns AS "columns: Json<Vec<ColumnSpec>>", created_at, updated_at
           FROM board_templates
           WHERE $1::timestamptz IS NULL OR (created_at, id) > ($1, $2)
           ORDER BY created_at, id
           LIMIT $3::bigint + 1"#,
        after.map(|a| a.0),
        after.map(|a| a.1),
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(BoardTemplate::from).collect())
}
