//! Wishes in the database: rows, blockers, their execution groups (tasks with `wish_id`),
//! applying a lifecycle event as one conditional update plus its event row, and moving a wish's
//! card between board columns.

mod listing;
mod moves;

pub use listing::{in_states, on_board, progress};
pub use moves::move_to_column;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::events;
use crate::db::tasks::{self, NewTask};
use crate::domain::plan::GroupSpec;
use crate::domain::task::TaskStatus;
use crate::domain::wish::{transition, WishChange, WishError, WishEvent, WishSnapshot, WishStatus};

/// A wish as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Wish {
    pub id: Uuid,
    #[schema(example = "login-page")]
    pub slug: String,
    pub project_id: Uuid,
    #[schema(example = "Add a login page")]
    pub title: String,
    pub description: String,
    #[schema(value_type = String, example = "executing")]
    pub status: WishStatus,
    /// While held, no transition happens until the wish is released.
    pub held: bool,
    pub held_at: Option<DateTime<Utc>>,
    pub branch: Option<String>,
    /// Reviews recorded so far (agentmux's loop counter).
    pub review_iteration: i32,
    /// After this many failed reviews the wish fails.
    pub review_cap: i32,
    pub failure_reason: Option<String>,
    pub board_id: Option<Uuid>,
    pub column_id: Option<Uuid>,
    pub queued_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub completed_at: Option<DateTime<Utc>>,
    pub merged_at: Option<DateTime<Utc>>,
    /// Groups not done yet; the wish completes when this reaches 0 while it executes.
    #[schema(example = 2)]
    pub groups_open: i32,
    pub version: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A row as read; it also reads from `to_jsonb(wishes)` inside another row.
