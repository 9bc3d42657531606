//! The test harness: the real application on port 0 with a fresh database per test, from
//! `DATABASE_URL` when it is set, else from a shared embedded test cluster the harness starts;
//! and the typed client the tests drive it with (`app.create_wish(..)`, `app.post_ok(..)`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use reqwest::Method;
use secrecy::SecretString;
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection};
use switchyard::auth::Scope;
use switchyard::config::{LogFormat, Settings};
use switchyard::db::embedded::{Durability, EmbeddedPostgres};
use switchyard::domain::agent::AgentState;
use switchyard::domain::task::TaskStatus;
use switchyard::http::rate_limit::RateLimitSettings;
use switchyard::webhooks::WebhookSettings;
use switchyard::worker::WorkerConfig;
use switchyard::{Application, Role};
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub struct TestApp {
    pub address: String,
    pub status_address: String,
    /// The test's own connections to the node's database (not the node's pool).
    pub pool: sqlx::PgPool,
    pub admin_token: String,
    pub client: reqwest::Client,
    pub database_url: String,
    pub database_name: String,
    pub shutdown: CancellationToken,
    /// The app's private tmux socket (its worker's agents run there); empty once [`stop`] took it.
    pub tmux_socket: String,
    pub _data_dir: tempfile::TempDir,
    /// Where [`TestApp::create_project`] makes each project's repository.
    pub repos: tempfile::TempDir,
    /// The running application, to wait for it to stop.
    pub running: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    /// The application's feed: loops a test drives commit through it, as the app's own would.
    pub feed: switchyard::feed::EventFeed,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if self.tmux_socket.is_empty() {
            return; // taken by `stop`, for the next instance
        }
        // The agents' panes outlive a worker on purpose; a test's tmux server must not.
        end_tmux_server(&self.tmux_socket);
    }
}

/// Kills the tmux server on `socket` and, as the worker does for a window it closes, ends what
/// its panes started: an agent CLI that outlives its pane's hang-up would spin on beside the
/// rest of the suite.
pub fn end_tmux_server(socket: &str) {
    use switchyard::tmux::process_tree;
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux").args(["-L", socket]).args(args).stderr(std::process::Stdio::null()).output()
    };
    let roots: Vec<i32> = tmux(&["list-panes", "-a", "-F", "#{pane_pid}"])
        .map(|out| String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default();
    let noted = process_tree::below(&roots);
    let _ = tmux(&["kill-server"]);
    process_tree::reap(&noted, process_tree::GRACE);
}

/// Where the server lives that hands out a fresh database to each test.
struct TestServer {
    /// A URL with `{db}` where the database name goes.
    url_template: String,
}

static SERVER: OnceCell<TestServer> = OnceCell::const_new();

async fn test_server() -> &'static TestServer {
    SERVER
        .get_or_init(|| async {
            match std::env::var("DATABASE_URL") {
                Ok(url) if !url.is_empty() => TestServer { url_template: with_database(&url, "{db}") },
                _ => TestServer { url_template: embedded_test_cluster().await },
            }
        })
        .await
}

/// One throw-away cluster (fsync off) shared by every test process on this machine, started by
/// whichever test gets there first; a file lock keeps two from starting it at once.
async fn embedded_test_cluster() -> String {
    let uid = nix::unistd::geteuid();
    let root = PathBuf::from(format!("/tmp/switchyard-test-pg-{uid}"));
    let lock_path = PathBuf::from(format!("/tmp/switchyard-test-pg-{uid}.lock"));
    let lock = std::fs::File::create(&lock_path).expect("create the test cluster lock");
    let locked = tokio::task::spawn_blocking(move || {
        fs2::FileExt::lock_exclusive(&lock).expect("lock the test cluster");
        lock
    })
    .await
    .expect("lock task");
    let pg =
        EmbeddedPostgres::new(&root, None, Durability::Volatile).expect("PostgreSQL binaries for the test cluster");
    pg.start_or_attach().await.expect("start the embedded test cluster");
    drop_old_databases(&pg).await;
    fs2::FileExt::unlock(&locked).expect("unlock");
    format!("postgres://switchyard@localhost/{{db}}?host={}", root.display())
}

