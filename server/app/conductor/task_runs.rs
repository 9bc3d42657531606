//! Standalone tasks and board skills, run by agents:
//!
//! ```text
//! POST /tasks/{id}/dispatch ─▶ run pending ─(conductor)─▶ running: agent on task/<id>, brief sent
//!   agent stops without reporting ─▶ "continue" typed (resumed first if its pane is gone) ─▶ …
//!   … at max_iterations ─▶ task failed;   task done|fail ─▶ run ends, agent stopped
//!   task ask / a question on screen ─▶ waiting_input ─answer─▶ the answer as a message ─▶ in_progress
//! a card entering an `agent` column ─▶ skill run ─▶ agent does the skill ─done─▶ card moves on
//! ```
//!
//! The run is recorded before anything acts on it; each step claims its runs with `FOR UPDATE …
//! SKIP LOCKED` and does its work (the agent row, its brief, the run's new iteration) in the
//! transaction that changes the run, so a repeated step after a crash finds nothing left to do
//! and no run gets two agents. The agent machinery is the wishes' ([`super::assign`]).

use crate::app::repository::{Mirrors, Repo};

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::reports::ReportOutcome;
use super::{assign_with_brief, Assignment, Place, BATCH};
use crate::app::boards::flow::{self, Mover};
use crate::app::messages::tell;
use crate::app::{Ctx, Error, Result};
use crate::db::agents::{self, Agent, Cause};
use crate::db::task_runs::{self, NewRun, TaskRun};
use crate::db::tasks::{self, Applied, Change, Edit, Task};
use crate::db::{conductor, events};
use crate::domain::agent::{never_started, AgentEvent};
use crate::domain::agent_kind::{AgentKind, AgentRole};
use crate::domain::briefs;
use crate::domain::task::{TaskEvent, TaskStatus};
use crate::git::branches;

/// A dispatch's answer: the task as it is now and its run.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Dispatched {
    pub task: Task,
    pub run: TaskRun,
}

fn conflict(task: &Task, detail: impl Into<String>) -> Error {
    Error::conflict(detail, Some(task.status.as_str()))
}

fn refused(applied: Option<Applied>) -> Result<Task> {
    match applied {
        Some(Applied::Done(task, _)) => Ok(task),
        Some(Applied::Refused { current, message }) => Err(Error::conflict(message, Some(current.as_str()))),
        None => Err(Error::NotFound("the task is gone".into())),
    }
}

/// The branch a task's agents work on.
pub fn task_branch(task_id: Uuid) -> String {
    format!("task/{}", &task_id.simple().to_string()[..8])
}

/// Runs task `id` on a new agent (`provider`, else the task's, else the project's): the task is
/// `in_progress` and its run recorded at once; the conductor starts the agent. Refused (409) for
/// a task that is done, cancelled, blocked, a wish's group, or already has a live run.
#[tracing::instrument(skip_all, fields(task = %id), err(level = "debug"))]
pub async fn dispatch(ctx: &Ctx, id: Uuid, provider: Option<String>) -> Result<Dispatched> {
    if let Some(p) = provider.as_deref() {
        if p.len() > 100 || ctx.providers.current().get(p).is_none() {
            let known = ctx.providers.current().names().join(", ");
            return Err(Error::invalid("provider", format!("unknown provider `{p}`; known: {known}")));
        }
    }
    let mut tx = ctx.db.begin().await?;
    if !task_runs::lock_task(&mut tx, id).await? {
        return Err(Error::NotFound(format!("no task {id}")));
    }
    let mut task = tasks::get(&mut tx, id).await?.ok_or_else(|| Error::NotFound(format!("no task {id}")))?;
    if task.wish_id.is_some() {
        return Err(conflict(&task, "this task is a group of a wish; the conductor dispatches it with its wish"));
    }
    if let Some(run) = task_runs::live(&mut tx, id).await? {
        let who = run.agent_name.map(|a| format!("agent `{a}`")).unwrap_or_else(|| "an agent about to start".into());
        return Err(conflict(&task, format!("the task already has a live run ({} run, {who})", run.kind)));
    }
    if task.status == TaskStatus::Failed {
        task = refused(
            tasks::apply_to(&mut tx, task, TaskEvent::Retry { unmet_dependencies: 0 }, &Change::default()).await?,
        )?;
    }
    match task.status {
        TaskStatus::Ready => {
            task = refused(tasks::apply_to(&mut tx, task, TaskEvent::Start, &Change::default()).await?)?;
        }
        TaskStatus::InProgress | TaskStatus::WaitingInput => {}
        other => {
            let why = match other {
                TaskStatus::Blocked => "the task waits for its dependencies".to_owned(),
                _ => format!("a {other} task is not dispatched"),
            };
            return Err(conflict(&task, why));
        }
    }
    let (_, _, config) = task_runs::project_of(&mut tx, task.project_id).await?;
    let own = task.provider.clone().unwrap_or_else(|| config.provider.clone());
    if let Some(wanted) = provider.as_deref() {
        // The task's own provider is what its author chose; another may be no less confined.
        ctx.providers.current().may_hand_to(&own, wanted).map_err(|why| Error::invalid("provider", why))?;
    }
    let provider = provider.unwrap_or(own);
    let max_iterations = task.max_iterations.min(i32::try_from(config.max_iterations).unwrap_or(i32::MAX));
    let new = NewRun { task_id: id, skill: None, provider, max_iterations };
    let run = task_runs::insert(&mut tx, &new)
        .await
        .map_err(Error::unique_as("task_runs_live", "the task already has a live run".to_owned()))?;
    ctx.feed.commit(tx).await?;
    Ok(Dispatched { task, run })
}

