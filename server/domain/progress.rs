//! Dependency progress over a validated plan, in memory: each group's [`TaskStatus`], moved
//! only through [`task::transition`](super::task::transition), and the rule that a group becomes
//! `ready` exactly once, when its last dependency becomes `done`.
//!
//! Each group keeps a count of its unmet dependencies, so completing a group costs time
//! proportional to its direct dependents, not to the size of the wish. The database layer keeps
//! the same counter per task and applies the same rule; the property test below checks it.

use std::collections::HashMap;

use super::plan::{self, GroupSpec, PlanError};
use super::task::{self, IllegalTransition, TaskEvent, TaskStatus};

/// Why a progress step was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgressError {
    #[error("the plan has no group {key:?}")]
    UnknownGroup { key: String },
    #[error("group {key:?}: {transition}")]
    Illegal { key: String, transition: IllegalTransition },
}

/// The groups of one plan and where each one stands.
#[derive(Debug, Clone)]
pub struct DagProgress {
    keys: Vec<String>,
    index: HashMap<String, usize>,
    status: Vec<TaskStatus>,
    /// Direct dependents of each group (the reverse of `depends_on`).
    dependents: Vec<Vec<usize>>,
    /// Dependencies of each group that are not `done` yet.
    unmet: Vec<usize>,
    done: usize,
}

impl DagProgress {
    /// Validates `groups` and starts every group as a new task would: `ready` without
    /// dependencies, `blocked` otherwise.
    pub fn new(groups: &[GroupSpec]) -> Result<Self, PlanError> {
        let deps = plan::resolve(groups)?;
        plan::topological_order(groups, &deps)?;
        let mut dependents = vec![Vec::new(); groups.len()];
        for (i, group_deps) in deps.iter().enumerate() {
            for &d in group_deps {
                dependents[d].push(i);
            }
        }
        let unmet: Vec<usize> = deps.iter().map(Vec::len).collect();
        Ok(DagProgress {
            keys: groups.iter().map(|g| g.key.clone()).collect(),
            index: groups.iter().enumerate().map(|(i, g)| (g.key.clone(), i)).collect(),
            status: unmet.iter().map(|&n| task::initial_status(n)).collect(),
            dependents,
            unmet,
            done: 0,
        })
    }

    /// The group's status, or `None` if the plan has no such group.
    pub fn status(&self, key: &str) -> Option<TaskStatus> {
        self.index.get(key).map(|&i| self.status[i])
    }