/// Test databases are named `t_<unix seconds>_<random>`; those over an hour old are leftovers.
async fn drop_old_databases(pg: &EmbeddedPostgres) {
    let mut conn = PgConnection::connect_with(&pg.connect_options("postgres")).await.expect("connect");
    let cutoff = chrono::Utc::now().timestamp() - 3600;
    let names: Vec<String> = sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 't\\_%'")
        .fetch_all(&mut conn)
        .await
        .expect("list databases");
    for name in names {
        let created: i64 = name.split('_').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        if created < cutoff {
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).execute(&mut conn).await;
        }
    }
}

/// Replaces the database name in a PostgreSQL URL, keeping its query string.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let authority_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let base = match base[authority_end..].find('/') {
        Some(i) => &base[..authority_end + i],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

/// A fresh, empty database; returns its URL and name.
pub async fn fresh_database() -> (String, String) {
    let server = test_server().await;
    let name = format!("t_{}_{}", chrono::Utc::now().timestamp(), uuid::Uuid::new_v4().simple());
    let admin_url = server.url_template.replace("{db}", "postgres");
    let mut conn = PgConnection::connect(&admin_url).await.expect("connect to the test server");
    sqlx::query(&format!("CREATE DATABASE \"{name}\"")).execute(&mut conn).await.expect("create database");
    conn.close().await.ok();
    (server.url_template.replace("{db}", &name), name)
}

/// A test instance with the defaults: a fresh database, no worker, no conductor, default webhook
/// settings, no rate limits.
pub async fn spawn_app() -> TestApp {
    TestApp::builder().spawn().await
}

/// How a test instance is made: [`TestApp::builder`], then what differs from the defaults of
/// [`spawn_app`], then `spawn().await`.
pub struct AppBuilder {
    /// An existing database (URL, name), as a second replica would use; else a fresh one.
    database: Option<(String, String)>,
    /// Written to `<data_dir>/providers.toml` before the instance starts.
    providers: Option<String>,
    /// The worker's settings when the worker runs.
    worker: Option<WorkerConfig>,
    webhooks: WebhookSettings,
    rate_limits: RateLimitSettings,
    /// The main pool's size; see [`pool_connections`].
    pool_connections: u32,
}

impl TestApp {
    pub fn builder() -> AppBuilder {
        AppBuilder {
            database: None,
            providers: None,
            worker: None,
            webhooks: WebhookSettings::default(),
            rate_limits: RateLimitSettings::default(),
            pool_connections: pool_connections(),
        }
    }
}

