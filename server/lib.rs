//! Switchyard: a control plane for fleets of AI coding agents running in tmux panes.
//! `Application::build` binds its listeners and opens the database; `run_until` serves until
//! the cancellation token fires, then drains and stops the embedded PostgreSQL last.

pub mod agent_writable;
pub mod api;
pub mod app;
pub mod auth;
pub mod cli;
pub mod config;
pub mod data_dir;
pub mod db;
pub mod detect;
pub mod domain;
pub mod feed;
pub mod git;
pub mod http;
pub mod message_log;
pub mod metrics;
pub mod node;
pub mod pages;
pub mod programs;
pub mod providers;
pub mod routes;
pub mod status;
pub mod telemetry;
pub mod tmux;
pub mod webhooks;
pub mod worker;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use config::Settings;
use data_dir::DataDir;
use db::Database;
use feed::EventFeed;
use node::NodeInfo;
use webhooks::WebhookSettings;

/// Which processes this instance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// API, dashboard and worker.
    Serve,
    /// The worker alone.
    Worker,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Serve => "serve",
            Role::Worker => "worker",
        }
    }
}

pub struct Application {
    api: Option<TcpListener>,
    /// The API on a Unix socket in the data directory too (see [`data_dir::api_socket`]).
    api_socket: Option<tokio::net::UnixListener>,
    status: TcpListener,
    db: Database,
    node: NodeInfo,
    role: Role,
    providers: providers::LiveProviders,
    data_dir_path: std::path::PathBuf,
    worker: worker::WorkerConfig,
    gate: app::merge_queue::gate::GateSettings,
    webhooks: Arc<WebhookSettings>,
    rate_limits: http::rate_limit::RateLimitSettings,
    feed: EventFeed,
    _data_dir: DataDir,
}

impl Application {
    /// Binds the listeners first (port 0 works; read the port back), then claims the data
    /// directory, opens the database and applies migrations.
    pub async fn build(settings: &Settings, role: Role) -> anyhow::Result<Application> {
        let api = match role {
            Role::Serve => Some(bind(settings.listen, "SWITCHYARD_LISTEN").await?),
            Role::Worker => None,
        };
        let status = bind(settings.status_listen, "SWITCHYARD_STATUS_LISTEN").await?;
        let data_dir = DataDir::claim(&settings.data_dir)?;
        let api_socket = api.as_ref().and_then(|_| data_dir::bind_api_socket(&settings.data_dir));
        let node = NodeInfo::load(&settings.data_dir).context("reading the node id")?;
        // The logins agents get: the ones a status line counts as configured.
        let logins = settings
            .worker
            .provider_home
            .as_deref()
            .map_or_else(providers::logins::UserConfig::from_env, providers::logins::UserConfig::under);
        let providers = providers::LiveProviders::load(&settings.data_dir, logins)?;
        if !providers::sandbox::bubblewrap_installed() {
            tracing::warn!(
                "bubblewrap (bwrap) is not installed: agents run unsandboxed, as this server's user, with everything \
                 it can reach (install bubblewrap to confine the built-in claude, codex and gemini)"
            );
        }
        let db = Database::open_as(settings.database(), Some(&db::application_name(&node.node_id))).await?;
        db::migrate(&db.pool).await.context("applying migrations")?;
        let webhooks = Arc::new(settings.webhooks.clone());
        Ok(Application {
            api,
            api_socket,
            status,
            db,
            node,
            role,
            providers,
            data_dir_path: settings.data_dir.clone(),
            worker: settings.worker.clone(),
            gate: settings.gate.clone(),
            webhooks,
            rate_limits: settings.rate_limits.clone(),
            feed: EventFeed::default(),
            _data_dir: data_dir,
        })
    }

    pub fn api_addr(&self) -> Option<SocketAddr> {
        self.api.as_ref().and_then(|l| l.local_addr().ok())
    }

    pub fn status_addr(&self) -> SocketAddr {
        self.status.local_addr().expect("a bound listener has an address")
    }

    pub fn pool(&self) -> &PgPool {
        &self.db.pool
    }

    /// What commits that record events go through; running, it announces them (see [`feed`]).
    pub fn feed(&self) -> &EventFeed {
        &self.feed
    }

    /// The API address agents are told to call back: the configured public URL, else the API's
    /// own listen address (a wildcard address becomes loopback).
    fn agent_api_url(&self) -> String {
        if let Some(url) = &self.worker.public_url {
            return url.trim_end_matches('/').to_owned();
        }
        match self.api_addr() {
            Some(addr) if addr.ip().is_unspecified() => format!("http://127.0.0.1:{}", addr.port()),
            Some(addr) => format!("http://{addr}"),
            None => "http://127.0.0.1:8080".to_owned(),
        }
    }

