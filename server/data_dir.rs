//! The data directory: created private on first use, and claimed with a lock for the life of
//! the process, so two servers never run one embedded cluster.

use std::fs::{self, File};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use anyhow::Context;
use nix::fcntl::{Flock, FlockArg};

/// The embedded PostgreSQL cluster's directory in the data directory (the database's own).
pub const EMBEDDED_CLUSTER: &str = "pg";

pub struct DataDir {
    _lock: Flock<File>,
}

impl DataDir {
    /// Fails with a clear message when another Switchyard holds the directory. The lock is the
    /// kernel's, so a crashed holder releases it.
    pub fn claim(path: &Path) -> anyhow::Result<DataDir> {
        ensure(path)?;
        let lock_path = path.join("switchyard.lock");
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&lock_path)
            .with_context(|| format!("opening {}", lock_path.display()))?;
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

/// Creates the directory if it does not exist, and makes it and everything directly in it
/// owner-only: files 0600, directories 0700, whatever an older version (or the umask of the
/// shell that started it) left. The directory itself is 0711 as root: the embedded PostgreSQL
/// runs as the `postgres` user and passes through to its own directory (`pg`, which it keeps
/// 0700 itself) but lists nothing. What is inside a directory that is 0700 is out of everyone
/// else's reach whatever its own mode, so the first level is enough.
pub fn ensure(path: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    let mode = if nix::unistd::geteuid().is_root() { 0o711 } else { 0o700 };
    if !path.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(mode)
            .create(path)
            .with_context(|| format!("creating the data directory {} (SWITCHYARD_DATA_DIR)", path.display()))?;
    }
    // One this user may not change (someone else's, given with --data-dir) is logged, and used.
    tighten(path, |_| mode);
    let entries = fs::read_dir(path).with_context(|| format!("reading the data directory {}", path.display()))?;
    for entry in entries.flatten() {
        if entry.file_name() == EMBEDDED_CLUSTER {
            continue;
        }
        // A link is not followed: whatever it names is not the data directory's.
        if entry.file_type().is_ok_and(|t| !t.is_symlink()) {
            tighten(&entry.path(), |was| was & 0o700);
        }
    }
    Ok(())
}

/// Sets the mode of `path` to `mode(its mode)` where that changes it; a failure is logged.
fn tighten(path: &Path, mode: impl Fn(u32) -> u32) {
    let Ok(meta) = fs::symlink_metadata(path) else { return };
    let was = meta.permissions().mode() & 0o7777;
    let wanted = mode(was);
    if wanted != was {
        if let Err(e) = fs::set_permissions(path, fs::Permissions::from_mode(wanted)) {
            tracing::warn!(path = %path.display(), error = %e, "cannot make it owner-only");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &std::path::Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn what_an_older_version_left_open_in_the_data_directory_is_made_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("theirs");
        std::fs::write(&target, "").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();
        for file in ["outbox.jsonl", "providers.toml"] {
            std::fs::write(data.join(file), "").unwrap();
            std::fs::set_permissions(data.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        for sub in ["clones", "pg"] {
            std::fs::create_dir(data.join(sub)).unwrap();
            std::fs::set_permissions(data.join(sub), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::os::unix::fs::symlink(&target, data.join("link")).unwrap();
        super::ensure(data).unwrap();
        assert_eq!(mode(data), if nix::unistd::geteuid().is_root() { 0o711 } else { 0o700 });
        assert_eq!(mode(&data.join("outbox.jsonl")), 0o600);
        assert_eq!(mode(&data.join("providers.toml")), 0o600);
        assert_eq!(mode(&data.join("clones")), 0o700);
        assert_eq!(mode(&data.join("pg")), 0o755, "the embedded cluster's directory is its own to set");
        assert_eq!(mode(&target), 0o644, "a link is not followed");
    }
}
