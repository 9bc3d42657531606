//! An agent that turns hostile stays in its sandbox: typed into a sandboxed pane, what a model
//! might type to leave it (remount the repository, move its refs, make a device) fails; and it
//! still reports its work, its branch reaching the project's repository through the API alone.
//! The built-in agent CLIs run sandboxed wherever bubblewrap is installed.

use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{assert_problem, engineer, eventually, git, merged, repo_of, TestApp};
use crate::isolation::{app_with_bwrap, probe, with_pane, SANDBOXED_SHELL};

#[tokio::test]
async fn a_sandboxed_agent_holds_no_capabilities_and_cannot_remount_the_repository_move_its_refs_or_make_a_device() {
    let app = app_with_bwrap(SANDBOXED_SHELL).await;
    let project = app.create_project("alpha").await;
    let repo = repo_of(&project);
    let main = git(&repo, &["rev-parse", "main"]).trim().to_owned();
    // Another commit the repository has, for the agent to point `main` at.
    git(&repo, &["commit", "--allow-empty", "--quiet", "-m", "elsewhere"]);
    let other = git(&repo, &["rev-parse", "HEAD"]).trim().to_owned();
    git(&repo, &["update-ref", "refs/heads/main", &main]);
    app.create_agent(merged(engineer("alpha", "fox"), json!({"provider": "boxed", "clone": "agent"}))).await;
    let fox = with_pane(&app, "fox").await;
    let clone = Path::new(fox["clone_path"].as_str().expect("fox's clone"));

    let commands = format!(
        "grep CapEff /proc/self/status; \
         mount -o remount,rw '{repo}' && echo remounted || echo remount-refused; \
         git -C '{repo}' update-ref refs/heads/main {other} && echo ref-moved || echo update-ref-refused; \
         mknod /tmp/disk b 8 0 && echo device-made || echo mknod-refused;",
        repo = repo.display(),
    );
    let answer = probe(&app, "fox", clone, &commands).await;
    assert!(answer.contains("CapEff:\t0000000000000000"), "the sandbox kept capabilities:\n{answer}");
    for expected in ["remount-refused", "update-ref-refused", "mknod-refused"] {
        assert!(answer.contains(expected), "{expected} missing from:\n{answer}");
    }
    assert_eq!(git(&repo, &["rev-parse", "main"]).trim(), main, "main moved from inside the sandbox");
}

/// A sandboxed agent that does its task as soon as it starts: commits in its clone, then
/// reports with `switchyard` (found on its PATH), keeping what the command said in its `.git`.
const REPORTING_SHELL: &str = r#"
[providers.boxed]
command = ["bash", "--norc", "--noprofile", "-c", '''
echo work > work.txt && git add work.txt && git -c user.name=fox -c user.email=fox@localhost commit --quiet -m work
reported=no
for try in $(seq 1 60); do
    if switchyard task done --result "sent from the sandbox" > .git/report.txt 2>&1; then reported=yes; break; fi
    sleep 0.5
done
echo "reported=$reported" >> .git/report.txt
exec sleep 600
''']
screen_rules = "shell"
sandbox = "bwrap"
"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_sandboxed_agent_reports_its_task_done_and_its_branch_reaches_the_repository_through_the_api() {
    let app =
        crate::helpers::TestApp::builder().providers(REPORTING_SHELL).worker(|w| w.conductor = true).spawn().await;
    let project = app.create_project("alpha").await;
    let repo = repo_of(&project);
    app.patch_ok("/api/v1/projects/alpha", json!({"conductor_config": {"provider": "boxed"}})).await;
    let task = app.create_task(json!({"project": "alpha", "title": "Write the work", "goal": "write work.txt"})).await;
    let id = task["id"].as_str().expect("id");
    crate::helpers::assert_json(app.post(&format!("/api/v1/tasks/{id}/dispatch"), json!({})).await, 202).await;

    let context = [format!("/api/v1/tasks/{id}/runs"), "/api/v1/agents?limit=100".to_owned()];
    let context: Vec<&str> = context.iter().map(String::as_str).collect();
    let done = app
        .get_until(&format!("/api/v1/tasks/{id}"), "the task is done", Duration::from_secs(120), &context, |t| {
            t["status"] == "done"
        })
        .await;
    assert_eq!(done["result"], "sent from the sandbox", "{done}");
    let runs = app.get_ok(&format!("/api/v1/tasks/{id}/runs")).await;
    let run = &runs["items"][0];
    let branch = run["branch"].as_str().expect("the run's branch");
    assert_eq!(git(&repo, &["show", &format!("{branch}:work.txt")]), "work\n", "the branch did not land");
    let agent = app.agent(run["agent_name"].as_str().expect("the run's agent")).await;
    let clone = Path::new(agent["clone_path"].as_str().expect("its clone"));
    let said = std::fs::read_to_string(clone.join(".git/report.txt")).unwrap_or_default();
    assert!(said.contains("reported=yes"), "switchyard task done said:\n{said}");
}

