//! The spawner follows no link an agent planted where it writes or reads (issue 37, finding 3):
//! neither one typed in a sandboxed pane before the agent is spawned again, nor one committed on
//! the branch a new agent is spawned on. What a link names outside is never written, created or
//! copied into the agent's reach; a spawn that meets one either goes on without it or fails
//! naming it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::{engineer, eventually, git, merged, repo_of, TestApp};
use switchyard::domain::agent::AgentState;

/// What a root-only file holds: it must never show up where an agent can read it.
const SECRET: &str = r#"{"root_only": "s3cret-never-in-a-clone"}"#;
const PRECIOUS: &str = "precious, not the server's to write\n";

/// Files outside every agent's reach: a root-only secret and files the server must not write.
struct Outside {
    dir: tempfile::TempDir,
}

impl Outside {
    fn new() -> Outside {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("secret.json");
        std::fs::write(&secret, SECRET).expect("secret");
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        for victim in ["token-victim", "exclude-victim", "config-victim"] {
            std::fs::write(dir.path().join(victim), PRECIOUS).expect("victim");
        }
        Outside { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn assert_untouched(&self) {
        for victim in ["token-victim", "exclude-victim", "config-victim"] {
            assert_eq!(std::fs::read_to_string(self.path(victim)).expect("victim"), PRECIOUS, "{victim} was written");
        }
        assert_eq!(std::fs::read_to_string(self.path("secret.json")).expect("secret"), SECRET);
        assert!(!self.path("planted").exists(), "a file was created outside through a link");
    }
}

/// Every regular file under `dir` (links not followed) that holds the secret.
fn holding_the_secret(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let meta = std::fs::symlink_metadata(entry.path()).expect("stat");
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.is_file()
                && std::fs::read(entry.path()).is_ok_and(|b| String::from_utf8_lossy(&b).contains("s3cret"))
            {
                found.push(entry.path());
            }
        }
    }
    found
}

/// A sandboxed shell that Switchyard prepares as it does Claude Code: its configuration (and its
/// hooks) in the agent's own directory. The arguments Switchyard gives Claude Code are the
/// shell's positional parameters (`-s --`: it still reads its commands from the pane).
const BOXED: &str = r#"
[providers.boxed]
command = ["bash", "--norc", "--noprofile", "-s", "--"]
screen_rules = "shell"
sandbox = "bwrap"
install_hooks = true
setup = "claude"
"#;

/// Waits for `name`'s pane, types `commands` in it (run in its clone) and waits for them.
async fn typed(app: &TestApp, name: &str, commands: &str) -> Value {
    eventually(&format!("{name} has a pane"), Duration::from_secs(30), || async {
        app.agent(name).await["pid"].is_u64()
    })
    .await;
    let agent = app.agent(name).await;
    let clone = PathBuf::from(agent["clone_path"].as_str().expect("a clone"));
    let text = format!("{{ {commands}; }} > planted.txt 2>&1; echo planted >> planted.txt");
    app.post_ok(&format!("/api/v1/agents/{name}/input"), json!({"text": text})).await;
    eventually(&format!("{name} planted its link"), Duration::from_secs(30), || async {
        std::fs::read_to_string(clone.join("planted.txt")).is_ok_and(|t| t.contains("planted"))
    })
    .await;
    agent
}

