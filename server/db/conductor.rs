//! What the conductor reads and writes: the wishes and groups it has a step to take for, each
//! claimed with `FOR NO KEY UPDATE … SKIP LOCKED` so that with several nodes each step is taken
//! once, and the few columns only it writes (a group's branch and report, a wish's phase and
//! assignee).
//!
//! Rows are locked `FOR NO KEY UPDATE`, never `FOR UPDATE`: no step deletes them or changes a
//! key, and `FOR UPDATE` also blocks the foreign-key checks of rows that point at them. With it,
//! a dispatch inserting an agent for a wish waited on the integration holding that wish while
//! the integration waited on a group the dispatch had started: a deadlock, found by PostgreSQL
//! only after its `deadlock_timeout` (1 s), 15 times in a benchmark round of 250 groups.

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::agents::Agent;
use super::tasks::{Task, TaskRow};
use super::wishes::{Wish, WishRow};
use crate::domain::project::ConductorConfig;
use crate::domain::wish::WishPhase;

/// A wish with what the conductor needs of its project.
#[derive(Debug, Clone)]
pub struct Conducted {
    pub wish: Wish,
    pub project_slug: String,
    pub repo_path: String,
    pub target_branch: String,
    pub config: ConductorConfig,
}

struct ConductedRow {
    wish: Json<WishRow>,
    project_slug: String,
    repo_path: String,
    target_branch: String,
    config: Json<ConductorConfig>,
}

impl TryFrom<ConductedRow> for Conducted {
    type Error = sqlx::Error;
    fn try_from(r: ConductedRow) -> Result<Conducted, sqlx::Error> {
        Ok(Conducted {
            wish: Wish::try_from(r.wish.0)?,
            project_slug: r.project_slug,
            repo_path: r.repo_path,
            target_branch: r.target_branch,
            config: r.config.0,
        })
    }
}

/// What a wish waits for from the conductor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// A draft with a description, no plan and a project whose planning is `agent`.
    Planner,
    /// Planned, in a project whose plans need no approval.
    Queue,
    /// Queued with every blocker merged.
    Start,
    /// Executing in `agent_review` with no reviewer at work.
    Reviewer,
    /// Executing in `fix` with no fix agent at work.
    Fixer,
}

/// Up to `limit` wishes due for `due`, locked (skipping those another node holds) until the
/// caller's transaction ends. A wish handed to a person (`assignee`) waits for them.
pub async fn due(conn: &mut PgConnection, due: Due, limit: i64) -> Result<Vec<Conducted>, sqlx::Error> {
    let (status, phase, role) = match due {
        Due::Planner => ("draft", None, Some("planner")),
        Due::Queue => ("planned", None, None),
        Due::Start => ("queued", None, None),
        Due::Reviewer => ("executing", Some(WishPhase::AgentReview), Some("reviewer")),
        Due::Fixer => ("executing", Some(WishPhase::Fix), Some("fix")),
    };
    let rows = sqlx::query_as!(
        ConductedRow,
        r#"SELECT to_jsonb(w) AS "wish!: Json<WishRow>", p.slug AS project_slug, COALESCE(p.repo_url, p.repo_path) AS "repo_path!", p.target_branch,
                  p.conductor_config AS "config!: Json<ConductorConfig>"
           FROM wishes w JOIN projects p ON p.id = w.project_id
           WHERE w.status = $1 AND NOT w.held AND w.assignee IS NULL
             AND ($2::text IS NULL OR w.phase = $2)
             -- A draft needs a description to plan from, no plan yet, and a project that plans by agent.
             AND ($1 <> 'draft' OR (w.description <> '' AND p.conductor_config->>'planning' = 'agent'
                  AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.wish_id = w.id)))
             AND ($1 <> 'planned' OR p.conductor_config->>'plan_approval' = 'auto')
             AND ($1 <> 'queued' OR NOT EXISTS (SELECT 1 FROM wish_blockers b JOIN wishes o ON o.id = b.blocked_by
                                               WHERE b.wish_id = w.id AND o.status <> 'merged'))
             -- No agent of the role still on the step (one whose work concluded is ready for cleanup).
             AND ($3::text IS NULL OR NOT EXISTS (SELECT 1 FROM agents a WHERE a.wish_id = w.id AND a.role = $3
                                                  AND a.task_id IS NULL AND NOT a.ready_for_cleanup))
           ORDER BY w.created_at, w.id
           LIMIT $4
           FOR NO KEY UPDATE OF w SKIP LOCKED"#,
        status,
        phase.map(|p| p.as_str()),
        role,
        limit
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(Conducted::try_from).collect()
}

