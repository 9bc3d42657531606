//! Codex's configuration for one agent, in its `CODEX_HOME`: the user's `config.toml` with the
//! policy's keys and Switchyard's rules ([`super::codex_policy`]), the user's login, and the
//! clone marked untrusted.
//!
//! **The clone is untrusted**, so that nothing an agent commits there changes what Codex does.
//! In a trusted folder Codex 0.169 loads the project's `.codex/`: its `config.toml` (an
//! `[mcp_servers]` entry is a command Codex starts at once), its hooks and its exec policy
//! (`rules/*.rules`: a committed `prefix_rule(pattern = ["rm"], decision = "allow")` ran
//! `rm -rf` outside Codex's sandbox without asking, in policy `ask`). No key turns that project
//! layer off. An untrusted folder's is loaded disabled (codex-rs `config/src/loader`:
//! `load_project_layers` gives it a disabled reason), and neither its keys nor its rules
//! (`core/src/exec_policy.rs`, `load_exec_policy`: disabled layers skipped) nor its hooks count;
//! the user's layer (this `CODEX_HOME`) does. The mark is given on Codex's command line
//! ([`untrusted`]), the layer above every file, so no `config.toml` the agent can write
//! undoes it.
//!
//! What it costs: every start (a resume too) opens at "Folder access … › 1. Open restricted",
//! which the worker answers with a key press checked on the screen
//! ([`crate::detect::screen::StartChoice`]); and Codex reads no project `AGENTS.md` in a
//! restricted folder, so the clone's is given as the agent's own, `CODEX_HOME/AGENTS.md`
//! ([`super::own_instructions`]). Checked against Codex 0.169 and a scripted model: a committed
//! rule, MCP server and `approval_policy = "never"` had no effect; `git commit` (Switchyard's
//! rule) ran without asking; `rm -rf` asked.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::{codex_policy, copy_if_present, own_instructions, UserConfig, PRIVATE};
use crate::agent_writable::AgentWritable;
use crate::providers::Policy;

/// Writes the agent's Codex configuration in `dir` for an agent working in `clone`; returns the
/// variables its pane needs beside `CODEX_HOME`.
pub(super) fn codex(
    dir: &AgentWritable,
    clone: &Path,
    user: &UserConfig,
    env: &BTreeMap<String, String>,
    policy: Policy<'_>,
) -> std::io::Result<Vec<(String, String)>> {
    let users = user.codex_home.as_deref();
    let config = match dir.read_string("config.toml")? {
        Some(text) => text,
        None => users.and_then(|u| std::fs::read_to_string(u.join("config.toml")).ok()).unwrap_or_default(),
    };
    // Earlier versions marked the clone trusted here; the command line's mark outranks it, and
    // the file should not say otherwise.
    let earlier =
        format!("\n[projects.{}]\ntrust_level = \"trusted\"\n", serde_json::to_string(&clone.to_string_lossy())?);
    let config = codex_policy::config(&config.replace(&earlier, ""), policy.permissions);
    dir.replace("config.toml", config.as_bytes(), PRIVATE)?;
    dir.create_dir("rules", 0o700)?.replace("switchyard.rules", codex_policy::rules(policy).as_bytes(), PRIVATE)?;
    let copied = users.map(|u| copy_if_present(&u.join("auth.json"), dir, "auth.json")).transpose()?.unwrap_or(false);
    if !copied {
        if let Some(key) = env.get("OPENAI_API_KEY").filter(|k| !k.is_empty()) {
            // What `codex login --with-api-key` writes.
            dir.replace("auth.json", json!({"OPENAI_API_KEY": key}).to_string().as_bytes(), PRIVATE)?;
        }
    }
    own_instructions(clone, "AGENTS.md", dir)?;
    codex_tmpdir(dir, env)
}

/// Codex's command-line overrides for an agent in `clone` beside the policy's: the clone
/// [`untrusted`], and no "Approaching rate limits › Switch to …?" menu. That menu, offering a
/// cheaper model near the rate limit, is one no one answers for an unattended agent, and under
/// load it stood where the usage-limit message the worker suspends the agent on would have.
pub(super) fn overrides(clone: &Path) -> Vec<String> {
    let mut args = untrusted(clone);
    args.extend(["-c".to_owned(), "notice.hide_rate_limit_model_nudge=true".to_owned()]);
    args
}

