//! The embedded PostgreSQL, with the real binaries: first start, clean stop, restart, and
//! recovery after a crash — as root (cluster run as `postgres`) and as a normal user.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::binary::{as_normal_user, switchyard, Served};

fn postmaster_pid(data_dir: &Path) -> Option<i32> {
    let text = std::fs::read_to_string(data_dir.join("pg/data/postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| !stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

fn no_postgres_on(data_dir: &Path) -> bool {
    let needle = data_dir.join("pg/data");
    std::fs::read_dir("/proc").expect("proc").filter_map(|e| e.ok()).all(|entry| {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let args: Vec<String> = cmdline.split(|b| *b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        !(args.first().is_some_and(|a| a.ends_with("postgres")) && args.iter().any(|a| Path::new(a) == needle))
    })
}

/// A blocking GET's status (these tests are synchronous: they drive processes); 0 when the
/// request could not be made at all.
fn get(url: &str, token: Option<&str>) -> u16 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let mut request = reqwest::Client::new().get(url).timeout(Duration::from_secs(10));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.map(|r| r.status().as_u16()).unwrap_or(0)
    })
}

fn wait_ready(served: &Served) {
    eventually_true("ready", Duration::from_secs(30), || get(&format!("{}/readyz", served.api), None) == 200);
}

fn bootstrap_token(stdout: &str) -> String {
    stdout
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("sy_"))
        .unwrap_or_else(|| panic!("no bootstrap token printed in:\n{stdout}"))
        .to_owned()
}

/// Start, use, stop cleanly, start again: the data and the token survive, the token is
/// printed only on the very first start, and nothing of PostgreSQL is left running.
fn lifecycle(mut cmd_for: impl FnMut() -> Command, data_dir: &Path) {
    let first = Served::start(cmd_for());
    wait_ready(&first);
    let token = bootstrap_token(&first.stdout());
    assert!(first.stdout().contains("/login?code=syl_"), "a one-time login URL printed");
    assert!(!first.stdout().contains(&format!("login?token={token}")), "the token never travels in a URL");
    assert_eq!(get(&format!("{}/api/v1/me", first.api), Some(&token)), 200);
    assert_eq!(get(&format!("{}/status", first.status), None), 200);
    assert!(postmaster_pid(data_dir).is_some_and(alive));
    let status = first.stop();
    assert!(status.success(), "clean exit: {status:?}");
    assert!(no_postgres_on(data_dir), "PostgreSQL stopped with the server");
    assert!(postmaster_pid(data_dir).is_none(), "clean shutdown removes postmaster.pid");

    let second = Served::start(cmd_for());
    wait_ready(&second);
    assert!(!second.stdout().contains("sy_"), "the bootstrap token is printed once only");
    assert_eq!(get(&format!("{}/api/v1/me", second.api), Some(&token)), 200, "data kept across restarts");
    assert!(second.stop().success());
    assert!(no_postgres_on(data_dir));
}

#[test]
fn the_embedded_cluster_starts_stops_and_restarts_with_its_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    lifecycle(|| switchyard(dir.path()), dir.path());
    if nix::unistd::geteuid().is_root() {
        let meta = std::fs::metadata(dir.path().join("pg/data")).expect("cluster dir");
        let postgres = nix::unistd::User::from_name("postgres").expect("lookup").expect("postgres user");
        assert_eq!(
            std::os::unix::fs::MetadataExt::uid(&meta),
            postgres.uid.as_raw(),
            "as root the cluster belongs to postgres"
        );
    }
}

#[test]
fn the_embedded_cluster_works_for_a_normal_user() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("mkdir");
    // The unprivileged user must be able to reach the directory and run the binary.
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let mut probe = switchyard(&data);
    if !as_normal_user(&mut probe, &data)
        || probe.arg("--version").output().map(|o| !o.status.success()).unwrap_or(true)
    {
        eprintln!("skipped: no unprivileged user can run {}", crate::binary::BIN);
        return;
    }
    lifecycle(
        || {
            let mut cmd = switchyard(&data);
            as_normal_user(&mut cmd, &data);
            cmd
        },
        &data,
    );
}

