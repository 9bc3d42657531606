//! API tokens in the database. The secret itself is never stored, only its hash.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::auth::{generate_token, Scope};
use crate::db::events;

/// A token as listed: everything but the secret.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "7c9e6679-7425-40de-944b-e07fc1f90ae7", "name": "ci", "scope": "write", "created_at": "2026-11-22T09:30:00Z", "last_used_at": "2026-11-22T09:30:00Z", "revoked_at": null}))]
pub struct Token {
    pub id: Uuid,
    pub name: String,
    pub scope: Scope,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Who a request's bearer token belongs to.
#[derive(Debug, Clone)]
pub struct Caller {
    pub token_id: Uuid,
    pub name: String,
    pub scope: Scope,
    pub last_used_at: Option<DateTime<Utc>>,
    /// For an agent token: the agent's name (it may act only as this agent).
    pub agent: Option<String>,
}

struct TokenRow {
    id: Uuid,
    name: String,
    scope: String,
    created_at: DateTime<Utc>,
    last_used_at: Option<DateTime<Utc>>,
    revoked_at: Option<DateTime<Utc>>,
}

impl From<TokenRow> for Token {
    fn from(r: TokenRow) -> Token {
        Token {
            id: r.id,
            name: r.name,
            // The CHECK constraint admits only the three scopes.
            scope: Scope::parse(&r.scope).unwrap_or(Scope::Read),
            created_at: r.created_at,
            last_used_at: r.last_used_at,
            revoked_at: r.revoked_at,
        }
    }
}

/// Creates a token; the returned secret is shown to the user once and never again.
pub async fn create(conn: &mut PgConnection, name: &str, scope: Scope) -> Result<(Token, String), sqlx::Error> {
    let new = generate_token();
    let row = sqlx::query_as!(
        TokenRow,
        "INSERT INTO tokens (id, name, scope, hash) VALUES ($1, $2, $3, $4)
         RETURNING id, name, scope, created_at, last_used_at, revoked_at",
        Uuid::new_v4(),
        name,
        scope.as_str(),
        new.hash
    )
    .fetch_one(&mut *conn)
    .await?;
    events::record(
        conn,
        "token.created",
        &format!("token:{}", row.id),
        serde_json::json!({"name": name, "scope": scope}),
    )
    .await?;
    Ok((row.into(), new.secret))
}

/// What the very first start makes: the admin token's secret and a one-time dashboard login code
/// for it (both shown once, on the terminal).
pub struct FirstAdmin {
    pub secret: String,
    pub login_code: String,
}

/// On the very first start there is no token at all: make one admin token, once, and a login code
/// for the dashboard, in the caller's transaction. Its advisory lock (held to the transaction's
/// end) makes two servers starting together agree on a single bootstrap token.
pub async fn create_first_admin(tx: &mut PgConnection) -> Result<Option<FirstAdmin>, sqlx::Error> {
    sqlx::query!("SELECT pg_advisory_xact_lock(hashtext('switchyard.bootstrap_token'))").execute(&mut *tx).await?;
    let any = sqlx::query_scalar!("SELECT EXISTS (SELECT 1 FROM tokens) AS \"any!\"").fetch_one(&mut *tx).await?;
    if any {
        return Ok(None);
    }
    let (token, secret) = create(&mut *tx, "bootstrap-admin", Scope::Admin).await?;
    let login_code = crate::db::sessions::create_login_code(&mut *tx, token.id).await?;
    Ok(Some(FirstAdmin { secret, login_code }))
}

pub async fn list(conn: &mut PgConnection) -> Result<Vec<Token>, sqlx::Error> {
    let rows = sqlx::query_as!(
        TokenRow,
        "SELECT id, name, scope, created_at, last_used_at, revoked_at FROM tokens ORDER BY created_at, id"
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(Token::from).collect())
}

/// Revokes a live token named by id or name; `None` when there is no such live token.
pub async fn revoke(conn: &mut PgConnection, id_or_name: &str) -> Result<Option<Token>, sqlx::Error> {
    let id = Uuid::parse_str(id_or_name).ok();
    let row = sqlx::query_as!(
        TokenRow,
        "UPDATE tokens SET revoked_at = now(), updated_at = now()
         WHERE revoked_at IS NULL AND (id = $1 OR ($1 IS NULL AND name = $2))
         RETURNING id, name, scope, created_at, last_used_at, revoked_at",
        id,
        id_or_name
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    events::record(conn, "token.revoked", &format!("token:{}", row.id), serde_json::json!({"name": row.name})).await?;
    Ok(Some(row.into()))
}

/// The live token with this hash (`auth::hash_token` of the secret), if any.
pub async fn find_caller(pool: &PgPool, hash: &str) -> Result<Option<Caller>, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT t.id, t.name, t.scope, t.last_used_at, a.name AS "agent?"
           FROM tokens t LEFT JOIN agents a ON a.id = t.agent_id
           WHERE t.hash = $1 AND t.revoked_at IS NULL"#,
        hash
    )
    .fetch_optional(pool)
    .await?;
    Ok(row.and_then(|r| {
        Some(Caller {
            token_id: r.id,
            name: r.name,
            scope: Scope::parse(&r.scope)?,
            last_used_at: r.last_used_at,
            agent: r.agent,
        })
    }))
}

