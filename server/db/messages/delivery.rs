//! Delivery's record: which messages are due, each step written before it is taken (the attempt
//! in a pane with its input line, the finished paste, the Enter about to be pressed), and the
//! confirmation that sets `delivered_at` with its `message.delivered` event. Every write is
//! conditional on the message still being undelivered, so a late writer changes nothing.

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{get, recipient_project, subject, Message};
use crate::db::events;
use crate::domain::message::{prompt_matches, typed, Confirmation};

/// The oldest undelivered message of an idle agent of this node, or the answer to the question
/// an agent is asking on its screen.
#[derive(Debug, Clone)]
pub struct Due {
    pub message_id: Uuid,
    pub agent_id: Uuid,
    pub agent: String,
    pub pane: String,
    /// The agent asks a question on its screen and this message is a person's answer to it (the
    /// prompt of the agent's task run): it is typed into the dialog, as the agent page's answer
    /// buttons do, rather than waiting for the agent to be idle.
    pub answer: bool,
}

/// For each agent of `node_id` with a pane and mail due: its oldest message. Mail is due to an
/// idle agent; to an agent asking a question on its screen, only the answer to it is.
pub async fn due_on_node(conn: &mut PgConnection, node_id: &str) -> Result<Vec<Due>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT DISTINCT ON (m.recipient_id) m.id, a.id AS agent_id, a.name, a.tmux_pane AS "pane!",
                  a.state = 'question' AS "answer!"
           FROM messages m JOIN agents a ON a.id = m.recipient_id
           WHERE m.delivered_at IS NULL AND a.node_id = $1 AND a.tmux_pane IS NOT NULL
             AND (a.state = 'idle'
                  OR (a.state = 'question'
                      AND EXISTS (SELECT 1 FROM task_runs r WHERE r.prompt_id = m.id AND r.agent_id = a.id)))
           ORDER BY m.recipient_id, m.seq"#,
        node_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Due { message_id: r.id, agent_id: r.agent_id, agent: r.name, pane: r.pane, answer: r.answer })
        .collect())
}

/// An undelivered message and how far its delivery got.
#[derive(Debug, Clone)]
pub struct Pending {
    pub id: Uuid,
    /// Who sent it: what is typed names them first ([`crate::domain::message::typed`]).
    pub sender: String,
    pub body: String,
    pub attempt_pane: Option<String>,
    pub input_before: Option<String>,
    /// The input line as it showed the paste, recorded with the Enter.
    pub input_after: Option<String>,
    pub pasted_at: Option<DateTime<Utc>>,
    pub submitted_at: Option<DateTime<Utc>>,
    pub enter_presses: i32,
    /// The menu option this attempt answers by key presses ([`record_choice`]), not a paste.
    pub chosen_option: Option<i32>,
}

/// The message if it is still undelivered.
pub async fn pending(conn: &mut PgConnection, id: Uuid) -> Result<Option<Pending>, sqlx::Error> {
    sqlx::query_as!(
        Pending,
        "SELECT id, sender, body, attempt_pane, input_before, input_after, pasted_at, submitted_at, enter_presses,
                chosen_option
         FROM messages WHERE id = $1 AND delivered_at IS NULL",
        id
    )
    .fetch_optional(conn)
    .await
}

/// Records a new attempt in `pane`, before the paste, with the pane's input line as it is.
pub async fn record_attempt(
    conn: &mut PgConnection,
    id: Uuid,
    pane: &str,
    input_before: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE messages SET attempts = attempts + 1, attempt_pane = $2, input_before = $3, input_after = NULL,
             pasted_at = NULL, chosen_option = NULL,
             submitted_at = NULL, enter_presses = 0, last_error = NULL, updated_at = now()
         WHERE id = $1 AND delivered_at IS NULL",
        id,
        pane,
        input_before
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The paste into `pane` finished.
pub async fn record_pasted(conn: &mut PgConnection, id: Uuid, pane: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE messages SET pasted_at = now(), updated_at = now()
         WHERE id = $1 AND attempt_pane = $2 AND delivered_at IS NULL",
        id,
        pane
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Enter is about to be pressed in `pane`, whose input line shows the text as `input_after`
/// (kept from an earlier press when not given); returns when, as recorded.
pub async fn record_enter(
    conn: &mut PgConnection,
    id: Uuid,
    pane: &str,
    input_after: Option<&str>,
) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"UPDATE messages SET submitted_at = clock_timestamp(), enter_presses = enter_presses + 1,
               pasted_at = COALESCE(pasted_at, clock_timestamp()), input_after = COALESCE($3, input_after),
               updated_at = now()
           WHERE id = $1 AND attempt_pane = $2 AND delivered_at IS NULL
           RETURNING submitted_at AS "submitted_at!""#,
        id,
        pane,
        input_after
    )
    .fetch_optional(conn)
    .await
}