    /// Keys of the groups that are `ready`, in plan order.
    pub fn ready(&self) -> impl Iterator<Item = &str> + '_ {
        self.keys
            .iter()
            .zip(&self.status)
            .filter(|(_, status)| **status == TaskStatus::Ready)
            .map(|(key, _)| key.as_str())
    }

    /// Whether every group is `done`.
    pub fn is_completed(&self) -> bool {
        self.done == self.keys.len()
    }

    /// Starts a `ready` group.
    pub fn start(&mut self, key: &str) -> Result<(), ProgressError> {
        let i = self.position(key)?;
        self.apply(i, &TaskEvent::Start)
    }

    /// Completes an `in_progress` (or `waiting_input`) group and returns the keys of the
    /// direct dependents that became `ready` because of it, in plan order of `depends_on`.
    pub fn complete(&mut self, key: &str) -> Result<Vec<String>, ProgressError> {
        let i = self.position(key)?;
        self.apply(i, &TaskEvent::Complete)?;
        self.done += 1;
        let mut became_ready = Vec::new();
        // `done` is terminal here, so each dependency edge is counted down exactly once.
        for k in 0..self.dependents[i].len() {
            let dependent = self.dependents[i][k];
            self.unmet[dependent] -= 1;
            if self.unmet[dependent] == 0 && self.status[dependent] == TaskStatus::Blocked {
                self.apply(dependent, &TaskEvent::DependenciesMet)?;
                became_ready.push(self.keys[dependent].clone());
            }
        }
        Ok(became_ready)
    }

    fn position(&self, key: &str) -> Result<usize, ProgressError> {
        self.index.get(key).copied().ok_or_else(|| ProgressError::UnknownGroup { key: key.to_owned() })
    }

    fn apply(&mut self, i: usize, event: &TaskEvent) -> Result<(), ProgressError> {
        self.status[i] = task::transition(self.status[i], event)
            .map_err(|transition| ProgressError::Illegal { key: self.keys[i].clone(), transition })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::tests::{random_dag, SplitMix};
    use proptest::prelude::*;

    fn group(key: &str, depends_on: &[&str]) -> GroupSpec {
        GroupSpec { key: key.to_owned(), depends_on: depends_on.iter().map(|d| (*d).to_owned()).collect() }
    }

    fn diamond() -> DagProgress {
        let groups = [
            group("base", &[]),
            group("left", &["base"]),
            group("right", &["base"]),
            group("merge", &["left", "right"]),
        ];
        DagProgress::new(&groups).unwrap()
    }

    #[test]
    fn completing_the_last_dependency_makes_a_group_ready_once() {
        let mut dag = diamond();
        assert_eq!(dag.ready().collect::<Vec<_>>(), ["base"]);
        dag.start("base").unwrap();
        assert_eq!(dag.complete("base").unwrap(), ["left", "right"]);
        dag.start("left").unwrap();
        assert!(dag.complete("left").unwrap().is_empty());
        assert_eq!(dag.status("merge"), Some(TaskStatus::Blocked));
        dag.start("right").unwrap();
        assert_eq!(dag.complete("right").unwrap(), ["merge"]);
        assert!(!dag.is_completed());
        dag.start("merge").unwrap();
        assert!(dag.complete("merge").unwrap().is_empty());
        assert!(dag.is_completed());
    }

    #[test]
    fn a_group_must_be_started_before_it_completes_and_only_once() {
        let mut dag = diamond();
        let err = dag.complete("base").unwrap_err();
        assert_eq!(err.to_string(), "group \"base\": cannot complete a task that is ready");
        assert!(matches!(dag.start("merge"), Err(ProgressError::Illegal { .. })));
        dag.start("base").unwrap();
        dag.complete("base").unwrap();
        assert!(dag.complete("base").is_err());
        assert_eq!(dag.status("left"), Some(TaskStatus::Ready));
    }

    #[test]
    fn unknown_groups_and_invalid_plans_are_refused() {
        let mut dag = diamond();
        let err = dag.start("nope").unwrap_err();
        assert_eq!(err, ProgressError::UnknownGroup { key: "nope".into() });
        assert_eq!(dag.status("nope"), None);
        let cyclic = [group("a", &["b"]), group("b", &["a"])];
        assert!(matches!(DagProgress::new(&cyclic), Err(PlanError::Cycle { .. })));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn every_group_becomes_ready_exactly_once_in_any_topological_run(
            (groups, seed) in random_dag(200)
        ) {
            let mut dag = DagProgress::new(&groups).unwrap();
            let mut rng = SplitMix(seed);
            let mut times_ready: HashMap<String, usize> = HashMap::new();
            for key in dag.ready() {
                *times_ready.entry(key.to_owned()).or_default() += 1;
            }
            for _ in 0..groups.len() {
                let ready: Vec<String> = dag.ready().map(str::to_owned).collect();
                prop_assert!(!ready.is_empty(), "stuck before completion");
                let key = &ready[rng.below(ready.len())];
                dag.start(key).unwrap();
                for newly in dag.complete(key).unwrap() {
                    let deps = &groups[newly[1..].parse::<usize>().unwrap()].depends_on;
                    prop_assert!(deps.iter().all(|d| dag.status(d) == Some(TaskStatus::Done)));
                    *times_ready.entry(newly).or_default() += 1;
                }
            }
            prop_assert!(dag.is_completed());
            prop_assert_eq!(times_ready.len(), groups.len());
            prop_assert!(times_ready.values().all(|&n| n == 1), "{:?}", times_ready);
        }
    }
}
