//! The wake-up for everything that follows the event log (live streams, delivery loops), and
//! its sending. The `events` table is the truth; a missed wake-up only delays followers until
//! they poll (each [`Follower`] re-reads at least every second).
//!
//! Transactions that record events commit through [`EventFeed::commit`], which wakes this
//! process's followers at once and asks the process's notifier ([`EventFeed::announce`]) to send
//! `NOTIFY switchyard_events` on a connection of the pool, so other processes sharing the database
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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::{PgPool, Postgres, Transaction};
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;

use crate::db::events::{self, Event, Position};
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
    /// This process's notifications carry it as their payload: the listener skips them, since
    /// this process woke its followers at commit already. (Not the sender's backend: the
    /// notifier takes whichever pool connection is free.)
    origin: Arc<str>,
    /// The one reader of new events that live streams share.
    tail: Tail,
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
            origin: uuid::Uuid::new_v4().simple().to_string().into(),
            tail: Tail::default(),
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
        loop {
            tokio::select! {
                biased;
                changed = owed.changed() => if changed.is_err() { return },
                _ = stop.cancelled() => return,
            }
            loop {
                // Marked seen before sending: a commit after this point is announced again.
                owed.borrow_and_update();
                match tokio::time::timeout(NOTIFY_TIMEOUT, self.notify(&pool)).await {
                    Ok(Ok(())) => break,
                    Ok(Err(e)) => tracing::warn!(error = %e, "cannot send the events notification; retrying"),
                    Err(_) => tracing::warn!("the events notification timed out; retrying"),
                }
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

    /// One `NOTIFY` on a pool connection (a node's connections are few: none is kept for this),
    /// in one statement. Its commit need not wait for the disk (`set_config(…, true)` holds
    /// until the statement's own commit): a notification is never replayed after a crash anyway,
    /// and the lock every notifying commit takes is then held for a moment only.
    async fn notify(&self, pool: &PgPool) -> Result<(), sqlx::Error> {
        let hooks = self.hooks_owed.swap(false, Ordering::Relaxed);
        let channels: &[&str] = if hooks { &[CHANNEL, HOOKS] } else { &[CHANNEL] };
        let sent = sqlx::query!(
            "SELECT set_config('synchronous_commit', 'off', true), pg_notify(channel, $2)
             FROM UNNEST($1::text[]) AS channel",
            channels as &[&str],
            &*self.origin
        )
        .fetch_all(pool)
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
    /// since notifications sent meanwhile are lost. The `LISTEN` is on a connection of its own
    /// ([`crate::db::LISTEN_CONNECTIONS`]) to the database `pool` reaches: a listener keeps its
    /// connection for good, and taken from `pool` it would leave every request one short (with
    /// a pool of one, none at all).
    pub async fn listen(self, pool: PgPool, shutdown: CancellationToken) {
        let closed = self.closed.clone();
        let _close_streams = closed.drop_guard();
        let own = crate::db::beside((*pool.connect_options()).clone(), crate::db::LISTEN_CONNECTIONS);
        drop(pool);
        self.listen_on(&own, &shutdown).await;
        own.close().await;
    }

    async fn listen_on(&self, pool: &PgPool, shutdown: &CancellationToken) {
        while !shutdown.is_cancelled() {
            match PgListener::connect_with(pool).await {
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
                                    Ok(Some(n)) if n.payload() == &*self.origin => {}
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

/// Events per database read.
const PAGE: i64 = 500;
/// The tail re-reads at least this often: an event held back by another transaction's horizon
/// becomes visible without any notification of its own.
const POLL: Duration = Duration::from_secs(1);
/// Batches the tail keeps for followers that have not taken them yet; a follower further behind
/// reads the database itself until it is back.
pub const BACKLOG: usize = 64;

/// What the tail read in one go: the events right after `after`, in reading order.
#[derive(Clone)]
struct Batch {
    after: Option<Position>,
    events: Arc<[(Position, Event)]>,
}

/// The process's one reader of new events. After each wake-up (and at least every [`POLL`]) it
/// reads what came after the last event it read, with the horizon of `events::after`, and hands
/// it to every follower at once: fifty live streams cost one read per commit, not fifty. It runs
/// while anyone follows and stops when the last follower goes (or the process shuts down).
#[derive(Clone)]
struct Tail {
    batches: broadcast::Sender<Batch>,
    running: Arc<Mutex<bool>>,
}

impl Default for Tail {
    fn default() -> Tail {
        Tail { batches: broadcast::channel(BACKLOG).0, running: Arc::new(Mutex::new(false)) }
    }
}

impl Tail {
    /// A receiver of every batch read from now on; starts the reader if it is not running.
    fn follow(&self, pool: &PgPool, feed: &EventFeed) -> broadcast::Receiver<Batch> {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let receiver = self.batches.subscribe();
        if !*running {
            *running = true;
            tokio::spawn(self.clone().read(pool.clone(), feed.subscribe(), feed.closed()));
        }
        receiver
    }

    /// Whether to stop: nobody follows any more (decided under the lock a new follower takes).
    fn unfollowed(&self) -> bool {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if self.batches.receiver_count() == 0 {
            *running = false;
        }
        !*running
    }

    async fn read(self, pool: PgPool, mut wake: watch::Receiver<u64>, closed: CancellationToken) {
        let mut stopped = StopGuard(Some(self.running.clone()));
        // Followers start where they are; the tail starts at the head (a follower behind it reads
        // up to it itself).
        let mut cursor = None;
        let mut started = false;
        loop {
            if self.unfollowed() {
                // Marked stopped already, under the lock: a follower may have started another.
                stopped.0 = None;
                return;
            }
            wake.borrow_and_update();
            if let Err(e) = self.read_new(&pool, &mut cursor, &mut started).await {
                tracing::warn!(error = %e, "cannot read new events; retrying");
            }
            tokio::select! {
                _ = closed.cancelled() => return,
                _ = wake.changed() => {}
                _ = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// Reads and sends everything after `cursor` up to the horizon.
    async fn read_new(
        &self,
        pool: &PgPool,
        cursor: &mut Option<Position>,
        started: &mut bool,
    ) -> Result<(), sqlx::Error> {
        let mut conn = pool.acquire().await?;
        if !*started {
            *cursor = events::head_position(&mut conn).await?;
            *started = true;
            // Where it starts, told at once: a follower that already read the database up to
            // an older horizon (an event of another transaction held back then, visible by
            // now) sees the gap and reads it, rather than waiting for a later event to show it.
            let _ = self.batches.send(Batch { after: *cursor, events: Arc::new([]) });
        }
        loop {
            let page = events::after_position(&mut conn, *cursor, PAGE).await?;
            let Some((last, _)) = page.last() else { return Ok(()) };
            let (last, full) = (*last, page.len() as i64 == PAGE);
            // No receiver is no error: the next turn stops.
            let _ = self.batches.send(Batch { after: *cursor, events: page.into() });
            *cursor = Some(last);
            if !full {
                return Ok(());
            }
        }
    }
}

/// Marks the tail stopped however its task ends (shutdown, a panic), so the next follower
/// starts another.
struct StopGuard(Option<Arc<Mutex<bool>>>);

impl Drop for StopGuard {
    fn drop(&mut self) {
        if let Some(running) = &self.0 {
            *running.lock().unwrap_or_else(|e| e.into_inner()) = false;
        }
    }
}

/// Follows the event log from a cursor: replays what came after it from the database, then
/// takes the batches the process's [`Tail`] reads for every follower, keeping those it wants. A
/// follower that falls behind the tail (a gap, or more than [`BACKLOG`] batches unread) reads the
/// database itself again until it is back. Every read has the horizon of `events::after`, which
/// holds back events of still-running transactions, so a late commit is never skipped. The API's
/// event stream and the dashboard's live updates both use it.
pub struct Follower {
    pool: PgPool,
    /// The last event handed over (or skipped as unwanted); `None` before the first.
    cursor: Option<i64>,
    /// `cursor`'s position, once looked up.
    position: Option<Position>,
    filter: Option<EventFilter>,
    project: Option<String>,
    tail: broadcast::Receiver<Batch>,
    /// The last read of the database reached the horizon: the tail's batches carry on from here.
    caught_up: bool,
    closed: CancellationToken,
    buffer: VecDeque<Event>,
}

impl Follower {
    /// Follows from after `cursor` (from the beginning when `None`; from now when it names no
    /// event), keeping only events that match `filter` and belong to `project` when those are
    /// given.
    pub fn new(
        pool: PgPool,
        feed: &EventFeed,
        cursor: Option<i64>,
        filter: Option<EventFilter>,
        project: Option<String>,
    ) -> Follower {
        let tail = feed.tail.follow(&pool, feed);
        Follower {
            pool,
            cursor,
            position: None,
            filter,
            project,
            tail,
            caught_up: false,
            closed: feed.closed(),
            buffer: VecDeque::new(),
        }
    }

    fn wanted(&self, event: &Event) -> bool {
        self.project.as_ref().is_none_or(|p| event.project.as_ref() == Some(p))
            && self.filter.as_ref().is_none_or(|f| f.wants(&event.event_type, &event.payload))
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

    /// Takes the events after the cursor: the wanted ones into the buffer.
    fn take(&mut self, events: impl IntoIterator<Item = (Position, Event)>) {
        for (position, event) in events {
            if self.position.is_some_and(|p| position <= p) {
                continue;
            }
            self.position = Some(position);
            self.cursor = Some(event.id);
            if self.wanted(&event) {
                self.buffer.push_back(event);
            }
        }
    }

    /// Moves on: reads a page from the database while behind the tail, else takes the tail's
    /// next batch (waiting for it). `None` when the process shuts down or the database is gone.
    async fn fill(&mut self) -> Option<()> {
        if !self.caught_up {
            let mut conn = self.pool.acquire().await.ok()?;
            if let (Some(id), None) = (self.cursor, self.position) {
                self.position = match events::position(&mut conn, id).await.ok()? {
                    Some(p) => Some(p),
                    None => events::head_position(&mut conn).await.ok()?,
                };
                self.cursor = self.position.map(|p| p.id);
            }
            let page = events::after_position(&mut conn, self.position, PAGE).await.ok()?;
            drop(conn);
            self.caught_up = (page.len() as i64) < PAGE;
            self.take(page);
            return Some(());
        }
        let received = tokio::select! {
            _ = self.closed.cancelled() => return None,
            received = self.tail.recv() => received,
        };
        match received {
            // A batch that starts after the cursor left a gap (the tail started ahead of this
            // follower, or restarted): read it from the database.
            Ok(batch) if batch.after > self.position => self.caught_up = false,
            Ok(batch) => self.take(batch.events.iter().cloned()),
            Err(broadcast::error::RecvError::Lagged(_)) => self.caught_up = false,
            Err(broadcast::error::RecvError::Closed) => return None,
        }
        Some(())
    }
}
