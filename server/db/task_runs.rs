//! Task runs in the database: one agent doing one task (a dispatch) or one board column's skill
//! on it, iteration after iteration. A run is recorded `pending` before anything acts on it;
//! the conductor claims pending runs with `FOR UPDATE … SKIP LOCKED` and starts each one's agent
//! in the transaction that makes it `running`, so a run never gets two agents. The partial
//! unique index `task_runs_live` keeps one live run per task.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::types::Json;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::events;
use crate::domain::project::ConductorConfig;

/// One run, as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "1b9d6bcd-bbfd-4b2d-9b5d-ab8dfbbd4bed", "task_id": "7c9e6679-7425-40de-944b-e07fc1f90ae7",
    "kind": "task", "column_id": null, "skill": null, "provider": "claude", "agent_name": "engineer-1a2b3c4d",
    "branch": "task/7c9e6679", "iteration": 2, "max_iterations": 3, "status": "running", "outcome": null,
    "created_at": "2026-11-25T10:00:00Z", "updated_at": "2026-11-25T10:05:00Z", "finished_at": null}))]
pub struct TaskRun {
    pub id: Uuid,
    pub task_id: Uuid,
    /// `task` (a dispatch) or `skill` (a board column's `action_skill`).
    pub kind: String,
    /// A skill run's column: the card moves on from it when the skill is done.
    pub column_id: Option<Uuid>,
    pub skill: Option<String>,
    pub provider: String,
    #[serde(skip)]
    pub agent_id: Option<Uuid>,
    /// The agent doing it, once started.
    pub agent_name: Option<String>,
    /// The branch its clone works on (`task/<id>`).
    pub branch: Option<String>,
    /// The iteration under way, 1-based.
    pub iteration: i32,
    pub max_iterations: i32,
    #[serde(skip)]
    pub prompt_id: Option<Uuid>,
    /// `pending` (recorded, no agent yet), `running`, `done`, `failed`, `cancelled`.
    pub status: String,
    /// How it ended: the summary, or why it failed.
    pub outcome: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl TaskRun {
    pub fn is_skill(&self) -> bool {
        self.kind == "skill"
    }
}

/// A run to record.
#[derive(Debug, Clone)]
pub struct NewRun {
    pub task_id: Uuid,
    pub skill: Option<(Uuid, String)>,
    pub provider: String,
    pub max_iterations: i32,
}

fn subject(task_id: Uuid) -> String {
    format!("task:{task_id}")
}

/// Records a pending run (`task_run.requested`). Fails on `task_runs_live` when the task has a
/// live run already.
pub async fn insert(conn: &mut PgConnection, new: &NewRun) -> Result<TaskRun, sqlx::Error> {
    let kind = if new.skill.is_some() { "skill" } else { "task" };
    let run = sqlx::query_as!(
        TaskRun,
        "INSERT INTO task_runs (id, task_id, kind, column_id, skill, provider, max_iterations)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *",
        Uuid::new_v4(),
        new.task_id,
        kind,
        new.skill.as_ref().map(|s| s.0),
        new.skill.as_ref().map(|s| s.1.clone()),
        new.provider,
        new.max_iterations
    )
    .fetch_one(&mut *conn)
    .await?;
    let payload = json!({"run": run.id, "kind": kind, "skill": run.skill, "provider": run.provider,
        "max_iterations": run.max_iterations});
    events::record(conn, "task_run.requested", &subject(run.task_id), payload).await?;
    Ok(run)
}

/// The task's runs, newest first.
pub async fn for_task(conn: &mut PgConnection, task_id: Uuid, limit: i64) -> Result<Vec<TaskRun>, sqlx::Error> {
    sqlx::query_as!(
        TaskRun,
        "SELECT * FROM task_runs WHERE task_id = $1 ORDER BY created_at DESC, id LIMIT $2",
        task_id,
        limit
    )
    .fetch_all(conn)
    .await
}

/// The task's pending or running run, if it has one.
pub async fn live(conn: &mut PgConnection, task_id: Uuid) -> Result<Option<TaskRun>, sqlx::Error> {
    sqlx::query_as!(TaskRun, "SELECT * FROM task_runs WHERE task_id = $1 AND status IN ('pending', 'running')", task_id)
        .fetch_optional(conn)
        .await
}

/// The running run of agent `agent_id`, locked with its task: the task first, then the run, the
/// order every change to a task takes (it changes the task, then ends its run); the other order
/// deadlocked against a person failing the task while its agent reported.
pub async fn of_agent(conn: &mut PgConnection, agent_id: Uuid) -> Result<Option<TaskRun>, sqlx::Error> {
    let task = sqlx::query_scalar!(
        "SELECT t.id FROM tasks t WHERE t.id IN (SELECT task_id FROM task_runs WHERE agent_id = $1 AND status = 'running')
         FOR UPDATE",
        agent_id
    )
    .fetch_optional(&mut *conn)
    .await?;
    if task.is_none() {
        return Ok(None);
    }
    sqlx::query_as!(TaskRun, "SELECT * FROM task_runs WHERE agent_id = $1 AND status = 'running' FOR UPDATE", agent_id)
        .fetch_optional(conn)
        .await
}

/// Up to `limit` pending runs, locked with their tasks (skipping those another transaction
/// holds, so the conductor never waits on a task while it holds runs), oldest first. The task
/// is locked first (tasks come first in `FROM`): a run whose task is held is passed by before
/// its own row is locked, since a row locked and then skipped stays locked.
pub async fn claim_pending(conn: &mut PgConnection, limit: i64) -> Result<Vec<TaskRun>, sqlx::Error> {
    sqlx::query_as!(
        TaskRun,
        "SELECT r.* FROM tasks t JOIN task_runs r ON r.task_id = t.id WHERE r.status = 'pending'
         ORDER BY r.created_at, r.id LIMIT $1 FOR UPDATE OF t, r SKIP LOCKED",
        limit
    )
    .fetch_all(conn)
    .await
}

/// A pending run got its agent: `running`, iteration 1 (`task_run.iteration`).
pub async fn start(
    conn: &mut PgConnection,
    run: &TaskRun,
    agent: (Uuid, &str),
    branch: &str,
    prompt_id: Uuid,
) -> Result<TaskRun, sqlx::Error> {
    let run = sqlx::query_as!(
        TaskRun,
        "UPDATE task_runs SET status = 'running', agent_id = $2, agent_name = $3, branch = $4, prompt_id = $5,
                              updated_at = now()
         WHERE id = $1 AND status = 'pending' RETURNING *",
        run.id,
        agent.0,
        agent.1,
        branch,
        prompt_id
    )
    .fetch_one(&mut *conn)
    .await?;
    iteration_event(conn, &run, "started").await?;
    Ok(run)
}

async fn iteration_event(conn: &mut PgConnection, run: &TaskRun, why: &str) -> Result<(), sqlx::Error> {
    let payload = json!({"run": run.id, "kind": run.kind, "iteration": run.iteration,
        "max_iterations": run.max_iterations, "agent": run.agent_name, "why": why});
    events::record(conn, "task_run.iteration", &subject(run.task_id), payload).await?;
    Ok(())
}

/// A running run whose agent stopped after its iteration's prompt without reporting: ended
/// (its pane is gone) or idle at its prompt (every message to it delivered, and its state changed
/// after the prompt was delivered and has held for 3 seconds: a turn's pauses are shorter).
#[derive(Debug, Clone)]
pub struct Stopped {
    pub run: TaskRun,
    /// The agent's pane is gone (`done`, `error`, or suspended for no usage limit).
    pub ended: bool,
}

/// Up to `limit` running runs whose agent stopped, locked with their tasks (skipping those
/// another transaction holds).
/// A task waiting for an answer is not stopped: it waits for the person.
pub async fn stopped(conn: &mut PgConnection, limit: i64) -> Result<Vec<Stopped>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT r.id, (a.state IN ('done', 'error', 'suspended')) AS "ended!"
           FROM tasks t JOIN task_runs r ON r.task_id = t.id JOIN agents a ON a.id = r.agent_id
           WHERE r.status = 'running' AND t.status <> 'waiting_input' AND NOT a.ready_for_cleanup
             AND (a.state IN ('done', 'error') OR (a.state = 'suspended' AND a.suspended_until IS NULL)
                  OR (a.state = 'idle' AND a.updated_at < now() - interval '3 seconds'
                      AND EXISTS (SELECT 1 FROM messages m WHERE m.id = r.prompt_id AND m.delivered_at IS NOT NULL
                                  AND a.updated_at > m.delivered_at)
                      AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.recipient_id = a.id
                                      AND m.delivered_at IS NULL)))
           ORDER BY r.updated_at LIMIT $1
           FOR UPDATE OF t, r SKIP LOCKED"#,
        limit
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let run =
            sqlx::query_as!(TaskRun, "SELECT * FROM task_runs WHERE id = $1", row.id).fetch_one(&mut *conn).await?;
        out.push(Stopped { run, ended: row.ended });
    }
    Ok(out)
}

