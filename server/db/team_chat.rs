//! A team's chat: posts in order, each with a `chat.posted` event (what the live dashboard and
//! webhooks follow).

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::{events, teams};

/// The largest chat post accepted (the SQL `CHECK`).
pub const BODY_LIMIT: usize = 65_536;

/// One post as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "7d3c2b1a-0f9e-4d8c-b7a6-5f4e3d2c1b0a", "team": "login-team", "from": "clever-fox",
    "body": "The session middleware is done; quiet-owl, the login form can use it.", "created_at": "2025-01-15T10:45:00Z"}))]
pub struct ChatPost {
    pub id: Uuid,
    pub team: String,
    /// `operator` or an agent's name.
    pub from: String,
    pub body: String,
    pub created_at: DateTime<Utc>,
}

/// Appends a post to the team's chat, with its `chat.posted` event (carrying the post).
#[tracing::instrument(skip_all, fields(team = %team.name, from = %from), err(level = "debug"))]
pub async fn post(
    conn: &mut PgConnection,
    team: &teams::Team,
    from: &str,
    body: &str,
) -> Result<ChatPost, sqlx::Error> {
    let id = Uuid::new_v4();
    let created_at = sqlx::query_scalar!(
        "INSERT INTO team_chat (id, team_id, sender, body) VALUES ($1, $2, $3, $4) RETURNING created_at",
        id,
        team.id,
        from,
        body
    )
    .fetch_one(&mut *conn)
    .await?;
    let post = ChatPost { id, team: team.name.clone(), from: from.to_owned(), body: body.to_owned(), created_at };
    let payload = json!({"id": id, "team": team.name, "from": from, "body": body, "project": team.project});
    events::record(conn, "chat.posted", &teams::subject(&team.name), payload).await?;
    Ok(post)
}

/// A post as stored.
struct PostRow {
    id: Uuid,
    sender: String,
    body: String,
    created_at: DateTime<Utc>,
}

impl PostRow {
    fn in_team(self, team: &teams::Team) -> ChatPost {
        ChatPost {
            id: self.id,
            team: team.name.clone(),
            from: self.sender,
            body: self.body,
            created_at: self.created_at,
        }
    }
}

/// Up to `limit` posts of the team after `after`, oldest first.
pub async fn list(
    conn: &mut PgConnection,
    team: &teams::Team,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<ChatPost>, sqlx::Error> {
    let (after_at, after_id) = after.unzip();
    let rows = sqlx::query_as!(
        PostRow,
        "SELECT id, sender, body, created_at FROM team_chat
         WHERE team_id = $1 AND ($2::timestamptz IS NULL OR (created_at, id) > ($2, $3::uuid))
         ORDER BY created_at, id LIMIT $4",
        team.id,
        after_at,
        after_id,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.in_team(team)).collect())
}

/// Up to `limit` of the team's posts before the `(created_at, id)` position `before` (from the
/// newest when `None`), newest first: the dashboard's chat, a page at a time. One row comparison
/// (no position: before infinity) keeps it an index range read of `team_chat_order`.
pub async fn newest(
    conn: &mut PgConnection,
    team: &teams::Team,
    before: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<ChatPost>, sqlx::Error> {
    let (before_at, before_id) = before.unzip();
    let rows = sqlx::query_as!(
        PostRow,
        "SELECT id, sender, body, created_at FROM team_chat
         WHERE team_id = $1
           AND (created_at, id) < (COALESCE($2, 'infinity'::timestamptz), COALESCE($3, uuid '00000000-0000-0000-0000-000000000000'))
         ORDER BY created_at DESC, id DESC LIMIT $4",
        team.id,
        before_at,
        before_id,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| r.in_team(team)).collect())
}