/// `-c projects={…}`: `clone` untrusted, under its path and, when it differs, its canonical
/// path (Codex looks a folder up by both, the canonical one first). The value is a TOML inline
/// table, so a path with dots stays one key (a dotted `-c` key would be split at them).
fn untrusted(clone: &Path) -> Vec<String> {
    let mut keys = vec![clone.to_string_lossy().into_owned()];
    if let Ok(real) = std::fs::canonicalize(clone).map(|p| p.to_string_lossy().into_owned()) {
        if !keys.contains(&real) {
            keys.push(real);
        }
    }
    // A JSON string is a TOML basic string (the same escapes).
    let entries: Vec<String> = keys
        .iter()
        .map(|key| format!("{} = {{ trust_level = \"untrusted\" }}", serde_json::to_string(key).expect("a string")))
        .collect();
    vec!["-c".to_owned(), format!("projects={{ {} }}", entries.join(", "))]
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

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::super::tests::{env, json_at, ASK};
    use super::super::{prepare, UserConfig};
    use crate::providers::Setup;

    #[test]
    fn codex_gets_the_users_settings_the_policy_and_the_panes_api_key_and_the_clone_untrusted() {
        let (agent, user) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(user.path().join("config.toml"), "model = \"o5\"").unwrap();
        let user_config = UserConfig { codex_home: Some(user.path().into()), ..UserConfig::none() };
        let clone = Path::new("/clones/a \"b\".c");
        let start = || {
            prepare(Setup::Codex, agent.path(), clone, &user_config, &env(&[("OPENAI_API_KEY", "sk-x")]), ASK, None)
                .unwrap()
        };
        start();
        // What an earlier version wrote: the clone trusted.
        let path = agent.path().join("codex/config.toml");
        let earlier = std::fs::read_to_string(&path).unwrap()
            + "\n[projects.\"/clones/a \\\"b\\\".c\"]\ntrust_level = \"trusted\"\n";
        std::fs::write(&path, earlier).unwrap();
        let prepared = start();
        let text = std::fs::read_to_string(&path).unwrap();
        let parsed: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(parsed["model"].as_str(), Some("o5"));
        assert!(parsed.get("projects").is_none(), "the file trusts nothing: {text}");
        assert_eq!(json_at(agent.path().join("codex/auth.json"))["OPENAI_API_KEY"], "sk-x");
        // The policy (`ask` here) in Codex's own settings: its approvals, its sandbox, its rules.
        assert_eq!(parsed["approval_policy"].as_str(), Some("on-request"));
        assert_eq!(parsed["sandbox_mode"].as_str(), Some("workspace-write"));
        let rules = std::fs::read_to_string(agent.path().join("codex/rules/switchyard.rules")).unwrap();
        assert!(rules.contains("prefix_rule(pattern = [\"switchyard\"], decision = \"allow\")"), "{rules}");
        // The same keys as overrides on its command line, which a project's config cannot undo,
        // and the clone untrusted there, its path one key however many dots it has.
        let (policy, trust) = prepared.args.split_at(6);
        assert_eq!(
            policy,
            [
                "-c",
                "approval_policy=\"on-request\"",
                "-c",
                "sandbox_mode=\"workspace-write\"",
                "-c",
                "allow_login_shell=false"
            ]
        );
        assert_eq!(trust[0], "-c");
        assert_eq!(trust[2..], ["-c", "notice.hide_rate_limit_model_nudge=true"]);
        let (key, value) = trust[1].split_once('=').unwrap();
        assert_eq!(key, "projects");
        let projects: toml::Table = toml::from_str(&format!("v = {value}")).unwrap();
        assert_eq!(projects["v"]["/clones/a \"b\".c"]["trust_level"].as_str(), Some("untrusted"), "{value}");
        // The user's own login wins over a key in the pane's environment.
        std::fs::write(user.path().join("auth.json"), r#"{"tokens": {}}"#).unwrap();
        start();
        assert!(json_at(agent.path().join("codex/auth.json")).get("tokens").is_some());
    }

    #[test]
    fn the_clone_is_untrusted_under_its_canonical_path_too() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let args = super::untrusted(&link);
        let (_, value) = args[1].split_once('=').unwrap();
        let projects: toml::Table = toml::from_str(&format!("v = {value}")).unwrap();
        for path in [&link, &std::fs::canonicalize(&real).unwrap()] {
            let key = path.to_string_lossy();
            assert_eq!(projects["v"][key.as_ref()]["trust_level"].as_str(), Some("untrusted"), "{value}");
        }
    }

    #[test]
    fn codex_reads_the_clones_agents_md_as_its_own_and_nothing_through_a_link() {
        let (agent, clone, outside) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let start =
            || prepare(Setup::Codex, agent.path(), clone.path(), &UserConfig::none(), &env(&[]), ASK, None).unwrap();
        let own = agent.path().join("codex/AGENTS.md");
        std::fs::write(clone.path().join("AGENTS.md"), "# Working under Switchyard\n").unwrap();
        start();
        assert_eq!(std::fs::read_to_string(&own).unwrap(), "# Working under Switchyard\n");
        // A link the agent committed in its place is not read, and the earlier copy goes.
        std::fs::write(outside.path().join("secret"), "root's").unwrap();
        std::fs::remove_file(clone.path().join("AGENTS.md")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), clone.path().join("AGENTS.md")).unwrap();
        start();
        assert!(!own.exists(), "read through a link: {:?}", std::fs::read_to_string(&own));
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
}
