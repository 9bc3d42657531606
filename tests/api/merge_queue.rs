//! The merge queue against real repositories — bare, non-bare with another branch checked out,
//! and non-bare with the target branch checked out: ordered gated merges, predicted waits, real
//! conflicts fixed by a (scripted) fix agent, gate failures, recovery after a crash, and the
//! `state.json` export after each.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};
use switchyard::domain::merge_queue::EntryState;

use crate::helpers::{assert_json, assert_problem, eventually, git, spawn_app, TestApp};
use crate::state_schema::assert_state_file;

/// Which shape the project's repository has.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    Bare,
    /// Non-bare with `elsewhere` checked out.
    OtherBranchOut,
    /// Non-bare with the target branch (`main`) checked out.
    TargetOut,
}

/// A project over a repository of `shape`, and a developer clone of it where the test commits and
/// pushes branches.
pub(crate) struct Project {
    pub(crate) repo: PathBuf,
    pub(crate) dev: PathBuf,
    _dir: tempfile::TempDir,
}

pub(crate) async fn project(app: &TestApp, slug: &str, shape: Shape, files: &[(&str, &str)]) -> Project {
    let project = repos(shape, files);
    let body = json!({"slug": slug, "name": slug, "repo_path": project.repo});
    assert_json(app.post("/api/v1/projects", body).await, 201).await;
    project
}

