//! A wish's execution groups: start, complete, fail, retry. Completing the last group completes
//! the wish; a group that fails with no iterations left fails it (one with iterations left goes
//! back to `ready`).

use serde::Serialize;
use sqlx::PgConnection;

use super::wish_lifecycle::act;
use super::{Ctx, Error, Result};
use crate::db::tasks::{self, Applied, Change};
use crate::db::wishes::{self, Group, Wish};
use crate::db::{conductor, events, projects};
use crate::domain::project::ReviewMode;
use crate::domain::task::TaskEvent;
use crate::domain::wish::{WishEvent, WishPhase, WishStatus};

/// What a group action did: the wish (its state after the action), the group, and the groups
/// that became `ready` because of it. Only the touched rows are read, so the answer costs the
/// same in a wish of ten groups or a thousand (the whole DAG is `GET /wishes/{slug}`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({
    "slug": "login-page", "status": "executing",
    "group": {"key": "api", "status": "done", "depends_on": []},
    "now_ready": ["ui"]
}))]
pub struct GroupOutcome {
    #[serde(flatten)]
    pub wish: Wish,
    pub group: Group,
    /// Keys of the groups whose last dependency this action completed.
    #[schema(example = json!(["ui"]))]
    pub now_ready: Vec<String>,
}

/// Completes the wish when none of its groups is unfinished (after a release: completions check
/// through [`wishes::group_done`]). Takes the wish's row lock first, so this cannot race the
/// last group's completion.
pub async fn complete_if_done(conn: &mut PgConnection, wish: Wish) -> Result<Wish> {
    let Some(locked) = wishes::lock(conn, wish.id).await? else { return Ok(wish) };
    complete_if_last(conn, locked).await
}

/// A wish read under its row lock whose groups are all done goes to review (the project's
/// `review` setting), or, where the project wants none, completes (`all_groups_done`).
async fn complete_if_last(conn: &mut PgConnection, locked: Wish) -> Result<Wish> {
    if locked.status != WishStatus::Executing
        || locked.held
        || locked.groups_open > 0
        || locked.phase != WishPhase::Groups
    {
        return Ok(locked);
    }
    let phase = match projects::conductor_config(conn, locked.project_id).await?.review {
        ReviewMode::None => return act(conn, &locked, WishEvent::AllGroupsDone, None).await,
        ReviewMode::Agent | ReviewMode::Both => WishPhase::AgentReview,
        ReviewMode::Human => WishPhase::HumanReview,
    };
    let wish = conductor::set_phase(conn, locked.id, phase, None).await?;
    let payload = serde_json::json!({"slug": wish.slug, "phase": phase.as_str()});
    events::record(conn, "wish.review_requested", &wishes::subject(&wish), payload).await?;
    Ok(wish)
}

/// One action on one group, in one transaction with what it causes (the wish completing or
/// failing, dependents becoming ready).
#[tracing::instrument(skip_all, fields(slug = ?slug, key = ?key, action = event.name()), err(level = "debug"))]
pub async fn act_on(ctx: &Ctx, slug: &str, key: &str, event: TaskEvent, change: Change) -> Result<GroupOutcome> {
    let mut tx = ctx.db.begin().await?;
    let outcome = act_in(&mut tx, slug, key, event, change).await?;
    ctx.feed.commit(tx).await?;
    Ok(outcome)
}

/// [`act_on`] in the caller's transaction.
pub async fn act_in(
    conn: &mut PgConnection,
    slug: &str,
    key: &str,
    event: TaskEvent,
    change: Change,
) -> Result<GroupOutcome> {
    let tx = conn;
    let (wish, group) =
        wishes::for_group(&mut *tx, slug, key).await?.ok_or_else(|| Error::NotFound(format!("no wish `{slug}`")))?;
    if wish.status != WishStatus::Executing {
        let detail = format!("the wish is {}; its groups move only while it is executing", wish.status);
        return Err(Error::conflict(detail, Some(wish.status.as_str())));
    }
    let starts_work = matches!(event, TaskEvent::Start | TaskEvent::Retry { .. });
    if starts_work && wish.held {
        return Err(Error::conflict("the wish is on hold; release it first", Some(wish.status.as_str())));
    }
    let no_group = || Error::NotFound(format!("wish `{slug}` has no group `{key}`"));
    let (current, depends_on) = group.ok_or_else(no_group)?;
    let (mut task, released) = match tasks::apply_to(&mut *tx, current, event, &change).await? {
        None => return Err(no_group()),
        Some(Applied::Refused { current, message }) => {
            return Err(Error::conflict(message, Some(current.as_str())));
        }
        Some(Applied::Done(task, released)) => (task, released),
    };
    let wish = match event {
        // Last, so the wish's row lock is held only for the check and the commit.
        TaskEvent::Complete => match wishes::group_done(&mut *tx, wish.id).await? {
            Some(locked) => complete_if_last(&mut *tx, locked).await?,
            None => wish,
        },
        TaskEvent::Fail if task.iterations < task.max_iterations => {
            // Iterations left: the group goes back to the queue instead of failing the wish.
            let retry = TaskEvent::Retry { unmet_dependencies: 0 };
            if let Some(Applied::Done(retried, _)) =
                tasks::apply_to(&mut *tx, task.clone(), retry, &Change::default()).await?
            {
                task = retried;
            }
            wish
        }
        TaskEvent::Fail => {
            let reason = format!(
                "group `{key}` failed after {} iterations: {}",
                task.iterations,
                task.result.as_deref().unwrap_or("no reason given")
            );
            act(&mut *tx, &wish, WishEvent::GroupFailed, Some(&reason)).await?
        }
        _ => wish,
    };
    let group = Group::of(&task, depends_on);
    let now_ready = released.into_iter().filter_map(|r| r.group_key).collect();
    Ok(GroupOutcome { wish, group, now_ready })
}
