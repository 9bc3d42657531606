//! The merge queue's batches, speculative gates, bisection and lanes (issue 41), against real
//! repositories: a batch gated once lands one merge commit per wish; a later green batch lands
//! the entries ahead of it; a red batch is bisected until only its culprit leaves; entries with
//! disjoint changes gate and land in lanes of their own. The gates hold on files the test
//! writes beside the repository (which a gate sees, read-only): nothing waits on a clock.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use switchyard::domain::merge_queue::EntryState;

use crate::helpers::{eventually, git, spawn_app, TestApp};
use crate::merge_queue::{completed_wish, entry, processed, project, Project, Shape};

/// Ten numbered lines: wishes edit lines of their own, merging cleanly yet touching one path.
const NOTES: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";

/// `notes.txt` with line `line` (from 1) changed to `text`.
fn notes_with(line: usize, text: &str) -> String {
    NOTES.lines().enumerate().map(|(i, l)| if i + 1 == line { format!("{text}\n") } else { format!("{l}\n") }).collect()
}

async fn settings(app: &TestApp, project: &str, check: &str, batch_max: i32, gate_concurrency: i32) {
    let body = json!({"merge_check": check, "gate_timeout_secs": 120, "fix_cap": 2, "batch_max": batch_max,
        "gate_concurrency": gate_concurrency});
    let response =
        app.send(reqwest::Method::PUT, &format!("/api/v1/projects/{project}/merge-settings"), Some(body)).await;
    assert!(response.status().is_success(), "{}", response.text().await.unwrap());
}

/// A gate script beside the repository, run as `sh <path>`.
fn gate_script(p: &Project, script: &str) -> String {
    let path = p.repo.join("gate.sh");
    std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
    format!("sh {}", path.display())
}

/// Every commit on `main`'s first-parent line passes `check` on `notes.txt` (no red commit).
fn first_parent_line_is_green(p: &Project, bad: &str) {
    for commit in git(&p.repo, &["rev-list", "--first-parent", "main"]).lines() {
        let notes = git(&p.repo, &["show", &format!("{commit}:notes.txt")]);
        assert!(!notes.contains(bad), "a red commit on main's first-parent line: {commit}");
    }
}

async fn wishes_on_notes(app: &TestApp, p: &Project, project: &str, edits: &[(&str, usize, &str)]) {
    for (slug, line, text) in edits {
        p.push(&format!("wish/{slug}"), &[("notes.txt", &notes_with(*line, text))]);
        completed_wish(app, project, slug).await;
    }
}

#[tokio::test]
async fn a_batch_is_gated_once_and_lands_one_merge_commit_per_wish_in_order() {
    let app = spawn_app().await;
    let p = project(&app, "batch", Shape::Bare, &[("notes.txt", NOTES)]).await;
    settings(&app, "batch", "grep -q 1 notes.txt", 4, 1).await;
    wishes_on_notes(&app, &p, "batch", &[("a", 1, "a"), ("b", 3, "b"), ("c", 5, "c"), ("d", 7, "d")]).await;
    let main_before = git(&p.repo, &["rev-parse", "main"]);
    let tick = app.merge_queue().tick().await.unwrap();
    let all = ["a", "b", "c", "d"].map(|w| (w, EntryState::Completed));
    assert_eq!(processed(&tick), all);
    assert_eq!((tick.gates, tick.cancelled_gates, tick.lanes), (1, 0, 1), "one gate for the four: {tick:?}");
    // One merge commit per wish on the first-parent line, in queue order, each of its wish.
    assert_eq!(p.merges(), ["d", "c", "b", "a"].map(|w| format!("Merge wish `{w}`: Wish {w}")));
    let line: Vec<String> = git(&p.repo, &["rev-list", "--first-parent", "main"]).lines().map(str::to_owned).collect();
    assert_eq!(line.len(), 5);
    assert_eq!(line[4], main_before.trim());
    for (i, slug) in ["d", "c", "b", "a"].iter().enumerate() {
        let e = entry(&app, slug).await;
        assert_eq!((e["state"].as_str(), e["merge_commit"].as_str()), (Some("completed"), Some(line[i].as_str())));
        assert_eq!(e["base_commit"].as_str(), Some(line[i + 1].as_str()), "each merged onto the one before");
        assert!(e["gate_log"].is_string(), "{e}");
    }
    assert_eq!(git(&p.repo, &["show", "main:notes.txt"]), "a\n2\nb\n4\nc\n6\nd\n8\n9\n10\n");
    p.assert_never_mid_merge();
}

