//! `GET /api/v1/agents/{name}/state/explain`: which signal decided the agent's state, when, and
//! what the other signals say ([`crate::app::agent_states`]).

use axum::extract::{Path, State};
use axum::Json;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::agent_states::{self, Explanation};
use crate::http::error::{ApiResult, Problem};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(explain_agent_state))
}

/// Why the agent is in its state: the signal that decided it (a hook, a screen rule, pane output,
/// the reconciler, a person), when, and what the last hook, the last activity and the screen (read
/// now, when this server runs the agent's worker) say.
#[utoipa::path(get, path = "/agents/{name}/state/explain", tag = "agents", params(("name" = String, Path)),
    responses((status = 200, body = Explanation), (status = 404, body = Problem)))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn explain_agent_state(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<Explanation>> {
    Ok(Json(agent_states::explain(&state.app, &name).await?))
}
