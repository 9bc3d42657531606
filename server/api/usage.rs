//! `/api/v1/usage`: tokens and cost per model summed over the agents of a project, a wish, one
//! of its groups or an agent ([`crate::app::usage`]); prices come from `providers.toml`.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::usage::{self, ScopeNames, UsageReport};
use crate::http::error::{ApiResult, Problem};
use crate::http::query::ApiQuery;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_usage))
}

/// Whose usage: the agents matching every name given; none given: every agent.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    /// A project's slug.
    pub project: Option<String>,
    /// A wish's slug.
    pub wish: Option<String>,
    /// A group's key within `wish`.
    pub group: Option<String>,
    /// An agent's name.
    pub agent: Option<String>,
}

/// Tokens and cost per model of the agents in a scope. A model without a price is listed in
/// `unpriced` and counts no cost; agents whose provider reports no usage are counted in
/// `unreported`.
#[utoipa::path(get, path = "/usage", tag = "agents", params(UsageQuery),
    responses((status = 200, body = UsageReport), (status = 422, body = Problem, description = "A name that matches nothing")))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn get_usage(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<UsageQuery>,
) -> ApiResult<Json<UsageReport>> {
    let mut conn = state.db.acquire().await?;
    let names = ScopeNames {
        project: query.project.as_deref(),
        wish: query.wish.as_deref(),
        group: query.group.as_deref(),
        agent: query.agent.as_deref(),
    };
    let scope = usage::scope(&mut conn, &names).await?;
    Ok(Json(usage::report(&mut conn, &state.providers, &scope).await?))
}