/// Issues the agent's token (scope `agent`), revoking any it had, and returns the secret. Only the
/// worker calls this, when it spawns or resumes the agent, and hands the secret to the agent's
/// environment: it is stored nowhere (only its hash) and must never be logged.
#[tracing::instrument(skip_all, fields(agent = %agent_id), err(level = "debug"))]
pub async fn issue_agent_token(conn: &mut PgConnection, agent_id: Uuid) -> Result<String, sqlx::Error> {
    let name =
        sqlx::query_scalar!("SELECT name FROM agents WHERE id = $1 FOR UPDATE", agent_id).fetch_one(&mut *conn).await?;
    let revoked = revoke_agent_tokens(conn, agent_id).await?;
    let new = generate_token();
    let token_name = format!("agent:{name}");
    let id = sqlx::query_scalar!(
        "INSERT INTO tokens (id, name, scope, hash, agent_id) VALUES ($1, $2, 'agent', $3, $4) RETURNING id",
        Uuid::new_v4(),
        token_name,
        new.hash,
        agent_id
    )
    .fetch_one(&mut *conn)
    .await?;
    let payload = serde_json::json!({"name": token_name, "scope": Scope::Agent, "agent_id": agent_id,
        "revoked": revoked});
    events::record(conn, "token.created", &format!("token:{id}"), payload).await?;
    Ok(new.secret)
}

/// Revokes every live token of the agent; returns their ids.
async fn revoke_agent_tokens(conn: &mut PgConnection, agent_id: Uuid) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "UPDATE tokens SET revoked_at = now(), updated_at = now()
         WHERE agent_id = $1 AND revoked_at IS NULL RETURNING id",
        agent_id
    )
    .fetch_all(&mut *conn)
    .await
}

/// Revokes the token of an agent that stopped for good (`done`, or `error`: killed, or its pane
/// died), with a `token.revoked` event each, in the caller's transaction: a finished agent's
/// token must not outlive it. A resume gets a new one when the agent is spawned again.
pub async fn revoke_for_stopped_agent(
    conn: &mut PgConnection,
    agent_id: Uuid,
    agent_name: &str,
    state: &str,
) -> Result<(), sqlx::Error> {
    for id in revoke_agent_tokens(conn, agent_id).await? {
        let payload = serde_json::json!({"name": format!("agent:{agent_name}"), "agent_id": agent_id,
            "reason": format!("the agent is {state}")});
        events::record(conn, "token.revoked", &format!("token:{id}"), payload).await?;
    }
    Ok(())
}

/// Records use at most once a minute per token, so reads do not each cost a write; true when it
/// wrote.
pub async fn touch(pool: &PgPool, caller: &Caller) -> Result<bool, sqlx::Error> {
    let stale = caller.last_used_at.is_none_or(|t| Utc::now() - t > chrono::Duration::seconds(60));
    if stale {
        sqlx::query!("UPDATE tokens SET last_used_at = now() WHERE id = $1", caller.token_id).execute(pool).await?;
    }
    Ok(stale)
}
