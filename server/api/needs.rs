//! `GET /api/v1/needs`: what needs a person, as the overview's "Needs you" shows it — for
//! scripts and phone clients. A prompt's options are answered with
//! `POST /agents/{name}/input` `{"option": N}`, a key press checked on the agent's screen.

use axum::extract::State;
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::needs::{self, Need};
use crate::http::error::{ApiResult, Problem};
use crate::http::pagination::{page, Page, PageQuery, Position};
use crate::http::query::ApiQuery;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_needs))
}

/// What waits for a person, longest waiting first, a page at a time: agents asking permission or
/// a question (with what they ask and their screen's options), providers that need something,
/// idle agents that did not report, steps handed to a person, plans to approve, wishes to review,
/// tasks and cards waiting for a person, merge queue entries only a person can take on.
#[utoipa::path(get, path = "/needs", tag = "agents", params(PageQuery),
    responses((status = 200, body = Page<Need>, description = "One page, longest waiting first"),
        (status = 422, body = Problem, description = "A bad cursor or limit")))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list_needs(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> ApiResult<Json<Page<Need>>> {
    let (limit, after) = query.parse()?;
    let position = |n: &Need| Position { created_at: n.since, id: n.id };
    let rows = needs::list(&state).await?.into_iter().filter(|n| {
        after.is_none_or(|a| {
            let p = position(n);
            (p.created_at, p.id) > (a.created_at, a.id)
        })
    });
    Ok(Json(page(rows.take(limit as usize + 1).collect(), limit, position)))
}
