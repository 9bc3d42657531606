//! A wish's lifecycle, as the conductor, groups, tasks, the merge queue and the API's use cases all
//! change it: find a wish, read it whole, apply one lifecycle event, start the wishes that waited
//! on one that merged, record a review's verdict, hand a step to a person, and which providers its
//! groups may be given; a wish that ends or is held stops or parks its agents. It calls none of
//! them.

use serde::Serialize;
use sqlx::PgConnection;

use super::{Error, Result};
use crate::db::agents::{self, Agent, Applied, Cause};
use crate::db::projects as projects_db;
use crate::db::stalled_steps::{self, StalledStep};
use crate::db::tasks::{self, Edit};
use crate::db::wishes::{self, Blocker, Group, Outcome, Wish};
use crate::db::{conductor, events, projects};
use crate::domain::agent::{AgentEvent, AgentState};
use crate::domain::project::{ConductorConfig, ReviewMode};
use crate::domain::review::{self, ReviewOutcome, ReviewState, Verdict};
use crate::domain::wish::{WishEvent, WishPhase, WishStatus};
use crate::providers::Providers;

/// Who a step is handed to.
pub const HUMAN: &str = "human";

/// A wish with its groups (states and dependencies) and what it waits for.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct WishDetail {
    #[serde(flatten)]
    pub wish: Wish,
    pub groups: Vec<Group>,
    pub blocked_by: Vec<Blocker>,
    /// Merging its reported groups into its branch keeps failing: why, in git's words, and when
    /// it is tried next.
    pub stalled: Option<StalledStep>,
}

/// The wish `slug`, or a 404 naming it.
pub async fn find(conn: &mut PgConnection, slug: &str) -> Result<Wish> {
    wishes::get(conn, slug).await?.ok_or_else(|| Error::NotFound(format!("no wish `{slug}`")))
}

pub async fn detail(conn: &mut PgConnection, wish: Wish) -> Result<WishDetail> {
    let groups = wishes::groups(conn, wish.id).await?;
    let blocked_by = wishes::blockers(conn, wish.id).await?;
    let stalled = stalled_steps::get(conn, &stalled_steps::wish_integration(wish.id)).await?;
    Ok(WishDetail { wish, groups, blocked_by, stalled })
}

/// Applies one lifecycle event to a wish and answers with the wish as it is now. A wish whose
/// work ends (cancelled, or failed while executing) concludes its agents, which the conductor
/// then stops; a hold parks them (the conductor suspends them) and its release
/// resumes them.
pub async fn act(conn: &mut PgConnection, wish: &Wish, event: WishEvent, reason: Option<&str>) -> Result<Wish> {
    let updated = match wishes::apply(&mut *conn, wish, event, reason).await? {
        Outcome::Applied(updated) => updated,
        Outcome::Refused { error, current } => {
            return Err(Error::conflict(error.to_string(), Some(current.status.as_str())))
        }
    };
    let ended = updated.status == WishStatus::Cancelled
        || (wish.status == WishStatus::Executing && updated.status == WishStatus::Failed);
    if ended {
        conductor::conclude_agents_of(&mut *conn, updated.id).await?;
    }
    if event == WishEvent::Release {
        resume_parked(conn, &updated).await?;
    }
    Ok(updated)
}

/// The agents a hold parked go back to `spawning`, to be resumed into their own sessions, each
/// told to go on once it is.
async fn resume_parked(conn: &mut PgConnection, wish: &Wish) -> Result<()> {
    let cause = Cause { detail: Some("its wish was released".to_owned()), ..Cause::from("api") };
    for agent in conductor::parked(&mut *conn, wish.id).await? {
        let resumed =
            agents::apply(&mut *conn, agent.id, Some(AgentState::Suspended), AgentEvent::Resume, &cause).await?;
        if matches!(resumed, Some(Applied::Changed { .. })) {
            super::worker_records::tell_to_go_on(&mut *conn, &agent, "its wish was on hold").await?;
        }
    }
    Ok(())
}

/// The wish merged: queued wishes that waited for it start, unless something else still blocks
/// them (or they changed meanwhile); they stay queued then.
pub async fn start_waiting(conn: &mut PgConnection, wish: &Wish) -> Result<()> {
    for waiting in wishes::waiting_on(&mut *conn, wish.id).await? {
        if let Some(dependent) = wishes::get(&mut *conn, &waiting).await? {
            let _ = wishes::apply(&mut *conn, &dependent, WishEvent::Start, None).await?;
        }
    }
    Ok(())
}

/// Why a group of a wish may not name provider `named`: the wish's own provider (its planner's:
/// the wish's, else the project's) may not hand work to it, or to one of the providers `any`
/// stands for ([`Providers::may_hand_to`]). A sandboxed planner cannot have its groups run
/// unsandboxed, or with more network than it has.
pub fn refused_provider(
    providers: &Providers,
    config: &ConductorConfig,
    wish_provider: Option<&str>,
    named: &str,
) -> Option<String> {
    let own = wish_provider.filter(|p| *p != "any").unwrap_or(&config.provider);
    config.providers_for(Some(named)).into_iter().find_map(|p| providers.may_hand_to(own, p).err())
}

