//! What every benchmark starts with: an invocation check, a database of its own on the server in
//! `BENCH_DATABASE_URL`, the real application in-process with an admin token, and a git repository
//! for its project. Included by each bench with `#[path = "common/mod.rs"] mod common;`.
// Each bench uses only part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;

use secrecy::SecretString;
use switchyard::auth::Scope;
use switchyard::config::{LogFormat, Settings, WebhookSettings, WorkerConfig};
use switchyard::{Application, Role};
use tokio_util::sync::CancellationToken;

/// `cargo test --all-targets` also runs harness-less benches, without `--bench`: figures from a
/// debug build under the test suite's load would mislead, so only `cargo bench` measures.
pub fn invoked_by_cargo_bench(name: &str) -> bool {
    let bench = std::env::args().any(|a| a == "--bench");
    if !bench {
        println!("bench/{name}.rs: run it with `cargo bench --bench {name}`");
    }
    bench
}

/// A numeric setting from the environment, or its default.
pub fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// The PostgreSQL server benchmarks create their databases on.
pub fn server_url() -> String {
    std::env::var("BENCH_DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

/// Drops and recreates database `name` on the server of `server_url` (a run cut short leaves
/// its database behind); returns its URL.
pub async fn fresh_database(server_url: &str, name: &str) -> anyhow::Result<String> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(server_url).await?;
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&mut conn).await?;
    sqlx::query(&format!("CREATE DATABASE {name}")).execute(&mut conn).await?;
    Ok(with_database(server_url, name))
}

/// Drops database `name` from the server of `server_url`, once a run is done with it.
pub async fn drop_database(server_url: &str, name: &str) -> anyhow::Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(server_url).await?;
    sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)")).execute(&mut conn).await?;
    Ok(())
}

/// `server_url` with its database path replaced by `name`, keeping any `?query`.
fn with_database(server_url: &str, name: &str) -> String {
    let (base, query) = server_url.split_once('?').map_or((server_url, None), |(b, q)| (b, Some(q)));
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let base = base[authority_start..].find('/').map_or(base, |slash| &base[..authority_start + slash]);
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

/// The application serving on a random port, with an admin token.
pub struct Running {
    pub addr: SocketAddr,
    pub token: String,
    pub pool: sqlx::PgPool,
    shutdown: CancellationToken,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
}

/// Starts `serve` on `database_url` with `data_dir` and this worker configuration (always on a
/// tmux socket of its own: a benchmark never touches the user's agents).
pub async fn start(database_url: &str, data_dir: &Path, worker: WorkerConfig) -> anyhow::Result<Running> {
    start_with(database_url, data_dir, worker, WebhookSettings::default()).await
}

/// [`start`] with these webhook settings.
pub async fn start_with(
    database_url: &str,
    data_dir: &Path,
    worker: WorkerConfig,
    webhooks: WebhookSettings,
) -> anyhow::Result<Running> {
    let settings = Settings {
        database_url: Some(SecretString::from(database_url.to_owned())),
        data_dir: data_dir.to_path_buf(),
        listen: "127.0.0.1:0".parse()?,
        status_listen: "127.0.0.1:0".parse()?,
        log_format: LogFormat::Text,
        pg_bindir: None,
        worker,
        webhooks,
        // A benchmark measures the server, not its limits.
        rate_limits: Default::default(),
    };
    let app = Application::build(&settings, Role::Serve).await?;
    let addr = app.api_addr().expect("serve has an API");
    let pool = app.pool().clone();
    let mut tx = pool.begin().await?;
    // A live token's name is unique: named after the port, two nodes on one database each get one.
    let name = format!("bench-{}", addr.port());
    let (_, token) = switchyard::db::tokens::create(&mut tx, &name, Scope::Admin).await?;
    tx.commit().await?;
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run_until(shutdown.clone()));
    Ok(Running { addr, token, pool, shutdown, server })
}

impl Running {
    /// `http://<addr>/api/v1`
    pub fn api(&self) -> String {
        format!("http://{}/api/v1", self.addr)
    }

    /// Stops the server and waits for it to drain.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.server.await??;
        self.pool.close().await;
        Ok(())
    }
}

/// A git repository for the benchmark's project, with one commit on `main` (a project's target
/// branch must exist).
pub fn git_repo() -> anyhow::Result<tempfile::TempDir> {
    let repo = tempfile::tempdir()?;
    let identity = ["-c", "user.name=bench", "-c", "user.email=bench@localhost"];
    for args in [
        &["init", "-q", "-b", "main"][..],
        &[&identity[..], &["commit", "-q", "--allow-empty", "-m", "start"]].concat(),
    ] {
        let status = std::process::Command::new("git").args(args).current_dir(repo.path()).status()?;
        anyhow::ensure!(status.success(), "git {args:?} failed");
    }
    Ok(repo)
}
