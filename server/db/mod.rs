//! Persistence: the pool, migrations, the embedded cluster, and one file per entity. Functions
//! that change state take the caller's connection or transaction, so a request's changes and
//! its event row commit together.

pub mod agent_usage;
pub mod agents;
pub mod batched_reads;
pub mod board_columns;
pub mod board_templates;
pub mod boards;
pub mod conductor;
pub mod embedded;
pub mod events;
pub mod handoffs;
pub mod history;
pub mod idempotency;
pub mod merge_queue;
pub mod messages;
pub mod metrics;
pub mod nodes;
pub mod projects;
pub mod sessions;
pub mod spare_connections;
pub mod stalled_steps;
pub mod state_document;
pub mod task_runs;
pub mod tasks;
pub mod team_chat;
pub mod teams;
pub mod tokens;
pub mod webhook_deliveries;
pub mod webhooks;
pub mod wishes;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use secrecy::ExposeSecret;
use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

use crate::data_dir::DataDir;
use embedded::{Durability, EmbeddedPostgres, SharedEmbeddedHealth};
use tokio_util::sync::CancellationToken;

pub static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// The database in use: a pool, and the embedded cluster behind it when there is one.
pub struct Database {
    pub pool: PgPool,
    embedded: Option<Supervised>,
}

/// The embedded cluster with the task that starts it again when it dies.
struct Supervised {
    pg: Arc<EmbeddedPostgres>,
    health: SharedEmbeddedHealth,
    stop: CancellationToken,
    watcher: tokio::task::JoinHandle<()>,
}

impl Supervised {
    fn start(pg: EmbeddedPostgres) -> Supervised {
        let pg = Arc::new(pg);
        let health = SharedEmbeddedHealth::default();
        let stop = CancellationToken::new();
        let watcher = tokio::spawn(pg.clone().supervise(health.clone(), stop.clone()));
        Supervised { pg, health, stop, watcher }
    }
}

/// How long closing the pool may wait for connections in use (a hung database must not keep
/// the process from exiting).
const CLOSE_DEADLINE: Duration = Duration::from_secs(5);

/// Where the database is: `DATABASE_URL`, else the embedded cluster in the data directory, run
/// with the PostgreSQL programs in `pg_bindir` (else the system's).
#[derive(Debug, Clone, Copy)]
pub struct Location<'a> {
    pub database_url: Option<&'a secrecy::SecretString>,
    pub data_dir: &'a Path,
    pub pg_bindir: Option<&'a Path>,
    /// The main pool's size: [`POOL_CONNECTIONS`], but for a test that runs with fewer.
    pub pool_connections: u32,
}

impl Database {
    /// Connects to `DATABASE_URL`, or starts the embedded cluster when it is unset.
    pub async fn open(settings: Location<'_>) -> anyhow::Result<Database> {
        Database::open_as(settings, None).await
    }

    /// [`Database::open`], every connection named `application_name` (see [`application_name`]).
    pub async fn open_as(settings: Location<'_>, application_name: Option<&str>) -> anyhow::Result<Database> {
        let (options, embedded) = match settings.database_url {
            Some(url) => (url.expose_secret().parse::<PgConnectOptions>()?, None),
            None => {
                let pg = EmbeddedPostgres::new(
                    &settings.data_dir.join(embedded::ROOT),
                    settings.pg_bindir,
                    Durability::Durable,
                )?;
                (pg.start().await?, Some(pg))
            }
        };
        let options = match application_name {
            Some(name) => options.application_name(name),
            None => options,
        };
        let pool = pool_of(options, settings.pool_connections).await?;
        Ok(Database { pool, embedded: embedded.map(Supervised::start) })
    }

    /// The embedded cluster's state for `/status`, when there is one.
    pub fn embedded_health(&self) -> Option<SharedEmbeddedHealth> {
        self.embedded.as_ref().map(|s| s.health.clone())
    }

    /// For one-shot commands (`migrate`, `token …`): when a running Switchyard owns the embedded
    /// cluster, use it as it is; otherwise start it for the command and stop it after.
    pub async fn open_for_command(settings: Location<'_>) -> anyhow::Result<(Database, Option<DataDir>)> {
        if settings.database_url.is_none() && DataDir::is_claimed(settings.data_dir) {
            let pg = EmbeddedPostgres::new(
                &settings.data_dir.join(embedded::ROOT),
                settings.pg_bindir,
                Durability::Durable,
            )?;
            let pool = pool_of(pg.connect_options(embedded::DATABASE), settings.pool_connections).await?;
            return Ok((Database { pool, embedded: None }, None));
        }
        let claim = match settings.database_url {
            Some(_) => None,
            None => Some(DataDir::claim(settings.data_dir)?),
        };
        Ok((Database::open(settings).await?, claim))
    }

