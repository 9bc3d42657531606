//! `cargo bench --bench domain`: the domain core's figures (issue 3), printed, never asserted.
//!
//! Runs the real application in-process against the PostgreSQL server in `BENCH_DATABASE_URL`
//! (default `postgres://postgres@127.0.0.1:5432/postgres`; it creates and drops its own
//! databases there) and measures, in one run:
//! 1. `GET /api/v1/tasks/{id}` at 64 concurrent connections next to a raw sqlx primary-key
//!    select loop at the same concurrency, and their ratio; then the same pair with each load from
//!    a client process of its own (`wrk` against the API, `pgbench -S` against PostgreSQL), when
//!    `wrk` is installed;
//! 2. completing one group in wishes of 10, 100 and 1,000 groups, and with 1, 10 and 100 direct
//!    dependents: time and SQL statements per completion (statements counted from sqlx's own
//!    `sqlx::query` trace events inside the request's span);
//! 3. group completions per second at 8 concurrent clients (each completion makes one dependent
//!    ready), next to `pgbench` TPC-B at 8 clients on the same server, and their ratio.
//!
//! `BENCH_SECONDS` sets the length of each timed load phase (default 10), `BENCH_PAIRS` the completions
//! per client in part 3 (default 400); `BENCH_ONLY=reads`,
//! `scaling` or `throughput` runs one part.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard::worker::WorkerConfig;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

#[path = "common/mod.rs"]
mod common;

/// Statements the application sent, counted from sqlx's per-statement trace events.
static STATEMENTS: AtomicU64 = AtomicU64::new(0);
/// Turns counting on and off. Tracing is on only while counting: a span per request and a log
/// line per statement would otherwise slow the load phases down. Reloading the filter rebuilds
/// tracing's per-callsite cache, which a filter that merely reads a flag would not.
static COUNTING: OnceLock<Box<dyn Fn(bool) + Send + Sync>> = OnceLock::new();

fn counting(on: bool) {
    if let Some(set) = COUNTING.get() {
        set(on);
    }
}

struct CountStatements;

/// Counts only statements sent while serving a request (inside the `http` span), so the
/// background loops (webhook delivery, event feed) do not blur the per-request figures.
impl<S> Layer<S> for CountStatements
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        let in_request = ctx.event_scope(event).is_some_and(|mut scope| scope.any(|span| span.name() == "http"));
        if in_request {
            STATEMENTS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

struct Bench {
    api: String,
    token: String,
    client: reqwest::Client,
    addr: SocketAddr,
    database_url: String,
    server_url: String,
    seconds: u64,
    /// Concurrent clients of the read loads (64, or fewer when the server has no room for them).
    clients: usize,
}

/// How many concurrent raw clients the PostgreSQL server has room for beside the app's pools:
/// 64, or what `max_connections` leaves (a stock Debian server allows 100); too few to measure
/// anything, and the bench says what to raise instead of failing with "too many clients".
async fn room_for_clients(server_url: &str) -> anyhow::Result<usize> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(server_url).await?;
    let (max, reserved, used): (i32, i32, i64) = sqlx::query_as(
        "SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int,
                (SELECT count(*) FROM pg_stat_activity)",
    )
    .fetch_one(&mut conn)
    .await?;
    conn.close().await?;
    let app = i64::from(switchyard::db::NODE_CONNECTIONS);
    let room = i64::from(max - reserved) - used - app - 4;
    anyhow::ensure!(
        room >= 16,
        "PostgreSQL allows {max} connections ({reserved} reserved, {used} in use) and the app takes up to {app}: \
         too few left for the read loads. Raise max_connections (e.g. to 200) and restart PostgreSQL."
    );
    Ok(room.min(64) as usize)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if !common::invoked_by_cargo_bench("domain") {
        return Ok(());
    }
    let off = || tracing_subscriber::filter::Targets::new();
    let (filter, reload) = tracing_subscriber::reload::Layer::new(off());
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(CountStatements.with_filter(filter)))?;
    let _ = COUNTING.set(Box::new(move |on| {
        let targets = if on {
            // The request's span (`http`) is opened in `switchyard::routes`: without it no statement
            // is inside a request, and the count stays 0.
            off()
                .with_target("sqlx::query", tracing::Level::TRACE)
                .with_target("switchyard::routes", tracing::Level::INFO)
                .with_target("switchyard::api", tracing::Level::INFO)
        } else {
            off()
        };
        if let Err(e) = reload.reload(targets) {
            eprintln!("cannot switch statement counting: {e}");
        }
    }));

    let server_url = common::server_url();
    let seconds = common::env_num("BENCH_SECONDS", 10);
    let database_url = common::fresh_database(&server_url, "switchyard_bench").await?;
    let data_dir = tempfile::tempdir()?;
    // The API alone is measured; the (idle) worker and its socket stay out of the way.
    let worker = WorkerConfig {
        enabled: false,
        tmux_socket: format!("sy-bench-{}", std::process::id()),
        ..WorkerConfig::default()
    };
    let clients = room_for_clients(&server_url).await?;
    let app = common::start(&database_url, data_dir.path(), worker).await?;
    let bench = Bench {
        api: app.api(),
        token: app.token.clone(),
        client: reqwest::Client::new(),
        addr: app.addr,
        database_url,
        server_url,
        seconds,
        clients,
    };
    let repo = common::git_repo()?;
    bench.post("/projects", json!({"slug": "bench", "name": "Bench", "repo_path": repo.path()})).await?;

    println!("# Switchyard domain benchmark ({} s per load phase)", bench.seconds);
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    if only.is_empty() || only == "reads" {
        bench.task_reads().await?;
    }
    if only.is_empty() || only == "scaling" {
        bench.completion_scaling().await?;
    }
    if only.is_empty() || only == "throughput" {
        bench.completion_throughput().await?;
    }

    app.stop().await?;
    common::drop_database(&bench.server_url, "switchyard_bench").await
}

