//! Tasks: create one (on a board or not, with dependencies), edit it, walk it through its state
//! machine (start, ask, answer, complete, fail, cancel, retry), move its card. A wish's groups are
//! tasks too, but their status belongs to the wish: [`super::groups`] drives them.

use sqlx::PgConnection;
use uuid::Uuid;

use super::boards::flow::{self, Mover};
use super::idempotency::{self, Idempotency};
use super::messages::tell;
use super::{boards, projects, Ctx, Error, Fields, Result};
use crate::db::agents;
use crate::db::board_columns::{Card, LockedColumn};
use crate::db::task_runs;
use crate::db::tasks::dependency_edits::{self, Replaced};
use crate::db::tasks::{self, refs, Applied, Change, Edit, Task};
use crate::domain::agent::AgentState;
use crate::domain::briefs;
use crate::domain::task::TaskEvent;
use crate::domain::typed;
use crate::providers::Providers;

/// What a new task is made of.
#[derive(Debug, Default)]
pub struct NewTask {
    /// The project's slug.
    pub project: String,
    pub title: String,
    pub goal: Option<String>,
    /// An agent's name or `human`.
    pub assignee: Option<String>,
    pub provider: Option<String>,
    /// How many times the task may be started before it must be retried (default 10).
    pub max_iterations: Option<i32>,
    /// Put the task on this board (in its first column unless `column_id` is given).
    pub board_id: Option<Uuid>,
    pub column_id: Option<Uuid>,
    /// Tasks of the same project that must be `done` first.
    pub depends_on: Vec<Uuid>,
}

/// `value` trimmed, refused as `field` when empty or longer than `max` characters.
pub fn text(field: &str, value: &str, max: usize) -> Result<String> {
    let value = value.trim();
    if value.is_empty() || value.chars().count() > max {
        return Err(Error::invalid(field, format!("must be 1 to {max} characters")));
    }
    Ok(value.to_owned())
}

/// Checks a requested cap on starts.
pub fn max_iterations(value: Option<i32>) -> Result<Option<i32>> {
    match value {
        Some(n) if n < 1 => Err(Error::invalid("max_iterations", "must be at least 1")),
        other => Ok(other),
    }
}

/// The longest goal kept, in characters.
const MAX_GOAL: usize = 100_000;
/// The most tasks one task may wait for.
const MAX_DEPENDENCIES: usize = 1000;

/// A provider named for a task must be one agents can run.
fn known_provider(providers: &Providers, provider: Option<&str>) -> Result<()> {
    match provider {
        Some(p) if p.len() > 100 => Err(Error::invalid("provider", "must be at most 100 characters")),
        Some(p) if providers.get(p).is_none() => {
            Err(Error::invalid("provider", format!("unknown provider `{p}`; known: {}", providers.names().join(", "))))
        }
        _ => Ok(()),
    }
}

fn not_found(id: Uuid) -> Error {
    Error::NotFound(format!("no task {id}"))
}

