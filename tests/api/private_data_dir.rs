//! The data directory is its owner's only (issue 37, finding 7): as root, `serve` left
//! `outbox.jsonl`, `state.json`, the clones and `providers.toml` readable by every local user,
//! and `nobody` read a private message.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use crate::binary::{switchyard, Served};
use crate::completion_crash::Api;
use crate::helpers::eventually;
use crate::webhook_crash::wait_ready;

/// Every path under `dir` (links not followed) whose mode lets its group or others in, with
/// that mode; the embedded cluster's directory (`pg`, the `postgres` user's when we are root)
/// is not walked.
fn open_to_others(data: &Path) -> Vec<(PathBuf, u32)> {
    let cluster = data.join("pg");
    let mut found = Vec::new();
    let mut pending = vec![data.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("list").flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).expect("stat");
            if meta.file_type().is_symlink() || path == cluster {
                continue;
            }
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                found.push((path.clone(), mode));
            }
            if meta.is_dir() {
                pending.push(path);
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread")]
async fn nothing_in_the_data_directory_is_readable_by_other_users_and_nobody_cannot_read_a_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path();
    // What a user (or an older version) left, open to all: tightened at start.
    let providers = data.join("providers.toml");
    std::fs::write(&providers, "[providers.quiet]\ncommand = [\"bash\"]\nenv = { API_KEY = \"sk-secret\" }\n")
        .expect("providers.toml");
    std::fs::set_permissions(&providers, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    std::fs::create_dir(data.join("clones")).expect("clones");
    std::fs::set_permissions(data.join("clones"), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let repo = tempfile::tempdir().expect("repo");
    crate::helpers::git(repo.path(), &["init", "-q", "-b", "main"]);
    crate::helpers::git(repo.path(), &["commit", "-q", "--allow-empty", "-m", "start"]);

    let mut cmd = switchyard(data);
    cmd.env("SWITCHYARD_TMUX_SOCKET", format!("sy-private-data-{}", std::process::id()));
    let served = Served::start(cmd);
    let client = reqwest::Client::new();
    wait_ready(&client, &served.api).await;
    let token = served.stdout().lines().map(str::trim).find(|l| l.starts_with("sy_")).expect("token").to_owned();
    let api = Api { client, base: served.api.clone(), token };
    api.post_ok("/projects", json!({"slug": "alpha", "name": "Alpha", "repo_path": repo.path()})).await;
    let fox = json!({"name": "fox", "project": "alpha", "kind": "worker", "role": "engineer", "provider": "shell",
        "clone": "agent"});
    api.post_ok("/agents", fox).await;
    api.post_ok("/messages", json!({"to": "fox", "body": "the private plan"})).await;
    eventually("fox has a pane and the message is in the outbox", Duration::from_secs(60), || async {
        let fox = api.get_ok("/agents/fox").await;
        let outbox = std::fs::read_to_string(data.join("outbox.jsonl")).unwrap_or_default();
        fox["pid"].is_u64() && outbox.contains("the private plan")
    })
    .await;
    for made in ["clones/fox/.git", "agents/fox", "outbox.jsonl"] {
        assert!(data.join(made).exists(), "{made} is not there: the walk below would prove little");
    }

    assert_eq!(open_to_others(data), Vec::new(), "readable or writable by others");
    let own = std::fs::metadata(data).expect("stat").permissions().mode() & 0o777;
    let root = nix::unistd::geteuid().is_root();
    // As root the `postgres` user passes through to its cluster; nobody lists anything.
    assert_eq!(own, if root { 0o711 } else { 0o700 });
    if root {
        let cluster = std::fs::metadata(data.join("pg/data")).expect("the cluster");
        let postgres = nix::unistd::User::from_name("postgres").expect("lookup").expect("postgres");
        assert_eq!(cluster.uid(), postgres.uid.as_raw(), "the embedded cluster is still the postgres user's");
        let read = Command::new("runuser")
            .args(["-u", "nobody", "--", "cat"])
            .arg(data.join("outbox.jsonl"))
            .output()
            .expect("runuser");
        assert!(!read.status.success(), "nobody read the outbox: {}", String::from_utf8_lossy(&read.stdout));
        assert!(String::from_utf8_lossy(&read.stderr).contains("Permission denied"), "{read:?}");
    }
    assert!(served.stop().success());
    let _ =
        Command::new("tmux").args(["-L", &format!("sy-private-data-{}", std::process::id()), "kill-server"]).output();
}
