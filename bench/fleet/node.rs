//! One node of the fleet benchmark, a process of its own: the pools, `LISTEN`, notifier, webhook
//! sender, state file writer and conductor that `switchyard worker` runs, and the worker's loops
//! over simulated panes (see `bench/fleet.rs`), until its stdin closes; then its report.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use sqlx::postgres::PgConnectOptions;
use sqlx::PgPool;
use switchyard::app::{self, delivery_records, worker_records};
use switchyard::db::{self, events, messages::delivery as record};
use switchyard::detect::decision::{Decision, Source};
use switchyard::domain::agent::Activity;
use switchyard::domain::message::Confirmation;
use switchyard::feed::EventFeed;
use switchyard::worker::watcher::{self, Writer, ACTIVITY_EVERY};
use switchyard::worker::{conductor::Conductor, reconciler, state_file, webhook_sender};
use switchyard::worker::{HEARTBEATS_MISSED, HEARTBEAT_EVERY};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{print_report, until_stdin_closes, Samples};

/// Set (to the node's number) in a node process's environment.
pub const NODE: &str = "BENCH_FLEET_NODE";
/// How many agents a node claims in all, so the fleet's agents spread evenly.
pub const CLAIM_AT_MOST: &str = "BENCH_FLEET_CLAIM";

/// As the fleet's loop: claims at least every `POLL`, after commits at most once per `CLAIM_GAP`.
const POLL: Duration = Duration::from_secs(1);
const CLAIM_GAP: Duration = Duration::from_millis(50);
/// As the mailbox: at most one look for due mail per `MAIL_GAP`.
const MAIL_GAP: Duration = Duration::from_millis(50);

/// What the simulated panes show, for the activity and mail loops.
type Shown = Arc<Mutex<HashMap<Uuid, (Activity, Instant)>>>;

/// How long the simulated agents spend in each part of a turn (see `bench/fleet.rs`).
#[derive(Clone, Copy)]
struct Rates {
    turn: f64,
    idle: f64,
    permission_every: u64,
}

pub fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?.block_on(run())
}

/// The parts of a node the loops share.
#[derive(Clone)]
struct Node {
    pool: PgPool,
    feed: EventFeed,
    node_id: String,
    writer: Arc<Writer>,
    samples: Samples,
    shown: Shown,
    /// Subjects (`agent:<name>`) of this node's agents: their events are not fan-out.
    mine: Arc<Mutex<HashSet<String>>>,
    rates: Rates,
    shutdown: CancellationToken,
}

async fn run() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL")?;
    let claim_at_most: usize = std::env::var(CLAIM_AT_MOST)?.parse()?;
    let rates = Rates {
        turn: super::common::env_num("BENCH_TURN_S", 20) as f64,
        idle: super::common::env_num("BENCH_IDLE_S", 10) as f64,
        permission_every: super::common::env_num("BENCH_PERMISSION_EVERY", 5).max(1),
    };
    let dir = tempfile::tempdir()?;
    let info = switchyard::node::NodeInfo::load(dir.path())?;
    let options: PgConnectOptions = url.parse()?;
    let pool = db::pool(options.application_name(&db::application_name(&info.node_id))).await?;
    let logins = switchyard::providers::logins::UserConfig::under(&dir.path().join("home"));
    let providers = switchyard::providers::LiveProviders::load(dir.path(), logins)?;
    let feed = EventFeed::default();
    let shutdown = CancellationToken::new();
    let drained = CancellationToken::new();
    tokio::spawn(feed.clone().listen(pool.clone(), shutdown.clone()));
    tokio::spawn(feed.clone().announce(pool.clone(), drained.clone()));
    let settings = Arc::new(switchyard::webhooks::WebhookSettings::default());
    let sender = webhook_sender::run_in_background(&pool, feed.clone(), settings, shutdown.clone());
    tokio::spawn(sender);
    tokio::spawn(state_file::run(pool.clone(), feed.clone(), dir.path().to_path_buf(), shutdown.clone()));
    let ctx = app::Ctx::new(app::Parts {
        db: pool.clone(),
        feed: feed.clone(),
        node: info.clone(),
        data_dir: dir.path().to_path_buf(),
        providers,
        panes: None,
    });
    tokio::spawn(Conductor { ctx }.run(shutdown.clone()));
    let mut tx = pool.begin().await?;
    worker_records::register_node(&mut tx, &info.node_id, "bench", "worker", info.started_at).await?;
    feed.commit(tx).await?;

    let samples = Samples::default();
    samples.0.lock().expect("samples").node_id = info.node_id.clone();
    let node = Node {
        writer: Arc::new(Writer::new(pool.clone())),
        pool,
        feed,
        node_id: info.node_id.clone(),
        samples: samples.clone(),
        shown: Shown::default(),
        mine: Arc::default(),
        rates,
        shutdown: shutdown.clone(),
    };
    tokio::spawn(node.clone().heartbeats());
    tokio::spawn(node.clone().claims(claim_at_most));
    tokio::spawn(node.clone().activity());
    tokio::spawn(node.clone().mailbox());
    tokio::spawn(node.clone().follow());

    let _ = until_stdin_closes().await;
    shutdown.cancel();
    drained.cancel();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let report = std::mem::take(&mut *samples.0.lock().expect("samples"));
    print_report(&report);
    // The loops' tasks are not waited for: the report is what the bench wanted.
    std::process::exit(0)
}

