//! The merge queue in the database: one entry per wish, every change a conditional update on the
//! entry's state (and, while processing, on the process that claimed it) with its event row.
//! A project's merge settings are [`settings`]; the gates this node runs, [`gates`].

pub mod gates;
pub mod settings;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Value};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::events;
use crate::domain::merge_queue::EntryState;

/// An entry as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "5d0c1f7e-2a3b-4c5d-8e9f-0a1b2c3d4e5f", "wish": "login-page", "title": "Add a login page",
    "project": "shop", "target_branch": "main", "wish_branch": "wish/login-page", "position": 7, "state": "pending",
    "held": false, "held_for": "cart-rework", "waiting": null, "prediction": {"target": {"outcome": "clean"},
    "conflicts_ahead": [{"wish": "cart-rework", "files": ["src/app.rs"]}],
    "wish_commit": "9f3c2e1d0b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e", "target_commit": "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"},
    "base_commit": null, "wish_commit": null, "merge_commit": null, "gate_log": null, "conflict_files": [],
    "failure_reason": null, "attempts": 0, "fix_attempts": 0, "assignee": null, "fix_agent": null}))]
pub struct Entry {
    pub id: Uuid,
    pub wish_id: Uuid,
    /// The wish's slug.
    pub wish: String,
    pub title: String,
    pub project_id: Uuid,
    /// The project's slug.
    pub project: String,
    pub target_branch: String,
    pub wish_branch: String,
    /// Order in its queue (lower goes first); not dense.
    pub position: i64,
    #[schema(value_type = String, example = "pending")]
    pub state: EntryState,
    /// Held by a person: skipped until released.
    pub held: bool,
    /// Predicted to conflict with this wish ahead of it: waits until that one leaves the queue.
    pub held_for: Option<String>,
    /// Why it waits for something outside the queue, e.g. `uncommitted changes in /home/me/shop`
    /// (its target branch is checked out in a working tree that is not clean): it goes on by
    /// itself once that is resolved.
    pub waiting: Option<String>,
    /// The last conflict prediction of the branch at `wish_commit`: against the target branch
    /// (at `target_commit`, where it was last predicted) and the entries ahead it conflicts with
    /// (`conflicts_ahead`: the others merge cleanly with it). Rewritten only when it changes.
    #[schema(value_type = Option<Object>)]
    pub prediction: Option<Value>,
    /// The target branch's commit the current or last attempt merged onto.
    pub base_commit: Option<String>,
    pub wish_commit: Option<String>,
    /// The merge commit, recorded once the gate passed and before the target branch moved.
    pub merge_commit: Option<String>,
    /// The gate command's output (its tail when long).
    pub gate_log: Option<String>,
    pub conflict_files: Vec<String>,
    pub failure_reason: Option<String>,
    /// Processing attempts so far.
    pub attempts: i32,
    /// Fix agents sent so far.
    pub fix_attempts: i32,
    /// `human` when a person must act (the fix cap is reached, or nothing an agent can do).
    pub assignee: Option<String>,
    /// The fix agent working on it now, if any.
    pub fix_agent: Option<String>,
    pub claimed_by: Option<String>,
    #[serde(skip)]
    pub claimed_run: Option<DateTime<Utc>>,
    pub lease_until: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub version: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

struct EntryRow {
    id: Uuid,
    wish_id: Uuid,
    wish: String,
    title: String,
    project_id: Uuid,
    project: String,
    target_branch: String,
    wish_branch: String,
    position: i64,
    state: String,
    held: bool,
    held_for: Option<String>,
    waiting: Option<String>,
    prediction: Option<Value>,
    base_commit: Option<String>,
    wish_commit: Option<String>,
    merge_commit: Option<String>,
    gate_log: Option<String>,
    conflict_files: Vec<String>,
    failure_reason: Option<String>,
    attempts: i32,
    fix_attempts: i32,
    assignee: Option<String>,
    fix_agent: Option<String>,
    claimed_by: Option<String>,
    claimed_run: Option<DateTime<Utc>>,
    lease_until: Option<DateTime<Utc>>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    version: i32,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<EntryRow> for Entry {
    type Error = sqlx::Error;

    fn try_from(r: EntryRow) -> Result<Entry, sqlx::Error> {
        Ok(Entry {
            state: r.state.parse().map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
            id: r.id,
            wish_id: r.wish_id,
            wish: r.wish,
            title: r.title,
            project_id: r.project_id,
            project: r.project,
            target_branch: r.target_branch,
            wish_branch: r.wish_branch,
            position: r.position,
            held: r.held,
            held_for: r.held_for,
            waiting: r.waiting,
            prediction: r.prediction,
            base_commit: r.base_commit,
            wish_commit: r.wish_commit,
            merge_commit: r.merge_commit,
            gate_log: r.gate_log,
            conflict_files: r.conflict_files,
            failure_reason: r.failure_reason,
            attempts: r.attempts,
            fix_attempts: r.fix_attempts,
            assignee: r.assignee,
            fix_agent: r.fix_agent,
            claimed_by: r.claimed_by,
            claimed_run: r.claimed_run,
            lease_until: r.lease_until,
            started_at: r.started_at,
            finished_at: r.finished_at,
            version: r.version,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

/// Which entries [`list`] reads; the filters combine with AND.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub id: Option<Uuid>,
    pub wish_id: Option<Uuid>,
    pub project_id: Option<Uuid>,
    pub target_branch: Option<String>,
    /// Only pending and processing entries.
    pub open_only: bool,
    /// Only entries handed to a person.
    pub needs_person: bool,
}

/// Entries in queue order (project, target branch, position). Every read goes through here.
pub async fn list(conn: &mut PgConnection, filter: &Filter, limit: i64) -> Result<Vec<Entry>, sqlx::Error> {
    let rows = sqlx::query_as!(
        EntryRow,
        r#"SELECT q.id, q.wish_id, w.slug AS wish, w.title, q.project_id, p.slug AS project, q.target_branch,
                  q.wish_branch, q.position, q.state, q.held, q.held_for, q.waiting, q.prediction, q.base_commit,
                  q.wish_commit, q.merge_commit, q.gate_log, q.conflict_files, q.failure_reason, q.attempts,
                  q.fix_attempts, q.assignee, q.fix_agent, q.claimed_by, q.claimed_run, q.lease_until,
                  q.started_at, q.finished_at, q.version, q.created_at, q.updated_at
           FROM merge_queue q JOIN wishes w ON w.id = q.wish_id JOIN projects p ON p.id = q.project_id
           WHERE ($1::uuid IS NULL OR q.id = $1) AND ($2::uuid IS NULL OR q.wish_id = $2)
             AND ($3::uuid IS NULL OR q.project_id = $3) AND ($4::text IS NULL OR q.target_branch = $4)
             AND (NOT $5 OR q.state IN ('pending', 'processing')) AND (NOT $6 OR q.assignee = 'human')
           ORDER BY p.slug, q.target_branch, q.position
           LIMIT $7"#,
        filter.id,
        filter.wish_id,
        filter.project_id,
        filter.target_branch,
        filter.open_only,
        filter.needs_person,
        limit
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(Entry::try_from).collect()
}

pub async fn get(conn: &mut PgConnection, id: Uuid) -> Result<Option<Entry>, sqlx::Error> {
    Ok(list(conn, &Filter { id: Some(id), ..Filter::default() }, 1).await?.pop())
}

pub async fn for_wish(conn: &mut PgConnection, wish_id: Uuid) -> Result<Option<Entry>, sqlx::Error> {
    Ok(list(conn, &Filter { wish_id: Some(wish_id), ..Filter::default() }, 1).await?.pop())
}

/// The (project, target branch) pairs with an entry waiting or being processed.
pub async fn open_queues(conn: &mut PgConnection) -> Result<Vec<(Uuid, String)>, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT DISTINCT project_id, target_branch FROM merge_queue WHERE state IN ('pending', 'processing')
         ORDER BY project_id, target_branch"
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.project_id, r.target_branch)).collect())
}

fn subject(entry: &Entry) -> String {
    format!("merge:{}", entry.wish)
}

/// Records `merge.<what>` about the entry as it is now.
pub async fn record(conn: &mut PgConnection, what: &str, entry: &Entry, extra: Value) -> Result<(), sqlx::Error> {
    let mut payload = json!({"wish": entry.wish, "project": entry.project, "target_branch": entry.target_branch,
        "state": entry.state, "position": entry.position});
    if let (Some(payload), Value::Object(extra)) = (payload.as_object_mut(), extra) {
        payload.extend(extra);
    }
    events::record(conn, &format!("merge.{what}"), &subject(entry), payload).await?;
    Ok(())
}

/// Puts the wish into its queue as `pending` at the back, or — an entry it had before (a retried
/// or removed one) — back to `pending` where it was.
pub async fn enqueue(
    conn: &mut PgConnection,
    wish_id: Uuid,
    project_id: Uuid,
    target_branch: &str,
    wish_branch: &str,
) -> Result<Entry, sqlx::Error> {
    let id = sqlx::query_scalar!(
        "INSERT INTO merge_queue (id, wish_id, project_id, target_branch, wish_branch)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (wish_id) DO UPDATE SET state = 'pending', target_branch = EXCLUDED.target_branch,
             wish_branch = EXCLUDED.wish_branch, held_for = NULL, waiting = NULL, assignee = NULL, failure_reason = NULL,
             conflict_files = '{}', fix_agent = NULL, claimed_by = NULL, claimed_run = NULL, lease_until = NULL,
             finished_at = NULL, version = merge_queue.version + 1, updated_at = now()
         WHERE merge_queue.state <> 'processing'
         RETURNING id",
        Uuid::new_v4(),
        wish_id,
        project_id,
        target_branch,
        wish_branch
    )
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(sqlx::Error::RowNotFound)?;
    let entry = get(conn, id).await?.ok_or(sqlx::Error::RowNotFound)?;
    record(conn, "queued", &entry, json!({})).await?;
    Ok(entry)
}

/// Whether the queue of `project_id` and `target_branch` is free for `node`'s process `run`: no
/// entry of it is processing under another process's claim. Taken under a transaction-long
/// advisory lock on the queue, so two processes never both find it free: the caller claims in
/// the same transaction.
pub async fn lock_queue(
    conn: &mut PgConnection,
    project_id: Uuid,
    target_branch: &str,
    node: &str,
    run: DateTime<Utc>,
) -> Result<bool, sqlx::Error> {
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended($1::uuid::text || ':' || $2::text, 41))",
        project_id,
        target_branch
    )
    .fetch_one(&mut *conn)
    .await?;
    let taken = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM merge_queue WHERE project_id = $1 AND target_branch = $2
               AND state = 'processing' AND (claimed_by <> $3 OR claimed_run <> $4)) AS "taken!""#,
        project_id,
        target_branch,
        node,
        run
    )
    .fetch_one(conn)
    .await?;
    Ok(!taken)
}

