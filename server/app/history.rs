//! Task history: what each finished worker agent did, newest first, by project,
//! status or branch, a page at a time.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Ctx, Fields, Result};
use crate::db::history::{self, Filter, HistoryEntry, STATUSES};

/// A page of history and where the next one starts.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct HistoryPage {
    pub items: Vec<HistoryEntry>,
    /// Pass as `cursor` for the next (older) page; absent on the last page.
    pub next_cursor: Option<String>,
}

/// The history rows matching the filters, `limit` (1 to 500) at a time from `cursor`.
pub async fn list(
    ctx: &Ctx,
    project: Option<&str>,
    status: Option<&str>,
    branch: Option<&str>,
    cursor: Option<&str>,
    limit: i64,
) -> Result<HistoryPage> {
    let mut errors = Fields::default();
    errors.check("limit", (1..=500).contains(&limit), "must be 1 to 500");
    if let Some(status) = status {
        errors.check("status", STATUSES.contains(&status), format!("must be one of {}", STATUSES.join(", ")));
    }
    let before = match cursor {
        None => None,
        Some(c) => {
            let parsed = parse_cursor(c);
            errors.check("cursor", parsed.is_some(), "is not a cursor this endpoint gave");
            parsed
        }
    };
    errors.finish()?;
    let mut conn = ctx.db.acquire().await?;
    let project_id = super::projects::filter_id(&mut conn, project).await?;
    let filter = Filter { project_id, status: status.map(str::to_owned), branch: branch.map(str::to_owned), before };
    let mut items = history::list(&mut conn, &filter, limit + 1).await?;
    let next_cursor = if items.len() as i64 > limit {
        items.truncate(limit as usize);
        items.last().map(|h| format!("{}_{}", h.completed_at.unwrap_or(h.created_at).timestamp_micros(), h.id))
    } else {
        None
    };
    Ok(HistoryPage { items, next_cursor })
}

/// `<microseconds>_<uuid>`.
fn parse_cursor(cursor: &str) -> Option<(DateTime<Utc>, Uuid)> {
    let (micros, id) = cursor.split_once('_')?;
    Some((DateTime::from_timestamp_micros(micros.parse().ok()?)?, id.parse().ok()?))
}
