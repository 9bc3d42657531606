//! Projects whose repository is a git remote (`repo_url`), served on loopback by `git daemon`:
//! each node keeps its own mirror, agents' branches reach the remote through Switchyard, and the
//! wish's branches and the merged target move there by pushes with a lease — a remote that moved
//! meanwhile gets the work rebuilt on it, never overwritten. And a `repo_path` project whose
//! repository has an `origin`: the merge queue pushes the merged target there the same way.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::conductor::Fakes;
use crate::git_remote::{mirrors, Remote};
use crate::helpers::*;

/// Long enough for several agents to spawn, clone, commit, report and merge on a loaded machine.
const RUN: Duration = Duration::from_secs(180);

/// A node that runs the conductor and the merge queue.
fn conducting(worker: &mut switchyard::worker::WorkerConfig) {
    worker.conductor = true;
    worker.merge_queue = true;
}

/// Project `slug` on `remote`, its agents the fakes (`max_agents` at once, their clones kept to
/// be looked at), reviews off; with no agents (`max_agents` 0), its wishes are walked by hand.
async fn remote_project(app: &TestApp, slug: &str, remote: &Remote, max_agents: u32) -> Value {
    let conductor = match max_agents {
        0 => json!({"review": "none"}),
        n => json!({"provider": "fake", "max_agents": n, "review": "none", "keep_clones": true}),
    };
    let body = json!({"slug": slug, "name": slug, "repo_url": remote.url(), "conductor_config": conductor});
    assert_json(app.post("/api/v1/projects", body).await, 201).await
}

async fn wait_for_wish(app: &TestApp, slug: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    app.get_until(&format!("/api/v1/wishes/{slug}"), what, RUN, &["/api/v1/agents?limit=100"], check).await
}

/// A wish of `n` parallel groups, planned.
async fn wide_wish(app: &TestApp, project: &str, slug: &str, n: usize) {
    let groups: Vec<Value> = (0..n).map(|i| json!({"key": format!("g{i}"), "title": format!("G{i}")})).collect();
    app.create_wish(json!({"slug": slug, "project": project, "title": "t", "groups": groups})).await;
    app.post_ok(&format!("/api/v1/wishes/{slug}/plan"), json!({})).await;
}

