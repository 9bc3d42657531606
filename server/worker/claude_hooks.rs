//! Claude Code's hooks: `switchyard hook` registered for every event the state detection listens
//! to, merged into whatever the settings already hold. An agent whose Claude Code configuration
//! Switchyard makes gets them in its own user settings ([`register`], from
//! [`crate::worker::provider_setup`]: its Claude Code reads no settings from the clone); any other
//! in its clone's `.claude/settings.local.json` ([`install`]), kept out of the agent's commits
//! (`.git/info/exclude`).

use std::path::Path;

use serde_json::{json, Map, Value};

use crate::agent_writable::AgentWritable;

/// The hook events Switchyard listens to.
pub const HOOK_EVENTS: [&str; 7] =
    ["SessionStart", "UserPromptSubmit", "PreToolUse", "Stop", "PermissionRequest", "Notification", "SessionEnd"];

/// The tools whose `PreToolUse` Switchyard hears: the question tool alone, whose dialog opens
/// next (`question`). Any other tool's only says `working`, which its turn's `UserPromptSubmit`
/// said already, and Claude Code waits for the hook before the tool runs: a diligent engineer's
/// every tool call paid a process, an HTTP call and a transaction (100–300 ms each on a loaded
/// machine). What it also said, `working` again after a permission or a question was answered
/// within the hook's precedence, the screen says once that precedence is over (at most 10 s
/// after the dialog opened); `Stop` says the turn ended.
const PRE_TOOL_USE_MATCHER: &str = "AskUserQuestion";

/// The settings file, in the clone's `.claude`.
const SETTINGS: &str = "settings.local.json";

/// What goes in `.git/info/exclude` so the agent never commits the settings file.
const EXCLUDED: &str = ".claude/settings.local.json";

/// Seconds Claude Code waits for the hook; `switchyard hook` gives up after 2.
const TIMEOUT_S: u64 = 5;