/// Keeps every claim of `node`'s process `run` alive while its gates run.
pub async fn renew_run(
    conn: &mut PgConnection,
    node: &str,
    run: DateTime<Utc>,
    lease: std::time::Duration,
) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE merge_queue SET lease_until = now() + make_interval(secs => $3)
         WHERE state = 'processing' AND claimed_by = $1 AND claimed_run = $2",
        node,
        run,
        lease.as_secs_f64()
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// Claims a pending, unheld entry for this process, recording the commits the attempt will merge
/// (`base`: the commit it is merged onto, `wish`: the wish branch's; `None` when the branch is
/// missing) before git acts on them: one conditional update. `None` when another node took it.
/// The caller holds the queue ([`lock_queue`]).
pub async fn claim(
    conn: &mut PgConnection,
    entry: &Entry,
    node: &str,
    run: DateTime<Utc>,
    lease: std::time::Duration,
    (base, wish): (Option<&str>, Option<&str>),
) -> Result<Option<Entry>, sqlx::Error> {
    let lease_secs = lease.as_secs_f64();
    let claimed = sqlx::query_scalar!(
        "UPDATE merge_queue SET state = 'processing', claimed_by = $2, claimed_run = $3,
             lease_until = now() + make_interval(secs => $4), attempts = attempts + 1, started_at = now(),
             finished_at = NULL, base_commit = $6, wish_commit = $7, merge_commit = NULL, gate_log = NULL,
             conflict_files = '{}', failure_reason = NULL, waiting = NULL, version = version + 1,
             updated_at = now()
         WHERE id = $1 AND state = 'pending' AND NOT held AND held_for IS NULL AND version = $5
         RETURNING id",
        entry.id,
        node,
        run,
        lease_secs,
        entry.version,
        base,
        wish
    )
    .fetch_optional(&mut *conn)
    .await;
    let claimed = match claimed {
        Ok(claimed) => claimed,
        Err(sqlx::Error::Database(db)) if db.constraint() == Some("merge_queue_one_processing") => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(id) = claimed else { return Ok(None) };
    let entry = get(conn, id).await?.ok_or(sqlx::Error::RowNotFound)?;
    record(conn, "started", &entry, json!({"attempt": entry.attempts, "node": node})).await?;
    Ok(Some(entry))
}

/// The commits an attempt works with, written before git is asked to merge them; only while this
/// process still holds the claim.
pub async fn record_commits(
    conn: &mut PgConnection,
    entry: &Entry,
    base: &str,
    wish: &str,
    merge: Option<&str>,
    gate_log: Option<&str>,
) -> Result<Option<Entry>, sqlx::Error> {
    let id = sqlx::query_scalar!(
        "UPDATE merge_queue SET base_commit = $3, wish_commit = $4, merge_commit = $5, gate_log = $6,
             lease_until = greatest(lease_until, now() + interval '60 seconds'), updated_at = now()
         WHERE id = $1 AND state = 'processing' AND claimed_run = $2 RETURNING id",
        entry.id,
        entry.claimed_run,
        base,
        wish,
        merge,
        gate_log
    )
    .fetch_optional(&mut *conn)
    .await?;
    match id {
        Some(id) => get(conn, id).await,
        None => Ok(None),
    }
}

/// How an attempt ended.
#[derive(Debug, Clone, Default)]
pub struct Finish<'a> {
    pub failure_reason: Option<&'a str>,
    pub conflict_files: &'a [String],
    pub gate_log: Option<&'a str>,
}

