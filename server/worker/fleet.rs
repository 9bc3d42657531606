//! The worker's loop on one node: claim spawning agents and make their panes, watch every pane
//! through one tmux control-mode client, turn what the detectors decide into state changes, and
//! reconcile (at start, before anything else touches agents, then on a timer). Beside it runs the
//! node's [`Mailbox`], which delivers messages to its idle agents. Everything it
//! does is recorded in PostgreSQL first; tmux is only ever asked to catch up. [`Fleet::start`]
//! readies the loop ([`Running`]); its `run` is [`Running::tick`] between waits for tmux output.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::app::agent_panes;
use crate::app::local_panes::Typist;
use crate::app::usage::SessionLogOf;
use crate::app::worker_records;
use crate::detect::screen::ScreenRules;
use crate::domain::agent::Activity;
use crate::node::NodeInfo;
use crate::providers::LiveProviders;
use crate::tmux::{Control, Notification, Tmux};
use crate::worker::delivery::Delivery;
use crate::worker::mailbox::Mailbox;
use crate::worker::reconciler::Reconciler;
use crate::worker::spawner::Spawner;
use crate::worker::watcher::{self, Watch, Watches, Writer};
use crate::worker::WorkerConfig;

/// The worker's health as the status endpoint shows it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Health {
    pub control_link_up: bool,
    pub last_reconcile_at: Option<DateTime<Utc>>,
    pub last_reconcile_ms: Option<u64>,
    pub last_error: Option<String>,
}

pub type SharedHealth = Arc<Mutex<Health>>;

/// Agents spawned at once from one claim.
const SPAWNS_AT_ONCE: usize = 4;
/// How often the worker attaches (when it is not) and claims spawning agents when nothing wakes
/// it. A commit anywhere (this process's, or another node's through `LISTEN`) wakes a claim at
/// once, so a registered agent does not wait for the timer.
const POLL: Duration = Duration::from_secs(1);
/// The shortest time between two claims woken by commits: a burst of commits (a busy fleet's
/// state changes) costs one claim query per gap, not one per commit.
const CLAIM_GAP: Duration = Duration::from_millis(50);
/// The shortest time between two rounds of screen readings: output of many panes arriving
/// within it is read in one round, for a few ms of latency at most.
const READ_GAP: Duration = Duration::from_millis(10);

/// The text a quiet agent is nudged with.
const NUDGE: &str = "Are you still working? If you are done, say so and stop; if you are stuck, say what you need.";

pub struct Fleet {
    /// The node's tmux session ([`session_name`]).
    pub session: String,
    pub db: PgPool,
    pub tmux: Tmux,
    pub node: NodeInfo,
    pub role: &'static str,
    pub providers: LiveProviders,
    /// Reconcile interval, nudges (from `SWITCHYARD_*` settings).
    pub settings: WorkerConfig,
    /// The API address given to agents (`SWITCHYARD_URL`).
    pub api_url: String,
    /// The Unix socket this process serves the API on (`serve`; a `worker` has none), given to
    /// agents without a network.
    pub api_socket: Option<PathBuf>,
    pub data_dir: PathBuf,
    pub health: SharedHealth,
    /// Wakes the mailbox when anything happens (an agent went idle, a message arrived).
    pub feed: crate::feed::EventFeed,
}

/// The node's tmux session: one per node, so control mode sees every agent's output.
pub fn session_name(node: &NodeInfo) -> String {
    format!("switchyard-{}", node.node_id)
}

/// The fleet's loop between two ticks: what it watches, its control client, and when each of
/// its duties is next due.
pub struct Running {
    fleet: Fleet,
    reconciler: Reconciler,
    watches: Watches,
    writer: Writer,
    control: Option<(Control, broadcast::Receiver<Notification>)>,
    next_reconcile: Instant,
    next_poll: Instant,
    next_read: Instant,
    /// Commits anywhere: one may have registered an agent waiting for a pane.
    events: tokio::sync::watch::Receiver<u64>,
    /// A commit came since the last claim; the claim runs once [`CLAIM_GAP`] has passed.
    claim_due: bool,
    last_claim: Instant,
    /// Watches start from their agents' rows; after that, a recorded hook sends for them.
    hooks: tokio::sync::watch::Receiver<u64>,
    hooks_due: bool,
}