impl Bench {
    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let response =
            self.client.post(format!("{}{path}", self.api)).bearer_auth(&self.token).json(&body).send().await?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        anyhow::ensure!(status.is_success(), "POST {path}: {status} {body}");
        Ok(body)
    }

    /// Creates a wish from `groups` and brings it to `executing`.
    async fn executing_wish(&self, slug: &str, groups: Vec<Value>) -> anyhow::Result<()> {
        self.post("/wishes", json!({"slug": slug, "project": "bench", "title": slug, "groups": groups})).await?;
        for action in ["plan", "queue", "start"] {
            self.post(&format!("/wishes/{slug}/{action}"), json!({})).await?;
        }
        Ok(())
    }

    /// First: one task read over HTTP versus straight from PostgreSQL, `clients` (64) at a time.
    async fn task_reads(&self) -> anyhow::Result<()> {
        let task = self.post("/tasks", json!({"project": "bench", "title": "Read me"})).await?;
        let id: uuid::Uuid = task["id"].as_str().expect("task id").parse()?;
        let duration = Duration::from_secs(self.seconds);

        let clients = self.clients;
        let pool =
            sqlx::postgres::PgPoolOptions::new().max_connections(clients as u32).connect(&self.database_url).await?;
        let deadline = Instant::now() + duration;
        let started = Instant::now();
        let workers = (0..clients).map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                // One connection per worker, as the HTTP side keeps one connection alive.
                let mut conn = pool.acquire().await?;
                let mut latencies = Vec::new();
                while Instant::now() < deadline {
                    let t = Instant::now();
                    sqlx::query("SELECT * FROM tasks WHERE id = $1").bind(id).fetch_one(&mut *conn).await?;
                    latencies.push(t.elapsed());
                }
                anyhow::Ok(latencies)
            })
        });
        let raw = gather(workers.collect(), started).await?;
        pool.close().await;

        let path = format!("/api/v1/tasks/{id}");
        // Counted warm, as under load: the token was verified by the request before.
        let mut http = Http::connect(self.addr).await?;
        http.request("GET", &path, &self.token).await?;
        counting(true);
        let before = STATEMENTS.load(Ordering::Relaxed);
        http.request("GET", &path, &self.token).await?;
        let per_get = STATEMENTS.load(Ordering::Relaxed) - before;
        counting(false);

        let http = http_load(self.addr, clients, duration, "GET", path.clone(), self.token.clone()).await?;

        println!("\n## GET /api/v1/tasks/{{id}}, {clients} concurrent connections");
        println!("raw sqlx PK select : {}", raw.summary());
        println!("HTTP API           : {}", http.summary());
        println!("ratio API / raw    : {:.0} %", 100.0 * http.per_second() / raw.per_second());
        println!("SQL statements per GET: {per_get}");
        self.task_reads_from_other_processes(&path).await
    }

    /// The same pair with each load from a client process of its own, as the issue names it:
    /// `wrk` against the API and `pgbench -S` (its primary-key select) against PostgreSQL, 64
    /// connections and 2 threads each. The in-process pair above shares the bench's runtime
    /// between the HTTP client and the server, which the raw loop's server (PostgreSQL) does not.
    async fn task_reads_from_other_processes(&self, path: &str) -> anyhow::Result<()> {
        if !which("wrk") {
            println!("(wrk not found: `apt-get install wrk` for the same pair from separate client processes)");
            return Ok(());
        }
        let seconds = self.seconds.to_string();
        let clients = self.clients.to_string();
        let url = common::fresh_database(&self.server_url, "switchyard_bench_pgbench_select").await?;
        run("pgbench", &["-i", "-q", "-s", "1", &url])?;
        self.checkpoint().await?;
        let raw = pgbench_tps(&run(
            "pgbench",
            &["-n", "-S", "-M", "prepared", "-c", &clients, "-j", "2", "-T", &seconds, &url],
        )?)?;
        common::drop_database(&self.server_url, "switchyard_bench_pgbench_select").await?;
        let header = format!("Authorization: Bearer {}", self.token);
        let target = format!("http://{}{path}", self.addr);
        let out = run(
            "wrk",
            &["-t", "2", "-c", &clients, "-d", &format!("{seconds}s"), "--latency", "-H", &header, &target],
        )?;
        let field = |prefix: &str| {
            out.lines().find_map(|l| l.trim_start().strip_prefix(prefix)).map(|rest| rest.trim().to_owned())
        };
        let http: f64 =
            field("Requests/sec:").and_then(|n| n.parse().ok()).ok_or_else(|| anyhow::anyhow!("wrk said:\n{out}"))?;
        let p50 = field("50%").unwrap_or_default();
        let p99 = field("99%").unwrap_or_default();
        println!("\n## The same, each load from a client process of its own ({clients} connections, 2 threads)");
        println!("pgbench -S (prepared): {raw:>8.0}/s");
        println!("HTTP API (wrk)       : {http:>8.0}/s  p50 {p50}  p99 {p99}");
        println!("ratio API / raw      : {:.0} %", 100.0 * http / raw);
        Ok(())
    }

    /// Second: completing a group costs the same in a wish of 10 or 1,000 groups; it grows only
    /// with the group's direct dependents.
    async fn completion_scaling(&self) -> anyhow::Result<()> {
        println!("\n## Completing one group (sequential, mean of the completions measured)");
        println!("{:>12} {:>11} {:>12} {:>14}", "wish groups", "dependents", "ms/complete", "SQL/complete");
        for size in [10, 100, 1000] {
            let slug = format!("size-{size}");
            let groups = (0..size).map(|i| json!({"key": format!("g{i}"), "title": "g"})).collect();
            self.executing_wish(&slug, groups).await?;
            let keys: Vec<String> = (0..size.min(50)).map(|i| format!("g{i}")).collect();
            let (ms, statements) = self.complete_measured(&slug, &keys).await?;
            println!("{size:>12} {:>11} {ms:>12.2} {statements:>14.1}", 0);
        }
        for dependents in [1, 10, 100] {
            let slug = format!("fan-{dependents}");
            let hubs = 5;
            let mut groups = Vec::new();
            for h in 0..hubs {
                groups.push(json!({"key": format!("h{h}"), "title": "hub"}));
                for d in 0..dependents {
                    groups.push(
                        json!({"key": format!("h{h}-d{d}"), "title": "dependent", "depends_on": [format!("h{h}")]}),
                    );
                }
            }
            for f in groups.len()..1000 {
                groups.push(json!({"key": format!("f{f}"), "title": "filler"}));
            }
            self.executing_wish(&slug, groups).await?;
            let keys: Vec<String> = (0..hubs).map(|h| format!("h{h}")).collect();
            let (ms, statements) = self.complete_measured(&slug, &keys).await?;
            println!("{:>12} {dependents:>11} {ms:>12.2} {statements:>14.1}", 1000);
        }
        Ok(())
    }

    /// Starts then completes each group in turn; returns mean milliseconds and statements per
    /// completion (the start is not counted).
    async fn complete_measured(&self, slug: &str, keys: &[String]) -> anyhow::Result<(f64, f64)> {
        let (mut elapsed, mut statements) = (Duration::ZERO, 0);
        for key in keys {
            self.post(&format!("/wishes/{slug}/groups/{key}/start"), json!({})).await?;
            counting(true);
            let before = STATEMENTS.load(Ordering::Relaxed);
            let started = Instant::now();
            self.post(&format!("/wishes/{slug}/groups/{key}/complete"), json!({})).await?;
            elapsed += started.elapsed();
            statements += STATEMENTS.load(Ordering::Relaxed) - before;
            counting(false);
        }
        let n = keys.len() as f64;
        Ok((elapsed.as_secs_f64() * 1000.0 / n, statements as f64 / n))
    }

    /// Third: completions per second at 8 clients, each completion making one dependent ready,
    /// in one shared wish and in one wish per client; then pgbench TPC-B on the same server.
    async fn completion_throughput(&self) -> anyhow::Result<()> {
        println!("\n## Group completions per second, 8 concurrent clients");
        // Enough for a few seconds of load at ~1,000/s; preparing them takes longer than that.
        let per_client = common::env_num("BENCH_PAIRS", 400) as usize;
        let shared = self.prepared_pairs(&["shared"], 8 * per_client).await?;
        self.checkpoint().await?;
        let one_wish = self.complete_concurrently(shared).await?;
        let slugs: Vec<String> = (0..8).map(|c| format!("own-{c}")).collect();
        let slugs: Vec<&str> = slugs.iter().map(String::as_str).collect();
        let own = self.prepared_pairs(&slugs, per_client).await?;
        self.checkpoint().await?;
        let own_wishes = self.complete_concurrently(own).await?;
        let tps = self.pgbench_tpcb().await?;
        println!("one wish, 8 clients      : {}", one_wish.summary());
        println!("a wish per client        : {}", own_wishes.summary());
        println!("pgbench TPC-B, 8 clients : {tps:.0} tps");
        println!(
            "ratio completions / TPC-B: {:.0} % (one wish), {:.0} % (a wish per client)",
            100.0 * one_wish.per_second() / tps,
            100.0 * own_wishes.per_second() / tps
        );
        Ok(())
    }

    /// Wishes of `pairs` groups `a{i}` each with one dependent `b{i}`, every `a` started; returns
    /// the completion paths, spread over 8 clients.
    async fn prepared_pairs(&self, slugs: &[&str], pairs: usize) -> anyhow::Result<Vec<Vec<String>>> {
        let mut urls = Vec::new();
        for slug in slugs {
            let mut groups = Vec::new();
            for i in 0..pairs {
                groups.push(json!({"key": format!("a{i}"), "title": "a"}));
                groups.push(json!({"key": format!("b{i}"), "title": "b", "depends_on": [format!("a{i}")]}));
            }
            self.executing_wish(slug, groups).await?;
            for i in 0..pairs {
                self.post(&format!("/wishes/{slug}/groups/a{i}/start"), json!({})).await?;
                urls.push(format!("/api/v1/wishes/{slug}/groups/a{i}/complete"));
            }
        }
        let per_client = urls.len().div_ceil(8);
        Ok(urls.chunks(per_client).map(<[String]>::to_vec).collect())
    }

    async fn complete_concurrently(&self, work: Vec<Vec<String>>) -> anyhow::Result<Stats> {
        let started = Instant::now();
        let workers = work.into_iter().map(|paths| {
            let (addr, token) = (self.addr, self.token.clone());
            tokio::spawn(async move {
                let mut http = Http::connect(addr).await?;
                let mut latencies = Vec::with_capacity(paths.len());
                for path in paths {
                    let t = Instant::now();
                    let status = http.request("POST", &path, &token).await?;
                    anyhow::ensure!(status == 200, "complete {path}: {status}");
                    latencies.push(t.elapsed());
                }
                anyhow::Ok(latencies)
            })
        });
        gather(workers.collect(), started).await
    }

    /// Writes out what preparing a phase left in PostgreSQL's buffers, so that no checkpoint of
    /// it falls into the phase measured (each side of a ratio gets one first).
    async fn checkpoint(&self) -> anyhow::Result<()> {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&self.server_url).await?;
        sqlx::query("CHECKPOINT").execute(&mut conn).await?;
        Ok(())
    }

    /// pgbench's TPC-B at 8 clients on the same server, in a database of its own.
    async fn pgbench_tpcb(&self) -> anyhow::Result<f64> {
        let url = common::fresh_database(&self.server_url, "switchyard_bench_pgbench").await?;
        run("pgbench", &["-i", "-q", "-s", "8", &url])?;
        self.checkpoint().await?;
        let tps = pgbench_tps(&run("pgbench", &["-n", "-c", "8", "-j", "2", "-T", &self.seconds.to_string(), &url])?);
        common::drop_database(&self.server_url, "switchyard_bench_pgbench").await?;
        tps
    }
}

