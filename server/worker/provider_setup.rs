//! Each agent's own provider configuration, so an agent Switchyard starts in a clone it made
//! never stops at a dialog a person would have to answer on first start: onboarding, "do you
//! trust this folder", "do you want to use this API key". Permission prompts are not touched:
//! they stay a person's (or a policy's) to answer.
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
//! | Claude Code | `CLAUDE_CONFIG_DIR` | `.claude.json`: `hasCompletedOnboarding`, `projects[clone].hasTrustDialogAccepted`, the user's account fields, the pane's `ANTHROPIC_API_KEY` approved; the user's `.credentials.json` and `settings.json` (with the policy and Switchyard's hooks) |
//! | Codex | `CODEX_HOME` | the user's `config.toml` plus `[projects."<clone>"] trust_level = "trusted"` and the policy's keys, `rules/switchyard.rules` ([`codex_policy`]); the user's `auth.json`, else one holding the pane's `OPENAI_API_KEY`; a `TMPDIR` of its own when `CODEX_HOME` is under the temporary directory ([`codex_tmpdir`]) |
//! | Gemini CLI | `GEMINI_CLI_HOME` | `.gemini/trustedFolders.json` trusting the clone; the user's `settings.json` (auth type `gemini-api-key` when the pane has `GEMINI_API_KEY` and none is chosen) and login files; `.gemini/policies/switchyard.toml`, the permission policy ([`gemini_policy`]) |
//!
//! ## The clone's own configuration does not decide what an agent may do
//!
//! The clone is written by agents (and what one commits reaches every later agent), so a
//! project-level configuration in it — permission rules, a mode that asks nothing, hooks that
//! run commands — would let an agent raise its own permissions, or a later agent's, past the
//! policy Switchyard set, without a person. What each CLI is kept from, and what not:
//!
//! - Claude Code runs with `--setting-sources user`: `.claude/settings.json`,
//!   `.claude/settings.local.json`, and the clone's skills, commands and subagents are not read;
//!   Switchyard's hooks are in the agent's own settings. `CLAUDE.md` is still read, through
//!   `--add-dir <clone>` with `CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD=1` (which loads the
//!   added directory's memory files and nothing else: checked against 2.1.332).
//! - Codex is given its policy's keys as `-c key=value` ([`codex_policy::overrides`]), the
//!   layer above a project's `.codex/config.toml`: no project sets its approvals or sandbox.
//!   NOT CLOSED: in the trusted clone Codex 0.169 still loads the project's exec policy
//!   (`.codex/rules/*.rules`: a committed `prefix_rule(pattern = ["rm"], decision = "allow")`
//!   ran `rm -rf` outside its sandbox without asking, with the overrides given), and likely
//!   other project keys that run commands (`mcp_servers`, `notify`: not tried); no key or flag
//!   turns the project layer off.
//!   `trust_level = "untrusted"` does (`codex doctor` shows the project's keys ignored) but
//!   then every start stops at "Folder access … › 1. Open restricted", which no one answers
//!   (Switchyard does not press keys in an agent's pane at start).
//! - Gemini CLI: the policy's rule for the rest (ask under `ask`, refuse under `allow-list`)
//!   has a priority above every rule Gemini CLI makes of settings (`tools.allowed`,
//!   `tools.core`, a trusted MCP server's tools), which the clone's `.gemini/settings.json` is
//!   merged into. NOT CLOSED: that file's `hooks` and `mcpServers` still run commands. An
//!   untrusted folder (`DO_NOT_TRUST`) ignores the file and asks nothing at start, but Gemini CLI
//!   0.61 then asks before every git command whatever the policy (the briefs' commits would wait
//!   on a person); a system settings file (`GEMINI_CLI_SYSTEM_SETTINGS_PATH`, above the
//!   workspace's) is read only when it and every directory above it are root's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::agent_writable::AgentWritable;
use crate::providers::{Permissions, Policy, Setup};

mod codex_policy;