/// Ends a processing entry in `to` (`completed`, `failed`, `conflict`, or `pending` for a
/// recovered one), conditional on the claim it was decided under.
pub async fn finish(
    conn: &mut PgConnection,
    entry: &Entry,
    to: EntryState,
    how: &Finish<'_>,
) -> Result<Option<Entry>, sqlx::Error> {
    let id = sqlx::query_scalar!(
        "UPDATE merge_queue SET state = $3, claimed_by = NULL, claimed_run = NULL, lease_until = NULL,
             failure_reason = $4, conflict_files = $5, gate_log = COALESCE($6, gate_log),
             finished_at = CASE WHEN $3 = 'pending' THEN NULL ELSE now() END,
             held_for = NULL, version = version + 1, updated_at = now()
         WHERE id = $1 AND state = 'processing' AND claimed_run IS NOT DISTINCT FROM $2 RETURNING id",
        entry.id,
        entry.claimed_run,
        to.as_str(),
        how.failure_reason,
        how.conflict_files,
        how.gate_log
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(id) = id else { return Ok(None) };
    let entry = get(conn, id).await?.ok_or(sqlx::Error::RowNotFound)?;
    let what = match to {
        EntryState::Pending => "recovered",
        other => other.as_str(),
    };
    let extra = json!({"merge_commit": entry.merge_commit, "conflict_files": entry.conflict_files,
        "failure_reason": entry.failure_reason});
    record(conn, what, &entry, extra).await?;
    Ok(Some(entry))
}

/// A failed or conflicting entry goes back to `pending` in its place (a person retried it, or
/// its fix agent is done). `summary` is what the fixer said.
pub async fn retry(
    conn: &mut PgConnection,
    entry: &Entry,
    by: &str,
    summary: Option<&str>,
) -> Result<Option<Entry>, sqlx::Error> {
    let id = sqlx::query_scalar!(
        "UPDATE merge_queue SET state = 'pending', assignee = NULL, fix_agent = NULL, held_for = NULL,
             version = version + 1, updated_at = now()
         WHERE id = $1 AND state IN ('failed', 'conflict') AND version = $2 RETURNING id",
        entry.id,
        entry.version
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(id) = id else { return Ok(None) };
    let entry = get(conn, id).await?.ok_or(sqlx::Error::RowNotFound)?;
    record(conn, "retried", &entry, json!({"by": by, "summary": summary})).await?;
    Ok(Some(entry))
}

/// Who acts on a failed or conflicting entry next: a fix agent (counted) or a person.
pub async fn hand_off(
    conn: &mut PgConnection,
    entry: &Entry,
    fix_agent: Option<&str>,
    why: &str,
) -> Result<Option<Entry>, sqlx::Error> {
    let id = sqlx::query_scalar!(
        "UPDATE merge_queue SET fix_agent = $3, assignee = CASE WHEN $3::text IS NULL THEN 'human' END,
             fix_attempts = fix_attempts + CASE WHEN $3::text IS NULL THEN 0 ELSE 1 END,
             version = version + 1, updated_at = now()
         WHERE id = $1 AND state IN ('failed', 'conflict') AND version = $2 RETURNING id",
        entry.id,
        entry.version,
        fix_agent
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(id) = id else { return Ok(None) };
    let entry = get(conn, id).await?.ok_or(sqlx::Error::RowNotFound)?;
    let what = if fix_agent.is_some() { "fix_requested" } else { "needs_human" };
    record(conn, what, &entry, json!({"fix_agent": fix_agent, "why": why})).await?;
    Ok(Some(entry))
}

/// Holds or releases an entry (a person's hold; not the predicted wait).
pub async fn set_held(conn: &mut PgConnection, entry: &Entry, held: bool) -> Result<Option<Entry>, sqlx::Error> {
    let id = sqlx::query_scalar!(
        "UPDATE merge_queue SET held = $3, version = version + 1, updated_at = now()
         WHERE id = $1 AND version = $2 AND held <> $3 RETURNING id",
        entry.id,
        entry.version,
        held
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(id) = id else { return Ok(None) };
    let entry = get(conn, id).await?.ok_or(sqlx::Error::RowNotFound)?;
    record(conn, if held { "held" } else { "released" }, &entry, json!({})).await?;
    Ok(Some(entry))
}

/// Records a pending entry's prediction and what it waits for; an event only when the wait
/// changes (predictions are repeated every pass).
pub async fn set_prediction(
    conn: &mut PgConnection,
    entry: &Entry,
    prediction: &Value,
    held_for: Option<&str>,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE merge_queue SET prediction = $3, held_for = $4, updated_at = now()
         WHERE id = $1 AND state = 'pending' AND version = $2",
        entry.id,
        entry.version,
        prediction,
        held_for
    )
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 1 && entry.held_for.as_deref() != held_for {
        record(conn, "waiting", entry, json!({"held_for": held_for})).await?;
    }
    Ok(done.rows_affected() == 1)
}

/// Records why a pending entry waits for something outside the queue (`None`: it no longer does),
/// with an event when that changed.
pub async fn set_waiting(conn: &mut PgConnection, entry: &Entry, waiting: Option<&str>) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE merge_queue SET waiting = $3, updated_at = now()
         WHERE id = $1 AND state = 'pending' AND version = $2 AND waiting IS DISTINCT FROM $3",
        entry.id,
        entry.version,
        waiting
    )
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 1 {
        record(conn, "waiting", entry, json!({"waiting": waiting})).await?;
    }
    Ok(done.rows_affected() == 1)
}

/// Removes an entry that is not processing.
pub async fn delete(conn: &mut PgConnection, entry: &Entry) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM merge_queue WHERE id = $1 AND version = $2 AND state <> 'processing'",
        entry.id,
        entry.version
    )
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 1 {
        record(conn, "removed", entry, json!({})).await?;
    }
    Ok(done.rows_affected() == 1)
}

