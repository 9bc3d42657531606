//! The live streams' fan-out: one reader per process reads new events and hands them to every
//! follower, yet each follower gets every event it wants exactly once and in log order — many
//! followers, concurrent commits, a follower that falls behind, one that replays from an old
//! cursor, and a transaction that commits late.

use std::time::Duration;

use sqlx::PgPool;
use switchyard::db::events::{self, Event};
use switchyard::domain::webhook::EventFilter;
use switchyard::feed::{EventFeed, Follower, BACKLOG};

use crate::helpers::{eventually, fresh_database};

async fn migrated_pool() -> PgPool {
    let (url, _) = fresh_database().await;
    let pool = sqlx::postgres::PgPoolOptions::new().max_connections(30).connect(&url).await.expect("connect");
    switchyard::db::migrate(&pool).await.expect("migrate");
    pool
}

async fn commit_one(feed: &EventFeed, pool: &PgPool, event_type: &str, n: usize) -> i64 {
    let mut tx = pool.begin().await.expect("begin");
    let id =
        events::record(&mut tx, event_type, &format!("test:{n}"), serde_json::json!({"n": n})).await.expect("record");
    feed.commit(tx).await.expect("commit");
    id
}

/// The next `n` events a follower hands over, failing after 30 s without one.
async fn take(follower: &mut Follower, n: usize) -> Vec<Event> {
    let mut got = Vec::with_capacity(n);
    while got.len() < n {
        let event = tokio::time::timeout(Duration::from_secs(30), follower.next())
            .await
            .unwrap_or_else(|_| panic!("event {} of {n} within 30 s", got.len() + 1))
            .expect("the stream goes on");
        got.push(event);
    }
    got
}

/// The whole log in reading order, as a follower must hand it over.
async fn log(pool: &PgPool) -> Vec<Event> {
    let mut conn = pool.acquire().await.expect("acquire");
    events::after_position(&mut conn, None, 100_000).await.expect("read").into_iter().map(|(_, e)| e).collect()
}

fn ids(events: &[Event]) -> Vec<i64> {
    events.iter().map(|e| e.id).collect()
}

#[tokio::test]
async fn every_follower_gets_every_event_once_in_order_whatever_the_commits_and_its_pace() {
    let pool = migrated_pool().await;
    let feed = EventFeed::default();
    let start = log(&pool).await.last().map(|e| e.id);
    let mut eager: Vec<Follower> = (0..20).map(|_| Follower::new(pool.clone(), &feed, start, None, None)).collect();
    // Never read until the end: more batches than the tail keeps pass it by.
    let mut lagging = Follower::new(pool.clone(), &feed, start, None, None);
    let only_two = EventFilter::parse(&["test.two"]).expect("a filter");
    let mut filtered = Follower::new(pool.clone(), &feed, start, Some(only_two), None);

    // The lagging follower catches up with the tail, then reads nothing more until the end,
    // while one commit at a time, each read by the tail before the next (one batch each), makes
    // more batches than the tail keeps.
    let first_id = commit_one(&feed, &pool, "test.one", 0).await;
    assert_eq!(ids(&take(&mut lagging, 1).await), [first_id]);
    assert_eq!(ids(&take(&mut eager[0], 1).await), [first_id]);
    let sequential = 1 + BACKLOG + 20;
    for n in 1..sequential {
        let id = commit_one(&feed, &pool, "test.one", n).await;
        assert_eq!(take(&mut eager[0], 1).await[0].id, id);
    }

    // A transaction that commits late holds back everything after it until it does.
    let mut late = pool.begin().await.expect("begin");
    let late_id = events::record(&mut late, "test.two", "test:late", serde_json::json!({})).await.expect("record");
    // Concurrent commits, of both types, from eight writers.
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (feed, pool) = (feed.clone(), pool.clone());
            tokio::spawn(async move {
                for n in 0..40 {
                    let kind = if n % 3 == 0 { "test.two" } else { "test.one" };
                    commit_one(&feed, &pool, kind, w * 1000 + n).await;
                }
            })
        })
        .collect();
    // A follower that starts now, from before everything, replays from the database.
    let mut replaying = Follower::new(pool.clone(), &feed, start, None, None);
    for writer in writers {
        writer.await.expect("writer");
    }
    feed.commit(late).await.expect("the late commit");
    let total = sequential + 1 + 8 * 40;

    // The log shows an event once every older transaction on the whole (shared) server has
    // ended: other tests' transactions may hold the last ones back for a moment.
    let since_start =
        || async { log(&pool).await.into_iter().skip_while(|e| Some(e.id) <= start).collect::<Vec<Event>>() };
    eventually("the log shows every event", Duration::from_secs(60), || async { since_start().await.len() >= total })
        .await;
    let expected = since_start().await;
    assert_eq!(expected.len(), total);
    assert!(expected.iter().any(|e| e.id == late_id));
    let all = ids(&expected);
    let mut seen = ids(&take(&mut eager[0], total - sequential).await);
    let mut first = all[..sequential].to_vec();
    first.append(&mut seen);
    assert_eq!(first, all, "the first follower");
    for (i, follower) in eager.iter_mut().enumerate().skip(1) {
        assert_eq!(ids(&take(follower, total).await), all, "follower {i}");
    }
    assert_eq!(ids(&take(&mut lagging, total - 1).await), all[1..], "the follower that fell behind");
    assert_eq!(ids(&take(&mut replaying, total).await), all, "the follower that replayed");
    let twos: Vec<i64> = expected.iter().filter(|e| e.event_type == "test.two").map(|e| e.id).collect();
    assert_eq!(ids(&take(&mut filtered, twos.len()).await), twos, "the filtered follower");

    // Nothing more comes to anyone: no event twice.
    let marker = commit_one(&feed, &pool, "test.two", 99_999).await;
    for follower in eager.iter_mut().chain([&mut lagging, &mut replaying, &mut filtered]) {
        assert_eq!(ids(&take(follower, 1).await), [marker]);
    }
}