/// What one [`Running::tick`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tick {
    /// A reconcile pass ran (it was due), and what it settled, found and resumed.
    pub reconciled: Option<ReconcileSummary>,
    /// Panes made for claimed agents.
    pub spawned: usize,
    /// Panes whose screen was read.
    pub read: usize,
}

/// What a reconcile pass did, in counts.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReconcileSummary {
    pub settled: usize,
    pub spawned: usize,
    pub orphans: usize,
    pub nudged: usize,
    /// The pass failed part way (also in the health report).
    pub error: Option<String>,
}

impl Fleet {
    /// Runs until `shutdown`. Agents' panes outlive the worker: a restart reconciles them.
    pub async fn run(self, shutdown: CancellationToken) {
        let mailbox = self.mailbox();
        let running = self.start().await;
        let mailbox = tokio::spawn(mailbox.run(shutdown.clone()));
        let heartbeat = tokio::spawn(running.fleet.heartbeat(shutdown.clone()));
        running.run(shutdown).await;
        let _ = heartbeat.await;
        if let Err(e) = mailbox.await {
            tracing::error!(error = %e, "the mailbox ended abnormally");
        }
        tracing::info!("worker stopped; agents keep running in tmux");
    }

    /// Registers the node and readies the loop; its first tick reconciles.
    pub async fn start(self) -> Running {
        if let Err(e) = self.register().await {
            tracing::error!(error = %e, "registering the worker node");
        }
        let reconciler = Reconciler::new(
            self.db.clone(),
            self.feed.clone(),
            self.tmux.clone(),
            self.session.clone(),
            self.node.node_id.clone(),
            self.providers.clone(),
        )
        .await;
        let now = Instant::now();
        Running {
            reconciler,
            watches: Watches::default(),
            writer: Writer::new(self.db.clone()),
            control: None,
            next_reconcile: now,
            next_poll: now,
            next_read: now,
            events: self.feed.subscribe(),
            claim_due: false,
            last_claim: now,
            hooks: self.feed.subscribe_hooks(),
            hooks_due: false,
            fleet: self,
        }
    }
}

