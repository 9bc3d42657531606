//! Liveness and readiness, outside `/api/v1` and without authentication, for load balancers.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Serialize;

use crate::http::AppState;

#[derive(Serialize, utoipa::ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: &'static str,
}

/// The process is alive and serving.
#[utoipa::path(get, path = "/healthz", tag = "health", responses((status = 200, body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

/// The database answers; 503 while it does not.
#[utoipa::path(get, path = "/readyz", tag = "health", responses(
    (status = 200, body = Health), (status = 503, body = Health, description = "database unreachable")
))]
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    if crate::db::reachable(&state.db).await {
        (StatusCode::OK, Json(Health { status: "ok" }))
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, Json(Health { status: "database unreachable" }))
    }
}
