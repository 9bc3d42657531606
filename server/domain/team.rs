//! A team's lifecycle and its name rule.
//!
//! ```text
//! created → in_progress → done
//!               ⇅
//!            blocked
//! ```
//! A team starts `created`; its first member starts it (`in_progress`). `done` is terminal.
//! `blocked` is left by starting again (the blocker is gone).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::UnknownStatus;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TeamStatus {
    /// Made, with its clone; nobody works in it yet.
    Created,
    InProgress,
    Done,
    /// Waiting on something outside the team.
    Blocked,
}

impl TeamStatus {
    pub const ALL: [TeamStatus; 4] =
        [TeamStatus::Created, TeamStatus::InProgress, TeamStatus::Done, TeamStatus::Blocked];

    pub fn as_str(&self) -> &'static str {
        match self {
            TeamStatus::Created => "created",
            TeamStatus::InProgress => "in_progress",
            TeamStatus::Done => "done",
            TeamStatus::Blocked => "blocked",
        }
    }
}

impl fmt::Display for TeamStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TeamStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        super::parse_status("team", &Self::ALL, Self::as_str, s)
    }
}

/// A status change the team's current status does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a team that is {from} cannot become {to}")]
pub struct IllegalTeamTransition {
    pub from: TeamStatus,
    pub to: TeamStatus,
}

/// Whether a team may go from `from` to `to`; asking for the status it has is allowed (no change).
pub fn transition(from: TeamStatus, to: TeamStatus) -> Result<TeamStatus, IllegalTeamTransition> {
    use TeamStatus as S;
    let legal = from == to
        || matches!(
            (from, to),
            (S::Created, S::InProgress) | (S::InProgress, S::Done | S::Blocked) | (S::Blocked, S::InProgress)
        );
    if legal {
        Ok(to)
    } else {
        Err(IllegalTeamTransition { from, to })
    }
}

/// A team's name is also its git branch and appears in URLs: a slug that may also hold `.` and
/// `_`, and that git accepts as a branch.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-._".contains(c))
        && super::agent_kind::is_valid_branch(name)
}

#[cfg(test)]
mod tests {
    use super::TeamStatus as S;
    use super::*;

    #[test]
    fn every_status_pair_is_legal_exactly_when_listed() {
        let legal = [
            (S::Created, S::InProgress),
            (S::InProgress, S::Done),
            (S::InProgress, S::Blocked),
            (S::Blocked, S::InProgress),
        ];
        for from in S::ALL {
            for to in S::ALL {
                let expected = from == to || legal.contains(&(from, to));
                assert_eq!(transition(from, to).is_ok(), expected, "{from} → {to}");
            }
        }
        assert_eq!(
            transition(S::Done, S::InProgress).unwrap_err().to_string(),
            "a team that is done cannot become in_progress"
        );
    }

    #[test]
    fn statuses_parse_from_their_wire_names_only() {
        for status in S::ALL {
            assert_eq!(status.as_str().parse::<S>(), Ok(status));
            assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
        }
        assert!("finished".parse::<S>().is_err());
    }

    #[test]
    fn names_are_branch_safe_slugs() {
        for good in ["login", "team-a", "v1.2_fix"] {
            assert!(is_valid_name(good), "{good}");
        }
        for bad in ["", "-a", "Team", "a/b", "a..b", "a.lock", "a b", ".a", &"x".repeat(64)] {
            assert!(!is_valid_name(bad), "{bad:?}");
        }
    }
}
