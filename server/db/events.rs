//! The event log. Every state change writes its event here, in the caller's transaction, so
//! the change and its record commit (or vanish) together — and with it the webhook outbox rows
//! for the subscriptions that want it. Triggers fill `project` (from `payload.project` or the
//! subject) and queue those outbox rows, whichever statement inserts the events. The
//! transaction commits through `EventFeed::commit`, which wakes live streams on every replica
//! (see `crate::feed`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;

#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Event {
    /// Cursor position: pass it back as `after` to continue.
    #[schema(example = 42)]
    pub id: i64,
    #[serde(rename = "type")]
    #[schema(example = "task.completed")]
    pub event_type: String,
    /// What the event is about, e.g. `task:3f2a…` or `wish:login-page`.
    pub subject: String,
    /// The project (slug) the event is about, when it is about one.
    #[schema(example = "switchyard")]
    pub project: Option<String>,
    pub payload: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

/// An event to append: its type, subject and payload.
pub struct NewEvent<'a> {
    pub event_type: &'a str,
    pub subject: String,
    pub payload: serde_json::Value,
}

/// Appends an event in the caller's transaction, with a pending webhook delivery for each
/// enabled subscription that wants it (queued by the database: migration 0012), and returns its
/// id.
pub async fn record(
    conn: &mut PgConnection,
    event_type: &str,
    subject: &str,
    payload: serde_json::Value,
) -> Result<i64, sqlx::Error> {
    let ids = record_all(conn, vec![NewEvent { event_type, subject: subject.to_owned(), payload }]).await?;
    ids.first().copied().ok_or(sqlx::Error::RowNotFound)
}

/// Appends events in the given order (ids ascending), as [`record`] does each, in one round
/// trip however many there are: a completion and the dependents it released cost one statement.
/// The statement's trigger `events_queue_deliveries` queues the webhook outbox rows.
pub async fn record_all(conn: &mut PgConnection, events: Vec<NewEvent<'_>>) -> Result<Vec<i64>, sqlx::Error> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let types: Vec<&str> = events.iter().map(|e| e.event_type).collect();
    let subjects: Vec<&str> = events.iter().map(|e| e.subject.as_str()).collect();
    let payloads: Vec<serde_json::Value> = events.iter().map(|e| e.payload.clone()).collect();
    // Rows are inserted in input order, so ids ascend with it.
    let mut ids = sqlx::query_scalar!(
        r#"INSERT INTO events (type, subject, payload)
           SELECT n.type, n.subject, n.payload
           FROM UNNEST($1::text[], $2::text[], $3::jsonb[]) WITH ORDINALITY AS n(type, subject, payload, i)
           ORDER BY n.i
           RETURNING id"#,
        &types as &[&str],
        &subjects as &[&str],
        &payloads
    )
    .fetch_all(&mut *conn)
    .await?;
    if ids.len() != types.len() {
        return Err(sqlx::Error::RowNotFound);
    }
    // The sequence numbers rows in insertion order, whatever order RETURNING lists them in.
    ids.sort_unstable();
    Ok(ids)
}

/// Which events a reader wants; every field that is `None` lets every event through.
#[derive(Debug, Default)]
pub struct Only<'a> {
    /// A filter's entries, matched by `webhook_wants` as subscriptions are.
    pub types: Option<&'a [String]>,
    /// A project's slug.
    pub project: Option<&'a str>,
    /// What the events are about, e.g. `task:<id>` or `agent:<name>`.
    pub subject: Option<&'a str>,
}

/// Events after the cursor, in log order, up to the oldest transaction still running: an event
/// whose transaction commits later can never fall behind a cursor already handed out. (The
/// horizon is the cluster's: a long writing transaction in another database delays, never loses.)
/// Only those `only` wants are returned; a cursor past the last of them skips nothing it wants.
pub async fn after(
    conn: &mut PgConnection,
    after: Option<i64>,
    limit: i64,
    only: &Only<'_>,
) -> Result<Vec<Event>, sqlx::Error> {
    sqlx::query_as!(
        Event,
        r#"SELECT e.id, e.type AS event_type, e.subject, e.project, e.payload, e.created_at
           FROM events e
           WHERE e.tx < pg_snapshot_xmin(pg_current_snapshot())
             AND ($1::bigint IS NULL OR (e.tx, e.id) > (SELECT c.tx, c.id FROM events c WHERE c.id = $1))
             AND ($3::text[] IS NULL OR webhook_wants($3, e.type, e.payload))
             AND ($4::text IS NULL OR e.project = $4)
             AND ($5::text IS NULL OR e.subject = $5)
           ORDER BY e.tx, e.id
           LIMIT $2"#,
        after,
        limit,
        only.types,
        only.project,
        only.subject
    )
    .fetch_all(conn)
    .await
}

