//! What an agent CLI may do without asking a person: its permission policy. Switchyard writes
//! each CLI's own settings for it (`crate::worker::provider_setup`) so that what Switchyard's
//! briefs ask of an agent — editing files in its clone; `git add`, `commit`, `fetch`, `merge`,
//! `push` and reading commands; `switchyard` itself — never waits for a person, whatever the
//! policy. The policy says what happens to everything else:
//!
//! | policy | anything else | choose it when |
//! | --- | --- | --- |
//! | `ask` | the CLI asks; the agent shows `permission` and a person answers (dashboard, API) | someone watches, or the agent runs outside a sandbox (the default there) |
//! | `allow-list` | allowed if the provider's `allow` rules name it, else refused by the CLI without asking | unattended outside a sandbox: nothing runs that no one listed |
//! | `auto` | allowed: the CLI's own skip-permissions (yolo) mode | the agent runs under the sandbox, which is then the boundary (the default there) |
//!
//! `auto` is refused for a provider that does not run under the sandbox, in the providers file
//! and in a project's `conductor_config.permissions`.

use serde::{Deserialize, Serialize};

/// An agent CLI's permission policy (`permissions = "ask"` in the providers file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Permissions {
    /// Beyond what Switchyard's briefs need, the CLI asks a person.
    Ask,
    /// Beyond what the briefs need, only what the provider's `allow` rules name; the rest is refused.
    AllowList,
    /// Everything (the CLI's skip-permissions mode): only under the sandbox.
    Auto,
}

impl Permissions {
    pub fn as_str(self) -> &'static str {
        match self {
            Permissions::Ask => "ask",
            Permissions::AllowList => "allow-list",
            Permissions::Auto => "auto",
        }
    }
}

/// The policy one agent runs with, and the provider's extra rules (in its CLI's own syntax).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy<'a> {
    pub permissions: Permissions,
    pub allow: &'a [String],
}

/// Why `auto` cannot be had without the sandbox, for the config's and the API's errors.
pub const AUTO_NEEDS_SANDBOX: &str =
    "`auto` runs every command the agent writes without asking: it needs the provider to run under the sandbox (`sandbox = \"bwrap\"`)";
