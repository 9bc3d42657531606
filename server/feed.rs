//! The wake-up for everything that follows the event log (live streams, delivery loops), and
//! its sending. The `events` table is the truth; a missed wake-up only delays followers until
//! they poll (each [`Follower`] re-reads at least every second).
//!
//! Transactions that record events commit through [`EventFeed::commit`], which wakes this
//! process's followers at once and asks the process's notifier ([`EventFeed::announce`]) to send
//! `NOTIFY switchyard_events` on its own connection, so other processes sharing the database
//! (server replicas, worker nodes) wake too; each process receives those with one
//! `LISTEN` ([`EventFeed::listen`]) fanned out through a watch channel.
//!
//! Why not a `NOTIFY` inside each writing transaction (a trigger did that once): PostgreSQL
//! serialises every committing transaction that has notifications pending — `PreCommit_Notify`
//! takes one database-wide lock and holds it past the commit's WAL flush — so every
//! event-writing commit in the system queued behind the others (pgbench, 8 clients, a one-row
//! insert: 3,608 tps without, 1,857 with). The notifier sends one `NOTIFY` at a time, outside any
//! writer's transaction, and rests a moment after each; the commits made meanwhile cost exactly
//! one more, so the lock is taken once per burst instead of once per commit, and never by a writer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::{Connection, PgConnection, PgPool, Postgres, Transaction};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::db::events::{self, Event};
use crate::domain::webhook::EventFilter;

pub const CHANNEL: &str = "switchyard_events";
/// Sent by the notifier after a commit that recorded an agent's hook ([`EventFeed::hook_recorded`]),
/// so workers read hooks when there are new ones instead of on every reading of a screen.
pub const HOOKS: &str = "switchyard_hooks";

/// How long the notifier waits before trying again after an error.
const RETRY: Duration = Duration::from_secs(1);
/// How long one `NOTIFY` (with connecting) may take before it counts as failed, which also bounds
/// the last one at shutdown.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);
/// The notifier's rest after each `NOTIFY`: under a stream of commits it then sends one per
/// interval instead of one per commit. Each is a transaction of its own that wakes every
/// listener; sent back to back beside 8 writers they took a quarter of the writers' throughput
/// (pgbench, one-row inserts). Another process hears of a commit at most this much later, of the
/// first after a quiet spell at once.
const SPACING: Duration = Duration::from_millis(5);

#[derive(Clone)]
pub struct EventFeed {
    wake: Arc<watch::Sender<u64>>,
    hooks: Arc<watch::Sender<u64>>,
    closed: CancellationToken,
    /// Counts commits that other processes must hear of. The receiver is made with the channel,
    /// so commits made before the notifier starts are owed too.
    owed: Arc<watch::Sender<u64>>,
    owed_since_start: watch::Receiver<u64>,
    /// A hook was recorded since the last notification: the next one also says so.
    hooks_owed: Arc<AtomicBool>,
    /// The notifier's backend: the listener skips its notifications, since this process woke
    /// its followers at commit already.
    notifier_pid: Arc<AtomicU32>,
}

impl Default for EventFeed {
    fn default() -> EventFeed {
        let (owed, owed_since_start) = watch::channel(0);
        EventFeed {
            wake: Arc::new(watch::channel(0).0),
            hooks: Arc::new(watch::channel(0).0),
            closed: CancellationToken::new(),
            owed: Arc::new(owed),
            owed_since_start,
            hooks_owed: Arc::new(AtomicBool::new(false)),
            notifier_pid: Arc::new(AtomicU32::new(0)),
        }
    }
}