#[derive(Debug, thiserror::Error)]
pub enum HooksError {
    #[error("{path} is not a JSON object; not overwriting it")]
    NotAnObject { path: String },
    #[error("{path}: {source}")]
    Json { path: String, source: serde_json::Error },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The hook command: the executable, quoted for the shell Claude Code runs it with, then `hook`.
pub fn hook_command(exe: &Path) -> String {
    let exe = exe.to_string_lossy();
    format!("'{}' hook", exe.replace('\'', r"'\''"))
}

/// A hook entry of ours, from this or an earlier install (the executable may have moved).
fn is_ours(entry: &Value) -> bool {
    entry["hooks"].as_array().is_some_and(|hooks| {
        hooks.iter().any(|h| h["command"].as_str().is_some_and(|c| c.contains("switchyard") && c.ends_with(" hook")))
    })
}

/// Registers `exe hook` for every event in [`HOOK_EVENTS`], keeping the file's other settings and
/// other hooks, replacing any earlier registration of ours; then excludes the file from git. The
/// agent can write its clone, so a link or anything but a file where the settings are is refused
/// ([`AgentWritable`]): never followed, never read.
#[tracing::instrument(skip_all, fields(clone = %clone.display()), err)]
pub fn install(clone: &Path, exe: &Path) -> Result<(), HooksError> {
    let clone = AgentWritable::open(clone)?;
    let dir = clone.create_dir(".claude", 0o755)?;
    let shown = dir.path().join(SETTINGS).display().to_string();
    let mut settings = match dir.read_string(SETTINGS)? {
        Some(text) if !text.trim().is_empty() => {
            serde_json::from_str::<Value>(&text).map_err(|source| HooksError::Json { path: shown.clone(), source })?
        }
        _ => json!({}),
    };
    let root = settings.as_object_mut().ok_or(HooksError::NotAnObject { path: shown.clone() })?;
    if !register(root, exe) {
        return Err(HooksError::NotAnObject { path: format!("{shown} (its \"hooks\")") });
    }
    let text = serde_json::to_string_pretty(&settings).map_err(|source| HooksError::Json { path: shown, source })?;
    dir.replace(SETTINGS, (text + "\n").as_bytes(), 0o644)?;
    crate::app::clones::exclude(&clone, &[EXCLUDED])?;
    Ok(())
}

/// Registers `exe hook` for every event in [`HOOK_EVENTS`] in `settings` (a Claude Code settings
/// object), keeping its other hooks and replacing any earlier registration of ours. False, and
/// nothing changed, when its `hooks` is not an object.
pub fn register(settings: &mut Map<String, Value>, exe: &Path) -> bool {
    let hooks = settings.entry("hooks").or_insert_with(|| Value::Object(Map::new()));
    let Some(hooks) = hooks.as_object_mut() else { return false };
    let command = hook_command(exe);
    for event in HOOK_EVENTS {
        let list = hooks.entry(event).or_insert_with(|| json!([]));
        if !list.is_array() {
            *list = json!([]);
        }
        let entries = list.as_array_mut().expect("an array");
        entries.retain(|entry| !is_ours(entry));
        let mut entry = json!({"hooks": [{"type": "command", "command": command, "timeout": TIMEOUT_S}]});
        if event == "PreToolUse" {
            entry["matcher"] = json!(PRE_TOOL_USE_MATCHER);
        }
        entries.push(entry);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(clone: &Path) -> Value {
        serde_json::from_str(&std::fs::read_to_string(clone.join(".claude/settings.local.json")).unwrap()).unwrap()
    }

    #[test]
    fn every_event_runs_switchyard_hook_in_claude_codes_format() {
        let clone = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(clone.path().join(".git/info")).unwrap();
        install(clone.path(), Path::new("/opt/switchyard/bin/switchyard")).unwrap();
        let settings = read(clone.path());
        for event in HOOK_EVENTS {
            let entries = settings["hooks"][event].as_array().expect(event);
            assert_eq!(entries.len(), 1);
            assert_eq!(entries[0]["hooks"][0]["type"], "command");
            assert_eq!(entries[0]["hooks"][0]["command"], "'/opt/switchyard/bin/switchyard' hook");
            // Only the question tool's PreToolUse is heard: every other tool's would hold it up.
            let matcher = if event == "PreToolUse" { json!("AskUserQuestion") } else { Value::Null };
            assert_eq!(entries[0]["matcher"], matcher, "{event}");
        }
        let exclude = std::fs::read_to_string(clone.path().join(".git/info/exclude")).unwrap();
        assert!(exclude.lines().any(|l| l == ".claude/settings.local.json"));
    }

    #[test]
    fn existing_settings_and_hooks_are_kept_and_reinstalling_does_not_duplicate() {
        let clone = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(clone.path().join(".claude")).unwrap();
        std::fs::create_dir_all(clone.path().join(".git/info")).unwrap();
        std::fs::write(clone.path().join(".git/info/exclude"), "# git ls-files --others\n*.swp").unwrap();
        let existing = json!({
            "permissions": {"allow": ["Bash(cargo test:*)"]},
            "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}
        });
        std::fs::write(clone.path().join(".claude/settings.local.json"), existing.to_string()).unwrap();
        install(clone.path(), Path::new("/old/switchyard")).unwrap();
        install(clone.path(), Path::new("/new/switchyard")).unwrap();
        let settings = read(clone.path());
        assert_eq!(settings["permissions"]["allow"][0], "Bash(cargo test:*)");
        let stop = settings["hooks"]["Stop"].as_array().unwrap();
        assert_eq!(stop.len(), 2, "{stop:?}");
        assert_eq!(stop[0]["hooks"][0]["command"], "notify-send done");
        assert_eq!(stop[1]["hooks"][0]["command"], "'/new/switchyard' hook");
        let exclude = std::fs::read_to_string(clone.path().join(".git/info/exclude")).unwrap();
        assert_eq!(exclude, "# git ls-files --others\n*.swp\n.claude/settings.local.json\n");
    }

    #[test]
    fn a_path_with_a_quote_is_quoted_for_the_shell() {
        assert_eq!(hook_command(Path::new("/a b/it's/switchyard")), r"'/a b/it'\''s/switchyard' hook");
    }

    #[test]
    fn a_settings_file_that_is_not_an_object_is_not_clobbered() {
        let clone = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(clone.path().join(".claude")).unwrap();
        std::fs::write(clone.path().join(".claude/settings.local.json"), "[1]").unwrap();
        assert!(matches!(install(clone.path(), Path::new("/s")), Err(HooksError::NotAnObject { .. })));
        assert_eq!(std::fs::read_to_string(clone.path().join(".claude/settings.local.json")).unwrap(), "[1]");
    }

    #[test]
    fn a_settings_file_that_is_a_link_is_refused_and_what_it_names_is_not_copied() {
        let (clone, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let secret = outside.path().join("secret.json");
        std::fs::write(&secret, r#"{"root_only": true}"#).unwrap();
        std::fs::create_dir_all(clone.path().join(".claude")).unwrap();
        let settings = clone.path().join(".claude/settings.local.json");
        std::os::unix::fs::symlink(&secret, &settings).unwrap();
        let refused = install(clone.path(), Path::new("/s")).unwrap_err().to_string();
        assert!(refused.contains("settings.local.json is a symbolic link"), "{refused}");
        assert!(std::fs::symlink_metadata(&settings).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), r#"{"root_only": true}"#);
        // Nor is `.claude` followed to a directory elsewhere.
        std::fs::remove_dir_all(clone.path().join(".claude")).unwrap();
        std::os::unix::fs::symlink(outside.path(), clone.path().join(".claude")).unwrap();
        assert!(install(clone.path(), Path::new("/s")).unwrap_err().to_string().contains(".claude is a symbolic link"));
        assert!(!outside.path().join("settings.local.json").exists());
    }
}
