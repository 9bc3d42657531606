//! The server's git in a clone an agent wrote: the check before an agent's or a team's clone is
//! removed (`git fetch`, `git status`) runs nothing the clone's `.git/config` names, and still
//! finds the unmerged work. The agent plants it from inside its sandbox, as a hostile model would.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_json, assert_problem, engineer, eventually, merged, TestApp};
use crate::isolation::{app_with_bwrap, probe, with_pane, SANDBOXED_SHELL};

/// Where, in the host's `/tmp`, the planted programs would leave their marks: the sandbox has a
/// `/tmp` of its own, so only a program the server ran outside it writes there.
fn host_marks() -> String {
    format!("/tmp/sy-hostile-git-{}", uuid::Uuid::new_v4().simple())
}

/// The marks left under `prefix`.
fn marks(prefix: &str) -> Vec<PathBuf> {
    let (dir, name) = prefix.rsplit_once('/').expect("an absolute prefix");
    let entries = std::fs::read_dir(dir).expect("list /tmp").flatten();
    entries.filter(|e| e.file_name().to_string_lossy().starts_with(name)).map(|e| e.path()).collect()
}

/// Typed into `agent`'s sandboxed shell in `clone`: a program that leaves a mark at
/// `<prefix>-<its name>`, set as the clone's fsmonitor, as a `post-index-change` hook (through
/// `core.hooksPath`) and as origin's upload-pack, then a commit of the agent's work.
async fn plant(app: &TestApp, agent: &str, clone: &Path, prefix: &str) {
    let commands = format!(
        "mkdir -p .hostile/hooks; printf '#!/bin/sh\\ntouch {prefix}-$(basename $0)\\n' > .hostile/fsmonitor; \
         chmod +x .hostile/fsmonitor; cp .hostile/fsmonitor .hostile/hooks/post-index-change; \
         cp .hostile/fsmonitor .hostile/uploadpack; \
         git config core.fsmonitor \"$PWD/.hostile/fsmonitor\"; git config core.hooksPath \"$PWD/.hostile/hooks\"; \
         git config remote.origin.uploadpack \"$PWD/.hostile/uploadpack\"; \
         echo 'fn work() {{}}' > work.rs; git add work.rs .hostile; \
         git -c user.name={agent} -c user.email={agent}@example.com commit --quiet -m work && echo committed;"
    );
    let answer = probe(app, agent, clone, &commands).await;
    assert!(answer.contains("committed"), "{answer}");
    assert!(marks(prefix).is_empty(), "the agent's own git ran inside its sandbox: {:?}", marks(prefix));
    // Outside, the same configuration is obeyed by a git that is not hardened: what the server
    // once ran. (Removed again, so only the server's own git could leave one below.)
    let status = std::process::Command::new("git").arg("-C").arg(clone).args(["status", "--short"]).output();
    assert!(status.expect("git").status.success());
    assert!(!marks(prefix).is_empty(), "the planted configuration works");
    for mark in marks(prefix) {
        std::fs::remove_file(mark).expect("remove");
    }
}

async fn delete(app: &TestApp, path: &str) -> reqwest::Response {
    app.admin(Method::DELETE, path).send().await.expect("delete")
}

#[tokio::test]
async fn deleting_an_agent_runs_nothing_its_clones_git_config_names_and_still_finds_its_work() {
    let app = app_with_bwrap(SANDBOXED_SHELL).await;
    app.create_project("alpha").await;
    app.create_agent(merged(engineer("alpha", "fox"), json!({"provider": "boxed", "clone": "agent"}))).await;
    let fox = with_pane(&app, "fox").await;
    let clone = PathBuf::from(fox["clone_path"].as_str().expect("fox's clone"));
    let prefix = host_marks();
    plant(&app, "fox", &clone, &prefix).await;

    app.post_ok("/api/v1/agents/fox/kill", json!({})).await;
    let refused = assert_problem(delete(&app, "/api/v1/agents/fox").await, 409).await;
    let detail = refused["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("has 1 commit not in `main` (1 not pushed)"), "{refused}");
    assert_eq!(marks(&prefix), Vec::<PathBuf>::new(), "the check ran the clone's programs");

    let forced = assert_json(delete(&app, "/api/v1/agents/fox?force=true").await, 200).await;
    assert_eq!(forced["discarded"]["commits_ahead"], 1, "{forced}");
    assert_eq!(marks(&prefix), Vec::<PathBuf>::new(), "the check ran the clone's programs");
}

#[tokio::test]
async fn disbanding_a_team_runs_nothing_its_clones_git_config_names_and_still_finds_its_work() {
    let app = app_with_bwrap(SANDBOXED_SHELL).await;
    app.create_project("alpha").await;
    let team = json!({"name": "login", "project": "alpha", "base_branch": "main"});
    assert_json(app.post("/api/v1/teams", team).await, 201).await;
    app.create_agent(merged(engineer("alpha", "fox"), json!({"provider": "boxed", "team": "login"}))).await;
    let team_clone = || async { app.get_ok("/api/v1/teams/login").await["clone_path"].clone() };
    eventually("fox works in the team's clone", Duration::from_secs(20), || async {
        let fox: Value = app.agent("fox").await;
        fox["pid"].is_u64() && team_clone().await.is_string() && fox["clone_path"] == team_clone().await
    })
    .await;
    let clone = PathBuf::from(team_clone().await.as_str().expect("the team's clone"));
    let prefix = host_marks();
    plant(&app, "fox", &clone, &prefix).await;

    app.post_ok("/api/v1/agents/fox/kill", json!({})).await;
    let refused = assert_problem(delete(&app, "/api/v1/teams/login").await, 409).await;
    let detail = refused["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("branch `login` has 1 commit not in `main`"), "{refused}");
    assert_eq!(marks(&prefix), Vec::<PathBuf>::new(), "the check ran the clone's programs");

    let forced = assert_json(delete(&app, "/api/v1/teams/login?force=true").await, 200).await;
    assert_eq!(forced["discarded"]["commits_ahead"], 1, "{forced}");
    assert_eq!(marks(&prefix), Vec::<PathBuf>::new(), "the check ran the clone's programs");
}