impl EventFeed {
    /// A receiver that sees every wake-up after this call.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.wake.subscribe()
    }

    /// A receiver that sees every hook recorded after this call (on any process), and every
    /// reconnect of the listener (hooks may have been missed).
    pub fn subscribe_hooks(&self) -> watch::Receiver<u64> {
        self.hooks.subscribe()
    }

    pub fn wake(&self) {
        self.wake.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Commits a transaction that recorded events (or queued webhook deliveries), then wakes this
    /// process's followers and delivery loops and has the notifier tell the other processes.
    /// Transactions that record no events commit plainly.
    pub async fn commit(&self, tx: Transaction<'_, Postgres>) -> Result<(), sqlx::Error> {
        tx.commit().await?;
        self.committed();
        Ok(())
    }

    /// A statement that recorded events committed on its own (no transaction around it): wakes
    /// the followers as [`EventFeed::commit`] does.
    pub fn committed(&self) {
        self.wake();
        self.owed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// An agent's hook was committed: wakes this process's worker at once and has the notifier
    /// tell the other processes' workers too.
    pub fn hook_recorded(&self) {
        self.hooks.send_modify(|n| *n = n.wrapping_add(1));
        self.hooks_owed.store(true, Ordering::Relaxed);
        self.owed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The notifier: sends `NOTIFY switchyard_events` after this process's commits, one at a time
    /// and at most one per [`SPACING`], until `stop` — then once more if a commit is still owed, so
    /// a process that is ending (a one-shot command, a server that drained) still wakes the others.
    /// Errors are logged and retried; writers never wait for it.
    pub async fn announce(self, pool: PgPool, stop: CancellationToken) {
        let mut owed = self.owed_since_start.clone();
        let mut conn = None;
        loop {
            tokio::select! {
                biased;
                changed = owed.changed() => if changed.is_err() { return },
                _ = stop.cancelled() => return,
            }
            loop {
                // Marked seen before sending: a commit after this point is announced again.
                owed.borrow_and_update();
                match tokio::time::timeout(NOTIFY_TIMEOUT, self.notify(&pool, &mut conn)).await {
                    Ok(Ok(())) => break,
                    Ok(Err(e)) => tracing::warn!(error = %e, "cannot send the events notification; retrying"),
                    Err(_) => tracing::warn!("the events notification timed out; retrying"),
                }
                conn = None;
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(RETRY) => {}
                }
            }
            tokio::time::sleep(SPACING).await;
        }
    }

    /// For a one-shot command: sends the notification its commits owe, if any, before it exits.
    pub async fn flush(self, pool: PgPool) {
        let stopped = CancellationToken::new();
        stopped.cancel();
        self.announce(pool, stopped).await;
    }

    /// One `NOTIFY` on the notifier's own connection (made on first use). Its commit need not
    /// wait for the disk: a notification is never replayed after a crash anyway, and the lock
    /// every notifying commit takes is then held for a moment only.
    async fn notify(&self, pool: &PgPool, conn: &mut Option<PgConnection>) -> Result<(), sqlx::Error> {
        let conn = match conn {
            Some(conn) => conn,
            None => {
                let mut new = PgConnection::connect_with(&pool.connect_options()).await?;
                sqlx::query!("SET synchronous_commit = off").execute(&mut new).await?;
                let pid = sqlx::query_scalar!(r#"SELECT pg_backend_pid() AS "pid!""#).fetch_one(&mut new).await?;
                self.notifier_pid.store(pid as u32, Ordering::Relaxed);
                conn.insert(new)
            }
        };
        let hooks = self.hooks_owed.swap(false, Ordering::Relaxed);
        let channels: &[&str] = if hooks { &[CHANNEL, HOOKS] } else { &[CHANNEL] };
        let sent =
            sqlx::query!("SELECT pg_notify(channel, '') FROM UNNEST($1::text[]) AS channel", channels as &[&str])
                .execute(conn)
                .await;
        if sent.is_err() && hooks {
            // Owed still: the retry says it.
            self.hooks_owed.store(true, Ordering::Relaxed);
        }
        sent.map(drop)
    }

    fn wake_all(&self) {
        self.wake();
        self.hooks.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Fires when the process shuts down, so long-lived streams end and the server can drain.
    pub fn closed(&self) -> CancellationToken {
        self.closed.clone()
    }

    /// Listens until `shutdown`, reconnecting after errors; wakes followers after a reconnect,
    /// since notifications sent meanwhile are lost.
    pub async fn listen(self, pool: PgPool, shutdown: CancellationToken) {
        let closed = self.closed.clone();
        let _close_streams = closed.drop_guard();
        while !shutdown.is_cancelled() {
            match PgListener::connect_with(&pool).await {
                Ok(mut listener) => {
                    if let Err(e) = listener.listen_all([CHANNEL, HOOKS]).await {
                        tracing::warn!(error = %e, "LISTEN failed; retrying");
                    } else {
                        self.wake_all();
                        loop {
                            tokio::select! {
                                _ = shutdown.cancelled() => return,
                                received = listener.try_recv() => match received {
                                    // This process woke its own followers and worker at commit.
                                    Ok(Some(n)) if n.process_id() == self.notifier_pid.load(Ordering::Relaxed) => {}
                                    Ok(Some(n)) if n.channel() == HOOKS => {
                                        self.hooks.send_modify(|n| *n = n.wrapping_add(1));
                                    }
                                    Ok(Some(_)) => self.wake(),
                                    Ok(None) => {
                                        tracing::warn!("event notifications interrupted; reconnected");
                                        self.wake_all();
                                    }
                                    Err(e) => {
                                        tracing::warn!(error = %e, "event notifications failed; reconnecting");
                                        break;
                                    }
                                },
                            }
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot listen for events; retrying"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }
}

/// Events per database read while replaying.
const PAGE: i64 = 500;
/// Followers re-read at least this often: an event held back by another transaction's horizon
/// becomes visible without any notification of its own.
const POLL: Duration = Duration::from_secs(1);

/// Follows the event log from a cursor: replays what came after it, then waits for more. Reads
/// use `events::after`, whose horizon holds back events of still-running transactions, so a late
/// commit is never skipped. The API's event stream and the dashboard's live updates both use it.
pub struct Follower {
    pool: PgPool,
    cursor: Option<i64>,
    filter: Option<EventFilter>,
    project: Option<String>,
    wake: watch::Receiver<u64>,
    closed: CancellationToken,
    buffer: VecDeque<Event>,
}

impl Follower {
    /// Follows from after `cursor` (from the beginning when `None`), keeping only events that
    /// match `filter` and belong to `project` when those are given.
    pub fn new(
        pool: PgPool,
        feed: &EventFeed,
        cursor: Option<i64>,
        filter: Option<EventFilter>,
        project: Option<String>,
    ) -> Follower {
        Follower {
            pool,
            cursor,
            filter,
            project,
            wake: feed.subscribe(),
            closed: feed.closed(),
            buffer: VecDeque::new(),
        }
    }

    fn in_project(&self, event: &Event) -> bool {
        self.project.as_ref().is_none_or(|p| event.project.as_ref() == Some(p))
    }

    /// The next wanted event, waiting for one; `None` ends the stream (shutdown, database gone).
    pub async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.buffer.pop_front() {
                return Some(event);
            }
            self.fill().await?;
        }
    }

    /// Every wanted event that is there to read now (at least one, waiting for it): a burst of
    /// changes arrives as one batch. `None` ends the stream.
    pub async fn next_batch(&mut self) -> Option<Vec<Event>> {
        while self.buffer.is_empty() {
            self.fill().await?;
        }
        Some(self.buffer.drain(..).collect())
    }

    /// Reads the next page into the buffer, or waits for a wake-up (or the poll interval) when
    /// there is nothing new. `None` when the process shuts down or the database is gone.
    async fn fill(&mut self) -> Option<()> {
        self.wake.borrow_and_update();
        let page = {
            let mut conn = self.pool.acquire().await.ok()?;
            let wants = self.filter.as_ref().map(EventFilter::entries);
            events::after_matching(&mut conn, self.cursor, PAGE, wants).await.ok()?
        };
        if let Some((last, _)) = page.last() {
            self.cursor = Some(last.id);
            let wanted: Vec<Event> =
                page.into_iter().filter(|(e, wanted)| *wanted && self.in_project(e)).map(|(e, _)| e).collect();
            self.buffer.extend(wanted);
            return Some(());
        }
        tokio::select! {
            _ = self.closed.cancelled() => None,
            changed = self.wake.changed() => changed.ok(),
            _ = tokio::time::sleep(POLL) => Some(()),
        }
    }
}