fn decision(activity: Activity) -> Decision {
    Decision {
        activity,
        source: Source::Hook,
        disagreement: None,
        usage_limit_until: None,
        error: None,
        fatal: None,
        matched: None,
        asked: (activity == Activity::Permission).then(|| "Do you want to proceed?".to_owned()),
    }
}

/// A random wait of `mean` seconds on average (exponential, capped at 5× the mean).
fn wait(mean: f64) -> Duration {
    let u: f64 = rand::thread_rng().gen_range(0.0001..1.0);
    Duration::from_secs_f64((-u.ln() * mean).min(5.0 * mean))
}

impl Node {
    async fn pause(&self, d: Duration) -> bool {
        tokio::select! {
            _ = self.shutdown.cancelled() => false,
            _ = tokio::time::sleep(d) => true,
        }
    }

    async fn heartbeats(self) {
        let stale_after = HEARTBEAT_EVERY * HEARTBEATS_MISSED;
        loop {
            let started = Instant::now();
            match reconciler::heartbeat_and_settle(&self.pool, &self.feed, &self.node_id, stale_after).await {
                Ok(_) => self.samples.add(|r| &mut r.heartbeats, started.elapsed()),
                Err(_) => self.samples.error(),
            }
            if !self.pause(HEARTBEAT_EVERY).await {
                return;
            }
        }
    }

    /// The fleet loop's claims, then what the spawner records for a pane (its token, the pane).
    async fn claims(self, at_most: usize) {
        let mut commits = self.feed.subscribe();
        let mut claimed_in_all = 0;
        let mut pane_number = 0;
        loop {
            let left = at_most.saturating_sub(claimed_in_all).min(8) as i64;
            let started = Instant::now();
            let claimed = async {
                let mut tx = self.pool.begin().await?;
                let claimed = worker_records::claim(&mut tx, &self.node_id, left).await?;
                if claimed.is_empty() {
                    tx.commit().await?;
                } else {
                    self.feed.commit(tx).await?;
                }
                anyhow::Ok(claimed)
            };
            match claimed.await {
                Ok(claimed) => {
                    self.samples.add(|r| &mut r.claims, started.elapsed());
                    claimed_in_all += claimed.len();
                    for agent in claimed {
                        pane_number += 1;
                        let pane = format!("%{pane_number}");
                        if self.record_pane(agent.id, &pane).await.is_err() {
                            self.samples.error();
                            continue;
                        }
                        self.mine.lock().expect("mine").insert(format!("agent:{}", agent.name));
                        tokio::spawn(self.clone().pane(agent.id, pane));
                    }
                }
                Err(_) => self.samples.error(),
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(POLL) => {}
                Ok(()) = commits.changed() => {
                    let gap = (started + CLAIM_GAP).saturating_duration_since(Instant::now());
                    tokio::time::sleep(gap).await;
                }
            }
        }
    }

    async fn record_pane(&self, agent: Uuid, pane: &str) -> anyhow::Result<()> {
        let mut tx = self.pool.begin().await?;
        worker_records::issue_token(&mut tx, agent).await?;
        let session = format!("switchyard-{}", self.node_id);
        worker_records::record_pane(&mut tx, agent, &session, &format!("w{pane}"), pane, None, None).await?;
        self.feed.commit(tx).await?;
        Ok(())
    }

