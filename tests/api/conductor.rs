//! The conductor carries wishes from words to a reviewed branch, with fake agents
//! (`tests/fake_agent/conductor-agent.sh`) that make real commits in real clones and report
//! with the real `switchyard` CLI from real tmux panes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::helpers::*;

/// Long enough for several agents to spawn, clone, commit and report on a loaded machine.
const RUN: Duration = Duration::from_secs(120);

/// What the fake agents are told, in a directory of the test's own.
pub(crate) struct Fakes {
    dir: tempfile::TempDir,
}

impl Fakes {
    pub(crate) fn new() -> Fakes {
        Fakes { dir: tempfile::tempdir().expect("fake dir") }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn say(&self, file: &str, text: &str) {
        std::fs::write(self.path().join(file), text).expect("write fake instruction");
    }

    /// The fake agent as the `fake` provider, and as `limited`, read with Codex's screen rules
    /// (which know its usage-limit message).
    pub(crate) fn providers(&self) -> String {
        self.providers_for("conductor-agent.sh")
    }

    /// The fake agent `script` (in `tests/fake_agent/`) as the `fake` provider.
    pub(crate) fn providers_for(&self, script: &str) -> String {
        let root = env!("CARGO_MANIFEST_DIR");
        format!(
            r#"[providers.fake]
command = ["bash", "--norc", "--noprofile", "{root}/tests/fake_agent/{script}"]
screen_rules = "generic"
install_hooks = false
env = {{ SWITCHYARD_BIN = "{bin}", FAKE_DIR = "{dir}" }}

[providers.limited]
command = ["bash", "--norc", "--noprofile", "{root}/tests/fake_agent/conductor-agent.sh"]
screen_rules = "codex"
install_hooks = false
env = {{ SWITCHYARD_BIN = "{bin}", FAKE_DIR = "{dir}" }}
"#,
            bin = env!("CARGO_BIN_EXE_switchyard"),
            dir = self.path().display()
        )
    }
}

/// The app with its worker and conductor running the fake agents.
async fn conducted(fakes: &Fakes) -> TestApp {
    TestApp::builder().providers(&fakes.providers()).worker(|w| w.conductor = true).spawn().await
}

/// A project whose agents are the fakes, with these conductor settings over the defaults.
pub(crate) async fn project(app: &TestApp, slug: &str, settings: Value) -> (Value, PathBuf) {
    let project = app.create_project(slug).await;
    let mut config = json!({"provider": "fake", "max_agents": 4});
    for (key, value) in settings.as_object().expect("settings") {
        config[key] = value.clone();
    }
    let changed = app.patch_ok(&format!("/api/v1/projects/{slug}"), json!({"conductor_config": config})).await;
    assert_eq!(changed["conductor_config"]["provider"], config["provider"]);
    let repo = repo_of(&project);
    (changed, repo)
}

/// Polls the wish until `check` holds; on the deadline, fails showing the wish and its agents.
pub(crate) async fn wait_for_wish(app: &TestApp, slug: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    app.get_until(&format!("/api/v1/wishes/{slug}"), what, RUN, &["/api/v1/agents?limit=100"], check).await
}

fn group<'a>(wish: &'a Value, key: &str) -> &'a Value {
    wish["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["key"] == key)
        .unwrap_or_else(|| panic!("no group {key}"))
}

