//! Codex's permission policy ([`crate::domain::permissions`]) in its own settings: the keys
//! Switchyard owns at the top of the agent's `config.toml`, and a rules file
//! (`$CODEX_HOME/rules/switchyard.rules`, Codex's exec policy: Starlark `prefix_rule`s).
//!
//! What Switchyard's briefs ask needs no person in any policy: edits in the clone are
//! `apply_patch`es inside Codex's workspace, which it applies without asking (`workspace-write`);
//! `git add/commit/fetch/merge/push/status/diff/log` and `switchyard` are allowed by rule, and a
//! command every part of which a rule allows runs outside Codex's own sandbox (git writes `.git`
//! and reaches remotes, `switchyard` its server).
//!
//! | policy | `config.toml` | anything else |
//! | --- | --- | --- |
//! | `ask` | `approval_policy = "on-request"`, `sandbox_mode = "workspace-write"` | the provider's `allow` rules run as the brief's do; the rest inside Codex's sandbox (writes only in the clone, no network), and a command that must leave it, or that Codex finds dangerous, asks a person |
//! | `allow-list` | `approval_policy = { granular = { … every approval false } }`, `sandbox_mode = "workspace-write"` | the provider's `allow` rules run outside the sandbox; the rest inside it, and what would ask is refused without asking |
//! | `auto` | `approval_policy = "never"`, `sandbox_mode = "danger-full-access"` | everything, unconfined by Codex (Switchyard's sandbox is the boundary) |
//!
//! Codex 0.169 has no policy that asks before every other command (`approval_policy =
//! "untrusted"` is refused as no longer supported): its own sandbox is what `ask` and
//! `allow-list` hold the rest to.
//!
//! The same keys are also given on Codex's command line (`-c key=value`, [`overrides`]), the
//! layer above every file: the clone's `.codex/config.toml` is disabled (the clone is untrusted,
//! [`super::codex`]), and the command line would outrank it all the same.
//!
//! Every policy also sets `allow_login_shell = false`: a login shell reads `/etc/profile`, which
//! resets `PATH`, and the agent would lose the `switchyard` Switchyard put on it.
//!
//! An `allow` rule is Codex's own `prefix_rule(…)` line, taken as it is, or a command prefix
//! (`cargo test`), made into one. One rule Codex cannot parse makes it drop every rules file
//! (it says so on its screen): the brief's git and `switchyard` would then run sandboxed.

use crate::providers::{Permissions, Policy};

/// The top-level keys Switchyard owns in the agent's `config.toml`.
const OWNED_KEYS: [&str; 3] = ["approval_policy", "sandbox_mode", "allow_login_shell"];

/// The line that heads Switchyard's keys in `config.toml`.
const HEADING: &str = "# Switchyard's permission policy for this agent (rewritten at each start)";

/// The git subcommands Switchyard's briefs run.
const GIT: [&str; 8] = ["add", "commit", "fetch", "merge", "push", "status", "diff", "log"];

/// Switchyard's keys for `permissions`, as `(key, TOML value)`.
fn keys(permissions: Permissions) -> [(&'static str, &'static str); 3] {
    let (approval, sandbox) = match permissions {
        Permissions::Ask => ("\"on-request\"", "\"workspace-write\""),
        Permissions::AllowList => (
            "{ granular = { sandbox_approval = false, rules = false, skill_approval = false, \
             request_permissions = false, mcp_elicitations = false } }",
            "\"workspace-write\"",
        ),
        Permissions::Auto => ("\"never\"", "\"danger-full-access\""),
    };
    [("approval_policy", approval), ("sandbox_mode", sandbox), ("allow_login_shell", "false")]
}

/// Switchyard's keys for `permissions` as Codex's `-c key=value` arguments: the session's own
/// layer, above the clone's `.codex/config.toml` (a project layer an agent can write, read were
/// the clone trusted), so no project can choose another policy.
pub(super) fn overrides(permissions: Permissions) -> Vec<String> {
    keys(permissions).iter().flat_map(|(key, value)| ["-c".to_owned(), format!("{key}={value}")]).collect()
}

/// `config` (the agent's `config.toml`) with Switchyard's keys for `permissions` at its top, in
/// place of any the user or an earlier start set there.
pub(super) fn config(config: &str, permissions: Permissions) -> String {
    let mut owned = format!("{HEADING}\n");
    for (key, value) in keys(permissions) {
        owned.push_str(&format!("{key} = {value}\n"));
    }
    owned.push('\n');
    // Keys before the first table are the top level's; later ones belong to tables.
    let mut rest = String::new();
    let mut top_level = true;
    for line in config.lines() {
        let trimmed = line.trim_start();
        top_level &= !trimmed.starts_with('[');
        let ours = trimmed == HEADING
            || (top_level
                && OWNED_KEYS
                    .iter()
                    .any(|key| trimmed.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with('='))));
        if !ours {
            rest.push_str(line);
            rest.push('\n');
        }
    }
    // The blank line that parted an earlier start's keys from the rest goes with them.
    owned.push_str(rest.trim_start_matches('\n'));
    owned
}

