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

/// A step failed; the message stays pending with why.
pub async fn failed(conn: &mut PgConnection, id: Uuid, why: &str) -> Result<()> {
    Ok(record::record_error(conn, id, why).await?)
}

/// A turn started with the message: it is delivered (`message.delivered`).
pub async fn delivered(conn: &mut PgConnection, id: Uuid, by: Confirmation) -> Result<()> {
    record::mark_delivered(conn, id, by).await?;
    Ok(())
}
