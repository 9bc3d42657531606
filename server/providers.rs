//! Providers: what command runs an agent (Claude Code, Codex, Gemini CLI, a shell, or anything
//! else), with which environment, which screen rules read it, and how it is resumed.
//!
//! Built-in defaults are merged with `<data_dir>/providers.toml`: a table for a built-in name
//! changes only the fields it gives; a new name adds a provider (it must give `command`). The
//! file is read again when it changes ([`live`]).
//!
//! ```toml
//! [providers.aider]
//! command = ["aider", "--model", "sonnet", "--chat-history-file", "{clone}/.aider.history"]
//! env = { AIDER_DARK_MODE = "true" }
//! screen_rules = "generic"   # or "claude", "codex", "gemini" ("shell" is another name for "generic")
//! setup = "none"        # or "claude", "codex", "gemini": prepare that CLI's own configuration
//! sandbox = "bwrap"     # or "none": see [`sandbox`] (`claude`, `codex`, `gemini`: bwrap where installed)
//! network = "none"      # under bwrap: no network at all ("host", the default: the machine's)
//! sandbox_paths = ["/opt/models"]   # more to show read-only under bwrap
//! nice = 10             # the agents' CPU niceness, 0 (as Switchyard) to 19 (the default)
//! permissions = "allow-list"   # or "ask", "auto": see [`crate::domain::permissions`] (default: `auto` under bwrap, else `ask`)
//! allow = ["Bash(cargo test:*)"]   # with "allow-list": more the CLI may do, in its own rule syntax
//! ```
//!
//! The same file sets what models cost, in USD per million tokens, by model id prefix (the
//! longest matching prefix wins); a table replaces a built-in price
//! ([`crate::domain::cost::BUILTIN`]: Anthropic's list prices) or adds one. A model no prefix
//! matches has no cost shown, only its tokens.
//!
//! ```toml
//! [prices."claude-sonnet-4-5"]
//! input = 3.0
//! output = 15.0
//! cache_write = 3.75
//! cache_read = 0.30
//! ```
//!
//! Commands are argument lists, never shell text: each placeholder (`{session_id}`, `{name}`,
//! `{clone}`) is substituted inside one argument, so a value can never split into more.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::detect::screen::ScreenRules;
use crate::domain::cost::{Price, PriceList};
use crate::programs::{find_program, on_own_path};

pub mod confinement;
pub mod live;
pub mod logins;
pub mod sandbox;

pub use crate::domain::permissions::{self, Permissions, Policy};
pub use live::LiveProviders;
pub use sandbox::{Network, Sandbox};

/// The file in the data directory that configures providers and prices.
pub const CONFIG_FILE: &str = "providers.toml";

/// The placeholders a command may use.
pub const PLACEHOLDERS: [&str; 3] = ["session_id", "name", "clone"];

/// One provider, ready to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provider {
    pub name: String,
    /// The program and its arguments, with placeholders.
    pub command: Vec<String>,
    /// How to continue a suspended agent's session; `None`: start `command` afresh.
    pub resume: Option<Vec<String>>,
    /// Extra environment for the agent's pane.
    pub env: BTreeMap<String, String>,
    /// Which screen rules read this provider's screen: parsed once, from the config, so the
    /// worker's detector and the API's explanation read a pane alike.
    pub screen_rules: ScreenRules,
    /// Install Claude Code's hooks (`switchyard hook`): in the agent's own settings under
    /// `setup = "claude"`, else in its clone's `.claude/settings.local.json`.
    pub install_hooks: bool,
    /// Whose configuration to prepare for each agent so it starts without a person
    /// (`crate::worker::provider_setup`).
    pub setup: Setup,
    /// How much of the machine its agents see ([`sandbox`]).
    pub sandbox: Sandbox,
    /// Under a sandbox: the machine's network, or none.
    pub network: Network,
    /// Under a sandbox: more paths to show read-only.
    pub sandbox_paths: Vec<PathBuf>,
    /// The CPU niceness its agents' programs run at (0–19; [`AGENT_NICE`] unless set): agents
    /// busy compiling never starve the control plane that watches them and serves the dashboard.
    pub nice: u8,
    /// The permission policy chosen in the config; `None`: [`Provider::permissions`]'s default.
    pub chosen_permissions: Option<Permissions>,
    /// More the CLI may do without asking, in its own rule syntax (for `allow-list`).
    pub allow: Vec<String>,
}