    /// A simulated pane: the CLI starts at its prompt, then turns — working, sometimes a
    /// permission prompt answered, working again, idle — each written as the watcher writes.
    async fn pane(self, agent: Uuid, pane: String) {
        let mut turn = 0u64;
        if !self.show(agent, &pane, Activity::Idle).await || !self.pause(wait(self.rates.idle)).await {
            return;
        }
        loop {
            turn += 1;
            let mut steps = vec![(Activity::Working, self.rates.turn / 2.0)];
            if turn.is_multiple_of(self.rates.permission_every) {
                steps.push((Activity::Permission, 3.0));
                steps.push((Activity::Working, self.rates.turn / 2.0));
            } else {
                steps[0].1 = self.rates.turn;
            }
            steps.push((Activity::Idle, self.rates.idle));
            for (activity, mean) in steps {
                if !self.show(agent, &pane, activity).await || !self.pause(wait(mean)).await {
                    return;
                }
            }
        }
    }

    async fn show(&self, agent: Uuid, pane: &str, activity: Activity) -> bool {
        let started = Instant::now();
        match watcher::apply(&self.pool, &self.writer, &self.feed, agent, pane, &decision(activity)).await {
            Ok(_) => self.samples.add(|r| &mut r.changes, started.elapsed()),
            Err(_) => self.samples.error(),
        }
        self.shown.lock().expect("shown").insert(agent, (activity, Instant::now()));
        !self.shutdown.is_cancelled()
    }

    /// `last_activity` of working agents, at most once per `ACTIVITY_EVERY` each, in one
    /// statement per round, as the watcher writes it.
    async fn activity(self) {
        let mut touched: HashMap<Uuid, Instant> = HashMap::new();
        while self.pause(Duration::from_secs(1)).await {
            let now = Instant::now();
            let due: Vec<Uuid> = {
                let shown = self.shown.lock().expect("shown");
                shown
                    .iter()
                    .filter(|(id, (a, _))| {
                        *a == Activity::Working && touched.get(*id).is_none_or(|at| now - *at >= ACTIVITY_EVERY)
                    })
                    .map(|(id, _)| *id)
                    .collect()
            };
            if due.is_empty() {
                continue;
            }
            for id in &due {
                touched.insert(*id, now);
            }
            let result = async {
                let mut conn = self.pool.acquire().await?;
                worker_records::touch_activity(&mut conn, &due).await?;
                anyhow::Ok(())
            };
            if result.await.is_err() {
                self.samples.error();
            }
        }
    }

    /// The mailbox's protocol without the typing: due mail found as the mailbox finds it, each
    /// message's attempt, paste, Enter and delivery recorded as the delivery records them.
    async fn mailbox(self) {
        let mut commits = self.feed.subscribe();
        loop {
            let result = async {
                let due = {
                    let mut conn = self.pool.acquire().await?;
                    record::due_on_node(&mut conn, &self.node_id).await?
                };
                for due in due {
                    let mut conn = self.pool.acquire().await?;
                    let Some(message) = record::pending(&mut conn, due.message_id).await? else { continue };
                    if !delivery_records::attempt(&mut conn, message.id, &due.pane, "").await? {
                        continue;
                    }
                    delivery_records::pasted(&mut conn, message.id, &due.pane).await?;
                    delivery_records::enter(&mut conn, message.id, &due.pane, Some(&message.body)).await?;
                    let mut tx = sqlx::Connection::begin(&mut *conn).await?;
                    delivery_records::delivered(&mut tx, message.id, Confirmation::State).await?;
                    self.feed.commit(tx).await?;
                    if let Ok(mut r) = self.samples.0.lock() {
                        r.delivered += 1;
                    }
                }
                anyhow::Ok(())
            };
            if result.await.is_err() {
                self.samples.error();
            }
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(POLL) => {}
                Ok(()) = commits.changed() => tokio::time::sleep(MAIL_GAP).await,
            }
        }
    }

    /// Reads new events after each wake-up, as a follower of the event log does, and counts how
    /// long after its transaction began each state change of another node's agent is read here.
    async fn follow(self) {
        let mut commits = self.feed.subscribe();
        let mut cursor = match self.pool.acquire().await {
            Ok(mut conn) => events::head_position(&mut conn).await.ok().flatten(),
            Err(_) => None,
        };
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = tokio::time::sleep(POLL) => {}
                Ok(()) = commits.changed() => {}
            }
            let read = async {
                let mut conn = self.pool.acquire().await?;
                events::after_position(&mut conn, cursor, 500).await
            };
            let Ok(read) = read.await else {
                self.samples.error();
                continue;
            };
            let now = chrono::Utc::now();
            let mine = self.mine.lock().expect("mine").clone();
            for (position, event) in read {
                cursor = Some(position);
                if event.event_type == "agent.state_changed" && !mine.contains(&event.subject) {
                    let lag = (now - event.created_at).to_std().unwrap_or_default();
                    self.samples.add(|r| &mut r.lags, lag);
                }
            }
        }
    }
}