/// Validates and inserts a task in the caller's transaction (the API, the board's form and the
/// inbound hooks): `ready`, or `blocked` while any of `depends_on` is not done.
pub async fn create(conn: &mut PgConnection, providers: &Providers, new: NewTask) -> Result<Task> {
    let mut errors = Fields::default();
    let title = errors.take(text("title", &new.title, 300))?.unwrap_or_default();
    let assignee = errors.take(new.assignee.as_deref().map(|a| text("assignee", a, 100)).transpose())?.flatten();
    let max_iterations = errors.take(max_iterations(new.max_iterations))?.flatten();
    errors.rule("title", typed::check_line(new.title.trim()));
    errors.max_len_opt("goal", new.goal.as_deref(), MAX_GOAL);
    errors.rule("goal", new.goal.as_deref().map_or(Ok(()), typed::check));
    errors.max_len("project", &new.project, 100);
    errors.take(known_provider(providers, new.provider.as_deref()))?;
    errors.check("depends_on", new.depends_on.len() <= MAX_DEPENDENCIES, "at most 1000 tasks");
    errors.finish()?;
    let project_id = projects::id(&mut *conn, &new.project, "project").await?;
    let missing = refs::missing_in_project(&mut *conn, project_id, &new.depends_on).await?;
    if !missing.is_empty() {
        let ids: Vec<String> = missing.iter().map(Uuid::to_string).collect();
        return Err(Error::invalid("depends_on", format!("no such task in this project: {}", ids.join(", "))));
    }
    let column = match (new.board_id, new.column_id) {
        (None, None) => None,
        (board_id, column_id) => {
            let field = if column_id.is_some() { "column_id" } else { "board_id" };
            let column = LockedColumn::lock(&mut *conn, board_id, column_id, None)
                .await?
                .ok_or_else(|| Error::invalid(field, "no such column on this board (or the board has none)"))?;
            if column.project_id != project_id {
                return Err(Error::invalid(field, "belongs to another project"));
            }
            if column.is_full() {
                return Err(boards::column_full(&column));
            }
            Some(column)
        }
    };
    let row = tasks::NewTask {
        project_id,
        title,
        goal: new.goal.unwrap_or_default(),
        assignee,
        provider: new.provider,
        max_iterations,
        board_id: column.as_ref().map(|c| c.board_id),
        column_id: column.as_ref().map(|c| c.id),
        depends_on: new.depends_on,
        ..tasks::NewTask::default()
    };
    Ok(tasks::insert(conn, &row).await?)
}

/// Creates a task in its own transaction, recording its idempotency key (if any) in it.
#[tracing::instrument(skip_all, fields(project = ?new.project), err(level = "debug"))]
pub async fn create_now(ctx: &Ctx, new: NewTask, idem: Option<&Idempotency>) -> Result<Task> {
    let mut tx = ctx.db.begin().await?;
    let task = create(&mut tx, &ctx.providers.current(), new).await?;
    idempotency::record(&mut tx, idem, &task).await?;
    ctx.feed.commit(tx).await?;
    Ok(task)
}

/// The data an action needs, checked: a question to ask, an answer to give, a sane cap.
fn checked(event: TaskEvent, change: Change) -> Result<Change> {
    let blank = |value: &Option<String>| value.as_deref().is_none_or(|v| v.trim().is_empty());
    match event {
        TaskEvent::Ask if blank(&change.question) => Err(Error::invalid("question", "must not be empty")),
        TaskEvent::Answer if blank(&change.answer) => Err(Error::invalid("answer", "must not be empty")),
        _ => Ok(Change { max_iterations: max_iterations(change.max_iterations)?, ..change }),
    }
}

/// Applies one action to a standalone task, in one transaction with the dependents it makes
/// `ready`, and answers with the task as it is now. A wish's group is refused: its status
/// belongs to the wish, whose own group actions drive it (and complete or fail the wish).
#[tracing::instrument(skip_all, fields(task = ?id, action = event.name()), err(level = "debug"))]
pub async fn act(ctx: &Ctx, id: Uuid, event: TaskEvent, change: Change) -> Result<Task> {
    let change = checked(event, change)?;
    let mut tx = ctx.db.begin().await?;
    let task = tasks::get(&mut tx, id).await?.ok_or_else(|| not_found(id))?;
    if let Some(wish_id) = task.wish_id {
        let slug = refs::wish_slug(&mut tx, wish_id).await?.unwrap_or_else(|| wish_id.to_string());
        let key = task.group_key.unwrap_or_default();
        let detail = format!(
            "this task is group `{key}` of wish `{slug}`; use /wishes/{slug}/groups/{key}/{} instead",
            event.name()
        );
        return Err(Error::conflict(detail, Some(task.status.as_str())));
    }
    let question = task.question.clone();
    match tasks::apply(&mut tx, id, event, &change).await?.ok_or_else(|| not_found(id))? {
        Applied::Refused { current, message } => Err(Error::conflict(message, Some(current.as_str()))),
        Applied::Done(task, _released) => {
            let task = after(&mut tx, task, event, question.as_deref(), &change).await?;
            ctx.feed.commit(tx).await?;
            Ok(task)
        }
    }
}

