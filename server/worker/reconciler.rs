//! Holding the registry against tmux, at start (before anything else touches agents) and on a
//! timer: a live agent whose pane vanished or died is `suspended` (its provider can resume the
//! session) or `error`. One interrupted mid-work is resumed on its own after a short wait (a few
//! times at most) and keeps its work; any other's task goes to a person rather than being
//! silently lost ([`worker_records::settle_vanished`]); a window
//! of ours with no agent is reported as an orphan (never killed); a claimed agent with no pane
//! yet is adopted if its window exists, else spawned — so a restart never duplicates an agent.
//! The same pass nudges quiet agents and resumes agents whose usage limit has reset. The node's
//! heartbeat, and settling the agents of nodes that stopped heartbeating, run on their own timer
//! ([`heartbeat_and_settle`]), so a slow pass never makes a live node look gone.

use std::collections::HashSet;
use std::time::Duration;

use sqlx::PgPool;

use crate::app::agents::Agent;
use crate::app::worker_records;
use crate::domain::agent::AgentState;
use crate::feed::EventFeed;
use crate::providers::LiveProviders;
use crate::tmux::{PaneInfo, Tmux, HOME_WINDOW};

/// What one pass found and did, for the status endpoint and tests.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// Agents whose pane was gone: (name, new state).
    pub settled: Vec<(String, AgentState)>,
    /// Claimed agents that still need a pane.
    pub to_spawn: Vec<Agent>,
    /// Windows of ours that no agent owns (reported once each).
    pub orphans: Vec<String>,
    /// Suspended agents whose usage limit reset (or whose wait after an interruption passed), back
    /// to `spawning`.
    pub resumed: Vec<String>,
}

/// The reconciler of one node: what a pass needs, and the orphans it reported already.
pub struct Reconciler {
    pub db: PgPool,
    pub feed: EventFeed,
    pub tmux: Tmux,
    /// The node's tmux session.
    pub session: String,
    pub node_id: String,
    /// Whose agents can be resumed (suspended rather than failed when their pane goes).
    pub providers: LiveProviders,
    reported_orphans: HashSet<String>,
}

impl Reconciler {
    /// A reconciler that knows the orphans this node reported in an earlier run.
    pub async fn new(
        db: PgPool,
        feed: EventFeed,
        tmux: Tmux,
        session: String,
        node_id: String,
        providers: LiveProviders,
    ) -> Reconciler {
        let reported_orphans = orphans_reported(&db, &node_id).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "reading the orphans reported before");
            HashSet::new()
        });
        Reconciler { db, feed, tmux, session, node_id, providers, reported_orphans }
    }

    /// One pass: settles the agents whose pane is gone, adopts or lists claimed agents without
    /// one, reports new orphans, and resumes agents whose usage limit reset. Spawning what it
    /// lists is the caller's.
    pub async fn tick(&mut self) -> anyhow::Result<Outcome> {
        let providers = self.providers.current();
        let resumable = move |name: &str| providers.get(name).is_some_and(|p| p.resume.is_some());
        let mut outcome = reconcile(
            &self.db,
            &self.feed,
            &self.tmux,
            &self.session,
            &self.node_id,
            resumable,
            &mut self.reported_orphans,
        )
        .await?;
        outcome.resumed = resume_after_limits(&self.db, &self.feed, &self.node_id).await?;
        Ok(outcome)
    }
}

