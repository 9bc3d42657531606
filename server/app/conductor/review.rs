//! The review loop: a reviewer agent reads the wish's branch against the target
//! branch; a pass completes the wish (or, with review `both`, hands it to a person's review); a
//! fail sends its notes to a fix agent on the wish's branch, then the branch is reviewed again;
//! a fail at the wish's `review_cap` fails the wish and hands it to a person.

use sqlx::PgConnection;

use super::{assign, Assignment, BATCH};
use crate::app::repository::Mirrors;
use crate::app::{Ctx, Error, Result};
use crate::db::conductor::{self, Due};
use crate::db::projects;
use crate::db::wishes::Wish;
use crate::domain::agent_kind::{AgentKind, AgentRole};
use crate::domain::briefs;
use crate::domain::project::ReviewMode;
use crate::domain::wish::{WishPhase, WishStatus};
use crate::git::branches;

/// A reviewer for each wish in `agent_review` without one, given the diff against the target.
pub async fn reviewers(ctx: &Ctx) -> Result<usize> {
    on_the_wish_branch(ctx, Due::Reviewer).await
}

/// A fix agent on the wish's branch for each wish in `fix` without one, told the review's notes.
pub async fn fixers(ctx: &Ctx) -> Result<usize> {
    on_the_wish_branch(ctx, Due::Fixer).await
}

/// An agent on the wish's own branch for each wish `due` one (a reviewer or a fixer). A reviewer
/// whose project's mirror is still to fetch comes in a second pass, after the fetch ([`Mirrors`]).
async fn on_the_wish_branch(ctx: &Ctx, due: Due) -> Result<usize> {
    let mut mirrors = Mirrors::default();
    let mut assigned = on_the_wish_branch_with(ctx, due, &mut mirrors).await?;
    if mirrors.fetch_noted().await {
        assigned += on_the_wish_branch_with(ctx, due, &mut mirrors).await?;
    }
    Ok(assigned)
}

async fn on_the_wish_branch_with(ctx: &Ctx, due: Due, mirrors: &mut Mirrors) -> Result<usize> {
    let mut tx = ctx.db.begin().await?;
    let wishes = conductor::due(&mut tx, due, BATCH).await?;
    let mut assigned = 0;
    for c in &wishes {
        let Some(branch) = c.wish.branch.clone() else { continue };
        let (role, kind, brief) = if due == Due::Reviewer {
            let Some(local) = mirrors.ready(&mut tx, &ctx.data_dir, c.wish.project_id).await? else { continue };
            let (stat, patch) = branches::diff(local.path(), &c.target_branch, &branch)
                .await
                .map_err(|e| Error::Internal(anyhow::anyhow!("reading the diff of `{branch}`: {e}")))?;
            let brief = briefs::reviewer(&c.wish.title, &c.wish.description, &c.target_branch, &stat, &patch);
            (AgentRole::Reviewer, AgentKind::Review, brief)
        } else {
            let notes = c.wish.review_notes.clone().unwrap_or_default();
            (AgentRole::Fix, AgentKind::Worker, briefs::review_fix(&c.wish.title, &branch, &notes))
        };
        let provider = c.wish.provider.clone().unwrap_or_else(|| c.config.provider.clone());
        assign(
            &mut tx,
            Assignment { place: super::Place::wish(c), role, kind, provider, branch, task_id: None, brief },
        )
        .await?;
        assigned += 1;
    }
    ctx.feed.commit(tx).await?;
    Ok(assigned)
}

/// A fix agent's work is on the wish's branch: the branch is reviewed again (by an agent unless
/// the project reviews by people only).
pub async fn fixed(conn: &mut PgConnection, wish: &Wish) -> Result<Wish> {
    if wish.status != WishStatus::Executing || wish.phase != WishPhase::Fix {
        let why = format!("the wish is {} ({}), not waiting for a fix", wish.status, wish.phase);
        return Err(Error::conflict(why, Some(wish.status.as_str())));
    }
    let phase = match projects::conductor_config(&mut *conn, wish.project_id).await?.review {
        ReviewMode::Human => WishPhase::HumanReview,
        _ => WishPhase::AgentReview,
    };
    Ok(conductor::set_phase(conn, wish.id, phase, None).await?)
}