#[tokio::test]
async fn a_later_green_gate_on_the_projected_head_lands_the_entry_ahead_with_it() {
    let app = spawn_app().await;
    let p = project(&app, "spec", Shape::Bare, &[("notes.txt", NOTES)]).await;
    // The gate of `a` alone never ends by itself; the gate of `a` and `b` together passes.
    let never = p.repo.join("never");
    let check = gate_script(
        &p,
        &format!(
            "touch started\nif ! grep -q second notes.txt; then while [ ! -e {} ]; do sleep 0.05; done; fi",
            never.display()
        ),
    );
    settings(&app, "spec", &check, 1, 2).await;
    wishes_on_notes(&app, &p, "spec", &[("a", 1, "first"), ("b", 9, "second")]).await;
    let tick = app.merge_queue().tick().await.unwrap();
    assert_eq!(processed(&tick), [("a", EntryState::Completed), ("b", EntryState::Completed)]);
    assert_eq!((tick.gates, tick.cancelled_gates), (1, 1), "`a`'s own gate was moot and cancelled: {tick:?}");
    assert_eq!(p.merges(), ["Merge wish `b`: Wish b", "Merge wish `a`: Wish a"]);
    // The cancelled gate's processes are gone with it.
    let scratch = app._data_dir.path().join("merge-queue");
    eventually("no gate runs on", Duration::from_secs(10), || async { working_in(&scratch).is_empty() }).await;
    p.assert_never_mid_merge();
}

#[tokio::test]
async fn a_red_batch_is_bisected_and_only_its_culprit_leaves_the_others_land() {
    let app = spawn_app().await;
    let p = project(&app, "bisect", Shape::Bare, &[("notes.txt", NOTES)]).await;
    settings(&app, "bisect", "echo checking; ! grep -q bad notes.txt", 4, 2).await;
    wishes_on_notes(&app, &p, "bisect", &[("a", 1, "a"), ("b", 3, "b"), ("c", 5, "bad"), ("d", 7, "d")]).await;
    let tick = app.merge_queue().tick().await.unwrap();
    let mut got = processed(&tick);
    got.sort_by_key(|(wish, _)| *wish);
    let want = [
        ("a", EntryState::Completed),
        ("b", EntryState::Completed),
        ("c", EntryState::Failed),
        ("d", EntryState::Completed),
    ];
    assert_eq!(got, want, "{tick:?}");
    // The batch (red), its parts in parallel (a+b green, a+b+c red), then d on the new main.
    assert_eq!((tick.gates, tick.bisection_gates), (4, 2), "{tick:?}");
    assert_eq!(p.merges(), ["d", "b", "a"].map(|w| format!("Merge wish `{w}`: Wish {w}")));
    first_parent_line_is_green(&p, "bad");
    let c = entry(&app, "c").await;
    assert_eq!(c["state"], "failed");
    assert!(c["failure_reason"].as_str().unwrap().contains("failed (exit 1)"), "{c}");
    assert!(c["gate_log"].as_str().unwrap().contains("checking"), "its gate's log: {c}");
    assert!(c["fix_agent"].is_string(), "to its fix agent, as any failed gate: {c}");
    for slug in ["a", "b", "d"] {
        assert_eq!(entry(&app, slug).await["state"], "completed");
    }
    p.assert_never_mid_merge();
}

#[tokio::test]
async fn entries_with_disjoint_changes_gate_at_once_in_lanes_and_land_independently() {
    let app = spawn_app().await;
    let p = project(&app, "lanes", Shape::Bare, &[]).await;
    // `x`'s gate holds until the test lets it go; `y`'s passes at once.
    let go = p.repo.join("go");
    let check =
        gate_script(&p, &format!("if [ -e x.txt ]; then while [ ! -e {} ]; do sleep 0.05; done; fi", go.display()));
    settings(&app, "lanes", &check, 1, 2).await;
    p.push("wish/x", &[("x.txt", "x\n")]);
    completed_wish(&app, "lanes", "x").await;
    p.push("wish/y", &[("y.txt", "y\n")]);
    completed_wish(&app, "lanes", "y").await;
    let queue = app.merge_queue();
    let release = async {
        // `y`, behind `x` in the queue, lands while `x`'s gate still runs: its lane is its own.
        eventually("y landed", Duration::from_secs(60), || async {
            git(&p.repo, &["log", "--format=%s", "main"]).contains("Merge wish `y`")
        })
        .await;
        assert_eq!(entry(&app, "x").await["state"], "processing");
        std::fs::write(&go, "").unwrap();
    };
    let (tick, ()) = tokio::join!(queue.tick(), release);
    let tick = tick.unwrap();
    // Lane by lane, in queue order.
    assert_eq!(processed(&tick), [("x", EntryState::Completed), ("y", EntryState::Completed)]);
    assert_eq!((tick.lanes, tick.gates, tick.most_gates_at_once), (2, 2, 2), "{tick:?}");
    assert_eq!(p.merges(), ["Merge wish `x`: Wish x", "Merge wish `y`: Wish y"]);
    for file in ["x.txt", "y.txt"] {
        assert!(!git(&p.repo, &["ls-tree", "main", file]).is_empty(), "{file} on main");
    }
    p.assert_never_mid_merge();
}

