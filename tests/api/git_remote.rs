//! A project's git remote for the tests: a bare repository served on loopback by `git daemon`,
//! read and pushed to over the network as a person (or another machine) would.

use std::path::PathBuf;
use std::time::Duration;

use crate::helpers::*;

/// A bare repository with `main` (a README), served read-write by `git daemon` on a free
/// loopback port; the daemon ends with it.
pub(crate) struct Remote {
    dir: tempfile::TempDir,
    daemon: std::process::Child,
    port: u16,
}

impl Remote {
    pub(crate) async fn start() -> Remote {
        let dir = tempfile::tempdir().expect("temp dir");
        let seed = dir.path().join("seed");
        init_repo(&seed);
        let bare = dir.path().join("project.git");
        git(dir.path(), &["clone", "--quiet", "--bare", &seed.to_string_lossy(), &bare.to_string_lossy()]);
        // A port is free when asked; another process may take it before the daemon binds it, so a
        // daemon that exits is started again on another.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().unwrap().port();
            let mut daemon = std::process::Command::new("git")
                .args(["daemon", "--export-all", "--enable=receive-pack", "--reuseaddr", "--listen=127.0.0.1"])
                .arg(format!("--port={port}"))
                .arg(format!("--base-path={}", dir.path().display()))
                .arg(dir.path())
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("git daemon");
            let deadline = std::time::Instant::now() + Duration::from_secs(15);
            while std::time::Instant::now() < deadline {
                if daemon.try_wait().expect("daemon status").is_some() {
                    break;
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Remote { dir, daemon, port };
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
        panic!("git daemon did not start");
    }

    pub(crate) fn url(&self) -> String {
        format!("git://127.0.0.1:{}/project.git", self.port)
    }

    /// The bare repository itself, read directly.
    pub(crate) fn repo(&self) -> PathBuf {
        self.dir.path().join("project.git")
    }

    /// Where the remote's `branch` points, asked over the network (`git ls-remote`).
    pub(crate) fn head(&self, branch: &str) -> Option<String> {
        let out = git(self.dir.path(), &["ls-remote", &self.url(), &format!("refs/heads/{branch}")]);
        out.split_whitespace().next().map(str::to_owned)
    }

    /// The remote's branches.
    pub(crate) fn branches(&self) -> Vec<String> {
        let out = git(&self.repo(), &["for-each-ref", "--format=%(refname:short)", "refs/heads"]);
        out.lines().map(str::to_owned).collect()
    }

    /// A clone of the remote (over the network) where a person commits `files` on `branch`
    /// (made from `main` if new) and pushes it; the commit.
    pub(crate) fn push(&self, branch: &str, files: &[(&str, &str)]) -> String {
        let work = self.dir.path().join(format!("work-{}", uuid::Uuid::new_v4().simple()));
        git(self.dir.path(), &["clone", "--quiet", &self.url(), &work.to_string_lossy()]);
        git(&work, &["checkout", "--quiet", "-B", branch]);
        commit_files(&work, files, &format!("a person's work on {branch}"));
        git(&work, &["push", "--quiet", "origin", &format!("{branch}:{branch}")]);
        git(&work, &["rev-parse", "HEAD"]).trim().to_owned()
    }

    /// The files on the remote's `branch`.
    pub(crate) fn files(&self, branch: &str) -> Vec<String> {
        git(&self.repo(), &["ls-tree", "--name-only", branch]).lines().map(str::to_owned).collect()
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

/// The node's mirrors under its data directory.
pub(crate) fn mirrors(app: &TestApp) -> Vec<PathBuf> {
    let dir = app._data_dir.path().join("mirrors");
    let entries = std::fs::read_dir(dir).map(|d| d.map(|e| e.expect("entry").path()).collect());
    entries.unwrap_or_default()
}