#[tokio::test]
async fn an_agent_sends_its_own_branch_only_and_never_the_target_branch() {
    let app = crate::helpers::spawn_app().await;
    let project = app.create_project("alpha").await;
    let fox = app.create_agent(merged(engineer("alpha", "fox"), json!({"clone": "agent", "branch": "fox-work"}))).await;
    app.create_agent(merged(engineer("alpha", "owl"), json!({"clone": "agent", "branch": "owl-work"}))).await;
    let token = app.agent_token(&fox).await;
    let put = |agent: &str, body: &'static [u8]| {
        let url = app.url(&format!("/api/v1/agents/{agent}/branch"));
        app.client.put(url).bearer_auth(&token).body(body).send()
    };
    let refused = assert_problem(put("owl", b"# v2 git bundle\n").await.expect("put"), 403).await;
    assert!(refused["detail"].as_str().unwrap_or_default().contains("fox"), "{refused}");
    let invalid = assert_problem(put("fox", b"not a bundle").await.expect("put"), 422).await;
    assert_eq!(invalid["errors"][0]["field"], "bundle", "{invalid}");

    // An agent whose branch became the project's target branch cannot move it: the merge queue does.
    app.create_agent(merged(engineer("alpha", "eel"), json!({"clone": "agent", "branch": "release"}))).await;
    git(&repo_of(&project), &["branch", "release", "main"]);
    app.patch_ok("/api/v1/projects/alpha", json!({"target_branch": "release"})).await;
    let response = app.admin(Method::PUT, "/api/v1/agents/eel/branch").body("x").send().await.expect("put");
    let problem = assert_problem(response, 409).await;
    assert!(problem["detail"].as_str().unwrap_or_default().contains("merge queue"), "{problem}");
}

/// The built-in `claude` and `codex`, running a shell (so no CLI is needed): `claude` as built
/// in, `codex` opted out.
const BUILT_INS_AS_SHELLS: &str = r#"
[providers.claude]
command = ["bash", "--norc", "--noprofile"]
resume = ["bash", "--norc", "--noprofile"]
screen_rules = "shell"
setup = "none"
install_hooks = false

[providers.codex]
command = ["bash", "--norc", "--noprofile"]
resume = ["bash", "--norc", "--noprofile"]
screen_rules = "shell"
setup = "none"
sandbox = "none"
"#;

/// The program a process runs, from `/proc/<pid>/cmdline`.
fn program(pid: &Value) -> String {
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", pid.as_u64().expect("pid"))).expect("cmdline");
    let first = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    let path = String::from_utf8_lossy(first).into_owned();
    Path::new(&path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or(path)
}

/// The program a pane runs once `nice` (its first program: agents run niced) has exec'd it.
async fn niced_program(pid: &Value) -> String {
    eventually("the pane's `nice` runs its program", Duration::from_secs(20), || async { program(pid) != "nice" })
        .await;
    program(pid)
}

#[tokio::test]
async fn the_built_in_agent_clis_run_under_bubblewrap_by_default_and_sandbox_none_opts_out() {
    let app: TestApp = app_with_bwrap(BUILT_INS_AS_SHELLS).await;
    assert_eq!(app.status().await["bubblewrap"], true, "/status says whether bubblewrap is installed");
    app.create_project("alpha").await;
    for (name, provider) in [("fox", "claude"), ("owl", "codex")] {
        app.create_agent(merged(engineer("alpha", name), json!({"provider": provider, "clone": "agent"}))).await;
    }
    let (fox, owl) = (with_pane(&app, "fox").await, with_pane(&app, "owl").await);
    assert_eq!(niced_program(&fox["pid"]).await, "bwrap", "the built-in claude runs sandboxed");
    assert_eq!(niced_program(&owl["pid"]).await, "bash", "`sandbox = \"none\"` runs it as it is");

    // Inside, the sandbox's view: another agent's clone is not there.
    let owl_clone = owl["clone_path"].as_str().expect("owl's clone");
    let fox_clone = Path::new(fox["clone_path"].as_str().expect("fox's clone"));
    let answer = probe(&app, "fox", fox_clone, &format!("ls '{owl_clone}' || echo other-clone-hidden;")).await;
    assert!(answer.contains("other-clone-hidden"), "{answer}");
}