/// [`refused_provider`] for group `key` of `wish` named `provider` after its plan was checked (a
/// task edit, a redispatch); the error names `provider`.
pub async fn confined_group(
    conn: &mut PgConnection,
    providers: &Providers,
    wish: &Wish,
    key: &str,
    named: &str,
) -> Result<()> {
    let config = projects_db::conductor_config(conn, wish.project_id).await?;
    match refused_provider(providers, &config, wish.provider.as_deref(), named) {
        Some(why) => Err(Error::invalid("provider", format!("group `{key}`: {why}"))),
        None => Ok(()),
    }
}

/// Records a verdict on a wish under review, in the caller's transaction, and moves the wish on.
pub async fn verdict(conn: &mut PgConnection, wish: Wish, verdict: Verdict, notes: &str) -> Result<Wish> {
    let under_review = matches!(wish.phase, WishPhase::AgentReview | WishPhase::HumanReview);
    if wish.status != WishStatus::Executing || wish.held || !under_review {
        let why = if wish.held {
            "the wish is on hold".to_owned()
        } else {
            format!("only a wish under review gets a verdict; this one is {} ({})", wish.status, wish.phase)
        };
        return Err(Error::conflict(why, Some(wish.status.as_str())));
    }
    let state = ReviewState { iteration: wish.review_iteration as u32, cap: wish.review_cap as u32 };
    let outcome =
        review::record(state, verdict).map_err(|e| Error::conflict(e.to_string(), Some(wish.status.as_str())))?;
    let payload = serde_json::json!({"slug": wish.slug, "verdict": verdict, "notes": notes, "outcome": outcome,
                                     "phase": wish.phase});
    let updated = wishes::record_review(&mut *conn, &wish, outcome.iteration() as i32, payload)
        .await?
        .ok_or_else(|| Error::conflict("the wish changed meanwhile; try again", Some(wish.status.as_str())))?;
    match outcome {
        ReviewOutcome::Passed { .. } => {
            let mode = projects::conductor_config(&mut *conn, wish.project_id).await?.review;
            if wish.phase == WishPhase::AgentReview && mode == ReviewMode::Both {
                return Ok(conductor::set_phase(conn, updated.id, WishPhase::HumanReview, None).await?);
            }
            act(conn, &updated, WishEvent::AllGroupsDone, None).await
        }
        ReviewOutcome::FixRequested { .. } => {
            let notes = if notes.trim().is_empty() { "The review failed without notes." } else { notes };
            let wish = conductor::set_phase(&mut *conn, updated.id, WishPhase::Fix, Some(notes)).await?;
            let payload = serde_json::json!({"slug": wish.slug, "review_iteration": wish.review_iteration});
            events::record(conn, "wish.fix_requested", &wishes::subject(&wish), payload).await?;
            Ok(wish)
        }
        ReviewOutcome::CapReached { iteration } => {
            let reason = format!("review failed {iteration} times (cap {})", wish.review_cap);
            let failed = act(&mut *conn, &updated, WishEvent::GroupFailed, Some(&reason)).await?;
            to_a_person(&mut *conn, &failed, &reason).await?;
            Ok(wishes::lock(conn, failed.id).await?.unwrap_or(failed))
        }
    }
}

/// The agent's step goes to a person, and the agent no longer counts as at work. A group whose
/// done report was accepted is not handed off: it waits only for its merge.
pub async fn give_up(conn: &mut PgConnection, agent: &Agent, reason: &str) -> Result<()> {
    conductor::conclude(&mut *conn, agent.id).await?;
    if let Some(task_id) = agent.task_id {
        let Some(task) = tasks::get(&mut *conn, task_id).await? else { return Ok(()) };
        let still_ours = task.assignee.as_deref() == Some(agent.name.as_str());
        if task.status.is_terminal() || task.reported_at.is_some() || !still_ours {
            return Ok(());
        }
        let edit = Edit { assignee: Some(Some(HUMAN.to_owned())), ..Edit::default() };
        // No expected version: handing off cannot lose a race that matters.
        let _edited = tasks::update_fields(&mut *conn, task_id, None, &edit).await?;
        let payload = serde_json::json!({"assignee": HUMAN, "previous": agent.name, "reason": reason});
        events::record(conn, "task.assigned", &format!("task:{task_id}"), payload).await?;
        return Ok(());
    }
    let Some(wish_id) = agent.wish_id else { return Ok(()) };
    let Some(wish) = wishes::lock(&mut *conn, wish_id).await? else { return Ok(()) };
    if wish.status.is_terminal() || wish.assignee.is_some() {
        return Ok(());
    }
    to_a_person(conn, &wish, reason).await
}

/// Hands the wish's current step to a person, with the reason (`wish.handed_off`).
pub async fn to_a_person(conn: &mut PgConnection, wish: &Wish, reason: &str) -> Result<()> {
    let wish = conductor::set_wish_assignee(&mut *conn, wish.id, Some(HUMAN), Some(reason)).await?;
    let payload = serde_json::json!({"slug": wish.slug, "status": wish.status, "phase": wish.phase, "reason": reason});
    events::record(conn, "wish.handed_off", &wishes::subject(&wish), payload).await?;
    Ok(())
}
