//! Each agent's own provider configuration, so an agent Switchyard starts in a clone it made
//! never stops at a dialog a person would have to answer on first start: onboarding, "do you
//! trust this folder", "do you want to use this API key" (Codex's "Folder access", which it shows
//! because its clone is untrusted, the worker answers itself: [`codex`]). Permission prompts
//! are not touched: they stay a person's (or a policy's) to answer.
//!
//! The configuration lives in the agent's own directory (`<data_dir>/agents/<name>/<provider>`),
//! named to the provider by its own variable, and is kept across suspend and resume (Claude
//! Code keeps the sessions `--resume` continues there). What the provider needs from the user
//! (a login, an API key) is taken from the user's own configuration when it is there; when it is
//! not, the provider says so on its screen and the screen rules report it
//! ([`crate::detect::screen`]'s `fatal`).
//!
//! | provider | variable | what is written |
//! | --- | --- | --- |
//! | Claude Code | `CLAUDE_CONFIG_DIR` | `.claude.json`: `hasCompletedOnboarding`, `projects[clone].hasTrustDialogAccepted`, the user's account fields, the pane's `ANTHROPIC_API_KEY` approved; the user's `.credentials.json` and `settings.json` (with the policy and Switchyard's hooks); no official plugin marketplace fetched into it |
//! | Codex | `CODEX_HOME` | the user's `config.toml` plus the policy's keys, `rules/switchyard.rules` ([`codex_policy`]); the user's `auth.json`, else one holding the pane's `OPENAI_API_KEY`; the clone's `AGENTS.md` as its own; a `TMPDIR` of its own when `CODEX_HOME` is under the temporary directory ([`codex`]) |
//! | Gemini CLI | `GEMINI_CLI_HOME` | `.gemini/trustedFolders.json` naming the clone (untrusted unless in `auto`); the user's `settings.json` (auth type `gemini-api-key` when the pane has `GEMINI_API_KEY` and none is chosen) and login files; `.gemini/policies/switchyard.toml`, the permission policy; the clone's `GEMINI.md` as its own when untrusted ([`gemini`]) |
//!
//! ## The clone's own configuration does not decide what an agent may do
//!
//! The clone is written by agents (and what one commits reaches every later agent), so a
//! project-level configuration in it — permission rules, a mode that asks nothing, hooks and
//! MCP servers that run commands — would let an agent raise its own permissions, or a later
//! agent's, past the policy Switchyard set, without a person. None of it is read:
//!
//! - Claude Code runs with `--setting-sources user`: `.claude/settings.json`,
//!   `.claude/settings.local.json`, and the clone's skills, commands and subagents are not read;
//!   Switchyard's hooks are in the agent's own settings. `CLAUDE.md` is still read, through
//!   `--add-dir <clone>` with `CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD=1` (which loads the
//!   added directory's memory files and nothing else: checked against 2.1.332).
//! - Codex runs with the clone untrusted, which disables its `.codex/` (config, hooks, rules),
//!   and its policy's keys on the command line ([`codex`]).
//! - Gemini CLI runs with the clone untrusted under `ask` and `allow-list`, which ignores its
//!   `.gemini/settings.json` (hooks, MCP servers, allowed tools) ([`gemini`]). Under `auto` it
//!   is trusted (the sandbox is the boundary); the policy's rule for the rest has a priority
//!   above every rule Gemini CLI makes of settings (`tools.allowed`, `tools.core`, a trusted
//!   MCP server's tools) all the same.
//!
//! An untrusted folder's own instructions file is not read by these CLIs either: the clone's
//! (Switchyard's standing instructions, or the project's own) is given to the agent as its own
//! ([`own_instructions`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};

use crate::agent_writable::AgentWritable;
pub use crate::providers::logins::UserConfig;
use crate::providers::{Permissions, Policy, Setup};

mod codex;
mod codex_policy;
mod gemini;

