//! Gemini CLI's configuration for one agent, in its `GEMINI_CLI_HOME`: the clone's trust, the
//! user's settings and login, and Switchyard's policy file ([`gemini_policy`]).
//!
//! **Under `ask` and `allow-list` the clone is untrusted** (`DO_NOT_TRUST`), so that nothing an
//! agent commits there changes what Gemini CLI does. In a trusted folder Gemini CLI 0.61 merges
//! the workspace's `.gemini/settings.json` over the user's, and runs what it names: its `hooks`
//! (commands, on `SessionStart`, `BeforeModel`, …) and its `mcpServers` (commands it starts at
//! once). No setting a user may write outranks the workspace's (only a system settings file
//! does, and Gemini CLI reads one only when it and every directory above it belong to root). In
//! an untrusted folder none of it is read (`cli/src/config/settings.ts`, `mergeSettings`: the
//! workspace counts only when trusted), no project hook runs (`HookRunner.executeHook`) and no
//! configured MCP server starts (`McpClientManager.startConfiguredMcpServers`).
//!
//! What it costs, and why it costs no more: Gemini CLI asks before a git command in an
//! untrusted folder, but only through its shell heuristics, which it skips for a rule with a
//! `commandPrefix` (`PolicyEngine.check`): the briefs' git commands are such rules, so they
//! still run without asking. It reads no project `GEMINI.md` there, so the clone's is given as
//! the agent's own, `GEMINI_CLI_HOME/.gemini/GEMINI.md` ([`super::own_instructions`]).
//! Checked against Gemini CLI 0.61 and a scripted model: a committed hook and MCP server did
//! not run; `git add -A && git commit …` ran without asking.
//!
//! Under `auto` the clone is trusted: the policy's rule that allows everything has no prefix,
//! so in an untrusted folder git would ask, and Gemini CLI turns its YOLO mode off there. The
//! sandbox, which `auto` requires, is the boundary.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::json;

use super::{copy_if_present, own_instructions, own_json, read_json, UserConfig, PRIVATE};
use crate::agent_writable::AgentWritable;
use crate::providers::logins::GEMINI_LOGIN_FILES;
use crate::providers::{Permissions, Policy};

/// Writes the agent's Gemini CLI configuration in `dir` for an agent working in `clone`.
pub(super) fn gemini(
    dir: &AgentWritable,
    clone: &Path,
    user: &UserConfig,
    env: &BTreeMap<String, String>,
    policy: Policy<'_>,
) -> std::io::Result<()> {
    let own = dir.create_dir(".gemini", 0o700)?;
    let users = user.gemini_dir.as_deref();
    let from_user = |name: &str| users.and_then(|u| read_json(&u.join(name)).ok().flatten());
    // The clone alone, rewritten on every start: the longest matching path decides, so an entry
    // the agent left inside its clone (`TRUST_PARENT` on a file in it) would outrank ours.
    let trusted = policy.permissions == Permissions::Auto;
    let level = if trusted { "TRUST_FOLDER" } else { "DO_NOT_TRUST" };
    let folders = json!({ clone.to_string_lossy(): level });
    own.replace("trustedFolders.json", serde_json::to_string_pretty(&folders)?.as_bytes(), PRIVATE)?;
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
    // A trusted clone's GEMINI.md is read from the clone itself.
    if trusted {
        own.remove_file("GEMINI.md")
    } else {
        own_instructions(clone, "GEMINI.md", &own)
    }
}

/// Switchyard's policy file in the agent's Gemini CLI policy directory.
const GEMINI_POLICY_FILE: &str = "switchyard.toml";

/// The shell commands Switchyard's briefs have an agent run (git's everyday verbs and
/// `switchyard` itself), as command prefixes.
const BRIEF_COMMANDS: [&str; 10] = [
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
/// [`BRIEF_COMMANDS`] (a chained command is allowed only when each of its parts is); and its
/// question tool (`ask_user`) asks, above every other rule: a question is the agent's to ask
/// whatever the policy (it is no permission), and "allowed" it would run without showing the
/// question, answered with nothing, and refused it would not even be offered. Then:
/// `ask` allows reading and asks for the rest; `allow-list` allows reading and the provider's
/// `allow` rules and refuses the rest without asking (a refused tool is not even offered to the
/// model); `auto` allows everything, as `--yolo` does (which no settings file can choose: this
/// rule is what that mode adds).
///
/// The rest's rule has priority [`GEMINI_REST_PRIORITY`]: above the rules Gemini CLI makes of
/// settings (`tools.allowed`, `tools.core`, a trusted MCP server's tools; user tier, 4.1 to 4.3),
/// which the clone's `.gemini/settings.json` — written by agents, and read were the clone
/// trusted — could otherwise set to allow anything.
fn gemini_policy(policy: Policy<'_>) -> String {
    let mut text = String::from("# Written by Switchyard on each start of this agent.\n");
    text.push_str(&rule("Edits in the agent's clone", &[("toolName", list(&["write_file", "replace"]))], "allow", 900));
    text.push_str(&rule(
        "What Switchyard's briefs run",
        &[("toolName", string("run_shell_command")), ("commandPrefix", list(&BRIEF_COMMANDS))],
        "allow",
        900,
    ));
    text.push_str(&rule("A question to a person", &[("toolName", string("ask_user"))], "ask_user", 999));
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
                998,
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::super::tests::{env, json_at, ASK};
    use super::super::{prepare, UserConfig};
    use crate::providers::{Permissions, Policy, Setup};

    #[test]
    fn gemini_distrusts_the_clone_unless_in_auto_and_chooses_the_api_key_only_when_the_pane_has_one() {
        let agent = tempfile::tempdir().unwrap();
        let prepared =
            prepare(Setup::Gemini, agent.path(), Path::new("/clones/owl"), &UserConfig::none(), &env(&[]), ASK, None)
                .unwrap();
        assert_eq!(prepared.env[0].0, "GEMINI_CLI_HOME");
        assert!(prepared.args.is_empty());
        let own = agent.path().join("gemini/.gemini");
        assert_eq!(json_at(own.join("trustedFolders.json")), json!({"/clones/owl": "DO_NOT_TRUST"}));
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
    fn gemini_asks_the_agents_questions_under_every_policy() {
        let allow = ["web_fetch".to_owned()];
        for policy in [
            ASK,
            Policy { permissions: Permissions::AllowList, allow: &allow },
            Policy { permissions: Permissions::Auto, allow: &[] },
        ] {
            let rules = gemini_rules(policy);
            assert_eq!(decides(&rules, "ask_user", None), Some("ask_user".to_owned()), "{policy:?}: {rules:?}");
        }
    }

    #[test]
    fn in_auto_the_clone_is_trusted_and_its_gemini_md_read_from_it() {
        let (agent, clone) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(clone.path().join("GEMINI.md"), "# Working under Switchyard\n").unwrap();
        let start =
            |policy| prepare(Setup::Gemini, agent.path(), clone.path(), &UserConfig::none(), &env(&[]), policy, None);
        let own = agent.path().join("gemini/.gemini");
        start(ASK).unwrap();
        assert_eq!(std::fs::read_to_string(own.join("GEMINI.md")).unwrap(), "# Working under Switchyard\n");
        start(Policy { permissions: Permissions::Auto, allow: &[] }).unwrap();
        let key = clone.path().to_string_lossy().into_owned();
        assert_eq!(json_at(own.join("trustedFolders.json")), json!({ key: "TRUST_FOLDER" }));
        assert!(!own.join("GEMINI.md").exists(), "read twice: from the clone and as its own");
    }
}
