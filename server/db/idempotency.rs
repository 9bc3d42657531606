//! Idempotency keys: the first response to a creating request, stored under the caller's key in
//! the transaction that created the thing. Keys older than [`KEY_HOURS`] are ignored and deleted.

use sqlx::PgConnection;

/// How long a key is honoured.
pub const KEY_HOURS: i32 = 24;

/// How many expired keys one `record` deletes at most, so expiry never makes a request slow.
const EXPIRE_BATCH: i64 = 100;

/// A stored first response.
#[derive(Debug, Clone)]
pub struct Stored {
    pub route: String,
    pub request_hash: Vec<u8>,
    pub status: i16,
    pub response: serde_json::Value,
}

/// The live (younger than [`KEY_HOURS`]) response stored under `caller`'s `key`.
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn find(conn: &mut PgConnection, caller: &str, key: &str) -> Result<Option<Stored>, sqlx::Error> {
    sqlx::query_as!(
        Stored,
        r#"SELECT route, request_hash, status, response
           FROM idempotency_keys
           WHERE caller = $1 AND key = $2 AND created_at >= now() - make_interval(hours => $3)"#,
        caller,
        key,
        KEY_HOURS,
    )
    .fetch_optional(conn)
    .await
}

/// Records the response under `caller`'s `key`, first deleting a batch of expired keys (and this
/// key's own expired row). A second request that raced this one fails on the primary key, so at
/// most one of them commits.
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn record(
    conn: &mut PgConnection,
    caller: &str,
    key: &str,
    route: &str,
    request_hash: &[u8],
    status: i16,
    response: &serde_json::Value,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        r#"DELETE FROM idempotency_keys
           WHERE (caller, key) IN (
               SELECT caller, key FROM idempotency_keys
               WHERE created_at < now() - make_interval(hours => $1)
               ORDER BY created_at LIMIT $2)
              OR (caller = $3 AND key = $4 AND created_at < now() - make_interval(hours => $1))"#,
        KEY_HOURS,
        EXPIRE_BATCH,
        caller,
        key,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        r#"INSERT INTO idempotency_keys (caller, key, route, request_hash, status, response)
           VALUES ($1, $2, $3, $4, $5, $6)"#,
        caller,
        key,
        route,
        request_hash,
        status,
        response,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}