/// What the provider is started with beside its own directory.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Prepared {
    /// Variables for its environment (the first points it at its directory).
    pub env: Vec<(String, String)>,
    /// Arguments appended to its command (and to its resume command).
    pub args: Vec<String>,
    /// Whether Switchyard's Claude Code hooks are in the agent's own settings (then none are
    /// put in the clone).
    pub hooks_installed: bool,
}

/// Writes the agent's configuration for `setup` under `agent_dir` for an agent working in
/// `clone`, and returns what points the provider at it. `pane_env` is the provider's
/// configured environment (where an API key may be given); `policy` what the CLI may do without
/// asking ([`crate::domain::permissions`]); `hook` the `switchyard` whose `hook` Claude Code is
/// to run, when the provider wants hooks.
pub fn prepare(
    setup: Setup,
    agent_dir: &Path,
    clone: &Path,
    user: &UserConfig,
    pane_env: &BTreeMap<String, String>,
    policy: Policy<'_>,
    hook: Option<&Path>,
) -> std::io::Result<Prepared> {
    let (name, variable) = match setup {
        Setup::None => return Ok(Prepared::default()),
        Setup::Claude => ("claude", "CLAUDE_CONFIG_DIR"),
        Setup::Codex => ("codex", "CODEX_HOME"),
        Setup::Gemini => ("gemini", "GEMINI_CLI_HOME"),
    };
    // A provider configured with its own directory is the user's to manage.
    if pane_env.contains_key(variable) {
        return Ok(Prepared::default());
    }
    // The agent writes its own directory (its provider keeps its state there): nothing in it
    // is followed or trusted to be what it should be.
    let dir = AgentWritable::create(agent_dir, 0o700)?.create_dir(name, 0o700)?;
    let mut prepared = Prepared::default();
    match setup {
        Setup::None => {}
        Setup::Claude => {
            let clone = clone.to_string_lossy();
            prepared.env = claude(&dir, &clone, user, pane_env, policy, hook)?;
            prepared.hooks_installed = hook.is_some();
            // The clone's settings are the agents' to write: only the user's (the agent's own
            // directory) are read. Its CLAUDE.md still is, as an added directory's memory.
            prepared.args = vec!["--setting-sources".into(), "user".into(), "--add-dir".into(), clone.to_string()];
            prepared.env.push(("CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD".into(), "1".into()));
            // Its own directory is new, so Claude Code would fetch the official plugin
            // marketplace from GitHub into it on its first turn (a clone per agent, or two
            // failed ones offline), contending with the agent's first tool for its config file:
            // the first `Write` took 2.4 s against 0.16 s under `claude -p` (checked against
            // 2.1.332). The user's plugins are not in an agent's directory either way.
            prepared.env.push(("CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL".into(), "1".into()));
        }
        Setup::Codex => {
            prepared.env = codex::codex(&dir, clone, user, pane_env, policy)?;
            prepared.args = codex_policy::overrides(policy.permissions);
            prepared.args.extend(codex::overrides(clone));
        }
        Setup::Gemini => gemini::gemini(&dir, clone, user, pane_env, policy)?,
    }
    prepared.env.insert(0, (variable.to_owned(), dir.path().to_string_lossy().into_owned()));
    Ok(prepared)
}

/// Whether an agent of a provider with `setup` and the pane environment `pane_env` opens at a
/// dialog the worker answers: Codex's "Folder access", in the clone [`prepare`] marks untrusted
/// (not when the user manages its directory).
pub fn opens_at_a_dialog(setup: Setup, pane_env: &BTreeMap<String, String>) -> bool {
    setup == Setup::Codex && !pane_env.contains_key("CODEX_HOME")
}

/// The fields of the user's `.claude.json` that say who they are; nothing about their projects.
const CLAUDE_ACCOUNT_FIELDS: [&str; 4] = ["oauthAccount", "primaryApiKey", "customApiKeyResponses", "userID"];

