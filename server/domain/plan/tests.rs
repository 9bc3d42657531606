//! Tests of plan validation: one per error, a valid diamond, and properties over random DAGs.
//! Also home of the random-DAG generator that `progress`'s property test shares.

use super::*;
use proptest::prelude::*;

fn group(key: &str, depends_on: &[&str]) -> GroupSpec {
    GroupSpec { key: key.to_owned(), depends_on: depends_on.iter().map(|d| (*d).to_owned()).collect() }
}

fn keys(groups: &[GroupSpec], order: &[usize]) -> Vec<String> {
    order.iter().map(|&i| groups[i].key.clone()).collect()
}

#[test]
fn a_diamond_is_ordered_dependencies_first_with_ties_in_input_order() {
    let groups =
        [group("merge", &["left", "right"]), group("right", &["base"]), group("left", &["base"]), group("base", &[])];
    let order = validate(&groups).unwrap();
    assert_eq!(keys(&groups, &order), ["base", "right", "left", "merge"]);
}

#[test]
fn an_empty_plan_is_rejected() {
    assert_eq!(validate(&[]), Err(PlanError::Empty));
}

#[test]
fn keys_must_be_short_lowercase_and_safe() {
    for good in ["a", "0", "group-1", "a_b", &"x".repeat(63)] {
        assert!(is_valid_key(good), "{good}");
    }
    for bad in ["", "-a", "_a", "A", "a b", "a/b", "a.b", "é", &"x".repeat(64)] {
        assert!(!is_valid_key(bad), "{bad}");
        assert_eq!(validate(&[group("ok", &[]), group(bad, &[])]), Err(PlanError::InvalidKey { key: bad.to_owned() }));
    }
}

#[test]
fn a_duplicate_key_is_named() {
    let groups = [group("a", &[]), group("b", &[]), group("a", &["b"])];
    let err = validate(&groups).unwrap_err();
    assert_eq!(err, PlanError::DuplicateKey { key: "a".into() });
    assert_eq!(err.to_string(), "group key \"a\" is used more than once");
}

#[test]
fn a_group_cannot_depend_on_itself() {
    let groups = [group("a", &[]), group("b", &["a", "b"])];
    assert_eq!(validate(&groups), Err(PlanError::SelfDependency { key: "b".into() }));
}

#[test]
fn unknown_dependencies_are_all_reported_sorted_and_once() {
    let groups = [group("a", &[]), group("b", &["zeta", "a", "alpha", "zeta"])];
    let err = validate(&groups).unwrap_err();
    assert_eq!(err, PlanError::UnknownDependency { group: "b".into(), missing: vec!["alpha".into(), "zeta".into()] });
    assert_eq!(err.to_string(), "group \"b\" depends on unknown group(s): alpha, zeta");
}

#[test]
fn a_cycle_is_reported_from_its_first_member_in_dependency_order() {
    // x hangs off the cycle without being on it; the cycle's first member in the plan is b.
    let groups = [group("x", &["b"]), group("b", &["c"]), group("a", &["b"]), group("c", &["a"]), group("free", &[])];
    let err = validate(&groups).unwrap_err();
    assert_eq!(err, PlanError::Cycle { keys: vec!["b".into(), "c".into(), "a".into(), "b".into()] });
    assert_eq!(err.to_string(), "the groups' dependencies form a cycle: b → c → a → b");
}

#[test]
fn a_repeated_dependency_counts_once() {
    let groups = [group("a", &[]), group("b", &["a", "a"])];
    assert_eq!(validate(&groups), Ok(vec![0, 1]));
    assert_eq!(resolve(&groups), Ok(vec![vec![], vec![0]]));
}

/// A tiny deterministic PRNG (SplitMix64), so a proptest case can make many random choices
/// from one shrinkable seed.
pub(in crate::domain) struct SplitMix(pub u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`; `n` must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        unit < p
    }
}

/// Random DAGs of 1..=`max` groups: a random permutation ranks the groups, edges only go from
/// lower to higher rank (so no cycle), with a random density skewed towards sparse graphs.
/// Returns the groups and a seed for any further random choices.
pub(in crate::domain) fn random_dag(max: usize) -> impl Strategy<Value = (Vec<GroupSpec>, u64)> {
    (1..=max, 0.0f64..1.0, any::<u64>())
        .prop_flat_map(|(n, u, seed)| {
            let ranks = Just((0..n).collect::<Vec<usize>>()).prop_shuffle();
            (ranks, Just(u * u * u), Just(seed))
        })
        .prop_map(|(rank, density, seed)| {
            let mut rng = SplitMix(seed);
            let n = rank.len();
            let groups = (0..n)
                .map(|b| GroupSpec {
                    key: format!("g{b}"),
                    depends_on: (0..n)
                        .filter(|&a| rank[a] < rank[b] && rng.chance(density))
                        .map(|a| format!("g{a}"))
                        .collect(),
                })
                .collect();
            (groups, rng.next())
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_random_dag_validates_to_an_order_that_respects_every_edge((groups, _) in random_dag(200)) {
        let order = validate(&groups).unwrap();
        let mut position = vec![usize::MAX; groups.len()];
        for (p, &i) in order.iter().enumerate() {
            prop_assert_eq!(position[i], usize::MAX, "index placed twice");
            position[i] = p;
        }
        for (i, group) in groups.iter().enumerate() {
            for dep in &group.depends_on {
                let d: usize = dep[1..].parse().unwrap();
                prop_assert!(position[d] < position[i]);
            }
        }
    }

    #[test]
    fn a_back_edge_is_reported_as_a_real_cycle((mut groups, seed) in random_dag(60)) {
        // Close a loop: pick a group with a dependency and make that dependency need it.
        let mut rng = SplitMix(seed);
        let with_deps: Vec<usize> =
            (0..groups.len()).filter(|&i| !groups[i].depends_on.is_empty()).collect();
        prop_assume!(!with_deps.is_empty());
        let b = with_deps[rng.below(with_deps.len())];
        let a: usize = groups[b].depends_on[0][1..].parse().unwrap();
        let b_key = groups[b].key.clone();
        groups[a].depends_on.push(b_key);

        let Err(PlanError::Cycle { keys }) = validate(&groups) else {
            return Err(TestCaseError::fail("expected a cycle"));
        };
        prop_assert!(keys.len() >= 3);
        prop_assert_eq!(keys.first(), keys.last());
        for pair in keys.windows(2) {
            let from: usize = pair[0][1..].parse().unwrap();
            prop_assert!(groups[from].depends_on.contains(&pair[1]), "{} → {}", pair[0], pair[1]);
        }
    }
}
