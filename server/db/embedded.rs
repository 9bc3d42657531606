//! The embedded PostgreSQL: a private cluster under the data directory, made with the machine's
//! own `initdb` and run with its own `postgres`, listening only on a Unix socket inside that
//! directory (no TCP port, so nothing collides and nobody else connects). As root, the cluster
//! runs as the `postgres` user and its directory belongs to that user.
//!
//! Layout under `<root>` (normally `<data-dir>/pg`): `data/` (the cluster), the socket, and
//! `server.log`.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::{Pid, User};
use sqlx::postgres::PgConnectOptions;
use sqlx::Connection;

mod supervisor;
pub use supervisor::{EmbeddedHealth, SharedEmbeddedHealth};

/// The role and database the cluster is made with.
const SUPERUSER: &str = "switchyard";
pub const DATABASE: &str = "switchyard";
const START_DEADLINE: Duration = Duration::from_secs(60);
/// Fast shutdown's deadline; past it, immediate shutdown (crash-safe: WAL replays at the next
/// start), so that stopping is bounded whatever the server is doing.
const STOP_DEADLINE: Duration = Duration::from_secs(15);
/// How long a start waits for the processes of a dead server to let go of its shared memory.
const SHARED_MEMORY_DEADLINE: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum EmbeddedError {
    #[error(
        "PostgreSQL server binaries (initdb, postgres) not found{0}; install the Debian package \
         `postgresql` (apt-get install postgresql) or set DATABASE_URL"
    )]
    BinariesMissing(String),
    #[error(
        "the embedded PostgreSQL runs as user `postgres`, which cannot reach {0} (no search \
         permission); choose a data directory it can reach with --data-dir / SWITCHYARD_DATA_DIR"
    )]
    Unreachable(PathBuf),
    #[error("running as root needs the `postgres` user for the embedded PostgreSQL; install the Debian package `postgresql`")]
    NoPostgresUser,
    #[error("the data directory path {0} is too long for a Unix socket (at most 100 bytes); set a shorter SWITCHYARD_DATA_DIR")]
    PathTooLong(PathBuf),
    #[error("{what} failed: {detail}")]
    Command { what: String, detail: String },
    #[error("embedded PostgreSQL: {0}")]
    Io(String),
}

impl From<std::io::Error> for EmbeddedError {
    fn from(e: std::io::Error) -> Self {
        EmbeddedError::Io(e.to_string())
    }
}

/// How the cluster is run: durable for user data; tests may trade durability for speed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    Durable,
    /// fsync off: only for throw-away test clusters.
    Volatile,
}

pub struct EmbeddedPostgres {
    bindir: PathBuf,
    root: PathBuf,
    owner: Option<User>,
    durability: Durability,
    child: std::sync::Mutex<Option<Child>>,
}

/// The cluster's directory in the data directory, owned by `postgres` when we are root.
pub const ROOT: &str = crate::data_dir::EMBEDDED_CLUSTER;

impl EmbeddedPostgres {
    /// Finds the binaries and checks the cluster's directory can be used; touches nothing yet.
    pub fn new(root: &Path, bindir: Option<&Path>, durability: Durability) -> Result<Self, EmbeddedError> {
        let bindir = match bindir {
            Some(dir) if has_server_binaries(dir) => dir.to_path_buf(),
            Some(dir) => return Err(EmbeddedError::BinariesMissing(format!(" in {}", dir.display()))),
            None => find_bindir(Path::new("/usr/lib/postgresql"))
                .ok_or_else(|| EmbeddedError::BinariesMissing(String::new()))?,
        };
        // Socket paths are limited to 107 bytes; `.s.PGSQL.5432` takes 14 of them.
        if root.as_os_str().len() > 100 {
            return Err(EmbeddedError::PathTooLong(root.to_path_buf()));
        }
        let owner = if nix::unistd::geteuid().is_root() {
            Some(User::from_name("postgres").ok().flatten().ok_or(EmbeddedError::NoPostgresUser)?)
        } else {
            None
        };
        Ok(EmbeddedPostgres { bindir, root: root.to_path_buf(), owner, durability, child: Default::default() })
    }

    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    pub fn log_file(&self) -> PathBuf {
        self.root.join("server.log")
    }

    /// Connection options for a database of this cluster, over its socket.
    pub fn connect_options(&self, database: &str) -> PgConnectOptions {
        PgConnectOptions::new().socket(&self.root).username(SUPERUSER).database(database)
    }