/// The niceness of agents' programs unless their provider says otherwise: they are the machine's
/// background work; Switchyard, its database and tmux are what a person waits on. The lowest:
/// where each agent's session has a CPU share of its own (autogroups), a session at 10 weighs a
/// ninth of Switchyard's, so ten busy agents outweighed it; at 19 it weighs a sixty-eighth (the
/// README's "Agents are the machine's background work" has the load bench's figures). An agent
/// still gets every cycle nothing else wants.
pub const AGENT_NICE: u8 = 19;

/// Which provider's own configuration an agent gets (`setup = "claude"` in the config file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Setup {
    #[default]
    None,
    Claude,
    Codex,
    Gemini,
}

/// The values substituted into a command for one agent.
#[derive(Debug, Clone, Copy)]
pub struct Placeholders<'a> {
    pub session_id: &'a str,
    pub name: &'a str,
    pub clone: &'a str,
}

impl Provider {
    /// Its permission policy: the one chosen, else `auto` under the sandbox and `ask` outside it.
    pub fn permissions(&self) -> Permissions {
        self.chosen_permissions.unwrap_or(match self.sandbox {
            Sandbox::Bwrap => Permissions::Auto,
            Sandbox::None => Permissions::Ask,
        })
    }

    /// The policy an agent of this provider runs with where its project chose `project`'s: that
    /// one, except `auto` outside the sandbox (the providers file may have changed since the
    /// project chose it), which is `ask`.
    pub fn policy(&self, project: Option<Permissions>) -> Policy<'_> {
        let mut permissions = project.unwrap_or_else(|| self.permissions());
        if permissions == Permissions::Auto && self.sandbox == Sandbox::None {
            permissions = Permissions::Ask;
        }
        Policy { permissions, allow: &self.allow }
    }

    /// The argv to start the agent.
    pub fn command(&self, values: &Placeholders) -> Vec<String> {
        substitute(&self.command, values)
    }

    /// `argv` run at the provider's niceness: `nice` replaces itself with the program (`exec`),
    /// so the pane's process is still the agent's.
    /// `nice` is found on Switchyard's own `PATH`, not the provider's, which need not have it.
    pub fn niced(&self, argv: Vec<String>) -> Vec<String> {
        if self.nice == 0 {
            return argv;
        }
        let nice = on_own_path("nice").display().to_string();
        [nice, "-n".to_owned(), self.nice.to_string(), "--".to_owned()].into_iter().chain(argv).collect()
    }

    /// The argv to resume the agent's provider session (or start afresh when there is no way to).
    pub fn resume_command(&self, values: &Placeholders) -> Vec<String> {
        substitute(self.resume.as_ref().unwrap_or(&self.command), values)
    }

    /// The program a pane of this provider runs when it has no screen rules (`bash`, a script):
    /// another process group holding the pane's terminal (a command it gave the foreground to)
    /// means the agent is busy however still its screen is ([`crate::tmux::foreground`]). `None`
    /// for providers with screen rules (their program in the foreground is the agent itself).
    pub fn shell(&self) -> Option<String> {
        if self.screen_rules != ScreenRules::Generic {
            return None;
        }
        let program = Path::new(self.command.first()?).file_name()?;
        Some(program.to_string_lossy().into_owned())
    }

    /// The `PATH` an agent's pane searches: the provider's own `env.PATH`, else the one tmux
    /// passes on from this process.
    pub fn search_path(&self) -> String {
        self.env.get("PATH").cloned().or_else(|| std::env::var("PATH").ok()).unwrap_or_default()
    }

    /// Whether this node can start the provider's program, as the spawner checks before it opens
    /// a pane: some stat calls, no process. `None` for a program named relative to the agent's
    /// clone (`./run.sh`), which only a spawn there can tell.
    pub fn program_found(&self) -> Option<bool> {
        let program = self.command.first()?;
        if program.contains('/') && !Path::new(program).is_absolute() {
            return None;
        }
        Some(find_program(program, &self.search_path(), Path::new("/")).is_some())
    }

    /// The environment of an agent's pane: the provider's `env`, then what `switchyard hook`
    /// needs (`SWITCHYARD_URL`, `SWITCHYARD_AGENT`, `SWITCHYARD_TOKEN_FILE`), which a config
    /// cannot override. The token itself is never in the environment given to tmux: that travels
    /// as command-line arguments, which any local user can read in /proc.
    pub fn pane_env(&self, api_url: &str, agent_name: &str, token_file: &str) -> Vec<(String, String)> {
        let ours =
            [("SWITCHYARD_URL", api_url), ("SWITCHYARD_AGENT", agent_name), ("SWITCHYARD_TOKEN_FILE", token_file)];
        self.env
            .iter()
            .filter(|(key, _)| !ours.iter().any(|(k, _)| k == key))
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(ours.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())))
            .collect()
    }
}