/// Where the user's own provider configuration is: the worker's environment (`HOME`,
/// `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `GEMINI_CLI_HOME`).
#[derive(Debug, Clone)]
pub struct UserConfig {
    /// Claude Code's config directory (`~/.claude`) and its main file (`~/.claude.json`).
    pub claude_dir: Option<PathBuf>,
    pub claude_json: Option<PathBuf>,
    /// `~/.codex`.
    pub codex_home: Option<PathBuf>,
    /// `~/.gemini`.
    pub gemini_dir: Option<PathBuf>,
}

impl UserConfig {
    pub fn from_env() -> UserConfig {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let home = var("HOME");
        let claude_dir = var("CLAUDE_CONFIG_DIR").or_else(|| home.as_ref().map(|h| h.join(".claude")));
        // Claude Code keeps `.claude.json` inside CLAUDE_CONFIG_DIR when it is set, else in HOME.
        let claude_json = match var("CLAUDE_CONFIG_DIR") {
            Some(dir) => Some(dir.join(".claude.json")),
            None => home.as_ref().map(|h| h.join(".claude.json")),
        };
        UserConfig {
            claude_dir,
            claude_json,
            codex_home: var("CODEX_HOME").or_else(|| home.as_ref().map(|h| h.join(".codex"))),
            gemini_dir: var("GEMINI_CLI_HOME").or(home).map(|h| h.join(".gemini")),
        }
    }

    /// The configuration of a user whose home is `home`, whatever the environment says.
    pub fn under(home: &Path) -> UserConfig {
        UserConfig {
            claude_dir: Some(home.join(".claude")),
            claude_json: Some(home.join(".claude.json")),
            codex_home: Some(home.join(".codex")),
            gemini_dir: Some(home.join(".gemini")),
        }
    }

    /// No user configuration at all.
    pub fn none() -> UserConfig {
        UserConfig { claude_dir: None, claude_json: None, codex_home: None, gemini_dir: None }
    }
}

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
    let clone = clone.to_string_lossy();
    let mut prepared = Prepared::default();
    match setup {
        Setup::None => {}
        Setup::Claude => {
            prepared.env = claude(&dir, &clone, user, pane_env, policy, hook)?;
            prepared.hooks_installed = hook.is_some();
            // The clone's settings are the agents' to write: only the user's (the agent's own
            // directory) are read. Its CLAUDE.md still is, as an added directory's memory.
            prepared.args = vec!["--setting-sources".into(), "user".into(), "--add-dir".into(), clone.to_string()];
            prepared.env.push(("CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD".into(), "1".into()));
        }
        Setup::Codex => {
            prepared.env = codex(&dir, &clone, user, pane_env, policy)?;
            prepared.args = codex_policy::overrides(policy.permissions);
        }
        Setup::Gemini => gemini(&dir, &clone, user, pane_env, policy)?,
    }
    prepared.env.insert(0, (variable.to_owned(), dir.path().to_string_lossy().into_owned()));
    Ok(prepared)
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

fn codex(
    dir: &AgentWritable,
    clone: &str,
    user: &UserConfig,
    env: &BTreeMap<String, String>,
    policy: Policy<'_>,
) -> std::io::Result<Vec<(String, String)>> {
    let users = user.codex_home.as_deref();
    let mut config = match dir.read_string("config.toml")? {
        Some(text) => text,
        None => users.and_then(|u| std::fs::read_to_string(u.join("config.toml")).ok()).unwrap_or_default(),
    };
    // A JSON string is a TOML basic string (the same escapes), so any path stays one key.
    let table = format!("[projects.{}]", serde_json::to_string(clone)?);
    // Trusted, though Codex then reads the clone's `.codex` too (its policy keys are overridden
    // on the command line; its rules are not: see the module's notes): untrusted, it stops at
    // a dialog on every start.
    if !config.contains(&table) {
        if !config.is_empty() && !config.ends_with('\n') {
            config.push('\n');
        }
        config.push_str(&format!("\n{table}\ntrust_level = \"trusted\"\n"));
    }
    let config = codex_policy::config(&config, policy.permissions);
    dir.replace("config.toml", config.as_bytes(), PRIVATE)?;
    dir.create_dir("rules", 0o700)?.replace("switchyard.rules", codex_policy::rules(policy).as_bytes(), PRIVATE)?;
    let copied = users.map(|u| copy_if_present(&u.join("auth.json"), dir, "auth.json")).transpose()?.unwrap_or(false);
    if !copied {
        if let Some(key) = env.get("OPENAI_API_KEY").filter(|k| !k.is_empty()) {
            // What `codex login --with-api-key` writes.
            dir.replace("auth.json", json!({"OPENAI_API_KEY": key}).to_string().as_bytes(), PRIVATE)?;
        }
    }
    codex_tmpdir(dir, env)
}

