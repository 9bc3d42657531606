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