#[test]
fn after_a_crash_the_next_start_recovers_with_postgres_still_running() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = Served::start(switchyard(dir.path()));
    wait_ready(&first);
    let token = bootstrap_token(&first.stdout());
    first.crash();
    let orphan = postmaster_pid(dir.path()).expect("postmaster.pid left behind");
    assert!(alive(orphan), "PostgreSQL outlives a SIGKILLed switchyard");

    let second = Served::start(switchyard(dir.path()));
    wait_ready(&second);
    assert_eq!(get(&format!("{}/api/v1/me", second.api), Some(&token)), 200);
    assert!(!alive(orphan), "the orphaned server was stopped and replaced");
    assert!(second.stop().success());
    assert!(no_postgres_on(dir.path()));
}

#[test]
fn after_a_crash_of_both_a_stale_postmaster_pid_is_recovered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = Served::start(switchyard(dir.path()));
    wait_ready(&first);
    let token = bootstrap_token(&first.stdout());
    first.crash();
    let orphan = postmaster_pid(dir.path()).expect("postmaster.pid");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(orphan), nix::sys::signal::Signal::SIGKILL)
        .expect("kill postgres");
    eventually_true("the killed postgres is gone", Duration::from_secs(10), || !alive(orphan));
    // Worse still: the stale file names a live process that is not PostgreSQL at all.
    let pid_file = dir.path().join("pg/data/postmaster.pid");
    let text = std::fs::read_to_string(&pid_file).expect("stale pid file");
    let rest: Vec<&str> = text.lines().skip(1).collect();
    std::fs::write(&pid_file, format!("{}\n{}\n", std::process::id(), rest.join("\n"))).expect("rewrite");

    let second = Served::start(switchyard(dir.path()));
    wait_ready(&second);
    assert_eq!(get(&format!("{}/api/v1/me", second.api), Some(&token)), 200, "committed data survived");
    assert!(second.stop().success());
    assert!(no_postgres_on(dir.path()));
}

#[test]
fn a_second_server_on_the_same_data_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = Served::start(switchyard(dir.path()));
    wait_ready(&first);
    let output = switchyard(dir.path()).arg("serve").output().expect("run");
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("another switchyard is using the data directory"), "{stderr}");
    // The first one is unharmed.
    assert_eq!(get(&format!("{}/readyz", first.api), None), 200);
    // A one-shot command uses the running cluster instead of starting its own.
    let made =
        switchyard(dir.path()).args(["token", "create", "--name", "cli", "--scope", "write"]).output().expect("run");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let secret = String::from_utf8_lossy(&made.stdout).trim().to_owned();
    assert_eq!(get(&format!("{}/api/v1/me", first.api), Some(&secret)), 200);
    assert!(first.stop().success());
}

#[test]
fn token_commands_and_migrate_work_without_a_running_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let migrate = switchyard(dir.path()).arg("migrate").output().expect("run");
    assert!(migrate.status.success(), "{}", String::from_utf8_lossy(&migrate.stderr));
    let made =
        switchyard(dir.path()).args(["token", "create", "--name", "ops", "--scope", "admin"]).output().expect("run");
    assert!(made.status.success());
    let listed = switchyard(dir.path()).args(["token", "list"]).output().expect("run");
    let listing = String::from_utf8_lossy(&listed.stdout);
    assert!(listing.contains("ops") && listing.contains("admin") && listing.contains("live"), "{listing}");
    assert!(!listing.contains(String::from_utf8_lossy(&made.stdout).trim()), "secrets never listed");
    let revoked = switchyard(dir.path()).args(["token", "revoke", "ops"]).output().expect("run");
    assert!(revoked.status.success());
    let again = switchyard(dir.path()).args(["token", "revoke", "ops"]).output().expect("run");
    assert_eq!(again.status.code(), Some(1));
    // A reader that closed stdout (as `| head` leaves it) ends the output, not the command: the
    // token is made and revoked, and the cluster is still stopped below.
    for args in [&["token", "create", "--name", "piped"][..], &["token", "revoke", "piped"]] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let out = switchyard(dir.path()).args(args).stdout(writer).output().expect("run");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !err.contains("panicked"), "{:?} {err}", out.status);
    }
    let listed = switchyard(dir.path()).args(["token", "list"]).output().expect("run");
    let piped = String::from_utf8_lossy(&listed.stdout).lines().find(|l| l.contains("piped")).map(str::to_owned);
    assert!(piped.as_deref().is_some_and(|l| l.ends_with("revoked")), "{piped:?}");
    assert!(no_postgres_on(dir.path()), "one-shot commands stop the cluster they started");
}

