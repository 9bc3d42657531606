//! The wake-up for everything that follows the event log (live streams, delivery loops): one
//! PostgreSQL `LISTEN switchyard_events` per process, fanned out through a watch channel. The
//! `events` table is the truth; a missed notification only delays followers until they poll.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use sqlx::PgPool;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

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
