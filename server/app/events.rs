//! Reading the event log from a cursor, as the event list, the live stream and the dashboard's
//! notices all do.

use sqlx::PgConnection;

use super::{Error, Result};
use crate::db::events;

/// A reader's cursor: none, or `0` (before the first event: ids start at 1), reads from the
/// beginning; any other id must be an event's, else a refusal naming `field`.
pub async fn cursor(conn: &mut PgConnection, after: Option<i64>, field: &str) -> Result<Option<i64>> {
    match after {
        None | Some(0) => Ok(None),
        Some(id) if events::exists(conn, id).await? => Ok(Some(id)),
        Some(id) => Err(Error::invalid(
            field,
            format!("no event {id}: pass an id this API returned, or 0 to start from the beginning"),
        )),
    }
}