/// Files in `branch` of `repo`.
fn files(repo: &Path, branch: &str) -> Vec<String> {
    git(repo, &["ls-tree", "--name-only", branch]).lines().map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_draft_is_planned_run_reviewed_twice_and_completed_with_every_groups_commit() {
    let fakes = Fakes::new();
    fakes.say(
        "plan.yaml",
        "groups:\n  - key: a\n    title: First\n    goal: write a\n  - key: b\n    title: After a\n    goal: write b\n    depends_on: [a]\n  - key: c\n    title: Beside\n    goal: write c\n",
    );
    fakes.say("reviews", "1");
    let app = conducted(&fakes).await;
    let (_, repo) = project(&app, "alpha", json!({})).await;
    app.create_wish(json!({"slug": "login", "project": "alpha", "title": "A login page",
                           "description": "Build the login page in three parts."}))
        .await;

    let done = wait_for_wish(&app, "login", "the wish completes", |w| w["status"] == "completed").await;

    // Every group ran once, on its own agent, and was merged into the wish's branch.
    for key in ["a", "b", "c"] {
        let g = group(&done, key);
        assert_eq!(g["status"], "done", "{key}: {g}");
        assert_eq!(g["branch"], format!("group/login/{key}"));
        assert!(g["merge_commit"].is_string(), "{key} was merged: {g}");
    }
    assert_eq!(done["branch"], "wish/login");
    // Their branches went once merged (the project keeps no merged branches); the wish's stays.
    assert_eq!(git(&repo, &["branch", "--list", "group/login/*"]).trim(), "", "spent group branches");
    let on_wish = files(&repo, "wish/login");
    for file in ["a.txt", "b.txt", "c.txt", "README.md"] {
        assert!(on_wish.contains(&file.to_owned()), "{file} on wish/login: {on_wish:?}");
    }
    // b started from the wish's branch with a's work in it.
    let b = app.task(group(&done, "b")["task_id"].as_str().unwrap()).await;
    let a_commit = group(&done, "a")["merge_commit"].as_str().unwrap().to_owned();
    let base = b["base_commit"].as_str().expect("b's base");
    git(&repo, &["merge-base", "--is-ancestor", &a_commit, base]);
    // a and c ran side by side: c was dispatched before a was merged.
    let assigned: Vec<String> = app.get_ok("/api/v1/events?limit=500").await["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "task.assigned" || e["type"] == "wish.reviewed")
        .map(|e| format!("{}:{}", e["type"].as_str().unwrap(), e["payload"]["group"].as_str().unwrap_or("")))
        .collect();
    let pos = |s: &str| assigned.iter().position(|e| e == s).unwrap_or_else(|| panic!("{s} in {assigned:?}"));
    assert!(pos("task.assigned:c") < pos("task.assigned:b"), "{assigned:?}");
    // Reviewed twice: a fail, a fix on the wish's branch, then a pass.
    assert_eq!(done["review_iteration"], 2, "{done}");
    assert!(git(&repo, &["show", "wish/login:README.md"]).contains("fixed after review"));
    // The merges into the wish's branch are real merges, never fast-forwards.
    let merges = git(&repo, &["rev-list", "--merges", "--count", "main..wish/login"]);
    assert_eq!(merges.trim(), "3", "one merge per group");
    // The target branch was never touched.
    assert_eq!(files(&repo, "main"), vec!["README.md".to_owned()]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_group_whose_agent_quits_without_commits_goes_to_a_person_and_a_retry_finishes_it() {
    let fakes = Fakes::new();
    fakes.say("quit-api", "");
    let app = conducted(&fakes).await;
    project(&app, "beta", json!({"review": "none"})).await;
    app.create_wish(json!({"slug": "quits", "project": "beta", "title": "t",
                           "groups": [{"key": "api", "title": "The API"}]}))
        .await;
    app.post_ok("/api/v1/wishes/quits/plan", json!({})).await;

    let handed =
        wait_for_wish(&app, "quits", "the group is handed to a person", |w| group(w, "api")["assignee"] == "human")
            .await;
    assert_eq!(handed["status"], "executing", "the wish waits for the person: {handed}");
    let overview = app.get_ok("/api/v1/wishes?status=executing").await;
    assert!(overview.to_string().contains("quits"));

    // The person retries it with a new agent, which does the work this time.
    std::fs::remove_file(fakes.path().join("quit-api")).expect("no more quitting");
    app.post_ok("/api/v1/wishes/quits/groups/api/redispatch", json!({})).await;
    let done =
        wait_for_wish(&app, "quits", "the retried group completes the wish", |w| w["status"] == "completed").await;
    assert_ne!(group(&done, "api")["assignee"], "human");
}

#[tokio::test(flavor = "multi_thread")]
async fn parallel_groups_editing_the_same_lines_get_a_fix_turn_and_both_land() {
    let fakes = Fakes::new();
    fakes.say("shared", "");
    let app = conducted(&fakes).await;
    let (_, repo) = project(&app, "gamma", json!({"review": "none"})).await;
    let keep = json!({"keep_branches": true});
    let kept = app.send(reqwest::Method::PUT, "/api/v1/projects/gamma/merge-settings", Some(keep)).await;
    assert!(kept.status().is_success(), "{}", kept.status());
    app.create_wish(json!({"slug": "clash", "project": "gamma", "title": "t",
                           "groups": [{"key": "left", "title": "Left"}, {"key": "right", "title": "Right"}]}))
        .await;
    app.post_ok("/api/v1/wishes/clash/plan", json!({})).await;

    wait_for_wish(&app, "clash", "both groups land", |w| w["status"] == "completed").await;
    let shared = git(&repo, &["show", "wish/clash:shared.txt"]);
    assert!(shared.contains("line of left") && shared.contains("line of right"), "{shared}");
    let conflicts: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE type = 'group.conflict'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(conflicts, 1, "the second group's merge conflicted once");
    // The project keeps merged branches: both groups' are there, each merged into the wish's.
    for key in ["left", "right"] {
        git(&repo, &["merge-base", "--is-ancestor", &format!("group/clash/{key}"), "wish/clash"]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_token_reports_only_on_its_own_work() {
    let app = spawn_app().await;
    app.create_project("delta").await;
    app.create_wish(json!({"slug": "own", "project": "delta", "title": "t",
                           "groups": [{"key": "api", "title": "The API"}]}))
        .await;
    let mine = app.create_agent(merged(engineer("delta", "mine"), json!({"wish": "own", "group": "api"}))).await;
    let other = app.create_agent(engineer("delta", "other")).await;
    let token = app.agent_token(&mine).await;
    let as_mine = |path: String, body: Value| {
        let request = reqwest::Client::new().post(app.url(&path)).bearer_auth(&token).json(&body);
        async move { request.send().await.expect("request") }
    };
    // Another agent's report route: forbidden.
    let other_name = other["name"].as_str().unwrap();
    assert_problem(as_mine(format!("/api/v1/agents/{other_name}/report"), json!({"kind": "group_done"})).await, 403)
        .await;
    // Its own route for a step it does not have (a review): refused with the reason.
    let body =
        assert_problem(as_mine("/api/v1/agents/mine/report".into(), json!({"kind": "review_pass"})).await, 409).await;
    assert!(body["detail"].as_str().unwrap().contains("no review"), "{body}");
    // A report that is not one: 422 naming the field.
    assert_problem(as_mine("/api/v1/agents/mine/report".into(), json!({"kind": "sing"})).await, 422).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn two_nodes_on_one_database_dispatch_every_group_exactly_once() {
    let fakes = Fakes::new();
    let node = |w: &mut switchyard::worker::WorkerConfig| w.conductor = true;
    let first = TestApp::builder().providers(&fakes.providers()).worker(node).spawn().await;
    let second = spawn_node_beside(&first, &fakes.providers(), node).await;
    let (_, repo) = project(&first, "epsilon", json!({"review": "none", "max_agents": 8})).await;
    let groups: Vec<Value> = (0..8).map(|i| json!({"key": format!("g{i}"), "title": format!("G{i}")})).collect();
    first.create_wish(json!({"slug": "wide", "project": "epsilon", "title": "t", "groups": groups})).await;
    first.post_ok("/api/v1/wishes/wide/plan", json!({})).await;

    let done = wait_for_wish(&second, "wide", "both nodes finish the wish", |w| w["status"] == "completed").await;
    let engineers: Vec<(String, Option<String>)> = sqlx::query_as(
        "SELECT t.group_key, a.node_id FROM agents a JOIN tasks t ON t.id = a.task_id WHERE a.role = 'engineer'",
    )
    .fetch_all(&first.pool)
    .await
    .expect("engineers");
    let mut keys: Vec<&str> = engineers.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort();
    assert_eq!(keys, ["g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7"], "one engineer per group: {engineers:?}");
    let assigned: Vec<Value> = sqlx::query_scalar(
        "SELECT payload FROM events WHERE type = 'task.assigned' AND payload->>'assignee' <> 'human'",
    )
    .fetch_all(&first.pool)
    .await
    .expect("assignments");
    assert_eq!(assigned.len(), 8, "each group assigned once: {assigned:?}");
    let handed: Vec<Value> = sqlx::query_scalar(
        "SELECT payload FROM events WHERE type = 'task.assigned' AND payload->>'assignee' = 'human'",
    )
    .fetch_all(&first.pool)
    .await
    .expect("handoffs");
    assert!(handed.is_empty(), "no group was handed to a person: {handed:?}");
    assert_eq!(git(&repo, &["rev-list", "--merges", "--count", "main..wish/wide"]).trim(), "8");
    assert!(done["groups"].as_array().unwrap().iter().all(|g| g["status"] == "done"));
}

/// The agent of the group `key` of `wish`, as the API lists it.
async fn agent_of(app: &TestApp, wish: &Value, key: &str) -> Value {
    let name = group(wish, key)["assignee"].as_str().unwrap_or_else(|| panic!("{key} has an agent: {wish}")).to_owned();
    app.get_ok(&format!("/api/v1/agents/{name}")).await
}

/// When the group `key` was given to an agent (its `task.assigned` event).
async fn assigned_at(app: &TestApp, key: &str) -> chrono::DateTime<chrono::Utc> {
    let mine = |e: &Value| e["payload"]["group"] == key;
    let events = app.events_until("types=task.assigned&limit=200", key, |e| e.iter().any(mine)).await;
    let event = events.iter().find(|e| mine(e)).unwrap();
    event["created_at"].as_str().unwrap().parse().expect("a timestamp")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_usage_limit_holds_new_dispatches_of_its_provider_until_the_reset_then_the_agent_resumes() {
    let fakes = Fakes::new();
    fakes.say("limit-first", "3");
    let app = conducted(&fakes).await;
    project(&app, "limits", json!({"review": "none", "provider": "limited", "fallback_providers": ["fake"]})).await;
    app.create_wish(json!({"slug": "early", "project": "limits", "title": "t",
                           "groups": [{"key": "first", "title": "Hits the limit"}]}))
        .await;
    app.post_ok("/api/v1/wishes/early/plan", json!({})).await;

    // The engineer shows Codex's limit message: it is suspended until the reset it names.
    let started =
        wait_for_wish(&app, "early", "the group has an agent", |w| group(w, "first")["assignee"].is_string()).await;
    let limited_agent = group(&started, "first")["assignee"].as_str().unwrap().to_owned();
    let limited = app
        .get_until(&format!("/api/v1/agents/{limited_agent}"), "the agent suspended at its limit", RUN, &[], |a| {
            a["state"] == "suspended"
        })
        .await;
    let until: chrono::DateTime<chrono::Utc> =
        limited["suspended_until"].as_str().expect("a reset time").parse().expect("a timestamp");

    // Meanwhile another wish: its group on the limited provider waits for the reset; its group
    // that takes `any` provider may go to the fallback at once.
    app.create_wish(json!({"slug": "later", "project": "limits", "title": "t",
                           "groups": [{"key": "waits", "title": "Same provider"},
                                      {"key": "falls-back", "title": "Any provider", "provider": "any"}]}))
        .await;
    app.post_ok("/api/v1/wishes/later/plan", json!({})).await;

    let later = wait_for_wish(&app, "later", "the later wish completes", |w| w["status"] == "completed").await;
    let waited = assigned_at(&app, "waits").await;
    assert!(waited >= until, "`waits` was dispatched at {waited}, before the limit's reset at {until}");
    assert_eq!(agent_of(&app, &later, "waits").await["provider"], "limited");
    let fell_back = assigned_at(&app, "falls-back").await;
    let provider = agent_of(&app, &later, "falls-back").await["provider"].clone();
    if fell_back < until {
        assert_eq!(provider, "fake", "dispatched during the limit, to the fallback");
    }

    // The suspended agent was resumed after the reset (not replaced) and finished its group.
    let early = wait_for_wish(&app, "early", "the early wish completes", |w| w["status"] == "completed").await;
    assert_eq!(group(&early, "first")["assignee"], limited_agent.as_str(), "the same agent finished: {early}");
    let from_suspended = |e: &Value| e["payload"]["from"] == "suspended";
    let query = format!("types=agent.state_changed&subject=agent:{limited_agent}");
    let changes = app.events_until(&query, "the resume", |e| e.iter().any(from_suspended)).await;
    let resumed = changes.iter().find(|e| from_suspended(e)).unwrap();
    assert_eq!(resumed["payload"]["to"], "spawning");
    let at: chrono::DateTime<chrono::Utc> = resumed["created_at"].as_str().unwrap().parse().unwrap();
    assert!(at >= until, "resumed at {at}, before the reset at {until}");
    // The limit cut its turn short: it was told to go on.
    let inbox = app.get_ok(&format!("/api/v1/agents/{limited_agent}/messages")).await;
    let told = inbox["items"].as_array().into_iter().flatten().any(|m| {
        m["from"] == "switchyard"
            && m["body"].as_str().is_some_and(|b| b.contains("usage limit was reached; it has reset"))
    });
    assert!(told, "{inbox:#}");
}

/// Commits `file` with `text` on the branch checked out in `repo` (the target branch, `main`).
fn commit_on_target(repo: &Path, file: &str, text: &str) -> String {
    std::fs::write(repo.join(file), text).expect("write");
    git(repo, &["add", "-A"]);
    git(repo, &["-c", "user.name=Person", "-c", "user.email=person@example.com", "commit", "-qm", "a person's change"]);
    git(repo, &["rev-parse", "HEAD"]).trim().to_owned()
}

/// The `kind` events of `wish`, once there is one at least.
async fn events_of(app: &TestApp, kind: &str, wish: &str) -> Vec<Value> {
    app.events_until(&format!("types={kind}&subject=wish:{wish}&limit=100"), kind, |e| !e.is_empty()).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_target_branch_that_moved_is_merged_into_the_wish_before_the_next_groups_start_unless_it_would_conflict() {
    let fakes = Fakes::new();
    fakes.say("hold-first", "");
    fakes.say("hold-one", "");
    let app = conducted(&fakes).await;
    let (_, repo) = project(&app, "moving", json!({"review": "none"})).await;
    for (slug, first, then) in [("fresh", "first", "then"), ("stale", "one", "two")] {
        app.create_wish(json!({"slug": slug, "project": "moving", "title": "t",
                               "groups": [{"key": first, "title": "First"},
                                          {"key": then, "title": "Then", "depends_on": [first]}]}))
            .await;
        app.post_ok(&format!("/api/v1/wishes/{slug}/plan"), json!({})).await;
        wait_for_wish(&app, slug, "the first group has its agent", |w| group(w, first)["assignee"].is_string()).await;
    }

    // While the first groups work, a person changes the target: a file of its own (merges
    // clean into `fresh`), and the file `one` writes (conflicts with `stale`).
    let clean = commit_on_target(&repo, "elsewhere.txt", "a person's file\n");
    let conflicting = commit_on_target(&repo, "one.txt", "the person's one\n");
    fakes.say("go-first", "");
    fakes.say("go-one", "");

    let fresh = wait_for_wish(&app, "fresh", "`fresh` completes", |w| w["status"] == "completed").await;
    let then = app.task(group(&fresh, "then")["task_id"].as_str().unwrap()).await;
    let base = then["base_commit"].as_str().expect("then's base");
    git(&repo, &["merge-base", "--is-ancestor", &conflicting, base]);
    assert!(files(&repo, "wish/fresh").contains(&"elsewhere.txt".to_owned()));
    let caught_up = events_of(&app, "wish.caught_up", "fresh").await;
    assert_eq!(caught_up.len(), 1, "{caught_up:?}");
    assert_eq!(caught_up[0]["payload"]["target_commit"], conflicting.as_str());

    let stale = wait_for_wish(&app, "stale", "`stale` completes", |w| w["status"] == "completed").await;
    let two = app.task(group(&stale, "two")["task_id"].as_str().unwrap()).await;
    let base = two["base_commit"].as_str().expect("two's base");
    let contains = |commit: &str| {
        std::process::Command::new("git")
            .args(["-C", repo.to_str().unwrap(), "merge-base", "--is-ancestor", commit, base])
            .status()
            .unwrap()
            .success()
    };
    assert!(!contains(&clean), "`two` started from the wish's branch as it was, without the target's change");
    let predicted = events_of(&app, "wish.conflict_predicted", "stale").await;
    assert_eq!(app.count_events("wish.caught_up", "wish:stale").await, 0);
    assert_eq!(predicted.len(), 1, "recorded once: {predicted:?}");
    assert_eq!(predicted[0]["payload"]["files"], json!(["one.txt"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_merge_git_refuses_is_shown_with_gits_words_tried_again_after_growing_waits_and_lands_once_git_lets_it() {
    let fakes = Fakes::new();
    fakes.say("hold-api", "");
    let app = conducted(&fakes).await;
    let (_, repo) = project(&app, "gamma", json!({"review": "none"})).await;
    app.create_wish(json!({"slug": "locked", "project": "gamma", "title": "t",
                           "groups": [{"key": "api", "title": "The API"}]}))
        .await;
    app.post_ok("/api/v1/wishes/locked/plan", json!({})).await;
    wait_for_wish(&app, "locked", "the wish has its branch and the group its engineer", |w| {
        w["branch"] == "wish/locked" && group(w, "api")["assignee"].as_str().is_some_and(|a| a.starts_with("engineer-"))
    })
    .await;
    // Git cannot lock the wish's branch, as while another git holds it; the engineer reports.
    let lock = repo.join(".git/refs/heads/wish/locked.lock");
    std::fs::write(&lock, "").expect("lock");
    fakes.say("go-api", "");

    let stalled = wait_for_wish(&app, "locked", "the wish says its merge keeps failing", |w| {
        w["stalled"]["attempts"].as_i64().is_some_and(|n| n >= 4)
    })
    .await;
    let error = stalled["stalled"]["error"].as_str().expect("error");
    assert!(error.contains("cannot lock ref 'refs/heads/wish/locked'"), "git's words: {error}");
    assert_eq!(group(&stalled, "api")["status"], "in_progress", "{stalled}");
    // Each try waits twice as long as the one before (1 s, 2 s, 4 s, 8 s, …): the fourth's next try
    // is at least 15 s after the first failure, where four tries a second would be the next moment.
    let at = |field: &str| {
        stalled["stalled"][field].as_str().expect(field).parse::<chrono::DateTime<chrono::Utc>>().expect("time")
    };
    assert!(at("retry_at") - at("since") >= chrono::Duration::seconds(15), "{}", stalled["stalled"]);
    let failing = app.get_ok("/api/v1/events?subject=wish:locked&types=wish.step_failing").await;
    assert_eq!(failing["items"].as_array().expect("events").len(), 1, "one event, however many tries: {failing}");
    let needs = app.get_ok("/api/v1/needs").await;
    let need = needs["items"].as_array().expect("needs").iter().find(|n| n["kind"] == "stalled").cloned();
    let need = need.unwrap_or_else(|| panic!("needs you lists it: {needs}"));
    assert_eq!((&need["wish"], &need["link"]), (&json!("locked"), &json!("/wishes/locked")), "{need}");
    assert!(need["asked"].as_str().unwrap_or_default().contains("cannot lock ref"), "{need}");
    let dashboard = crate::dashboard::Dashboard::login(&app).await;
    let (status, page) = dashboard.get("/wishes/locked").await;
    assert_eq!(status, 200);
    assert!(page.contains("Merging its reported groups keeps failing"), "{page}");
    assert!(page.contains("cannot lock ref"), "{page}");

    // Git can lock the branch again: the group lands by itself and the wish says no more.
    std::fs::remove_file(&lock).expect("unlock");
    let done = wait_for_wish(&app, "locked", "the group lands once git lets it", |w| w["status"] == "completed").await;
    assert!(done["stalled"].is_null(), "{done}");
    let recovered = app.get_ok("/api/v1/events?subject=wish:locked&types=wish.step_recovered").await;
    assert_eq!(recovered["items"].as_array().expect("events").len(), 1, "{recovered}");
    assert!(!app.get_ok("/api/v1/needs").await.to_string().contains("\"stalled\""));
}