/// Processes whose working directory is under `dir` (a gate's, or a sandbox's).
fn working_in(dir: &Path) -> Vec<i32> {
    let mut found = Vec::new();
    for process in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = process.file_name().to_string_lossy().parse::<i32>() else { continue };
        let stat = std::fs::read_to_string(process.path().join("stat")).unwrap_or_default();
        let zombie = stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        let cwd = std::fs::read_link(process.path().join("cwd")).unwrap_or_default();
        if !zombie && cwd.starts_with(dir) {
            found.push(pid);
        }
    }
    found
}

/// Serve was killed while a gate ran (unconfined, a gate's `sh -c` outlives it in its own process
/// group, still writing in its scratch clone): the restarted process ends that whole group before
/// the retry's gate runs in the same clone.
#[tokio::test]
async fn a_recovered_claim_ends_the_gate_group_its_dead_process_left_before_the_clone_is_used_again() {
    use std::os::unix::process::CommandExt;
    let app = spawn_app().await;
    let p = project(&app, "left", Shape::Bare, &[]).await;
    // The retry's gate passes only if nothing else writes in its clone meanwhile.
    settings(&app, "left", "rm -f still-here; sleep 0.5; test ! -e still-here", 1, 1).await;
    p.push("wish/w", &[("w.txt", "w\n")]);
    completed_wish(&app, "left", "w").await;
    app.post_ok("/api/v1/wishes/w/submit", json!({})).await;
    app.post_ok("/api/v1/merge-queue/w/hold", json!({})).await;
    let scratch = app._data_dir.path().join("merge-queue").join("left").join("main");
    std::fs::create_dir_all(&scratch).unwrap();
    // The old gate: a shell and its child, writing in the clone.
    let mut old = std::process::Command::new("sh");
    old.args(["-c", "(while true; do touch still-here; sleep 0.02; done) & wait"]).current_dir(&scratch);
    let mut old = old.process_group(0).spawn().unwrap();
    let pgid = old.id() as i32;
    let leader = switchyard::app::merge_queue::gate::leader(pgid).unwrap();
    let reaper = std::thread::spawn(move || old.wait()); // init's part, the old serve being gone
    let node = switchyard::node::NodeInfo::load(app._data_dir.path()).unwrap().node_id;
    sqlx::query(
        "UPDATE merge_queue SET state = 'processing', held = false, claimed_by = $1,
             claimed_run = now() - interval '1 hour', lease_until = now() + interval '1 minute', attempts = 1
         WHERE wish_id = (SELECT id FROM wishes WHERE slug = 'w')",
    )
    .bind(&node)
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO merge_gates (node, scratch, run, pgid, leader) VALUES ($1, $2, now() - interval '1 hour', $3, $4)",
    )
    .bind(&node)
    .bind(scratch.to_string_lossy().as_ref())
    .bind(pgid)
    .bind(&leader)
    .execute(&app.pool)
    .await
    .unwrap();
    eventually("the old gate writes", Duration::from_secs(10), || async { scratch.join("still-here").exists() }).await;

    let tick = app.merge_queue().tick().await.unwrap();
    assert_eq!(tick.recovered, [("w".to_owned(), EntryState::Pending)]);
    assert_eq!(processed(&tick), [("w", EntryState::Completed)], "{tick:?}");
    assert!(working_in(&scratch).is_empty(), "nothing of the old gate runs");
    reaper.join().unwrap().unwrap();
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM merge_gates").fetch_one(&app.pool).await.unwrap();
    assert_eq!(left, 0, "its record went with it");
    assert_eq!(p.merges(), ["Merge wish `w`: Wish w"]);
}
