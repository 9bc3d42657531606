//! The wish DAG property, end to end: random plans of up to 200 groups, completed through the
//! API in random topological orders against real PostgreSQL. Every group becomes `ready` exactly
//! once (counted from the event log, not from the responses) and the wish ends `completed`.

use std::collections::HashSet;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{json, Value};

use crate::helpers::{spawn_app, TestApp};

/// A random DAG: group `i` depends on up to three earlier groups; plus a seed for the order.
fn random_plan() -> impl Strategy<Value = (Vec<Vec<usize>>, u64)> {
    (1usize..=200)
        .prop_flat_map(|n| {
            let deps = (0..n)
                .map(|i| if i == 0 { Just(Vec::new()).boxed() } else { prop::collection::vec(0..i, 0..=3).boxed() })
                .collect::<Vec<_>>();
            (deps, any::<u64>())
        })
        .prop_map(|(deps, seed)| {
            let deps = deps
                .into_iter()
                .map(|mut d| {
                    d.sort_unstable();
                    d.dedup();
                    d
                })
                .collect();
            (deps, seed)
        })
}

/// Runs one plan to completion and checks the property; returns a description of a failure.
async fn run_plan(app: &TestApp, case: usize, deps: &[Vec<usize>], mut seed: u64) -> Result<(), String> {
    let slug = format!("dag-{case}");
    let groups: Vec<Value> = deps
        .iter()
        .enumerate()
        .map(|(i, d)| json!({"key": format!("g{i}"), "title": "g", "depends_on": d.iter().map(|j| format!("g{j}")).collect::<Vec<_>>()}))
        .collect();
    let response =
        app.post("/api/v1/wishes", json!({"slug": slug, "project": "dag", "title": "DAG", "groups": groups})).await;
    if !response.status().is_success() {
        return Err(format!("create: {}", response.text().await.unwrap_or_default()));
    }
    app.start_wish(&slug).await;
    let mut done: HashSet<usize> = HashSet::new();
    let mut last = Value::Null;
    while done.len() < deps.len() {
        let ready: Vec<usize> =
            (0..deps.len()).filter(|i| !done.contains(i) && deps[*i].iter().all(|d| done.contains(d))).collect();
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let pick = ready[(seed >> 33) as usize % ready.len()];
        app.post_ok(&format!("/api/v1/wishes/{slug}/groups/g{pick}/start"), json!({})).await;
        last = app.post_ok(&format!("/api/v1/wishes/{slug}/groups/g{pick}/complete"), json!({})).await;
        done.insert(pick);
        let mut expected: Vec<String> = (0..deps.len())
            .filter(|i| deps[*i].contains(&pick) && deps[*i].iter().all(|d| done.contains(d)))
            .map(|i| format!("g{i}"))
            .collect();
        let mut got: Vec<String> = serde_json::from_value(last["now_ready"].clone()).unwrap_or_default();
        expected.sort();
        got.sort();
        if got != expected {
            return Err(format!("completing g{pick} readied {got:?}, expected {expected:?}"));
        }
        let open = deps.len() - done.len();
        if last["groups_open"] != open {
            return Err(format!(
                "after completing g{pick} the wish says {} groups open, not {open}",
                last["groups_open"]
            ));
        }
    }
    if last["status"] != "completed" {
        return Err(format!("the wish ended {}", last["status"]));
    }
    // Each dependent group was made ready by exactly one `task.ready` event; groups without
    // dependencies were created ready and never get one.
    let readied: Vec<(String, i64)> = sqlx::query_as(
        "SELECT t.group_key, count(e.id) FROM tasks t
         JOIN wishes w ON w.id = t.wish_id AND w.slug = $1
         LEFT JOIN events e ON e.type = 'task.ready' AND e.subject = 'task:' || t.id
         GROUP BY t.group_key",
    )
    .bind(&slug)
    .fetch_all(&app.pool)
    .await
    .expect("events");
    for (key, count) in readied {
        let i: usize = key[1..].parse().expect("key");
        let want = i64::from(!deps[i].is_empty());
        if count != want {
            return Err(format!("{key} became ready {count} times by event, expected {want}"));
        }
    }
    Ok(())
}

#[test]
fn random_plans_run_to_completed_with_each_group_ready_exactly_once() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let app = runtime.block_on(spawn_app());
    runtime.block_on(app.create_project("dag"));
    runtime.block_on(app.skip_reviews("dag"));
    let mut runner = TestRunner::new(Config { cases: 6, ..Config::default() });
    let case = std::sync::atomic::AtomicUsize::new(0);
    let result = runner.run(&random_plan(), |(deps, seed)| {
        let case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let outcome = runtime.block_on(run_plan(&app, case, &deps, seed));
        prop_assert!(outcome.is_ok(), "{}", outcome.unwrap_err());
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}