/// The project's repository (seeded with a README and `files` on `main`) and the dev clone.
fn repos(shape: Shape, files: &[(&str, &str)]) -> Project {
    let dir = tempfile::tempdir().expect("temp dir");
    let seed = dir.path().join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    git(&seed, &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(seed.join("README.md"), "one\ntwo\nthree\n").unwrap();
    for (name, text) in files {
        std::fs::create_dir_all(seed.join(name).parent().unwrap()).unwrap();
        std::fs::write(seed.join(name), text).unwrap();
    }
    git(&seed, &["add", "-A"]);
    git(&seed, &["commit", "--quiet", "-m", "first"]);
    let repo = dir.path().join(if shape == Shape::Bare { "repo.git" } else { "repo" });
    let flags: &[&str] = if shape == Shape::Bare { &["--bare"] } else { &[] };
    let mut args = vec!["clone", "--quiet"];
    args.extend(flags);
    let (seed_s, repo_s) = (seed.to_string_lossy().into_owned(), repo.to_string_lossy().into_owned());
    args.extend([seed_s.as_str(), repo_s.as_str()]);
    git(dir.path(), &args);
    // The seed is scaffolding, not the project's remote: the merge queue pushes the merged target
    // to `origin` when the repository has one.
    git(&repo, &["remote", "remove", "origin"]);
    if shape == Shape::OtherBranchOut {
        git(&repo, &["checkout", "--quiet", "-b", "elsewhere"]);
    }
    let dev = dir.path().join("dev");
    git(dir.path(), &["clone", "--quiet", &repo_s, &dev.to_string_lossy()]);
    Project { repo, dev, _dir: dir }
}

impl Project {
    /// Commits `files` on `branch` (made from `origin/main` if new) in the dev clone and pushes it.
    pub(crate) fn push(&self, branch: &str, files: &[(&str, &str)]) {
        git(&self.dev, &["fetch", "--quiet", "origin"]);
        let exists = git(&self.dev, &["branch", "-r", "--list", &format!("origin/{branch}")]);
        let start = if exists.trim().is_empty() { "origin/main".to_owned() } else { format!("origin/{branch}") };
        git(&self.dev, &["checkout", "--quiet", "-B", branch, &start]);
        for (name, text) in files {
            let path = self.dev.join(name);
            if text.is_empty() {
                let _ = std::fs::remove_file(&path);
            } else {
                std::fs::write(path, text).unwrap();
            }
        }
        git(&self.dev, &["add", "-A"]);
        git(&self.dev, &["commit", "--quiet", "-m", &format!("work on {branch}")]);
        git(&self.dev, &["push", "--quiet", "origin", &format!("{branch}:{branch}")]);
    }

    /// The merge commits on `main`'s first-parent line, newest first, by subject.
    pub(crate) fn merges(&self) -> Vec<String> {
        let out = git(&self.repo, &["log", "--first-parent", "--merges", "--format=%s", "main"]);
        out.lines().map(str::to_owned).collect()
    }

    fn file_on_main(&self, name: &str) -> Option<String> {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&self.repo)
            .args(["show", &format!("main:{name}")])
            .output()
            .unwrap();
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The project's repository is never left mid-merge and its working tree (if any) is clean.
    pub(crate) fn assert_never_mid_merge(&self) {
        let git_dir = git(&self.repo, &["rev-parse", "--absolute-git-dir"]);
        let git_dir = Path::new(git_dir.trim());
        assert!(!git_dir.join("MERGE_HEAD").exists(), "no MERGE_HEAD in the project's repository");
        if !self.repo.ends_with("repo.git") {
            assert_eq!(git(&self.repo, &["status", "--porcelain"]), "", "the working tree is untouched");
        }
    }
}

/// Wish `slug` on branch `wish/<slug>` (which must exist), walked to `completed` by hand.
pub(crate) async fn completed_wish(app: &TestApp, project: &str, slug: &str) {
    let body = json!({"slug": slug, "project": project, "title": format!("Wish {slug}"), "branch": format!("wish/{slug}"),
        "groups": [{"key": "work", "title": "Work"}]});
    app.create_wish(body).await;
    app.start_wish(slug).await;
    app.post_ok(&format!("/api/v1/wishes/{slug}/groups/work/start"), json!({})).await;
    let wish = app.post_ok(&format!("/api/v1/wishes/{slug}/groups/work/complete"), json!({})).await;
    let mut status = wish["wish"]["status"].as_str().or(wish["status"].as_str()).unwrap_or("").to_owned();
    if status != "completed" {
        status = app.get_ok(&format!("/api/v1/wishes/{slug}")).await["status"].as_str().unwrap().to_owned();
    }
    if status == "executing" {
        // A review step, where the conductor asks for one.
        app.post_ok(&format!("/api/v1/wishes/{slug}/review"), json!({"verdict": "pass"})).await;
    }
    let wish = app.get_ok(&format!("/api/v1/wishes/{slug}")).await;
    assert_eq!(wish["status"], "completed", "{wish}");
}

pub(crate) async fn entry(app: &TestApp, slug: &str) -> Value {
    app.get_ok(&format!("/api/v1/merge-queue/{slug}")).await
}

async fn wish_status(app: &TestApp, slug: &str) -> String {
    app.get_ok(&format!("/api/v1/wishes/{slug}")).await["status"].as_str().unwrap().to_owned()
}

/// The gate, one entry at a time (the queue as it was before batches: each entry gated alone).
async fn set_gate(app: &TestApp, project: &str, check: &str) {
    let body = json!({"merge_check": check, "gate_timeout_secs": 60, "fix_cap": 2, "batch_max": 1,
        "gate_concurrency": 1});
    app.send(reqwest::Method::PUT, &format!("/api/v1/projects/{project}/merge-settings"), Some(body)).await;
}

/// What `tick` processed, as (wish, state) pairs.
pub(crate) fn processed(tick: &switchyard::app::merge_queue::Tick) -> Vec<(&str, EntryState)> {
    tick.processed.iter().map(|(w, s)| (w.as_str(), *s)).collect()
}

#[tokio::test]
async fn three_wishes_queued_at_once_merge_in_order_each_gated_by_the_repos_own_test() {
    let app = spawn_app().await;
    // The repository's own test: every *.txt says ok.
    let script = "#!/bin/sh\nfor f in *.txt; do [ -e \"$f\" ] || continue; grep -q ok \"$f\" || exit 1; done\n";
    let p = project(&app, "shop", Shape::Bare, &[("test.sh", script)]).await;
    set_gate(&app, "shop", "sh ./test.sh").await;
    for slug in ["a", "b", "c"] {
        p.push(&format!("wish/{slug}"), &[(&format!("{slug}.txt"), "ok\n")]);
        completed_wish(&app, "shop", slug).await;
    }
    let queue = app.merge_queue();
    let first = queue.tick().await.expect("tick");
    assert_eq!(first.entered, 3, "completed wishes of an enabled queue enter it on their own");
    // One entry at a time (batches of one, one gate at a time): each gated alone, in order.
    let all = [("a", EntryState::Completed), ("b", EntryState::Completed), ("c", EntryState::Completed)];
    assert_eq!(processed(&first), all);
    assert_eq!(first.gates, 3);
    assert!(queue.tick().await.unwrap().processed.is_empty());

    assert_eq!(p.merges(), ["Merge wish `c`: Wish c", "Merge wish `b`: Wish b", "Merge wish `a`: Wish a"]);
    for slug in ["a", "b", "c"] {
        assert_eq!(p.file_on_main(&format!("{slug}.txt")).as_deref(), Some("ok\n"));
        assert_eq!(wish_status(&app, slug).await, "merged");
        let e = entry(&app, slug).await;
        assert_eq!(e["state"], "completed");
        assert!(e["gate_log"].is_string(), "the gate's output is kept: {e}");
        // The merged wish branch is deleted (the project keeps none).
        assert!(git(&p.repo, &["branch", "--list", &format!("wish/{slug}")]).trim().is_empty());
    }
    p.assert_never_mid_merge();
    assert_eq!(app.count_events("merge.completed", "merge:a").await, 1);
    let queues = app.get_ok("/api/v1/merge-queue?project=shop").await;
    assert_eq!(queues[0]["target_branch"], "main");
    let order: Vec<&str> =
        queues[0]["entries"].as_array().unwrap().iter().map(|e| e["wish"].as_str().unwrap()).collect();
    assert_eq!(order, ["a", "b", "c"]);
    assert_state_file(&app).await;
}

#[tokio::test]
async fn a_wish_branch_already_in_the_target_completes_without_a_second_merge() {
    let app = spawn_app().await;
    let p = project(&app, "done", Shape::Bare, &[]).await;
    p.push("wish/by-hand", &[("hand.txt", "ok\n")]);
    completed_wish(&app, "done", "by-hand").await;
    // Someone merged it already: main fast-forwards to the wish's commit.
    git(&p.dev, &["push", "--quiet", "origin", "wish/by-hand:main"]);
    let main_before = git(&p.repo, &["rev-parse", "main"]);
    let queue = app.merge_queue();
    assert_eq!(processed(&queue.tick().await.unwrap()), [("by-hand", EntryState::Completed)]);
    assert_eq!(git(&p.repo, &["rev-parse", "main"]), main_before, "main did not move");
    assert!(p.merges().is_empty(), "no merge commit: {:?}", p.merges());
    assert_eq!(wish_status(&app, "by-hand").await, "merged");
    p.assert_never_mid_merge();
}

#[tokio::test]
async fn a_predicted_conflict_waits_then_conflicts_for_real_and_its_fix_agent_resolves_it() {
    let app = spawn_app().await;
    let p = project(&app, "blog", Shape::OtherBranchOut, &[]).await;
    app.send(
        reqwest::Method::PATCH,
        "/api/v1/projects/blog",
        Some(json!({"merge_queue_config": {"enabled": false, "track_mode": "all"}})),
    )
    .await;
    p.push("wish/first", &[("README.md", "one\nFIRST\nthree\n")]);
    p.push("wish/second", &[("README.md", "one\nSECOND\nthree\n")]);
    for slug in ["first", "second"] {
        completed_wish(&app, "blog", slug).await;
    }
    let queue = app.merge_queue();
    assert_eq!(queue.tick().await.unwrap().entered, 0, "a disabled queue takes only what is submitted");
    for slug in ["first", "second"] {
        let wish = app.post_ok(&format!("/api/v1/wishes/{slug}/submit"), json!({})).await;
        assert_eq!(wish["status"], "pending_merge");
    }

    let tick = queue.tick().await.unwrap();
    assert_eq!(processed(&tick), [("first", EntryState::Completed)]);
    assert_eq!(app.count_events("merge.waiting", "merge:second").await, 1, "second waited for first");
    let waited: Value = sqlx::query_scalar(
        "SELECT payload FROM events WHERE type = 'merge.waiting' AND subject = 'merge:second' ORDER BY id LIMIT 1",
    )
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(waited["held_for"], "first");
    p.assert_never_mid_merge();

    let tick = queue.tick().await.unwrap();
    assert_eq!(processed(&tick), [("second", EntryState::Conflict)]);
    p.assert_never_mid_merge();
    assert_eq!(wish_status(&app, "second").await, "conflict");
    let e = entry(&app, "second").await;
    assert_eq!(e["conflict_files"], json!(["README.md"]));
    assert_eq!(e["held_for"], Value::Null);
    let fixer = e["fix_agent"].as_str().expect("a fix agent was sent").to_owned();
    let agent = app.agent(&fixer).await;
    assert_eq!(
        (agent["role"].as_str(), agent["kind"].as_str(), agent["branch"].as_str()),
        (Some("fix"), Some("worker"), Some("wish/second"))
    );
    let inbox = app.get_ok(&format!("/api/v1/messages?to={fixer}")).await;
    let brief = inbox["items"][0]["body"].as_str().expect("the brief is its first message").to_owned();
    assert!(brief.contains("README.md") && brief.contains("git merge origin/main"), "{brief}");
    assert_eq!(outbox_to(&app, &fixer), [brief.as_str()], "the brief is in the outbox like any message");

    // The fix agent (this test) merges main into its branch, resolves, pushes, reports done.
    git(&p.dev, &["fetch", "--quiet", "origin"]);
    git(&p.dev, &["checkout", "--quiet", "-B", "wish/second", "origin/wish/second"]);
    let _ = std::process::Command::new("git").arg("-C").arg(&p.dev).args(["merge", "--quiet", "origin/main"]).output();
    std::fs::write(p.dev.join("README.md"), "one\nFIRST\nSECOND\nthree\n").unwrap();
    git(&p.dev, &["add", "-A"]);
    git(&p.dev, &["commit", "--quiet", "--no-edit"]);
    git(&p.dev, &["push", "--quiet", "origin", "wish/second"]);
    fix_done(&app, "second", &fixer, "kept both lines").await;
    assert_eq!(wish_status(&app, "second").await, "pending_merge");

    assert_eq!(processed(&queue.tick().await.unwrap()), [("second", EntryState::Completed)]);
    assert_eq!(p.file_on_main("README.md").as_deref(), Some("one\nFIRST\nSECOND\nthree\n"));
    assert_eq!(p.merges().len(), 2);
    p.assert_never_mid_merge();
    assert_eq!(git(&p.repo, &["symbolic-ref", "--short", "HEAD"]).trim(), "elsewhere", "the user's checkout stays");
    assert_state_file(&app).await;
}

/// The bodies of the outbox file's lines to `to`, in order.
fn outbox_to(app: &TestApp, to: &str) -> Vec<String> {
    let outbox = std::fs::read_to_string(app._data_dir.path().join("outbox.jsonl")).unwrap_or_default();
    outbox
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|l| l["to"] == to)
        .map(|l| l["body"].as_str().expect("a body").to_owned())
        .collect()
}