/// Codex refuses to set up its helpers (`codex-linux-sandbox`, which its sandbox runs every
/// command through) when its `CODEX_HOME` lies under the temporary directory (`TMPDIR`, else
/// `/tmp`): every command it would sandbox then fails ("bwrap: execvp codex-linux-sandbox"),
/// and under `ask` nothing asks. An agent directory under it (a data directory in `/tmp`) gets
/// a `TMPDIR` of its own inside `CODEX_HOME`, which Codex's sandbox lets commands write too.
fn codex_tmpdir(dir: &AgentWritable, env: &BTreeMap<String, String>) -> std::io::Result<Vec<(String, String)>> {
    let temp = env.get("TMPDIR").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    if !dir.path().starts_with(&temp) {
        return Ok(Vec::new());
    }
    let tmp = dir.create_dir("tmp", 0o700)?;
    Ok(vec![("TMPDIR".to_owned(), tmp.path().to_string_lossy().into_owned())])
}

/// The user's Gemini CLI files that hold their login.
const GEMINI_LOGIN_FILES: [&str; 3] = ["oauth_creds.json", "google_accounts.json", "gemini-credentials.json"];

fn gemini(
    dir: &AgentWritable,
    clone: &str,
    user: &UserConfig,
    env: &BTreeMap<String, String>,
    policy: Policy<'_>,
) -> std::io::Result<()> {
    let own = dir.create_dir(".gemini", 0o700)?;
    let users = user.gemini_dir.as_deref();
    let from_user = |name: &str| users.and_then(|u| read_json(&u.join(name)).ok().flatten());
    let mut trusted =
        own_json(&own, "trustedFolders.json")?.or_else(|| from_user("trustedFolders.json")).unwrap_or(json!({}));
    if !trusted.is_object() {
        trusted = json!({});
    }
    // Trusted: in an untrusted folder Gemini CLI asks before every git command, whatever the
    // policy (the briefs' commits would wait on a person). The clone's own settings are held
    // below the policy instead ([`gemini_policy`]).
    trusted[clone] = json!("TRUST_FOLDER");
    own.replace("trustedFolders.json", serde_json::to_string_pretty(&trusted)?.as_bytes(), PRIVATE)?;
    let mut settings = own_json(&own, "settings.json")?.or_else(|| from_user("settings.json")).unwrap_or(json!({}));
    if !settings.is_object() {
        settings = json!({});
    }
    let chosen = settings.pointer("/security/auth/selectedType").is_some_and(|v| !v.is_null());
    if !chosen && env.get("GEMINI_API_KEY").is_some_and(|k| !k.is_empty()) {
        if !settings["security"].is_object() {
            settings["security"] = json!({});
        }
        if !settings["security"]["auth"].is_object() {
            settings["security"]["auth"] = json!({});
        }
        settings["security"]["auth"]["selectedType"] = json!("gemini-api-key");
    }
    own.replace("settings.json", serde_json::to_string_pretty(&settings)?.as_bytes(), PRIVATE)?;
    // Gemini CLI reads every `*.toml` in its user policy directory; this one is Switchyard's,
    // rewritten on every start (the user's own policies are theirs: not copied in).
    own.create_dir("policies", 0o700)?.replace(GEMINI_POLICY_FILE, gemini_policy(policy).as_bytes(), PRIVATE)?;
    if let Some(users) = users {
        for name in GEMINI_LOGIN_FILES {
            copy_if_present(&users.join(name), &own, name)?;
        }
    }
    Ok(())
}

