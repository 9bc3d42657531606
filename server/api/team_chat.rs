//! `POST/GET /api/v1/teams/{name}/chat`: a team's group chat. Each post is a `chat.posted` event
//! too, so the live event stream and webhooks see it. An agent's token posts and reads only in
//! its own team's chat, as itself; other tokens post as `operator`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::auth::Authenticated;
use crate::api::json::ApiJson;
use crate::api::messages::speaker;
use crate::api::teams::not_found;
use crate::app::messages;
use crate::db::team_chat::{self, ChatPost};
use crate::db::teams::{self, Team};
use crate::db::tokens::Caller;
use crate::http::error::{ApiError, ApiResult, Problem};
use crate::http::pagination::{page, Page, PageQuery, Position};
use crate::http::query::ApiQuery;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(post_chat, read_chat))
}

/// The team, if the caller may read it and use its chat: any token but an agent's, which must
/// be a member.
pub(crate) async fn team_for(state: &AppState, caller: &Caller, name: &str) -> ApiResult<Team> {
    let mut conn = state.db.acquire().await?;
    let team = teams::get(&mut conn, name).await?.ok_or_else(|| not_found(name))?;
    match caller.agent.as_deref() {
        Some(own) if !team.members.iter().any(|m| m == own) => {
            Err(ApiError::Forbidden(format!("agent `{own}` is not a member of team `{name}`")))
        }
        _ => Ok(team),
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"body": "The session middleware is done; quiet-owl, the login form can use it."}))]
pub struct PostChat {
    /// `operator` or the posting agent (only with its own token); default: the caller.
    pub from: Option<String>,
    /// 1 byte to 64 KiB.
    pub body: String,
}

/// Posts to the team's chat.
#[utoipa::path(post, path = "/teams/{name}/chat", tag = "teams", params(("name" = String, Path)),
    request_body = PostChat,
    responses((status = 201, body = ChatPost), (status = 403, body = Problem, description = "Not a member"),
        (status = 404, body = Problem), (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, fields(team = ?name), err(level = "debug"))]
pub async fn post_chat(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
    ApiJson(body): ApiJson<PostChat>,
) -> ApiResult<(StatusCode, Json<ChatPost>)> {
    let from = speaker(&caller, body.from.as_deref())?;
    let team = team_for(&state, &caller, &name).await?;
    let post = messages::post_to_team(&state, &team, &from, &body.body).await?;
    Ok((StatusCode::CREATED, Json(post)))
}

/// The team's chat history, oldest first, a page at a time (`next_cursor` continues it). New
/// posts also arrive live as `chat.posted` events (`/events/stream?types=chat.posted`).
#[utoipa::path(get, path = "/teams/{name}/chat", tag = "teams", params(("name" = String, Path), PageQuery),
    responses((status = 200, body = Page<ChatPost>), (status = 403, body = Problem, description = "Not a member"),
        (status = 404, body = Problem), (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, fields(team = ?name), err(level = "debug"))]
pub async fn read_chat(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    Path(name): Path<String>,
    ApiQuery(paging): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<ChatPost>>> {
    let (limit, position) = paging.parse()?;
    let team = team_for(&state, &caller, &name).await?;
    let mut conn = state.db.acquire().await?;
    let rows = team_chat::list(&mut conn, &team, position.map(|p| (p.created_at, p.id)), limit + 1).await?;
    Ok(Json(page(rows, limit, |p| Position { created_at: p.created_at, id: p.id })))
}