/// The fix agent reports done with its own token, as `switchyard fix done` does (after pushing).
async fn fix_done(app: &TestApp, _slug: &str, agent: &str, summary: &str) {
    let token = app.agent_token(&app.agent(agent).await).await;
    let response = app
        .client
        .post(app.url(&format!("/api/v1/agents/{agent}/report")))
        .bearer_auth(token)
        .json(&json!({"kind": "fix_done", "summary": summary}))
        .send()
        .await
        .unwrap();
    assert_json(response, 200).await;
}

#[tokio::test]
async fn a_failed_gate_sends_its_log_to_a_fix_agent_and_the_fixed_branch_merges() {
    let app = spawn_app().await;
    let check = "#!/bin/sh\nif [ -e broken.txt ]; then echo 'FAILED: broken.txt must not exist'; exit 1; fi\n";
    let p = project(&app, "api", Shape::Bare, &[("check.sh", check)]).await;
    set_gate(&app, "api", "sh ./check.sh").await;
    p.push("wish/feature", &[("broken.txt", "x\n"), ("feature.txt", "ok\n")]);
    completed_wish(&app, "api", "feature").await;
    let queue = app.merge_queue();
    let main_before = git(&p.repo, &["rev-parse", "main"]);
    assert_eq!(processed(&queue.tick().await.unwrap()), [("feature", EntryState::Failed)]);
    assert_eq!(git(&p.repo, &["rev-parse", "main"]), main_before, "an untested commit never reaches main");
    assert_eq!(wish_status(&app, "feature").await, "failed");
    let e = entry(&app, "feature").await;
    assert!(e["gate_log"].as_str().unwrap().contains("FAILED: broken.txt"), "{e}");
    assert!(e["failure_reason"].as_str().unwrap().contains("exit 1"), "{e}");
    let fixer = e["fix_agent"].as_str().unwrap().to_owned();
    let inbox = app.get_ok(&format!("/api/v1/messages?to={fixer}")).await;
    assert!(inbox["items"][0]["body"].as_str().unwrap().contains("FAILED: broken.txt"));
    assert_eq!(outbox_to(&app, &fixer), [inbox["items"][0]["body"].as_str().unwrap()]);

    p.push("wish/feature", &[("broken.txt", "")]);
    fix_done(&app, "feature", &fixer, "removed broken.txt").await;
    assert_eq!(processed(&queue.tick().await.unwrap()), [("feature", EntryState::Completed)]);
    assert_eq!(wish_status(&app, "feature").await, "merged");
    assert_eq!(p.file_on_main("feature.txt").as_deref(), Some("ok\n"));
    assert_eq!(p.file_on_main("broken.txt"), None);
    assert_eq!(entry(&app, "feature").await["attempts"], 2);
    assert_state_file(&app).await;
}

#[tokio::test]
async fn the_fix_cap_hands_the_entry_to_a_person() {
    let app = spawn_app().await;
    let p = project(&app, "cap", Shape::Bare, &[]).await;
    let body = json!({"merge_check": "exit 1", "fix_cap": 1});
    app.send(reqwest::Method::PUT, "/api/v1/projects/cap/merge-settings", Some(body)).await;
    p.push("wish/w", &[("w.txt", "w\n")]);
    completed_wish(&app, "cap", "w").await;
    let queue = app.merge_queue();
    queue.tick().await.unwrap();
    let fixer = entry(&app, "w").await["fix_agent"].as_str().unwrap().to_owned();
    fix_done(&app, "w", &fixer, "tried").await;
    assert_eq!(processed(&queue.tick().await.unwrap()), [("w", EntryState::Failed)]);
    let e = entry(&app, "w").await;
    assert_eq!(
        (e["assignee"].as_str(), e["fix_agent"].as_str(), e["fix_attempts"].as_i64()),
        (Some("human"), None, Some(1))
    );
    assert_eq!(app.count_events("merge.needs_human", "merge:w").await, 1);
}