/// Starts the agent of each pending run: its branch (`task/<id>`, made from the target branch
/// when missing), the agent row and its brief, the run `running` — in one transaction. A run
/// whose project's mirror is still to fetch starts in a second pass, after the fetch ([`Mirrors`]).
pub async fn start_pending(ctx: &Ctx) -> Result<usize> {
    let mut mirrors = Mirrors::default();
    let mut started = start_pending_with(ctx, &mut mirrors).await?;
    if mirrors.fetch_noted().await {
        started += start_pending_with(ctx, &mut mirrors).await?;
    }
    Ok(started)
}

async fn start_pending_with(ctx: &Ctx, mirrors: &mut Mirrors) -> Result<usize> {
    let mut tx = ctx.db.begin().await?;
    let runs = task_runs::claim_pending(&mut tx, BATCH).await?;
    let at_limit = conductor::providers_at_limit(&mut tx).await?;
    let mut started = 0;
    for run in runs {
        if at_limit.iter().any(|(p, _)| *p == run.provider) {
            continue;
        }
        let Some(task) = tasks::get(&mut tx, run.task_id).await? else { continue };
        let (repo, target, _) = task_runs::project_of(&mut tx, task.project_id).await?;
        let branch = task.branch.clone().unwrap_or_else(|| task_branch(task.id));
        let made = match mirrors.ready(&mut tx, &ctx.data_dir, task.project_id).await {
            Ok(Some(local)) => make_branch(&local, &target, &branch).await,
            Ok(None) => continue,
            Err(e) => Err(e.to_string()),
        };
        let base = match made {
            Ok(base) => base,
            Err(why) => {
                let reason = format!("cannot make the task's branch `{branch}`: {why}");
                task_runs::finish(&mut tx, run.id, "failed", Some(&reason)).await?;
                to_a_person(&mut tx, &task, None, &reason).await?;
                continue;
            }
        };
        let (role, kind, brief) = match (&run.skill, run.column_id) {
            (Some(skill), column) => {
                let column = match column {
                    Some(c) => column_name(&mut tx, c).await?,
                    None => String::new(),
                };
                let role = if skill.contains("review") { AgentRole::Reviewer } else { AgentRole::Qa };
                let kind = if role == AgentRole::Reviewer { AgentKind::Review } else { AgentKind::Worker };
                (role, kind, briefs::skill(skill, &column, &task.title, &task.goal, &branch))
            }
            (None, _) => (
                AgentRole::Engineer,
                AgentKind::Worker,
                briefs::task(&task.title, &task.goal, &branch, run.max_iterations),
            ),
        };
        let a = Assignment {
            place: Place { project_id: task.project_id, repo, wish_id: None },
            role,
            kind,
            provider: run.provider.clone(),
            branch: branch.clone(),
            task_id: Some(task.id),
            brief,
        };
        let (agent, brief_id) = assign_with_brief(&mut tx, a).await?;
        task_runs::start(&mut tx, &run, (agent.id, &agent.name), &branch, brief_id).await?;
        if !run.is_skill() {
            conductor::record_dispatch(&mut tx, task.id, &branch, &base).await?;
            assign_task(&mut tx, &task, &agent.name).await?;
        }
        started += 1;
    }
    ctx.feed.commit(tx).await?;
    Ok(started)
}

async fn make_branch(local: &Repo, target: &str, branch: &str) -> std::result::Result<String, String> {
    let start = branches::head(local.path(), target)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("the target branch `{target}` does not exist"))?;
    local.create_if_missing(branch, &start).await.map_err(|e| e.to_string())
}

async fn column_name(conn: &mut PgConnection, column_id: Uuid) -> Result<String> {
    Ok(sqlx::query_scalar!("SELECT name FROM board_columns WHERE id = $1", column_id)
        .fetch_optional(conn)
        .await?
        .unwrap_or_default())
}