/// Compares the live agents of `node_id` with the panes of `session`.
pub async fn reconcile(
    db: &PgPool,
    feed: &EventFeed,
    tmux: &Tmux,
    session: &str,
    node_id: &str,
    resumable: impl Fn(&str) -> bool,
    reported_orphans: &mut HashSet<String>,
) -> anyhow::Result<Outcome> {
    // No session at all: every pane went at once (the tmux server killed, or a reboot).
    let (mut panes, session_gone) = match tmux.list_panes(session).await {
        Ok(panes) => (panes, false),
        Err(e) if e.is_missing() => (Vec::new(), true),
        Err(e) => return Err(e.into()),
    };
    if panes.iter().any(|p| p.dead && p.dead_status.is_none() && p.dead_signal.is_none()) {
        // An exit tmux has not collected yet: collect it, so the agent's story says how it ended.
        if tmux.collect_exits().await.is_ok() {
            panes = tmux.list_panes(session).await.unwrap_or(panes);
        }
    }
    // Read, and the connection given back: each agent's settling below takes one of its own (and
    // tmux runs between), and a step holding one while it waits for a second starves the pool.
    let live = worker_records::live_on_node(&mut *db.acquire().await?, node_id).await?;
    let mut outcome = Outcome::default();
    for agent in &live {
        let Some(pane_id) = &agent.tmux_pane else {
            // Claimed but no pane recorded: a crash between claim and record, or a fresh claim.
            match panes.iter().find(|p| p.window_name == agent.name && !p.dead) {
                Some(pane) => adopt(db, feed, session, agent, pane).await?,
                None => outcome.to_spawn.push(agent.clone()),
            }
            continue;
        };
        let pane = panes.iter().find(|p| &p.pane_id == pane_id);
        if pane.is_some_and(|p| !p.dead) {
            continue;
        }
        let reason = match pane {
            Some(p) => format!("the pane exited ({})", exit_of(p)),
            None if session_gone => {
                "the pane vanished with its tmux session: a killed tmux server or a restart".to_owned()
            }
            None => "the pane vanished".to_owned(),
        };
        // The state, its events and the task handed on (or the resume planned) commit together.
        let mut tx = db.begin().await?;
        if let Some(state) =
            worker_records::settle_vanished(&mut tx, agent, resumable(&agent.provider), &reason).await?
        {
            outcome.settled.push((agent.name.clone(), state));
        }
        feed.commit(tx).await?;
        if let Some(p) = pane {
            // A dead pane stays (remain-on-exit) so its last screen could be read; now it goes.
            let _ = tmux.kill_window(&p.window_id).await;
        }
    }
    let ours: HashSet<&str> = live.iter().map(|a| a.name.as_str()).collect();
    for pane in &panes {
        if pane.window_name == HOME_WINDOW || ours.contains(pane.window_name.as_str()) {
            continue;
        }
        if reported_orphans.insert(orphan_key(&pane.window_id, &pane.pane_id, &pane.window_name)) {
            let payload = serde_json::json!({"window": pane.window_id, "window_name": pane.window_name,
                "pane": pane.pane_id, "node_id": node_id});
            let mut tx = db.begin().await?;
            worker_records::report_orphan(&mut tx, node_id, payload).await?;
            feed.commit(tx).await?;
            outcome.orphans.push(pane.window_name.clone());
        }
    }
    Ok(outcome)
}

/// What identifies a reported orphan: tmux reuses window ids after its server restarts, so the
/// pane and the name go with it.
fn orphan_key(window: &str, pane: &str, name: &str) -> String {
    format!("{window} {pane} {name}")
}

/// The orphans this node reported before (in an earlier run), so a restart does not report them
/// again. Read once, at start.
pub async fn orphans_reported(db: &PgPool, node_id: &str) -> anyhow::Result<HashSet<String>> {
    let mut conn = db.acquire().await?;
    let reported = worker_records::orphans_reported(&mut conn, node_id).await?;
    Ok(reported.iter().map(|(window, pane, name)| orphan_key(window, pane, name)).collect())
}

fn exit_of(pane: &PaneInfo) -> String {
    match (pane.dead_status, pane.dead_signal) {
        (Some(status), _) => format!("exit status {status}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => "reason unknown".to_owned(),
    }
}

async fn adopt(db: &PgPool, feed: &EventFeed, session: &str, agent: &Agent, pane: &PaneInfo) -> anyhow::Result<()> {
    let mut tx = db.begin().await?;
    let pid = i32::try_from(pane.pid).ok();
    worker_records::record_pane(&mut tx, agent.id, session, &pane.window_id, &pane.pane_id, pid, None).await?;
    feed.commit(tx).await?;
    tracing::info!(agent = %agent.name, pane = %pane.pane_id, "adopted the existing window of a claimed agent");
    Ok(())
}

/// This node's heartbeat, and the takeover of nodes that stopped heartbeating: their live agents
/// are marked lost and redispatched for a live node to claim (their panes are out of reach), and
/// their unstarted claims go back to the queue ([`worker_records::settle_on_stale_node`]).
/// Answers how many agents this node took.
pub async fn heartbeat_and_settle(
    db: &PgPool,
    feed: &EventFeed,
    node_id: &str,
    stale_after: Duration,
) -> anyhow::Result<usize> {
    let mut conn = db.acquire().await?;
    let mut settled = 0;
    for node in worker_records::heartbeat(&mut conn, node_id, stale_after).await? {
        for agent in worker_records::live_on_node(&mut conn, &node.id).await? {
            // One transaction per agent, on the connection held (a step never waits for a second
            // one of the node's few).
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            let taken = worker_records::settle_on_stale_node(&mut tx, &agent, &node).await?;
            feed.commit(tx).await?;
            settled += usize::from(taken);
        }
    }
    Ok(settled)
}

/// Resumes suspended agents of this node whose usage limit has reset, or whose wait after an
/// interruption passed: they go back to `spawning` and are spawned again with the provider's
/// resume command.
pub async fn resume_after_limits(db: &PgPool, feed: &EventFeed, node_id: &str) -> anyhow::Result<Vec<String>> {
    // The read's connection goes back before each resume takes one: a step that holds one while
    // it waits for another can starve the node's pool.
    let due = worker_records::limits_reset(&mut *db.acquire().await?, node_id).await?;
    let mut resumed = Vec::new();
    for agent in due {
        let mut tx = db.begin().await?;
        let changed = worker_records::resume_after_limit(&mut tx, agent.id).await?;
        feed.commit(tx).await?;
        if changed {
            resumed.push(agent.name);
        }
    }
    Ok(resumed)
}