/// A group ready to run, with its wish and project.
#[derive(Debug, Clone)]
pub struct ReadyGroup {
    pub task: Task,
    pub conducted: Conducted,
}

/// Up to `limit` ready groups nobody is assigned to, of executing wishes that are not held,
/// oldest wish first; each group row locked (skipping those another node holds).
pub async fn ready_groups(conn: &mut PgConnection, limit: i64) -> Result<Vec<ReadyGroup>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT to_jsonb(t) AS "task!: Json<TaskRow>", to_jsonb(w) AS "wish!: Json<WishRow>",
                  p.slug AS project_slug, COALESCE(p.repo_url, p.repo_path) AS "repo_path!", p.target_branch,
                  p.conductor_config AS "config!: Json<ConductorConfig>"
           FROM tasks t JOIN wishes w ON w.id = t.wish_id JOIN projects p ON p.id = w.project_id
           WHERE t.status = 'ready' AND t.assignee IS NULL AND w.status = 'executing' AND NOT w.held
             AND w.phase = 'groups'
           ORDER BY w.created_at, t.created_at, t.id
           LIMIT $1
           FOR NO KEY UPDATE OF t SKIP LOCKED"#,
        limit
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(ReadyGroup {
                task: Task::try_from(r.task.0)?,
                conducted: ConductedRow {
                    wish: r.wish,
                    project_slug: r.project_slug,
                    repo_path: r.repo_path,
                    target_branch: r.target_branch,
                    config: r.config,
                }
                .try_into()?,
            })
        })
        .collect()
}

/// The project's row, locked: dispatches of one project are counted one at a time.
pub async fn lock_project(conn: &mut PgConnection, project_id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query!("SELECT id FROM projects WHERE id = $1 FOR NO KEY UPDATE", project_id).fetch_optional(conn).await?;
    Ok(())
}

/// How many of the project's conductor agents are still on a step (not concluded).
pub async fn agents_at_work(conn: &mut PgConnection, project_id: Uuid) -> Result<i64, sqlx::Error> {
    let n = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM agents
           WHERE project_id = $1 AND wish_id IS NOT NULL AND NOT ready_for_cleanup AND state NOT IN ('done', 'error')"#,
        project_id
    )
    .fetch_one(conn)
    .await?;
    Ok(n)
}

/// Whether a conflict of this wish with this target commit was already predicted (and recorded).
pub async fn conflict_predicted(
    conn: &mut PgConnection,
    subject: &str,
    target_commit: &str,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM events WHERE subject = $1 AND type = 'wish.conflict_predicted'
                            AND payload->>'target_commit' = $2) AS "known!""#,
        subject,
        target_commit
    )
    .fetch_one(conn)
    .await
}

/// Providers with an agent held at a usage limit until a time still to come, and that time.
pub async fn providers_at_limit(conn: &mut PgConnection) -> Result<Vec<(String, DateTime<Utc>)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT provider, max(suspended_until) AS "until!" FROM agents
           WHERE state = 'suspended' AND suspended_until > now() GROUP BY provider"#
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.provider, r.until)).collect())
}