/// The task is its agent's (`task.assigned`), unless it is already.
async fn assign_task(conn: &mut PgConnection, task: &Task, agent: &str) -> Result<()> {
    if task.assignee.as_deref() == Some(agent) {
        return Ok(());
    }
    let edit = Edit { assignee: Some(Some(agent.to_owned())), ..Edit::default() };
    // No expected version: the caller holds the run, which is what decides who works on it.
    let _edited = tasks::update_fields(&mut *conn, task.id, None, &edit).await?;
    let payload = serde_json::json!({"assignee": agent});
    events::record(conn, "task.assigned", &format!("task:{}", task.id), payload).await?;
    Ok(())
}

/// The task goes to a person (`assignee = human`), with the reason.
async fn to_a_person(conn: &mut PgConnection, task: &Task, previous: Option<&str>, reason: &str) -> Result<()> {
    let edit = Edit { assignee: Some(Some(crate::app::wish_lifecycle::HUMAN.to_owned())), ..Edit::default() };
    let _edited = tasks::update_fields(&mut *conn, task.id, None, &edit).await?;
    let payload =
        serde_json::json!({"assignee": crate::app::wish_lifecycle::HUMAN, "previous": previous, "reason": reason});
    events::record(conn, "task.assigned", &format!("task:{}", task.id), payload).await?;
    Ok(())
}

/// Each run whose agent stopped without reporting gets its next iteration: "continue" is typed
/// into the same provider session (an agent whose pane is gone is resumed first, with its
/// provider's resume command). At `max_iterations` the task fails (a skill run goes to a person).
pub async fn iterate(ctx: &Ctx) -> Result<usize> {
    let mut tx = ctx.db.begin().await?;
    let stopped = task_runs::stopped(&mut tx, BATCH).await?;
    // Only runs acted on count: a tick that did something is followed by another at once.
    let mut n = 0;
    for s in stopped {
        let (run, ended) = (s.run, s.ended);
        let Some(agent_id) = run.agent_id else { continue };
        let Some(agent) = agents::get(&mut tx, agent_id).await? else { continue };
        let Some(task) = tasks::get(&mut tx, run.task_id).await? else { continue };
        n += 1;
        if run.iteration >= run.max_iterations {
            let reason = format!(
                "agent `{}` stopped {} time(s) without reporting done or fail (max_iterations {})",
                agent.name, run.iteration, run.max_iterations
            );
            give_up(&mut tx, &run, &agent, task, &reason).await?;
            continue;
        }
        if let Some(why) = agent.failure_reason.as_deref().filter(|r| ended && never_started(r)) {
            // Its next start would meet the same refusal: the task says why instead.
            give_up(&mut tx, &run, &agent, task, why).await?;
            continue;
        }
        let fresh = ended && ctx.providers.current().get(&agent.provider).is_none_or(|p| p.resume.is_none());
        let body = briefs::continuation(
            run.iteration + 1,
            run.max_iterations,
            fresh.then_some(agent.task.as_deref()).flatten(),
        );
        let prompt = tell(&mut tx, &agent, body).await?;
        task_runs::next_iteration(&mut tx, &run, prompt).await?;
        if ended {
            let cause = Cause { detail: Some("the next iteration of its task".into()), ..Cause::from("conductor") };
            match agents::apply(&mut tx, agent.id, None, AgentEvent::Resume, &cause).await? {
                Some(agents::Applied::Changed { .. }) | Some(agents::Applied::Unchanged(_)) => {}
                _ => {
                    let reason = format!("agent `{}` ended ({}) and cannot be resumed", agent.name, agent.state);
                    give_up(&mut tx, &run, &agent, task, &reason).await?;
                    continue;
                }
            }
        }
        if !run.is_skill() && !task.status.is_terminal() {
            // Its pane going away handed the task to a person; the new iteration takes it back.
            assign_task(&mut tx, &task, &agent.name).await?;
        }
    }
    ctx.feed.commit(tx).await?;
    Ok(n)
}

/// The run ends `failed` and its agent is stopped; a task run fails its task, a skill run hands
/// the task to a person (its card stays where it is).
async fn give_up(conn: &mut PgConnection, run: &TaskRun, agent: &Agent, task: Task, reason: &str) -> Result<()> {
    task_runs::finish(&mut *conn, run.id, "failed", Some(reason)).await?;
    conductor::conclude(&mut *conn, agent.id).await?;
    if run.is_skill() {
        return to_a_person(conn, &task, Some(&agent.name), reason).await;
    }
    if matches!(task.status, TaskStatus::InProgress | TaskStatus::WaitingInput) {
        let change = Change { result: Some(reason.to_owned()), ..Change::default() };
        refused(tasks::apply_to(&mut *conn, task, TaskEvent::Fail, &change).await?)?;
    }
    Ok(())
}

