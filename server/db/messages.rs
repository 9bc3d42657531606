//! The mailbox in the database. A message is committed here (with its `message.created` event)
//! before anything else happens; delivery — [`delivery`] — records each step before it is taken
//! and sets `delivered_at` with a `message.delivered` event only once a turn that took the
//! message is confirmed.

pub mod delivery;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::events;
use crate::domain::message::{preview, Confirmation};

/// A message as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "9a1f6c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b", "from": "operator", "to": "clever-fox",
    "body": "Use the existing session middleware.", "state": "delivered", "read": false, "read_at": null,
    "delivered_at": "2025-01-15T10:31:02Z", "confirmed_by": "hook", "attempts": 1, "last_error": null,
    "created_at": "2025-01-15T10:31:00Z"}))]
pub struct Message {
    pub id: Uuid,
    /// `operator` or an agent's name.
    pub from: String,
    /// An agent's name, or `operator`.
    pub to: String,
    pub body: String,
    /// `pending` until delivery is confirmed, then `delivered`.
    pub state: DeliveryState,
    pub read: bool,
    pub read_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    /// How delivery was confirmed.
    pub confirmed_by: Option<Confirmation>,
    /// Delivery attempts started (pastes into a pane).
    pub attempts: i32,
    /// Why the last attempt did not finish, if it did not.
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    Pending,
    Delivered,
}

struct MessageRow {
    id: Uuid,
    sender: String,
    recipient: String,
    body: String,
    read_at: Option<DateTime<Utc>>,
    delivered_at: Option<DateTime<Utc>>,
    confirmed_by: Option<String>,
    attempts: i32,
    last_error: Option<String>,
    created_at: DateTime<Utc>,
}

impl From<MessageRow> for Message {
    fn from(r: MessageRow) -> Message {
        Message {
            id: r.id,
            from: r.sender,
            to: r.recipient,
            body: r.body,
            state: if r.delivered_at.is_some() { DeliveryState::Delivered } else { DeliveryState::Pending },
            read: r.read_at.is_some(),
            read_at: r.read_at,
            delivered_at: r.delivered_at,
            confirmed_by: r.confirmed_by.as_deref().and_then(Confirmation::parse),
            attempts: r.attempts,
            last_error: r.last_error,
            created_at: r.created_at,
        }
    }
}

/// A message to store; the caller has checked both ends and the body.
#[derive(Debug, Clone)]
pub struct NewMessage {
    pub from: String,
    pub to: String,
    /// The recipient agent; `None` for the operator.
    pub recipient_id: Option<Uuid>,
    pub body: String,
    /// The project (slug) the event belongs to: the recipient's, or the sender's.
    pub project: Option<String>,
}

fn subject(id: Uuid) -> String {
    format!("message:{id}")
}

/// Stores a message (`message.created`). One to the operator is delivered by being stored
/// (`message.delivered` at once); one to an agent waits for the worker.
#[tracing::instrument(skip_all, fields(from = %new.from, to = %new.to), err(level = "debug"))]
pub async fn insert(conn: &mut PgConnection, new: &NewMessage) -> Result<Message, sqlx::Error> {
    let id = Uuid::new_v4();
    let to_operator = new.recipient_id.is_none();
    sqlx::query!(
        "INSERT INTO messages (id, sender, recipient, recipient_id, body, delivered_at, confirmed_by)
         VALUES ($1, $2, $3, $4, $5, CASE WHEN $6 THEN now() END, CASE WHEN $6 THEN 'operator' END)",
        id,
        new.from,
        new.to,
        new.recipient_id,
        new.body,
        to_operator,
    )
    .execute(&mut *conn)
    .await?;
    let payload = json!({"id": id, "from": new.from, "to": new.to, "bytes": new.body.len(),
        "preview": preview(&new.body), "project": new.project});
    events::record(conn, "message.created", &subject(id), payload.clone()).await?;
    if to_operator {
        let mut payload = payload;
        payload["confirmed_by"] = json!(Confirmation::Operator);
        events::record(conn, "message.delivered", &subject(id), payload).await?;
    }
    get(conn, id).await?.ok_or(sqlx::Error::RowNotFound)
}

pub async fn get(conn: &mut PgConnection, id: Uuid) -> Result<Option<Message>, sqlx::Error> {
    let row = sqlx::query_as!(
        MessageRow,
        "SELECT id, sender, recipient, body, read_at, delivered_at, confirmed_by, attempts, last_error, created_at
         FROM messages WHERE id = $1",
        id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(Message::from))
}

/// Filters for [`list`]; they combine with AND.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub to: Option<String>,
    pub from: Option<String>,
    pub unread_only: bool,
    /// `Some(true)`: only pending; `Some(false)`: only delivered.
    pub pending: Option<bool>,
    /// Continue after this `(created_at, id)` position.
    pub after: Option<(DateTime<Utc>, Uuid)>,
}

