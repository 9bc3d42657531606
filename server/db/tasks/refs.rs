//! Lookups of what a task refers to: its project, its dependencies and its wish.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use uuid::Uuid;

use super::row::status;
use crate::domain::task::TaskStatus;

/// Those of `ids` that are not tasks of `project_id`, in the order given.
pub async fn missing_in_project(
    conn: &mut PgConnection,
    project_id: Uuid,
    ids: &[Uuid],
) -> Result<Vec<Uuid>, sqlx::Error> {
    let found = sqlx::query_scalar!("SELECT id FROM tasks WHERE project_id = $1 AND id = ANY($2)", project_id, ids)
        .fetch_all(conn)
        .await?;
    Ok(ids.iter().filter(|id| !found.contains(id)).copied().collect())
}

/// The slug of a wish, to point callers at the wish's own routes.
pub async fn wish_slug(conn: &mut PgConnection, wish_id: Uuid) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!("SELECT slug FROM wishes WHERE id = $1", wish_id).fetch_optional(conn).await
}

/// A dependency as shown to explain why a task is blocked.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "7c9e6679-7425-40de-944b-e07fc1f90ae7", "title": "Schema", "group_key": null, "status": "failed"}))]
pub struct DependencyRef {
    pub id: Uuid,
    pub title: String,
    pub group_key: Option<String>,
    pub status: TaskStatus,
}

/// The task's direct dependencies, oldest first.
pub async fn dependencies(conn: &mut PgConnection, id: Uuid) -> Result<Vec<DependencyRef>, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT t.id, t.title, t.group_key, t.status
         FROM task_dependencies d JOIN tasks t ON t.id = d.depends_on
         WHERE d.task_id = $1 ORDER BY t.created_at, t.id",
        id
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter()
        .map(|r| Ok(DependencyRef { id: r.id, title: r.title, group_key: r.group_key, status: status(&r.status)? }))
        .collect()
}

/// The titles of these tasks, by id (those that exist): names for the events about them.
pub async fn titles(conn: &mut PgConnection, ids: &[Uuid]) -> Result<HashMap<Uuid, String>, sqlx::Error> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = sqlx::query!("SELECT id, title FROM tasks WHERE id = ANY($1)", ids).fetch_all(conn).await?;
    Ok(rows.into_iter().map(|r| (r.id, r.title)).collect())
}
