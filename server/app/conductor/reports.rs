//! What an agent reports about its own work (`POST /agents/{name}/report`, the `switchyard
//! group|review|wish|fix|task` commands). A report acts only on the reporter's own step — its
//! group, its wish's review, plan or fix, its task — whatever it names, so an agent's token
//! cannot touch another's work.

use std::path::PathBuf;

use serde::Serialize;

use super::integrate::{self, Integration};
use super::review;
use crate::app::idempotency::{self, Idempotency};
use crate::app::messages::tell;
use crate::app::wish_lifecycle::give_up;
use crate::app::{agents as agents_app, tasks as tasks_app, wishes as wishes_app, Ctx, Error, Result};
use crate::db::agents::{self, Agent};
use crate::db::conductor;
use crate::db::tasks::{self, Change};
use crate::db::wishes::{NewGroup, Wish};
use crate::domain::agent_kind::AgentRole;
use crate::domain::briefs;
use crate::domain::review::Verdict;
use crate::domain::task::{TaskEvent, TaskStatus};
use crate::domain::wish::WishStatus;
use crate::git::branches;

/// One report.
#[derive(Debug, Clone)]
pub enum Report {
    /// An engineer's group is done: its branch has new commits.
    GroupDone {
        summary: String,
    },
    /// An engineer cannot do its group; a person takes over.
    GroupBlocked {
        reason: String,
    },
    /// A reviewer's verdict on its wish.
    Review {
        verdict: Verdict,
        notes: String,
    },
    /// A planner's plan for its draft.
    Plan {
        groups: Vec<NewGroup>,
    },
    /// A fix agent's work is on the wish's branch.
    FixDone {
        summary: String,
    },
    /// A standalone task's agent finished, failed or asks.
    TaskDone {
        result: String,
    },
    TaskFail {
        reason: String,
    },
    TaskAsk {
        question: String,
    },
}

/// What a report did.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"accepted": "group_done", "detail": "merged into wish/login-page",
    "integration": [{"outcome": "merged", "group": "api", "merge_commit": "4b825dc"}]}))]
pub struct ReportOutcome {
    /// The report's kind.
    pub accepted: &'static str,
    /// What happens next, in a sentence for the agent.
    pub detail: String,
    /// For a group done: what merging it into the wish's branch gave (empty while it waits).
    pub integration: Vec<Integration>,
}

/// The most characters of a summary, reason, note or question kept.
const MAX_TEXT: usize = 20_000;

/// Records `report` from agent `name`. With `idem` (the request's `Idempotency-Key`), the
/// outcome is recorded under the key in the transaction that records the report, so a report
/// sent again (the `switchyard` commands retry while the server restarts) is answered, not
/// applied twice.
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn report(ctx: &Ctx, name: &str, report: Report, idem: Option<&Idempotency>) -> Result<ReportOutcome> {
    let agent = {
        let mut conn = ctx.db.acquire().await?;
        agents::by_name(&mut conn, name).await?.ok_or_else(|| agents_app::not_found(name))?
    };
    check_text(&report)?;
    match report {
        Report::GroupDone { summary } => group_done(ctx, &agent, summary, idem).await,
        Report::GroupBlocked { reason } => group_blocked(ctx, &agent, &reason, idem).await,
        Report::Review { verdict, notes } => review_verdict(ctx, &agent, verdict, &notes, idem).await,
        Report::Plan { groups } => plan(ctx, &agent, groups, idem).await,
        Report::FixDone { summary } => fix_done(ctx, &agent, &summary, idem).await,
        Report::TaskDone { result } => {
            task(ctx, &agent, TaskEvent::Complete, Change { result: Some(result), ..Change::default() }, idem).await
        }
        Report::TaskFail { reason } => {
            task(ctx, &agent, TaskEvent::Fail, Change { result: Some(reason), ..Change::default() }, idem).await
        }
        Report::TaskAsk { question } => {
            task(ctx, &agent, TaskEvent::Ask, Change { question: Some(question), ..Change::default() }, idem).await
        }
    }
}

