//! The node's mailbox loop: whenever something happens (any event wakes it; a timer covers lost
//! notifications), it finds the idle agents of this node with mail waiting and delivers each
//! one's oldest message ([`super::delivery`]). Agents are served concurrently, each by at most
//! one delivery at a time, so messages to one agent arrive one by one, in order.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::app::delivery_records::{self, Due};
use crate::worker::delivery::{Delivery, Outcome};

/// The longest the loop sleeps without being woken.
const POLL: Duration = Duration::from_secs(1);
/// The shortest time between two looks for mail: a busy fleet's events (every agent's every
/// state change wakes the loop) then cost one query per gap, not one each (at most 20 a second,
/// an indexed read); a message waits for at most this long before its delivery starts.
const MIN_GAP: Duration = Duration::from_millis(50);
/// How long an agent whose message stays in its input line is left alone.
const STUCK_BACKOFF: Duration = Duration::from_secs(30);
/// How long an agent that was not ready (its pane unreadable, a turn just started) is left alone.
const NOT_NOW_BACKOFF: Duration = Duration::from_millis(200);
/// How long after a failed run (a database or tmux error) the agent is tried again.
const ERROR_BACKOFF: Duration = Duration::from_secs(2);

pub struct Mailbox {
    pub delivery: Delivery,
    pub node_id: String,
    running: JoinSet<anyhow::Result<Outcome>>,
    /// Which agent each running delivery serves (a task that panics still frees its agent).
    busy: HashMap<tokio::task::Id, Uuid>,
    /// Agents left alone until then (their last run did not deliver).
    resting: HashMap<Uuid, Instant>,
}

/// What one [`Mailbox::tick`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Tick {
    /// Deliveries started (one per agent with mail due, idle and not left alone).
    pub started: usize,
    /// Deliveries that had finished by the end of the tick, and of those, how many delivered.
    pub finished: usize,
    pub delivered: usize,
}

impl Mailbox {
    pub fn new(delivery: Delivery, node_id: String) -> Mailbox {
        Mailbox { delivery, node_id, running: JoinSet::new(), busy: HashMap::new(), resting: HashMap::new() }
    }

    /// Runs until `shutdown`; a delivery cut short by it goes on after the restart from its record.
    pub async fn run(mut self, shutdown: CancellationToken) {
        let mut wake = self.delivery.feed.subscribe();
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
            if let Err(e) = self.tick().await {
                tracing::warn!(error = %e, "finding messages to deliver");
            }
            let nap = self.nap();
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = wake.changed() => {}
                Some(_) = self.finished(), if !self.running.is_empty() => {}
                _ = tokio::time::sleep(nap) => {}
            }
        }
        self.running.shutdown().await;
    }

    /// One step: finds the mail due on this node and starts a delivery for each agent that has
    /// none running and is not left alone; then takes in the deliveries that have finished
    /// (without waiting for any).
    pub async fn tick(&mut self) -> anyhow::Result<Tick> {
        self.resting.retain(|_, until| *until > Instant::now());
        let mut tick = Tick::default();
        for due in self.due().await? {
            if self.busy.values().any(|a| *a == due.agent_id) || self.resting.contains_key(&due.agent_id) {
                continue;
            }
            let (agent, delivery) = (due.agent_id, self.delivery.clone());
            let task = self.running.spawn(async move { delivery.deliver(&due).await });
            self.busy.insert(task.id(), agent);
            tick.started += 1;
        }
        while let Some(done) = self.running.try_join_next_with_id() {
            tick.finished += 1;
            tick.delivered += usize::from(self.take_in(done));
        }
        Ok(tick)
    }

    /// Waits for the next running delivery to finish and takes it in; `None` when none runs.
    /// True when it delivered.
    pub async fn finished(&mut self) -> Option<bool> {
        let done = self.running.join_next_with_id().await?;
        Some(self.take_in(done))
    }

    /// Frees the delivery's agent, leaving it alone for a while when it did not deliver.
    fn take_in(&mut self, done: Result<(tokio::task::Id, anyhow::Result<Outcome>), tokio::task::JoinError>) -> bool {
        let (task, outcome) = match done {
            Ok((task, outcome)) => (task, outcome),
            Err(e) => (e.id(), Err(anyhow::anyhow!("the delivery task failed: {e}"))),
        };
        let delivered = matches!(outcome, Ok(Outcome::Delivered(_)));
        if let (Some(agent), Some(rest)) = (self.busy.remove(&task), rest_after(&outcome)) {
            self.resting.insert(agent, Instant::now() + rest);
        }
        delivered
    }

    /// The longest the loop may sleep: until the next agent left alone is due again, at most [`POLL`].
    fn nap(&self) -> Duration {
        self.resting.values().map(|until| until.saturating_duration_since(Instant::now())).fold(POLL, Duration::min)
    }

    async fn due(&self) -> anyhow::Result<Vec<Due>> {
        let mut conn = self.delivery.db.acquire().await?;
        Ok(delivery_records::due_on_node(&mut conn, &self.node_id).await?)
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