/// The rules file: the brief's commands allowed, then (except under `auto`, where nothing asks)
/// the provider's `allow` rules.
pub(super) fn rules(policy: Policy<'_>) -> String {
    let quoted = |words: &[&str]| serde_json::to_string(words).expect("strings");
    let mut rules = String::from("# Written by Switchyard at each start: what its briefs ask runs without a person.\n");
    rules.push_str(&format!("prefix_rule(pattern = [\"git\", {}], decision = \"allow\")\n", quoted(&GIT)));
    rules.push_str("prefix_rule(pattern = [\"switchyard\"], decision = \"allow\")\n");
    if policy.permissions != Permissions::Auto && !policy.allow.is_empty() {
        rules.push_str("# The provider's `allow` rules.\n");
        for rule in policy.allow {
            rules.push_str(&allow_rule(rule));
            rules.push('\n');
        }
    }
    rules
}

/// A provider's `allow` rule as a `prefix_rule` line.
fn allow_rule(rule: &str) -> String {
    let rule = rule.trim();
    if rule.starts_with("prefix_rule(") && rule.ends_with(')') {
        return rule.to_owned();
    }
    let words: Vec<&str> = rule.split_whitespace().collect();
    format!("prefix_rule(pattern = {}, decision = \"allow\")", serde_json::to_string(&words).expect("strings"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> toml::Table {
        toml::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    #[test]
    fn each_policy_sets_codexs_approvals_and_sandbox_in_place_of_the_users() {
        let users = "model = \"o5\"\napproval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n\n\
                     [projects.\"/c\"]\ntrust_level = \"trusted\"\n[tui]\nsandbox_mode = \"kept: a table's own\"\n";
        let ask = parsed(&config(users, Permissions::Ask));
        assert_eq!(ask["approval_policy"].as_str(), Some("on-request"));
        assert_eq!(ask["sandbox_mode"].as_str(), Some("workspace-write"));
        assert_eq!(ask["allow_login_shell"].as_bool(), Some(false));
        assert_eq!(ask["model"].as_str(), Some("o5"));
        assert_eq!(ask["projects"]["/c"]["trust_level"].as_str(), Some("trusted"));
        assert_eq!(ask["tui"]["sandbox_mode"].as_str(), Some("kept: a table's own"));

        let allow_list = parsed(&config(users, Permissions::AllowList));
        let granular = &allow_list["approval_policy"]["granular"];
        for key in ["sandbox_approval", "rules", "skill_approval", "request_permissions", "mcp_elicitations"] {
            assert_eq!(granular[key].as_bool(), Some(false), "{key}");
        }
        assert_eq!(allow_list["sandbox_mode"].as_str(), Some("workspace-write"));

        let auto = parsed(&config(users, Permissions::Auto));
        assert_eq!(auto["approval_policy"].as_str(), Some("never"));
        assert_eq!(auto["sandbox_mode"].as_str(), Some("danger-full-access"));
    }

    #[test]
    fn a_restart_rewrites_the_policy_once_whatever_it_was() {
        let first = config("model = \"o5\"\n", Permissions::Auto);
        let again = config(&first, Permissions::Ask);
        assert_eq!(again, config("model = \"o5\"\n", Permissions::Ask));
        assert_eq!(again.matches(HEADING).count(), 1);
    }

    #[test]
    fn the_briefs_commands_are_allowed_and_the_providers_rules_added_except_under_auto() {
        let allow = ["cargo test".to_owned(), "prefix_rule(pattern = [\"make\"], decision = \"allow\")".to_owned()];
        let ask = rules(Policy { permissions: Permissions::Ask, allow: &allow });
        assert!(ask.contains(
            "prefix_rule(pattern = [\"git\", [\"add\",\"commit\",\"fetch\",\"merge\",\"push\",\"status\",\"diff\",\"log\"]], decision = \"allow\")"
        ), "{ask}");
        assert!(ask.contains("prefix_rule(pattern = [\"switchyard\"], decision = \"allow\")"), "{ask}");
        assert!(ask.contains("prefix_rule(pattern = [\"cargo\",\"test\"], decision = \"allow\")"), "{ask}");
        assert!(ask.contains("\nprefix_rule(pattern = [\"make\"], decision = \"allow\")\n"), "{ask}");
        let auto = rules(Policy { permissions: Permissions::Auto, allow: &allow });
        assert!(!auto.contains("cargo") && auto.contains("switchyard"), "{auto}");
    }
}
