//! API tokens and the dashboard sessions opened with them: create a token, revoke one, log in
//! with a token or a one-time login code, log out. The steps that take a `&mut PgConnection` are
//! also what the command line's `switchyard token` runs (it has no [`Ctx`]).

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{Ctx, Error, Result};
use crate::auth::Scope;
use crate::db::sessions::{self, Opened};
use crate::db::tokens::{self, Token};

// A token just created, with its secret (shown only this once). Not a doc comment: the schema's
// description in `openapi/openapi.json` stays as it was.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"token": {"id": "7c9e6679-7425-40de-944b-e07fc1f90ae7", "name": "ci", "scope": "write", "created_at": "2026-11-22T09:30:00Z", "last_used_at": null, "revoked_at": null}, "secret": "sy_3q2Vx…"}))]
pub struct CreatedToken {
    #[serde(flatten)]
    pub token: Token,
    /// The secret: shown only in this response, never again.
    pub secret: String,
}

/// Creates a token named `name` (trimmed) in the caller's transaction. Agent tokens are not made
/// here: the worker issues them to the agents it spawns.
pub async fn create(conn: &mut PgConnection, name: &str, scope: Scope) -> Result<CreatedToken> {
    let name = name.trim();
    if name.is_empty() || name.len() > 100 {
        return Err(Error::invalid("name", "must be 1 to 100 characters"));
    }
    if scope == Scope::Agent {
        return Err(Error::invalid("scope", "agent tokens are issued by the worker to the agents it spawns"));
    }
    let (token, secret) = tokens::create(conn, name, scope).await?;
    Ok(CreatedToken { token, secret })
}

/// Creates a token in its own transaction.
#[tracing::instrument(skip_all, fields(name = ?name), err(level = "debug"))]
pub async fn create_now(ctx: &Ctx, name: &str, scope: Scope) -> Result<CreatedToken> {
    let mut tx = ctx.db.begin().await?;
    let created = create(&mut tx, name, scope).await?;
    ctx.feed.commit(tx).await?;
    Ok(created)
}

/// Revokes the live token with this id or name, in the caller's transaction; the sessions opened
/// with it end with it.
pub async fn revoke(conn: &mut PgConnection, id_or_name: &str) -> Result<Token> {
    tokens::revoke(conn, id_or_name).await?.ok_or_else(|| Error::NotFound(format!("no live token `{id_or_name}`")))
}

/// Revokes a token in its own transaction.
#[tracing::instrument(skip_all, fields(token = ?id_or_name), err(level = "debug"))]
pub async fn revoke_now(ctx: &Ctx, id_or_name: &str) -> Result<Token> {
    let mut tx = ctx.db.begin().await?;
    let revoked = revoke(&mut tx, id_or_name).await?;
    ctx.feed.commit(tx).await?;
    Ok(revoked)
}

/// Opens a dashboard session with a one-time login code, which is used up by it; `None` when the
/// code was used already, has expired, or its token is no longer a live admin token.
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn log_in_with_code(ctx: &Ctx, code: &str) -> Result<Option<Opened>> {
    let mut tx = ctx.db.begin().await?;
    let Some(token_id) = sessions::redeem_login_code(&mut tx, code.trim()).await? else { return Ok(None) };
    let opened = sessions::open(&mut tx, token_id, "login link").await?;
    ctx.feed.commit(tx).await?;
    Ok(Some(opened))
}

/// What logging in with a token came to.
pub enum TokenLogin {
    Opened(Opened),
    /// No live token has this secret.
    Unknown,
    /// A live token, but not an admin one: its scope.
    NotAdmin(String),
}

/// Opens a dashboard session with an admin token's secret (it works as long as the token lives).
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn log_in_with_token(ctx: &Ctx, secret: &str) -> Result<TokenLogin> {
    let mut tx = ctx.db.begin().await?;
    let Some((token_id, scope)) = sessions::token_for_login(&mut tx, secret.trim()).await? else {
        return Ok(TokenLogin::Unknown);
    };
    if scope != "admin" {
        return Ok(TokenLogin::NotAdmin(scope));
    }
    let opened = sessions::open(&mut tx, token_id, "token").await?;
    ctx.feed.commit(tx).await?;
    Ok(TokenLogin::Opened(opened))
}

/// Ends a dashboard session.
#[tracing::instrument(skip_all, fields(session = ?id), err(level = "debug"))]
pub async fn log_out(ctx: &Ctx, id: Uuid) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    sessions::end(&mut tx, id).await?;
    ctx.feed.commit(tx).await?;
    Ok(())
}

/// The first start's admin token and one-time login link, made once (`None`: tokens exist).
pub async fn create_first_admin(
    db: &sqlx::PgPool,
    feed: &crate::feed::EventFeed,
) -> Result<Option<tokens::FirstAdmin>> {
    let mut tx = db.begin().await?;
    let first = tokens::create_first_admin(&mut tx).await?;
    feed.commit(tx).await?;
    Ok(first)
}

/// A token was used: its `last_used_at` moves (at most once a minute); true when it moved.
pub async fn token_used(ctx: &Ctx, caller: &tokens::Caller) -> Result<bool> {
    Ok(tokens::touch(&ctx.db, caller).await?)
}

/// A dashboard session was used: it lasts longer (at most one write a minute); true when it did.
pub async fn session_used(ctx: &Ctx, session: &sessions::Session) -> Result<bool> {
    Ok(sessions::touch(&ctx.db, session).await?)
}