/// A blocking GET's status, headers and body.
fn fetch(url: &str, token: Option<&str>) -> (u16, reqwest::header::HeaderMap, String) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let mut request = reqwest::Client::new().get(url).timeout(Duration::from_secs(10));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        match request.send().await {
            Ok(r) => (r.status().as_u16(), r.headers().clone(), r.text().await.unwrap_or_default()),
            Err(_) => (0, Default::default(), String::new()),
        }
    })
}

/// The postmaster's child whose title names `role` (`checkpointer`, …).
fn postgres_child(postmaster: i32, role: &str) -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.filter_map(|e| e.ok()).find_map(|entry| {
        let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
        let ppid: i32 = stat.rsplit(')').next()?.split_whitespace().nth(1)?.parse().ok()?;
        let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
        (ppid == postmaster && String::from_utf8_lossy(&cmdline).contains(role)).then_some(pid)
    })
}

/// A process held stopped (SIGSTOP) until dropped, even when the test fails.
struct Stopped(i32);

impl Stopped {
    fn new(pid: i32) -> Stopped {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGSTOP).expect("SIGSTOP");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.0), nix::sys::signal::Signal::SIGCONT);
    }
}

fn status_json(served: &Served) -> serde_json::Value {
    let (_, _, body) = fetch(&format!("{}/status", served.status), None);
    serde_json::from_str(&body).unwrap_or_else(|_| panic!("/status answers JSON: {body}"))
}

