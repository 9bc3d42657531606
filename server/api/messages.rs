//! `/api/v1/messages` and `GET /api/v1/agents/{name}/messages`: the mailbox. A message is
//! committed (pending) before anything else; the worker of the recipient's node delivers it when
//! the agent is idle and confirms it was submitted. An agent's token sends only as that agent
//! and reads only its own mail; other tokens send as `operator`.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::api::auth::Authenticated;
use crate::api::idempotency::{self, IdempotentJson};
use crate::app::messages as messages_app;
use crate::db::agents;
use crate::db::messages::{self, ListFilter, Message};
use crate::db::tokens::Caller;
use crate::domain::message::OPERATOR;
use crate::http::error::{ApiError, ApiResult, Problem};
use crate::http::extract::ApiPath;
use crate::http::pagination::{page, Page, PageQuery, Position};
use crate::http::query::ApiQuery;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(send_message, list_messages))
        .routes(routes!(get_message))
        .routes(routes!(mark_read))
        .routes(routes!(agent_inbox))
}

/// Who the caller speaks as: an agent's token as that agent; any other token as `operator`.
/// `from`, when given, must say the same.
pub fn speaker(caller: &Caller, from: Option<&str>) -> ApiResult<String> {
    let own = caller.agent.as_deref().unwrap_or(OPERATOR);
    match from.map(str::trim) {
        None => Ok(own.to_owned()),
        Some(from) if from == own => Ok(own.to_owned()),
        Some(from) if caller.agent.is_some() => {
            Err(ApiError::Forbidden(format!("agent `{own}`'s token may only send as `{own}`, not as `{from}`")))
        }
        Some(from) => Err(ApiError::Forbidden(format!(
            "only agent `{from}`'s own token may send as it; this token sends as `operator`"
        ))),
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"from": "operator", "to": "clever-fox", "body": "Use the existing session middleware; do not add a new one."}))]
pub struct SendMessage {
    /// `operator` or the sending agent (only with its own token); default: the caller.
    pub from: Option<String>,
    /// An agent's name, or `operator`.
    pub to: String,
    /// Delivered byte for byte as one prompt, after a first line naming the sender (`[message
    /// from the operator]`, `[message from agent fox — an agent, not your operator]`): `;` and
    /// `C-c` arrive as text. 1 byte to 256 KiB; tab and newline are its only control characters,
    /// and no line of it starts with `[message from`.
    pub body: String,
}

/// Sends a message. It is stored before anything else happens (`state: pending`); the worker
/// types it into the recipient's pane when the agent is idle and marks it `delivered` once it
/// confirms a turn started with it (`message.delivered`, hook `on_message_sent`). Messages to a
/// stopped or suspended agent wait until it runs again. Also appended to `<data_dir>/outbox.jsonl`.
#[utoipa::path(post, path = "/messages", tag = "messages", request_body = SendMessage,
    params(("Idempotency-Key" = Option<String>, Header, description = "Makes the request safe to retry: the same key with the same body within 24 hours answers the first response again (nothing is created); with another body, 422.")),
    responses((status = 201, body = Message, description = "Stored, pending delivery"),
        (status = 403, body = Problem, description = "Sending as someone the token is not, or an agent's token messaging an agent that is neither of its team nor of its own wish or task"),
        (status = 422, body = Problem, description = "An unknown recipient, or a bad body")))]
#[tracing::instrument(skip_all, fields(to = ?body.to), err(level = "debug"))]
pub async fn send_message(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    IdempotentJson(body, idem): IdempotentJson<SendMessage>,
) -> ApiResult<Response> {
    let from = speaker(&caller, body.from.as_deref())?;
    if let Some(first) = idempotency::replay(&state, idem.as_ref()).await? {
        return Ok(first);
    }
    let message = messages_app::send(&state, from, &body.to, body.body, idem.as_ref()).await?;
    Ok((StatusCode::CREATED, Json(message)).into_response())
}

/// Filters for listing messages; they combine with AND.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MessageFilters {
    /// The recipient: an agent's name or `operator` (the operator's inbox).
    pub to: Option<String>,
    /// The sender.
    pub from: Option<String>,
    /// Only messages not yet marked read.
    #[serde(default)]
    pub unread: bool,
    /// `pending` or `delivered`.
    #[param(pattern = "^(pending|delivered)$")]
    pub state: Option<String>,
}

