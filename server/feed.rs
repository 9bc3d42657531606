//! The wake-up for everything that follows the event log (live streams, delivery loops): one
//! PostgreSQL `LISTEN switchyard_events` per process, fanned out through a watch channel. The
//! `events` table is the truth; a missed notification only delays followers until they poll.
//! [`Follower`] reads the log from a cursor and waits on that wake-up.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::db::events::{self, Event};
use crate::domain::webhook::EventFilter;

pub const CHANNEL: &str = "switchyard_events";
/// Sent (at commit) only by transactions that queued webhook deliveries, so delivery loops are
/// not woken by every event.
pub const DELIVERIES: &str = "switchyard_deliveries";

#[derive(Clone)]
pub struct EventFeed {
    wake: Arc<watch::Sender<u64>>,
    deliveries: Arc<watch::Sender<u64>>,
    closed: CancellationToken,
}

impl Default for EventFeed {
    fn default() -> EventFeed {
        EventFeed {
            wake: Arc::new(watch::channel(0).0),
            deliveries: Arc::new(watch::channel(0).0),
            closed: CancellationToken::new(),
        }
    }
}

impl EventFeed {
    /// A receiver that sees every wake-up after this call.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.wake.subscribe()
    }

    /// A receiver that sees every wake-up for queued webhook deliveries after this call.
    pub fn subscribe_deliveries(&self) -> watch::Receiver<u64> {
        self.deliveries.subscribe()
    }

    pub fn wake(&self) {
        self.wake.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn wake_all(&self) {
        self.wake();
        self.deliveries.send_modify(|n| *n = n.wrapping_add(1));
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
                    if let Err(e) = listener.listen_all([CHANNEL, DELIVERIES]).await {
                        tracing::warn!(error = %e, "LISTEN failed; retrying");
                    } else {
                        self.wake_all();
                        loop {
                            tokio::select! {
                                _ = shutdown.cancelled() => return,
                                received = listener.try_recv() => match received {
                                    Ok(Some(n)) if n.channel() == DELIVERIES => {
                                        self.deliveries.send_modify(|n| *n = n.wrapping_add(1));
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

    fn wants(&self, event: &Event) -> bool {
        self.project.as_ref().is_none_or(|p| event.project.as_ref() == Some(p))
            && self.filter.as_ref().is_none_or(|f| f.matches(&event.event_type, &event.payload))
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
            events::after(&mut conn, self.cursor, PAGE).await.ok()?
        };
        if let Some(last) = page.last() {
            self.cursor = Some(last.id);
            let wanted: Vec<Event> = page.into_iter().filter(|e| self.wants(e)).collect();
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