/// An answer is about to be chosen in `pane`'s menu: its `option` highlighted there, Enter about
/// to be pressed, the menu's labels (one a line) kept as `input_after` (what the screen showed).
/// A new attempt in one write (the arrow keys before it chose nothing, so they need no record);
/// answers when, as recorded (`None`: delivered meanwhile).
pub async fn record_choice(
    conn: &mut PgConnection,
    id: Uuid,
    pane: &str,
    option: i32,
    menu: &str,
) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"UPDATE messages SET attempts = attempts + 1, attempt_pane = $2, chosen_option = $3,
               input_before = NULL, input_after = $4, pasted_at = NULL,
               submitted_at = clock_timestamp(), enter_presses = 1, last_error = NULL, updated_at = now()
           WHERE id = $1 AND delivered_at IS NULL
           RETURNING submitted_at AS "submitted_at!""#,
        id,
        pane,
        option,
        menu
    )
    .fetch_optional(conn)
    .await
}

/// Enter is about to be pressed again on the menu of a choice in `pane` (it stayed as it was).
pub async fn record_choice_enter(conn: &mut PgConnection, id: Uuid, pane: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE messages SET submitted_at = clock_timestamp(), enter_presses = enter_presses + 1, updated_at = now()
         WHERE id = $1 AND attempt_pane = $2 AND chosen_option IS NOT NULL AND delivered_at IS NULL",
        id,
        pane
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Why the last attempt stopped (shown on the message; delivery tries again later).
pub async fn record_error(conn: &mut PgConnection, id: Uuid, error: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE messages SET last_error = $2, updated_at = now() WHERE id = $1 AND delivered_at IS NULL",
        id,
        error
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Sets `delivered_at` with a `message.delivered` event (`on_message_sent`); `None` when the
/// message was already delivered (or does not exist), so a confirmation counts once.
#[tracing::instrument(skip_all, fields(message = %id, by = confirmation.as_str()), err(level = "debug"))]
pub async fn mark_delivered(
    conn: &mut PgConnection,
    id: Uuid,
    confirmation: Confirmation,
) -> Result<Option<Message>, sqlx::Error> {
    let row = sqlx::query!(
        "UPDATE messages SET delivered_at = now(), confirmed_by = $2, last_error = NULL, updated_at = now()
         WHERE id = $1 AND delivered_at IS NULL
         RETURNING sender, recipient, attempts, length(body) AS bytes",
        id,
        confirmation.as_str()
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let project = recipient_project(conn, id).await?;
    let payload = json!({"id": id, "from": row.sender, "to": row.recipient, "confirmed_by": confirmation,
        "attempts": row.attempts, "project": project});
    events::record(conn, "message.delivered", &subject(id), payload).await?;
    get(conn, id).await
}

/// A `UserPromptSubmit` hook from the agent carried `prompt`: if its message in delivery (pasted
/// into a pane, not yet confirmed) has that text, it is delivered, in the hook's transaction.
pub async fn confirm_by_prompt(
    conn: &mut PgConnection,
    agent_id: Uuid,
    prompt: &str,
) -> Result<Option<Message>, sqlx::Error> {
    let in_delivery = sqlx::query!(
        "SELECT id, sender, body FROM messages
         WHERE recipient_id = $1 AND delivered_at IS NULL AND attempt_pane IS NOT NULL
         ORDER BY seq LIMIT 1 FOR UPDATE",
        agent_id
    )
    .fetch_optional(&mut *conn)
    .await?;
    match in_delivery {
        Some(m) if prompt_matches(&typed(&m.sender, &m.body), prompt) => {
            mark_delivered(conn, m.id, Confirmation::Hook).await
        }
        _ => Ok(None),
    }
}

/// Whether the agent went `working` after `since` (a state change recorded after Enter).
pub async fn worked_since(conn: &mut PgConnection, agent: &str, since: DateTime<Utc>) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM events WHERE subject = $1 AND type = 'agent.state_changed'
               AND payload->>'to' = 'working' AND created_at > $2) AS "worked!""#,
        crate::db::agents::subject(agent),
        since
    )
    .fetch_one(conn)
    .await
}