/// Where an event stands in the log's reading order, `(tx, id)`: the order `after` follows, in
/// which an event committed late still comes after every cursor already handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position {
    /// The writing transaction's id (`xid8`, which never wraps around).
    pub tx: i64,
    pub id: i64,
}

/// Every event after `after` (from the beginning when `None`) in reading order, with its
/// position, up to the oldest transaction still running (the horizon of [`after`]): what the
/// live streams follow, filtered by each reader itself.
pub async fn after_position(
    conn: &mut PgConnection,
    after: Option<Position>,
    limit: i64,
) -> Result<Vec<(Position, Event)>, sqlx::Error> {
    // "From the beginning" is after position (0, 0), not a condition that may be left out: a
    // cached plan for an optional condition cannot use the index on (tx, id), and read the whole
    // log up to the cursor on every call (9 ms a read with 10,000 events, 50 streams reading).
    let after = after.unwrap_or(Position { tx: 0, id: 0 });
    let rows = sqlx::query!(
        r#"SELECT e.tx::text::bigint AS "tx!", e.id, e.type AS event_type, e.subject, e.project, e.payload,
                  e.created_at
           FROM events e
           WHERE e.tx < pg_snapshot_xmin(pg_current_snapshot())
             AND (e.tx, e.id) > ($1::bigint::text::xid8, $2::bigint)
           ORDER BY e.tx, e.id
           LIMIT $3"#,
        after.tx,
        after.id,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let event = Event {
                id: r.id,
                event_type: r.event_type,
                subject: r.subject,
                project: r.project,
                payload: r.payload,
                created_at: r.created_at,
            };
            (Position { tx: r.tx, id: r.id }, event)
        })
        .collect())
}

/// The position of event `id`, if there is one.
pub async fn position(conn: &mut PgConnection, id: i64) -> Result<Option<Position>, sqlx::Error> {
    let tx = sqlx::query_scalar!(r#"SELECT tx::text::bigint AS "tx!" FROM events WHERE id = $1"#, id)
        .fetch_optional(conn)
        .await?;
    Ok(tx.map(|tx| Position { tx, id }))
}

/// The position of [`head`]: the last event a reader could have read now.
pub async fn head_position(conn: &mut PgConnection) -> Result<Option<Position>, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT tx::text::bigint AS "tx!", id FROM events WHERE tx < pg_snapshot_xmin(pg_current_snapshot())
           ORDER BY tx DESC, id DESC LIMIT 1"#
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(|r| Position { tx: r.tx, id: r.id }))
}

pub async fn exists(conn: &mut PgConnection, id: i64) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!("SELECT EXISTS (SELECT 1 FROM events WHERE id = $1) AS \"exists!\"", id).fetch_one(conn).await
}

/// Whether `slug` names a project: one that exists, or one that did and whose events are kept.
pub async fn project_known(conn: &mut PgConnection, slug: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM projects WHERE slug = $1)
                  OR EXISTS (SELECT 1 FROM events WHERE project = $1) AS "known!""#,
        slug
    )
    .fetch_one(conn)
    .await
}

/// The `(window, pane, window_name)` of every `agent.orphan_found` event about `subject` (a
/// node): what its worker already reported.
pub async fn orphans_reported(
    conn: &mut PgConnection,
    subject: &str,
) -> Result<Vec<(String, String, String)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT payload->>'window' AS "window!", payload->>'pane' AS "pane!", payload->>'window_name' AS "name!"
           FROM events WHERE type = 'agent.orphan_found' AND subject = $1
             AND payload ? 'window' AND payload ? 'pane' AND payload ? 'window_name'"#,
        subject
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.window, r.pane, r.name)).collect())
}

/// The last event a follower could have read now (the newest below the horizon): where a page
/// rendered now starts following, so nothing between the render and the live stream is missed.
pub async fn head(conn: &mut PgConnection) -> Result<Option<i64>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT id FROM events WHERE tx < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY tx DESC, id DESC LIMIT 1"
    )
    .fetch_optional(conn)
    .await
}