/// One pass over each argument, so a value that happens to contain `{name}` is not substituted again.
fn substitute(args: &[String], values: &Placeholders) -> Vec<String> {
    args.iter()
        .map(|arg| {
            let mut out = String::with_capacity(arg.len());
            let mut rest = arg.as_str();
            'scan: while let Some(start) = rest.find('{') {
                out.push_str(&rest[..start]);
                let tail = &rest[start..];
                for (key, value) in
                    [("{session_id}", values.session_id), ("{name}", values.name), ("{clone}", values.clone)]
                {
                    if let Some(after) = tail.strip_prefix(key) {
                        out.push_str(value);
                        rest = after;
                        continue 'scan;
                    }
                }
                out.push('{');
                rest = &tail[1..];
            }
            out.push_str(rest);
            out
        })
        .collect()
}

/// A providers config that cannot be used, naming the provider (and the file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("providers config: {}{message}", .provider.as_ref().map(|p| format!("provider `{p}`: ")).unwrap_or_default())]
pub struct ProviderConfigError {
    pub provider: Option<String>,
    pub message: String,
}

fn error(provider: &str, message: impl Into<String>) -> ProviderConfigError {
    ProviderConfigError { provider: Some(provider.to_owned()), message: message.into() }
}

/// Every provider by name, and the prices of the models they run.
#[derive(Debug, Clone, PartialEq)]
pub struct Providers {
    by_name: BTreeMap<String, Provider>,
    prices: PriceList,
}

/// A provider table as written in the file: every field optional, merged over the built-in one.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderEntry {
    command: Option<Vec<String>>,
    resume: Option<Vec<String>>,
    env: Option<BTreeMap<String, String>>,
    screen_rules: Option<String>,
    install_hooks: Option<bool>,
    setup: Option<Setup>,
    sandbox: Option<Sandbox>,
    network: Option<Network>,
    sandbox_paths: Option<Vec<PathBuf>>,
    nice: Option<u8>,
    permissions: Option<Permissions>,
    allow: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    providers: BTreeMap<String, ProviderEntry>,
    /// USD per million tokens by model id prefix (`crate::domain::cost`).
    #[serde(default)]
    prices: BTreeMap<String, Price>,
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

impl Providers {
    /// The built-in providers: `claude`, `codex`, `gemini` and `shell`; the three agent CLIs
    /// sandboxed wherever bubblewrap is installed ([`sandbox::bubblewrap_installed`]).
    pub fn builtin() -> Providers {
        Providers::builtin_with(sandbox::bubblewrap_installed())
    }