#[tokio::test]
async fn a_follower_from_a_cursor_gets_what_came_after_it_then_what_comes_next() {
    let pool = migrated_pool().await;
    let feed = EventFeed::default();
    let mut before = Vec::new();
    for n in 0..5 {
        before.push(commit_one(&feed, &pool, "test.one", n).await);
    }
    // Another follower keeps the tail running ahead of the one that replays.
    let mut ahead = Follower::new(pool.clone(), &feed, Some(before[4]), None, None);
    let mut from_second = Follower::new(pool.clone(), &feed, Some(before[1]), None, None);
    let next = commit_one(&feed, &pool, "test.one", 5).await;
    assert_eq!(ids(&take(&mut ahead, 1).await), [next]);
    assert_eq!(ids(&take(&mut from_second, 4).await), [before[2], before[3], before[4], next]);
}

#[tokio::test]
async fn a_stream_filter_wants_what_the_webhook_outbox_wants() {
    let pool = migrated_pool().await;
    let filters: &[&[&str]] = &[
        &["*"],
        &["on_event"],
        &["task.*"],
        &["task.completed"],
        &["agent.*", "message.delivered"],
        &["on_agent_idle"],
        &["on_agent_started", "on_agent_stopped", "on_worker_stuck"],
        &["on_message_sent", "on_merge_complete", "on_pr_created", "on_ci_failed"],
        &["on_task_assigned"],
        &["wish.*", "on_task_assigned"],
    ];
    let events: &[(&str, serde_json::Value)] = &[
        ("task.completed", serde_json::json!({})),
        ("task.assigned", serde_json::json!({})),
        ("task.started", serde_json::json!({"assignee": "fox"})),
        ("task.started", serde_json::json!({"assignee": null})),
        ("task.started", serde_json::json!({})),
        ("task_run.started", serde_json::json!({})),
        ("agent.state_changed", serde_json::json!({"to": "idle"})),
        ("agent.state_changed", serde_json::json!({"to": "working"})),
        ("agent.spawned", serde_json::json!({})),
        ("agent.stopped", serde_json::json!({})),
        ("agent.stuck", serde_json::json!({})),
        ("message.delivered", serde_json::json!({})),
        ("merge.completed", serde_json::json!({})),
        ("wish.merged", serde_json::json!({})),
        ("pr.created", serde_json::json!({})),
        ("ci.failed", serde_json::json!({})),
        ("wish", serde_json::json!({})),
    ];
    // A NULL answer (no `assignee` at all) wants nothing, as in the outbox's `WHERE`.
    for entries in filters {
        let filter = EventFilter::parse(entries).expect("a valid filter");
        for (event_type, payload) in events {
            let sql: bool = sqlx::query_scalar("SELECT coalesce(webhook_wants($1, $2, $3), false)")
                .bind(filter.entries())
                .bind(event_type)
                .bind(payload)
                .fetch_one(&pool)
                .await
                .expect("webhook_wants");
            assert_eq!(filter.wants(event_type, payload), sql, "{entries:?} on {event_type} {payload}");
        }
    }
}

#[tokio::test]
async fn a_follower_that_read_before_an_event_was_visible_gets_it_from_a_tail_that_starts_past_it() {
    let pool = migrated_pool().await;
    let feed = EventFeed::default();
    let start = log(&pool).await.last().map(|e| e.id);
    // The tail starts with a pool whose one connection the test holds: it cannot read yet.
    let busy = sqlx::postgres::PgPoolOptions::new().max_connections(1).connect_with((*pool.connect_options()).clone());
    let busy = busy.await.expect("connect");
    let held = busy.acquire().await.expect("acquire");
    let _starter = Follower::new(busy.clone(), &feed, start, None, None);
    // An open transaction holds the horizon: the event committed now is not readable yet.
    let mut open = pool.begin().await.expect("begin");
    events::record(&mut open, "test.open", "test:open", serde_json::json!({})).await.expect("record");
    let id = commit_one(&feed, &pool, "test.one", 1).await;
    let mut follower = Follower::new(pool.clone(), &feed, start, None, None);
    let early = tokio::time::timeout(Duration::from_millis(300), follower.next()).await;
    assert!(early.is_err(), "held back while the older transaction runs: {early:?}");
    // The horizon passes the event, then the tail reads: its start is past this follower's read.
    open.rollback().await.expect("rollback");
    drop(held);
    assert_eq!(ids(&take(&mut follower, 1).await), [id], "no later event is needed to show it");
}