/// A waiting entry whose branch's CI failed: `failed` with the report, like a failed gate.
pub async fn fail_waiting(
    conn: &mut PgConnection,
    entry: &Entry,
    reason: &str,
    log: &str,
) -> Result<Option<Entry>, sqlx::Error> {
    let id = sqlx::query_scalar!(
        "UPDATE merge_queue SET state = 'failed', failure_reason = $3, gate_log = $4, finished_at = now(),
             held_for = NULL, version = version + 1, updated_at = now()
         WHERE id = $1 AND state = 'pending' AND version = $2 RETURNING id",
        entry.id,
        entry.version,
        reason,
        log
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(id) = id else { return Ok(None) };
    let entry = get(conn, id).await?.ok_or(sqlx::Error::RowNotFound)?;
    record(conn, "failed", &entry, json!({"failure_reason": reason})).await?;
    Ok(Some(entry))
}

/// Processing entries whose claim is void: its lease ran out, or it was made by an earlier run
/// of this node (the process died and started again).
pub async fn void_claims(conn: &mut PgConnection, node: &str, run: DateTime<Utc>) -> Result<Vec<Entry>, sqlx::Error> {
    let ids = sqlx::query_scalar!(
        "SELECT id FROM merge_queue WHERE state = 'processing'
           AND (lease_until < now() OR (claimed_by = $1 AND claimed_run <> $2))
         ORDER BY position",
        node,
        run
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut entries = Vec::with_capacity(ids.len());
    for id in ids {
        entries.extend(get(conn, id).await?);
    }
    Ok(entries)
}

/// The slug of the project with this id (the project functions look projects up by slug).
pub async fn project_slug(conn: &mut PgConnection, project_id: Uuid) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!("SELECT slug FROM projects WHERE id = $1", project_id).fetch_optional(conn).await
}

/// Completed wishes with a branch, not held, of projects whose merge queue is enabled: the ones
/// to enter the queue, in the order they completed.
pub async fn completed_to_enter(conn: &mut PgConnection, limit: i64) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT w.id FROM wishes w JOIN projects p ON p.id = w.project_id
         WHERE w.status = 'completed' AND NOT w.held AND w.branch IS NOT NULL
           AND (p.merge_queue_config->>'enabled')::boolean
         ORDER BY w.completed_at, w.created_at, w.id
         LIMIT $1",
        limit
    )
    .fetch_all(conn)
    .await
}

/// Wishes `pending_merge` (not held) whose entry is missing or settled: a resume from `conflict`,
/// or a wish that was pending before the queue existed. Their entries go back to `pending`.
pub async fn pending_without_entry(conn: &mut PgConnection, limit: i64) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT w.id FROM wishes w LEFT JOIN merge_queue q ON q.wish_id = w.id
         WHERE w.status = 'pending_merge' AND NOT w.held AND w.branch IS NOT NULL
           AND (q.id IS NULL OR q.state IN ('failed', 'conflict', 'completed'))
         ORDER BY w.updated_at, w.id
         LIMIT $1",
        limit
    )
    .fetch_all(conn)
    .await
}