fn claude(
    dir: &AgentWritable,
    clone: &str,
    user: &UserConfig,
    env: &BTreeMap<String, String>,
    policy: Policy<'_>,
    hook: Option<&Path>,
) -> std::io::Result<Vec<(String, String)>> {
    // An earlier start's file is kept (Claude Code records its own state there); a first start
    // takes the user's account.
    let mut config = own_json(dir, ".claude.json")?.unwrap_or_else(|| {
        let users = user.claude_json.as_deref().and_then(|p| read_json(p).ok().flatten()).unwrap_or(json!({}));
        let mut fresh = json!({});
        for field in CLAUDE_ACCOUNT_FIELDS {
            if let Some(value) = users.get(field) {
                fresh[field] = value.clone();
            }
        }
        fresh
    });
    if !config.is_object() {
        config = json!({});
    }
    config["hasCompletedOnboarding"] = json!(true);
    if !config["projects"].is_object() {
        config["projects"] = json!({});
    }
    let project = &mut config["projects"][clone];
    if !project.is_object() {
        *project = json!({});
    }
    project["hasTrustDialogAccepted"] = json!(true);
    // The user gave this key to the provider: Claude Code asks "Do you want to use this API
    // key?" (default No) unless the key's last 20 characters are approved.
    if let Some(key) = env.get("ANTHROPIC_API_KEY").filter(|k| !k.is_empty()) {
        let tail: String = key.chars().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect();
        let responses = &mut config["customApiKeyResponses"];
        if !responses.is_object() {
            *responses = json!({"approved": [], "rejected": []});
        }
        for (list, keep) in [("approved", true), ("rejected", false)] {
            if !responses[list].is_array() {
                responses[list] = json!([]);
            }
            let entries = responses[list].as_array_mut().expect("an array");
            entries.retain(|e| e.as_str() != Some(&tail));
            if keep {
                entries.push(json!(tail));
            }
        }
    }
    if policy.permissions == Permissions::Auto {
        // Its bypass mode's warning ("By proceeding, you accept all responsibility"), answered.
        config["bypassPermissionsModeAccepted"] = json!(true);
    }
    dir.replace(".claude.json", serde_json::to_string_pretty(&config)?.as_bytes(), PRIVATE)?;
    let users_settings = user.claude_dir.as_ref().and_then(|u| read_json(&u.join("settings.json")).ok().flatten());
    if let Some(users) = &user.claude_dir {
        copy_if_present(&users.join(".credentials.json"), dir, ".credentials.json")?;
    }
    let mut settings = claude_settings(users_settings.unwrap_or(json!({})), policy);
    if let (Some(exe), Some(object)) = (hook, settings.as_object_mut()) {
        if !crate::worker::claude_hooks::register(object, exe) {
            // The user's `hooks` is not an object Claude Code could read: ours replace it.
            object.remove("hooks");
            crate::worker::claude_hooks::register(object, exe);
        }
    }
    dir.replace("settings.json", serde_json::to_string_pretty(&settings)?.as_bytes(), PRIVATE)?;
    // As root, Claude Code refuses its bypass mode unless told it is in a deliberate sandbox:
    // `auto` is only ever chosen under one.
    Ok(match policy.permissions {
        Permissions::Auto => vec![("IS_SANDBOX".to_owned(), "1".to_owned())],
        Permissions::Ask | Permissions::AllowList => Vec::new(),
    })
}

/// What Switchyard's briefs ask an agent to run, as Claude Code's permission rules (a rule
/// `Bash(git add:*)` allows any command that starts so; a compound command is allowed when each
/// of its parts is). Editing files in the clone is its `acceptEdits` mode's.
const CLAUDE_BRIEF_RULES: [&str; 9] = [
    "Bash(git add:*)",
    "Bash(git commit:*)",
    "Bash(git fetch:*)",
    "Bash(git merge:*)",
    "Bash(git push:*)",
    "Bash(git status:*)",
    "Bash(git diff:*)",
    "Bash(git log:*)",
    "Bash(switchyard:*)",
];