    /// Closes the pool, then stops the embedded cluster (last, after everything using it). Each
    /// step is bounded, so this returns whatever the database does.
    pub async fn close(self) {
        if tokio::time::timeout(CLOSE_DEADLINE, self.pool.close()).await.is_err() {
            tracing::warn!("connections still in use after {} s; closing anyway", CLOSE_DEADLINE.as_secs());
        }
        if let Some(Supervised { pg, stop, watcher, .. }) = self.embedded {
            stop.cancel();
            let _ = watcher.await;
            if let Err(e) = pg.stop().await {
                tracing::error!(error = %e, "stopping the embedded PostgreSQL");
            }
        }
    }
}

/// The PostgreSQL connections one node (a `serve` or `worker` process) holds at most, all of
/// its loops and requests together, fixed whatever the load, so a fleet's needs are known
/// (README: "Many nodes"). They are:
/// [`LISTEN_CONNECTIONS`] for the events `LISTEN` (a pool of its own: a listener keeps its
/// connection for good), [`SENDER_CONNECTIONS`] for the webhook sender (its own runtime, whose
/// connections serve only it), and [`POOL_CONNECTIONS`] in the main pool for everything else:
/// the API, the worker's loops, the conductor, the notifier's `NOTIFY`. The test
/// `connections::a_node_running_a_wish_under_api_load_holds_at_most_its_connection_budget`
/// counts them in `pg_stat_activity` while a node runs a wish.
// Four in the main pool are enough only because nothing holds a connection while it waits for
// another (a request, a loop or a conductor step): with a few such at once every request waited
// past the pool's 3 s. The suite finds any new one when run with a pool of one
// (`SWITCHYARD_TEST_POOL_CONNECTIONS=1`), and `connections::` runs a wish and the dashboard so.
pub const NODE_CONNECTIONS: u32 = 6;
pub const LISTEN_CONNECTIONS: u32 = 1;
pub const SENDER_CONNECTIONS: u32 = 1;
/// The main pool: what a node's budget leaves after the listener and the sender.
pub const POOL_CONNECTIONS: u32 = NODE_CONNECTIONS - LISTEN_CONNECTIONS - SENDER_CONNECTIONS;
// The API, the worker's loops and the conductor need a few at once; a loop keeps one for its
// frequent writes ([`spare_connections`]) only while others are free.
const _: () = assert!(POOL_CONNECTIONS >= 4);
const _: () = assert!(NODE_CONNECTIONS == POOL_CONNECTIONS + LISTEN_CONNECTIONS + SENDER_CONNECTIONS);

/// The `application_name` a node's connections carry (`switchyard:<node id>`), so that
/// `pg_stat_activity` tells each node's connections apart.
pub fn application_name(node_id: &str) -> String {
    format!("switchyard:{node_id}")
}

/// How long a statement waits for a connection before the request is answered 503.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(3);

/// A connection idle for longer than this is pinged before it is handed out.
const PING_AFTER_IDLE: Duration = Duration::from_secs(10);

/// The main pool, of [`POOL_CONNECTIONS`]. sqlx would ping every connection before handing it
/// out, a round trip as dear as most statements (a task read would cost two); only a connection
/// that sat idle long enough to have been cut (a restart, a firewall) is pinged, and a broken one
/// is replaced, not used.
pub async fn pool(options: PgConnectOptions) -> Result<PgPool, sqlx::Error> {
    pool_of(options, POOL_CONNECTIONS).await
}

/// [`pool`] of `connections`: fewer than [`POOL_CONNECTIONS`] only in tests, where a pool of one
/// makes any code that holds a connection while it waits for a second time out at once.
pub async fn pool_of(options: PgConnectOptions, connections: u32) -> Result<PgPool, sqlx::Error> {
    pool_options(connections).min_connections(1).connect_with(options).await
}

/// A pool to the database `options` name, connecting lazily: for a runtime of its own (a
/// connection serves the runtime that opened it). Must be made inside that runtime.
pub fn beside(options: PgConnectOptions, connections: u32) -> PgPool {
    pool_options(connections).connect_lazy_with(options)
}

fn pool_options(connections: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(connections)
        // Short, so that while the database is down a request fails fast (503, Retry-After).
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for < PING_AFTER_IDLE {
                    return Ok(true);
                }
                Ok(sqlx::Connection::ping(conn).await.is_ok())
            })
        })
}

pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    MIGRATOR.run(pool).await?;
    Ok(())
}

/// For `/readyz`: can a statement round-trip right now?
pub async fn reachable(pool: &PgPool) -> bool {
    let ping = sqlx::query_scalar!("SELECT 1 AS \"one!\"").fetch_one(pool);
    matches!(tokio::time::timeout(Duration::from_secs(2), ping).await, Ok(Ok(1)))
}