    /// The built-ins on a node with bubblewrap (`bubblewrap`) or without: the agent CLIs run
    /// under it, with the machine's network (their model is on it); `shell` runs as it is.
    pub fn builtin_with(bubblewrap: bool) -> Providers {
        let confined = if bubblewrap { Sandbox::Bwrap } else { Sandbox::None };
        let shell = std::env::var("SHELL").ok().filter(|s| !s.is_empty()).unwrap_or_else(|| "bash".to_owned());
        let list = [
            Provider {
                name: "claude".into(),
                command: args(&["claude", "--session-id", "{session_id}"]),
                resume: Some(args(&["claude", "--resume", "{session_id}"])),
                env: BTreeMap::new(),
                screen_rules: ScreenRules::ClaudeCode,
                install_hooks: true,
                setup: Setup::Claude,
                sandbox: confined,
                network: Network::Host,
                sandbox_paths: Vec::new(),
                nice: AGENT_NICE,
                chosen_permissions: None,
                allow: Vec::new(),
            },
            Provider {
                name: "codex".into(),
                command: args(&["codex"]),
                // Codex picks its own session ids; its most recent session in the clone is ours.
                resume: Some(args(&["codex", "resume", "--last"])),
                env: BTreeMap::new(),
                screen_rules: ScreenRules::Codex,
                install_hooks: false,
                setup: Setup::Codex,
                sandbox: confined,
                network: Network::Host,
                sandbox_paths: Vec::new(),
                nice: AGENT_NICE,
                chosen_permissions: None,
                allow: Vec::new(),
            },
            Provider {
                name: "gemini".into(),
                command: args(&["gemini"]),
                resume: Some(args(&["gemini", "--resume", "latest"])),
                env: BTreeMap::new(),
                screen_rules: ScreenRules::Gemini,
                install_hooks: false,
                setup: Setup::Gemini,
                sandbox: confined,
                network: Network::Host,
                sandbox_paths: Vec::new(),
                nice: AGENT_NICE,
                chosen_permissions: None,
                allow: Vec::new(),
            },
            Provider {
                name: "shell".into(),
                command: vec![shell],
                resume: None,
                env: BTreeMap::new(),
                screen_rules: ScreenRules::Generic,
                install_hooks: false,
                setup: Setup::None,
                sandbox: Sandbox::None,
                network: Network::Host,
                sandbox_paths: Vec::new(),
                nice: AGENT_NICE,
                chosen_permissions: None,
                allow: Vec::new(),
            },
        ];
        Providers { by_name: list.into_iter().map(|p| (p.name.clone(), p)).collect(), prices: PriceList::default() }
    }