/// A node's main pool in tests: its real size, or `SWITCHYARD_TEST_POOL_CONNECTIONS` (read only
/// here) — a suite run with 1 makes every request or loop that holds a connection while it
/// waits for another time out (503, "pool timed out") instead of starving a pool of four now
/// and then.
fn pool_connections() -> u32 {
    std::env::var("SWITCHYARD_TEST_POOL_CONNECTIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(switchyard::db::POOL_CONNECTIONS)
}

impl AppBuilder {
    /// These webhook settings (allow-list, retry schedule, inbound secrets).
    pub fn webhooks(mut self, webhooks: WebhookSettings) -> AppBuilder {
        self.webhooks = webhooks;
        self
    }

    /// These rate limits (elsewhere tests run without any).
    pub fn rate_limits(mut self, rate_limits: RateLimitSettings) -> AppBuilder {
        self.rate_limits = rate_limits;
        self
    }

    /// `providers.toml` (custom providers such as the fake Claude Code agent, prices of models).
    pub fn providers(mut self, providers: &str) -> AppBuilder {
        self.providers = Some(providers.to_owned());
        self
    }

    /// The worker running agents in tmux on a private socket, its settings changed by `tweak`
    /// (the conductor on, shorter settle and confirmation times, …).
    pub fn worker(mut self, tweak: impl FnOnce(&mut WorkerConfig)) -> AppBuilder {
        let mut worker = worker_config(true, new_tmux_socket());
        tweak(&mut worker);
        self.worker = Some(worker);
        self
    }

    /// A main pool of `connections` (a pool of one finds hold-and-wait).
    pub fn pool_connections(mut self, connections: u32) -> AppBuilder {
        self.pool_connections = connections;
        self
    }

    /// On an existing database, as another replica would be.
    pub fn on(mut self, database_url: String, database_name: String) -> AppBuilder {
        self.database = Some((database_url, database_name));
        self
    }

    pub async fn spawn(self) -> TestApp {
        let (database_url, database_name) = match self.database {
            Some(database) => database,
            None => fresh_database().await,
        };
        let data_dir = tempfile::tempdir().expect("temp data dir");
        if let Some(providers) = &self.providers {
            std::fs::write(data_dir.path().join("providers.toml"), providers).expect("write providers.toml");
        }
        let worker = self.worker.unwrap_or_else(|| worker_config(false, new_tmux_socket()));
        let limits = Limits { rate_limits: self.rate_limits, pool_connections: self.pool_connections };
        launch_with(database_url, database_name, self.webhooks, data_dir, worker, limits).await
    }
}

/// Another node on `app`'s database, as a second machine would be: its own data directory
/// (so its own node id), tmux server, worker and `providers`, with the worker settings `tweak` says.
pub async fn spawn_node_beside(app: &TestApp, providers: &str, tweak: impl FnOnce(&mut WorkerConfig)) -> TestApp {
    let data_dir = tempfile::tempdir().expect("temp data dir");
    std::fs::write(data_dir.path().join("providers.toml"), providers).expect("write providers.toml");
    let mut worker = worker_config(true, new_tmux_socket());
    tweak(&mut worker);
    let (url, name) = (app.database_url.clone(), app.database_name.clone());
    launch_with(url, name, WebhookSettings::default(), data_dir, worker, Limits::default()).await
}

/// What is left of a stopped instance: its database, data directory (so its node id), projects'
/// repositories and tmux server, whose agents' panes live on. Dropped without [`restart`], it
/// kills the tmux server.
pub struct Stopped {
    pub database_url: String,
    pub database_name: String,
    pub data_dir: tempfile::TempDir,
    pub repos: tempfile::TempDir,
    pub tmux_socket: String,
}

impl Drop for Stopped {
    fn drop(&mut self) {
        if !self.tmux_socket.is_empty() {
            end_tmux_server(&self.tmux_socket);
        }
    }
}

/// Stops `app` as stopping the process would, waiting until it has stopped; its agents' panes
/// keep running in tmux.
pub async fn stop(mut app: TestApp) -> Stopped {
    app.shutdown.cancel();
    if let Some(running) = app.running.take() {
        let stopped = tokio::time::timeout(Duration::from_secs(15), running).await;
        assert!(stopped.is_ok(), "the instance stops within 15 s");
    }
    let tmux_socket = std::mem::take(&mut app.tmux_socket);
    let data_dir = std::mem::replace(&mut app._data_dir, tempfile::tempdir().expect("temp data dir"));
    let repos = std::mem::replace(&mut app.repos, tempfile::tempdir().expect("temp dir"));
    let (database_url, database_name) = (app.database_url.clone(), app.database_name.clone());
    Stopped { database_url, database_name, data_dir, repos, tmux_socket }
}

/// Starts the next instance with its worker on a stopped one's database, data directory and tmux
/// server, as restarting the process would.
pub async fn restart(stopped: Stopped) -> TestApp {
    restart_with(stopped, |_| {}).await
}

/// [`restart`] with the worker settings `tweak` says (the conductor running, say).
pub async fn restart_with(mut stopped: Stopped, tweak: impl FnOnce(&mut WorkerConfig)) -> TestApp {
    let data_dir = std::mem::replace(&mut stopped.data_dir, tempfile::tempdir().expect("temp data dir"));
    let socket = std::mem::take(&mut stopped.tmux_socket);
    let (url, name) = (stopped.database_url.clone(), stopped.database_name.clone());
    let mut worker = worker_config(true, socket);
    tweak(&mut worker);
    let mut app = launch_with(url, name, WebhookSettings::default(), data_dir, worker, Limits::default()).await;
    app.repos = std::mem::replace(&mut stopped.repos, tempfile::tempdir().expect("temp dir"));
    app
}

fn new_tmux_socket() -> String {
    format!("sy-test-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

/// The worker settings of a test instance.
fn worker_config(with_worker: bool, tmux_socket: String) -> WorkerConfig {
    WorkerConfig {
        // Only the worker's own tests run it (`TestApp::builder().worker(…)`): elsewhere agents stay
        // where the test puts them. Likewise the conductor runs only where a test asks for it.
        enabled: with_worker,
        conductor: false,
        tmux_socket,
        reconcile_every: Duration::from_millis(300),
        // Tests that want the merge queue drive it themselves (`TestApp::merge_queue`).
        merge_queue: false,
        // The application runs inside the test binary: hooks run the real `switchyard`.
        switchyard_exe: Some(PathBuf::from(env!("CARGO_BIN_EXE_switchyard"))),
        // The suite's agents get the CPU like its servers: under a loaded CI machine, niced
        // sessions starved them (8 tests timed out beside two busy loops). Tested where it is
        // (`isolation`).
        nice_sessions: false,
        ..WorkerConfig::default()
    }
}

/// Test shells start without the machine's dotfiles: a `.bashrc` that runs `pyenv rehash` (as
/// this machine's does) waits for its lock, and a shell killed mid-rehash by one test leaves the
/// lock to stall every shell after it. A `[providers.shell]` the test wrote itself wins.
fn quiet_shells(data_dir: &std::path::Path) {
    let path = data_dir.join("providers.toml");
    let mut toml = std::fs::read_to_string(&path).unwrap_or_default();
    if !toml.contains("[providers.shell]") {
        toml.push_str("\n[providers.shell]\ncommand = [\"bash\", \"--norc\", \"--noprofile\"]\n");
        std::fs::write(&path, toml).expect("write providers.toml");
    }
}

/// The server's errors (a 500's cause) print with the output of the test that met them, which
/// a failing test shows; `TEST_LOG` (a tracing filter, e.g. `switchyard=debug`) asks for more.
fn capture_server_errors() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let filter = std::env::var("TEST_LOG").unwrap_or_else(|_| "error".to_owned());
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .with_ansi(false)
            .try_init();
    });
}