/// Switchyard's policy file in the agent's Gemini CLI policy directory.
const GEMINI_POLICY_FILE: &str = "switchyard.toml";

/// The shell commands Switchyard's briefs have an agent run (git's everyday verbs and
/// `switchyard` itself), as command prefixes.
pub const BRIEF_COMMANDS: [&str; 10] = [
    "git add",
    "git commit",
    "git fetch",
    "git merge",
    "git push",
    "git status",
    "git diff",
    "git log",
    "git show",
    "switchyard",
];

/// Gemini CLI's tools that only read (its own default policy allows them too; an allow-list's
/// refusal of everything else would otherwise refuse them).
const GEMINI_READING_TOOLS: [&str; 6] =
    ["read_file", "read_many_files", "list_directory", "glob", "grep_search", "update_topic"];

/// Gemini CLI's policy (its policy engine's TOML, in the user tier, over its built-in rules) for
/// an agent. Under every policy what Switchyard's briefs ask is allowed without a person:
/// editing files (Gemini CLI keeps `write_file` and `replace` to the workspace) and
/// [`BRIEF_COMMANDS`] (a chained command is allowed only when each of its parts is). Then:
/// `ask` allows reading and asks for the rest; `allow-list` allows reading and the provider's
/// `allow` rules and refuses the rest without asking (a refused tool is not even offered to the
/// model); `auto` allows everything, as `--yolo` does (which no settings file can choose: this
/// rule is what that mode adds).
///
/// The rest's rule has priority [`GEMINI_REST_PRIORITY`]: above the rules Gemini CLI makes of
/// settings (`tools.allowed`, `tools.core`, a trusted MCP server's tools; user tier, 4.1 to 4.3),
/// which the clone's `.gemini/settings.json` — written by agents, read in the trusted clone —
/// could otherwise set to allow anything.
fn gemini_policy(policy: Policy<'_>) -> String {
    let mut text = String::from("# Written by Switchyard on each start of this agent.\n");
    text.push_str(&rule("Edits in the agent's clone", &[("toolName", list(&["write_file", "replace"]))], "allow", 900));
    text.push_str(&rule(
        "What Switchyard's briefs run",
        &[("toolName", string("run_shell_command")), ("commandPrefix", list(&BRIEF_COMMANDS))],
        "allow",
        900,
    ));
    match policy.permissions {
        Permissions::Ask => {
            text.push_str(&rule("Reading", &[("toolName", list(&GEMINI_READING_TOOLS))], "allow", 900));
            text.push_str(&rule("Anything else (ask)", &[("toolName", string("*"))], "ask_user", GEMINI_REST_PRIORITY));
        }
        Permissions::AllowList => {
            text.push_str(&rule("Reading", &[("toolName", list(&GEMINI_READING_TOOLS))], "allow", 900));
            for allowed in policy.allow {
                text.push_str(&rule(
                    &format!("The provider's allow: {allowed}"),
                    &gemini_allowed(allowed),
                    "allow",
                    800,
                ));
            }
            text.push_str(&rule(
                "Anything else (allow-list)",
                &[
                    ("toolName", string("*")),
                    ("denyMessage", string("Not on this agent's allow-list: Switchyard's policy refuses it.")),
                ],
                "deny",
                GEMINI_REST_PRIORITY,
            ));
        }
        Permissions::Auto => {
            text.push_str(&rule(
                "Everything (auto: the sandbox is the boundary)",
                &[("toolName", string("*")), ("allowRedirection", "true".to_owned())],
                "allow",
                999,
            ));
        }
    }
    text
}