/// A task whose agent shows a question on its screen waits for input, as if it had run
/// `switchyard task ask`.
pub async fn questions(ctx: &Ctx) -> Result<usize> {
    let mut tx = ctx.db.begin().await?;
    let runs = task_runs::asking(&mut tx, BATCH).await?;
    for run in &runs {
        let who = run.agent_name.as_deref().unwrap_or("the agent");
        let question = format!("{who} is asking a question on its screen (see its pane)");
        let change = Change { question: Some(question), ..Change::default() };
        // Refused: the task changed meanwhile (an answer, a report); nothing to do.
        let _applied = tasks::apply(&mut tx, run.task_id, TaskEvent::Ask, &change).await?;
    }
    ctx.feed.commit(tx).await?;
    Ok(runs.len())
}

/// An agent's `task done|fail|ask` when it is on a run: `None` when it is not (the report then
/// acts on its task as before).
pub async fn report(
    ctx: &Ctx,
    agent: &Agent,
    event: TaskEvent,
    change: Change,
    idem: Option<&crate::app::idempotency::Idempotency>,
) -> Result<Option<ReportOutcome>> {
    let mut tx = ctx.db.begin().await?;
    let Some(run) = task_runs::of_agent(&mut tx, agent.id).await? else { return Ok(None) };
    let task = tasks::get(&mut tx, run.task_id).await?.ok_or_else(|| Error::NotFound("the task is gone".into()))?;
    let text = change.result.clone().or_else(|| change.question.clone()).unwrap_or_default();
    let detail = if run.is_skill() {
        skill_report(&mut tx, &run, agent, task, event, &text).await?
    } else {
        task_report(&mut tx, &run, agent, task, event, change).await?
    };
    let outcome = ReportOutcome { accepted: "task", detail, integration: vec![] };
    crate::app::idempotency::record_ok(&mut tx, idem, &outcome).await?;
    ctx.feed.commit(tx).await?;
    Ok(Some(outcome))
}

async fn task_report(
    conn: &mut PgConnection,
    run: &TaskRun,
    agent: &Agent,
    task: Task,
    event: TaskEvent,
    change: Change,
) -> Result<String> {
    let question = task.question.clone();
    // Asked while a permission or a question of its screen waits: the agent went on, and this
    // question replaces that one.
    let task = if event == TaskEvent::Ask && task.status == TaskStatus::WaitingInput {
        let answer = Change { answer: Some(format!("{} went on and asked", agent.name)), ..Change::default() };
        refused(tasks::apply_to(&mut *conn, task, TaskEvent::Answer, &answer).await?)?
    } else {
        task
    };
    let task = refused(tasks::apply_to(&mut *conn, task, event, &change).await?)?;
    if event == TaskEvent::Ask {
        return Ok("the task waits for a person's answer; it comes to you as a message".to_owned());
    }
    let status = if event == TaskEvent::Complete { "done" } else { "failed" };
    task_runs::finish(&mut *conn, run.id, status, change.result.as_deref()).await?;
    conductor::conclude(&mut *conn, agent.id).await?;
    let task = crate::app::tasks::after(conn, task, event, question.as_deref(), &change).await?;
    Ok(format!("the task is {}; your work here is done", task.status))
}

async fn skill_report(
    conn: &mut PgConnection,
    run: &TaskRun,
    agent: &Agent,
    task: Task,
    event: TaskEvent,
    text: &str,
) -> Result<String> {
    let skill = run.skill.as_deref().unwrap_or("skill");
    match event {
        TaskEvent::Ask => Err(Error::conflict(
            format!("a `{skill}` run cannot ask; report done or fail, or write to a person with `switchyard msg send`"),
            Some(task.status.as_str()),
        )),
        TaskEvent::Fail => {
            task_runs::finish(&mut *conn, run.id, "failed", Some(text)).await?;
            conductor::conclude(&mut *conn, agent.id).await?;
            to_a_person(conn, &task, Some(&agent.name), &format!("`{skill}` failed: {text}")).await?;
            Ok(format!("recorded: `{skill}` failed; a person takes the task over"))
        }
        _ => {
            task_runs::finish(&mut *conn, run.id, "done", Some(text)).await?;
            conductor::conclude(&mut *conn, agent.id).await?;
            // The card moves on from the skill's column if it is still there.
            let next = match run.column_id.filter(|c| task.column_id == Some(*c)) {
                Some(column) => flow::next_column(&mut *conn, column).await?,
                None => None,
            };
            let Some(next) = next else { return Ok(format!("recorded: `{skill}` done")) };
            let moved = crate::app::tasks::move_to(conn, task.id, next, Mover::Switchyard).await?;
            Ok(format!("recorded: `{skill}` done; the card moved on (the task is {})", moved.status))
        }
    }
}