/// Records where a dispatched group runs: its branch, the commit it starts from, its agent.
pub async fn record_dispatch(
    conn: &mut PgConnection,
    task_id: Uuid,
    branch: &str,
    base_commit: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE tasks SET branch = $2, base_commit = $3, head_commit = NULL, reported_at = NULL,
                          version = version + 1, updated_at = now()
         WHERE id = $1",
        task_id,
        branch,
        base_commit
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Records a group's done report (its head commit and summary), if the group is still running.
pub async fn record_report(
    conn: &mut PgConnection,
    task_id: Uuid,
    head_commit: &str,
    summary: &str,
) -> Result<Option<Task>, sqlx::Error> {
    let row = sqlx::query_scalar!(
        r#"UPDATE tasks t SET head_commit = $2, result = $3, reported_at = now(), version = version + 1,
                              updated_at = now()
           WHERE id = $1 AND status = 'in_progress' RETURNING to_jsonb(t) AS "task!: Json<TaskRow>""#,
        task_id,
        head_commit,
        summary
    )
    .fetch_optional(conn)
    .await?;
    row.map(|r| Task::try_from(r.0)).transpose()
}

/// Withdraws a done report (the merge conflicted: the agent must merge and report again).
pub async fn clear_report(conn: &mut PgConnection, task_id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE tasks SET reported_at = NULL, version = version + 1, updated_at = now() WHERE id = $1",
        task_id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Records the wish-branch merge that took a group in.
pub async fn record_merge_commit(conn: &mut PgConnection, task_id: Uuid, commit: &str) -> Result<(), sqlx::Error> {
    sqlx::query!("UPDATE tasks SET merge_commit = $2 WHERE id = $1", task_id, commit).execute(conn).await?;
    Ok(())
}

/// Whether a group waits to be merged ([`wishes_to_integrate`]) and whether one waits to be
/// dispatched ([`ready_groups`]) while fewer than `backlog` agents wait for a pane
/// ([`agents_spawning`]): one query, which is all a tick on a group's way costs when neither does
/// (every commit anywhere wakes one).
pub async fn groups_due(conn: &mut PgConnection, backlog: i64) -> Result<(bool, bool), sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT EXISTS (SELECT 1 FROM tasks t
                          WHERE t.reported_at IS NOT NULL AND t.status = 'in_progress' AND t.wish_id IS NOT NULL
                            AND NOT EXISTS (SELECT 1 FROM stalled_steps s
                                            WHERE s.subject = 'wish:' || t.wish_id AND s.retry_at > now()))
                      AS "integrate!",
                  EXISTS (SELECT 1 FROM tasks t JOIN wishes w ON w.id = t.wish_id
                          WHERE t.status = 'ready' AND t.assignee IS NULL AND w.status = 'executing' AND NOT w.held
                            AND w.phase = 'groups')
                  AND (SELECT count(*) FROM agents WHERE state = 'spawning') < $1 AS "dispatch!""#,
        backlog
    )
    .fetch_one(conn)
    .await?;
    Ok((row.integrate, row.dispatch))
}

/// How many agents are registered and wait for a worker to make their pane, on every node.
pub async fn agents_spawning(conn: &mut PgConnection) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM agents WHERE state = 'spawning'"#).fetch_one(conn).await
}

/// Executing wishes with a group reported done and waiting to be merged, but for those whose
/// integration failed and waits before its next try.
pub async fn wishes_to_integrate(conn: &mut PgConnection, limit: i64) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT DISTINCT t.wish_id AS "wish_id!" FROM tasks t
           WHERE t.reported_at IS NOT NULL AND t.status = 'in_progress' AND t.wish_id IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM stalled_steps s
                             WHERE s.subject = 'wish:' || t.wish_id AND s.retry_at > now())
           LIMIT $1"#,
        limit
    )
    .fetch_all(conn)
    .await
}

/// The wish, locked for an integration, or `None` when another node is integrating it.
pub async fn lock_for_integration(conn: &mut PgConnection, wish_id: Uuid) -> Result<Option<Conducted>, sqlx::Error> {
    let row = sqlx::query_as!(
        ConductedRow,
        r#"SELECT to_jsonb(w) AS "wish!: Json<WishRow>", p.slug AS project_slug, COALESCE(p.repo_url, p.repo_path) AS "repo_path!", p.target_branch,
                  p.conductor_config AS "config!: Json<ConductorConfig>"
           FROM wishes w JOIN projects p ON p.id = w.project_id
           WHERE w.id = $1 FOR NO KEY UPDATE OF w SKIP LOCKED"#,
        wish_id
    )
    .fetch_optional(conn)
    .await?;
    row.map(Conducted::try_from).transpose()
}