/// The transactions per second pgbench reports.
fn pgbench_tps(out: &str) -> anyhow::Result<f64> {
    let tps = out
        .lines()
        .find_map(|l| l.strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok());
    tps.ok_or_else(|| anyhow::anyhow!("no tps in pgbench output:\n{out}"))
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Latencies of a load phase and its wall time.
struct Stats {
    latencies: Vec<Duration>,
    wall: Duration,
}

impl Stats {
    fn new(mut latencies: Vec<Duration>, wall: Duration) -> Stats {
        latencies.sort();
        Stats { latencies, wall }
    }

    fn per_second(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64()
    }

    fn percentile(&self, p: f64) -> Duration {
        let i = ((self.latencies.len() as f64 * p).ceil() as usize).saturating_sub(1);
        self.latencies.get(i).copied().unwrap_or_default()
    }

    fn summary(&self) -> String {
        format!(
            "{:>8.0}/s  p50 {:>6.2} ms  p99 {:>6.2} ms  ({} in {:.1} s)",
            self.per_second(),
            self.percentile(0.50).as_secs_f64() * 1000.0,
            self.percentile(0.99).as_secs_f64() * 1000.0,
            self.latencies.len(),
            self.wall.as_secs_f64()
        )
    }
}

/// Latencies from worker tasks, as one phase's figures.
async fn gather(
    workers: Vec<tokio::task::JoinHandle<anyhow::Result<Vec<Duration>>>>,
    started: Instant,
) -> anyhow::Result<Stats> {
    let mut latencies = Vec::new();
    for worker in workers {
        latencies.extend(worker.await??);
    }
    Ok(Stats::new(latencies, started.elapsed()))
}

/// `concurrency` keep-alive connections sending `method path` until `duration` is up.
async fn http_load(
    addr: SocketAddr,
    concurrency: usize,
    duration: Duration,
    method: &'static str,
    path: String,
    token: String,
) -> anyhow::Result<Stats> {
    let deadline = Instant::now() + duration;
    let started = Instant::now();
    let workers = (0..concurrency).map(|_| {
        let (path, token) = (path.clone(), token.clone());
        tokio::spawn(async move {
            let mut http = Http::connect(addr).await?;
            let mut latencies = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                let status = http.request(method, &path, &token).await?;
                anyhow::ensure!(status == 200, "{method} {path}: {status}");
                latencies.push(t.elapsed());
            }
            anyhow::Ok(latencies)
        })
    });
    gather(workers.collect(), started).await
}

/// A bare HTTP/1.1 keep-alive connection, about as light as `wrk`, so the figures are the
/// server's rather than a client library's (client and server share the machine's cores).
struct Http {
    stream: BufReader<TcpStream>,
}

impl Http {
    async fn connect(addr: SocketAddr) -> anyhow::Result<Http> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Http { stream: BufReader::new(stream) })
    }

    /// Sends a request without a body and reads the whole response; returns its status.
    async fn request(&mut self, method: &str, path: &str, token: &str) -> anyhow::Result<u16> {
        let request = format!(
            "{method} {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\n\r\n"
        );
        self.stream.get_mut().write_all(request.as_bytes()).await?;
        let mut line = String::new();
        self.stream.read_line(&mut line).await?;
        let status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok());
        let status = status.ok_or_else(|| anyhow::anyhow!("not an HTTP status line: {line:?}"))?;
        let mut length = 0;
        loop {
            line.clear();
            self.stream.read_line(&mut line).await?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse()?;
                }
            }
        }
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).await?;
        Ok(status)
    }
}

fn run(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new(program).args(args).output()?;
    anyhow::ensure!(out.status.success(), "{program} failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