/// The user's Claude Code settings with the agent's permission policy over them (the user's
/// own rules are kept; the mode is the policy's):
///
/// | policy | `permissions` |
/// | --- | --- |
/// | `ask` | `defaultMode: acceptEdits`, the briefs' rules and the provider's `allow` |
/// | `allow-list` | the same, and `denyInsteadOfPrompting`: what would ask is refused at once |
/// | `auto` | `defaultMode: bypassPermissions` (the dialog about it skipped) |
///
/// Auto mode (Claude Code's own classifier deciding, and its "make auto mode your default?"
/// dialog at start) is turned off in every policy: it is neither a person's answer nor a rule.
fn claude_settings(mut settings: Value, policy: Policy<'_>) -> Value {
    if !settings.is_object() {
        settings = json!({});
    }
    if !settings["permissions"].is_object() {
        settings["permissions"] = json!({});
    }
    let permissions = &mut settings["permissions"];
    if !permissions["allow"].is_array() {
        permissions["allow"] = json!([]);
    }
    let allow = permissions["allow"].as_array_mut().expect("an array");
    for rule in CLAUDE_BRIEF_RULES.iter().copied().chain(policy.allow.iter().map(String::as_str)) {
        if !allow.iter().any(|r| r.as_str() == Some(rule)) {
            allow.push(json!(rule));
        }
    }
    permissions["disableAutoMode"] = json!("disable");
    let mode = if policy.permissions == Permissions::Auto { "bypassPermissions" } else { "acceptEdits" };
    permissions["defaultMode"] = json!(mode);
    match policy.permissions {
        Permissions::AllowList => permissions["denyInsteadOfPrompting"] = json!(true),
        Permissions::Ask | Permissions::Auto => {
            if let Some(p) = permissions.as_object_mut() {
                p.remove("denyInsteadOfPrompting");
            }
        }
    }
    if policy.permissions == Permissions::Auto {
        settings["skipDangerousModePermissionPrompt"] = json!(true);
    }
    settings
}

/// The JSON in the user's file at `path`, `None` when there is no such file; a file that is not
/// JSON counts as absent (it is rewritten, never half-merged).
fn read_json(path: &Path) -> std::io::Result<Option<Value>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(serde_json::from_str(&text).ok()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// [`read_json`] of the agent's own file `name` in `dir`.
fn own_json(dir: &AgentWritable, name: &str) -> std::io::Result<Option<Value>> {
    Ok(dir.read(name)?.and_then(|bytes| serde_json::from_slice(&bytes).ok()))
}

/// These files hold credentials: readable by this user only.
const PRIVATE: u32 = 0o600;

/// The most of a clone's instructions file given to its agent ([`own_instructions`]).
const INSTRUCTIONS_MAX: u64 = 64 << 10;

/// Gives the agent the clone's top-level instructions file `name` (`AGENTS.md`, `GEMINI.md`:
/// the project's own, or Switchyard's standing instructions) as its own, `name` in `dir` (where
/// the CLI reads the user's instructions), for a CLI that reads none from an untrusted clone:
/// the text it would have read there, at most [`INSTRUCTIONS_MAX`] bytes of it. The clone's
/// file is read without following a link (one there is the agent's, and may point anywhere:
/// not given); the agent's copy goes when the clone has none.
fn own_instructions(clone: &Path, name: &str, dir: &AgentWritable) -> std::io::Result<()> {
    let read = AgentWritable::open(clone).and_then(|clone| clone.read_at(name, 0, INSTRUCTIONS_MAX));
    let text = match read {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            tracing::warn!(error = %e, "the clone's {name} is not given to its agent");
            None
        }
    };
    match text.filter(|text| !text.is_empty()) {
        Some(text) => dir.replace(name, &text, PRIVATE),
        None => dir.remove_file(name),
    }
}

