//! Wishes in the database: rows, creating, reading and listing them, and their blockers. Their
//! execution groups are [`groups`], their lifecycle [`lifecycle`], card moves [`moves`].

mod groups;
mod lifecycle;
mod listing;
mod moves;

pub use groups::{
    delete_groups, dependency_results, for_group, group, group_done, group_task, groups, insert_groups, Group, NewGroup,
};
pub use lifecycle::{apply, lock, record_review, snapshot, waiting_on, Outcome};
pub use listing::{in_states, on_board, progress};
pub use moves::move_to_column;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::events;
use crate::domain::wish::{WishPhase, WishStatus};

/// A wish as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Wish {
    pub id: Uuid,
    #[schema(example = "login-page")]
    pub slug: String,
    pub project_id: Uuid,
    #[schema(example = "Add a login page")]
    pub title: String,
    pub description: String,
    #[schema(value_type = String, example = "executing")]
    pub status: WishStatus,
    /// While held, no transition happens until the wish is released.
    pub held: bool,
    pub held_at: Option<DateTime<Utc>>,
    pub branch: Option<String>,
    /// Reviews recorded so far.
    pub review_iteration: i32,
    /// After this many failed reviews the wish fails.
    pub review_cap: i32,
    pub failure_reason: Option<String>,
    pub board_id: Option<Uuid>,
    pub column_id: Option<Uuid>,
    pub queued_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub merged_at: Option<DateTime<Utc>>,
    /// Groups not done yet; the wish completes when this reaches 0 while it executes.
    #[schema(example = 2)]
    pub groups_open: i32,
    /// While executing: its groups run, its branch is under review, or a fix agent works on it.
    #[schema(value_type = String, example = "groups")]
    pub phase: WishPhase,
    /// `human` when the conductor handed the wish to a person (the reason is `failure_reason`).
    pub assignee: Option<String>,
    /// The provider of the wish's agents unless a group names its own.
    pub provider: Option<String>,
    /// The latest failed review's notes.
    pub review_notes: Option<String>,
    pub version: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A row as read; it also reads from `to_jsonb(wishes)` inside another row.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct WishRow {
    id: Uuid,
    slug: String,
    project_id: Uuid,
    title: String,
    description: String,
    status: String,
    held: bool,
    held_at: Option<DateTime<Utc>>,
    branch: Option<String>,
    review_iteration: i32,
    review_cap: i32,
    failure_reason: Option<String>,
    board_id: Option<Uuid>,
    column_id: Option<Uuid>,
    queued_at: Option<DateTime<Utc>>,
    started_at: Option<DateTime<Utc>>,
    completed_at: Option<DateTime<Utc>>,
    merged_at: Option<DateTime<Utc>>,
    groups_open: i32,
    phase: String,
    assignee: Option<String>,
    provider: Option<String>,
    review_notes: Option<String>,
    version: i32,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<WishRow> for Wish {
    type Error = sqlx::Error;

    fn try_from(r: WishRow) -> Result<Wish, sqlx::Error> {
        Ok(Wish {
            status: r.status.parse().map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
            phase: r.phase.parse().map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
            assignee: r.assignee,
            provider: r.provider,
            review_notes: r.review_notes,
            id: r.id,
            slug: r.slug,
            project_id: r.project_id,
            title: r.title,
            description: r.description,
            held: r.held,
            held_at: r.held_at,
            branch: r.branch,
            review_iteration: r.review_iteration,
            review_cap: r.review_cap,
            failure_reason: r.failure_reason,
            board_id: r.board_id,
            column_id: r.column_id,
            queued_at: r.queued_at,
            started_at: r.started_at,
            completed_at: r.completed_at,
            merged_at: r.merged_at,
            groups_open: r.groups_open,
            version: r.version,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

pub struct NewWish {
    pub slug: String,
    pub project_id: Uuid,
    pub title: String,
    pub description: String,
    pub branch: Option<String>,
    pub review_cap: Option<i32>,
    pub blocked_by: Vec<Uuid>,
}

pub async fn insert(conn: &mut PgConnection, new: &NewWish) -> Result<Wish, sqlx::Error> {
    let row = sqlx::query_as!(
        WishRow,
        "INSERT INTO wishes (id, slug, project_id, title, description, branch, review_cap)
         VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7, 3))
         RETURNING *",
        Uuid::new_v4(),
        new.slug,
        new.project_id,
        new.title,
        new.description,
        new.branch,
        new.review_cap
    )
    .fetch_one(&mut *conn)
    .await?;
    for blocker in &new.blocked_by {
        sqlx::query!("INSERT INTO wish_blockers (wish_id, blocked_by) VALUES ($1, $2)", row.id, blocker)
            .execute(&mut *conn)
            .await?;
    }
    let wish = Wish::try_from(row)?;
    events::record(conn, "wish.created", &subject(&wish), serde_json::json!({"slug": wish.slug, "status": "draft"}))
        .await?;
    Ok(wish)
}

pub async fn get(conn: &mut PgConnection, slug: &str) -> Result<Option<Wish>, sqlx::Error> {
    let row = sqlx::query_as!(WishRow, "SELECT * FROM wishes WHERE slug = $1", slug).fetch_optional(conn).await?;
    row.map(Wish::try_from).transpose()
}

/// The wishes with these ids (any order; missing ones left out).
pub async fn by_ids(conn: &mut PgConnection, ids: &[Uuid]) -> Result<Vec<Wish>, sqlx::Error> {
    let rows = sqlx::query_as!(WishRow, "SELECT * FROM wishes WHERE id = ANY($1)", ids).fetch_all(conn).await?;
    rows.into_iter().map(Wish::try_from).collect()
}

/// The newest wish working on `branch`, by slug.
pub async fn slug_on_branch(conn: &mut PgConnection, branch: &str) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!("SELECT slug FROM wishes WHERE branch = $1 ORDER BY created_at DESC LIMIT 1", branch)
        .fetch_optional(conn)
        .await
}

pub async fn ids_by_slug(conn: &mut PgConnection, slugs: &[String]) -> Result<Vec<(String, Uuid)>, sqlx::Error> {
    let rows = sqlx::query!("SELECT slug, id FROM wishes WHERE slug = ANY($1)", slugs).fetch_all(conn).await?;
    Ok(rows.into_iter().map(|r| (r.slug, r.id)).collect())
}

/// A page of wishes in (created_at, id) order, optionally of one project and status.
pub async fn list(
    conn: &mut PgConnection,
    project_id: Option<Uuid>,
    status: Option<WishStatus>,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Wish>, sqlx::Error> {
    let (after_at, after_id) = after.unzip();
    let rows = sqlx::query_as!(
        WishRow,
        "SELECT * FROM wishes
         WHERE ($1::uuid IS NULL OR project_id = $1)
           AND ($2::text IS NULL OR status = $2)
           AND ($3::timestamptz IS NULL OR (created_at, id) > ($3, $4))
         ORDER BY created_at, id
         LIMIT $5",
        project_id,
        status.map(|s| s.as_str()),
        after_at,
        after_id,
        limit
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(Wish::try_from).collect()
}

/// The slugs this wish waits for, with whether each has merged.
pub async fn blockers(conn: &mut PgConnection, wish_id: Uuid) -> Result<Vec<Blocker>, sqlx::Error> {
    sqlx::query_as!(
        Blocker,
        r#"SELECT w.slug, w.status = 'merged' AS "merged!" FROM wish_blockers b JOIN wishes w ON w.id = b.blocked_by
           WHERE b.wish_id = $1 ORDER BY w.slug"#,
        wish_id
    )
    .fetch_all(conn)
    .await
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"slug": "auth-schema", "merged": false}))]
pub struct Blocker {
    pub slug: String,
    pub merged: bool,
}

pub fn subject(wish: &Wish) -> String {
    format!("wish:{}", wish.slug)
}