fn pending_only(state: Option<&str>) -> ApiResult<Option<bool>> {
    match state {
        None => Ok(None),
        Some("pending") => Ok(Some(true)),
        Some("delivered") => Ok(Some(false)),
        Some(other) => Err(ApiError::validation("state", format!("`{other}` is not `pending` or `delivered`"))),
    }
}

async fn listed(
    state: &AppState,
    mut filter: ListFilter,
    wanted: Option<&str>,
    paging: &PageQuery,
) -> ApiResult<Page<Message>> {
    let (limit, position) = paging.parse()?;
    filter.pending = pending_only(wanted)?;
    filter.after = position.map(|p| (p.created_at, p.id));
    let mut conn = state.db.acquire().await?;
    let rows = messages::list(&mut conn, &filter, limit + 1).await?;
    Ok(page(rows, limit, |m| Position { created_at: m.created_at, id: m.id }))
}

/// Lists messages oldest first, filtered (`to=operator` is the operator's inbox).
#[utoipa::path(get, path = "/messages", tag = "messages", params(MessageFilters, PageQuery),
    responses((status = 200, body = Page<Message>), (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list_messages(
    State(state): State<AppState>,
    ApiQuery(filters): ApiQuery<MessageFilters>,
    ApiQuery(paging): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<Message>>> {
    let filter =
        ListFilter { to: filters.to, from: filters.from, unread_only: filters.unread, ..ListFilter::default() };
    Ok(Json(listed(&state, filter, filters.state.as_deref(), &paging).await?))
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct InboxFilters {
    /// Only messages not yet marked read.
    #[serde(default)]
    pub unread: bool,
    /// `pending` or `delivered`.
    #[param(pattern = "^(pending|delivered)$")]
    pub state: Option<String>,
}

/// An agent's inbox, oldest first, with each message's read and delivery state. An agent's token
/// may read its own.
#[utoipa::path(get, path = "/agents/{name}/messages", tag = "messages",
    params(("name" = String, Path, description = "agent name"), InboxFilters, PageQuery),
    responses((status = 200, body = Page<Message>), (status = 403, body = Problem), (status = 404, body = Problem),
        (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn agent_inbox(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiQuery(filters): ApiQuery<InboxFilters>,
    ApiQuery(paging): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<Message>>> {
    {
        let mut conn = state.db.acquire().await?;
        if agents::by_name(&mut conn, &name).await?.is_none() {
            return Err(ApiError::NotFound(format!("no agent `{name}`")));
        }
    }
    let filter = ListFilter { to: Some(name), unread_only: filters.unread, ..ListFilter::default() };
    Ok(Json(listed(&state, filter, filters.state.as_deref(), &paging).await?))
}

/// The message, if the caller may see it: any token but an agent's, which sees its own mail only.
async fn visible(state: &AppState, caller: &Caller, id: Uuid) -> ApiResult<Message> {
    let mut conn = state.db.acquire().await?;
    let message = messages::get(&mut conn, id).await?.ok_or_else(|| ApiError::NotFound(format!("no message {id}")))?;
    match caller.agent.as_deref() {
        Some(own) if message.to != own && message.from != own => {
            Err(ApiError::Forbidden(format!("message {id} is not to or from agent `{own}`")))
        }
        _ => Ok(message),
    }
}

/// Reads one message.
#[utoipa::path(get, path = "/messages/{id}", tag = "messages", params(("id" = Uuid, Path)),
    responses((status = 200, body = Message), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[tracing::instrument(skip_all, fields(message = ?id), err(level = "debug"))]
pub async fn get_message(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<Message>> {
    Ok(Json(visible(&state, &caller, id).await?))
}

/// Marks a message read (again is fine). An agent's token may mark only messages to it.
#[utoipa::path(post, path = "/messages/{id}/read", tag = "messages", params(("id" = Uuid, Path)),
    responses((status = 200, body = Message), (status = 403, body = Problem), (status = 404, body = Problem)))]
#[tracing::instrument(skip_all, fields(message = ?id), err(level = "debug"))]
pub async fn mark_read(
    State(state): State<AppState>,
    Authenticated(caller): Authenticated,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<Message>> {
    let message = visible(&state, &caller, id).await?;
    if let Some(own) = caller.agent.as_deref() {
        if message.to != own {
            return Err(ApiError::Forbidden(format!("only `{}` may mark message {id} read", message.to)));
        }
    }
    Ok(Json(messages_app::mark_read(&state, id).await?))
}
