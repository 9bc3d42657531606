//! The providers in use, read again whenever `<data_dir>/providers.toml` changes: editing the
//! file takes effect without a restart. Everything that reads providers (the API, the pages,
//! the conductor, the worker's spawner and reconciler) holds this one handle and takes the
//! current set at each use, so all of them see a new set at once.
//!
//! A file that cannot be used keeps the last good set: its error is logged once and shown on
//! the overview (and in `GET /api/v1/providers`) until the file is fixed.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use super::logins::UserConfig;
use super::{ProviderConfigError, Providers};

/// How often the file's modification time is looked at: one stat call.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// The shared handle; cloning is one reference count.
#[derive(Clone)]
pub struct LiveProviders(Arc<Inner>);

struct Inner {
    /// The file read; `None`: a fixed set that never changes.
    file: Option<PathBuf>,
    /// Where the user's own logins are, for [`super::logins::missing`].
    logins: UserConfig,
    state: RwLock<State>,
}

struct State {
    current: Arc<Providers>,
    seen: Option<Stamp>,
    error: Option<String>,
}

/// What tells a changed file: its modification time, size and inode (an editor that writes a
/// new file and renames it over the old gives a new inode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp { modified: meta.modified().ok(), len: meta.len(), inode: meta.ino() })
}

impl LiveProviders {
    /// The providers of `<data_dir>/providers.toml`; a file that cannot be used is an error here
    /// (at start nothing good came before it).
    pub fn load(data_dir: &Path, logins: UserConfig) -> Result<LiveProviders, ProviderConfigError> {
        let file = data_dir.join(super::CONFIG_FILE);
        let seen = stamp(&file);
        let current = Arc::new(Providers::load(data_dir)?);
        let state = RwLock::new(State { current, seen, error: None });
        Ok(LiveProviders(Arc::new(Inner { file: Some(file), logins, state })))
    }

    /// A set that is never read again (benches, tests of one part).
    pub fn fixed(providers: Providers) -> LiveProviders {
        let state = RwLock::new(State { current: Arc::new(providers), seen: None, error: None });
        LiveProviders(Arc::new(Inner { file: None, logins: UserConfig::from_env(), state }))
    }

    /// The set in use now.
    pub fn current(&self) -> Arc<Providers> {
        self.read().current.clone()
    }

    /// Why the file as it is now cannot be used (the set in use is the last good one).
    pub fn error(&self) -> Option<String> {
        self.read().error.clone()
    }

    /// Where the user's own provider logins are.
    pub fn logins(&self) -> &UserConfig {
        &self.0.logins
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.0.state.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads the file again if it changed since it was last read: a good file replaces the set,
    /// a bad one keeps it and records why. Returns whether it read the file.
    pub fn reload_if_changed(&self) -> bool {
        let Some(file) = &self.0.file else { return false };
        let now = stamp(file);
        if self.read().seen == now {
            return false;
        }
        let data_dir = file.parent().unwrap_or(Path::new("."));
        let loaded = Providers::load(data_dir);
        let mut state = self.0.state.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        state.seen = now;
        match loaded {
            Ok(providers) => {
                tracing::info!(file = %file.display(), providers = %providers.names().join(", "), "providers reloaded");
                state.current = Arc::new(providers);
                state.error = None;
            }
            Err(e) => {
                tracing::warn!(error = %e, "providers config not reloaded: the last good one stays in use");
                state.error = Some(e.to_string());
            }
        }
        true
    }

    /// Looks at the file every [`CHECK_EVERY`] until `shutdown`.
    pub async fn watch(self, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => {
                    let this = self.clone();
                    // A stat and, rarely, a small file read: off the async threads all the same.
                    let _ = tokio::task::spawn_blocking(move || this.reload_if_changed()).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_file_replaces_the_set_and_a_broken_one_keeps_it_with_its_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("providers.toml");
        let live = LiveProviders::load(dir.path(), UserConfig::none()).unwrap();
        assert!(live.current().get("aider").is_none());
        assert!(!live.reload_if_changed(), "nothing changed");
        std::fs::write(&file, "[providers.aider]\ncommand = [\"aider\"]\n").unwrap();
        assert!(live.reload_if_changed());
        assert!(live.current().get("aider").is_some());
        std::fs::write(&file, "[providers.aider\ncommand = [\"aider\"]\n").unwrap();
        assert!(live.reload_if_changed());
        assert!(live.current().get("aider").is_some(), "the last good set stays");
        assert!(live.error().is_some_and(|e| e.contains("providers.toml")), "{:?}", live.error());
        std::fs::remove_file(&file).unwrap();
        assert!(live.reload_if_changed());
        assert!(live.current().get("aider").is_none());
        assert_eq!(live.error(), None);
    }
}
