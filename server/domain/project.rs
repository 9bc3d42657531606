//! Project settings: the slug rule and the typed configs kept as jsonb, with multiclaude's field
//! names (its `Repository`'s `fork_config`, `merge_queue_config`, `pr_shepherd_config`) so its
//! users recognise them and the `state.json` export can copy them as they are.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::permissions::Permissions;

/// `^[a-z0-9][a-z0-9-]{0,62}$`, the same rule as the SQL `CHECK` (and wish slugs).
pub fn is_valid_slug(slug: &str) -> bool {
    let bytes = slug.as_bytes();
    matches!(bytes.first(), Some(b'a'..=b'z' | b'0'..=b'9'))
        && bytes.len() <= 63
        && bytes.iter().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
}

/// Which pull requests an agent watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(example = "author")]
pub enum TrackMode {
    /// Every PR in the repository.
    All,
    /// Only PRs the Switchyard user authored.
    Author,
    /// Only PRs assigned to the Switchyard user.
    Assigned,
}

/// Whether the merge-queue agent runs and which PRs it merges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"enabled": true, "track_mode": "all"}))]
pub struct MergeQueueConfig {
    pub enabled: bool,
    pub track_mode: TrackMode,
}

impl Default for MergeQueueConfig {
    /// The column default in the schema: on, for every PR.
    fn default() -> Self {
        MergeQueueConfig { enabled: true, track_mode: TrackMode::All }
    }
}

/// Whether the PR-shepherd agent (fork mode) runs and which PRs it tends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"enabled": false, "track_mode": "author"}))]
pub struct PrShepherdConfig {
    pub enabled: bool,
    pub track_mode: TrackMode,
}

impl Default for PrShepherdConfig {
    /// The column default in the schema: off, and only one's own PRs when turned on.
    fn default() -> Self {
        PrShepherdConfig { enabled: false, track_mode: TrackMode::Author }
    }
}

/// Whether the repository is a fork, and of what. Omitted fields take their defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
#[schema(example = json!({"is_fork": true, "upstream_url": "https://github.com/upstream/repo",
    "upstream_owner": "upstream", "upstream_repo": "repo", "force_fork_mode": false}))]
pub struct ForkConfig {
    pub is_fork: bool,
    pub upstream_url: Option<String>,
    pub upstream_owner: Option<String>,
    pub upstream_repo: Option<String>,
    /// Treat the repository as a fork even where detection says otherwise.
    pub force_fork_mode: bool,
}

/// How the conductor runs a project's wishes. Omitted fields take their defaults (the column's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
#[schema(example = json!({"planning": "agent", "plan_approval": "auto", "review": "agent", "provider": "claude",
    "fallback_providers": ["codex"], "max_agents": 4, "keep_clones": false, "max_iterations": 3}))]
pub struct ConductorConfig {
    /// Who plans a draft wish that has a description and no groups.
    pub planning: Planning,
    /// Whether a planner's plan runs at once or waits at `planned` for a person to queue it.
    pub plan_approval: PlanApproval,
    /// Who reviews a wish's branch once every group is done.
    pub review: ReviewMode,
    /// The provider of the project's agents unless the wish or the group names one.
    pub provider: String,
    /// Tried in order for a group whose provider is `any` when the ones before are at a usage limit.
    pub fallback_providers: Vec<String>,
    /// The most agents of the project working at once (planners, engineers, reviewers, fixers).
    pub max_agents: u32,
    /// Keep agents' clones after their wish is merged or cancelled.
    pub keep_clones: bool,
    /// How many iterations a dispatched task's agent gets (it stopped without reporting done or
    /// fail: it is told to go on) before the task fails; a task's own lower cap wins.
    pub max_iterations: u32,
    /// The permission policy of the project's agents by provider, over the provider's own
    /// (`crate::domain::permissions`); `auto` only for a provider under the sandbox.
    #[schema(value_type = std::collections::BTreeMap<String, Permissions>)]
    pub permissions: BTreeMap<String, Permissions>,
}