    /// The built-ins merged with `<data_dir>/providers.toml` when it exists.
    pub fn load(data_dir: &Path) -> Result<Providers, ProviderConfigError> {
        let path = data_dir.join(CONFIG_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => Providers::parse(&text).map_err(|mut e| {
                e.message = format!("{} ({})", e.message, path.display());
                e
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Providers::builtin()),
            Err(e) => Err(ProviderConfigError { provider: None, message: format!("reading {}: {e}", path.display()) }),
        }
    }

    /// The built-ins merged with a config file's text.
    pub fn parse(text: &str) -> Result<Providers, ProviderConfigError> {
        let file: ConfigFile =
            toml::from_str(text).map_err(|e| ProviderConfigError { provider: None, message: e.to_string() })?;
        let mut providers = Providers::builtin();
        for (name, entry) in file.providers {
            let provider = match providers.by_name.remove(&name) {
                Some(builtin) => merge(builtin, entry).map_err(|message| error(&name, message))?,
                None => {
                    let command = entry.command.clone().ok_or_else(|| error(&name, "`command` is required"))?;
                    let base = Provider {
                        name: name.clone(),
                        command,
                        resume: None,
                        env: BTreeMap::new(),
                        screen_rules: ScreenRules::Generic,
                        install_hooks: false,
                        setup: Setup::None,
                        sandbox: Sandbox::None,
                        network: Network::Host,
                        sandbox_paths: Vec::new(),
                        nice: AGENT_NICE,
                        chosen_permissions: None,
                        allow: Vec::new(),
                    };
                    merge(base, entry).map_err(|message| error(&name, message))?
                }
            };
            validate(&provider)?;
            providers.by_name.insert(name, provider);
        }
        for (prefix, price) in file.prices {
            if prefix.is_empty() || !price.is_valid() {
                let message = format!("price `{prefix}`: name a model prefix and give amounts of 0 or more");
                return Err(ProviderConfigError { provider: None, message });
            }
            providers.prices.set(prefix, price);
        }
        Ok(providers)
    }

    /// The prices of models: the built-ins with the file's `[prices]` over them.
    pub fn prices(&self) -> &PriceList {
        &self.prices
    }

    pub fn get(&self, name: &str) -> Option<&Provider> {
        self.by_name.get(name)
    }

    /// Every provider's name, sorted.
    pub fn names(&self) -> Vec<&str> {
        self.by_name.keys().map(String::as_str).collect()
    }

    /// Whether work of an agent of provider `own` (a wish's, a task's) may go to an agent of
    /// provider `wanted`: it is configured and [`confinement::at_least_as_confined`] as `own`.
    /// Why not, as a sentence.
    pub fn may_hand_to(&self, own: &str, wanted: &str) -> Result<(), String> {
        let Some(candidate) = self.get(wanted) else {
            return Err(format!("unknown provider `{wanted}`; known: {}", self.names().join(", ")));
        };
        let Some(own) = self.get(own) else {
            return Err(format!("the provider `{own}` it would run beside is not configured here"));
        };
        confinement::at_least_as_confined(candidate, own)
    }
}

fn merge(mut base: Provider, entry: ProviderEntry) -> Result<Provider, String> {
    if let Some(command) = entry.command {
        base.command = command;
    }
    if let Some(resume) = entry.resume {
        base.resume = Some(resume);
    }
    if let Some(env) = entry.env {
        base.env.extend(env);
    }
    if let Some(rules) = entry.screen_rules {
        base.screen_rules = rules.parse().map_err(|e| format!("`screen_rules`: {e}"))?;
    }
    if let Some(install) = entry.install_hooks {
        base.install_hooks = install;
    }
    if let Some(setup) = entry.setup {
        base.setup = setup;
    }
    if let Some(sandbox) = entry.sandbox {
        base.sandbox = sandbox;
    }
    if let Some(network) = entry.network {
        base.network = network;
    }
    if let Some(paths) = entry.sandbox_paths {
        base.sandbox_paths = paths;
    }
    if let Some(nice) = entry.nice {
        base.nice = nice;
    }
    if let Some(permissions) = entry.permissions {
        base.chosen_permissions = Some(permissions);
    }
    if let Some(allow) = entry.allow {
        base.allow = allow;
    }
    Ok(base)
}

fn validate(p: &Provider) -> Result<(), ProviderConfigError> {
    if !crate::domain::project::is_valid_slug(&p.name) {
        return Err(error(&p.name, "a provider's name must be lowercase letters, digits and dashes"));
    }
    if p.command.first().is_none_or(|program| program.trim().is_empty()) {
        return Err(error(&p.name, "`command` must name a program"));
    }
    for (field, list) in [("command", Some(&p.command)), ("resume", p.resume.as_ref())] {
        let Some(list) = list else { continue };
        if field == "resume" && list.first().is_none_or(|program| program.trim().is_empty()) {
            return Err(error(&p.name, "`resume` must name a program"));
        }
        for arg in list {
            if let Some(unknown) = unknown_placeholder(arg) {
                return Err(error(
                    &p.name,
                    format!(
                        "unknown placeholder {{{unknown}}} in `{field}`; known: {{session_id}}, {{name}}, {{clone}}"
                    ),
                ));
            }
        }
    }
    for key in p.env.keys() {
        let valid = key.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(error(&p.name, format!("`env` key {key:?} is not an environment variable name")));
        }
    }
    if let Some(relative) = p.sandbox_paths.iter().find(|path| !path.is_absolute()) {
        return Err(error(&p.name, format!("`sandbox_paths` must be absolute paths, not {relative:?}")));
    }
    if p.nice > 19 {
        return Err(error(&p.name, format!("`nice` must be 0 to 19, not {}", p.nice)));
    }
    if p.sandbox == Sandbox::None && (p.network != Network::Host || !p.sandbox_paths.is_empty()) {
        return Err(error(&p.name, "`network` and `sandbox_paths` need `sandbox = \"bwrap\"`"));
    }
    if p.chosen_permissions == Some(Permissions::Auto) && p.sandbox == Sandbox::None {
        return Err(error(&p.name, format!("`permissions = \"auto\"`: {}", permissions::AUTO_NEEDS_SANDBOX)));
    }
    if p.allow.len() > MAX_ALLOW_RULES {
        return Err(error(&p.name, format!("`allow` holds at most {MAX_ALLOW_RULES} rules")));
    }
    if let Some(rule) = p.allow.iter().find(|rule| rule.trim().is_empty() || rule.chars().any(char::is_control)) {
        return Err(error(&p.name, format!("`allow` rule {rule:?} must be text on one line")));
    }
    Ok(())
}