/// Running task runs whose agent shows a question on its screen while its task is in progress,
/// locked with their tasks (skipping those another transaction holds).
pub async fn asking(conn: &mut PgConnection, limit: i64) -> Result<Vec<TaskRun>, sqlx::Error> {
    sqlx::query_as!(
        TaskRun,
        r#"SELECT r.* FROM tasks t JOIN task_runs r ON r.task_id = t.id JOIN agents a ON a.id = r.agent_id
           WHERE r.status = 'running' AND r.kind = 'task' AND a.state = 'question' AND t.status = 'in_progress'
           ORDER BY r.updated_at LIMIT $1
           FOR UPDATE OF t, r SKIP LOCKED"#,
        limit
    )
    .fetch_all(conn)
    .await
}

/// The next iteration begins with `prompt_id` (`task_run.iteration`).
pub async fn next_iteration(conn: &mut PgConnection, run: &TaskRun, prompt_id: Uuid) -> Result<TaskRun, sqlx::Error> {
    let run = sqlx::query_as!(
        TaskRun,
        "UPDATE task_runs SET iteration = iteration + 1, prompt_id = $2, updated_at = now()
         WHERE id = $1 AND status = 'running' RETURNING *",
        run.id,
        prompt_id
    )
    .fetch_one(&mut *conn)
    .await?;
    iteration_event(conn, &run, "the agent stopped without reporting").await?;
    Ok(run)
}

