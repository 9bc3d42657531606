//! The worker's status endpoint (`:8765`): health, node id and what the worker is doing, as JSON
//! for load balancers and scripts.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

use crate::node::NodeInfo;

#[derive(Clone)]
pub struct StatusState {
    pub db: PgPool,
    pub node: NodeInfo,
    pub role: &'static str,
}

#[derive(Debug, Serialize)]
pub struct Status {
    pub node_id: String,
    pub version: &'static str,
    pub role: &'static str,
    pub started_at: DateTime<Utc>,
    pub uptime_s: u64,
    pub database: &'static str,
}

pub fn router(state: StatusState) -> Router {
    Router::new().route("/status", get(status)).with_state(state)
}

/// 200 while the database answers, 503 otherwise; the body says which, either way.
async fn status(State(state): State<StatusState>) -> (StatusCode, Json<Status>) {
    let database_ok = crate::db::reachable(&state.db).await;
    let body = Status {
        node_id: state.node.node_id.clone(),
        version: state.node.version,
        role: state.role,
        started_at: state.node.started_at,
        uptime_s: state.node.uptime_s(),
        database: if database_ok { "ok" } else { "error" },
    };
    let code = if database_ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, Json(body))
}
