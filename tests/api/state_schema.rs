//! multiclaude's `state.json` schema, strict: the `state-struct` markers of its state file
//! document (the seed `multiclaude-state-file.txt`), field for field, with the value types and
//! enumerations its text gives. `assert_state_file` checks `<data dir>/state.json` against it and
//! against `GET /api/v1/state`.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::helpers::{eventually, TestApp};

// <!-- state-struct: ... --> lines of the seed, as written there.
const STATE: &str = "State repos current_repo";
const REPOSITORY: &str = "Repository github_url tmux_session agents task_history merge_queue_config pr_shepherd_config fork_config target_branch";
const AGENT: &str = "Agent type worktree_path tmux_window session_id pid task summary failure_reason created_at last_nudge ready_for_cleanup";
const TASK_HISTORY: &str =
    "TaskHistoryEntry name task branch pr_url pr_number status summary failure_reason created_at completed_at";
const MERGE_QUEUE_CONFIG: &str = "MergeQueueConfig enabled track_mode";
const PR_SHEPHERD_CONFIG: &str = "PRShepherdConfig enabled track_mode";
const FORK_CONFIG: &str = "ForkConfig is_fork upstream_url upstream_owner upstream_repo force_fork_mode";
const HOOKS: [&str; 10] = [
    "on_event",
    "on_pr_created",
    "on_agent_idle",
    "on_merge_complete",
    "on_agent_started",
    "on_agent_stopped",
    "on_task_assigned",
    "on_ci_failed",
    "on_worker_stuck",
    "on_message_sent",
];
const AGENT_TYPES: [&str; 7] =
    ["supervisor", "worker", "merge-queue", "workspace", "review", "pr-shepherd", "generic-persistent"];
const HISTORY_STATUSES: [&str; 6] = ["open", "merged", "closed", "no-pr", "failed", "unknown"];
const TRACK_MODES: [&str; 3] = ["all", "author", "assigned"];

fn fields(marker: &str) -> Vec<&str> {
    marker.split_whitespace().skip(1).collect()
}

/// Only the struct's fields; `required` ones must be there.
fn object<'a>(what: &str, value: &'a Value, marker: &str, required: &[&str]) -> &'a Map<String, Value> {
    let object = value.as_object().unwrap_or_else(|| panic!("{what} is an object: {value}"));
    let allowed = fields(marker);
    for key in object.keys() {
        assert!(allowed.contains(&key.as_str()), "{what}: `{key}` is not a field of {marker}");
    }
    for key in required {
        assert!(object.contains_key(*key), "{what}: `{key}` missing");
    }
    object
}

fn string(what: &str, value: &Value) {
    assert!(value.is_string(), "{what} is a string: {value}");
}

fn time(what: &str, value: &Value) {
    let text = value.as_str().unwrap_or_else(|| panic!("{what} is a time string: {value}"));
    assert!(chrono::DateTime::parse_from_rfc3339(text).is_ok(), "{what} is RFC 3339: {text}");
}

fn one_of(what: &str, value: &Value, allowed: &[&str]) {
    assert!(value.as_str().is_some_and(|v| allowed.contains(&v)), "{what} is one of {allowed:?}: {value}");
}