impl Running {
    async fn run(mut self, shutdown: CancellationToken) {
        loop {
            self.tick().await;
            let mut wake_at = self.next_poll;
            if self.claim_due {
                wake_at = wake_at.min(self.last_claim + CLAIM_GAP);
            }
            if let Some(at) = self.watches.next_due() {
                wake_at = wake_at.min(at.max(self.next_read));
            }
            let wait = wake_at.saturating_duration_since(Instant::now());
            let notification = async {
                match self.control.as_mut() {
                    Some((_, rx)) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            let received = tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(wait) => continue,
                Ok(()) = self.hooks.changed() => {
                    self.hooks_due = true;
                    continue;
                }
                Ok(()) = self.events.changed() => {
                    self.claim_due = true;
                    continue;
                }
                received = notification => received,
            };
            self.on_notifications(received).await;
        }
    }

    /// One pass of the loop: reconcile if it is due; attach (when not) and claim and spawn
    /// waiting agents if polling is due; take in recorded hooks; read the panes whose screen
    /// is due and record what they show.
    pub async fn tick(&mut self) -> Tick {
        let mut tick = Tick::default();
        if Instant::now() >= self.next_reconcile {
            tick.reconciled = Some(self.reconcile().await);
            self.next_reconcile = Instant::now() + self.fleet.settings.reconcile_every;
        }
        // Attaching and claiming run on a timer and after commits (at most once per gap), not on
        // every burst of pane output.
        let now = Instant::now();
        if now >= self.next_poll || (self.claim_due && now >= self.last_claim + CLAIM_GAP) {
            self.next_poll = now + POLL;
            self.last_claim = now;
            self.claim_due = false;
            if self.control.as_ref().is_none_or(|(c, _)| !c.is_up()) {
                self.control = self.fleet.attach().await;
                if self.control.is_some() {
                    self.fleet.refresh_watches(&mut self.watches).await;
                }
            }
            let up = self.control.as_ref().is_some_and(|(c, _)| c.is_up());
            self.fleet.set_health(|h| h.control_link_up = up);
            tick.spawned = self.fleet.claim_and_spawn().await;
            if tick.spawned > 0 {
                // New panes: watch them now, not at the next reconcile.
                self.fleet.refresh_watches(&mut self.watches).await;
            }
        }
        if self.hooks_due {
            match self.watches.refresh_hooks(&self.fleet.db).await {
                Ok(()) => self.hooks_due = false,
                Err(e) => tracing::debug!(error = %e, "reading agents' hooks"),
            }
        }
        if let Some((c, _)) = &self.control {
            let due = if Instant::now() >= self.next_read { self.watches.due(Instant::now()) } else { Vec::new() };
            if !due.is_empty() {
                self.next_read = Instant::now() + READ_GAP;
                tick.read = due.len();
                let decisions = self.watches.read_all(c, &due).await;
                self.fleet.decide_all(decisions, &self.watches, &self.writer).await;
                self.fleet.answer_start_dialogs(self.watches.start_dialogs(Instant::now()));
            }
        }
        tick
    }

    /// Takes in a notification and everything already queued behind it, so a burst of output
    /// costs one reading per pane.
    async fn on_notifications(&mut self, received: Result<Notification, broadcast::error::RecvError>) {
        let mut received = Some(received);
        let mut decisions = Vec::new();
        let mut active = Vec::new();
        while let Some(next) = received.take() {
            match next {
                Ok(Notification::Output { pane, .. }) => {
                    active.extend(self.watches.activity_due(&pane, Instant::now()));
                    if let Some((agent, decision)) = self.watches.on_output(&pane, Instant::now()) {
                        decisions.push((pane, agent, decision));
                    }
                }
                Ok(Notification::PaneDied { .. } | Notification::WindowClose { .. }) => {
                    self.next_reconcile = Instant::now();
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::debug!(missed = n, "fell behind the panes' output; reading every screen again");
                    self.fleet.refresh_watches(&mut self.watches).await;
                    self.watches.read_all_now();
                }
                Err(broadcast::error::RecvError::Closed) => self.control = None,
            }
            received = self.control.as_mut().and_then(|(_, rx)| match rx.try_recv() {
                Ok(n) => Some(Ok(n)),
                Err(broadcast::error::TryRecvError::Lagged(n)) => Some(Err(broadcast::error::RecvError::Lagged(n))),
                Err(_) => None,
            });
        }
        self.fleet.decide_all(decisions, &self.watches, &self.writer).await;
        if !active.is_empty() {
            self.fleet.touch_activity(&active).await;
        }
    }

    /// One reconcile pass, with the heartbeat, usage-limit resumes and nudges.
    async fn reconcile(&mut self) -> ReconcileSummary {
        let started = Instant::now();
        let mut summary = ReconcileSummary::default();
        let result = async {
            let outcome = self.reconciler.tick().await?;
            summary.settled = outcome.settled.len();
            summary.orphans = outcome.orphans.len();
            for agent in &outcome.to_spawn {
                summary.spawned += usize::from(self.fleet.spawner().spawn(agent).await.is_ok());
            }
            self.fleet.refresh_watches(&mut self.watches).await;
            summary.nudged = self.fleet.nudge(&self.watches).await?;
            anyhow::Ok(())
        };
        let error = result.await.err().map(|e| format!("{e:#}"));
        if let Some(e) = &error {
            tracing::warn!(error = %e, "reconcile");
        }
        summary.error = error.clone();
        self.fleet.set_health(|h| {
            h.last_reconcile_at = Some(Utc::now());
            h.last_reconcile_ms = Some(started.elapsed().as_millis() as u64);
            h.last_error = error;
        });
        summary
    }
}

impl Fleet {
    /// Heartbeats this node and settles the agents of nodes gone silent, every
    /// `heartbeat_every` until `shutdown`: a task of its own, so a long reconcile pass (many
    /// spawns on a loaded machine) never makes this node look gone to the others. Every
    /// [`super::MIRROR_SWEEP_HEARTBEATS`] beats it also removes this node's mirrors of remotes
    /// no project uses any more (a project another node deleted or moved).
    fn heartbeat(&self, shutdown: CancellationToken) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (db, feed, node) = (self.db.clone(), self.feed.clone(), self.node.node_id.clone());
        let data_dir = self.data_dir.clone();
        let every = self.settings.heartbeat_every;
        let stale_after = every * super::HEARTBEATS_MISSED;
        async move {
            let mut beat = 0u32;
            loop {
                beat = beat.wrapping_add(1);
                match super::reconciler::heartbeat_and_settle(&db, &feed, &node, stale_after).await {
                    Ok(0) => {}
                    Ok(taken) => tracing::warn!(taken, "took over the agents of nodes that stopped heartbeating"),
                    Err(e) => tracing::warn!(error = %e, "heartbeat"),
                }
                if beat.is_multiple_of(super::MIRROR_SWEEP_HEARTBEATS) {
                    match crate::app::repository::remove_unused_mirrors(&db, &data_dir).await {
                        Ok(removed) if removed.is_empty() => {}
                        Ok(removed) => tracing::info!(?removed, "removed mirrors no project uses"),
                        Err(e) => tracing::warn!(error = %e, "removing mirrors no project uses"),
                    }
                }
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(every) => {}
                }
            }
        }
    }

    /// Records that these agents' panes printed; a failure costs only a late `last_activity`.
    async fn touch_activity(&self, agents: &[uuid::Uuid]) {
        let result = async {
            let mut conn = self.db.acquire().await?;
            worker_records::touch_activity(&mut conn, agents).await?;
            anyhow::Ok(())
        };
        if let Err(e) = result.await {
            tracing::debug!(error = %e, "recording agents' activity");
        }
    }

    fn mailbox(&self) -> Mailbox {
        let delivery = Delivery { db: self.db.clone(), typist: self.typist(), feed: self.feed.clone() };
        Mailbox::new(delivery, self.node.node_id.clone())
    }

    /// Types into this node's panes by the mailbox's protocol, with its settle and confirm times.
    fn typist(&self) -> Typist {
        Typist { tmux: self.tmux.clone(), settle: self.settings.message_settle, confirm: self.settings.message_confirm }
    }

    async fn register(&self) -> anyhow::Result<()> {
        let mut tx = self.db.begin().await?;
        let host = hostname();
        worker_records::register_node(&mut tx, &self.node.node_id, &host, self.role, self.node.started_at).await?;
        self.feed.commit(tx).await?;
        Ok(())
    }

    /// Attaches the control client once the node's session exists.
    async fn attach(&self) -> Option<(Control, broadcast::Receiver<Notification>)> {
        let session = &self.session;
        if !self.tmux.has_session(session).await.unwrap_or(false) {
            return None;
        }
        match Control::attach(&self.tmux, session).await {
            Ok(control) => {
                let rx = control.subscribe();
                Some((control, rx))
            }
            Err(e) => {
                tracing::warn!(error = %e, "attaching the tmux control client");
                None
            }
        }
    }

    /// Watches every live agent of this node that has a pane, and forgets the others.
    async fn refresh_watches(&self, watches: &mut Watches) {
        let live = match self.db.acquire().await {
            Ok(mut conn) => worker_records::live_on_node(&mut conn, &self.node.node_id).await,
            Err(e) => Err(e.into()),
        };
        let Ok(live) = live else { return };
        let mut keep = Vec::new();
        for agent in &live {
            let Some(pane) = &agent.tmux_pane else { continue };
            keep.push(pane.clone());
            if !watches.contains(pane) {
                // A provider gone from the config since the agent started: its pane is read
                // without markers, as output alone.
                let providers = self.providers.current();
                let provider = providers.get(&agent.provider);
                let rules = provider.map_or(ScreenRules::Generic, |p| p.screen_rules);
                let shell = provider.and_then(|p| p.shell());
                let dialog =
                    provider.is_some_and(|p| crate::worker::provider_setup::opens_at_a_dialog(p.setup, &p.env));
                let mut watch = Watch::new(agent, rules, shell, dialog);
                watch.session_log = provider.and_then(|p| SessionLogOf::of(p, &self.data_dir, &agent.name));
                watches.insert(pane.clone(), watch);
            }
        }
        watches.retain(&keep);
    }

    /// Claims agents waiting for a pane and spawns them; answers how many panes were made.
    async fn claim_and_spawn(&self) -> usize {
        let claimed = async {
            let mut tx = self.db.begin().await?;
            let claimed = worker_records::claim(&mut tx, &self.node.node_id, 8).await?;
            if claimed.is_empty() {
                tx.commit().await?
            } else {
                self.feed.commit(tx).await?
            }
            anyhow::Ok(claimed)
        };
        let claimed = match claimed.await {
            Ok(claimed) => claimed,
            Err(e) => {
                tracing::warn!(error = %e, "claiming spawning agents");
                return 0;
            }
        };
        // Side by side: each spawn waits mostly on git (the clone) and tmux, so a batch of ready
        // groups does not queue behind one another's clones. A team's members share one clone,
        // which the first of them makes: those go one after another.
        let spawner = self.spawner();
        let (shared, own): (Vec<_>, Vec<_>) = claimed.iter().partition(|a| a.clone_mode == "team");
        let mut spawned = 0;
        for agent in shared {
            spawned += usize::from(spawner.spawn(agent).await.is_ok());
        }
        for batch in own.chunks(SPAWNS_AT_ONCE) {
            let results = futures_util::future::join_all(batch.iter().map(|agent| spawner.spawn(agent))).await;
            spawned += results.iter().filter(|r| r.is_ok()).count();
        }
        spawned
    }

    fn spawner(&self) -> Spawner<'_> {
        Spawner {
            db: &self.db,
            feed: &self.feed,
            tmux: &self.tmux,
            session: &self.session,
            providers: self.providers.current(),
            data_dir: &self.data_dir,
            api_url: &self.api_url,
            api_socket: self.api_socket.as_deref(),
            exe: self.settings.switchyard_exe.as_deref(),
            provider_home: self.settings.provider_home.as_deref(),
            nice_sessions: self.settings.nice_sessions,
        }
    }

    /// Writes decisions for different agents concurrently (each agent has at most one here).
    async fn decide_all(
        &self,
        decisions: Vec<(String, uuid::Uuid, crate::detect::decision::Decision)>,
        watches: &Watches,
        writer: &Writer,
    ) {
        let writes =
            decisions.iter().map(|(pane, agent, decision)| self.decide(*agent, decision, pane, watches, writer));
        futures_util::future::join_all(writes).await;
    }

    async fn decide(
        &self,
        agent: uuid::Uuid,
        decision: &crate::detect::decision::Decision,
        pane: &str,
        watches: &Watches,
        writer: &Writer,
    ) {
        match watcher::apply(&self.db, writer, &self.feed, agent, pane, decision).await {
            Ok(true) => {
                // Suspended by a usage limit, or failed for want of a login or key: the pane goes,
                // the provider session stays for `resume`.
                if let Some(watch) = watches.get(pane) {
                    tracing::info!(agent = %watch.name, "the agent stopped (usage limit or provider needs); its window goes");
                }
                let _ = self.tmux.kill_window(pane).await;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(%agent, error = %e, "recording an agent's state"),
        }
        // A turn ended: its tokens are in the CLI's session log now. Counted beside the loop,
        // which does not wait for the file.
        let log = watches.get(pane).and_then(|w| w.session_log.clone().map(|log| (w.name.clone(), log)));
        if let (Activity::Idle, Some((name, log))) = (decision.activity, log) {
            let (db, feed) = (self.db.clone(), self.feed.clone());
            tokio::spawn(async move {
                if let Err(e) = crate::app::usage::read_session_log(&db, &feed, agent, &name, &log).await {
                    tracing::warn!(agent = %name, error = %e, "reading the agent's session log");
                }
            });
        }
    }

    /// Answers the dialogs new panes show because of how Switchyard configured their CLI
    /// ([`crate::detect::screen::StartChoice`]) by key presses checked on the screen, beside the
    /// loop (the screen is watched for seconds). One that fails is answered again while the
    /// dialog shows ([`watcher::START_ANSWER_EVERY`]).
    fn answer_start_dialogs(&self, dialogs: Vec<(String, String, crate::detect::screen::StartChoice)>) {
        for (pane, agent, choice) in dialogs {
            let typist = self.typist();
            tokio::spawn(async move {
                match typist.choose_labelled(&pane, choice.option, choice.label).await {
                    Ok(Ok(_)) => tracing::info!(agent, answer = choice.label, "answered the CLI's start dialog"),
                    Ok(Err(why)) => tracing::warn!(agent, why, "answering the CLI's start dialog"),
                    Err(e) => tracing::warn!(agent, error = %e, "answering the CLI's start dialog"),
                }
            });
        }
    }

    /// Nudges agents quiet for too long: working with no output, or idle with their task
    /// unfinished. After `max_nudges` an `agent.stuck` event tells the outside world. Each nudge
    /// is recorded first, then typed (by the one typing protocol) beside the loop, which does not
    /// wait for the agent's turn to start. Answers how many were nudged.
    async fn nudge(&self, watches: &Watches) -> anyhow::Result<usize> {
        let mut conn = self.db.acquire().await?;
        let now = Utc::now();
        let quiet = chrono::Duration::from_std(self.settings.nudge_after)?;
        let mut nudged = 0;
        for agent in worker_records::live_on_node(&mut conn, &self.node.node_id).await? {
            let Some(pane) = &agent.tmux_pane else { continue };
            let Some(watch) = watches.get(pane) else { continue };
            let silent = watch.last_output.elapsed() >= self.settings.nudge_after;
            let unfinished = agent.task_id.is_some() || agent.task.is_some();
            let wants_nudge = match agent.state {
                crate::domain::agent::AgentState::Working => silent,
                crate::domain::agent::AgentState::Idle => silent && unfinished,
                _ => false,
            };
            let nudged_recently = agent.last_nudge.is_some_and(|at| now - at < quiet);
            if !wants_nudge || nudged_recently || agent.nudge_count >= self.settings.max_nudges {
                continue;
            }
            // Mail waiting is the mailbox's to type; a nudge would only get in its way.
            if worker_records::has_mail(&mut conn, agent.id).await? {
                continue;
            }
            // On the connection held: a step never waits for a second one of the node's few.
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            agent_panes::record_nudge(&mut tx, &agent, self.settings.max_nudges).await?;
            self.feed.commit(tx).await?;
            nudged += 1;
            let (typist, db, feed, pane) = (self.typist(), self.db.clone(), self.feed.clone(), pane.clone());
            tokio::spawn(async move {
                if let Err(e) = typist.type_text(&db, &feed, &agent.name, &pane, NUDGE, true).await {
                    tracing::warn!(agent = %agent.name, error = %e, "typing a nudge");
                }
            });
        }
        Ok(nudged)
    }

    fn set_health(&self, change: impl FnOnce(&mut Health)) {
        if let Ok(mut health) = self.health.lock() {
            change(&mut health);
        }
    }
}

fn hostname() -> String {
    nix::unistd::gethostname().ok().and_then(|h| h.into_string().ok()).unwrap_or_else(|| "unknown".into())
}