    /// Initialises the cluster on first use, settles whatever a crash left behind, starts the
    /// server and makes sure the `switchyard` database exists.
    pub async fn start(&self) -> Result<PgConnectOptions, EmbeddedError> {
        self.prepare_root()?;
        if !self.data_dir().join("PG_VERSION").exists() {
            self.init()?;
        }
        self.write_settings()?;
        if let Some(pid) = self.running_postmaster() {
            // A previous run died without stopping its server: stop it so this run starts clean.
            tracing::warn!(pid, "stopping an embedded PostgreSQL left running by an earlier run");
            stop_pid(pid).await?;
        }
        self.wait_for_old_backends().await?;
        self.remove_stale_locks();
        self.spawn_and_wait().await?;
        self.ensure_database(DATABASE).await?;
        Ok(self.connect_options(DATABASE))
    }

    /// Starts the server again after it died under us (see [`supervisor`]).
    async fn restart(&self) -> Result<(), EmbeddedError> {
        self.write_settings()?;
        if let Some(pid) = self.running_postmaster() {
            stop_pid(pid).await?;
        }
        self.wait_for_old_backends().await?;
        self.remove_stale_locks();
        self.spawn_and_wait().await
    }

    /// How many processes still hold the shared memory segment `postmaster.pid` names (its
    /// seventh line: key and id), if any: backends of a server that died before them. A server
    /// started on the same data beside them would corrupt it.
    fn old_backends_attached(&self) -> Option<u64> {
        let text = fs::read_to_string(self.data_dir().join("postmaster.pid")).ok()?;
        let shmid: i64 = text.lines().nth(6)?.split_whitespace().nth(1)?.parse().ok()?;
        attached_to(&fs::read_to_string("/proc/sysvipc/shm").ok()?, shmid)
    }

