//! `/api/v1/tokens`: create, list and revoke API tokens (admin scope).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::auth::Authenticated;
use crate::api::json::ApiJson;
use crate::app::tokens as tokens_app;
pub use crate::app::tokens::CreatedToken;
use crate::auth::Scope;
use crate::db::tokens::{self, Token};
use crate::http::error::{ApiResult, Problem};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_token, list_tokens)).routes(routes!(revoke_token)).routes(routes!(me))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    #[schema(example = "ci", min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: String,
    #[schema(value_type = IssuableScope)]
    pub scope: Scope,
}

/// The scopes a token can be created with (`agent` tokens are issued by the worker to the agents
/// it spawns, never here).
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)] // documents `CreateToken::scope`
pub enum IssuableScope {
    Read,
    Write,
    Admin,
}

/// Creates a token and returns its secret, once.
#[utoipa::path(post, path = "/tokens", tag = "tokens", request_body = CreateToken,
    responses((status = 201, body = CreatedToken), (status = 403, body = Problem),
        (status = 409, body = Problem, description = "A live token has this name"), (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, fields(name = ?body.name), err(level = "debug"))]
pub async fn create_token(
    State(state): State<AppState>,
    caller: Authenticated,
    ApiJson(body): ApiJson<CreateToken>,
) -> ApiResult<(StatusCode, Json<CreatedToken>)> {
    caller.require(Scope::Admin)?;
    Ok((StatusCode::CREATED, Json(tokens_app::create_now(&state, &body.name, body.scope).await?)))
}

/// Lists every token, live and revoked, oldest first. Secrets are never shown.
#[utoipa::path(get, path = "/tokens", tag = "tokens",
    responses((status = 200, body = Vec<Token>), (status = 403, body = Problem)))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list_tokens(State(state): State<AppState>, caller: Authenticated) -> ApiResult<Json<Vec<Token>>> {
    caller.require(Scope::Admin)?;
    let mut conn = state.db.acquire().await?;
    Ok(Json(tokens::list(&mut conn).await?))
}

/// Revokes a token by id or name; it stops working at once.
#[utoipa::path(delete, path = "/tokens/{token}", tag = "tokens",
    params(("token" = String, Path, description = "token id or name")),
    responses((status = 200, body = Token), (status = 404, body = Problem)))]
#[tracing::instrument(skip_all, fields(token = ?token), err(level = "debug"))]
pub async fn revoke_token(
    State(state): State<AppState>,
    caller: Authenticated,
    Path(token): Path<String>,
) -> ApiResult<Json<Token>> {
    caller.require(Scope::Admin)?;
    let revoked = tokens_app::revoke_now(&state, &token).await?;
    // Not one more request with it here; other replicas drop it within a second.
    state.tokens.clear();
    state.sessions.clear();
    Ok(Json(revoked))
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"token_id": "7c9e6679-7425-40de-944b-e07fc1f90ae7", "name": "ci", "scope": "write"}))]
pub struct Me {
    pub token_id: uuid::Uuid,
    pub name: String,
    pub scope: Scope,
}

/// The token this request was made with: its name and scope.
#[utoipa::path(get, path = "/me", tag = "tokens", responses((status = 200, body = Me), (status = 401, body = Problem)))]
pub async fn me(caller: Authenticated) -> Json<Me> {
    Json(Me { token_id: caller.0.token_id, name: caller.0.name, scope: caller.0.scope })
}