/// The remote's `main` has every group's file and one merge per group under the wish's merge.
fn assert_merged_on_remote(remote: &Remote, slug: &str, n: usize) {
    let files = remote.files("main");
    for i in 0..n {
        assert!(files.contains(&format!("g{i}.txt")), "g{i}.txt on the remote's main: {files:?}");
    }
    let wish_merges = git(&remote.repo(), &["log", "--first-parent", "--merges", "--format=%s", "main"]);
    assert!(wish_merges.lines().any(|s| s.starts_with(&format!("Merge wish `{slug}`"))), "{wish_merges}");
    let merges = git(&remote.repo(), &["rev-list", "--merges", "--count", "main"]);
    assert_eq!(merges.trim(), (n + 1).to_string(), "one merge per group and the wish's");
    // The wish's and groups' branches lived on the remote, and went once merged.
    let left: Vec<String> = remote.branches().into_iter().filter(|b| b.contains(slug)).collect();
    assert!(left.is_empty(), "merged branches left on the remote: {left:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_on_a_remote_merges_a_wish_of_parallel_groups_on_the_remotes_main() {
    let remote = Remote::start().await;
    let fakes = Fakes::new();
    let app = TestApp::builder().providers(&fakes.providers()).worker(conducting).spawn().await;
    let project = remote_project(&app, "far", &remote, 4).await;
    assert_eq!((&project["repo_url"], &project["repo_path"]), (&json!(remote.url()), &json!("")), "{project}");
    wide_wish(&app, "far", "wide", 3).await;

    let merged = wait_for_wish(&app, "wide", "the wish merges", |w| w["status"] == "merged").await;
    assert!(merged["groups"].as_array().unwrap().iter().all(|g| g["status"] == "done"), "{merged}");
    assert_merged_on_remote(&remote, "wide", 3);
    assert_eq!(remote.head("main"), Some(git(&remote.repo(), &["rev-parse", "main"]).trim().to_owned()));

    // The node worked in a mirror of its own (bare, fetched from the remote), and the agents'
    // clones came from it: their `origin` is the mirror, never the remote.
    let mirrors = mirrors(&app);
    assert_eq!(mirrors.len(), 1, "{mirrors:?}");
    assert_eq!(git(&mirrors[0], &["rev-parse", "--is-bare-repository"]).trim(), "true");
    let agents = app.get_ok("/api/v1/agents?limit=100").await;
    let engineer = agents["items"].as_array().unwrap().iter().find(|a| a["role"] == "engineer").expect("an engineer");
    assert_eq!(engineer["repo"], remote.url(), "{engineer}");
    let clone = PathBuf::from(engineer["clone_path"].as_str().expect("a kept clone"));
    let origin = git(&clone, &["config", "remote.origin.url"]);
    assert_eq!(Path::new(origin.trim()), mirrors[0], "the clone's origin");
}

#[tokio::test(flavor = "multi_thread")]
async fn two_nodes_with_mirrors_of_their_own_split_a_wish_on_a_remote_and_merge_it_on_its_main() {
    let remote = Remote::start().await;
    let fakes = Fakes::new();
    let first = TestApp::builder().providers(&fakes.providers()).worker(conducting).spawn().await;
    let second = spawn_node_beside(&first, &fakes.providers(), conducting).await;
    remote_project(&first, "shared", &remote, 10).await;
    wide_wish(&first, "shared", "split", 10).await;

    wait_for_wish(&second, "split", "both nodes merge the wish", |w| w["status"] == "merged").await;
    assert_merged_on_remote(&remote, "split", 10);
    // Both nodes ran engineers, each from its own mirror (never a shared path).
    let nodes: Vec<Option<String>> = sqlx::query_scalar("SELECT DISTINCT node_id FROM agents WHERE role = 'engineer'")
        .fetch_all(&first.pool)
        .await
        .unwrap();
    assert_eq!(nodes.len(), 2, "the groups were split across both nodes: {nodes:?}");
    let (ours, theirs) = (mirrors(&first), mirrors(&second));
    assert_eq!((ours.len(), theirs.len()), (1, 1), "{ours:?} {theirs:?}");
    assert_ne!(ours[0], theirs[0]);
    for mirror in [&ours[0], &theirs[0]] {
        let main = git(mirror, &["rev-parse", "main"]);
        git(mirror, &["cat-file", "-e", main.trim()]);
    }
}

/// A wish on `branch` of the project, walked by hand to `completed` (no agents).
async fn completed_wish(app: &TestApp, project: &str, slug: &str, branch: &str) {
    let wish = json!({"slug": slug, "project": project, "title": slug, "branch": branch,
        "groups": [{"key": "work", "title": "Work"}]});
    app.create_wish(wish).await;
    for step in ["plan", "queue", "start", "groups/work/start", "groups/work/complete"] {
        app.post_ok(&format!("/api/v1/wishes/{slug}/{step}"), json!({})).await;
    }
    assert_eq!(app.get_ok(&format!("/api/v1/wishes/{slug}")).await["status"], "completed");
}

async fn set_gate(app: &TestApp, project: &str, check: &str) {
    let body = json!({"merge_check": check, "gate_timeout_secs": 60});
    let set = app.send(reqwest::Method::PUT, &format!("/api/v1/projects/{project}/merge-settings"), Some(body)).await;
    assert!(set.status().is_success(), "{}", set.status());
}

fn states(tick: &switchyard::app::merge_queue::Tick) -> Vec<(String, String)> {
    tick.processed.iter().map(|(w, s)| (w.clone(), format!("{s:?}"))).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_remote_whose_main_moved_during_the_gate_gets_the_wish_rebuilt_on_it_never_forced() {
    let remote = Remote::start().await;
    let app = spawn_app().await;
    remote_project(&app, "lease", &remote, 0).await;
    let base = remote.head("main").expect("main");
    remote.push("wish/fast", &[("fast.txt", "fast\n")]);
    completed_wish(&app, "lease", "fast", "wish/fast").await;
    // The gate waits for the test's word, in the scratch clone where it runs.
    set_gate(&app, "lease", "until [ -e go ]; do sleep 0.1; done").await;
    let scratch = app._data_dir.path().join("merge-queue").join("lease").join("main");

    let queue = app.merge_queue();
    let first = tokio::spawn(async move { queue.tick().await.expect("tick") });
    eventually("the gate runs on the merge onto the remote's main", Duration::from_secs(30), || async {
        // Not in the queue until the pass takes it in.
        let entry = app.get("/api/v1/merge-queue/fast").await;
        let entry: Value = if entry.status() == 200 { entry.json().await.unwrap() } else { Value::Null };
        entry["state"] == "processing" && scratch.is_dir()
    })
    .await;
    // Meanwhile a person pushes to the remote's main.
    let foreign = remote.push("main", &[("foreign.txt", "pushed meanwhile\n")]);
    std::fs::write(scratch.join("go"), "").expect("the gate's word");
    let first = first.await.expect("the first pass");
    assert_eq!(states(&first), [("fast".to_owned(), "Pending".to_owned())], "refused, not forced: back in the queue");
    assert_eq!(remote.head("main"), Some(foreign.clone()), "the person's commit stands");

    set_gate(&app, "lease", "true").await;
    let second = app.merge_queue().tick().await.expect("tick");
    assert_eq!(states(&second), [("fast".to_owned(), "Completed".to_owned())]);
    let main = remote.head("main").expect("main");
    let parents = git(&remote.repo(), &["rev-list", "--parents", "-n", "1", &main]);
    let parents: Vec<&str> = parents.split_whitespace().skip(1).collect();
    assert_eq!(parents.first(), Some(&foreign.as_str()), "rebuilt on the remote's new head: {parents:?}");
    assert!(
        remote.files("main").contains(&"foreign.txt".to_owned())
            && remote.files("main").contains(&"fast.txt".to_owned())
    );
    git(&remote.repo(), &["merge-base", "--is-ancestor", &base, &main]);
    assert_eq!(app.get_ok("/api/v1/wishes/fast").await["status"], "merged");
}

/// A bare `origin` with `main`, the project's repository (a bare clone of it, so its `origin`
/// is that), and a developer clone of the project's repository that pushes wish branches to it.
struct WithOrigin {
    dir: tempfile::TempDir,
}

impl WithOrigin {
    fn new() -> WithOrigin {
        let dir = tempfile::tempdir().expect("temp dir");
        let seed = dir.path().join("seed");
        init_repo(&seed);
        let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
        git(dir.path(), &["clone", "--quiet", "--bare", &path("seed"), &path("origin.git")]);
        git(dir.path(), &["clone", "--quiet", "--bare", &path("origin.git"), &path("repo.git")]);
        git(dir.path(), &["clone", "--quiet", &path("repo.git"), &path("dev")]);
        git(dir.path(), &["clone", "--quiet", &path("origin.git"), &path("person")]);
        WithOrigin { dir }
    }

    fn at(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Commits `files` on `branch` in `clone` (from its `origin/main` if new) and pushes it.
    fn push(&self, clone: &str, branch: &str, files: &[(&str, &str)]) -> String {
        let work = self.at(clone);
        git(&work, &["fetch", "--quiet", "origin"]);
        git(&work, &["checkout", "--quiet", "-B", branch, "origin/main"]);
        commit_files(&work, files, &format!("work on {branch}"));
        git(&work, &["push", "--quiet", "origin", &format!("{branch}:{branch}")]);
        git(&work, &["rev-parse", "HEAD"]).trim().to_owned()
    }
}

fn head(repo: &Path, branch: &str) -> String {
    git(repo, &["rev-parse", branch]).trim().to_owned()
}

#[tokio::test]
async fn a_repo_path_projects_merged_target_is_pushed_to_its_origin_and_a_moved_origin_rebuilds_the_entry() {
    let app = spawn_app().await;
    let repos = WithOrigin::new();
    let (repo, origin) = (repos.at("repo.git"), repos.at("origin.git"));
    let body = json!({"slug": "home", "name": "home", "repo_path": repo, "conductor_config": {"review": "none"}});
    let project = assert_json(app.post("/api/v1/projects", body).await, 201).await;
    assert_eq!(project["push_remote"], Value::Null, "`origin` by default: {project}");

    // First, the usual case: merged here and pushed there.
    repos.push("dev", "wish/one", &[("one.txt", "1\n")]);
    completed_wish(&app, "home", "one", "wish/one").await;
    let queue = app.merge_queue();
    assert_eq!(states(&queue.tick().await.unwrap()), [("one".to_owned(), "Completed".to_owned())]);
    assert_eq!(head(&origin, "main"), head(&repo, "main"), "the merged target is on origin");

    // Origin moved meanwhile (a person pushed): the entry is rebuilt on it, never forced.
    let foreign = repos.push("person", "main", &[("foreign.txt", "x\n")]);
    repos.push("dev", "wish/two", &[("two.txt", "2\n")]);
    completed_wish(&app, "home", "two", "wish/two").await;
    assert_eq!(states(&queue.tick().await.unwrap()), [("two".to_owned(), "Pending".to_owned())]);
    assert_eq!(head(&repo, "main"), foreign, "the target followed origin as a fast-forward");
    assert_eq!(head(&origin, "main"), foreign, "origin was not overwritten");
    assert_eq!(states(&queue.tick().await.unwrap()), [("two".to_owned(), "Completed".to_owned())]);
    let main = head(&origin, "main");
    assert_eq!(main, head(&repo, "main"));
    assert_eq!(head(&origin, "main^1"), foreign, "the merge is on origin's new head");
    let files = git(&origin, &["ls-tree", "--name-only", "main"]);
    for file in ["one.txt", "two.txt", "foreign.txt"] {
        assert!(files.contains(file), "{file}: {files}");
    }

    // `push_remote: ""` keeps the target here.
    app.patch_ok("/api/v1/projects/home", json!({"push_remote": ""})).await;
    repos.push("dev", "wish/three", &[("three.txt", "3\n")]);
    completed_wish(&app, "home", "three", "wish/three").await;
    assert_eq!(states(&queue.tick().await.unwrap()), [("three".to_owned(), "Completed".to_owned())]);
    assert_eq!(head(&origin, "main"), main, "nothing pushed");
    assert_ne!(head(&repo, "main"), main);
}

#[tokio::test]
async fn a_project_names_one_repository_and_a_bad_url_is_refused_naming_the_field() {
    let app = spawn_app().await;
    let remote = Remote::start().await;
    let repo = git_repo();
    let field = |problem: &Value| problem["errors"][0]["field"].as_str().unwrap_or_default().to_owned();
    let cases = [
        (json!({"repo_path": repo.path(), "repo_url": remote.url()}), "repo_url"),
        (json!({}), "repo_path"),
        (json!({"repo_url": "http://127.0.0.1/x.git"}), "repo_url"),
        (json!({"repo_url": "https://me:hunter2@example.com/x.git"}), "repo_url"),
        (json!({"repo_url": "file://relative/x.git"}), "repo_url"),
        (json!({"repo_url": "git://127.0.0.1:1/nothing.git"}), "repo_url"),
        (json!({"repo_url": remote.url(), "target_branch": "nope"}), "target_branch"),
        (json!({"repo_url": remote.url(), "push_remote": "origin"}), "push_remote"),
        (json!({"repo_path": repo.path(), "repo_secret": "s3cret"}), "repo_secret"),
        (json!({"repo_path": repo.path(), "push_remote": "-x"}), "push_remote"),
    ];
    for (fields, bad) in cases {
        let mut body = json!({"slug": "p", "name": "p"});
        body.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
        let problem = assert_problem(app.post("/api/v1/projects", body.clone()).await, 422).await;
        assert_eq!(field(&problem), bad, "{body}: {problem}");
        assert!(!problem.to_string().contains("hunter2"), "{problem}");
    }

    // A secret is kept, never shown.
    let body = json!({"slug": "far", "name": "far", "repo_url": remote.url(), "repo_secret": "tok3n-value"});
    let created = assert_json(app.post("/api/v1/projects", body).await, 201).await;
    assert_eq!(created["repo_secret_set"], true, "{created}");
    let shown = app.get("/api/v1/projects/far").await.text().await.unwrap();
    let listed = app.get("/api/v1/projects").await.text().await.unwrap();
    let events = app.get("/api/v1/events?limit=100").await.text().await.unwrap();
    for text in [&shown, &listed, &events, &created.to_string()] {
        assert!(!text.contains("tok3n-value"), "{text}");
    }
    // Moved back to a path: the URL goes.
    let moved = app.patch_ok("/api/v1/projects/far", json!({"repo_path": repo.path(), "repo_secret": null})).await;
    assert_eq!((&moved["repo_url"], &moved["repo_secret_set"]), (&Value::Null, &json!(false)), "{moved}");
}

/// Makes `app`'s node fetch project `project`'s repository, as its first step on it would: its
/// mirror of the remote, made now.
async fn mirror_on(app: &TestApp, project: &Value) {
    let id: uuid::Uuid = project["id"].as_str().expect("id").parse().expect("uuid");
    switchyard::app::repository::open(&app.pool, app._data_dir.path(), id).await.expect("the mirror fetched");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_projects_mirror_goes_from_every_node_once_no_project_uses_its_remote() {
    let (shared, other) = (Remote::start().await, Remote::start().await);
    // The first node serves the API alone; the second runs a worker, whose heartbeat sweeps.
    let first = spawn_app().await;
    let second =
        spawn_node_beside(&first, &Fakes::new().providers(), |w| w.heartbeat_every = Duration::from_millis(100)).await;
    let keep = remote_project(&first, "keep", &shared, 0).await;
    let gone = remote_project(&first, "gone", &shared, 0).await;
    let moved = remote_project(&first, "moved", &other, 0).await;
    for node in [&first, &second] {
        for project in [&keep, &gone, &moved] {
            mirror_on(node, project).await;
        }
        assert_eq!(mirrors(node).len(), 2, "one mirror per remote");
    }
    let app = &first;
    let delete = |slug: &str| {
        let path = format!("/api/v1/projects/{slug}");
        async move { app.send(reqwest::Method::DELETE, &path, None).await }
    };

    // A project deleted while another one uses the same remote: its mirror stays everywhere.
    assert_eq!(delete("gone").await.status(), 204);
    let on_first = mirrors(&first);
    assert_eq!(on_first.len(), 2, "{on_first:?}");

    // A project moved to a path: its remote's mirror goes at once on the node that moved it, and
    // from the other on its next sweep.
    let repo = git_repo();
    first.patch_ok("/api/v1/projects/moved", json!({"repo_path": repo.path()})).await;
    let on_first = mirrors(&first);
    assert_eq!(on_first.len(), 1, "{on_first:?}");
    eventually("the other node sweeps the moved project's mirror", RUN, || async { mirrors(&second).len() == 1 }).await;
    assert_eq!(mirrors(&second)[0].file_name(), on_first[0].file_name(), "the shared remote's mirror stays");

    // The last project on the shared remote deleted: its mirror goes from both nodes.
    assert_eq!(delete("keep").await.status(), 204);
    assert_eq!(mirrors(&first), Vec::<PathBuf>::new());
    eventually("the other node sweeps the deleted project's mirror", RUN, || async { mirrors(&second).is_empty() })
        .await;
    // Nothing else of them is left in the mirrors' directory (no half-removed copy).
    for node in [&first, &second] {
        let left: Vec<_> = std::fs::read_dir(node._data_dir.path().join("mirrors")).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_project_moved_to_another_remote_has_its_next_wish_merged_there() {
    let (first, second) = (Remote::start().await, Remote::start().await);
    let app = spawn_app().await;
    remote_project(&app, "mover", &first, 0).await;
    // A gate, so merges are made in the queue's scratch clone.
    set_gate(&app, "mover", "true").await;
    first.push("wish/before", &[("before.txt", "before\n")]);
    completed_wish(&app, "mover", "before", "wish/before").await;
    let queue = app.merge_queue();
    assert_eq!(states(&queue.tick().await.unwrap()), [("before".to_owned(), "Completed".to_owned())]);

    // Moved to another remote (its first mirror goes): the merge queue's next merge is made and
    // pushed there, not in a scratch clone that still borrows from the first remote's mirror.
    app.patch_ok("/api/v1/projects/mover", json!({"repo_url": second.url()})).await;
    second.push("wish/after", &[("after.txt", "after\n")]);
    completed_wish(&app, "mover", "after", "wish/after").await;
    assert_eq!(states(&queue.tick().await.unwrap()), [("after".to_owned(), "Completed".to_owned())]);
    let files = second.files("main");
    assert!(files.contains(&"after.txt".to_owned()) && !files.contains(&"before.txt".to_owned()), "{files:?}");
    assert_eq!(mirrors(&app).len(), 1, "the first remote's mirror went");
}