fn check_text(report: &Report) -> Result<()> {
    let (field, text) = match report {
        Report::GroupDone { summary } | Report::FixDone { summary } => ("summary", summary),
        Report::GroupBlocked { reason } | Report::TaskFail { reason } => ("reason", reason),
        Report::Review { notes, .. } => ("notes", notes),
        Report::TaskDone { result } => ("result", result),
        Report::TaskAsk { question } => ("question", question),
        Report::Plan { .. } => return Ok(()),
    };
    let mut errors = crate::app::Fields::default();
    errors.max_len(field, text, MAX_TEXT);
    let required = matches!(report, Report::GroupBlocked { .. } | Report::TaskFail { .. } | Report::TaskAsk { .. });
    errors.check(field, !required || !text.trim().is_empty(), "must not be empty");
    errors.finish()
}

fn not_yours(agent: &Agent, what: &str) -> Error {
    Error::conflict(format!("agent `{}` ({}) has no {what} to report on", agent.name, agent.role), None)
}

/// The group the engineer works on: its task and wish.
async fn own_group(ctx: &Ctx, agent: &Agent) -> Result<(tasks::Task, Wish, PathBuf)> {
    let mut conn = ctx.db.acquire().await?;
    let task_id = agent.task_id.ok_or_else(|| not_yours(agent, "group"))?;
    let task = tasks::get(&mut conn, task_id).await?.ok_or_else(|| not_yours(agent, "group"))?;
    let wish_id = task.wish_id.ok_or_else(|| not_yours(agent, "group"))?;
    let wish = wish_by_id(&mut conn, wish_id).await?;
    if task.assignee.as_deref() != Some(agent.name.as_str()) {
        let who = task.assignee.as_deref().unwrap_or("nobody");
        return Err(Error::conflict(
            format!("group `{}` is assigned to {who} now", task.group_key.as_deref().unwrap_or("")),
            Some(task.status.as_str()),
        ));
    }
    drop(conn);
    let repo = crate::app::repository::open(&ctx.db, &ctx.data_dir, wish.project_id).await?;
    Ok((task, wish, repo.path))
}

async fn wish_by_id(conn: &mut sqlx::PgConnection, id: uuid::Uuid) -> Result<Wish> {
    let slug =
        tasks::refs::wish_slug(&mut *conn, id).await?.ok_or_else(|| Error::NotFound("the wish is gone".into()))?;
    crate::app::wish_lifecycle::find(conn, &slug).await
}

/// Done needs commits on the group's branch beyond where it started; the report is recorded,
/// then merged into the wish's branch at once (or by the next conductor tick).
async fn group_done(ctx: &Ctx, agent: &Agent, summary: String, idem: Option<&Idempotency>) -> Result<ReportOutcome> {
    let (task, wish, repo) = own_group(ctx, agent).await?;
    if task.status.is_terminal() {
        return Err(not_running(&task, agent));
    }
    let (Some(branch), Some(base)) = (task.branch.clone(), task.base_commit.clone()) else {
        return Err(not_yours(agent, "dispatched group"));
    };
    let git = |e: crate::git::GitError| Error::Internal(anyhow::anyhow!("reading `{branch}`: {e}"));
    let head = branches::head(&repo, &branch).await.map_err(git)?.unwrap_or_else(|| base.clone());
    if branches::commits_ahead(&repo, &base, &head).await.map_err(git)? == 0 {
        return Err(Error::conflict(
            format!(
                "`{branch}` has no commits beyond where the group started ({}): commit your work, then report done \
                 with `switchyard group done`, which pushes the branch",
                &base[..base.len().min(12)]
            ),
            Some(task.status.as_str()),
        ));
    }
    let mut tx = ctx.db.begin().await?;
    answered_by_report(&mut tx, &task, agent).await?;
    if conductor::record_report(&mut tx, task.id, &head, &summary).await?.is_none() {
        let now = tasks::get(&mut tx, task.id).await?;
        return Err(not_running(now.as_ref().unwrap_or(&task), agent));
    }
    let wish_branch = wish.branch.clone().unwrap_or_default();
    // Sent again, the report is answered with what held when it was recorded.
    let recorded = ReportOutcome {
        accepted: "group_done",
        detail: format!("recorded; it is merged into `{wish_branch}` shortly"),
        integration: vec![],
    };
    idempotency::record_ok(&mut tx, idem, &recorded).await?;
    ctx.feed.commit(tx).await?;
    // The report is recorded: an integration that fails now (git, or the wish's branch moved
    // under the batch) is the conductor's to try again, not an error of the agent's report.
    let integration = integrate::wish(ctx, wish.id).await.unwrap_or_else(|e| {
        tracing::warn!(wish = %wish.slug, error = %e, "integrating a reported group; the conductor tries again");
        Vec::new()
    });
    let key = task.group_key.unwrap_or_default();
    let mine: Vec<Integration> = integration
        .into_iter()
        .filter(
            |i| matches!(i, Integration::Merged { group, .. } | Integration::Conflict { group, .. } if *group == key),
        )
        .collect();
    let detail = match mine.first() {
        Some(Integration::Merged { .. }) => format!("merged into `{wish_branch}`; your work here is done"),
        Some(Integration::Conflict { files, .. }) => format!(
            "your branch conflicts with `{wish_branch}` in {}: merge origin/{wish_branch} into your branch, resolve, commit and report done again",
            files.join(", ")
        ),
        None => recorded.detail,
    };
    Ok(ReportOutcome { accepted: "group_done", detail, integration: mine })
}