/// Programs a person's repository could run on git's behalf (hooks, fsmonitor), each leaving a
/// marker in `markers` if it ever runs.
fn plant_programs(repo: &Path, markers: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(markers).unwrap();
    let hooks = repo.join(".git/hooks");
    let program = |dir: &Path, name: &str| {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\ntouch '{}/{name}'\n", markers.display())).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    };
    for hook in ["post-checkout", "post-merge", "post-index-change", "reference-transaction"] {
        program(&hooks, hook);
    }
    let fsmonitor = program(markers.parent().unwrap(), "fsmonitor");
    git(repo, &["config", "core.fsmonitor", &fsmonitor.to_string_lossy()]);
}

/// The target branch checked out in the project's repository, as most people keep it: a clean
/// working tree moves with the merge, as `git merge --ff-only` would, running nothing the
/// repository names.
#[tokio::test]
async fn a_clean_checked_out_target_moves_with_its_working_tree() {
    let app = spawn_app().await;
    let p = project(&app, "home", Shape::TargetOut, &[]).await;
    p.push("wish/w", &[("w.txt", "w\n"), ("README.md", "one\ntwo\nthree\nfour\n")]);
    completed_wish(&app, "home", "w").await;
    // Planted after the push (which runs the repository's hooks, as git does for any push), and
    // looked at before the test's own git commands run them.
    let markers = p.repo.parent().unwrap().join("markers");
    plant_programs(&p.repo, &markers);
    let queue = app.merge_queue();
    assert_eq!(processed(&queue.tick().await.unwrap()), [("w", EntryState::Completed)]);
    let ran: Vec<_> = std::fs::read_dir(&markers).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(ran.is_empty(), "nothing the repository names ran: {ran:?}");
    git(&p.repo, &["config", "--unset", "core.fsmonitor"]);
    assert_eq!(wish_status(&app, "w").await, "merged");
    assert_eq!(p.merges(), ["Merge wish `w`: Wish w"]);
    assert_eq!(git(&p.repo, &["symbolic-ref", "HEAD"]).trim(), "refs/heads/main");
    assert_eq!(std::fs::read_to_string(p.repo.join("w.txt")).unwrap(), "w\n");
    assert_eq!(std::fs::read_to_string(p.repo.join("README.md")).unwrap(), "one\ntwo\nthree\nfour\n");
    p.assert_never_mid_merge();
}

/// A person's work in the tree where the target is checked out: what `git` says of it, and the
/// bytes of each file, which nothing the queue does may change.
fn work_of(repo: &Path, files: &[&str]) -> (String, String, Vec<Vec<u8>>) {
    let bytes = files.iter().map(|f| std::fs::read(repo.join(f)).unwrap()).collect();
    let staged = files.iter().map(|f| git(repo, &["show", &format!(":{f}")])).collect::<Vec<_>>().join("|");
    (git(repo, &["status", "--porcelain"]), staged, bytes)
}

/// Uncommitted work where the target is checked out: the first entry free to go waits, visibly,
/// with the work untouched byte for byte and `main` where it was — never `failed` — and merges by
/// itself once the tree is clean.
#[tokio::test]
async fn a_dirty_checked_out_target_makes_the_entry_wait_until_the_tree_is_clean() {
    use crate::dashboard::Dashboard;
    let app = spawn_app().await;
    let p = project(&app, "desk", Shape::TargetOut, &[("notes.txt", "a\n")]).await;
    p.push("wish/w", &[("w.txt", "w\n")]);
    completed_wish(&app, "desk", "w").await;
    p.push("wish/v", &[("v.txt", "v\n")]);
    completed_wish(&app, "desk", "v").await;
    // A staged new file and an unstaged edit.
    std::fs::write(p.repo.join("staged.txt"), "staged\n").unwrap();
    git(&p.repo, &["add", "staged.txt"]);
    std::fs::write(p.repo.join("notes.txt"), "a\nunstaged\n").unwrap();
    let work = work_of(&p.repo, &["staged.txt", "notes.txt"]);
    assert_eq!(work.0, " M notes.txt\nA  staged.txt\n");
    let main_before = git(&p.repo, &["rev-parse", "main"]);

    let queue = app.merge_queue();
    for _ in 0..2 {
        assert!(queue.tick().await.unwrap().processed.is_empty());
    }
    let e = entry(&app, "w").await;
    let waiting = format!("uncommitted changes in {}", p.repo.display());
    assert_eq!((e["state"].as_str(), e["waiting"].as_str()), (Some("pending"), Some(waiting.as_str())), "{e}");
    assert_eq!(wish_status(&app, "w").await, "pending_merge");
    assert_eq!(git(&p.repo, &["rev-parse", "main"]), main_before);
    assert_eq!(work_of(&p.repo, &["staged.txt", "notes.txt"]), work, "the person's work is untouched");
    let (status, html) = Dashboard::login(&app).await.get("/merge-queue?project=desk").await;
    assert_eq!(status, 200);
    assert!(html.contains(&format!("waiting: {waiting}")), "{html}");
    assert_eq!(entry(&app, "v").await["waiting"], Value::Null, "only the entry that would go waits");

    // Held by a person, it gives way to the next, which waits the same.
    app.post_ok("/api/v1/merge-queue/w/hold", json!({})).await;
    assert!(queue.tick().await.unwrap().processed.is_empty());
    assert_eq!(entry(&app, "v").await["waiting"], waiting.as_str());

    // The person commits their work: the entry goes on by itself, onto it; what the held one
    // waited for is over too.
    git(&p.repo, &["commit", "--quiet", "-am", "mine"]);
    assert_eq!(processed(&queue.tick().await.unwrap()), [("v", EntryState::Completed)]);
    assert_eq!(entry(&app, "v").await["waiting"], Value::Null);
    assert_eq!(entry(&app, "w").await["waiting"], Value::Null);
    app.post_ok("/api/v1/merge-queue/w/release", json!({})).await;
    assert_eq!(processed(&queue.tick().await.unwrap()), [("w", EntryState::Completed)]);
    assert_eq!(std::fs::read_to_string(p.repo.join("w.txt")).unwrap(), "w\n");
    assert_eq!(std::fs::read_to_string(p.repo.join("v.txt")).unwrap(), "v\n");
    assert_eq!(std::fs::read_to_string(p.repo.join("notes.txt")).unwrap(), "a\nunstaged\n");
    let log = git(&p.repo, &["log", "--first-parent", "--format=%s", "-3", "main"]);
    assert_eq!(log, "Merge wish `w`: Wish w\nMerge wish `v`: Wish v\nmine\n");
    p.assert_never_mid_merge();
}

/// Where the gates of `project`'s `main` run: its scratch clone, which a gate writes (and only it).
fn scratch(app: &TestApp, project: &str) -> PathBuf {
    app._data_dir.path().join("merge-queue").join(project).join("main")
}

/// The pass saw the target free; the user checks it out (here: in a linked working tree, with a
/// file of their own in it) while the gate runs: the target is not moved, looked at again just
/// before the move, and the entry waits for that tree; once the file is gone, it moves with it.
#[tokio::test]
async fn a_target_checked_out_while_the_gate_runs_waits_for_that_tree_then_moves_with_it() {
    let app = spawn_app().await;
    let p = project(&app, "late", Shape::OtherBranchOut, &[]).await;
    let tree = p.repo.parent().unwrap().join("user-tree");
    // The gate says it started, then waits for the user (it cannot touch the repository itself).
    set_gate(&app, "late", "touch started; while [ ! -e go ]; do sleep 0.05; done").await;
    p.push("wish/w", &[("w.txt", "w\n")]);
    completed_wish(&app, "late", "w").await;
    let main_before = git(&p.repo, &["rev-parse", "main"]);
    let queue = app.merge_queue();
    let scratch = scratch(&app, "late");
    let user = async {
        crate::helpers::eventually("the gate started", std::time::Duration::from_secs(30), || async {
            scratch.join("started").exists()
        })
        .await;
        git(&p.repo, &["worktree", "add", "--quiet", &tree.to_string_lossy(), "main"]);
        std::fs::write(tree.join("draft.txt"), "mine\n").unwrap();
        std::fs::write(scratch.join("go"), "").unwrap();
    };
    let (tick, ()) = tokio::join!(queue.tick(), user);
    assert_eq!(processed(&tick.unwrap()), [("w", EntryState::Pending)]);
    let e = entry(&app, "w").await;
    let waiting = format!("uncommitted changes in {}", tree.display());
    assert_eq!((e["state"].as_str(), e["waiting"].as_str()), (Some("pending"), Some(waiting.as_str())), "{e}");
    assert_eq!(git(&p.repo, &["rev-parse", "main"]), main_before);
    assert_eq!(std::fs::read_to_string(tree.join("draft.txt")).unwrap(), "mine\n");
    assert!(!tree.join("w.txt").exists(), "the user's tree is as they made it");

    std::fs::remove_file(tree.join("draft.txt")).unwrap();
    set_gate(&app, "late", "true").await;
    assert_eq!(processed(&queue.tick().await.unwrap()), [("w", EntryState::Completed)]);
    assert_eq!(std::fs::read_to_string(tree.join("w.txt")).unwrap(), "w\n");
    assert_eq!(git(&tree, &["status", "--porcelain"]), "");
}

#[tokio::test]
async fn a_claim_left_by_a_dead_process_is_settled_against_git_and_never_merged_twice() {
    let app = spawn_app().await;
    let p = project(&app, "crash", Shape::Bare, &[]).await;
    for slug in ["moved", "gated"] {
        p.push(&format!("wish/{slug}"), &[(&format!("{slug}.txt"), "x\n")]);
        completed_wish(&app, "crash", slug).await;
        app.post_ok(&format!("/api/v1/wishes/{slug}/submit"), json!({})).await;
        // Held until faked below, so no pass processes it for real meanwhile.
        app.post_ok(&format!("/api/v1/merge-queue/{slug}/hold"), json!({})).await;
    }
    // `moved`: the process died after moving main, before recording it. `gated`: after the gate
    // passed and the merge commit was recorded, before moving main.
    let repo = p.repo.clone();
    let heads = switchyard::git::merge::branch_heads(&repo).await.unwrap();
    let base = heads["main"].clone();
    let merge = |wish: String, base: String| {
        let repo = repo.clone();
        async move {
            match switchyard::git::branches::merge_as(
                &repo,
                &base,
                &wish,
                "Merge (before the crash)",
                switchyard::git::merge::MERGE_QUEUE,
            )
            .await
            .unwrap()
            {
                switchyard::git::branches::Merge::Clean(c) => c,
                other => panic!("{other:?}"),
            }
        }
    };
    let moved = merge(heads["wish/moved"].clone(), base.clone()).await;
    assert!(switchyard::git::merge::move_branch(&repo, "main", &moved, &base, "test").await.unwrap());
    let gated = merge(heads["wish/gated"].clone(), moved.clone()).await;
    for (slug, base, wish, merge) in
        [("moved", &base, &heads["wish/moved"], &moved), ("gated", &moved, &heads["wish/gated"], &gated)]
    {
        sqlx::query(
            "UPDATE merge_queue SET state = 'processing', held = false, claimed_by = 'node-gone', claimed_run = now() - interval '1 hour',
                 lease_until = now() - interval '1 minute', base_commit = $2, wish_commit = $3, merge_commit = $4, attempts = 1
             WHERE wish_id = (SELECT id FROM wishes WHERE slug = $1)",
        )
        .bind(slug)
        .bind(base)
        .bind(wish)
        .bind(merge)
        .execute(&app.pool)
        .await
        .unwrap();
        // Only one entry per queue may be processing: settle the first before faking the second.
        if slug == "moved" {
            let tick = app.merge_queue().tick().await.unwrap();
            assert_eq!(tick.recovered, [("moved".to_owned(), EntryState::Completed)]);
        }
    }
    let tick = app.merge_queue().tick().await.unwrap();
    assert_eq!(tick.recovered, [("gated".to_owned(), EntryState::Completed)]);
    assert_eq!(git(&p.repo, &["rev-parse", "main"]).trim(), gated, "main took the recorded merge commit");
    assert_eq!(p.merges().len(), 2, "exactly one merge commit per wish");
    for slug in ["moved", "gated"] {
        assert_eq!(wish_status(&app, slug).await, "merged");
        assert_eq!(entry(&app, slug).await["state"], "completed");
    }
    assert!(app.merge_queue().tick().await.unwrap().processed.is_empty());
}

#[tokio::test]
async fn predicting_a_new_entry_trial_merges_only_the_pairs_that_touch_a_common_file_and_repeats_from_the_cache() {
    let app = spawn_app().await;
    let p = project(&app, "many", Shape::Bare, &[]).await;
    let queue = app.merge_queue();
    for (i, slug) in ["w0", "w1", "w2", "w3", "w4"].iter().enumerate() {
        p.push(&format!("wish/{slug}"), &[(&format!("{slug}.txt"), "x\n")]);
        completed_wish(&app, "many", slug).await;
        app.post_ok(&format!("/api/v1/wishes/{slug}/submit"), json!({})).await;
        app.post_ok(&format!("/api/v1/merge-queue/{slug}/hold"), json!({})).await;
        let tick = queue.tick().await.unwrap();
        // The new entry against the target; the entries ahead touch other files (no trial merge);
        // the others' predictions against the target are cached.
        let pairs = (1..=i).sum::<usize>();
        assert_eq!((tick.trial_merges, tick.cached, tick.disjoint), (1, i, pairs), "entry {i}");
        assert!(tick.processed.is_empty(), "held entries wait");
    }
    let again = queue.tick().await.unwrap();
    assert_eq!((again.trial_merges, again.cached, again.disjoint), (0, 5, 10));
    let e = entry(&app, "w4").await;
    assert_eq!(e["prediction"]["conflicts_ahead"], json!([]));
    assert_eq!(e["prediction"]["target"]["outcome"], "clean");
    // One ahead merges: the prediction of an entry behind it stands (its branch and what it
    // conflicts with are the same), so the pass does not write it again.
    app.post_ok("/api/v1/merge-queue/w0/release", json!({})).await;
    let tick = queue.tick().await.unwrap();
    assert_eq!(processed(&tick), [("w0", EntryState::Completed)]);
    let after = entry(&app, "w4").await;
    assert_eq!((&after["prediction"], &after["updated_at"]), (&e["prediction"], &e["updated_at"]));
}

#[tokio::test]
async fn people_hold_release_retry_and_remove_entries_and_bad_input_is_a_problem() {
    let app = spawn_app().await;
    let p = project(&app, "ops", Shape::Bare, &[]).await;
    p.push("wish/w", &[("w.txt", "w\n")]);
    completed_wish(&app, "ops", "w").await;
    assert_problem(app.get("/api/v1/merge-queue/w").await, 404).await;
    assert_problem(app.post("/api/v1/wishes/nope/submit", json!({})).await, 404).await;
    app.post_ok("/api/v1/wishes/w/submit", json!({})).await;
    assert_problem(app.post("/api/v1/wishes/w/submit", json!({})).await, 409).await;
    let held = app.post_ok("/api/v1/merge-queue/w/hold", json!({})).await;
    assert_eq!(held["held"], true);
    assert_problem(app.post("/api/v1/merge-queue/w/hold", json!({})).await, 409).await;
    assert!(app.merge_queue().tick().await.unwrap().processed.is_empty(), "a held entry waits");
    app.post_ok("/api/v1/merge-queue/w/release", json!({})).await;
    let problem = assert_problem(app.post("/api/v1/merge-queue/w/retry", json!({})).await, 409).await;
    assert!(problem["detail"].as_str().unwrap().contains("pending"), "{problem}");
    let response = app.send(reqwest::Method::DELETE, "/api/v1/merge-queue/w", None).await;
    assert_eq!(response.status(), 204);
    assert_eq!(wish_status(&app, "w").await, "completed");
    assert_eq!(app.get_ok("/api/v1/wishes/w").await["held"], true, "a removed wish waits for a person");

    let bad = json!({"merge_check": "ok", "fix_cap": 99, "gate_timeout_secs": 0});
    let problem =
        assert_problem(app.send(reqwest::Method::PUT, "/api/v1/projects/ops/merge-settings", Some(bad)).await, 422)
            .await;
    let fields: Vec<&str> =
        problem["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["gate_timeout_secs", "fix_cap"]);
    let unknown = json!({"merge_chek": "x"});
    assert_problem(app.send(reqwest::Method::PUT, "/api/v1/projects/ops/merge-settings", Some(unknown)).await, 422)
        .await;
    assert_problem(app.get("/api/v1/projects/nope/merge-settings").await, 404).await;
    let settings = app.get_ok("/api/v1/projects/ops/merge-settings").await;
    assert_eq!((settings["version"].as_i64(), settings["fix_cap"].as_i64()), (Some(0), Some(2)));
    let stale = app
        .admin(reqwest::Method::PUT, "/api/v1/projects/ops/merge-settings")
        .header("If-Match", "\"7\"")
        .json(&json!({"fix_cap": 1}))
        .send()
        .await
        .unwrap();
    assert_problem(stale, 412).await;
    assert_problem(app.get("/api/v1/merge-queue?project=nope").await, 422).await;
    assert_problem(app.get("/api/v1/history?status=lost").await, 422).await;
    assert_problem(app.get("/api/v1/history?cursor=zzz").await, 422).await;
    assert_problem(app.get("/api/v1/history?limit=0").await, 422).await;
}

#[tokio::test]
async fn finished_workers_are_history_and_merged_with_their_wish() {
    let app = spawn_app().await;
    let p = project(&app, "hist", Shape::Bare, &[]).await;
    p.push("wish/h", &[("h.txt", "h\n")]);
    completed_wish(&app, "hist", "h").await;
    let agent = app
        .create_agent(json!({"name": "busy-bee", "project": "hist", "kind": "worker", "role": "engineer",
            "provider": "claude", "wish": "h", "task": "Write h.txt"}))
        .await;
    let failed = app
        .create_agent(
            json!({"name": "sad-cat", "project": "hist", "kind": "worker", "role": "engineer", "provider": "claude"}),
        )
        .await;
    for (id, state, reason) in [(&agent["id"], "done", None), (&failed["id"], "error", Some("tests failed"))] {
        sqlx::query("UPDATE agents SET state = $2, failure_reason = $3, summary = 'did it' WHERE id = $1::uuid")
            .bind(id.as_str().unwrap())
            .bind(state)
            .bind(reason)
            .execute(&app.pool)
            .await
            .unwrap();
    }
    let page = app.get_ok("/api/v1/history?project=hist").await;
    let statuses: Vec<(&str, &str)> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["name"].as_str().unwrap(), h["status"].as_str().unwrap()))
        .collect();
    assert_eq!(statuses, [("sad-cat", "failed"), ("busy-bee", "no-pr")]);
    let first = app.get_ok("/api/v1/history?project=hist&limit=1").await;
    let cursor = first["next_cursor"].as_str().expect("a second page");
    let second = app.get_ok(&format!("/api/v1/history?project=hist&limit=1&cursor={cursor}")).await;
    assert_eq!(second["items"][0]["name"], "busy-bee");
    assert_eq!(second["next_cursor"], Value::Null);

    app.post_ok("/api/v1/wishes/h/submit", json!({})).await;
    app.merge_queue().tick().await.unwrap();
    let merged = app.get_ok("/api/v1/history?status=merged").await;
    assert_eq!(merged["items"][0]["name"], "busy-bee");
    // Deleting the agent keeps its history.
    let response = app.send(reqwest::Method::DELETE, "/api/v1/agents/busy-bee?force=true", None).await;
    assert!(response.status().is_success(), "{}", response.status());
    assert_eq!(app.get_ok("/api/v1/history?project=hist").await["items"].as_array().unwrap().len(), 2);
    assert_state_file(&app).await;
}

