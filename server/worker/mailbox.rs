//! The node's mailbox loop: whenever something happens (any event wakes it; a timer covers lost
//! notifications), it finds the idle agents of this node with mail waiting and delivers each
//! one's oldest message ([`super::delivery`]). Agents are served concurrently, each by at most
//! one delivery at a time, so messages to one agent arrive one by one, in order.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::db::messages::delivery::{self as record, Due};
use crate::worker::delivery::{Delivery, Outcome};

/// The longest the loop sleeps without being woken.
const POLL: Duration = Duration::from_secs(1);
/// The shortest time between two looks for mail: a busy fleet's events (every agent's every
/// state change wakes the loop) then cost one query per gap, not one each; a delivery waits for
/// at most this long on top of its agent's settle time.
const MIN_GAP: Duration = Duration::from_millis(250);
/// How long an agent whose message stays in its input line is left alone.
const STUCK_BACKOFF: Duration = Duration::from_secs(30);
/// How long an agent that was not ready (its pane unreadable, a turn just started) is left alone.
const NOT_NOW_BACKOFF: Duration = Duration::from_millis(200);
/// How long after a failed run (a database or tmux error) the agent is tried again.
const ERROR_BACKOFF: Duration = Duration::from_secs(2);

pub struct Mailbox {
    pub delivery: Delivery,
    pub node_id: String,
}

impl Mailbox {
    /// Runs until `shutdown`; a delivery cut short by it goes on after the restart from its record.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut wake = self.delivery.feed.subscribe();
        let mut running: JoinSet<anyhow::Result<Outcome>> = JoinSet::new();
        // Which agent each running task serves (a task that panics still frees its agent).
        let mut busy: HashMap<tokio::task::Id, Uuid> = HashMap::new();
        let mut resting: HashMap<Uuid, Instant> = HashMap::new();
        let mut looked = Instant::now().checked_sub(MIN_GAP).unwrap_or_else(Instant::now);
        loop {
            let gap = (looked + MIN_GAP).saturating_duration_since(Instant::now());
            if !gap.is_zero() {
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(gap) => {}
                }
            }
            looked = Instant::now();
            resting.retain(|_, until| *until > Instant::now());
            let nap =
                resting.values().map(|until| until.saturating_duration_since(Instant::now())).fold(POLL, Duration::min);
            match self.due().await {
                Ok(due) => {
                    for due in due {
                        if busy.values().any(|a| *a == due.agent_id) || resting.contains_key(&due.agent_id) {
                            continue;
                        }
                        let (agent, delivery) = (due.agent_id, self.delivery.clone());
                        let task = running.spawn(async move { delivery.deliver(&due).await });
                        busy.insert(task.id(), agent);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "finding messages to deliver"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = wake.changed() => {}
                Some(done) = running.join_next_with_id(), if !running.is_empty() => {
                    let (task, outcome) = match done {
                        Ok((task, outcome)) => (task, outcome),
                        Err(e) => (e.id(), Err(anyhow::anyhow!("the delivery task failed: {e}"))),
                    };
                    if let (Some(agent), Some(rest)) = (busy.remove(&task), rest_after(&outcome)) {
                        resting.insert(agent, Instant::now() + rest);
                    }
                }
                _ = tokio::time::sleep(nap) => {}
            }
        }
        running.shutdown().await;
    }

    async fn due(&self) -> anyhow::Result<Vec<Due>> {
        let mut conn = self.delivery.db.acquire().await?;
        Ok(record::due_on_node(&mut conn, &self.node_id).await?)
    }
}

/// How long to leave an agent alone after a delivery run, and log why.
fn rest_after(outcome: &anyhow::Result<Outcome>) -> Option<Duration> {
    match outcome {
        Ok(Outcome::Delivered(by)) => {
            tracing::debug!(confirmed_by = by.as_str(), "message delivered");
            None
        }
        Ok(Outcome::NotNow(why)) => {
            tracing::debug!(why, "delivery waits");
            Some(NOT_NOW_BACKOFF)
        }
        Ok(Outcome::Stuck(why)) => {
            tracing::warn!(why, "a message stays in its agent's input line");
            Some(STUCK_BACKOFF)
        }
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "delivering a message");
            Some(ERROR_BACKOFF)
        }
    }
}