async fn group_blocked(ctx: &Ctx, agent: &Agent, reason: &str, idem: Option<&Idempotency>) -> Result<ReportOutcome> {
    let (task, _wish, _repo) = own_group(ctx, agent).await?;
    if task.status.is_terminal() || task.reported_at.is_some() {
        return Err(not_running(&task, agent));
    }
    let key = task.group_key.unwrap_or_default();
    let outcome = ReportOutcome {
        accepted: "group_blocked",
        detail: format!("group `{key}` is handed to a person"),
        integration: vec![],
    };
    let mut tx = ctx.db.begin().await?;
    give_up(&mut tx, agent, &format!("agent `{}` is blocked: {reason}", agent.name)).await?;
    idempotency::record_ok(&mut tx, idem, &outcome).await?;
    ctx.feed.commit(tx).await?;
    Ok(outcome)
}

/// A report is the agent's answer: whatever it was asked (a permission or a question put the
/// group in `waiting_input`), it went on and finished. In the report's transaction, so the group
/// is `in_progress` again only with its report recorded.
async fn answered_by_report(conn: &mut sqlx::PgConnection, task: &tasks::Task, agent: &Agent) -> Result<()> {
    if task.status != TaskStatus::WaitingInput {
        return Ok(());
    }
    let answer = format!("{} went on and reported", agent.name);
    let change = Change { answer: Some(answer), ..Change::default() };
    // Refused: another writer moved the group meanwhile; the report's own update says how.
    let _applied = tasks::apply(conn, task.id, TaskEvent::Answer, &change).await?;
    Ok(())
}

/// Why a group report was refused, naming the state the group was found in.
fn not_running(task: &tasks::Task, agent: &Agent) -> Error {
    let key = task.group_key.as_deref().unwrap_or("");
    let why = match task.status {
        _ if task.assignee.as_deref() != Some(agent.name.as_str()) => {
            format!("group `{key}` is assigned to {} now", task.assignee.as_deref().unwrap_or("nobody"))
        }
        TaskStatus::InProgress | TaskStatus::WaitingInput if task.reported_at.is_some() => {
            format!("group `{key}` was reported done already; it waits for its merge")
        }
        TaskStatus::Done => format!("group `{key}` is `done` already"),
        other => format!("group `{key}` is `{other}`, not running"),
    };
    Error::conflict(why, Some(task.status.as_str()))
}

/// The wish of a planner, reviewer or fixer, checked to be the reporter's role.
async fn own_wish(ctx: &Ctx, agent: &Agent, role: AgentRole, what: &str) -> Result<Wish> {
    if agent.role != role || agent.task_id.is_some() || agent.ready_for_cleanup {
        return Err(not_yours(agent, what));
    }
    let wish_id = agent.wish_id.ok_or_else(|| not_yours(agent, what))?;
    let mut conn = ctx.db.acquire().await?;
    wish_by_id(&mut conn, wish_id).await
}

async fn review_verdict(
    ctx: &Ctx,
    agent: &Agent,
    verdict: Verdict,
    notes: &str,
    idem: Option<&Idempotency>,
) -> Result<ReportOutcome> {
    let wish = own_wish(ctx, agent, AgentRole::Reviewer, "review").await?;
    let mut tx = ctx.db.begin().await?;
    let wish =
        crate::db::wishes::lock(&mut tx, wish.id).await?.ok_or_else(|| Error::NotFound("the wish is gone".into()))?;
    let after = crate::app::wish_lifecycle::verdict(&mut tx, wish, verdict, notes).await?;
    conductor::conclude(&mut tx, agent.id).await?;
    let detail = format!("recorded; the wish is {} ({})", after.status, after.phase);
    let outcome = ReportOutcome { accepted: "review", detail, integration: vec![] };
    idempotency::record_ok(&mut tx, idem, &outcome).await?;
    ctx.feed.commit(tx).await?;
    Ok(outcome)
}