/// Copies the user's file at `from` to `name` in `dir` when there is one (refreshed on every
/// start: the user may have logged in since). Returns whether it was there.
fn copy_if_present(from: &Path, dir: &AgentWritable, name: &str) -> std::io::Result<bool> {
    match std::fs::read(from) {
        Ok(bytes) => dir.replace(name, &bytes, PRIVATE).map(|()| true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::providers::Permissions;

    pub(super) const ASK: Policy<'static> = Policy { permissions: Permissions::Ask, allow: &[] };

    pub(super) fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    pub(super) fn json_at(path: std::path::PathBuf) -> Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn claude_code_starts_onboarded_in_a_trusted_clone_with_the_users_account_and_approved_key() {
        let (agent, user) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let users_json = user.path().join(".claude.json");
        std::fs::write(&users_json, r#"{"oauthAccount": {"emailAddress": "a@b.c"}, "projects": {"/secret": {}}}"#)
            .unwrap();
        std::fs::write(user.path().join(".credentials.json"), r#"{"claudeAiOauth": {}}"#).unwrap();
        let user_config =
            UserConfig { claude_dir: Some(user.path().into()), claude_json: Some(users_json), ..UserConfig::none() };
        let key = env(&[("ANTHROPIC_API_KEY", "sk-ant-api03-0123456789abcdefghijKLMNOPQRST")]);
        let start =
            || prepare(Setup::Claude, agent.path(), Path::new("/clones/fox"), &user_config, &key, ASK, None).unwrap();
        let prepared = start();
        let dir = agent.path().join("claude");
        assert_eq!(prepared.env[0], ("CLAUDE_CONFIG_DIR".to_owned(), dir.to_string_lossy().into_owned()));
        // The clone's own settings are not read; its CLAUDE.md is.
        assert_eq!(prepared.args, ["--setting-sources", "user", "--add-dir", "/clones/fox"]);
        assert!(prepared.env.contains(&("CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD".to_owned(), "1".to_owned())));
        assert!(prepared
            .env
            .contains(&("CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL".to_owned(), "1".to_owned())));
        let config = json_at(dir.join(".claude.json"));
        assert_eq!(config["hasCompletedOnboarding"], true);
        assert_eq!(config["projects"]["/clones/fox"]["hasTrustDialogAccepted"], true);
        assert!(config["projects"].get("/secret").is_none(), "the user's projects stay theirs");
        assert_eq!(config["oauthAccount"]["emailAddress"], "a@b.c");
        assert_eq!(config["customApiKeyResponses"]["approved"], json!(["abcdefghijKLMNOPQRST"]));
        assert!(dir.join(".credentials.json").exists());
        for file in [".claude.json", ".credentials.json"] {
            assert_eq!(std::fs::metadata(dir.join(file)).unwrap().permissions().mode() & 0o777, 0o600, "{file}");
        }
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);

        // A second start keeps what Claude Code recorded and approves the key once.
        let mut config = json_at(dir.join(".claude.json"));
        config["numStartups"] = json!(3);
        std::fs::write(dir.join(".claude.json"), config.to_string()).unwrap();
        start();
        let config = json_at(dir.join(".claude.json"));
        assert_eq!(config["numStartups"], 3);
        assert_eq!(config["customApiKeyResponses"]["approved"].as_array().unwrap().len(), 1);
    }

    /// The agent's Claude Code settings and environment under `policy`, over the user's `settings`.
    fn claude_under(settings: Value, policy: Policy<'_>) -> (Value, Value, Vec<(String, String)>) {
        claude_with_hook(settings, policy, None)
    }

    fn claude_with_hook(
        settings: Value,
        policy: Policy<'_>,
        hook: Option<&Path>,
    ) -> (Value, Value, Vec<(String, String)>) {
        let (agent, user) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(user.path().join("settings.json"), settings.to_string()).unwrap();
        let user_config = UserConfig { claude_dir: Some(user.path().into()), ..UserConfig::none() };
        let vars =
            prepare(Setup::Claude, agent.path(), Path::new("/clones/fox"), &user_config, &env(&[]), policy, hook)
                .unwrap();
        assert_eq!(vars.hooks_installed, hook.is_some());
        let dir = agent.path().join("claude");
        let every_policys =
            ["CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD", "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL"];
        let vars = vars.env.into_iter().filter(|(k, _)| !every_policys.contains(&k.as_str())).collect();
        (json_at(dir.join("settings.json")), json_at(dir.join(".claude.json")), vars)
    }

    #[test]
    fn claude_code_asks_for_nothing_the_briefs_need_and_for_the_rest_as_its_policy_says() {
        let users = json!({"theme": "dark", "permissions": {"allow": ["Bash(npm test)"], "deny": ["Read(.env)"],
            "defaultMode": "plan"}});
        let extra = ["Bash(cargo test:*)".to_owned()];

        let (ask, config, vars) = claude_under(users.clone(), Policy { permissions: Permissions::Ask, allow: &extra });
        assert_eq!(ask["theme"], "dark", "the user's settings are kept");
        let p = &ask["permissions"];
        assert_eq!(p["defaultMode"], "acceptEdits", "edits in the clone need no one");
        assert_eq!(p["disableAutoMode"], "disable");
        assert!(p.get("denyInsteadOfPrompting").is_none(), "the rest asks a person");
        assert_eq!(p["deny"], json!(["Read(.env)"]));
        let allow: Vec<&str> = p["allow"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        for rule in
            ["Bash(npm test)", "Bash(git add:*)", "Bash(git commit:*)", "Bash(git push:*)", "Bash(switchyard:*)"]
        {
            assert!(allow.contains(&rule), "{rule} in {allow:?}");
        }
        assert!(allow.contains(&"Bash(cargo test:*)"), "the provider's own rules: {allow:?}");
        assert!(config.get("bypassPermissionsModeAccepted").is_none());
        assert_eq!(vars.len(), 1, "only its directory: {vars:?}");

        let (listed, _, _) = claude_under(users.clone(), Policy { permissions: Permissions::AllowList, allow: &extra });
        assert_eq!(listed["permissions"]["denyInsteadOfPrompting"], true, "the rest is refused without asking");
        assert_eq!(listed["permissions"]["defaultMode"], "acceptEdits");

        let (auto, config, vars) = claude_under(users, Policy { permissions: Permissions::Auto, allow: &[] });
        assert_eq!(auto["permissions"]["defaultMode"], "bypassPermissions");
        assert_eq!(auto["skipDangerousModePermissionPrompt"], true);
        assert_eq!(config["bypassPermissionsModeAccepted"], true);
        assert!(vars.contains(&("IS_SANDBOX".to_owned(), "1".to_owned())), "root may bypass in the sandbox: {vars:?}");
    }

    #[test]
    fn claude_codes_hooks_are_in_the_agents_own_settings_beside_the_users() {
        let users = json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}});
        let (settings, _, _) = claude_with_hook(users, ASK, Some(Path::new("/opt/switchyard")));
        let stop = settings["hooks"]["Stop"].as_array().unwrap();
        assert_eq!(stop[0]["hooks"][0]["command"], "notify-send done", "the user's hook is kept");
        assert_eq!(stop[1]["hooks"][0]["command"], "'/opt/switchyard' hook");
        for event in crate::worker::claude_hooks::HOOK_EVENTS {
            assert!(settings["hooks"][event].as_array().is_some_and(|e| !e.is_empty()), "{event}: {settings}");
        }
    }

    #[test]
    fn a_provider_without_setup_gets_nothing() {
        let agent = tempfile::tempdir().unwrap();
        let vars =
            prepare(Setup::None, agent.path(), Path::new("/c"), &UserConfig::none(), &env(&[]), ASK, None).unwrap();
        assert_eq!(vars, Prepared::default());
        assert_eq!(std::fs::read_dir(agent.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_configuration_file_the_agent_replaced_with_a_link_is_refused_not_read_or_written_through() {
        let (agent, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (secret, victim) = (outside.path().join("secret.json"), outside.path().join("victim"));
        std::fs::write(&secret, r#"{"root_only": true}"#).unwrap();
        std::fs::write(&victim, "precious").unwrap();
        let dir = agent.path().join("claude");
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(&secret, dir.join(".claude.json")).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(".claude.switchyard-tmp")).unwrap();
        let refused = prepare(Setup::Claude, agent.path(), Path::new("/c"), &UserConfig::none(), &env(&[]), ASK, None)
            .unwrap_err()
            .to_string();
        assert!(refused.contains(".claude.json is a symbolic link"), "{refused}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(std::fs::symlink_metadata(dir.join(".claude.json")).unwrap().file_type().is_symlink());
    }
}
