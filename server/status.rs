//! The worker's status endpoint (`:8765`): health, node id and what the worker is doing, as JSON
//! for load balancers and scripts; and `/metrics` for Prometheus.

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
    pub health: crate::worker::fleet::SharedHealth,
    /// What `/metrics` serves (the API records its requests there).
    pub metrics: crate::metrics::Metrics,
    /// The embedded PostgreSQL's supervision, when this process runs one.
    pub embedded: Option<crate::db::embedded::SharedEmbeddedHealth>,
}

#[derive(Debug, Serialize)]
pub struct Status {
    pub node_id: String,
    pub version: &'static str,
    pub role: &'static str,
    pub started_at: DateTime<Utc>,
    pub uptime_s: u64,
    /// `ok`, `error`, or `restarting` while the embedded PostgreSQL is being started again.
    pub database: &'static str,
    /// The embedded PostgreSQL (absent with `DATABASE_URL`): `state`, `restarts`, `last_exit`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedded: Option<crate::db::embedded::EmbeddedHealth>,
    /// The worker: control-mode link, last reconcile and its duration, last error.
    pub worker: crate::worker::fleet::Health,
    /// This node's agents by state (`working`, `idle`, …).
    pub agents: std::collections::BTreeMap<String, i64>,
    /// Messages to this node's agents not yet confirmed as delivered.
    pub pending_messages: i64,
    /// Whether bubblewrap is installed on this node: without it, its agents run unsandboxed.
    pub bubblewrap: bool,
}

pub fn router(state: StatusState) -> Router {
    Router::new().route("/status", get(status)).route("/metrics", get(metrics)).with_state(state)
}

/// Prometheus' text format (see [`crate::metrics`]).
async fn metrics(State(state): State<StatusState>) -> impl axum::response::IntoResponse {
    let text = state.metrics.render(&state.db, &state.node.node_id).await;
    ([(axum::http::header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text)
}

/// 200 while the database answers, 503 otherwise; the body says which, either way.
async fn status(State(state): State<StatusState>) -> (StatusCode, Json<Status>) {
    let database_ok = crate::db::reachable(&state.db).await;
    let embedded = state.embedded.as_ref().and_then(|h| h.lock().ok().map(|h| h.clone()));
    let restarting = embedded.as_ref().is_some_and(|e| e.state == "restarting");
    let body = Status {
        node_id: state.node.node_id.clone(),
        version: state.node.version,
        role: state.role,
        started_at: state.node.started_at,
        uptime_s: state.node.uptime_s(),
        database: match (database_ok, restarting) {
            (true, _) => "ok",
            (false, true) => "restarting",
            (false, false) => "error",
        },
        embedded,
        worker: state.health.lock().map(|h| h.clone()).unwrap_or_default(),
        agents: if database_ok { agents_by_state(&state).await } else { Default::default() },
        pending_messages: if database_ok { pending_messages(&state).await } else { 0 },
        bubblewrap: crate::providers::sandbox::bubblewrap_installed(),
    };
    let code = if database_ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, Json(body))
}

async fn agents_by_state(state: &StatusState) -> std::collections::BTreeMap<String, i64> {
    let counted = async {
        let mut conn = state.db.acquire().await?;
        crate::db::agents::count_by_state(&mut conn, &state.node.node_id).await
    };
    counted.await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "counting agents for /status");
        Default::default()
    })
}

async fn pending_messages(state: &StatusState) -> i64 {
    let counted = async {
        let mut conn = state.db.acquire().await?;
        crate::db::messages::count_pending_on_node(&mut conn, &state.node.node_id).await
    };
    counted.await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "counting pending messages for /status");
        0
    })
}
