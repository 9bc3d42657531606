//! What an agent is, as opposed to what it is doing ([`super::agent`]): its kind (multiclaude's
//! agent types), its role, and the rule for its name.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::UnknownStatus;

/// multiclaude's agent types. Stored and sent with their wire names (`merge-queue`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AgentKind {
    /// The main orchestrator of a project.
    Supervisor,
    /// Executes one task.
    Worker,
    /// Watches and merges approved pull requests.
    MergeQueue,
    /// An interactive workspace for a person.
    Workspace,
    /// Reviews one pull request.
    Review,
    /// Tends pull requests in fork mode.
    PrShepherd,
    /// Any other long-lived agent.
    GenericPersistent,
}

impl AgentKind {
    pub const ALL: [AgentKind; 7] = [
        AgentKind::Supervisor,
        AgentKind::Worker,
        AgentKind::MergeQueue,
        AgentKind::Workspace,
        AgentKind::Review,
        AgentKind::PrShepherd,
        AgentKind::GenericPersistent,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            AgentKind::Supervisor => "supervisor",
            AgentKind::Worker => "worker",
            AgentKind::MergeQueue => "merge-queue",
            AgentKind::Workspace => "workspace",
            AgentKind::Review => "review",
            AgentKind::PrShepherd => "pr-shepherd",
            AgentKind::GenericPersistent => "generic-persistent",
        }
    }
}

/// What an agent does in a wish or a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AgentRole {
    Engineer,
    Reviewer,
    Qa,
    Fix,
    /// Writes a draft wish's plan (the conductor's).
    Planner,
}

impl AgentRole {
    pub const ALL: [AgentRole; 5] =
        [AgentRole::Engineer, AgentRole::Reviewer, AgentRole::Qa, AgentRole::Fix, AgentRole::Planner];

    pub fn as_str(&self) -> &'static str {
        match self {
            AgentRole::Engineer => "engineer",
            AgentRole::Reviewer => "reviewer",
            AgentRole::Qa => "qa",
            AgentRole::Fix => "fix",
            AgentRole::Planner => "planner",
        }
    }
}

macro_rules! wire_name {
    ($ty:ty, $kind:literal) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $ty {
            type Err = UnknownStatus;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                super::parse_status($kind, &Self::ALL, Self::as_str, s)
            }
        }
    };
}

wire_name!(AgentKind, "agent kind");
wire_name!(AgentRole, "agent role");

/// An agent's name: a slug (`^[a-z0-9][a-z0-9-]{0,62}$`, the SQL `CHECK`), because it names a tmux
/// window, a clone directory and a git branch, and appears in URLs.
pub fn is_valid_name(name: &str) -> bool {
    super::project::is_valid_slug(name)
}

/// Names no agent may take: they are people or Switchyard itself in messages, task assignees
/// and chats (`operator` sends as the person at the dashboard, `human` is the assignee of work
/// handed to a person), so an agent of that name would read and speak as them.
pub const RESERVED_NAMES: [&str; 3] = [super::message::OPERATOR, "human", "switchyard"];

pub fn is_reserved_name(name: &str) -> bool {
    RESERVED_NAMES.contains(&name)
}

/// The name given when none is asked for: the kind and the first 8 hex digits of the id, e.g.
/// `worker-3f2a9c1d`. Unique in practice; the database's unique index settles the rest.
pub fn default_name(kind: AgentKind, id: uuid::Uuid) -> String {
    format!("{}-{}", kind.as_str(), &id.simple().to_string()[..8])
}

/// A plain branch name git accepts and that cannot be read as an option: a simplified
/// `git check-ref-format --branch` (no `..`, `@{`, control characters, spaces or `~^:?*[\\`;
/// no part starting with `.` or ending with `.lock`; no leading `-` or `/`, no trailing `/` or `.`;
/// not `HEAD`, which git reads as the checked-out commit), and not a full ref name (`refs/…`):
/// Switchyard puts it under `refs/heads/` itself, and `refs/heads/main` would become
/// `refs/heads/refs/heads/main`.
pub fn is_valid_branch(branch: &str) -> bool {
    !branch.is_empty()
        && branch.len() <= 200
        && !branch.starts_with(['-', '/'])
        && !branch.starts_with("refs/")
        && !branch.ends_with(['/', '.'])
        && !branch.contains("..")
        && !branch.contains("@{")
        && !branch.contains("//")
        && branch != "@"
        && branch != "HEAD"
        && !branch.chars().any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c))
        && branch.split('/').all(|part| !part.starts_with('.') && !part.ends_with(".lock"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_roles_parse_from_their_wire_names_only() {
        for kind in AgentKind::ALL {
            assert_eq!(kind.as_str().parse::<AgentKind>(), Ok(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
        for role in AgentRole::ALL {
            assert_eq!(role.as_str().parse::<AgentRole>(), Ok(role));
            assert_eq!(serde_json::to_value(role).unwrap(), role.as_str());
        }
        assert!("merge_queue".parse::<AgentKind>().is_err());
        assert_eq!("boss".parse::<AgentRole>().unwrap_err().expected.len(), 5);
    }

    #[test]
    fn a_default_name_is_a_valid_name_made_of_the_kind_and_id() {
        let id = uuid::Uuid::parse_str("3f2a9c1d-0000-4000-8000-000000000000").unwrap();
        let name = default_name(AgentKind::MergeQueue, id);
        assert_eq!(name, "merge-queue-3f2a9c1d");
        assert!(is_valid_name(&name));
    }

    #[test]
    fn branches_git_would_refuse_or_read_as_options_are_refused() {
        for good in ["switchyard/fox", "feature/login-page", "fix_1.2", "heads/main", "a/refs/x", "ünï"] {
            assert!(is_valid_branch(good), "{good}");
        }
        for bad in
            ["", "-b", "/a", "a/", "a..b", "a b", "a~1", "a:b", "a/.hidden", "x.lock", "a@{1}", "@", "a//b", "HEAD"]
        {
            assert!(!is_valid_branch(bad), "{bad:?}");
        }
        // A full ref name is not a branch name: it would be put under refs/heads/ once more.
        for bad in ["refs/heads/main", "refs/x", "a\x7fb", "a\x1b[0mb", "a\nb", "a\u{85}b"] {
            assert!(!is_valid_branch(bad), "{bad:?}");
        }
    }

    #[test]
    fn names_are_slugs() {
        assert!(is_valid_name("clever-fox"));
        for bad in ["", "-x", "Fox", "a b", "a/b", "a;b", &"x".repeat(64)] {
            assert!(!is_valid_name(bad), "{bad:?}");
        }
    }
}
