//! `GET /api/v1/providers`: each provider and whether its agents can start here — installed and
//! configured (an API key or a login), as the overview shows it — and the providers file's
//! error while the file as it is now cannot be used (the last good set stays in use).

use axum::extract::State;
use axum::Json;
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::provider_status::{self, ProviderStatus};
use crate::http::error::ApiResult;
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_providers))
}

/// The providers in use on this node.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ProviderList {
    /// By name.
    pub providers: Vec<ProviderStatus>,
    /// Why `providers.toml` as it is now cannot be used; the providers listed are the last good
    /// set. Absent when the file is fine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_error: Option<String>,
}

/// The providers agents may run, each `available`, `not_installed` or `not_configured` (with
/// what is missing). `providers.toml` is read again when it changes.
#[utoipa::path(get, path = "/providers", tag = "agents",
    responses((status = 200, body = ProviderList, description = "Every provider, by name")))]
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list_providers(State(state): State<AppState>) -> ApiResult<Json<ProviderList>> {
    Ok(Json(ProviderList { providers: provider_status::statuses(&state), config_error: state.providers.error() }))
}
