//! Bearer-token authentication for `/api/v1`: who is calling, and may they do this?

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, Method};
use axum::middleware::Next;
use axum::response::Response;

use crate::auth::Scope;
use crate::db::tokens::{self, Caller};
use crate::http::error::ApiError;
use crate::http::AppState;

/// Checks the bearer token, its rate limit, and that its scope allows the method: reads need `read`, anything
/// else `write`; an agent token only its own agent's routes (`auth::agent_may`). Handlers that
/// need `admin` ask for it with `Authenticated::require`.
pub async fn require_token(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let secret = bearer(&request).ok_or(ApiError::Unauthorized("send Authorization: Bearer <token>"))?;
    let hash = crate::auth::hash_token(secret);
    let caller = match state.tokens.get(&hash) {
        Some(caller) => caller,
        None => {
            let verified_at = std::time::Instant::now();
            let caller = tokens::find_caller(&state.db, &hash)
                .await?
                .ok_or(ApiError::Unauthorized("the token is unknown or revoked"))?;
            // An agent's token is replaced on every respawn: it must stop working at once, and
            // hooks are too rare to need the cache.
            if caller.scope != Scope::Agent {
                state.tokens.put(hash.clone(), caller.clone(), verified_at);
            }
            caller
        }
    };
    state.rate_limits.check_token(caller.token_id)?;
    let needed = if matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        Scope::Read
    } else {
        Scope::Write
    };
    if caller.scope == Scope::Agent {
        let own = caller.agent.as_deref().unwrap_or("");
        if !crate::auth::agent_may(own, request.method(), request.uri().path()) {
            return Err(ApiError::Forbidden(format!(
                "this is agent `{own}`'s token: it may only read itself, post its hooks, report on its work, send its branch, use its mailbox and its team's chat"
            )));
        }
    } else if !caller.scope.allows(needed) {
        return Err(ApiError::Forbidden(format!(
            "this token has scope `{}`; this request needs `{}`",
            caller.scope.as_str(),
            needed.as_str()
        )));
    }
    match crate::app::tokens::token_used(&state, &caller).await {
        Ok(true) if caller.scope != Scope::Agent => {
            let used = Caller { last_used_at: Some(chrono::Utc::now()), ..caller.clone() };
            state.tokens.put(hash, used, std::time::Instant::now());
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "recording token use"),
    }
    request.extensions_mut().insert(caller);
    Ok(next.run(request).await)
}

fn bearer(request: &Request) -> Option<&str> {
    let value = request.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|t| !t.is_empty())
}

/// The caller of an authenticated route.
pub struct Authenticated(pub Caller);

impl Authenticated {
    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        if self.0.scope.allows(scope) {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!("this needs a token with scope `{}`", scope.as_str())))
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .map(Authenticated)
            .ok_or(ApiError::Unauthorized("send Authorization: Bearer <token>"))
    }
}
