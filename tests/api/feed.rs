//! The wake-up after commit: a commit that records events wakes this process's followers at once
//! and, through the process's notifier, every other process listening on the database.

use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;
use switchyard::db::events;
use switchyard::feed::{EventFeed, CHANNEL, HOOKS};
use tokio_util::sync::CancellationToken;

use crate::helpers::fresh_database;

async fn migrated_pool() -> PgPool {
    let (url, _) = fresh_database().await;
    let pool = PgPool::connect(&url).await.expect("connect");
    switchyard::db::migrate(&pool).await.expect("migrate");
    pool
}

/// Stands for another process: a `LISTEN switchyard_events` of its own.
async fn other_process(pool: &PgPool) -> PgListener {
    let mut listener = PgListener::connect_with(pool).await.expect("connect");
    listener.listen(CHANNEL).await.expect("listen");
    listener
}

async fn record_and_commit(feed: &EventFeed, pool: &PgPool) {
    let mut tx = pool.begin().await.expect("begin");
    events::record(&mut tx, "test.fed", "test:1", serde_json::json!({})).await.expect("record");
    feed.commit(tx).await.expect("commit");
}

async fn hears(listener: &mut PgListener) {
    let heard = tokio::time::timeout(Duration::from_secs(10), listener.recv())
        .await
        .expect("a notification within 10 s")
        .expect("the listener's connection");
    assert_eq!(heard.channel(), CHANNEL);
}

#[tokio::test]
async fn a_commit_through_the_feed_wakes_this_process_at_once_and_notifies_other_processes() {
    let pool = migrated_pool().await;
    let mut other = other_process(&pool).await;
    let feed = EventFeed::default();
    let here = feed.subscribe();
    let stop = CancellationToken::new();
    let notifier = tokio::spawn(feed.clone().announce(pool.clone(), stop.clone()));
    record_and_commit(&feed, &pool).await;
    assert!(here.has_changed().expect("the feed is open"), "this process's followers wake at commit");
    hears(&mut other).await;
    // A second commit is announced again (not folded into the first, which was already sent).
    record_and_commit(&feed, &pool).await;
    hears(&mut other).await;
    stop.cancel();
    notifier.await.expect("the notifier ends when stopped");
}

#[tokio::test]
async fn a_one_shot_command_notifies_other_processes_of_its_commits_before_it_exits() {
    let pool = migrated_pool().await;
    let mut other = other_process(&pool).await;
    let feed = EventFeed::default();
    // No notifier runs while the command commits (`switchyard token create`): the commit is owed.
    record_and_commit(&feed, &pool).await;
    feed.flush(pool.clone()).await;
    hears(&mut other).await;
}

#[tokio::test]
async fn a_recorded_hook_wakes_this_process_at_once_and_other_processes_workers_after_it() {
    let pool = migrated_pool().await;
    let mut other = PgListener::connect_with(&pool).await.expect("connect");
    other.listen(HOOKS).await.expect("listen");
    let feed = EventFeed::default();
    let here = feed.subscribe_hooks();
    let stop = CancellationToken::new();
    let notifier = tokio::spawn(feed.clone().announce(pool.clone(), stop.clone()));
    feed.hook_recorded();
    assert!(here.has_changed().expect("the feed is open"), "this process's worker wakes at once");
    let heard = tokio::time::timeout(Duration::from_secs(10), other.recv())
        .await
        .expect("a notification within 10 s")
        .expect("the listener's connection");
    assert_eq!(heard.channel(), HOOKS);
    stop.cancel();
    notifier.await.expect("the notifier ends when stopped");
}
