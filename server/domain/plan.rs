//! Validation of a wish's plan: its execution groups and their dependencies
//! (`dependsOn`). A valid plan is a non-empty DAG of uniquely, safely keyed groups; validation
//! returns a topological order so callers can create the groups' tasks dependencies-first.
//!
//! Checks run in a fixed order and stop at the first failure, so the same bad plan always gives
//! the same error: empty plan, then each group's key (invalid, then duplicate) in input order,
//! then each group's dependencies (self, then unknown) in input order, then cycles.
//! A dependency listed twice counts once.

use std::collections::{HashMap, VecDeque};

use serde::{Deserialize, Serialize};

/// One execution group as written in a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupSpec {
    /// Unique within the plan; see [`is_valid_key`].
    pub key: String,
    /// Keys of the groups that must be done before this one can start.
    #[serde(default)]
    pub depends_on: Vec<String>,
}

/// Why a plan was rejected; each variant names the offending keys for the API's `errors`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the plan has no execution groups")]
    Empty,
    #[error("group key {key:?} is invalid: use 1 to 63 lowercase letters, digits, '-' or '_', starting with a letter or digit")]
    InvalidKey { key: String },
    #[error("group key {key:?} is used more than once")]
    DuplicateKey { key: String },
    #[error("group {key:?} depends on itself")]
    SelfDependency { key: String },
    #[error("group {group:?} depends on unknown group(s): {}", .missing.join(", "))]
    UnknownDependency { group: String, missing: Vec<String> },
    #[error("the groups' dependencies form a cycle: {}", .keys.join(" → "))]
    Cycle {
        /// One cycle, each key depending on the next, starting (and ending) with the member
        /// that comes first in the plan: `["a", "b", "a"]` means a needs b and b needs a.
        keys: Vec<String>,
    },
}

/// Whether `key` matches `^[a-z0-9][a-z0-9_-]{0,62}$`; keys end up in branch and pane names,
/// so they stay short and shell- and git-safe.
pub fn is_valid_key(key: &str) -> bool {
    let bytes = key.as_bytes();
    match bytes.first() {
        Some(first) if (1..=63).contains(&bytes.len()) => {
            is_lower_alnum(*first) && bytes[1..].iter().all(|&b| is_lower_alnum(b) || b == b'-' || b == b'_')
        }
        _ => false,
    }
}

fn is_lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// Validates `groups` and returns their indices in a topological order (every group after all
/// of its dependencies; ties broken by input order).
pub fn validate(groups: &[GroupSpec]) -> Result<Vec<usize>, PlanError> {
    let deps = resolve(groups)?;
    topological_order(groups, &deps)
}

/// Checks keys and dependency names, and returns each group's dependencies as indices,
/// de-duplicated and in the order first listed.
pub(super) fn resolve(groups: &[GroupSpec]) -> Result<Vec<Vec<usize>>, PlanError> {
    if groups.is_empty() {
        return Err(PlanError::Empty);
    }
    let mut index = HashMap::with_capacity(groups.len());
    for (i, group) in groups.iter().enumerate() {
        if !is_valid_key(&group.key) {
            return Err(PlanError::InvalidKey { key: group.key.clone() });
        }
        if index.insert(group.key.as_str(), i).is_some() {
            return Err(PlanError::DuplicateKey { key: group.key.clone() });
        }
    }
    let mut resolved = Vec::with_capacity(groups.len());
    for group in groups {
        if group.depends_on.contains(&group.key) {
            return Err(PlanError::SelfDependency { key: group.key.clone() });
        }
        let mut missing: Vec<String> =
            group.depends_on.iter().filter(|dep| !index.contains_key(dep.as_str())).cloned().collect();
        if !missing.is_empty() {
            missing.sort();
            missing.dedup();
            return Err(PlanError::UnknownDependency { group: group.key.clone(), missing });
        }
        let mut deps: Vec<usize> = Vec::with_capacity(group.depends_on.len());
        for dep in &group.depends_on {
            // Every name was just checked against `index`.
            if let Some(&d) = index.get(dep.as_str()) {
                if !deps.contains(&d) {
                    deps.push(d);
                }
            }
        }
        resolved.push(deps);
    }
    Ok(resolved)
}

/// Kahn's algorithm, O(V + E): repeatedly take a group whose dependencies are all placed.
pub(super) fn topological_order(groups: &[GroupSpec], deps: &[Vec<usize>]) -> Result<Vec<usize>, PlanError> {
    let mut unplaced_deps: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); groups.len()];
    for (i, group_deps) in deps.iter().enumerate() {
        for &d in group_deps {
            dependents[d].push(i);
        }
    }
    let mut queue: VecDeque<usize> = (0..groups.len()).filter(|&i| unplaced_deps[i] == 0).collect();
    let mut order = Vec::with_capacity(groups.len());
    while let Some(i) = queue.pop_front() {
        order.push(i);
        for &dependent in &dependents[i] {
            unplaced_deps[dependent] -= 1;
            if unplaced_deps[dependent] == 0 {
                queue.push_back(dependent);
            }
        }
    }
    if order.len() == groups.len() {
        Ok(order)
    } else {
        Err(PlanError::Cycle { keys: find_cycle(groups, deps, &unplaced_deps) })
    }
}

/// Finds one cycle among the groups Kahn's algorithm could not place. Each unplaced group has
/// an unplaced dependency, so walking "first unplaced dependency" from any of them must repeat.
fn find_cycle(groups: &[GroupSpec], deps: &[Vec<usize>], unplaced_deps: &[usize]) -> Vec<String> {
    let unplaced = |i: usize| unplaced_deps[i] > 0;
    let mut position: Vec<Option<usize>> = vec![None; groups.len()];
    let mut path: Vec<usize> = Vec::new();
    let mut current = (0..groups.len()).find(|&i| unplaced(i));
    while let Some(i) = current {
        if let Some(start) = position[i] {
            let mut cycle = path.split_off(start);
            // Start at the member that comes first in the plan, so the answer is deterministic.
            if let Some(first) = (0..cycle.len()).min_by_key(|&k| cycle[k]) {
                cycle.rotate_left(first);
            }
            if let Some(&head) = cycle.first() {
                cycle.push(head);
            }
            return cycle.into_iter().map(|k| groups[k].key.clone()).collect();
        }
        position[i] = Some(path.len());
        path.push(i);
        current = deps[i].iter().copied().find(|&d| unplaced(d));
    }
    // Unreachable when called with Kahn's leftovers; an empty list is the honest fallback.
    Vec::new()
}

#[cfg(test)]
pub(super) mod tests;