impl Default for ConductorConfig {
    fn default() -> Self {
        ConductorConfig {
            planning: Planning::Agent,
            plan_approval: PlanApproval::Auto,
            review: ReviewMode::Agent,
            provider: "claude".to_owned(),
            fallback_providers: Vec::new(),
            max_agents: 4,
            keep_clones: false,
            max_iterations: 3,
            permissions: BTreeMap::new(),
        }
    }
}

impl ConductorConfig {
    /// The providers an agent may be started with where `named` is asked for (a group's, a
    /// wish's): `any` is the project's provider and then each fallback; no name, the project's.
    pub fn providers_for<'a>(&'a self, named: Option<&'a str>) -> Vec<&'a str> {
        match named {
            Some("any") => std::iter::once(self.provider.as_str())
                .chain(self.fallback_providers.iter().map(String::as_str))
                .collect(),
            Some(name) => vec![name],
            None => vec![self.provider.as_str()],
        }
    }
}

/// The most iterations a project may give a task's agent.
pub const MAX_ITERATIONS: u32 = 100;

/// The most agents a project may run at once.
pub const MAX_AGENTS: u32 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Planning {
    /// A planner agent writes the plan.
    Agent,
    /// A person plans it (API or dashboard).
    Human,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PlanApproval {
    /// A planned wish is queued at once.
    Auto,
    /// A planned wish waits for a person to queue it.
    Human,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReviewMode {
    /// A reviewer agent.
    Agent,
    /// A person, on the wish's page.
    Human,
    /// A reviewer agent, then a person.
    Both,
    /// No review: a wish whose groups are done is completed.
    None,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_means_the_projects_provider_then_its_fallbacks() {
        let config = ConductorConfig { fallback_providers: vec!["codex".into()], ..ConductorConfig::default() };
        assert_eq!(config.providers_for(Some("any")), ["claude", "codex"]);
        assert_eq!(config.providers_for(Some("shell")), ["shell"]);
        assert_eq!(config.providers_for(None), ["claude"]);
    }

    #[test]
    fn slugs_follow_the_schema_rule() {
        for good in ["a", "0", "my-repo", "a-", &"x".repeat(63)] {
            assert!(is_valid_slug(good), "{good}");
        }
        for bad in ["", "-a", "My-Repo", "a_b", "a b", "é", &"x".repeat(64)] {
            assert!(!is_valid_slug(bad), "{bad}");
        }
    }

    #[test]
    fn configs_default_like_the_schema_columns() {
        let stored: MergeQueueConfig =
            serde_json::from_str(r#"{"enabled": true, "track_mode": "all"}"#).expect("parses");
        assert_eq!(stored, MergeQueueConfig::default());
        let fork: ForkConfig = serde_json::from_str(
            r#"{"is_fork": false, "upstream_url": null, "upstream_owner": null, "upstream_repo": null, "force_fork_mode": false}"#,
        )
        .expect("parses");
        assert_eq!(fork, ForkConfig::default());
        assert_eq!(PrShepherdConfig::default().track_mode, TrackMode::Author);
    }

    #[test]
    fn the_conductor_config_defaults_like_its_column() {
        let stored: ConductorConfig = serde_json::from_str(
            r#"{"planning": "agent", "plan_approval": "auto", "review": "agent", "provider": "claude",
               "fallback_providers": [], "max_agents": 4, "keep_clones": false}"#,
        )
        .expect("parses");
        assert_eq!(stored, ConductorConfig::default());
        let partial: ConductorConfig = serde_json::from_str(r#"{"review": "none"}"#).expect("parses");
        assert_eq!(partial, ConductorConfig { review: ReviewMode::None, ..ConductorConfig::default() });
        assert!(serde_json::from_str::<ConductorConfig>(r#"{"review": "maybe"}"#).is_err());
    }

    #[test]
    fn an_unknown_config_field_or_track_mode_is_refused() {
        assert!(serde_json::from_str::<MergeQueueConfig>(r#"{"enabled": true, "track_mode": "mine"}"#).is_err());
        assert!(serde_json::from_str::<ForkConfig>(r#"{"is_fork": true, "upstream": "x"}"#).is_err());
    }
}
