//! `GET /metrics` on the status listener (`:8765`, never the public one), in Prometheus' text
//! format: HTTP requests by route and status with their latency, and — read from the database
//! when scraped — this node's agents by state and provider, its pending messages, webhook
//! deliveries by outcome, how far webhook fan-out lags behind the event log, and the pool's
//! connections. One registry per process (not a global one), so each test's app has its own.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use sqlx::PgPool;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    /// The matched route (`/api/v1/wishes/{slug}`), never the raw path.
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabels {
    state: String,
    provider: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    state: &'static str,
}

/// The process's metrics; cloning is one reference count.
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

struct Inner {
    registry: Mutex<Registry>,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RouteLabels, Histogram>,
    agents: Family<AgentLabels, Gauge>,
    pending_messages: Gauge,
    deliveries: Family<OutcomeLabels, Gauge>,
    outbox_lag: Gauge<f64, AtomicU64>,
    pool: Family<PoolLabels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let mut registry = Registry::with_prefix("switchyard");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register("http_requests", "HTTP requests answered, by method, route and status", requests.clone());
        let latency = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            // 1 ms to ~16 s.
            Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(0.001, 2.0, 15))
        });
        registry.register("http_request_duration_seconds", "Time to answer a request", latency.clone());
        let agents = Family::<AgentLabels, Gauge>::default();
        registry.register("agents", "This node's agents by state and provider", agents.clone());
        let pending_messages = Gauge::default();
        registry.register(
            "pending_messages",
            "Messages to this node's agents not yet confirmed delivered",
            pending_messages.clone(),
        );
        let deliveries = Family::<OutcomeLabels, Gauge>::default();
        registry.register("webhook_deliveries", "Webhook deliveries by outcome", deliveries.clone());
        let outbox_lag = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "webhook_outbox_lag_seconds",
            "Age of the oldest event not yet turned into webhook deliveries (0 when none waits)",
            outbox_lag.clone(),
        );
        let pool = Family::<PoolLabels, Gauge>::default();
        registry.register("db_pool_connections", "Database pool connections, idle and in use", pool.clone());
        Metrics(Arc::new(Inner {
            registry: Mutex::new(registry),
            requests,
            latency,
            agents,
            pending_messages,
            deliveries,
            outbox_lag,
            pool,
        }))
    }
}

impl Metrics {
    /// One answered request.
    pub fn request(&self, method: &str, route: &str, status: u16, took: Duration) {
        let labels = RequestLabels { method: method.to_owned(), route: route.to_owned(), status };
        self.0.requests.get_or_create(&labels).inc();
        let RequestLabels { method, route, .. } = labels;
        self.0.latency.get_or_create(&RouteLabels { method, route }).observe(took.as_secs_f64());
    }

    /// The text exposition, with the database's figures read now (left out, with a warning,
    /// when the database does not answer).
    pub async fn render(&self, db: &PgPool, node_id: &str) -> String {
        let idle = db.num_idle() as i64;
        self.0.pool.get_or_create(&PoolLabels { state: "idle" }).set(idle);
        self.0.pool.get_or_create(&PoolLabels { state: "in_use" }).set(i64::from(db.size()) - idle);
        if let Err(e) = self.read_database(db, node_id).await {
            tracing::warn!(error = %e, "reading figures for /metrics");
        }
        let mut text = String::new();
        let registry = self.0.registry.lock().expect("metrics registry lock");
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &registry) {
            tracing::warn!(error = %e, "encoding /metrics");
        }
        text
    }

    async fn read_database(&self, db: &PgPool, node_id: &str) -> Result<(), sqlx::Error> {
        let mut conn = db.acquire().await?;
        let figures = crate::db::metrics::read(&mut conn, node_id).await?;
        self.0.agents.clear();
        for (state, provider, count) in figures.agents {
            self.0.agents.get_or_create(&AgentLabels { state, provider }).set(count);
        }
        self.0.pending_messages.set(figures.pending_messages);
        self.0.deliveries.clear();
        for (outcome, count) in figures.deliveries {
            self.0.deliveries.get_or_create(&OutcomeLabels { outcome }).set(count);
        }
        self.0.outbox_lag.set(figures.outbox_lag_seconds);
        Ok(())
    }
}