/// The wish's groups reported done and not merged yet, oldest report first.
pub async fn reported_groups(conn: &mut PgConnection, wish_id: Uuid) -> Result<Vec<Task>, sqlx::Error> {
    let rows = sqlx::query_scalar!(
        r#"SELECT to_jsonb(t) AS "task!: Json<TaskRow>" FROM tasks t
           WHERE wish_id = $1 AND reported_at IS NOT NULL AND status = 'in_progress' ORDER BY reported_at, id"#,
        wish_id
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(|r| Task::try_from(r.0)).collect()
}

/// Sets an executing wish's phase (and the review notes that go with `fix`).
pub async fn set_phase(
    conn: &mut PgConnection,
    wish_id: Uuid,
    phase: WishPhase,
    notes: Option<&str>,
) -> Result<Wish, sqlx::Error> {
    let row = sqlx::query_scalar!(
        r#"UPDATE wishes w SET phase = $2, review_notes = COALESCE($3, review_notes), version = version + 1,
                               updated_at = now()
           WHERE id = $1 RETURNING to_jsonb(w) AS "wish!: Json<WishRow>""#,
        wish_id,
        phase.as_str(),
        notes
    )
    .fetch_one(conn)
    .await?;
    Wish::try_from(row.0)
}

/// Sets (or clears) who a wish waits on, with the reason.
pub async fn set_wish_assignee(
    conn: &mut PgConnection,
    wish_id: Uuid,
    assignee: Option<&str>,
    reason: Option<&str>,
) -> Result<Wish, sqlx::Error> {
    let row = sqlx::query_scalar!(
        r#"UPDATE wishes w SET assignee = $2, failure_reason = COALESCE($3, failure_reason), version = version + 1,
                               updated_at = now()
           WHERE id = $1 RETURNING to_jsonb(w) AS "wish!: Json<WishRow>""#,
        wish_id,
        assignee,
        reason
    )
    .fetch_one(conn)
    .await?;
    Wish::try_from(row.0)
}

/// Sets the branch of a wish that has none.
pub async fn set_branch(conn: &mut PgConnection, wish_id: Uuid, branch: &str) -> Result<Wish, sqlx::Error> {
    let row = sqlx::query_scalar!(
        r#"UPDATE wishes w SET branch = COALESCE(branch, $2), version = version + 1, updated_at = now()
           WHERE id = $1 RETURNING to_jsonb(w) AS "wish!: Json<WishRow>""#,
        wish_id,
        branch
    )
    .fetch_one(conn)
    .await?;
    Wish::try_from(row.0)
}

/// Marks an agent's step concluded: the conductor stops it and no longer counts it at work.
pub async fn conclude(conn: &mut PgConnection, agent_id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE agents SET ready_for_cleanup = true, version = version + 1, updated_at = now()
         WHERE id = $1 AND NOT ready_for_cleanup",
        agent_id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Conductor agents that ended (`done` or `error`) before their step concluded, locked.
pub async fn abandoned(conn: &mut PgConnection, limit: i64) -> Result<Vec<Agent>, sqlx::Error> {
    let ids = sqlx::query_scalar!(
        "SELECT id FROM agents WHERE wish_id IS NOT NULL AND NOT ready_for_cleanup AND state IN ('done', 'error')
         ORDER BY updated_at LIMIT $1 FOR NO KEY UPDATE SKIP LOCKED",
        limit
    )
    .fetch_all(&mut *conn)
    .await?;
    super::agents::get_all(conn, ids).await
}

/// Suspended agents of wishes that merged or were cancelled (a redispatch replaced them, or the
/// wish ended while they were suspended): nothing will resume them. Locked.
pub async fn suspended_of_ended_wishes(conn: &mut PgConnection, limit: i64) -> Result<Vec<Agent>, sqlx::Error> {
    let ids = sqlx::query_scalar!(
        "SELECT a.id FROM agents a JOIN wishes w ON w.id = a.wish_id
         WHERE a.state = 'suspended' AND w.status IN ('merged', 'cancelled')
         ORDER BY a.updated_at LIMIT $1 FOR NO KEY UPDATE OF a SKIP LOCKED",
        limit
    )
    .fetch_all(&mut *conn)
    .await?;
    super::agents::get_all(conn, ids).await
}

/// Concludes every agent of a wish whose work ended (cancelled, or failed while executing): the
/// live ones are stopped ([`concluded_live`]) and none of their steps goes to a person.
pub async fn conclude_agents_of(conn: &mut PgConnection, wish_id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE agents SET ready_for_cleanup = true, version = version + 1, updated_at = now()
         WHERE wish_id = $1 AND NOT ready_for_cleanup",
        wish_id
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Conductor agents still in a live state whose step concluded, or whose wish was cancelled
/// (however it was cancelled): to be stopped.
pub async fn concluded_live(conn: &mut PgConnection, limit: i64) -> Result<Vec<Agent>, sqlx::Error> {
    let ids = sqlx::query_scalar!(
        "SELECT a.id FROM agents a LEFT JOIN wishes w ON w.id = a.wish_id
         WHERE (a.ready_for_cleanup OR w.status = 'cancelled') AND a.state NOT IN ('done', 'error', 'suspended')
         ORDER BY a.updated_at LIMIT $1",
        limit
    )
    .fetch_all(&mut *conn)
    .await?;
    super::agents::get_all(conn, ids).await
}

/// Live agents of held wishes whose step has not concluded: to be parked (suspended).
pub async fn live_of_held(conn: &mut PgConnection, limit: i64) -> Result<Vec<Agent>, sqlx::Error> {
    let ids = sqlx::query_scalar!(
        "SELECT a.id FROM agents a JOIN wishes w ON w.id = a.wish_id
         WHERE w.held AND NOT a.ready_for_cleanup AND a.state NOT IN ('done', 'error', 'suspended')
         ORDER BY a.updated_at LIMIT $1",
        limit
    )
    .fetch_all(&mut *conn)
    .await?;
    super::agents::get_all(conn, ids).await
}

/// The agents a hold parked on wish `wish_id`: suspended, their step not concluded, and not
/// waiting for a time (a usage limit's reset, the wait after an interruption). Locked.
pub async fn parked(conn: &mut PgConnection, wish_id: Uuid) -> Result<Vec<Agent>, sqlx::Error> {
    let ids = sqlx::query_scalar!(
        "SELECT id FROM agents
         WHERE wish_id = $1 AND state = 'suspended' AND NOT ready_for_cleanup AND suspended_until IS NULL
         ORDER BY created_at FOR NO KEY UPDATE",
        wish_id
    )
    .fetch_all(&mut *conn)
    .await?;
    super::agents::get_all(conn, ids).await
}

/// Puts a started group back in the queue for a new agent (a person's retry after a handoff).
pub async fn requeue_group(conn: &mut PgConnection, task_id: Uuid) -> Result<Option<Task>, sqlx::Error> {
    let row = sqlx::query_scalar!(
        r#"UPDATE tasks t SET status = 'ready', assignee = NULL, reported_at = NULL, head_commit = NULL,
                              question = NULL, version = version + 1, updated_at = now()
           WHERE id = $1 AND status IN ('in_progress', 'waiting_input') AND unmet_dependencies = 0
           RETURNING to_jsonb(t) AS "task!: Json<TaskRow>""#,
        task_id
    )
    .fetch_optional(conn)
    .await?;
    row.map(|r| Task::try_from(r.0)).transpose()
}

/// Clones of this node's concluded agents whose wish merged or was cancelled, in projects that
/// do not keep them: `(agent id, name, clone path)`.
pub async fn clones_to_remove(
    conn: &mut PgConnection,
    node_id: &str,
    limit: i64,
) -> Result<Vec<(Uuid, String, String)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT a.id, a.name, a.clone_path AS "clone_path!" FROM agents a
           JOIN wishes w ON w.id = a.wish_id JOIN projects p ON p.id = a.project_id
           WHERE a.node_id = $1 AND a.ready_for_cleanup AND a.clone_mode = 'agent' AND a.clone_path IS NOT NULL
             AND a.state IN ('done', 'error', 'suspended') AND w.status IN ('merged', 'cancelled')
             AND NOT COALESCE((p.conductor_config->>'keep_clones')::boolean, false)
           ORDER BY a.updated_at LIMIT $2"#,
        node_id,
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.name, r.clone_path)).collect())
}

/// Forgets an agent's clone (`agent.clone_removed`); false when another node or pass did first.
pub async fn forget_clone(
    conn: &mut PgConnection,
    agent_id: Uuid,
    name: &str,
    path: &str,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE agents SET clone_path = NULL, version = version + 1, updated_at = now() WHERE id = $1 AND clone_path = $2",
        agent_id,
        path
    )
    .execute(&mut *conn)
    .await?
    .rows_affected()
        == 1;
    if done {
        let payload = serde_json::json!({"clone_path": path});
        super::events::record(conn, "agent.clone_removed", &super::agents::subject(name), payload).await?;
    }
    Ok(done)
}
