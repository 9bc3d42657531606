//! The `switchyard` binary as a user runs it: processes, signals, stdout and stderr.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_switchyard");

/// A `switchyard` command with a clean environment: no DATABASE_URL, given data dir.
pub fn switchyard(data_dir: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_remove("DATABASE_URL")
        .env("SWITCHYARD_DATA_DIR", data_dir)
        .env("SWITCHYARD_LOG_FORMAT", "json")
        .env("SWITCHYARD_LISTEN", "127.0.0.1:0")
        .env("SWITCHYARD_STATUS_LISTEN", "127.0.0.1:0")
        // As the in-process apps' (helpers' `worker_config`).
        .env("SWITCHYARD_NICE_SESSIONS", "false")
        .env("RUST_LOG", "info");
    cmd
}

/// A running `switchyard serve`, its addresses read from its own log.
pub struct Served {
    pub child: Child,
    pub api: String,
    pub status: String,
    pub stdout: Arc<Mutex<String>>,
    /// Everything it logged on stderr, for a failing test to show.
    pub log: Arc<Mutex<String>>,
}

impl Served {
    pub fn start(mut cmd: Command) -> Served {
        cmd.arg("serve").stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn switchyard");
        let stdout = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().expect("stdout");
        let sink = stdout.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(mut s) = sink.lock() {
                    s.push_str(&line);
                    s.push('\n');
                }
            }
        });
        let (tx, rx) = mpsc::channel::<serde_json::Value>();
        let err = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(String::new()));
        let log_sink = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if let Ok(mut s) = log_sink.lock() {
                    s.push_str(&line);
                    s.push('\n');
                }
                let value = serde_json::from_str(&line).unwrap_or(serde_json::json!({"message": line}));
                if tx.send(value).is_err() {
                    // Keep draining so the child never blocks on a full pipe.
                    continue;
                }
            }
        });
        let (mut api, mut status) = (None, None);
        let deadline = Instant::now() + Duration::from_secs(60);
        while status.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match rx.recv_timeout(left) {
                Ok(line) => line,
                Err(_) => {
                    let _ = child.kill();
                    let logged = log.lock().map(|s| s.clone()).unwrap_or_default();
                    panic!("switchyard did not come up: {:?}; it logged:\n{logged}", child.wait());
                }
            };
            let addr = line["addr"].as_str().map(|a| format!("http://{a}"));
            match line["message"].as_str() {
                Some("API and dashboard listening") => api = addr,
                Some("status endpoint listening") => status = addr,
                _ => {}
            }
        }
        Served { child, api: api.expect("API address"), status: status.expect("status address"), stdout, log }
    }

    pub fn pid(&self) -> nix::unistd::Pid {
        nix::unistd::Pid::from_raw(self.child.id() as i32)
    }

    /// SIGTERM, then wait for a clean exit.
    pub fn stop(mut self) -> std::process::ExitStatus {
        nix::sys::signal::kill(self.pid(), nix::sys::signal::Signal::SIGTERM).expect("signal");
        wait_with_deadline(&mut self.child, Duration::from_secs(60))
    }

    /// SIGKILL: the process dies without any cleanup.
    pub fn crash(mut self) {
        self.child.kill().expect("kill");
        let _ = self.child.wait();
    }

    pub fn stdout(&self) -> String {
        self.stdout.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// What it logged on stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

pub fn wait_with_deadline(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(Instant::now() < deadline, "process did not exit in time");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a command as the unprivileged `nobody` when the tests run as root.
pub fn as_normal_user(cmd: &mut Command, data_dir: &Path) -> bool {
    if !nix::unistd::geteuid().is_root() {
        return true;
    }
    let Ok(Some(nobody)) = nix::unistd::User::from_name("nobody") else {
        return false;
    };
    if std::os::unix::fs::chown(data_dir, Some(nobody.uid.as_raw()), Some(nobody.gid.as_raw())).is_err() {
        return false;
    }
    cmd.uid(nobody.uid.as_raw()).gid(nobody.gid.as_raw()).env("HOME", data_dir);
    true
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    let output = cmd.output().expect("run switchyard");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_bad_database_url_fails_fast_naming_the_setting() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _, stderr) = run(switchyard(dir.path()).env("DATABASE_URL", "mysql://nope").arg("serve"));
    assert_eq!(code, 2);
    assert!(stderr.contains("DATABASE_URL"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn the_same_address_for_api_and_status_fails_fast() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _, stderr) = run(switchyard(dir.path())
        .env("SWITCHYARD_LISTEN", "127.0.0.1:18999")
        .env("SWITCHYARD_STATUS_LISTEN", "127.0.0.1:18999")
        .arg("serve"));
    assert_eq!(code, 2);
    assert!(stderr.contains("SWITCHYARD_STATUS_LISTEN"), "{stderr}");
}

#[test]
fn a_listen_address_in_use_is_one_line_naming_the_setting() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _, stderr) = run(switchyard(dir.path())
        .env("SWITCHYARD_LISTEN", taken.local_addr().expect("addr").to_string())
        .env("SWITCHYARD_LOG_FORMAT", "text")
        .arg("serve"));
    assert_eq!(code, 1);
    assert!(stderr.contains("SWITCHYARD_LISTEN"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

#[test]
fn missing_postgresql_binaries_are_one_line_naming_the_package() {
    let dir = tempfile::tempdir().expect("tempdir");
    let empty = tempfile::tempdir().expect("tempdir");
    let (code, _, stderr) = run(switchyard(dir.path()).env("SWITCHYARD_PG_BINDIR", empty.path()).arg("serve"));
    assert_eq!(code, 1);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("`postgresql`") && stderr.contains("apt-get install postgresql"), "{stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"), "{stderr}");
}