/// Kills `name` and resumes it: its next pane is spawned over what it planted.
async fn respawned(app: &TestApp, name: &str, pid: &Value) -> Value {
    app.post_ok(&format!("/api/v1/agents/{name}/kill"), json!({})).await;
    app.post_ok(&format!("/api/v1/agents/{name}/resume"), json!({})).await;
    let story = format!("/api/v1/events?subject=agent:{name}");
    app.get_until(
        &format!("/api/v1/agents/{name}"),
        &format!("{name} is spawned again, or fails"),
        Duration::from_secs(40),
        &[&story],
        |agent| agent["state"] == "error" || (agent["pid"].is_u64() && agent["pid"] != *pid),
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn links_a_sandboxed_agent_plants_for_its_next_spawn_reach_nothing_outside() {
    if std::process::Command::new("bwrap").arg("--version").output().is_err() {
        panic!("bubblewrap (bwrap) is not installed: ./dev deps installs it");
    }
    let outside = Outside::new();
    let app = TestApp::builder().providers(BOXED).worker(|_| {}).spawn().await;
    app.create_project("alpha").await;
    let shown = |name: &str| outside.path(name).display().to_string();
    // Each agent plants one link, typed in its sandboxed pane, where the spawner works.
    let plants = [
        ("fox", format!("ln -s '{}' \"$(dirname \"$SWITCHYARD_TOKEN_FILE\")/.token.tmp\"", shown("token-victim"))),
        ("owl", format!("ln -sf '{}' .claude/settings.local.json", shown("secret.json"))),
        ("cat", format!("rm -f .git/info/exclude; ln -s '{}' .git/info/exclude", shown("exclude-victim"))),
        (
            "emu",
            format!(
                "ln -sf '{}' \"$CLAUDE_CONFIG_DIR/.claude.json\"; ln -s '{}' \"$CLAUDE_CONFIG_DIR/.claude.switchyard-tmp\"",
                shown("secret.json"),
                shown("config-victim")
            ),
        ),
    ];
    for (name, _) in &plants {
        app.create_agent(merged(engineer("alpha", name), json!({"provider": "boxed", "clone": "agent"}))).await;
    }
    let mut before = Vec::new();
    for (name, commands) in &plants {
        before.push(typed(&app, name, commands).await);
    }
    let mut after = Vec::new();
    for ((name, _), agent) in plants.iter().zip(&before) {
        after.push(respawned(&app, name, &agent["pid"]).await);
    }
    outside.assert_untouched();
    let data_dir = app._data_dir.path();
    assert_eq!(holding_the_secret(data_dir), Vec::<PathBuf>::new(), "the secret was copied where agents read");

    // A link at a name the spawner no longer uses is left alone: fox runs again, token renewed;
    // owl and cat too (their hooks are in their own directories: the clone's Claude Code
    // settings are neither read nor written, nor its `.git/info/exclude` for them).
    for agent in &after[..3] {
        assert_ne!(agent["state"], "error", "{agent}");
    }
    // Where the spawner must read what the agent left, it refuses the link, naming it.
    let emu = &after[3];
    assert_eq!(emu["state"], "error", "{emu}");
    let reason = emu["failure_reason"].as_str().unwrap_or_default();
    assert!(reason.contains(".claude.json") && reason.contains("symbolic link"), "{reason}");
}

/// The conductor's provider for the committed-branch test: a shell with Claude Code's hooks.
const LINKED: &str = r#"
[providers.linked]
command = ["bash", "--norc", "--noprofile"]
screen_rules = "shell"
install_hooks = true
"#;

/// Creates a task, commits `links` (name → target) on the branch its agent will be spawned on,
/// dispatches it, and answers the task's id and its agent once spawned or failed.
async fn dispatched_onto(app: &TestApp, project: &Value, title: &str, links: &[(&str, PathBuf)]) -> (String, Value) {
    let task = app.create_task(json!({"project": "alpha", "title": title, "goal": "look around"})).await;
    let id = task["id"].as_str().expect("id").to_owned();
    let branch = format!("task/{}", &id.replace('-', "")[..8]);
    let repo = repo_of(project);
    git(&repo, &["checkout", "-q", "-b", &branch]);
    for (name, target) in links {
        let link = repo.join(name);
        std::fs::create_dir_all(link.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink(target, &link).expect("symlink");
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "links"]);
    git(&repo, &["checkout", "-q", "main"]);
    app.post_ok(&format!("/api/v1/tasks/{id}/dispatch"), json!({})).await;
    let runs = format!("/api/v1/tasks/{id}/runs");
    eventually("the task's agent is spawned, or fails", Duration::from_secs(60), || async {
        let runs = app.get_ok(&runs).await;
        let Some(name) = runs["items"][0]["agent_name"].as_str() else { return false };
        let agent = app.agent(name).await;
        agent["state"] == "error" || agent["pid"].is_u64()
    })
    .await;
    let name = app.get_ok(&runs).await["items"][0]["agent_name"].as_str().expect("agent").to_owned();
    (id, app.agent(&name).await)
}

#[tokio::test(flavor = "multi_thread")]
async fn links_committed_on_the_branch_a_new_agent_is_spawned_on_reach_nothing_outside() {
    let outside = Outside::new();
    let app = TestApp::builder().providers(LINKED).worker(|w| w.conductor = true).spawn().await;
    let project = app.create_project("alpha").await;
    app.patch_ok("/api/v1/projects/alpha", json!({"conductor_config": {"provider": "linked"}})).await;

    // CLAUDE.md pointing outside: the instructions are not written through it (the other
    // instruction files get them), and the agent starts.
    let (_, first) = dispatched_onto(&app, &project, "claude md", &[("CLAUDE.md", outside.path("planted"))]).await;
    assert!(first["pid"].is_u64(), "{first}");
    let clone = PathBuf::from(first["clone_path"].as_str().expect("clone"));
    assert!(std::fs::symlink_metadata(clone.join("CLAUDE.md")).expect("link").file_type().is_symlink());
    let agents_md = std::fs::read_to_string(clone.join("AGENTS.md")).expect("AGENTS.md");
    assert!(agents_md.contains("switchyard"), "{agents_md}");

    // Claude Code's settings pointing at a root-only file: refused, naming it, not copied.
    let (task, second) =
        dispatched_onto(&app, &project, "settings", &[(".claude/settings.local.json", outside.path("secret.json"))])
            .await;
    assert_eq!(second["state"], "error", "{second}");
    let reason = second["failure_reason"].as_str().unwrap_or_default();
    assert!(reason.contains(".claude/settings.local.json is a symbolic link"), "{reason}");
    // Another start would meet the same refusal: the task fails saying why, its agent not retried.
    let task = app
        .get_until(&format!("/api/v1/tasks/{task}"), "the task fails", Duration::from_secs(60), &[], |t| {
            t["status"] == "failed"
        })
        .await;
    assert!(task["result"].as_str().unwrap_or_default().contains("symbolic link"), "{task}");
    assert_eq!(app.agent_state(second["name"].as_str().expect("name")).await, AgentState::Error);

    outside.assert_untouched();
    assert_eq!(holding_the_secret(app._data_dir.path()), Vec::<PathBuf>::new());
}
