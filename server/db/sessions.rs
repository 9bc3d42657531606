//! Dashboard sessions and one-time login codes. A session is opened from an admin token (pasted
//! into the login form) or from a login code (the link `serve` prints at first start); it acts
//! with that token's authority, so revoking the token ends the session. Only hashes of the
//! cookie and of the code are stored.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::auth::{generate_secret, hash_token};
use crate::db::events;

/// How long a session lives without being used; every use (at most once a minute) extends it.
pub const SESSION_DAYS: i64 = 14;
/// How long a login link stays valid.
pub const LOGIN_CODE_HOURS: i64 = 24;

/// The session behind a request's cookie.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: Uuid,
    /// What every state-changing request must echo (header `X-CSRF-Token` or form field `_csrf`).
    pub csrf: String,
    /// The name of the token the session was opened with: who is logged in.
    pub token_name: String,
    pub last_seen_at: DateTime<Utc>,
}

/// A session just opened: the cookie's secret is shown to the browser once and never stored.
pub struct Opened {
    pub secret: String,
    pub session: Session,
}

/// Opens a session carrying `token_id`'s authority (the caller checked it is a live admin token).
#[tracing::instrument(skip_all, fields(token = %token_id), err(level = "debug"))]
pub async fn open(conn: &mut PgConnection, token_id: Uuid, how: &str) -> Result<Opened, sqlx::Error> {
    let cookie = generate_secret("sys_");
    let csrf = generate_secret("").secret;
    let row = sqlx::query!(
        r#"INSERT INTO dashboard_sessions (id, hash, token_id, csrf, expires_at)
           VALUES ($1, $2, $3, $4, now() + make_interval(days => $5::int))
           RETURNING id, last_seen_at, (SELECT name FROM tokens WHERE id = $3) AS "token_name!""#,
        Uuid::new_v4(),
        cookie.hash,
        token_id,
        csrf,
        SESSION_DAYS as i32
    )
    .fetch_one(&mut *conn)
    .await?;
    let payload = serde_json::json!({"token": row.token_name, "via": how});
    events::record(conn, "dashboard.login", &format!("session:{}", row.id), payload).await?;
    let session = Session { id: row.id, csrf, token_name: row.token_name, last_seen_at: row.last_seen_at };
    Ok(Opened { secret: cookie.secret, session })
}

/// The live session behind a cookie secret: not ended, not expired, its token live and admin.
pub async fn find(pool: &PgPool, secret: &str) -> Result<Option<Session>, sqlx::Error> {
    sqlx::query_as!(
        Session,
        "SELECT s.id, s.csrf, t.name AS token_name, s.last_seen_at
         FROM dashboard_sessions s JOIN tokens t ON t.id = s.token_id
         WHERE s.hash = $1 AND s.ended_at IS NULL AND s.expires_at > now()
           AND t.revoked_at IS NULL AND t.scope = 'admin'",
        hash_token(secret)
    )
    .fetch_optional(pool)
    .await
}

/// Records use and slides the expiry, at most once a minute per session; whether it did.
pub async fn touch(pool: &PgPool, session: &Session) -> Result<bool, sqlx::Error> {
    if Utc::now() - session.last_seen_at <= chrono::Duration::seconds(60) {
        return Ok(false);
    }
    sqlx::query!(
        "UPDATE dashboard_sessions SET last_seen_at = now(), updated_at = now(),
                 expires_at = now() + make_interval(days => $2::int)
             WHERE id = $1",
        session.id,
        SESSION_DAYS as i32
    )
    .execute(pool)
    .await?;
    Ok(true)
}

/// Ends a session (logout); its cookie stops working at once.
#[tracing::instrument(skip_all, fields(session = %id), err(level = "debug"))]
pub async fn end(conn: &mut PgConnection, id: Uuid) -> Result<bool, sqlx::Error> {
    let ended = sqlx::query_scalar!(
        "UPDATE dashboard_sessions SET ended_at = now(), updated_at = now()
         WHERE id = $1 AND ended_at IS NULL RETURNING id",
        id
    )
    .fetch_optional(&mut *conn)
    .await?;
    if ended.is_some() {
        events::record(conn, "dashboard.logout", &format!("session:{id}"), serde_json::json!({})).await?;
    }
    Ok(ended.is_some())
}

/// Makes a one-time login code for `token_id`, valid for [`LOGIN_CODE_HOURS`]; returns the code.
pub async fn create_login_code(conn: &mut PgConnection, token_id: Uuid) -> Result<String, sqlx::Error> {
    let code = generate_secret("syl_");
    sqlx::query!(
        "INSERT INTO dashboard_login_codes (hash, token_id, expires_at)
         VALUES ($1, $2, now() + make_interval(hours => $3::int))",
        code.hash,
        token_id,
        LOGIN_CODE_HOURS as i32
    )
    .execute(conn)
    .await?;
    Ok(code.secret)
}

/// Uses up a login code: the token it carries, if the code was unused, unexpired and its token is
/// still a live admin token. A second use of the same code finds nothing.
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn redeem_login_code(conn: &mut PgConnection, code: &str) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "UPDATE dashboard_login_codes c SET used_at = now(), updated_at = now()
         FROM tokens t
         WHERE c.hash = $1 AND c.used_at IS NULL AND c.expires_at > now()
           AND t.id = c.token_id AND t.revoked_at IS NULL AND t.scope = 'admin'
         RETURNING c.token_id",
        hash_token(code)
    )
    .fetch_optional(conn)
    .await
}

/// The live token with this secret, with its scope: what the login form checks.
pub async fn token_for_login(conn: &mut PgConnection, secret: &str) -> Result<Option<(Uuid, String)>, sqlx::Error> {
    let row = sqlx::query!("SELECT id, scope FROM tokens WHERE hash = $1 AND revoked_at IS NULL", hash_token(secret))
        .fetch_optional(conn)
        .await?;
    Ok(row.map(|r| (r.id, r.scope)))
}