    /// Waits, with a deadline, for the processes of a dead server to exit.
    async fn wait_for_old_backends(&self) -> Result<(), EmbeddedError> {
        let deadline = Instant::now() + SHARED_MEMORY_DEADLINE;
        let mut told = false;
        while let Some(attached) = self.old_backends_attached() {
            if !told {
                tracing::warn!(
                    attached,
                    "waiting for processes of an earlier embedded PostgreSQL to exit: they still hold its shared memory"
                );
                told = true;
            }
            if Instant::now() > deadline {
                return Err(EmbeddedError::Io(format!(
                    "{attached} processes of an earlier PostgreSQL on {} still hold its shared memory after {} s; \
                     stop them (they run as `postgres: …`) and start again",
                    self.data_dir().display(),
                    SHARED_MEMORY_DEADLINE.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Uses a server that is already running on this cluster, or starts one (for test clusters
    /// shared between test processes).
    pub async fn start_or_attach(&self) -> Result<PgConnectOptions, EmbeddedError> {
        if self.running_postmaster().is_some() && self.ping(DATABASE).await {
            return Ok(self.connect_options(DATABASE));
        }
        self.start().await
    }

    /// Fast shutdown (clients disconnected, clean checkpoint), escalating only past a deadline.
    pub async fn stop(&self) -> Result<(), EmbeddedError> {
        let child = self.child.lock().map(|mut c| c.take()).unwrap_or(None);
        if let Some(mut child) = child {
            let pid = child.id() as i32;
            stop_pid(pid).await?;
            let _ = child.wait();
        } else if let Some(pid) = self.running_postmaster() {
            stop_pid(pid).await?;
        }
        Ok(())
    }

    fn prepare_root(&self) -> Result<(), EmbeddedError> {
        fs::create_dir_all(&self.root)?;
        fs::set_permissions(&self.root, fs::Permissions::from_mode(0o700))?;
        if let Some(owner) = &self.owner {
            std::os::unix::fs::chown(&self.root, Some(owner.uid.as_raw()), Some(owner.gid.as_raw()))?;
            if let Some(blocked) = unreachable_ancestor(&self.root, owner) {
                return Err(EmbeddedError::Unreachable(blocked));
            }
        }
        Ok(())
    }

    fn init(&self) -> Result<(), EmbeddedError> {
        let data = self.data_dir();
        if data.exists() {
            // An initdb that was interrupted leaves a directory without PG_VERSION: start over.
            fs::remove_dir_all(&data)?;
        }
        tracing::info!(dir = %data.display(), "creating the embedded PostgreSQL cluster");
        let mut cmd = self.command("initdb");
        cmd.arg("-D").arg(&data).args(["-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-locale"]);
        if self.durability == Durability::Volatile {
            cmd.arg("--no-sync");
        }
        run(cmd, "initdb")?;
        let conf = data.join("postgresql.conf");
        let mut text = fs::read_to_string(&conf)?;
        text.push_str("\n# Switchyard's settings, rewritten at every start\ninclude 'switchyard.conf'\n");
        fs::write(&conf, text)?;
        Ok(())
    }

    /// Settings that depend on where the cluster is: rewritten each start so a moved data
    /// directory still works.
    fn write_settings(&self) -> Result<(), EmbeddedError> {
        let durable = self.durability == Durability::Durable;
        let text = format!(
            "listen_addresses = ''\nunix_socket_directories = {}\nunix_socket_permissions = 0700\n\
             fsync = {}\nsynchronous_commit = {}\nfull_page_writes = {}\nmax_connections = 200\n",
            conf_quote(&self.root),
            on_off(durable),
            on_off(durable),
            on_off(durable),
        );
        let path = self.data_dir().join("switchyard.conf");
        fs::write(&path, text)?;
        self.give_to_owner(&path)?;
        Ok(())
    }

    /// The pid of a postmaster still serving this cluster, if `postmaster.pid` names a live
    /// `postgres` process started on this data directory. A pid reused by something else is not
    /// ours and is never signalled.
    fn running_postmaster(&self) -> Option<i32> {
        let text = fs::read_to_string(self.data_dir().join("postmaster.pid")).ok()?;
        let pid: i32 = text.lines().next()?.trim().parse().ok()?;
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_postgres = args.first().is_some_and(|a| a.ends_with(b"postgres"));
        let data = self.data_dir();
        let on_our_data = args.iter().any(|a| Path::new(std::ffi::OsStr::from_bytes(a)) == data);
        (is_postgres && on_our_data).then_some(pid)
    }

    /// Lock files naming a process that is gone (or not ours) would make postgres refuse to start.
    fn remove_stale_locks(&self) {
        let _ = fs::remove_file(self.data_dir().join("postmaster.pid"));
        let _ = fs::remove_file(self.root.join(".s.PGSQL.5432.lock"));
        let _ = fs::remove_file(self.root.join(".s.PGSQL.5432"));
    }

    async fn spawn_and_wait(&self) -> Result<(), EmbeddedError> {
        let log = fs::OpenOptions::new().create(true).append(true).open(self.log_file())?;
        self.give_to_owner(&self.log_file())?;
        let mut cmd = self.command("postgres");
        cmd.arg("-D").arg(self.data_dir());
        cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log);
        // Its own process group, so a Ctrl-C at the terminal reaches only us: we stop the server
        // last, after the HTTP servers and the worker have drained.
        cmd.process_group(0);
        let mut child =
            cmd.spawn().map_err(|e| EmbeddedError::Command { what: "postgres".into(), detail: e.to_string() })?;
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(EmbeddedError::Command {
                    what: "starting postgres".into(),
                    detail: format!("{status}; last lines of {}:\n{}", self.log_file().display(), self.log_tail()),
                });
            }
            if self.ping("postgres").await {
                break;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err(EmbeddedError::Command {
                    what: "starting postgres".into(),
                    detail: "not ready within 60 s".into(),
                });
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        if let Ok(mut slot) = self.child.lock() {
            *slot = Some(child);
        }
        Ok(())
    }

    async fn ping(&self, database: &str) -> bool {
        match sqlx::PgConnection::connect_with(&self.connect_options(database)).await {
            Ok(conn) => {
                let _ = conn.close().await;
                true
            }
            Err(_) => false,
        }
    }

    async fn ensure_database(&self, name: &str) -> Result<(), EmbeddedError> {
        let mut conn = sqlx::PgConnection::connect_with(&self.connect_options("postgres"))
            .await
            .map_err(|e| EmbeddedError::Io(e.to_string()))?;
        let exists: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(name)
            .fetch_one(&mut conn)
            .await
            .map_err(|e| EmbeddedError::Io(e.to_string()))?;
        if !exists {
            sqlx::query(&format!("CREATE DATABASE \"{}\"", name.replace('"', "\"\"")))
                .execute(&mut conn)
                .await
                .map_err(|e| EmbeddedError::Io(e.to_string()))?;
        }
        let _ = conn.close().await;
        Ok(())
    }

    fn command(&self, binary: &str) -> Command {
        let mut cmd = Command::new(self.bindir.join(binary));
        for var in ["PGDATA", "PGHOST", "PGPORT", "PGUSER", "PGDATABASE", "PGOPTIONS"] {
            cmd.env_remove(var);
        }
        cmd.env("LC_ALL", "C");
        if let Some(owner) = &self.owner {
            cmd.uid(owner.uid.as_raw()).gid(owner.gid.as_raw()).env("HOME", &owner.dir);
            cmd.current_dir(&self.root);
        }
        cmd
    }

    fn give_to_owner(&self, path: &Path) -> std::io::Result<()> {
        match &self.owner {
            Some(owner) => std::os::unix::fs::chown(path, Some(owner.uid.as_raw()), Some(owner.gid.as_raw())),
            None => Ok(()),
        }
    }

    fn log_tail(&self) -> String {
        let text = fs::read_to_string(self.log_file()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }
}

/// SIGINT is PostgreSQL's fast shutdown; SIGQUIT (immediate) and SIGKILL only past the deadline.
async fn stop_pid(pid: i32) -> Result<(), EmbeddedError> {
    let pid = Pid::from_raw(pid);
    for (signal, wait) in [
        (Signal::SIGINT, STOP_DEADLINE),
        (Signal::SIGQUIT, Duration::from_secs(3)),
        (Signal::SIGKILL, Duration::from_secs(2)),
    ] {
        if kill(pid, signal).is_err() {
            return Ok(()); // already gone
        }
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if !process_alive(pid) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::warn!(pid = pid.as_raw(), ?signal, "embedded PostgreSQL did not stop in time");
    }
    Err(EmbeddedError::Io(format!("postgres (pid {pid}) would not stop")))
}

/// Alive and not a zombie waiting to be reaped.
fn process_alive(pid: Pid) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// The `nattch` of segment `shmid` in `/proc/sysvipc/shm`'s table, when it is above zero.
fn attached_to(table: &str, shmid: i64) -> Option<u64> {
    table
        .lines()
        .skip(1)
        .find_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let id: i64 = cols.get(1)?.parse().ok()?;
            (id == shmid).then(|| cols.get(6)?.parse::<u64>().ok()).flatten()
        })
        .filter(|n| *n > 0)
}

fn run(mut cmd: Command, what: &str) -> Result<(), EmbeddedError> {
    let output = cmd.output().map_err(|e| EmbeddedError::Command { what: what.into(), detail: e.to_string() })?;
    if output.status.success() {
        return Ok(());
    }
    Err(EmbeddedError::Command {
        what: what.into(),
        detail: format!("{}: {}", output.status, String::from_utf8_lossy(&output.stderr).trim()),
    })
}

fn has_server_binaries(dir: &Path) -> bool {
    dir.join("initdb").is_file() && dir.join("postgres").is_file()
}

/// `pg_config --bindir` first, then `<lib_root>/<version>/bin`, newest version first.
pub fn find_bindir(lib_root: &Path) -> Option<PathBuf> {
    let from_pg_config = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .filter(|dir| has_server_binaries(dir));
    from_pg_config.or_else(|| newest_versioned_bindir(lib_root))
}

fn newest_versioned_bindir(lib_root: &Path) -> Option<PathBuf> {
    let mut versions: Vec<(Vec<u32>, PathBuf)> = fs::read_dir(lib_root)
        .ok()?
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let version: Option<Vec<u32>> = name.split('.').map(|p| p.parse().ok()).collect();
            Some((version?, entry.path().join("bin")))
        })
        .filter(|(_, bin)| has_server_binaries(bin))
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// The first directory on the way to `path` that `user` may not pass through, if any.
fn unreachable_ancestor(path: &Path, user: &User) -> Option<PathBuf> {
    path.ancestors().skip(1).find_map(|dir| {
        let meta = fs::metadata(dir).ok()?;
        let mode = meta.mode();
        let passable = if meta.uid() == user.uid.as_raw() {
            mode & 0o100 != 0
        } else if meta.gid() == user.gid.as_raw() {
            mode & 0o010 != 0
        } else {
            mode & 0o001 != 0
        };
        (!passable).then(|| dir.to_path_buf())
    })
}

fn conf_quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\\', "\\\\").replace('\'', "''"))
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_installed_version_is_chosen() {
        let root = tempfile::tempdir().expect("tempdir");
        for version in ["9.6", "13", "15", "bogus"] {
            let bin = root.path().join(version).join("bin");
            fs::create_dir_all(&bin).expect("mkdir");
            fs::write(bin.join("initdb"), "").expect("write");
            fs::write(bin.join("postgres"), "").expect("write");
        }
        fs::create_dir_all(root.path().join("16/bin")).expect("mkdir"); // no binaries inside
        assert_eq!(newest_versioned_bindir(root.path()), Some(root.path().join("15/bin")));
    }

    #[test]
    fn no_installed_version_finds_nothing() {
        let root = tempfile::tempdir().expect("tempdir");
        assert_eq!(newest_versioned_bindir(root.path()), None);
        assert_eq!(newest_versioned_bindir(&root.path().join("missing")), None);
    }

    #[test]
    fn a_segment_counts_as_held_while_processes_are_attached() {
        let table = "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n\
                       5432001         7   600                    56  100   120      3   107   113   107   113 0 0 0 4096 0\n\
                       5432002         8   600                    56  100   120      0   107   113   107   113 0 0 0 4096 0\n";
        assert_eq!(attached_to(table, 7), Some(3));
        assert_eq!(attached_to(table, 8), None, "nobody attached");
        assert_eq!(attached_to(table, 9), None, "segment gone");
    }

    #[test]
    fn configuration_quoting_doubles_single_quotes() {
        assert_eq!(conf_quote(Path::new("/tmp/it's")), "'/tmp/it''s'");
    }
}