/// The priority of the rule for what the policy does not allow (4.35 in Gemini CLI's user tier:
/// above what settings allow, 4.3 at most; below what its `excludeTools` deny, 4.4).
const GEMINI_REST_PRIORITY: u32 = 350;

/// The fields of a rule for one of a provider's `allow` entries, in Gemini CLI's own syntax for
/// allowed tools: `run_shell_command(cargo test)` (a command prefix) or a tool's name.
fn gemini_allowed(allowed: &str) -> Vec<(&'static str, String)> {
    let allowed = allowed.trim();
    let (tool, prefix) = match allowed.strip_suffix(')').and_then(|a| a.split_once('(')) {
        Some((tool, prefix)) => (tool.trim(), Some(prefix.trim())),
        None => (allowed, None),
    };
    match prefix {
        Some(prefix) if tool == "run_shell_command" && !prefix.is_empty() => {
            vec![("toolName", string(tool)), ("commandPrefix", string(prefix))]
        }
        _ => vec![("toolName", string(tool))],
    }
}

/// One `[[rule]]` of a Gemini CLI policy; `fields` hold TOML values ([`string`], [`list`]).
fn rule(name: &str, fields: &[(&str, String)], decision: &str, priority: u32) -> String {
    let mut text = format!("\n[[rule]]\nname = {}\n", string(name));
    for (key, value) in fields {
        text.push_str(&format!("{key} = {value}\n"));
    }
    text.push_str(&format!("decision = {}\npriority = {priority}\n", string(decision)));
    text
}

/// `text` as a TOML basic string (a JSON string is one: the same escapes).
fn string(text: &str) -> String {
    serde_json::to_string(text).expect("a string")
}

