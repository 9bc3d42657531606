//! What every benchmark starts with: an invocation check, a database of its own on the server in
//! `BENCH_DATABASE_URL`, the real application in-process with an admin token, and a git repository
//! for its project. Included by each bench with `#[path = "common/mod.rs"] mod common;`.
// Each bench uses only part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;

use secrecy::SecretString;
use switchyard::auth::Scope;
use switchyard::config::{LogFormat, Settings};
use switchyard::webhooks::WebhookSettings;
use switchyard::worker::WorkerConfig;
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
    /// The status listener's (`/metrics`).
    pub status_addr: SocketAddr,
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
        gate: Default::default(),
        webhooks,
        // A benchmark measures the server, not its limits.
        rate_limits: Default::default(),
        pool_connections: switchyard::db::POOL_CONNECTIONS,
    };
    let app = Application::build(&settings, Role::Serve).await?;
    let addr = app.api_addr().expect("serve has an API");
    let status_addr = app.status_addr();
    let pool = app.pool().clone();
    let mut tx = pool.begin().await?;
    // A live token's name is unique: named after the port, two nodes on one database each get one.
    let name = format!("bench-{}", addr.port());
    let (_, token) = switchyard::db::tokens::create(&mut tx, &name, Scope::Admin).await?;
    tx.commit().await?;
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run_until(shutdown.clone()));
    Ok(Running { addr, status_addr, token, pool, shutdown, server })
}

impl Running {
    /// `http://<addr>/api/v1`
    pub fn api(&self) -> String {
        format!("http://{}/api/v1", self.addr)
    }

    /// POSTs `body` to `path` of the API with the admin token; an error unless it succeeds.
    pub async fn post(&self, client: &reqwest::Client, path: &str, body: serde_json::Value) -> anyhow::Result<()> {
        let request = client.post(format!("{}{path}", self.api())).bearer_auth(&self.token).json(&body);
        let response = request.send().await?;
        let status = response.status();
        anyhow::ensure!(status.is_success(), "POST {path}: {status} {}", response.text().await.unwrap_or_default());
        Ok(())
    }

    /// Logs in to the dashboard with the admin token: a client that does not follow redirects,
    /// and the session cookie to send.
    pub async fn login(&self) -> anyhow::Result<(reqwest::Client, String)> {
        login(&format!("http://{}", self.addr), &self.token).await
    }

    /// Stops the server and waits for it to drain.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.server.await??;
        self.pool.close().await;
        Ok(())
    }
}

/// Logs in to the dashboard at `site` with `token`: a client that does not follow redirects, and
/// the session cookie to send.
pub async fn login(site: &str, token: &str) -> anyhow::Result<(reqwest::Client, String)> {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?;
    let login = client.post(format!("{site}/login")).form(&[("token", token)]).send().await?;
    let cookie = login
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .ok_or_else(|| anyhow::anyhow!("no session cookie"))?
        .to_owned();
    Ok((client, cookie))
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

/// The `q` quantile in milliseconds of sorted microsecond values.
pub fn percentile_ms(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[index] as f64 / 1000.0
}

/// utime + stime of a process from `/proc/<pid>/stat`, in ticks (CLK_TCK is 100 on Linux), with
/// its waited-for children when asked.
pub fn cpu_ticks(pid: &str, with_children: bool) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the `(comm)`, which may hold spaces: state is field 3, utime field 14.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<u64> = rest.split_whitespace().skip(1).map(|f| f.parse().unwrap_or(0)).collect();
    let (utime, stime, cutime, cstime) = (fields[10], fields[11], fields[12], fields[13]);
    Ok(utime + stime + if with_children { cutime + cstime } else { 0 })
}

/// Runs `tmux -L <socket> <args>`; its output.
pub fn tmux(socket: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new("tmux").arg("-L").arg(socket).args(args).output()?;
    anyhow::ensure!(out.status.success(), "tmux {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Waits until every agent has left `spawning` and has a pane, polling, for at most `limit`
/// since `started`.
pub async fn wait_for_panes(
    pool: &sqlx::PgPool,
    started: std::time::Instant,
    limit: std::time::Duration,
) -> anyhow::Result<()> {
    loop {
        let waiting: i64 =
            sqlx::query_scalar("SELECT count(*) FROM agents WHERE state = 'spawning' OR tmux_pane IS NULL")
                .fetch_one(pool)
                .await?;
        if waiting == 0 {
            return Ok(());
        }
        anyhow::ensure!(started.elapsed() < limit, "{waiting} agents still without a pane");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// `BENCH_SHOW_MS=min-max` (default 500-3000): how long a fake agent shows each screen, in ms.
pub fn show_ms() -> anyhow::Result<(String, u64, u64)> {
    let show = std::env::var("BENCH_SHOW_MS").unwrap_or_else(|_| "500-3000".into());
    let (lo, hi) = show
        .split_once('-')
        .and_then(|(lo, hi)| Some((lo.parse::<u64>().ok()?, hi.parse::<u64>().ok()?)))
        .filter(|(lo, hi)| lo <= hi)
        .ok_or_else(|| anyhow::anyhow!("BENCH_SHOW_MS must be MIN-MAX in ms, as 500-3000"))?;
    Ok((show, lo, hi))
}

/// Writes the fake agent's script `text` into `dir`, executable; its path.
pub fn fake_agent(dir: &Path, text: &str) -> anyhow::Result<std::path::PathBuf> {
    let script = dir.join("fake-agent.sh");
    std::fs::write(&script, text)?;
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    Ok(script)
}

/// Claude Code's screens the fake agents show, from the test fixtures.
pub const SCREENS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/screens/claude");
