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
//! Each step is one [`tick`] function that claims its rows with `FOR UPDATE … SKIP LOCKED`, so
//! every `serve`/`worker` process runs the conductor and each step still happens once. Every
//! step is recorded before it is acted on and is safe to repeat after a crash: a group's branch
//! is made inside the transaction that assigns its agent; a merge into the wish's branch is a
//! compare-and-swap, re-checked against git before it is made again ([`integrate`]).
//! An agent that ends before its step concluded hands the step to a person ([`handoff`]);
//! concluded agents are stopped, and their clones removed once their wish merged or was cancelled.

pub mod briefs;
pub mod catch_up;
pub mod dispatch;
pub mod handoff;
pub mod integrate;
pub mod reports;
pub mod review;

use sqlx::PgConnection;
use uuid::Uuid;

use super::{Ctx, Result};
use crate::db::agents::{self, Agent, NewAgent};
use crate::db::conductor::Conducted;
use crate::db::messages::{self, NewMessage};
use crate::domain::agent_kind::{AgentKind, AgentRole};

/// The name Switchyard's own messages are sent as.
pub const SWITCHYARD: &str = "switchyard";

/// How many rows one step claims per tick.
const BATCH: i64 = 20;

/// What one tick did, step by step.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tick {
    pub handed_off: usize,
    pub stopped: usize,
    pub planners: usize,
    pub queued: usize,
    pub started: usize,
    pub dispatched: usize,
    pub integrated: usize,
    pub reviewers: usize,
    pub fixers: usize,
    pub clones_removed: usize,
}

impl Tick {
    pub fn did_something(&self) -> bool {
        *self != Tick::default()
    }
}

/// Takes every step that is due once. A step that fails is logged and the others still run.
pub async fn tick(ctx: &Ctx) -> Tick {
    async fn step<F: std::future::Future<Output = Result<usize>>>(name: &str, work: F) -> usize {
        match work.await {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(step = name, error = %e, "conductor step failed");
                0
            }
        }
    }
    Tick {
        handed_off: step("hand off", handoff::abandoned(ctx)).await,
        stopped: step("stop", handoff::stop_concluded(ctx)).await,
        planners: step("plan", dispatch::planners(ctx)).await,
        queued: step("queue", dispatch::queue_planned(ctx)).await,
        started: step("start", dispatch::start_queued(ctx)).await,
        dispatched: step("dispatch", dispatch::groups(ctx)).await,
        integrated: step("integrate", integrate::pending(ctx)).await,
        reviewers: step("review", review::reviewers(ctx)).await,
        fixers: step("fix", review::fixers(ctx)).await,
        clones_removed: step("clean up", handoff::remove_clones(ctx)).await,
    }
}

/// An agent the conductor starts for a step.
struct Assignment<'a> {
    conducted: &'a Conducted,
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
async fn assign(conn: &mut PgConnection, a: Assignment<'_>) -> Result<Agent> {
    let id = Uuid::new_v4();
    let name = format!("{}-{}", a.role.as_str(), &id.simple().to_string()[..8]);
    let new = NewAgent {
        id,
        name: name.clone(),
        project_id: a.conducted.wish.project_id,
        kind: a.kind,
        role: a.role,
        provider: a.provider,
        clone_mode: "agent".to_owned(),
        branch: Some(a.branch),
        repo: a.conducted.repo_path.clone(),
        team: None,
        wish_id: Some(a.conducted.wish.id),
        task_id: a.task_id,
        task: Some(a.brief.chars().take(20_000).collect()),
    };
    let agent = agents::insert(&mut *conn, &new).await?;
    tell(conn, &agent, a.brief).await?;
    Ok(agent)
}

/// Queues a message from Switchyard to `agent`; its node's mailbox types it when the agent is idle.
async fn tell(conn: &mut PgConnection, agent: &Agent, body: String) -> Result<()> {
    let body = crate::domain::typed::plain(&body);
    let project = agents::project_slug(&mut *conn, agent.id).await?;
    let new =
        NewMessage { from: SWITCHYARD.to_owned(), to: agent.name.clone(), recipient_id: Some(agent.id), body, project };
    messages::insert(conn, &new).await?;
    Ok(())
}