/// Polls `check` until it holds, failing after `limit`: the one wait of these process-level tests.
fn eventually_true(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !check() {
        assert!(std::time::Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_killed_embedded_postgres_is_started_again_and_meanwhile_calls_answer_503_with_retry_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let served = Served::start(switchyard(dir.path()));
    wait_ready(&served);
    let token = bootstrap_token(&served.stdout());
    let me = format!("{}/api/v1/me", served.api);
    let postmaster = postmaster_pid(dir.path()).expect("postmaster.pid");
    // One of its processes outlives it for a while (held stopped here): the new server must not
    // start beside it, so the outage lasts until the test lets it go.
    let checkpointer = postgres_child(postmaster, "checkpointer").expect("a checkpointer process");
    let held = Stopped::new(checkpointer);
    // Under load: a client keeps creating tokens through the kill and the outage; every one the
    // server acknowledged must still be there after the recovery.
    let load = Load::start(&served.api, &token);
    eventually_true("the load has written", Duration::from_secs(30), || load.acknowledged() >= 50);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(postmaster), nix::sys::signal::Signal::SIGKILL).expect("kill");
    eventually_true("/readyz says 503 while the database is gone", Duration::from_secs(30), || {
        get(&format!("{}/readyz", served.api), None) == 503
    });

    eventually_true("a call answers 503", Duration::from_secs(30), || {
        let started = std::time::Instant::now();
        let (status, headers, body) = fetch(&me, Some(&token));
        if status != 503 {
            assert_ne!(status, 500, "an outage is not an internal error: {body}");
            return false;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "fails fast: {:?}", started.elapsed());
        assert_eq!(headers["content-type"], "application/problem+json");
        assert_eq!(headers["retry-after"], "1");
        let problem: serde_json::Value = serde_json::from_str(&body).expect("problem json");
        assert_eq!(problem["type"], "/problems/unavailable");
        true
    });
    eventually_true("/status says the database is restarting", Duration::from_secs(30), || {
        let status = status_json(&served);
        status["database"] == "restarting" && status["embedded"]["state"] == "restarting"
    });
    assert!(served.log().contains("the embedded PostgreSQL died; starting it again"), "{}", served.log());
    eventually_true("the wait for the old process is logged", Duration::from_secs(10), || {
        served.log().contains("still hold its shared memory")
    });
    assert!(postmaster_pid(dir.path()).is_some_and(|pid| !alive(pid)), "nothing started beside the old process");

    drop(held);
    wait_ready(&served);
    assert_eq!(get(&me, Some(&token)), 200, "calls succeed again");
    let acknowledged = load.stop();
    let (_, _, listed) = fetch(&format!("{}/api/v1/tokens", served.api), Some(&token));
    let listed: Vec<serde_json::Value> = serde_json::from_str(&listed).expect("tokens");
    let names: std::collections::HashSet<&str> = listed.iter().filter_map(|t| t["name"].as_str()).collect();
    for name in &acknowledged {
        assert!(names.contains(name.as_str()), "token {name} was acknowledged, then lost");
    }
    println!("embedded PostgreSQL killed under load: {} writes acknowledged, none lost", acknowledged.len());
    let status = status_json(&served);
    assert_eq!(status["database"], "ok");
    assert_eq!(status["embedded"]["state"], "running");
    assert_eq!(status["embedded"]["restarts"], 1);
    assert!(status["embedded"]["last_exit"].as_str().is_some_and(|e| e.contains('9')), "{status}");
    assert!(status["node_id"].is_string() && status["worker"].is_object(), "the other fields stay: {status}");
    assert!(served.stop().success());
    assert!(no_postgres_on(dir.path()));
}

#[test]
fn sigterm_exits_in_time_while_the_embedded_postgres_hangs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut served = Served::start(switchyard(dir.path()));
    wait_ready(&served);
    let postmaster = postmaster_pid(dir.path()).expect("postmaster.pid");
    let _held = Stopped::new(postmaster);
    nix::sys::signal::kill(served.pid(), nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let started = std::time::Instant::now();
    let status = crate::binary::wait_with_deadline(&mut served.child, Duration::from_secs(60));
    assert!(started.elapsed() < Duration::from_secs(30), "exited after {:?}", started.elapsed());
    assert!(status.success(), "{status:?}; it logged:\n{}", served.log());
    eventually_true("PostgreSQL is gone", Duration::from_secs(10), || no_postgres_on(dir.path()));
}

/// A client creating tokens one after another until stopped; it keeps the names the server
/// acknowledged (201).
struct Load {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    acknowledged: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(api: &str, token: &str) -> Load {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let acknowledged = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (url, token) = (format!("{api}/api/v1/tokens"), token.to_owned());
        let (until, acked) = (stop.clone(), acknowledged.clone());
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            let client = reqwest::Client::new();
            let mut i = 0;
            while !until.load(std::sync::atomic::Ordering::SeqCst) {
                i += 1;
                let name = format!("load-{i}");
                let body = serde_json::json!({"name": name, "scope": "read"});
                // Built inside the runtime: the request's timeout is a timer of that runtime.
                let sent = runtime.block_on(async {
                    client.post(&url).bearer_auth(&token).timeout(Duration::from_secs(10)).json(&body).send().await
                });
                if sent.is_ok_and(|r| r.status() == 201) {
                    acked.lock().expect("lock").push(name);
                } else {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        });
        Load { stop, acknowledged, thread: Some(thread) }
    }

    fn acknowledged(&self) -> usize {
        self.acknowledged.lock().expect("lock").len()
    }

    /// Stops the client and returns the names the server acknowledged.
    fn stop(mut self) -> Vec<String> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().expect("load thread");
        }
        self.acknowledged.lock().expect("lock").clone()
    }
}
