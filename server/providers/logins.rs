//! Whether a built-in agent CLI has what it needs to reach its model: an API key in its
//! provider's `env`, or a login of the user's own that [`crate::worker::provider_setup`] gives
//! each agent. "Available" on the overview and in `GET /api/v1/providers` means installed and
//! this; otherwise the provider is "installed, not configured" with what is missing.
//!
//! The check is a few file lookups, no process and no network: a key or login that is there
//! but wrong still shows on the agent's screen (the screen rules' `fatal`).
//!
//! | setup | configured when |
//! | --- | --- |
//! | `claude` | `env` gives `ANTHROPIC_API_KEY`, or `~/.claude/.credentials.json` exists, or `~/.claude.json` holds `oauthAccount` or `primaryApiKey` |
//! | `codex` | `env` gives `OPENAI_API_KEY`, or `~/.codex/auth.json` exists |
//! | `gemini` | `env` gives `GEMINI_API_KEY`, or `~/.gemini` holds a login file ([`GEMINI_LOGIN_FILES`]) |
//!
//! A provider whose `env` names its own configuration directory (`CLAUDE_CONFIG_DIR`,
//! `CODEX_HOME`, `GEMINI_CLI_HOME`) is the user's to manage, and a provider with no setup
//! (`shell`, one of the user's own) has nothing Switchyard could check: both count as configured.

use std::path::{Path, PathBuf};

use super::{Provider, Setup};

/// The user's Gemini CLI files that hold their login.
pub const GEMINI_LOGIN_FILES: [&str; 3] = ["oauth_creds.json", "google_accounts.json", "gemini-credentials.json"];

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

/// What a provider still needs before its agents can reach their model, as a sentence's end
/// ("ANTHROPIC_API_KEY in its env, or a Claude Code login"); `None`: nothing Switchyard can tell.
pub fn missing(provider: &Provider, user: &UserConfig) -> Option<String> {
    let (key, own_dir, login) = match provider.setup {
        Setup::None => return None,
        Setup::Claude => ("ANTHROPIC_API_KEY", "CLAUDE_CONFIG_DIR", "a Claude Code login (`claude` then /login)"),
        Setup::Codex => ("OPENAI_API_KEY", "CODEX_HOME", "a Codex login (`codex login`)"),
        Setup::Gemini => ("GEMINI_API_KEY", "GEMINI_CLI_HOME", "a Gemini CLI login (`gemini`, sign in with Google)"),
    };
    let given = |name: &str| provider.env.get(name).is_some_and(|v| !v.trim().is_empty());
    if given(key) || given(own_dir) || logged_in(provider.setup, user) {
        return None;
    }
    Some(format!("{key} in its env in providers.toml, or {login}"))
}

/// Whether the user's own configuration holds a login for `setup`'s CLI.
fn logged_in(setup: Setup, user: &UserConfig) -> bool {
    let exists = |path: Option<PathBuf>| path.is_some_and(|p| p.is_file());
    match setup {
        Setup::None => true,
        Setup::Claude => {
            let account = user
                .claude_json
                .as_ref()
                .and_then(|path| std::fs::read_to_string(path).ok())
                .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
                .is_some_and(|json| ["oauthAccount", "primaryApiKey"].iter().any(|f| !json[f].is_null()));
            account || exists(user.claude_dir.as_ref().map(|d| d.join(".credentials.json")))
        }
        Setup::Codex => exists(user.codex_home.as_ref().map(|d| d.join("auth.json"))),
        Setup::Gemini => {
            let dir = user.gemini_dir.as_ref();
            GEMINI_LOGIN_FILES.iter().any(|name| exists(dir.map(|d| d.join(name))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::Providers;

    #[test]
    fn a_builtin_cli_is_configured_by_a_key_in_its_env_or_the_users_login() {
        let home = tempfile::tempdir().unwrap();
        let user = UserConfig::under(home.path());
        let builtin = Providers::builtin();
        for name in ["claude", "codex", "gemini"] {
            let why = missing(builtin.get(name).unwrap(), &user).expect("nothing configured");
            assert!(why.contains("_API_KEY in its env"), "{why}");
        }
        assert_eq!(missing(builtin.get("shell").unwrap(), &user), None);
        let keyed = Providers::parse(
            "[providers.claude]\nenv = { ANTHROPIC_API_KEY = \"sk-ant-x\" }\n[providers.codex]\nenv = { OPENAI_API_KEY = \"sk-x\" }\n",
        )
        .unwrap();
        assert_eq!(missing(keyed.get("claude").unwrap(), &user), None);
        assert_eq!(missing(keyed.get("codex").unwrap(), &user), None);
        std::fs::create_dir_all(home.path().join(".gemini")).unwrap();
        std::fs::write(home.path().join(".gemini/oauth_creds.json"), "{}").unwrap();
        assert_eq!(missing(builtin.get("gemini").unwrap(), &user), None);
        std::fs::write(home.path().join(".claude.json"), r#"{"oauthAccount": {"emailAddress": "a@b.c"}}"#).unwrap();
        assert_eq!(missing(builtin.get("claude").unwrap(), &user), None);
        assert!(missing(builtin.get("codex").unwrap(), &user).is_some());
    }
}
