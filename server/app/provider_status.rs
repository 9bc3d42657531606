//! Whether each provider's agents can start on this node and reach their model: its program is
//! found, and (for the built-in CLIs) it has an API key or a login ([`crate::providers::logins`]).
//! The overview and `GET /api/v1/providers` show it alike, with the providers file's error
//! while the file as it is now cannot be used.

use serde::Serialize;

use super::Ctx;

/// A provider's readiness on this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Readiness {
    /// Installed and configured: its agents can start.
    Available,
    /// Its program is not found on this node's `PATH` (or the provider's `env.PATH`).
    NotInstalled,
    /// Installed, but without an API key or login: `detail` says what is missing.
    NotConfigured,
}

/// One provider and its readiness.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ProviderStatus {
    /// The provider's name, as agents, wishes and projects name it.
    pub name: String,
    pub status: Readiness,
    /// The program it runs (`claude`).
    pub program: Option<String>,
    /// What is wrong, in words: the program not found, or what configures it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Every provider of the set in use, by name: a few stat calls each, so an install or a login
/// shows on the next look.
pub fn statuses(ctx: &Ctx) -> Vec<ProviderStatus> {
    let providers = ctx.providers.current();
    providers
        .names()
        .into_iter()
        .filter_map(|name| providers.get(name))
        .map(|provider| {
            let program = provider.command.first().cloned();
            let (status, detail) = if provider.program_found() == Some(false) {
                let named = program.clone().unwrap_or_default();
                (Readiness::NotInstalled, Some(format!("command not found: {named}")))
            } else if let Some(missing) = crate::providers::logins::missing(provider, ctx.providers.logins()) {
                (Readiness::NotConfigured, Some(missing))
            } else {
                (Readiness::Available, None)
            };
            ProviderStatus { name: provider.name.clone(), status, program, detail }
        })
        .collect()
}
