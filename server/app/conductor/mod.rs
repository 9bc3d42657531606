//! The conductor: carries a wish from words to a reviewed branch with agents doing the work.
//!
//! ```text
//! draft ─planner─▶ planned ─(auto approval)─▶ queued ─(blockers merged)─▶ executing
//!   executing/groups: each ready group gets an engineer on group/<slug>/<key>, made from
//!     wish/<slug> as it stands; its done report merges it into wish/<slug>; dependents follow
//!   executing/agent_review ─pass─▶ (human_review ─pass─▶) completed
//!                          ─fail─▶ executing/fix ─fix done─▶ agent_review …  (cap → failed, human)
//! ```
//!
//! Each step is a function of [`tick_groups`] or [`tick_rest`] that claims its rows with
//! `FOR NO KEY UPDATE … SKIP LOCKED`, so every `serve`/`worker` process runs the conductor and
//! each step still happens once. Every step is recorded before it is acted on and is safe to
//! repeat after a crash: a group's branch is made inside the transaction that assigns its agent;
//! a merge into the wish's branch is a compare-and-swap, re-checked against git before it is made
//! again ([`integrate`]).
//! An agent that ends before its step concluded hands the step to a person ([`handoff`]);
//! concluded agents are stopped, and their clones removed once their wish merged or was cancelled.

pub mod catch_up;
pub mod dispatch;
pub mod handoff;
pub mod integrate;
pub mod reports;
pub mod review;
pub mod task_runs;

use sqlx::PgConnection;
use uuid::Uuid;

use super::messages::tell;
use super::{Ctx, Result};
use crate::db::agents::{self, Agent, NewAgent};
use crate::db::conductor::Conducted;
use crate::domain::agent_kind::{AgentKind, AgentRole};

pub use crate::domain::message::SWITCHYARD;

/// How many rows one step claims per tick.
const BATCH: i64 = 20;

/// What one tick did, step by step.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tick {
    pub handed_off: usize,
    pub stopped: usize,
    /// Live agents of held wishes, suspended.
    pub parked: usize,
    /// Suspended agents of ended wishes, finished.
    pub retired: usize,
    pub planners: usize,
    pub queued: usize,
    pub started: usize,
    pub dispatched: usize,
    pub integrated: usize,
    pub reviewers: usize,
    pub fixers: usize,
    pub task_runs: usize,
    pub iterations: usize,
    pub questions: usize,
    pub clones_removed: usize,
}

impl Tick {
    pub fn did_something(&self) -> bool {
        *self != Tick::default()
    }
}

/// Logs a step that failed (the others still run); how many rows it acted on.
async fn step<F: std::future::Future<Output = Result<usize>>>(name: &str, work: F) -> usize {
    match work.await {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(step = name, error = %e, "conductor step failed");
            0
        }
    }
}

/// The two steps on a group's way, which every commit may make due: integrating reported groups,
/// then dispatching ready ones (so the groups a merge makes ready start in the same tick). One
/// query first says whether either has work: most commits (agents' states, messages) make
/// neither due.
pub async fn tick_groups(ctx: &Ctx) -> Tick {
    let due = async {
        let mut conn = ctx.db.acquire().await?;
        Ok::<_, super::Error>(crate::db::conductor::groups_due(&mut conn, dispatch::SPAWN_BACKLOG).await?)
    };
    let (integrate, dispatch) = match due.await {
        Ok(due) => due,
        Err(e) => {
            tracing::warn!(error = %e, "conductor: reading what is due");
            (true, true)
        }
    };
    let integrated = if integrate { step("integrate", integrate::pending(ctx)).await } else { 0 };
    // A merge just made may have readied a group the query above did not see.
    let dispatched = if dispatch || integrated > 0 { step("dispatch", dispatch::groups(ctx)).await } else { 0 };
    Tick { integrated, dispatched, ..Tick::default() }
}

/// Every other step, once: planning, queueing, starting and reviewing wishes, task runs,
/// hand-offs, stopping and cleaning up. Each happens once per wish or agent and can wait a
/// moment; none of them holds up a group's way ([`tick_groups`] runs beside them).
pub async fn tick_rest(ctx: &Ctx) -> Tick {
    Tick {
        handed_off: step("hand off", handoff::abandoned(ctx)).await,
        stopped: step("stop", handoff::stop_concluded(ctx)).await,
        parked: step("park", handoff::park_held(ctx)).await,
        retired: step("retire", handoff::retire_suspended(ctx)).await,
        planners: step("plan", dispatch::planners(ctx)).await,
        queued: step("queue", dispatch::queue_planned(ctx)).await,
        started: step("start", dispatch::start_queued(ctx)).await,
        reviewers: step("review", review::reviewers(ctx)).await,
        fixers: step("fix", review::fixers(ctx)).await,
        task_runs: step("task runs", task_runs::start_pending(ctx)).await,
        iterations: step("task iterations", task_runs::iterate(ctx)).await,
        questions: step("task questions", task_runs::questions(ctx)).await,
        clones_removed: step("clean up", handoff::remove_clones(ctx)).await,
        ..Tick::default()
    }
}

/// Where an agent works: its project, the repository its clone is made from, its wish if any.
struct Place {
    project_id: Uuid,
    repo: String,
    wish_id: Option<Uuid>,
}

impl Place {
    fn wish(c: &Conducted) -> Place {
        Place { project_id: c.wish.project_id, repo: c.repo_path.clone(), wish_id: Some(c.wish.id) }
    }
}

/// An agent the conductor starts for a step.
struct Assignment {
    place: Place,
    role: AgentRole,
    kind: AgentKind,
    provider: String,
    /// The branch its clone checks out (made from the repository's branch of that name when it
    /// exists, else from the target branch).
    branch: String,
    task_id: Option<Uuid>,
    /// Its first message.
    brief: String,
}

/// Registers the agent (`spawning`: a worker claims it and makes its clone and pane) and queues
/// its brief as its first message, in the caller's transaction.
async fn assign(conn: &mut PgConnection, a: Assignment) -> Result<Agent> {
    Ok(assign_with_brief(conn, a).await?.0)
}

/// [`assign`], answering with the brief's message id too.
async fn assign_with_brief(conn: &mut PgConnection, a: Assignment) -> Result<(Agent, Uuid)> {
    let id = Uuid::new_v4();
    let name = format!("{}-{}", a.role.as_str(), &id.simple().to_string()[..8]);
    let new = NewAgent {
        id,
        name: name.clone(),
        project_id: a.place.project_id,
        kind: a.kind,
        role: a.role,
        provider: a.provider,
        clone_mode: "agent".to_owned(),
        branch: Some(a.branch),
        repo: a.place.repo,
        team: None,
        wish_id: a.place.wish_id,
        task_id: a.task_id,
        task: Some(a.brief.chars().take(20_000).collect()),
    };
    let agent = agents::insert(&mut *conn, &new).await?;
    let brief = tell(conn, &agent, a.brief).await?;
    Ok((agent, brief))
}