    /// Serves until `shutdown` fires; then both servers, the worker (its agents keep running in
    /// tmux) and the background loops (event notifications, webhook delivery) drain, and the
    /// database closes last.
    pub async fn run_until(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let api_url = self.agent_api_url();
        let api_socket_path = self.api_socket.as_ref().map(|_| data_dir::api_socket(&self.data_dir_path));
        let Application {
            api,
            api_socket,
            status,
            db,
            node,
            role,
            providers,
            data_dir_path,
            worker,
            gate,
            webhooks,
            rate_limits,
            feed,
            _data_dir,
        } = self;
        let listener = feed.clone().listen(db.pool.clone(), shutdown.clone());
        let providers_watch = tokio::spawn(providers.clone().watch(shutdown.clone()));
        // Stopped only once everything that commits has drained, so their last commits are
        // announced too.
        let drained = CancellationToken::new();
        let notifier = feed.clone().announce(db.pool.clone(), drained.clone());
        // Deliveries in a chat or push format link back to the dashboard, served beside the API.
        let mut sender_settings = (*webhooks).clone();
        sender_settings.dashboard_url.get_or_insert_with(|| api_url.clone());
        let sender = worker::webhook_sender::run_in_background(
            &db.pool,
            feed.clone(),
            Arc::new(sender_settings),
            shutdown.clone(),
        );
        let health = worker::fleet::SharedHealth::default();
        let shutdown_for_worker = shutdown.clone();
        let fleet = worker::fleet::Fleet {
            session: worker::fleet::session_name(&node),
            db: db.pool.clone(),
            tmux: tmux::Tmux::new(worker.tmux_socket.clone())?,
            node: node.clone(),
            role: role.as_str(),
            providers: providers.clone(),
            settings: worker.clone(),
            api_url,
            api_socket: api_socket_path,
            data_dir: data_dir_path.clone(),
            health: health.clone(),
            feed: feed.clone(),
        };
        let panes = app::LocalPanes {
            tmux: fleet.tmux.clone(),
            node_id: node.node_id.clone(),
            settle: worker.message_settle,
            confirm: worker.message_confirm,
        };
        // `serve` runs the worker beside the API unless told not to; `worker` always does.
        let run_worker = worker.enabled || role == Role::Worker;
        let panes = run_worker.then_some(panes);
        let worker_task = tokio::spawn(async move {
            if run_worker {
                fleet.run(shutdown_for_worker).await;
            }
        });
        let metrics = metrics::Metrics::default();
        let status_app = status::router(status::StatusState {
            metrics: metrics.clone(),
            db: db.pool.clone(),
            node: node.clone(),
            role: role.as_str(),
            health,
            embedded: db.embedded_health(),
        });
        let status_server = axum::serve(status, status_app).with_graceful_shutdown(shutdown.clone().cancelled_owned());
        let ctx = app::Ctx::new(app::Parts {
            db: db.pool.clone(),
            node: node.clone(),
            providers: providers.clone(),
            data_dir: data_dir_path.clone(),
            panes,
            feed: feed.clone(),
        });
        let conductor = worker::conductor::Conductor { ctx: ctx.clone() };
        let run_conductor = worker.conductor;
        let shutdown_for_conductor = shutdown.clone();
        let conductor_task = tokio::spawn(async move {
            if run_conductor {
                conductor.run(shutdown_for_conductor).await;
            }
        });
        // The merge queue and the state file run beside the conductor, on every node that asks.
        let merge_queue = worker
            .merge_queue
            .then(|| tokio::spawn(worker::merge_queue::run(ctx.clone(), gate.clone(), shutdown.clone())));
        let state_writer = tokio::spawn(worker::state_file::run(
            db.pool.clone(),
            feed.clone(),
            data_dir_path.clone(),
            shutdown.clone(),
        ));
        let api_server = async {
            match api {
                Some(listener) => {
                    let app = routes::router(http::AppState::new(http::Shared {
                        app: ctx,
                        webhooks: webhooks.clone(),
                        tokens: Default::default(),
                        sessions: Default::default(),
                        task_reads: db::tasks::reads(&db.pool),
                        metrics,
                        rate_limits: http::rate_limit::RateLimits::new(&rate_limits),
                    }));
                    // Responses go out at once: with Nagle's algorithm a small response waits for
                    // the ACK of the previous one, which a client delays by up to 40 ms.
                    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                        if let Err(e) = tcp.set_nodelay(true) {
                            tracing::debug!(error = %e, "setting TCP_NODELAY");
                        }
                    });
                    // The same routes on the socket; its clients have no address (no per-address
                    // rate limit: they are this machine's agents, each with its token).
                    let on_socket_app = app.clone();
                    let on_socket = async {
                        match api_socket {
                            Some(socket) => {
                                axum::serve(socket, on_socket_app.into_make_service())
                                    .with_graceful_shutdown(shutdown.clone().cancelled_owned())
                                    .await
                            }
                            None => Ok(()),
                        }
                    };
                    // The peer's address keys the rate limits of the routes without a token.
                    let on_tcp = axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
                        .with_graceful_shutdown(shutdown.clone().cancelled_owned());
                    let (tcp, socket) = tokio::join!(std::future::IntoFuture::into_future(on_tcp), on_socket);
                    tcp.and(socket)
                }
                None => Ok(()),
            }
        };
        let served = async {
            let servers =
                tokio::join!(api_server, std::future::IntoFuture::into_future(status_server), listener, sender);
            if let Err(e) = worker_task.await {
                tracing::error!(error = %e, "the worker ended abnormally");
            }
            if let Err(e) = conductor_task.await {
                tracing::error!(error = %e, "the conductor ended abnormally");
            }
            for (name, task) in [
                ("the merge queue", merge_queue),
                ("the state file writer", Some(state_writer)),
                ("the providers config watch", Some(providers_watch)),
            ] {
                if let Some(Err(e)) = match task {
                    Some(task) => Some(task.await),
                    None => None,
                } {
                    tracing::error!(error = %e, "{name} ended abnormally");
                }
            }
            drained.cancel();
            servers
        };
        let ((api_result, status_result, (), ()), ()) = tokio::join!(served, notifier);
        tracing::info!("servers drained; closing the database");
        db.close().await;
        api_result.context("API server")?;
        status_result.context("status server")?;
        Ok(())
    }
}

async fn bind(addr: SocketAddr, setting: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr} ({setting})"))
}

/// Cancels the token on SIGINT or SIGTERM.
pub fn cancel_on_signals(token: CancellationToken) {
    tokio::spawn(async move {
        let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot watch SIGTERM");
                return;
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
            _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        }
        token.cancel();
    });
}