#[derive(Debug, serde::Deserialize)]
struct WishRow {
    id: Uuid,
    slug: String,
    project_id: Uuid,
    title: String,
    description: String,
    status: String,
    held: bool,
    held_at: Option<DateTime<Utc>>,
    branch: Option<String>,
    review_iteration: i32,
    review_cap: i32,
    failure_reason: Option<String>,
    board_id: Option<Uuid>,
    column_id: Option<Uuid>,
    queued_at: Option<DateTime<Utc>>,
    started_at: Option<DateTime<Utc>>,
    completed_at: Option<DateTime<Utc>>,
    merged_at: Option<DateTime<Utc>>,
    groups_open: i32,
    version: i32,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<WishRow> for Wish {
    type Error = sqlx::Error;

    fn try_from(r: WishRow) -> Result<Wish, sqlx::Error> {
        Ok(Wish {
            status: r.status.parse().map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
            id: r.id,
            slug: r.slug,
            project_id: r.project_id,
            title: r.title,
            description: r.description,
            held: r.held,
            held_at: r.held_at,
            branch: r.branch,
            review_iteration: r.review_iteration,
            review_cap: r.review_cap,
            failure_reason: r.failure_reason,
            board_id: r.board_id,
            column_id: r.column_id,
            queued_at: r.queued_at,
            started_at: r.started_at,
            completed_at: r.completed_at,
            merged_at: r.merged_at,
            groups_open: r.groups_open,
            version: r.version,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

pub struct NewWish {
    pub slug: String,
    pub project_id: Uuid,
    pub title: String,
    pub description: String,
    pub branch: Option<String>,
    pub review_cap: Option<i32>,
    pub blocked_by: Vec<Uuid>,
}

/// One execution group of a plan, as given by the user.
#[derive(Debug, Clone)]
pub struct NewGroup {
    pub key: String,
    pub title: String,
    pub goal: String,
    pub depends_on: Vec<String>,
    pub max_iterations: Option<i32>,
}

impl NewGroup {
    pub fn spec(&self) -> GroupSpec {
        GroupSpec { key: self.key.clone(), depends_on: self.depends_on.clone() }
    }
}

pub async fn insert(conn: &mut PgConnection, new: &NewWish) -> Result<Wish, sqlx::Error> {
    let row = sqlx::query_as!(
        WishRow,
        "INSERT INTO wishes (id, slug, project_id, title, description, branch, review_cap)
         VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7, 3))
         RETURNING *",
        Uuid::new_v4(),
        new.slug,
        new.project_id,
        new.title,
        new.description,
        new.branch,
        new.review_cap
    )
    .fetch_one(&mut *conn)
    .await?;
    for blocker in &new.blocked_by {
        sqlx::query!("INSERT INTO wish_blockers (wish_id, blocked_by) VALUES ($1, $2)", row.id, blocker)
            .execute(&mut *conn)
            .await?;
    }
    let wish = Wish::try_from(row)?;
    events::record(conn, "wish.created", &subject(&wish), serde_json::json!({"slug": wish.slug, "status": "draft"}))
        .await?;
    Ok(wish)
}

/// Stores a plan's groups as tasks, in topological `order`, each depending on its groups' tasks;
/// returns the wish counting them open.
pub async fn insert_groups(
    conn: &mut PgConnection,
    wish: &Wish,
    groups: &[NewGroup],
    order: &[usize],
) -> Result<Wish, sqlx::Error> {
    let mut ids = std::collections::HashMap::new();
    for &i in order {
        let group = &groups[i];
        let depends_on = group.depends_on.iter().filter_map(|k| ids.get(k.as_str()).copied()).collect();
        let task = tasks::insert(
            conn,
            &NewTask {
                project_id: wish.project_id,
                wish_id: Some(wish.id),
                group_key: Some(group.key.clone()),
                title: group.title.clone(),
                goal: group.goal.clone(),
                depends_on,
                max_iterations: group.max_iterations,
                ..NewTask::default()
            },
        )
        .await?;
        ids.insert(group.key.as_str(), task.id);
    }
    let added = i32::try_from(groups.len()).unwrap_or(i32::MAX);
    let row = sqlx::query_as!(
        WishRow,
        "UPDATE wishes SET groups_open = groups_open + $2 WHERE id = $1 RETURNING *",
        wish.id,
        added
    )
    .fetch_one(conn)
    .await?;
    Wish::try_from(row)
}

/// Replaces a draft's plan.
pub async fn delete_groups(conn: &mut PgConnection, wish_id: Uuid) -> Result<u64, sqlx::Error> {
    let deleted = sqlx::query!("DELETE FROM tasks WHERE wish_id = $1", wish_id).execute(&mut *conn).await?;
    sqlx::query!("UPDATE wishes SET groups_open = 0 WHERE id = $1", wish_id).execute(conn).await?;
    Ok(deleted.rows_affected())
}

/// What a group action starts from, in one statement: the wish, and its group `key` (when it
/// has one) with the keys that group depends on.
pub async fn for_group(
    conn: &mut PgConnection,
    slug: &str,
    key: &str,
) -> Result<Option<(Wish, Option<(tasks::Task, Vec<String>)>)>, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT to_jsonb(w) AS "wish!: sqlx::types::Json<WishRow>",
                  to_jsonb(t) AS "task: sqlx::types::Json<tasks::TaskRow>",
                  ARRAY(SELECT d.group_key FROM task_dependencies td JOIN tasks d ON d.id = td.depends_on
                        WHERE td.task_id = t.id ORDER BY d.group_key) AS "depends_on!: Vec<String>"
           FROM wishes w LEFT JOIN tasks t ON t.wish_id = w.id AND t.group_key = $2
           WHERE w.slug = $1"#,
        slug,
        key
    )
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let wish = Wish::try_from(row.wish.0)?;
    let group = row.task.map(|t| tasks::Task::try_from(t.0)).transpose()?.map(|task| (task, row.depends_on));
    Ok(Some((wish, group)))
}

/// Counts one more of the wish's groups done and returns the wish as it is now. The update
/// waits for any other completion of the same wish to commit, so of two concurrent last
/// completions exactly one reads `groups_open == 0`.
pub async fn group_done(conn: &mut PgConnection, wish_id: Uuid) -> Result<Option<Wish>, sqlx::Error> {
    let row =
        sqlx::query_as!(WishRow, "UPDATE wishes SET groups_open = groups_open - 1 WHERE id = $1 RETURNING *", wish_id)
            .fetch_optional(conn)
            .await?;
    row.map(Wish::try_from).transpose()
}

pub async fn get(conn: &mut PgConnection, slug: &str) -> Result<Option<Wish>, sqlx::Error> {
    let row = sqlx::query_as!(WishRow, "SELECT * FROM wishes WHERE slug = $1", slug).fetch_optional(conn).await?;
    row.map(Wish::try_from).transpose()
}

pub async fn ids_by_slug(conn: &mut PgConnection, slugs: &[String]) -> Result<Vec<(String, Uuid)>, sqlx::Error> {
    let rows = sqlx::query!("SELECT slug, id FROM wishes WHERE slug = ANY($1)", slugs).fetch_all(conn).await?;
    Ok(rows.into_iter().map(|r| (r.slug, r.id)).collect())
}

/// A page of wishes in (created_at, id) order, optionally of one project and status.
pub async fn list(
    conn: &mut PgConnection,
    project_id: Option<Uuid>,
    status: Option<WishStatus>,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Wish>, sqlx::Error> {
    let (after_at, after_id) = after.unzip();
    let rows = sqlx::query_as!(
        WishRow,
        "SELECT * FROM wishes
         WHERE ($1::uuid IS NULL OR project_id = $1)
           AND ($2::text IS NULL OR status = $2)
           AND ($3::timestamptz IS NULL OR (created_at, id) > ($3, $4))
         ORDER BY created_at, id
         LIMIT $5",
        project_id,
        status.map(|s| s.as_str()),
        after_at,
        after_id,
        limit
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(Wish::try_from).collect()
}

/// The slugs this wish waits for, with whether each has merged.
pub async fn blockers(conn: &mut PgConnection, wish_id: Uuid) -> Result<Vec<Blocker>, sqlx::Error> {
    sqlx::query_as!(
        Blocker,
        r#"SELECT w.slug, w.status = 'merged' AS "merged!" FROM wish_blockers b JOIN wishes w ON w.id = b.blocked_by
           WHERE b.wish_id = $1 ORDER BY w.slug"#,
        wish_id
    )
    .fetch_all(conn)
    .await
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"slug": "auth-schema", "merged": false}))]
pub struct Blocker {
    pub slug: String,
    pub merged: bool,
}

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
    let row =
        sqlx::query_as!(WishRow, "SELECT * FROM wishes WHERE id = $1 FOR UPDATE", wish_id).fetch_optional(conn).await?;
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

