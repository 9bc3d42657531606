//! Delivering a message into its agent's pane, exactly once: each step is recorded before it is
//! taken, and where the record stopped decides how a later run goes on (the worker's
//! `Delivery` takes the steps; [`crate::domain::message::next_step`] decides). Each record is
//! conditional on the message still being undelivered, so a step that lost a race changes nothing.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use super::Result;
use crate::db::messages::delivery as record;
use crate::domain::message::Confirmation;

pub use crate::db::messages::delivery::{Due, Pending};

/// The oldest undelivered message of each agent on `node_id` that can take one now (idle, or
/// asking the question the message answers).
pub async fn due_on_node(conn: &mut PgConnection, node_id: &str) -> Result<Vec<Due>> {
    Ok(record::due_on_node(conn, node_id).await?)
}

/// The message and how far its delivery got, while it is undelivered.
pub async fn pending(conn: &mut PgConnection, id: Uuid) -> Result<Option<Pending>> {
    Ok(record::pending(conn, id).await?)
}

/// Whether `agent` started working after `since` (an Enter pressed then started its turn).
pub async fn worked_since(conn: &mut PgConnection, agent: &str, since: DateTime<Utc>) -> Result<bool> {
    Ok(record::worked_since(conn, agent, since).await?)
}

/// How a message no longer pending was confirmed; `None`: it went with its agent, undelivered.
pub async fn confirmed_by(conn: &mut PgConnection, id: Uuid) -> Result<Option<Confirmation>> {
    Ok(crate::db::messages::get(conn, id).await?.and_then(|m| m.confirmed_by))
}

/// About to paste into `pane`, whose input line reads `input_before`; false: delivered meanwhile.
pub async fn attempt(conn: &mut PgConnection, id: Uuid, pane: &str, input_before: &str) -> Result<bool> {
    Ok(record::record_attempt(conn, id, pane, input_before).await?)
}

/// The text is in the pane's input line.
pub async fn pasted(conn: &mut PgConnection, id: Uuid, pane: &str) -> Result<bool> {
    Ok(record::record_pasted(conn, id, pane).await?)
}

/// About to press Enter into a line that shows the text as `input_after`; answers when (`None`:
/// delivered meanwhile).
pub async fn enter(
    conn: &mut PgConnection,
    id: Uuid,
    pane: &str,
    input_after: Option<&str>,
) -> Result<Option<DateTime<Utc>>> {
    Ok(record::record_enter(conn, id, pane, input_after).await?)
}

/// About to press Enter on `pane`'s menu (its `labels`) with `option` highlighted (a new
/// attempt); answers when (`None`: delivered meanwhile).
pub async fn choice(
    conn: &mut PgConnection,
    id: Uuid,
    pane: &str,
    option: u32,
    labels: &[String],
) -> Result<Option<DateTime<Utc>>> {
    let option = i32::try_from(option).map_err(|_| super::Error::invalid("option", "too large"))?;
    Ok(record::record_choice(conn, id, pane, option, &labels.join("\n")).await?)
}

/// About to press Enter again on a choice's menu that stayed as it was; false: delivered meanwhile.
pub async fn choice_enter(conn: &mut PgConnection, id: Uuid, pane: &str) -> Result<bool> {
    Ok(record::record_choice_enter(conn, id, pane).await?)
}

/// A step failed; the message stays pending with why.
pub async fn failed(conn: &mut PgConnection, id: Uuid, why: &str) -> Result<()> {
    Ok(record::record_error(conn, id, why).await?)
}

/// A turn started with the message: it is delivered (`message.delivered`).
pub async fn delivered(conn: &mut PgConnection, id: Uuid, by: Confirmation) -> Result<()> {
    record::mark_delivered(conn, id, by).await?;
    Ok(())
}