fn list(items: &[&str]) -> String {
    format!("[{}]", items.iter().map(|i| string(i)).collect::<Vec<_>>().join(", "))
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

    const ASK: Policy<'static> = Policy { permissions: Permissions::Ask, allow: &[] };

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn json_at(path: PathBuf) -> Value {
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
        let vars = vars.env.into_iter().filter(|(k, _)| k != "CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD").collect();
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
    fn codex_trusts_the_clone_beside_the_users_settings_and_takes_the_panes_api_key() {
        let (agent, user) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(user.path().join("config.toml"), "model = \"o5\"").unwrap();
        let user_config = UserConfig { codex_home: Some(user.path().into()), ..UserConfig::none() };
        let clone = Path::new("/clones/a \"b\"");
        prepare(Setup::Codex, agent.path(), clone, &user_config, &env(&[("OPENAI_API_KEY", "sk-x")]), ASK, None)
            .unwrap();
        prepare(Setup::Codex, agent.path(), clone, &user_config, &env(&[("OPENAI_API_KEY", "sk-x")]), ASK, None)
            .unwrap();
        let text = std::fs::read_to_string(agent.path().join("codex/config.toml")).unwrap();
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(parsed["model"].as_str(), Some("o5"));
        assert_eq!(parsed["projects"]["/clones/a \"b\""]["trust_level"].as_str(), Some("trusted"));
        assert_eq!(json_at(agent.path().join("codex/auth.json"))["OPENAI_API_KEY"], "sk-x");
        // The policy (`ask` here) in Codex's own settings: its approvals, its sandbox, its rules.
        assert_eq!(parsed["approval_policy"].as_str(), Some("on-request"));
        assert_eq!(parsed["sandbox_mode"].as_str(), Some("workspace-write"));
        let rules = std::fs::read_to_string(agent.path().join("codex/rules/switchyard.rules")).unwrap();
        assert!(rules.contains("prefix_rule(pattern = [\"switchyard\"], decision = \"allow\")"), "{rules}");
        // The same keys as overrides on its command line, which a project's config cannot undo.
        let prepared =
            prepare(Setup::Codex, agent.path(), clone, &user_config, &env(&[("OPENAI_API_KEY", "sk-x")]), ASK, None)
                .unwrap();
        assert_eq!(
            prepared.args,
            [
                "-c",
                "approval_policy=\"on-request\"",
                "-c",
                "sandbox_mode=\"workspace-write\"",
                "-c",
                "allow_login_shell=false"
            ]
        );
        // The user's own login wins over a key in the pane's environment.
        std::fs::write(user.path().join("auth.json"), r#"{"tokens": {}}"#).unwrap();
        prepare(Setup::Codex, agent.path(), clone, &user_config, &env(&[("OPENAI_API_KEY", "sk-x")]), ASK, None)
            .unwrap();
        assert!(json_at(agent.path().join("codex/auth.json")).get("tokens").is_some());
    }

    #[test]
    fn a_codex_home_under_the_temporary_directory_gets_a_tmpdir_of_its_own_for_codexs_sandbox() {
        let agent = tempfile::tempdir().unwrap();
        let clone = Path::new("/clones/owl");
        let vars = prepare(Setup::Codex, agent.path(), clone, &UserConfig::none(), &env(&[]), ASK, None).unwrap().env;
        let home = agent.path().join("codex");
        assert_eq!(vars[0], ("CODEX_HOME".to_owned(), home.to_string_lossy().into_owned()));
        let tmpdir = vars.iter().find(|(k, _)| k == "TMPDIR").map(|(_, v)| PathBuf::from(v));
        let tmpdir = tmpdir.unwrap_or_else(|| panic!("under {:?}: {vars:?}", std::env::temp_dir()));
        assert!(tmpdir.is_dir() && !home.starts_with(&tmpdir), "{tmpdir:?}");

        // A pane whose temporary directory is elsewhere keeps it.
        let elsewhere = env(&[("TMPDIR", "/var/tmp/nowhere-near")]);
        let vars = prepare(Setup::Codex, agent.path(), clone, &UserConfig::none(), &elsewhere, ASK, None).unwrap().env;
        assert!(!vars.iter().any(|(k, _)| k == "TMPDIR"), "{vars:?}");
    }

    #[test]
    fn gemini_trusts_the_clone_and_chooses_the_api_key_only_when_the_pane_has_one() {
        let agent = tempfile::tempdir().unwrap();
        let prepared =
            prepare(Setup::Gemini, agent.path(), Path::new("/clones/owl"), &UserConfig::none(), &env(&[]), ASK, None)
                .unwrap();
        assert_eq!(prepared.env[0].0, "GEMINI_CLI_HOME");
        assert!(prepared.args.is_empty());
        let own = agent.path().join("gemini/.gemini");
        assert_eq!(json_at(own.join("trustedFolders.json"))["/clones/owl"], "TRUST_FOLDER");
        assert!(json_at(own.join("settings.json")).pointer("/security/auth/selectedType").is_none());
        prepare(
            Setup::Gemini,
            agent.path(),
            Path::new("/clones/owl"),
            &UserConfig::none(),
            &env(&[("GEMINI_API_KEY", "k")]),
            ASK,
            None,
        )
        .unwrap();
        assert_eq!(json_at(own.join("settings.json"))["security"]["auth"]["selectedType"], "gemini-api-key");
    }

    /// The rules of the agent's Switchyard policy for Gemini CLI under `policy` (each checked
    /// to have a decision and a priority Gemini CLI takes).
    fn gemini_rules(policy: Policy<'_>) -> Vec<toml::Table> {
        let agent = tempfile::tempdir().unwrap();
        prepare(Setup::Gemini, agent.path(), Path::new("/clones/owl"), &UserConfig::none(), &env(&[]), policy, None)
            .unwrap();
        let file = agent.path().join("gemini/.gemini/policies/switchyard.toml");
        let text = std::fs::read_to_string(&file).unwrap();
        let parsed: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let rules: Vec<toml::Table> =
            parsed["rule"].as_array().unwrap().iter().map(|r| r.as_table().unwrap().clone()).collect();
        for rule in &rules {
            assert!(rule["priority"].as_integer().is_some_and(|p| (0..=999).contains(&p)), "{rule:?}");
            assert!(["allow", "deny", "ask_user"].contains(&rule["decision"].as_str().unwrap()), "{rule:?}");
        }
        rules
    }

    fn strings(value: Option<&toml::Value>) -> Vec<String> {
        match value {
            Some(toml::Value::String(s)) => vec![s.clone()],
            Some(toml::Value::Array(items)) => items.iter().map(|i| i.as_str().unwrap().to_owned()).collect(),
            _ => Vec::new(),
        }
    }

    /// The decision of the highest-priority rule naming `tool` (or `*`), for a shell command
    /// `command` when given: a model of Gemini CLI's own matching, enough for these rules.
    fn decides(rules: &[toml::Table], tool: &str, command: Option<&str>) -> Option<String> {
        let mut matching: Vec<&toml::Table> = rules
            .iter()
            .filter(|r| strings(r.get("toolName")).iter().any(|t| t == tool || t == "*"))
            .filter(|r| {
                let prefixes = strings(r.get("commandPrefix"));
                prefixes.is_empty()
                    || command.is_some_and(|c| prefixes.iter().any(|p| c == p || c.starts_with(&format!("{p} "))))
            })
            .collect();
        matching.sort_by_key(|r| -r["priority"].as_integer().unwrap());
        matching.first().map(|r| r["decision"].as_str().unwrap().to_owned())
    }

    #[test]
    fn gemini_allows_what_the_briefs_ask_under_every_policy_and_the_rest_as_the_policy_says() {
        let allow = ["run_shell_command(cargo test)".to_owned(), "web_fetch".to_owned()];
        let ask = gemini_rules(ASK);
        let listed = gemini_rules(Policy { permissions: Permissions::AllowList, allow: &allow });
        let auto = gemini_rules(Policy { permissions: Permissions::Auto, allow: &[] });
        let yes = Some("allow".to_owned());
        for rules in [&ask, &listed, &auto] {
            for (tool, command) in [
                ("write_file", None),
                ("replace", None),
                ("run_shell_command", Some("git commit -qm 'a'")),
                ("run_shell_command", Some("git push origin HEAD")),
                ("run_shell_command", Some("switchyard group done --summary 'x'")),
            ] {
                assert_eq!(decides(rules, tool, command), yes, "{tool} {command:?}: {rules:?}");
            }
        }
        // ask: reading, and the rest asks, above any rule the clone's settings could add.
        let asks = Some("ask_user".to_owned());
        assert_eq!(decides(&ask, "run_shell_command", Some("curl https://example.com")), asks);
        assert_eq!(decides(&ask, "run_shell_command", Some("gitk")), asks, "a prefix is a whole word");
        assert_eq!(decides(&ask, "read_file", None), yes);
        for rules in [&ask, &listed] {
            let rest = rules.iter().find(|r| r["toolName"].as_str() == Some("*")).expect("a rule for the rest");
            assert!(rest["priority"].as_integer().unwrap() > 300, "above what settings allow (4.3): {rest:?}");
        }
        // allow-list: the provider's rules and reading; the rest refused.
        assert_eq!(decides(&listed, "run_shell_command", Some("cargo test --lib")), yes);
        assert_eq!(decides(&listed, "web_fetch", None), yes);
        assert_eq!(decides(&listed, "read_file", None), yes);
        let no = Some("deny".to_owned());
        assert_eq!(decides(&listed, "run_shell_command", Some("curl https://example.com")), no);
        assert_eq!(decides(&listed, "google_web_search", None), no);
        // auto: everything.
        assert_eq!(decides(&auto, "run_shell_command", Some("curl https://example.com")), yes);
        assert_eq!(decides(&auto, "web_fetch", None), yes);
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