/// A group as shown with its wish: the task, and the keys it depends on.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Group {
    pub key: String,
    pub task_id: Uuid,
    pub title: String,
    pub goal: String,
    #[schema(value_type = String, example = "ready")]
    pub status: TaskStatus,
    pub depends_on: Vec<String>,
    pub assignee: Option<String>,
    pub result: Option<String>,
    pub iterations: i32,
    pub max_iterations: i32,
}

impl Group {
    /// The group that `task` is, depending on the groups `depends_on`.
    pub fn of(task: &tasks::Task, depends_on: Vec<String>) -> Group {
        Group {
            key: task.group_key.clone().unwrap_or_default(),
            task_id: task.id,
            title: task.title.clone(),
            goal: task.goal.clone(),
            status: task.status,
            depends_on,
            assignee: task.assignee.clone(),
            result: task.result.clone(),
            iterations: task.iterations,
            max_iterations: task.max_iterations,
        }
    }
}

/// The wish's groups with their dependencies' keys, in creation order.
pub async fn groups(conn: &mut PgConnection, wish_id: Uuid) -> Result<Vec<Group>, sqlx::Error> {
    group_rows(conn, wish_id, None).await
}

/// One group of the wish, read without touching the others.
pub async fn group(conn: &mut PgConnection, wish_id: Uuid, key: &str) -> Result<Option<Group>, sqlx::Error> {
    Ok(group_rows(conn, wish_id, Some(key)).await?.pop())
}

async fn group_rows(conn: &mut PgConnection, wish_id: Uuid, key: Option<&str>) -> Result<Vec<Group>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT t.id, t.group_key AS "key!", t.title, t.goal, t.status, t.assignee, t.result, t.iterations,
                  t.max_iterations,
                  COALESCE(array_agg(d.group_key ORDER BY d.group_key) FILTER (WHERE d.id IS NOT NULL), '{}')
                    AS "depends_on!: Vec<String>"
           FROM tasks t
           LEFT JOIN task_dependencies td ON td.task_id = t.id
           LEFT JOIN tasks d ON d.id = td.depends_on
           WHERE t.wish_id = $1 AND ($2::text IS NULL OR t.group_key = $2)
           GROUP BY t.id
           ORDER BY t.created_at, t.id"#,
        wish_id,
        key
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(Group {
                status: r.status.parse().map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
                key: r.key,
                task_id: r.id,
                title: r.title,
                goal: r.goal,
                depends_on: r.depends_on,
                assignee: r.assignee,
                result: r.result,
                iterations: r.iterations,
                max_iterations: r.max_iterations,
            })
        })
        .collect()
}

pub async fn group_task(conn: &mut PgConnection, wish_id: Uuid, key: &str) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!("SELECT id FROM tasks WHERE wish_id = $1 AND group_key = $2", wish_id, key)
        .fetch_optional(conn)
        .await
}

pub fn subject(wish: &Wish) -> String {
    format!("wish:{}", wish.slug)
}