/// What follows an action, in its transaction: an answer goes to the agent working on the task
/// (through its mailbox); a task that ended ends its agent's run; one completed in an `auto`
/// column moves on ([`flow::completed`]).
pub async fn after(
    conn: &mut PgConnection,
    task: Task,
    event: TaskEvent,
    question: Option<&str>,
    change: &Change,
) -> Result<Task> {
    if let (TaskEvent::Answer, Some(answer)) = (event, change.answer.as_deref()) {
        answered(&mut *conn, &task, question, answer).await?;
    }
    flow::ended(&mut *conn, &task, &format!("the task was {}", task.status)).await?;
    if event == TaskEvent::Complete {
        if let Some(next) = flow::completed(&mut *conn, &task).await? {
            return move_to(conn, task.id, next, Mover::Switchyard).await;
        }
    }
    Ok(task)
}

/// Edits a task's title, goal, assignee, provider or cap on starts (never its status: that is
/// [`act`]). With `expected_version`, only if nobody changed the task since it was read.
#[tracing::instrument(skip_all, fields(task = ?id), err(level = "debug"))]
pub async fn edit(ctx: &Ctx, id: Uuid, expected_version: Option<i32>, edit: Edit) -> Result<Task> {
    let mut errors = Fields::default();
    let title = errors.take(edit.title.as_deref().map(|t| text("title", t, 300)).transpose())?.flatten();
    let assignee = errors
        .take(edit.assignee.clone().map(|a| a.as_deref().map(|a| text("assignee", a, 100)).transpose()).transpose())?
        .flatten();
    let max_iterations = errors.take(max_iterations(edit.max_iterations))?.flatten();
    errors.rule("title", edit.title.as_deref().map_or(Ok(()), |t| typed::check_line(t.trim())));
    errors.max_len_opt("goal", edit.goal.as_deref(), MAX_GOAL);
    errors.rule("goal", edit.goal.as_deref().map_or(Ok(()), typed::check));
    errors.take(known_provider(&ctx.providers.current(), edit.provider.clone().flatten().as_deref()))?;
    errors.finish()?;
    let edit = Edit { title, assignee, max_iterations, ..edit };
    let mut tx = ctx.db.begin().await?;
    if let Some(Some(named)) = &edit.provider {
        confined_if_group(&mut tx, &ctx.providers.current(), id, named).await?;
    }
    let task = match tasks::update_fields(&mut tx, id, expected_version, &edit).await? {
        Ok(Some(task)) => task,
        Ok(None) => return Err(not_found(id)),
        Err(current) => {
            return Err(Error::Stale(format!(
                "the task is at version {}, not {}; read it again",
                current.version,
                expected_version.unwrap_or_default()
            )))
        }
    };
    ctx.feed.commit(tx).await?;
    Ok(task)
}

/// A wish's group may be given only a provider its wish's own may hand work to
/// ([`crate::app::wish_lifecycle::refused_provider`]), as its plan was checked.
async fn confined_if_group(conn: &mut PgConnection, providers: &Providers, id: Uuid, named: &str) -> Result<()> {
    let Some(task) = tasks::get(&mut *conn, id).await? else { return Ok(()) };
    let Some(wish_id) = task.wish_id else { return Ok(()) };
    let Some(slug) = refs::wish_slug(&mut *conn, wish_id).await? else { return Ok(()) };
    let wish = crate::app::wish_lifecycle::find(&mut *conn, &slug).await?;
    let key = task.group_key.unwrap_or_default();
    crate::app::wish_lifecycle::confined_group(conn, providers, &wish, &key, named).await
}

