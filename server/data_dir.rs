//! The data directory: created private on first use, and claimed with a lock for the life of
//! the process, so two servers never run one embedded cluster.

use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::Context;
use nix::fcntl::{Flock, FlockArg};

pub struct DataDir {
    _lock: Flock<File>,
}

impl DataDir {
    /// Fails with a clear message when another Switchyard holds the directory. The lock is the
    /// kernel's, so a crashed holder releases it.
    pub fn claim(path: &Path) -> anyhow::Result<DataDir> {
        ensure(path)?;
        let lock_path = path.join("switchyard.lock");
        let file = File::create(&lock_path).with_context(|| format!("opening {}", lock_path.display()))?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|_| {
            anyhow::anyhow!(
                "another switchyard is using the data directory {} (SWITCHYARD_DATA_DIR); stop it or choose another directory",
                path.display()
            )
        })?;
        Ok(DataDir { _lock: lock })
    }

    /// True while some running Switchyard holds the directory.
    pub fn is_claimed(path: &Path) -> bool {
        let Ok(file) = File::open(path.join("switchyard.lock")) else {
            return false;
        };
        Flock::lock(file, FlockArg::LockSharedNonblock).is_err()
    }
}

/// What `SWITCHYARD_URL` starts with for the API on a Unix socket (`unix:/data/api.sock`): how an
/// agent in a sandbox without a network reaches it.
pub const UNIX_URL_PREFIX: &str = "unix:";

/// The API's Unix socket in the data directory, beside its TCP listener: agents in a sandbox
/// without a network reach the API through it.
pub fn api_socket(data_dir: &Path) -> std::path::PathBuf {
    data_dir.join("api.sock")
}

/// Listens on [`api_socket`], replacing a stale socket a process that is gone left (the caller
/// holds the data directory's lock), owner-only. `None`, logged, when it cannot: the TCP
/// listener still serves everyone else.
pub fn bind_api_socket(data_dir: &Path) -> Option<tokio::net::UnixListener> {
    let path = api_socket(data_dir);
    let bound = (|| {
        match fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let listener = tokio::net::UnixListener::bind(&path)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600))?;
        Ok(listener)
    })();
    match bound {
        Ok(listener) => Some(listener),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot listen on the API socket; sandboxed agents without a network cannot reach the API");
            None
        }
    }
}

/// Creates the directory (owner-only) if it does not exist.
pub fn ensure(path: &Path) -> anyhow::Result<()> {
    if !path.exists() {
        fs::create_dir_all(path)
            .with_context(|| format!("creating the data directory {} (SWITCHYARD_DATA_DIR)", path.display()))?;
        // Private to its owner; as root, others may pass through (not list) so the `postgres`
        // user reaches the embedded cluster inside.
        let mode = if nix::unistd::geteuid().is_root() { 0o711 } else { 0o700 };
        fs::set_permissions(path, fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}