/// Kills every process at work in `dir`, and the sandboxes that run them.
fn kill_working_in(dir: &Path) {
    let dir = dir.to_string_lossy().into_owned();
    for process in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = process.file_name().to_string_lossy().parse::<i32>() else { continue };
        let cwd = std::fs::read_link(process.path().join("cwd")).unwrap_or_default();
        let cmdline = std::fs::read(process.path().join("cmdline")).unwrap_or_default();
        let program = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        let sandbox = program.ends_with(b"bwrap") && String::from_utf8_lossy(&cmdline).contains(&dir);
        if cwd == Path::new(&dir) || sandbox {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

#[tokio::test]
async fn a_sigkill_while_the_gate_runs_ends_in_exactly_one_merge_commit() {
    use crate::binary::{switchyard, Served};
    let (database_url, _) = crate::helpers::fresh_database().await;
    let data_dir = tempfile::tempdir().unwrap();
    let start = || {
        let mut cmd = switchyard(data_dir.path());
        // The wish is walked by hand: no worker, no conductor.
        cmd.env("DATABASE_URL", &database_url).env("SWITCHYARD_WORKER", "false").env("SWITCHYARD_CONDUCTOR", "false");
        Served::start(cmd)
    };
    let first = start();
    let pool = sqlx::PgPool::connect(&database_url).await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    let (_, token) =
        switchyard::db::tokens::create(&mut tx, "crash-test", switchyard::auth::Scope::Admin).await.unwrap();
    tx.commit().await.unwrap();
    let client = reqwest::Client::new();
    let call = |api: String, path: &str, body: Value| {
        let request = client.post(format!("{api}/api/v1{path}")).bearer_auth(&token).json(&body);
        let path = path.to_owned();
        async move {
            let response = request.send().await.unwrap();
            assert!(response.status().is_success(), "{path}: {}", response.text().await.unwrap());
        }
    };

    // The gate, a script beside the repository (which it sees): the first run says it started
    // and hangs; after the crash it passes.
    let p = repos(Shape::Bare, &[]);
    let scratch = data_dir.path().join("merge-queue").join("crash").join("main");
    let gate = p.repo.join("gate.sh");
    std::fs::write(&gate, "#!/bin/sh\ntouch started\nexec sleep 60\n").unwrap();
    p.push("wish/slow", &[("slow.txt", "x\n")]);
    let project =
        json!({"slug": "crash", "name": "crash", "repo_path": p.repo, "conductor_config": {"review": "none"}});
    call(first.api.clone(), "/projects", project).await;
    let settings = client
        .put(format!("{}/api/v1/projects/crash/merge-settings", first.api))
        .bearer_auth(&token)
        .json(&json!({"merge_check": format!("sh {}", gate.display())}))
        .send()
        .await
        .unwrap();
    assert!(settings.status().is_success());
    let wish = json!({"slug": "slow", "project": "crash", "title": "Slow", "branch": "wish/slow",
        "groups": [{"key": "work", "title": "Work"}]});
    call(first.api.clone(), "/wishes", wish).await;
    for step in ["plan", "queue", "start", "groups/work/start", "groups/work/complete"] {
        call(first.api.clone(), &format!("/wishes/slow/{step}"), json!({})).await;
    }
    // The queue (running in the server) takes it, merges in memory and starts the gate.
    crate::helpers::eventually("the gate started", std::time::Duration::from_secs(30), || {
        let started = scratch.join("started").exists();
        async move { started }
    })
    .await;
    let state: String = sqlx::query_scalar("SELECT state FROM merge_queue").fetch_one(&pool).await.unwrap();
    assert_eq!(state, "processing");
    first.crash();
    // The gate outlives the server (as it would): end it.
    kill_working_in(&scratch);
    std::fs::write(&gate, "#!/bin/sh\nexit 0\n").unwrap();
    let main_before = git(&p.repo, &["rev-parse", "main"]);

    let second = start();
    crate::helpers::eventually("the entry completed after the restart", std::time::Duration::from_secs(30), || {
        let pool = pool.clone();
        async move {
            let state: String = sqlx::query_scalar("SELECT state FROM merge_queue").fetch_one(&pool).await.unwrap();
            state == "completed"
        }
    })
    .await;
    let attempts: i32 = sqlx::query_scalar("SELECT attempts FROM merge_queue").fetch_one(&pool).await.unwrap();
    assert_eq!(attempts, 2, "the void claim was retried once");
    assert_eq!(p.merges(), ["Merge wish `slow`: Slow"], "exactly one merge commit");
    let parent = git(&p.repo, &["rev-parse", "main^1"]);
    assert_eq!(parent, main_before, "made on the commit main was at");
    let status: String =
        sqlx::query_scalar("SELECT status FROM wishes WHERE slug = 'slow'").fetch_one(&pool).await.unwrap();
    assert_eq!(status, "merged");
    p.assert_never_mid_merge();
    second.stop();
}

#[tokio::test]
async fn the_dashboard_shows_each_queue_with_its_log_acts_on_entries_and_lists_history() {
    use crate::dashboard::{redirected, Dashboard};
    let app = spawn_app().await;
    let p = project(&app, "dash", Shape::Bare, &[]).await;
    let body = json!({"merge_check": "echo '<b>boom</b>'; exit 1", "fix_cap": 0});
    app.send(reqwest::Method::PUT, "/api/v1/projects/dash/merge-settings", Some(body)).await;
    p.push("wish/page", &[("page.txt", "p\n")]);
    completed_wish(&app, "dash", "page").await;
    let dashboard = Dashboard::login(&app).await;
    let (status, html) = dashboard.get("/wishes/page/conflicts").await;
    assert_eq!(status, 200);
    assert!(html.contains("with main"), "{html}");
    // What the branch changes is the changes part's, not repeated in the prediction.
    assert!(!html.contains("page.txt"), "{html}");
    let (status, html) = dashboard.get("/wishes/page/changes").await;
    assert_eq!(status, 200);
    assert!(html.contains("page.txt"), "{html}");

    assert_eq!(processed(&app.merge_queue().tick().await.unwrap()), [("page", EntryState::Failed)]);
    let (status, html) = dashboard.get("/merge-queue?project=dash").await;
    assert_eq!(status, 200);
    assert!(html.contains("dash → <code>main</code>"), "{html}");
    assert!(html.contains("&#60;b&#62;boom&#60;/b&#62;") && !html.contains("<b>boom"), "the gate log is escaped");
    assert!(html.contains("needs a person") && html.contains(">Retry<"), "{html}");
    let (_, overview) = dashboard.get("/").await;
    assert!(overview.contains("merge failed: the gate"), "the overview's needs-you lists it");

    let held = dashboard.post_form("/merge-queue/page/actions/hold", &[]).await;
    assert_eq!(redirected(held).await, "/merge-queue");
    assert_eq!(entry(&app, "page").await["held"], true);
    redirected(dashboard.post_form("/merge-queue/page/actions/release", &[]).await).await;
    redirected(dashboard.post_form("/merge-queue/page/actions/retry", &[]).await).await;
    assert_eq!(entry(&app, "page").await["state"], "pending");
    assert_eq!(dashboard.post_form("/merge-queue/page/actions/explode", &[]).await.status(), 404);
    let (status, html) = dashboard.get("/history?project=dash").await;
    assert_eq!(status, 200);
    assert!(html.contains("No worker has finished yet"), "{html}");
}

/// A hostile branch rewrites the project's gate script: it writes the host's `/tmp`, reads every
/// agent's token in the data directory into its log and the scratch clone, and sets an fsmonitor
/// in the scratch clone's `.git/config` for the server's next git there. The gate runs it in a
/// sandbox of its own: none of it reaches the host, and the gate still passes and merges.
#[tokio::test]
async fn a_gate_script_rewritten_on_a_branch_reaches_neither_the_host_nor_the_agents_tokens() {
    let app = crate::helpers::TestApp::builder().worker(|_| {}).spawn().await;
    let legit = "#!/bin/sh\nfor f in *.txt; do [ -e \"$f\" ] || continue; grep -q ok \"$f\" || exit 1; done\n";
    let p = project(&app, "shop", Shape::Bare, &[("ci/test.sh", legit)]).await;
    set_gate(&app, "shop", "sh ./ci/test.sh").await;
    // An agent at work: its token is in the data directory.
    let fox =
        crate::helpers::merged(crate::helpers::engineer("shop", "fox"), json!({"provider": "shell", "clone": "none"}));
    app.create_agent(fox).await;
    crate::isolation::with_pane(&app, "fox").await;
    let agents = app._data_dir.path().join("agents");
    let token_file = std::fs::read_dir(agents.join("fox")).unwrap().flatten().next().expect("fox's token file").path();
    let token = std::fs::read_to_string(&token_file).unwrap();

    let host_file = format!("/tmp/sy-gate-escape-{}", uuid::Uuid::new_v4().simple());
    let hostile = format!(
        "#!/bin/sh\necho gate-ran\ntouch {host_file}\ncat {agents}/*/* ; ls -R {agents}\ncp -r {agents} stolen\n\
         printf '#!/bin/sh\\ntouch {host_file}-fsmonitor\\n' > mark; chmod +x mark\n\
         git config core.fsmonitor \"$PWD/mark\"\nexit 0\n",
        agents = agents.display()
    );
    p.push("wish/evil", &[("ci/test.sh", &hostile), ("evil.txt", "ok\n")]);
    completed_wish(&app, "shop", "evil").await;
    let queue = app.merge_queue();
    assert_eq!(processed(&queue.tick().await.unwrap()), [("evil", EntryState::Completed)]);
    let e = entry(&app, "evil").await;
    let log = e["gate_log"].as_str().unwrap_or_default();
    assert!(log.contains("gate-ran"), "{e}");
    assert!(!log.contains(token.trim()) && !log.contains("token"), "the gate read an agent's token: {log}");
    // The server's next git in the scratch clone (its tidying, the next merge) obeys nothing the gate wrote.
    p.push("wish/next", &[("next.txt", "ok\n")]);
    completed_wish(&app, "shop", "next").await;
    assert_eq!(processed(&queue.tick().await.unwrap()), [("next", EntryState::Completed)]);
    let leftovers = std::fs::read_dir("/tmp").unwrap().flatten();
    let escaped: Vec<_> = leftovers.filter(|f| f.path().to_string_lossy().starts_with(&host_file)).collect();
    assert!(escaped.is_empty(), "the gate wrote the host's /tmp: {escaped:?}");
    assert!(!scratch(&app, "shop").join("stolen").exists());
    assert_eq!(p.file_on_main("next.txt").as_deref(), Some("ok\n"));

    // A legitimate gate (the branch puts it back) still fails a branch that breaks it.
    p.push("wish/bad", &[("ci/test.sh", legit), ("bad.txt", "not good\n")]);
    completed_wish(&app, "shop", "bad").await;
    assert_eq!(processed(&queue.tick().await.unwrap()), [("bad", EntryState::Failed)]);
}

#[tokio::test]
async fn a_merge_git_refuses_goes_back_to_pending_saying_why_waits_before_the_next_try_and_lands_once_git_lets_it() {
    let app = spawn_app().await;
    let p = project(&app, "locked", Shape::Bare, &[]).await;
    p.push("wish/a", &[("a.txt", "ok\n")]);
    completed_wish(&app, "locked", "a").await;
    // Git cannot lock the target branch, as while another git holds it.
    let lock = p.repo.join("refs/heads/main.lock");
    std::fs::write(&lock, "").expect("lock");
    let queue = app.merge_queue();
    assert_eq!(processed(&queue.tick().await.expect("tick")), [("a", EntryState::Pending)]);
    let e = entry(&app, "a").await;
    assert_eq!(e["state"], "pending", "never left processing: {e}");
    let waiting = e["waiting"].as_str().unwrap_or_default();
    assert!(waiting.starts_with("git refuses: ") && waiting.contains("cannot lock ref 'refs/heads/main'"), "{e}");
    // The next pass waits (a second, doubling) instead of trying again at once.
    assert!(queue.tick().await.expect("tick").processed.is_empty());
    assert_eq!(app.count_events("merge.step_failing", "merge:a").await, 1);
    let dashboard = crate::dashboard::Dashboard::login(&app).await;
    let (_, page) = dashboard.get("/merge-queue").await;
    assert!(page.contains("cannot lock ref"), "the queue's page says why: {page}");

    std::fs::remove_file(&lock).expect("unlock");
    eventually("the entry merges once git lets it", Duration::from_secs(30), || async {
        let tick = queue.tick().await.expect("tick");
        processed(&tick) == [("a", EntryState::Completed)]
    })
    .await;
    assert_eq!(p.file_on_main("a.txt").as_deref(), Some("ok\n"));
    assert_eq!(p.merges(), ["Merge wish `a`: Wish a"], "merged once");
    assert!(entry(&app, "a").await["waiting"].is_null());
    assert_eq!(app.count_events("merge.step_recovered", "merge:a").await, 1);
}