/// A planner's plan replaces the draft's (checked as the API checks it). A refused plan is told
/// back to the planner as a message too, so a planner that does not read the command's output
/// still learns why. The plan is applied in a transaction of its own; the key is recorded with
/// the planner's conclusion just after it (a plan sent again in between is refused, the wish no
/// longer a draft).
async fn plan(ctx: &Ctx, agent: &Agent, groups: Vec<NewGroup>, idem: Option<&Idempotency>) -> Result<ReportOutcome> {
    let wish = own_wish(ctx, agent, AgentRole::Planner, "draft to plan").await?;
    if wish.status != WishStatus::Draft {
        return Err(Error::conflict(format!("the wish is {}, not a draft", wish.status), Some(wish.status.as_str())));
    }
    match wishes_app::plan(ctx, &wish.slug, Some(groups)).await {
        Ok(detail) => {
            let detail = format!("plan accepted: {} group(s); the wish is {}", detail.groups.len(), detail.wish.status);
            let outcome = ReportOutcome { accepted: "plan", detail, integration: vec![] };
            let mut tx = ctx.db.begin().await?;
            conductor::conclude(&mut tx, agent.id).await?;
            idempotency::record_ok(&mut tx, idem, &outcome).await?;
            ctx.feed.commit(tx).await?;
            Ok(outcome)
        }
        Err(Error::Invalid(problems)) => {
            let text: Vec<String> = problems.iter().map(|p| format!("- {}: {}", p.field, p.message)).collect();
            let mut tx = ctx.db.begin().await?;
            tell(&mut tx, agent, briefs::plan_refused(&text.join("\n"))).await?;
            ctx.feed.commit(tx).await?;
            Err(Error::Invalid(problems))
        }
        Err(other) => Err(other),
    }
}

async fn fix_done(ctx: &Ctx, agent: &Agent, summary: &str, idem: Option<&Idempotency>) -> Result<ReportOutcome> {
    let wish = own_wish(ctx, agent, AgentRole::Fix, "fix").await?;
    let mut tx = ctx.db.begin().await?;
    let wish =
        crate::db::wishes::lock(&mut tx, wish.id).await?.ok_or_else(|| Error::NotFound("the wish is gone".into()))?;
    let after = match wish.status {
        WishStatus::Executing => review::fixed(&mut tx, &wish).await?,
        // A fix for the merge queue (a conflict or a failed gate): the wish re-enters the queue.
        WishStatus::Conflict | WishStatus::Failed => {
            crate::app::merge_queue::fix_done(&mut tx, &wish, agent, summary).await?;
            wish_by_id(&mut tx, wish.id).await?
        }
        _ => {
            let why = format!("the wish is {}; nothing waits for this fix ({summary})", wish.status);
            return Err(Error::conflict(why, Some(wish.status.as_str())));
        }
    };
    conductor::conclude(&mut tx, agent.id).await?;
    let outcome = ReportOutcome {
        accepted: "fix_done",
        detail: format!("recorded; the wish is {} ({})", after.status, after.phase),
        integration: vec![],
    };
    idempotency::record_ok(&mut tx, idem, &outcome).await?;
    ctx.feed.commit(tx).await?;
    Ok(outcome)
}

/// A standalone task's agent reports on its own task.
async fn task(
    ctx: &Ctx,
    agent: &Agent,
    event: TaskEvent,
    change: Change,
    idem: Option<&Idempotency>,
) -> Result<ReportOutcome> {
    let task_id = agent.task_id.ok_or_else(|| not_yours(agent, "task"))?;
    if let Some(outcome) = super::task_runs::report(ctx, agent, event, change.clone(), idem).await? {
        return Ok(outcome);
    }
    let task = tasks_app::act(ctx, task_id, event, change).await?;
    let outcome =
        ReportOutcome { accepted: "task", detail: format!("the task is {}", task.status), integration: vec![] };
    // Recorded just after the task moved (a report sent again in between is refused by the
    // task's own state).
    let mut tx = ctx.db.begin().await?;
    idempotency::record_ok(&mut tx, idem, &outcome).await?;
    tx.commit().await?;
    Ok(outcome)
}