/// A new message to the agent (an answer) is what the current iteration waits on now.
pub async fn set_prompt(conn: &mut PgConnection, run_id: Uuid, prompt_id: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query!("UPDATE task_runs SET prompt_id = $2, updated_at = now() WHERE id = $1", run_id, prompt_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Ends a live run (`task_run.finished`); `None` when it had ended already.
pub async fn finish(
    conn: &mut PgConnection,
    run_id: Uuid,
    status: &str,
    outcome: Option<&str>,
) -> Result<Option<TaskRun>, sqlx::Error> {
    let run = sqlx::query_as!(
        TaskRun,
        "UPDATE task_runs SET status = $2, outcome = $3, finished_at = now(), updated_at = now()
         WHERE id = $1 AND status IN ('pending', 'running') RETURNING *",
        run_id,
        status,
        outcome
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(run) = &run {
        let payload = json!({"run": run.id, "kind": run.kind, "status": status, "iterations": run.iteration,
            "outcome": outcome, "agent": run.agent_name});
        events::record(conn, "task_run.finished", &subject(run.task_id), payload).await?;
    }
    Ok(run)
}

/// What a run needs of its task's project: its repository, target branch and conductor settings.
pub async fn project_of(
    conn: &mut PgConnection,
    project_id: Uuid,
) -> Result<(String, String, ConductorConfig), sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT COALESCE(repo_url, repo_path) AS "repo_path!", target_branch, conductor_config AS "config!: Json<ConductorConfig>" FROM projects
           WHERE id = $1"#,
        project_id
    )
    .fetch_one(conn)
    .await?;
    Ok((row.repo_path, row.target_branch, row.config.0))
}

/// Locks the task's row: dispatches and moves of one task happen one at a time.
pub async fn lock_task(conn: &mut PgConnection, task_id: Uuid) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query!("SELECT id FROM tasks WHERE id = $1 FOR NO KEY UPDATE", task_id)
        .fetch_optional(conn)
        .await?
        .is_some())
}