/// Validates a whole state document.
pub fn validate(state: &Value) {
    // The State struct's marker names `repos` and `current_repo`; the schema block beside it adds
    // `hooks` (a HookConfig).
    let top = object("state", state, &format!("{STATE} hooks"), &["repos"]);
    // `hooks` is the document's HookConfig (not a state-struct marker, but in its schema).
    for key in top.keys().filter(|k| *k == "hooks") {
        let hooks = top[key].as_object().expect("hooks is an object");
        for (name, path) in hooks {
            assert!(HOOKS.contains(&name.as_str()), "hooks: `{name}` is not a hook");
            string(name, path);
        }
    }
    if let Some(current) = top.get("current_repo") {
        let name = current.as_str().expect("current_repo is a string");
        assert!(top["repos"].get(name).is_some(), "current_repo names a repo");
    }
    for (name, repo) in top["repos"].as_object().expect("repos is an object") {
        let repo = object(name, repo, REPOSITORY, &fields(REPOSITORY));
        for key in ["github_url", "tmux_session", "target_branch"] {
            string(key, &repo[key]);
        }
        for (agent_name, agent) in repo["agents"].as_object().expect("agents is an object") {
            let agent = object(agent_name, agent, AGENT, &["type"]);
            one_of("type", &agent["type"], &AGENT_TYPES);
            for (key, value) in agent {
                match key.as_str() {
                    "pid" => assert!(value.is_i64(), "pid is an integer"),
                    "ready_for_cleanup" => assert!(value.is_boolean()),
                    "created_at" | "last_nudge" => time(key, value),
                    _ => string(key, value),
                }
            }
        }
        for entry in repo["task_history"].as_array().expect("task_history is an array") {
            let entry = object("task_history entry", entry, TASK_HISTORY, &["name", "status"]);
            one_of("status", &entry["status"], &HISTORY_STATUSES);
            for (key, value) in entry {
                match key.as_str() {
                    "pr_number" => assert!(value.is_i64(), "pr_number is an integer"),
                    "created_at" | "completed_at" => time(key, value),
                    _ => string(key, value),
                }
            }
        }
        for (key, marker) in [("merge_queue_config", MERGE_QUEUE_CONFIG), ("pr_shepherd_config", PR_SHEPHERD_CONFIG)] {
            let config = object(key, &repo[key], marker, &fields(marker));
            assert!(config["enabled"].is_boolean());
            one_of("track_mode", &config["track_mode"], &TRACK_MODES);
        }
        let fork = object("fork_config", &repo["fork_config"], FORK_CONFIG, &fields(FORK_CONFIG));
        assert!(fork["is_fork"].is_boolean() && fork["force_fork_mode"].is_boolean());
    }
}

/// `<data dir>/state.json` is valid and catches up with the database (as `GET /api/v1/state`
/// says it) within a second or so.
pub async fn assert_state_file(app: &TestApp) {
    let api = app.get_ok("/api/v1/state").await;
    validate(&api);
    let path = app._data_dir.path().join("state.json");
    let mut seen = Value::Null;
    eventually("state.json matches the database", Duration::from_secs(3), || {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        seen = serde_json::from_str(&text).unwrap_or(Value::Null);
        let same = seen == api;
        async move { same }
    })
    .await;
    validate(&seen);
}

#[test]
fn the_seeds_example_validates_and_a_stray_field_does_not() {
    let example = serde_json::json!({"repos": {"my-app": {"github_url": "https://github.com/user/my-app",
        "tmux_session": "mc-my-app", "agents": {"supervisor": {"type": "supervisor", "pid": 12345,
        "created_at": "2025-01-01T00:00:00Z", "last_nudge": "2025-01-01T00:00:00Z", "ready_for_cleanup": false}},
        "task_history": [{"name": "clever-fox", "task": "Add auth", "branch": "work/clever-fox",
        "pr_url": "https://github.com/user/my-app/pull/42", "pr_number": 42, "status": "merged",
        "created_at": "2025-01-01T00:00:00Z", "completed_at": "2025-01-02T00:00:00Z"}],
        "merge_queue_config": {"enabled": true, "track_mode": "all"},
        "pr_shepherd_config": {"enabled": true, "track_mode": "author"},
        "fork_config": {"is_fork": true, "upstream_url": "https://github.com/original/my-app",
        "upstream_owner": "original", "upstream_repo": "my-app", "force_fork_mode": false},
        "target_branch": "main"}}, "current_repo": "my-app"});
    validate(&example);
    let mut stray = example.clone();
    stray["repos"]["my-app"]["agents"]["supervisor"]["kind"] = serde_json::json!("worker");
    assert!(std::panic::catch_unwind(|| validate(&stray)).is_err());
}