/// Where the log stands for a page that may reuse parts read earlier, in one statement (one
/// snapshot): its head (as [`head`]); its horizon (every transaction before it had ended, so a
/// read started now reflects them all); by event type, the newest transaction from `from_tx` on
/// that recorded one, as far as it is visible now; and the `newest` latest events (as
/// [`newest`]).
pub async fn changes_since(conn: &mut PgConnection, from_tx: i64, newest: i64) -> Result<Changes, sqlx::Error> {
    // (A column's name, with its type, is cut at 63 bytes: hence the short names.)
    use sqlx::types::Json;
    type Types = std::collections::HashMap<String, i64>;
    let row = sqlx::query!(
        r#"SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS "horizon!",
                  (SELECT id FROM events WHERE tx < pg_snapshot_xmin(pg_current_snapshot())
                   ORDER BY tx DESC, id DESC LIMIT 1) AS head,
                  (SELECT coalesce(jsonb_object_agg(type, tx), '{}')
                   FROM (SELECT type, max(tx)::text::bigint AS tx FROM events
                         WHERE tx >= $1::bigint::text::xid8 GROUP BY type) t) AS "types!: Json<Types>",
                  (SELECT coalesce(json_agg(e ORDER BY e.id DESC), '[]')
                   FROM (SELECT id, type, subject, project, payload, created_at FROM events
                         ORDER BY id DESC LIMIT $2) e) AS "newest!: Json<Vec<Event>>""#,
        from_tx,
        newest
    )
    .fetch_one(conn)
    .await?;
    Ok(Changes { from_tx, horizon: row.horizon, head: row.head, types: row.types.0, newest: row.newest.0 })
}

/// What [`changes_since`] found.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    /// Where the types were looked for from: nothing is known of transactions before it.
    pub from_tx: i64,
    pub horizon: i64,
    pub head: Option<i64>,
    /// By event type, the newest transaction that recorded one.
    pub types: std::collections::HashMap<String, i64>,
    /// The latest events, newest first.
    pub newest: Vec<Event>,
}

/// The newest events first, before event `before` when given, optionally only those whose type
/// starts with `type_prefix` or of one project: the dashboard's feed.
pub async fn newest(
    conn: &mut PgConnection,
    before: Option<i64>,
    type_prefix: Option<&str>,
    project: Option<&str>,
    limit: i64,
) -> Result<Vec<Event>, sqlx::Error> {
    sqlx::query_as!(
        Event,
        r#"SELECT e.id, e.type AS event_type, e.subject, e.project, e.payload, e.created_at
           FROM events e
           WHERE ($1::bigint IS NULL OR e.id < $1)
             AND ($2::text IS NULL OR starts_with(e.type, $2))
             AND ($3::text IS NULL OR e.project = $3)
           ORDER BY e.id DESC
           LIMIT $4"#,
        before,
        type_prefix,
        project,
        limit
    )
    .fetch_all(conn)
    .await
}

/// The events about one subject of one type, oldest first (a wish's reviews, say).
pub async fn about(
    conn: &mut PgConnection,
    subject: &str,
    event_type: &str,
    limit: i64,
) -> Result<Vec<Event>, sqlx::Error> {
    sqlx::query_as!(
        Event,
        r#"SELECT e.id, e.type AS event_type, e.subject, e.project, e.payload, e.created_at
           FROM events e WHERE e.subject = $1 AND e.type = $2
           ORDER BY e.id LIMIT $3"#,
        subject,
        event_type,
        limit
    )
    .fetch_all(conn)
    .await
}

/// The newest events about one subject, newest first: a task's or an agent's own history.
pub async fn history(conn: &mut PgConnection, subject: &str, limit: i64) -> Result<Vec<Event>, sqlx::Error> {
    sqlx::query_as!(
        Event,
        r#"SELECT e.id, e.type AS event_type, e.subject, e.project, e.payload, e.created_at
           FROM events e WHERE e.subject = $1
           ORDER BY e.id DESC LIMIT $2"#,
        subject,
        limit
    )
    .fetch_all(conn)
    .await
}

/// The newest event of one type about one subject (an agent's last state change).
pub async fn latest(conn: &mut PgConnection, subject: &str, event_type: &str) -> Result<Option<Event>, sqlx::Error> {
    sqlx::query_as!(
        Event,
        r#"SELECT e.id, e.type AS event_type, e.subject, e.project, e.payload, e.created_at
           FROM events e WHERE e.subject = $1 AND e.type = $2
           ORDER BY e.id DESC LIMIT 1"#,
        subject,
        event_type
    )
    .fetch_optional(conn)
    .await
}
