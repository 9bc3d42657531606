//! Idempotent creation: a creating request may carry a key; the same key with the same request
//! answers the first response again instead of creating a duplicate, with another request it is
//! refused. The key is recorded by the use case in the transaction that creates the thing
//! ([`record`]), so a crash between creating and recording cannot happen: both commit or
//! neither does.

use serde::Serialize;
use sqlx::PgConnection;

use super::{Ctx, Error, Result};
use crate::db::idempotency::{self as db, Stored};

/// The field idempotency errors name: the header a client sets.
pub const FIELD: &str = "Idempotency-Key";

/// A creating request's key: who asked, under which key, on which route, and a hash of what
/// they sent.
#[derive(Debug, Clone)]
pub struct Idempotency {
    /// The token's id: keys are per caller, so two clients' keys never collide.
    pub caller: String,
    pub key: String,
    pub route: String,
    pub request_hash: Vec<u8>,
}

/// The first response to a request, to answer again.
#[derive(Debug, Clone)]
pub struct Replay {
    pub status: u16,
    pub response: serde_json::Value,
}

/// The stored first response under this key, if any: `Some` when the same request was made
/// before (answer it again), an invalid `Idempotency-Key` when the key was used for another
/// request, `None` when the key is new (go on and create, recording it).
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn replay(ctx: &Ctx, idem: Option<&Idempotency>) -> Result<Option<Replay>> {
    let Some(idem) = idem else { return Ok(None) };
    let mut conn = ctx.db.acquire().await?;
    let Some(stored) = db::find(&mut conn, &idem.caller, &idem.key).await? else {
        return Ok(None);
    };
    same_request(idem, &stored)?;
    Ok(Some(Replay { status: u16::try_from(stored.status).unwrap_or(200), response: stored.response }))
}

fn same_request(idem: &Idempotency, stored: &Stored) -> Result<()> {
    if stored.route != idem.route || stored.request_hash != idem.request_hash {
        return Err(Error::invalid(
            FIELD,
            format!("this key was used for another request (to {}) in the last 24 hours; use a new key", stored.route),
        ));
    }
    Ok(())
}

/// Records `response` (a `201 Created`) under the key, inside the creating transaction; call it
/// just before the commit. Does nothing without a key. A concurrent request with the same key
/// that committed first makes this one a conflict (and its transaction rolls back).
pub async fn record<T: Serialize>(conn: &mut PgConnection, idem: Option<&Idempotency>, response: &T) -> Result<()> {
    record_with(conn, idem, 201, response).await
}

/// [`record`] for a request that answers `200 OK` (an agent's report changes what exists).
pub async fn record_ok<T: Serialize>(conn: &mut PgConnection, idem: Option<&Idempotency>, response: &T) -> Result<()> {
    record_with(conn, idem, 200, response).await
}

async fn record_with<T: Serialize>(
    conn: &mut PgConnection,
    idem: Option<&Idempotency>,
    status: i16,
    response: &T,
) -> Result<()> {
    let Some(idem) = idem else { return Ok(()) };
    let response = serde_json::to_value(response).map_err(Error::internal)?;
    db::record(conn, &idem.caller, &idem.key, &idem.route, &idem.request_hash, status, &response).await.map_err(|e| {
        match &e {
            sqlx::Error::Database(db) if db.is_unique_violation() => Error::conflict(
                "a request with this Idempotency-Key was made at the same time; retry to get its response",
                None,
            ),
            _ => Error::from(e),
        }
    })
}