/// The most `allow` rules a provider may give.
const MAX_ALLOW_RULES: usize = 200;

/// The first `{word}` in `arg` that is not a known placeholder. Braces around anything but a
/// lowercase word (`{"a": 1}`, `${HOME}`'s `{HOME}`) are literal text, not placeholders.
fn unknown_placeholder(arg: &str) -> Option<String> {
    let mut rest = arg;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('}') else { break };
        let word = &after[..end];
        let is_word = !word.is_empty() && word.chars().all(|c| c.is_ascii_lowercase() || c == '_');
        if is_word && !PLACEHOLDERS.contains(&word) {
            return Some(word.to_owned());
        }
        rest = &after[end + 1..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALUES: Placeholders = Placeholders { session_id: "5e1d", name: "fox", clone: "/clones/fox" };

    #[test]
    fn agents_are_niced_to_19_by_default_and_a_provider_may_say_0_to_19() {
        let config = "[providers.eager]\ncommand = [\"x\"]\nnice = 0\n[providers.busy]\ncommand = [\"y\"]\nnice = 10\n";
        let providers = Providers::parse(config).expect("parse");
        assert_eq!(providers.get("claude").expect("claude").nice, AGENT_NICE);
        let argv = providers.get("shell").expect("shell").niced(vec!["bash".to_owned()]);
        assert!(argv[0].ends_with("nice") && argv[1..] == ["-n", "19", "--", "bash"], "{argv:?}");
        let busy = providers.get("busy").expect("busy").niced(vec!["y".to_owned()]);
        assert_eq!(busy[1..], ["-n", "10", "--", "y"], "a provider's own niceness");
        let eager = providers.get("eager").expect("eager");
        assert_eq!(eager.niced(vec!["x".to_owned()]), ["x"], "nice 0: the program itself");
        let refused = Providers::parse("[providers.odd]\ncommand = [\"x\"]\nnice = 20\n").expect_err("20");
        assert!(refused.to_string().contains("`nice` must be 0 to 19"), "{refused}");
        assert!(Providers::parse("[providers.odd]\ncommand = [\"x\"]\nnice = -1\n").is_err(), "negative");
    }

    #[test]
    fn an_agent_runs_auto_under_the_sandbox_and_asks_outside_it_and_auto_needs_the_sandbox() {
        let parsed = Providers::parse(
            "[providers.claude]\nsandbox = \"bwrap\"\n[providers.codex]\nsandbox = \"none\"\n\
             [providers.gemini]\nsandbox = \"none\"\npermissions = \"allow-list\"\nallow = [\"run_shell_command(cargo)\"]\n",
        )
        .expect("valid");
        let (claude, codex, gemini) =
            (parsed.get("claude").unwrap(), parsed.get("codex").unwrap(), parsed.get("gemini").unwrap());
        assert_eq!((claude.permissions(), codex.permissions()), (Permissions::Auto, Permissions::Ask));
        assert_eq!(gemini.policy(None), Policy { permissions: Permissions::AllowList, allow: &gemini.allow });
        assert_eq!(gemini.allow, ["run_shell_command(cargo)"]);
        // A project's choice wins, except `auto` outside the sandbox (chosen before it was opted out of).
        assert_eq!(claude.policy(Some(Permissions::Ask)).permissions, Permissions::Ask);
        assert_eq!(codex.policy(Some(Permissions::Auto)).permissions, Permissions::Ask);

        let refused = Providers::parse("[providers.codex]\nsandbox = \"none\"\npermissions = \"auto\"\n");
        let message = refused.expect_err("auto needs the sandbox").to_string();
        assert!(message.contains("codex") && message.contains("sandbox = \"bwrap\""), "{message}");
        let refused = Providers::parse("[providers.codex]\nallow = [\"git\\nrm\"]\n").expect_err("one line");
        assert!(refused.to_string().contains("`allow`"), "{refused}");
        assert!(Providers::parse("[providers.codex]\npermissions = \"sometimes\"\n").is_err());
    }

    #[test]
    fn the_agent_clis_run_under_bubblewrap_where_it_is_installed_and_sandbox_none_opts_out() {
        for cli in ["claude", "codex", "gemini"] {
            let with = Providers::builtin_with(true);
            let provider = with.get(cli).expect("built in");
            assert_eq!((provider.sandbox, provider.network), (Sandbox::Bwrap, Network::Host), "{cli}");
            assert_eq!(Providers::builtin_with(false).get(cli).expect("built in").sandbox, Sandbox::None, "{cli}");
        }
        assert_eq!(Providers::builtin_with(true).get("shell").expect("shell").sandbox, Sandbox::None);
        let opted_out = Providers::parse("[providers.claude]\nsandbox = \"none\"\n").expect("valid");
        assert_eq!(opted_out.get("claude").expect("claude").sandbox, Sandbox::None);
    }

    #[test]
    fn claude_starts_with_its_session_id_and_resumes_it() {
        let providers = Providers::builtin();
        let claude = providers.get("claude").expect("built in");
        assert_eq!(claude.command(&VALUES), ["claude", "--session-id", "5e1d"]);
        assert_eq!(claude.resume_command(&VALUES), ["claude", "--resume", "5e1d"]);
        assert!(claude.install_hooks);
        assert_eq!(providers.names(), ["claude", "codex", "gemini", "shell"]);
    }

    #[test]
    fn a_file_changes_only_the_fields_it_gives_and_adds_custom_providers() {
        let providers = Providers::parse(
            r#"
            [providers.claude]
            env = { CLAUDE_CODE_MAX_OUTPUT_TOKENS = "8000" }

            [providers.aider]
            command = ["aider", "--name", "{name}", "--file", "{clone}/NOTES.md"]
            screen_rules = "generic"
            "#,
        )
        .expect("valid");
        let claude = providers.get("claude").unwrap();
        assert_eq!(claude.command, ["claude", "--session-id", "{session_id}"]);
        assert_eq!(claude.env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"], "8000");
        let aider = providers.get("aider").unwrap();
        assert_eq!(aider.command(&VALUES), ["aider", "--name", "fox", "--file", "/clones/fox/NOTES.md"]);
        assert_eq!(aider.resume_command(&VALUES), aider.command(&VALUES));
        assert!(!aider.install_hooks);
    }

    #[test]
    fn the_pane_gets_the_providers_env_and_switchyards_own_variables_last() {
        let p = Providers::parse("[providers.x]\ncommand = [\"x\"]\nenv = { A = \"1\", SWITCHYARD_AGENT = \"evil\" }")
            .unwrap();
        let env = p.get("x").unwrap().pane_env("http://127.0.0.1:8080", "fox", "/data/agents/fox/token");
        let keys: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["A", "SWITCHYARD_URL", "SWITCHYARD_AGENT", "SWITCHYARD_TOKEN_FILE"]);
        assert_eq!(env[2].1, "fox");
    }

    #[test]
    fn a_value_with_spaces_or_semicolons_stays_one_argument() {
        let values = Placeholders { session_id: "x", name: "a; rm -rf /", clone: "/a b" };
        let p = Providers::parse("[providers.x]\ncommand = [\"run\", \"{name}\", \"--in={clone}\"]").unwrap();
        assert_eq!(p.get("x").unwrap().command(&values), ["run", "a; rm -rf /", "--in=/a b"]);
    }

    #[test]
    fn an_unknown_placeholder_names_the_provider() {
        let err = Providers::parse("[providers.aider]\ncommand = [\"aider\", \"{model}\"]").unwrap_err();
        assert_eq!(err.provider.as_deref(), Some("aider"));
        assert!(err.message.contains("{model}"), "{err}");
        assert!(err.to_string().contains("provider `aider`"), "{err}");
        let err = Providers::parse("[providers.claude]\nresume = [\"claude\", \"-r\", \"{sesion_id}\"]").unwrap_err();
        assert_eq!(err.provider.as_deref(), Some("claude"));
    }

    #[test]
    fn braces_that_are_not_placeholders_are_literal() {
        let p = Providers::parse("[providers.x]\ncommand = [\"sh\", \"-c\", \"echo ${HOME} {\\\"a\\\": 1}\"]");
        assert!(p.is_ok(), "{p:?}");
    }

    #[test]
    fn a_custom_provider_needs_a_command() {
        let err = Providers::parse("[providers.aider]\nscreen_rules = \"generic\"").unwrap_err();
        assert_eq!(err.provider.as_deref(), Some("aider"));
        assert!(err.message.contains("command"));
        let err = Providers::parse("[providers.aider]\ncommand = []").unwrap_err();
        assert!(err.message.contains("program"), "{err}");
    }

    #[test]
    fn bad_names_keys_and_fields_are_refused() {
        assert!(Providers::parse("[providers.Aider]\ncommand = [\"a\"]").is_err());
        assert!(Providers::parse("[providers.a]\ncommand = [\"a\"]\nenv = { \"A-B\" = \"1\" }").is_err());
        let err = Providers::parse("[providers.a]\ncommand = [\"a\"]\ncomand = [\"b\"]").unwrap_err();
        assert_eq!(err.provider, None);
        assert!(err.message.contains("comand"), "{err}");
    }

    #[test]
    fn screen_rules_are_read_once_from_the_config_and_shell_means_generic() {
        let providers = Providers::builtin();
        let shell = providers.get("shell").unwrap();
        assert_eq!(shell.screen_rules, ScreenRules::Generic);
        assert!(shell.shell().is_some_and(|name| !name.contains('/')), "{:?}", shell.shell());
        assert_eq!(providers.get("claude").unwrap().shell(), None, "a provider with rules runs no shell");
        let p =
            Providers::parse("[providers.shell]\nscreen_rules = \"shell\"\n[providers.x]\ncommand = [\"/bin/zsh\"]")
                .expect("the older name still reads");
        assert_eq!(p.get("shell").unwrap().screen_rules, ScreenRules::Generic);
        assert_eq!(p.get("x").unwrap().shell().as_deref(), Some("zsh"));
        let err = Providers::parse("[providers.x]\ncommand = [\"x\"]\nscreen_rules = \"vim\"").unwrap_err();
        assert_eq!(err.provider.as_deref(), Some("x"));
        assert!(err.message.contains("screen_rules") && err.message.contains("generic"), "{err}");
    }

    #[test]
    fn a_program_is_looked_for_on_the_providers_own_path() {
        let dir = tempfile::tempdir().expect("dir");
        let p = Providers::parse(&format!(
            "[providers.ghost]\ncommand = [\"switchyard-test-no-such-cli\"]\n\
             [providers.local]\ncommand = [\"sh\"]\nenv = {{ PATH = \"{}\" }}\n\
             [providers.script]\ncommand = [\"./run.sh\"]",
            dir.path().display()
        ))
        .expect("valid");
        assert_eq!(p.get("ghost").unwrap().program_found(), Some(false));
        assert_eq!(p.get("local").unwrap().program_found(), Some(false), "not on its own PATH");
        assert_eq!(p.get("script").unwrap().program_found(), None, "only its clone can tell");
        assert_eq!(
            Providers::parse("[providers.x]\ncommand = [\"/bin/sh\"]").unwrap().get("x").unwrap().program_found(),
            Some(true)
        );
    }

    #[test]
    fn a_missing_file_means_the_built_ins() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Providers::load(dir.path()).unwrap(), Providers::builtin());
        std::fs::write(dir.path().join("providers.toml"), "[providers.x]\ncommand = [\"{nope}\"]").unwrap();
        let err = Providers::load(dir.path()).unwrap_err();
        assert!(err.message.contains("providers.toml"), "{err}");
    }
}