/// What an instance may use: its rate limits and its pool.
struct Limits {
    rate_limits: RateLimitSettings,
    pool_connections: u32,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { rate_limits: RateLimitSettings::default(), pool_connections: pool_connections() }
    }
}

async fn launch_with(
    database_url: String,
    database_name: String,
    webhooks: WebhookSettings,
    data_dir: tempfile::TempDir,
    mut worker: WorkerConfig,
    limits: Limits,
) -> TestApp {
    capture_server_errors();
    let tmux_socket = worker.tmux_socket.clone();
    // Agents get the logins of an empty home, never those of whoever runs the tests.
    worker.provider_home.get_or_insert_with(|| data_dir.path().join("home"));
    quiet_shells(data_dir.path());
    let settings = Settings {
        database_url: Some(SecretString::from(database_url.clone())),
        data_dir: data_dir.path().to_path_buf(),
        listen: "127.0.0.1:0".parse().expect("addr"),
        status_listen: "127.0.0.1:0".parse().expect("addr"),
        log_format: LogFormat::Text,
        pg_bindir: None,
        worker,
        gate: Default::default(),
        webhooks,
        rate_limits: limits.rate_limits,
        pool_connections: limits.pool_connections,
    };
    let app = Application::build(&settings, Role::Serve).await.expect("build the application");
    let address = format!("http://{}", app.api_addr().expect("serve has an API"));
    let status_address = format!("http://{}", app.status_addr());
    // The test's own connections, apart from the node's (whose pool may be of one): a test that
    // holds one while it calls the API must not starve the node it calls. Closed when idle:
    // several suites may share the test server's `max_connections`.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(4)
        .idle_timeout(Duration::from_secs(2))
        .connect(&database_url)
        .await
        .expect("connect the test's pool");
    let mut tx = pool.begin().await.expect("begin");
    let (_, admin_token) =
        switchyard::db::tokens::create(&mut tx, &format!("test-admin-{}", uuid::Uuid::new_v4().simple()), Scope::Admin)
            .await
            .expect("token");
    tx.commit().await.expect("commit");
    let shutdown = CancellationToken::new();
    let feed = app.feed().clone();
    let running = tokio::spawn(app.run_until(shutdown.clone()));
    TestApp {
        address,
        status_address,
        pool,
        admin_token,
        client: reqwest::Client::new(),
        database_url,
        database_name,
        shutdown,
        tmux_socket,
        _data_dir: data_dir,
        repos: tempfile::tempdir().expect("temp dir"),
        running: Some(running),
        feed,
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// The status endpoint's report (`GET /status` on the status port).
    pub async fn status(&self) -> Value {
        let response = self.client.get(format!("{}/status", self.status_address)).send().await.expect("status");
        response.json().await.expect("status json")
    }

    // The typed client: the API as the admin (or the worker, for an agent's token) sees it.

    /// A request with the admin token.
    pub fn admin(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, self.url(path)).bearer_auth(&self.admin_token)
    }

    /// Makes a token with the given scope through the API and returns its secret.
    pub async fn token(&self, scope: &str) -> String {
        let name = format!("{scope}-{}", Uuid::new_v4().simple());
        let created = assert_json(self.post("/api/v1/tokens", json!({"name": name, "scope": scope})).await, 201).await;
        created["secret"].as_str().expect("secret").to_owned()
    }

    /// The agent's token, as the worker gets it when it spawns the agent.
    pub async fn agent_token(&self, agent: &Value) -> String {
        let mut tx = self.pool.begin().await.expect("begin");
        let secret = switchyard::db::tokens::issue_agent_token(&mut tx, id(agent)).await.expect("token");
        tx.commit().await.expect("commit");
        secret
    }

    /// `method path` with the admin token, and `body` as JSON when there is one.
    pub async fn send(&self, method: Method, path: &str, body: Option<Value>) -> reqwest::Response {
        let request = self.admin(method, path);
        let request = match body {
            Some(body) => request.json(&body),
            None => request,
        };
        request.send().await.expect("request")
    }

    pub async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.send(Method::POST, path, Some(body)).await
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.send(Method::GET, path, None).await
    }

    /// POSTs `body` to `path`, asserts a 2xx answer (showing it if not) and returns its JSON.
    pub async fn post_ok(&self, path: &str, body: Value) -> Value {
        answer(self.post(path, body).await, |status| status.is_success()).await
    }

    /// GETs `path`, asserts a 200 (showing the answer if not) and returns its JSON.
    pub async fn patch_ok(&self, path: &str, body: Value) -> Value {
        assert_json(self.send(Method::PATCH, path, Some(body)).await, 200).await
    }

    pub async fn get_ok(&self, path: &str) -> Value {
        assert_json(self.get(path).await, 200).await
    }

    /// Project `slug` over a repository of its own with one commit on `main` (its `repo_path`),
    /// which lives as long as the app.
    pub async fn create_project(&self, slug: &str) -> Value {
        let repo = self.repos.path().join(slug);
        init_repo(&repo);
        let body = json!({"slug": slug, "name": format!("Project {slug}"), "repo_path": repo});
        assert_json(self.post("/api/v1/projects", body).await, 201).await
    }

    /// Turns off the review of `project`'s wishes: one whose groups are all done completes at
    /// once (the tests of group progress walk wishes by hand, with no reviewer agent).
    pub async fn skip_reviews(&self, project: &str) {
        let body = json!({"conductor_config": {"review": "none"}});
        self.patch_ok(&format!("/api/v1/projects/{project}"), body).await;
    }

    /// A board of `project` made from `body` (name, and columns or a template); see [`column_ids`].
    pub async fn create_board(&self, project: &str, body: Value) -> Value {
        assert_json(self.post(&format!("/api/v1/projects/{project}/boards"), body).await, 201).await
    }

    pub async fn create_task(&self, body: Value) -> Value {
        assert_json(self.post("/api/v1/tasks", body).await, 201).await
    }

    pub async fn create_wish(&self, body: Value) -> Value {
        assert_json(self.post("/api/v1/wishes", body).await, 201).await
    }

    /// Registers an agent (see [`engineer`] for the usual body).
    pub async fn create_agent(&self, body: Value) -> Value {
        assert_json(self.post("/api/v1/agents", body).await, 201).await
    }

    /// Plans, queues and starts wish `slug`: it is `executing`.
    pub async fn start_wish(&self, slug: &str) {
        for action in ["plan", "queue", "start"] {
            self.post_ok(&format!("/api/v1/wishes/{slug}/{action}"), json!({})).await;
        }
    }

    pub async fn agent(&self, name: &str) -> Value {
        self.get_ok(&format!("/api/v1/agents/{name}")).await
    }

    pub async fn task(&self, id: impl std::fmt::Display) -> Value {
        self.get_ok(&format!("/api/v1/tasks/{id}")).await
    }

    /// The agent's state as `GET /agents/{name}` shows it.
    pub async fn agent_state(&self, name: &str) -> AgentState {
        typed(&self.agent(name).await["state"], "an agent's state")
    }

    /// The task's status as `GET /tasks/{id}` shows it.
    pub async fn task_status(&self, id: impl std::fmt::Display) -> TaskStatus {
        typed(&self.task(id).await["status"], "a task's status")
    }

    /// The merge queue's loop over this app's database and data directory, as a node runs it;
    /// the test drives it with `tick()`.
    pub fn merge_queue(&self) -> switchyard::app::merge_queue::MergeQueue {
        let data_dir = self._data_dir.path();
        switchyard::app::merge_queue::MergeQueue::new(switchyard::app::Ctx::new(switchyard::app::Parts {
            db: self.pool.clone(),
            feed: self.feed.clone(),
            node: switchyard::node::NodeInfo::load(data_dir).expect("node id"),
            data_dir: data_dir.to_path_buf(),
            providers: switchyard::providers::LiveProviders::fixed(
                switchyard::providers::Providers::load(data_dir).expect("providers"),
            ),
            panes: None,
        }))
    }

    /// How many events of `event_type` were written about `subject` (`task:<id>`, `agent:<name>`).
    pub async fn count_events(&self, event_type: &str, subject: &str) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM events WHERE type = $1 AND subject = $2")
            .bind(event_type)
            .bind(subject)
            .fetch_one(&self.pool)
            .await
            .expect("count events")
    }

    /// The events `GET /api/v1/events?{query}` lists once `check` holds of them. The log shows
    /// an event only when every transaction older than it has ended, on the whole (shared)
    /// PostgreSQL server, so it may lag what the rows already say.
    pub async fn events_until(&self, query: &str, what: &str, check: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let items = |page: &Value| page["items"].as_array().cloned().unwrap_or_default();
        let page = self
            .get_until(&format!("/api/v1/events?{query}"), what, Duration::from_secs(60), &[], |page| {
                check(&items(page))
            })
            .await;
        items(&page)
    }

    /// `GET {path}` once `check` holds of its answer, asking every 50 ms until `timeout`. On
    /// timeout it panics with what it waited for, the last answer, and the answers of the
    /// `context` paths (what explains the wait: the agents, a task's runs).
    pub async fn get_until(
        &self,
        path: &str,
        what: &str,
        timeout: Duration,
        context: &[&str],
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let now = self.get_ok(path).await;
            if check(&now) {
                return now;
            }
            if Instant::now() > deadline {
                let mut why = format!("timed out waiting for: {what}\n{path}: {now:#}");
                for extra in context {
                    why.push_str(&format!("\n{extra}: {:#}", self.get_ok(extra).await));
                }
                panic!("{why}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The body registering a Claude Code engineer `name` in `project`; [`merged`] changes it.
pub fn engineer(project: &str, name: &str) -> Value {
    json!({"name": name, "project": project, "kind": "worker", "role": "engineer", "provider": "claude"})
}

/// `body` with each of `fields` added or replaced.
pub fn merged(mut body: Value, fields: Value) -> Value {
    for (key, value) in fields.as_object().expect("fields") {
        body[key] = value.clone();
    }
    body
}

/// The `id` of a project, board, task or agent.
/// `value` read as a `T`, or a failure naming `what` and showing the value.
pub fn typed<T: serde::de::DeserializeOwned>(value: &Value, what: &str) -> T {
    serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{what}: {value} ({e})"))
}

pub fn id(value: &Value) -> Uuid {
    value["id"].as_str().and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("no id in {value}"))
}

/// The ids of a board's columns, in order.
pub fn column_ids(board: &Value) -> Vec<Uuid> {
    board["columns"].as_array().expect("columns").iter().map(id).collect()
}

/// The repository a project was made over.
pub fn repo_of(project: &Value) -> PathBuf {
    PathBuf::from(project["repo_path"].as_str().expect("repo_path"))
}

/// Runs git in `dir`, panicking on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .expect("git");
    assert!(output.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Writes `files` (path, content) into `repo`'s working tree and commits them on its branch, as
/// an agent that commits them would (every later clone has them).
pub fn commit_files(repo: &Path, files: &[(&str, &str)], message: &str) {
    for (path, content) in files {
        let path = repo.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("its directory");
        std::fs::write(&path, content).expect("the file");
    }
    git(repo, &["add", "--all"]);
    git(repo, &["commit", "--quiet", "-m", message]);
}

/// A repository with one commit on `main`, in a temp dir of its own.
pub fn git_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    init_repo(dir.path());
    dir
}

/// Makes `path` a repository with one commit on `main`.
pub fn init_repo(path: &Path) {
    std::fs::create_dir_all(path).expect("mkdir");
    git(path, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(path.join("README.md"), "hello\n").expect("write");
    git(path, &["add", "-A"]);
    git(path, &["commit", "--quiet", "-m", "first"]);
}

/// Waits for a condition with a deadline instead of sleeping a fixed time.
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asserts a response has this status (showing its body if not) and returns its JSON body.
pub async fn assert_json(response: reqwest::Response, status: u16) -> Value {
    answer(response, |got| got.as_u16() == status).await
}

/// The JSON body of a response whose status `wanted` accepts (null if it is empty).
async fn answer(response: reqwest::Response, wanted: impl Fn(reqwest::StatusCode) -> bool) -> Value {
    let (url, status) = (response.url().path().to_owned(), response.status());
    let text = response.text().await.expect("body");
    assert!(wanted(status), "{url}: {status} {text}");
    if text.is_empty() {
        return Value::Null;
    }
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{url}: {e} in {text}"))
}

/// Asserts a response is RFC 9457 problem+json with this status, and returns its body.
pub async fn assert_problem(response: reqwest::Response, status: u16) -> Value {
    assert_eq!(response.status().as_u16(), status, "status");
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    assert_eq!(content_type, "application/problem+json");
    let body: Value = response.json().await.expect("problem body");
    assert_eq!(body["status"], status);
    assert!(body["type"].as_str().is_some_and(|t| t.starts_with("/problems/")), "{body}");
    assert!(body["title"].as_str().is_some_and(|t| !t.is_empty()), "{body}");
    assert!(body["detail"].as_str().is_some_and(|t| !t.is_empty()), "{body}");
    body
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn the_database_name_is_replaced_and_the_query_kept() {
        assert_eq!(
            with_database("postgres://u@h:5432/db?sslmode=disable", "x"),
            "postgres://u@h:5432/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://u@h", "x"), "postgres://u@h/x");
    }
}
