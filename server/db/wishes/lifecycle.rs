//! A wish's lifecycle in the database: the snapshot the rules decide on, applying an event as
//! one conditional update plus its event row, reviews, and the row lock group completions take.

use sqlx::PgConnection;
use uuid::Uuid;

use super::{get, subject, Wish, WishRow};
use crate::db::events;
use crate::domain::wish::{transition, WishChange, WishError, WishEvent, WishSnapshot};

/// What the lifecycle rules need, read from the row and its relations.
pub async fn snapshot(conn: &mut PgConnection, wish: &Wish) -> Result<WishSnapshot, sqlx::Error> {
    let counts = sqlx::query!(
        r#"SELECT
             (SELECT count(*) FROM wish_blockers b JOIN wishes w ON w.id = b.blocked_by
               WHERE b.wish_id = $1 AND w.status <> 'merged') AS "unmerged!",
             EXISTS (SELECT 1 FROM tasks WHERE wish_id = $1) AS "has_plan!""#,
        wish.id
    )
    .fetch_one(conn)
    .await?;
    Ok(WishSnapshot {
        status: wish.status,
        held: wish.held,
        blockers_unmerged: usize::try_from(counts.unmerged).unwrap_or(usize::MAX),
        has_plan: counts.has_plan,
        has_tasks: wish.queued_at.is_some(),
    })
}

/// The outcome of a lifecycle event.
pub enum Outcome {
    Applied(Wish),
    Refused { error: WishError, current: Wish },
}

/// Applies a lifecycle event: the domain decides, then one update conditional on the status and
/// hold flag that were decided on, so two concurrent writers never both win.
pub async fn apply(
    conn: &mut PgConnection,
    wish: &Wish,
    event: WishEvent,
    reason: Option<&str>,
) -> Result<Outcome, sqlx::Error> {
    let snapshot = snapshot(conn, wish).await?;
    let change = match transition(&snapshot, &event) {
        Ok(change) => change,
        Err(error) => return Ok(Outcome::Refused { error, current: wish.clone() }),
    };
    let (to_status, to_held) = match change {
        WishChange::Status(s) => (s, wish.held),
        WishChange::Held(h) => (wish.status, h),
    };
    let row = sqlx::query_as!(
        WishRow,
        "UPDATE wishes SET
           status = $2, held = $3, version = version + 1, updated_at = now(),
           held_at = CASE WHEN $3 THEN COALESCE(held_at, now()) END,
           queued_at = CASE WHEN $2 = 'queued' THEN COALESCE(queued_at, now()) ELSE queued_at END,
           started_at = CASE WHEN $2 = 'executing' AND status <> 'executing' THEN now() ELSE started_at END,
           completed_at = CASE WHEN $2 = 'completed' AND status <> 'completed' THEN now() ELSE completed_at END,
           merged_at = CASE WHEN $2 = 'merged' THEN now() ELSE merged_at END,
           failure_reason = CASE WHEN $2 IN ('failed', 'conflict', 'interrupted', 'cancelled')
                                 THEN COALESCE($6, failure_reason)
                                 WHEN $2 = status THEN failure_reason END
         WHERE id = $1 AND status = $4 AND held = $5
         RETURNING *",
        wish.id,
        to_status.as_str(),
        to_held,
        wish.status.as_str(),
        wish.held,
        reason
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        // Another writer changed the wish first: report its state now.
        let current = get(conn, &wish.slug).await?.unwrap_or_else(|| wish.clone());
        let error = WishError::Illegal { from: current.status, event: event.name() };
        return Ok(Outcome::Refused { error, current });
    };
    let updated = Wish::try_from(row)?;
    let event_type = match (event, change) {
        (WishEvent::Hold, _) => "wish.held".to_owned(),
        (WishEvent::Release, _) => "wish.released".to_owned(),
        (WishEvent::Resume { .. }, _) => "wish.resumed".to_owned(),
        (_, _) => format!("wish.{}", updated.status.as_str()),
    };
    let payload = serde_json::json!({
        "slug": updated.slug, "from": wish.status, "to": updated.status, "held": updated.held, "reason": reason,
    });
    events::record(conn, &event_type, &subject(&updated), payload).await?;
    Ok(Outcome::Applied(updated))
}

/// Records a review verdict: moves `review_iteration` (conditional on the value read).
pub async fn record_review(
    conn: &mut PgConnection,
    wish: &Wish,
    iteration: i32,
    payload: serde_json::Value,
) -> Result<Option<Wish>, sqlx::Error> {
    let row = sqlx::query_as!(
        WishRow,
        "UPDATE wishes SET review_iteration = $2, version = version + 1, updated_at = now()
         WHERE id = $1 AND review_iteration = $3 AND status = 'executing' RETURNING *",
        wish.id,
        iteration,
        wish.review_iteration
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let updated = Wish::try_from(row)?;
    events::record(conn, "wish.reviewed", &subject(&updated), payload).await?;
    Ok(Some(updated))
}

/// The wish, locked until the transaction ends, so a decision on its `groups_open` and status
/// cannot race a group completion.
pub async fn lock(conn: &mut PgConnection, wish_id: Uuid) -> Result<Option<Wish>, sqlx::Error> {
    let row = sqlx::query_as!(WishRow, "SELECT * FROM wishes WHERE id = $1 FOR NO KEY UPDATE", wish_id)
        .fetch_optional(conn)
        .await?;
    row.map(Wish::try_from).transpose()
}

/// Queued wishes that were waiting for this one, to re-check when it merges.
pub async fn waiting_on(conn: &mut PgConnection, wish_id: Uuid) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT w.slug FROM wish_blockers b JOIN wishes w ON w.id = b.wish_id
         WHERE b.blocked_by = $1 AND w.status = 'queued' AND NOT w.held ORDER BY w.created_at, w.id",
        wish_id
    )
    .fetch_all(conn)
    .await
}