/// Moves task `id` to a column of a board of its project, under the column's WIP limit, in the
/// caller's transaction (the API and the dashboard's board), as the column gates allow `by`
/// ([`flow`]): entering the last column completes the task, an `agent` column asks an agent.
pub async fn move_to(conn: &mut PgConnection, id: Uuid, column_id: Uuid, by: Mover<'_>) -> Result<Task> {
    crate::db::task_runs::lock_task(&mut *conn, id).await?;
    let task = tasks::get(&mut *conn, id).await?.ok_or_else(|| not_found(id))?;
    let column = LockedColumn::lock(&mut *conn, None, Some(column_id), Some(Card::Task(id)))
        .await?
        .filter(|c| c.project_id == task.project_id)
        .ok_or_else(|| Error::invalid("column_id", "no such column on a board of this task's project"))?;
    if column.is_full() {
        return Err(boards::column_full(&column));
    }
    flow::check_leave(&mut *conn, &task, column_id, by).await?;
    let entering = task.column_id != Some(column_id);
    let task = tasks::move_to_column(&mut *conn, id, &column).await?.ok_or_else(|| not_found(id))?;
    if !entering {
        return Ok(task);
    }
    flow::entered(conn, task, column_id).await
}

/// Moves a task's card in its own transaction.
#[tracing::instrument(skip_all, fields(task = ?id), err(level = "debug"))]
pub async fn move_card(ctx: &Ctx, id: Uuid, column_id: Uuid, by: Mover<'_>) -> Result<Task> {
    let mut tx = ctx.db.begin().await?;
    let task = move_to(&mut tx, id, column_id, by).await?;
    ctx.feed.commit(tx).await?;
    Ok(task)
}

/// Replaces a standalone task's dependencies (tasks of its project), refusing a cycle, a task
/// that has started, and a wish's group (its dependencies are the wish's plan).
#[tracing::instrument(skip_all, fields(task = ?id), err(level = "debug"))]
pub async fn set_dependencies(ctx: &Ctx, id: Uuid, depends_on: Vec<Uuid>) -> Result<Task> {
    if depends_on.len() > MAX_DEPENDENCIES {
        return Err(Error::invalid("depends_on", "at most 1000 tasks"));
    }
    if depends_on.contains(&id) {
        return Err(Error::invalid("depends_on", "a task cannot wait for itself"));
    }
    let mut tx = ctx.db.begin().await?;
    let task = tasks::get(&mut tx, id).await?.ok_or_else(|| not_found(id))?;
    if task.wish_id.is_some() {
        return Err(Error::conflict(
            "this task is a group of a wish; its dependencies are the wish's plan",
            Some(task.status.as_str()),
        ));
    }
    let missing = refs::missing_in_project(&mut tx, task.project_id, &depends_on).await?;
    if !missing.is_empty() {
        let ids: Vec<String> = missing.iter().map(Uuid::to_string).collect();
        return Err(Error::invalid("depends_on", format!("no such task in this project: {}", ids.join(", "))));
    }
    let task = match dependency_edits::replace(&mut tx, id, &depends_on).await? {
        Replaced::Done(task) => task,
        Replaced::NotFound => return Err(not_found(id)),
        Replaced::Fixed(fixed) => return Err(Error::conflict(fixed.to_string(), Some(fixed.0.as_str()))),
        Replaced::Cycle(through) => {
            return Err(Error::invalid("depends_on", format!("task {through} already waits for this task: a cycle")))
        }
    };
    ctx.feed.commit(tx).await?;
    Ok(task)
}

/// A person answered the task's question: the answer goes to the run's agent as a message, and
/// the iteration goes on until the agent stops after reading it. When the agent asks on its
/// screen (a dialog), the answer goes as it was given (an option's number or text), since it is
/// typed into that dialog; a question it asked with `task ask` gets it with its context.
async fn answered(conn: &mut PgConnection, task: &Task, question: Option<&str>, answer: &str) -> Result<()> {
    let Some(run) = task_runs::live(&mut *conn, task.id).await? else { return Ok(()) };
    let Some(agent_id) = run.agent_id else { return Ok(()) };
    let Some(agent) = agents::get(&mut *conn, agent_id).await? else { return Ok(()) };
    let body =
        if agent.state == AgentState::Question { answer.trim().to_owned() } else { briefs::answer(question, answer) };
    let prompt = tell(&mut *conn, &agent, body).await?;
    task_runs::set_prompt(conn, run.id, prompt).await?;
    Ok(())
}