/// Up to `limit` messages after the filter's position, oldest first.
pub async fn list(conn: &mut PgConnection, filter: &ListFilter, limit: i64) -> Result<Vec<Message>, sqlx::Error> {
    let (after_at, after_id) = filter.after.unzip();
    let rows = sqlx::query_as!(
        MessageRow,
        "SELECT id, sender, recipient, body, read_at, delivered_at, confirmed_by, attempts, last_error, created_at
         FROM messages
         WHERE ($1::text IS NULL OR recipient = $1)
           AND ($2::text IS NULL OR sender = $2)
           AND (NOT $3 OR read_at IS NULL)
           AND ($4::bool IS NULL OR (delivered_at IS NULL) = $4)
           AND ($5::timestamptz IS NULL OR (created_at, id) > ($5, $6::uuid))
         ORDER BY created_at, id
         LIMIT $7",
        filter.to,
        filter.from,
        filter.unread_only,
        filter.pending,
        after_at,
        after_id,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(Message::from).collect())
}

/// Up to `limit` messages still pending (`pending`) or already delivered, before the
/// `(created_at, id)` position `before` (from the newest when `None`), newest first: the mailbox
/// page, a page at a time. One range read of `messages_by_state` (no position: before infinity).
pub async fn newest(
    conn: &mut PgConnection,
    pending: bool,
    before: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Message>, sqlx::Error> {
    let (before_at, before_id) = before.unzip();
    let rows = sqlx::query_as!(
        MessageRow,
        "SELECT id, sender, recipient, body, read_at, delivered_at, confirmed_by, attempts, last_error, created_at
         FROM messages
         WHERE (delivered_at IS NULL) = $1
           AND (created_at, id) < (COALESCE($2, 'infinity'::timestamptz), COALESCE($3, uuid '00000000-0000-0000-0000-000000000000'))
         ORDER BY created_at DESC, id DESC
         LIMIT $4",
        pending,
        before_at,
        before_id,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(Message::from).collect())
}

/// Marks a message read (`message.read`, the first time only). `None`: no such message.
#[tracing::instrument(skip_all, fields(message = %id), err(level = "debug"))]
pub async fn mark_read(conn: &mut PgConnection, id: Uuid) -> Result<Option<Message>, sqlx::Error> {
    let marked = sqlx::query!(
        "UPDATE messages SET read_at = now(), updated_at = now() WHERE id = $1 AND read_at IS NULL
         RETURNING sender, recipient",
        id
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(row) = marked {
        let project = recipient_project(conn, id).await?;
        let payload = json!({"id": id, "from": row.sender, "to": row.recipient, "project": project});
        events::record(conn, "message.read", &subject(id), payload).await?;
    }
    get(conn, id).await
}

/// The project (slug) of a message's recipient agent, if it has one.
async fn recipient_project(conn: &mut PgConnection, id: Uuid) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT p.slug FROM messages m JOIN agents a ON a.id = m.recipient_id JOIN projects p ON p.id = a.project_id
         WHERE m.id = $1",
        id
    )
    .fetch_optional(conn)
    .await
}

/// Messages still to be delivered to the agents of `node_id`.
pub async fn count_pending_on_node(conn: &mut PgConnection, node_id: &str) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM messages m JOIN agents a ON a.id = m.recipient_id
           WHERE m.delivered_at IS NULL AND a.node_id = $1"#,
        node_id
    )
    .fetch_one(conn)
    .await
}

/// Whether the agent has messages waiting (a nudge would only get in their way).
pub async fn has_pending(conn: &mut PgConnection, agent_id: Uuid) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM messages WHERE recipient_id = $1 AND delivered_at IS NULL) AS "pending!""#,
        agent_id
    )
    .fetch_one(conn)
    .await
}

/// Whether a message from `sender` whose body starts with `start` waits for the agent (so the
/// same notice is not queued twice).
pub async fn has_pending_like(
    conn: &mut PgConnection,
    agent_id: Uuid,
    sender: &str,
    start: &str,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM messages WHERE recipient_id = $1 AND delivered_at IS NULL
                            AND sender = $2 AND starts_with(body, $3)) AS "pending!""#,
        agent_id,
        sender,
        start
    )
    .fetch_one(conn)
    .await
}

/// Cancels the messages still waiting for an agent that will never read them (it stopped with
/// its pane gone): they are removed, each with a `message.cancelled` event that keeps who sent
/// it and why it went. Answers how many.
pub async fn cancel_pending(conn: &mut PgConnection, agent_id: Uuid, reason: &str) -> Result<usize, sqlx::Error> {
    let gone = sqlx::query!(
        "DELETE FROM messages WHERE recipient_id = $1 AND delivered_at IS NULL
         RETURNING id, sender, recipient, created_at",
        agent_id
    )
    .fetch_all(&mut *conn)
    .await?;
    for m in &gone {
        let payload = serde_json::json!({"id": m.id, "from": m.sender, "to": m.recipient,
            "created_at": m.created_at, "reason": reason});
        events::record(&mut *conn, "message.cancelled", &subject(m.id), payload).await?;
    }
    Ok(gone.len())
}
