//! The merge queue's use cases: a wish enters it (`completed → pending_merge`, by hand or on its
//! own when the project's queue is enabled); a person lists, retries, removes, holds and
//! releases entries and sets the project's merge settings; each pass of the queue's loop
//! ([`pass`]: the git work, with [`predict`] and the [`gate`]) claims an entry, records each step
//! before it acts on git, and records how the attempt ended. What a setback leads to (a fix
//! agent, or a person) is [`fixes`].
//!
//! Every change is one transaction that moves the entry and its wish together, each with a
//! conditional update, so a second node or a retried call cannot apply anything twice.

pub mod fixes;
pub mod gate;
pub mod pass;
pub mod predict;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;

use super::wish_lifecycle::{act, detail, find, start_waiting, WishDetail};
use super::{Ctx, Error, Fields, IfMatch, Result};
use crate::db::history;
use crate::db::merge_queue::settings::{self, MergeSettings, OnConflict};
use crate::db::merge_queue::{self as entries, Entry, Filter, Finish};
use crate::db::projects::{self, Project};
use crate::db::stalled_steps::{self, StalledStep};
use crate::db::wishes::{self, Wish};
use crate::domain::merge_queue::{EntryState, Setback};
use crate::domain::wish::{WishEvent, WishStatus};

pub use fixes::{ci_failed, fix_done};
pub use pass::{MergeQueue, Tick};

/// One queue: a project's entries for one target branch, in order.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Queue {
    pub project: String,
    pub target_branch: String,
    pub entries: Vec<Entry>,
}

/// The most entries one listing shows.
const LIST_LIMIT: i64 = 1000;

/// The queues with their entries (completed ones included, newest attempts last), optionally of
/// one project and target branch.
pub async fn list(ctx: &Ctx, project: Option<&str>, target_branch: Option<&str>) -> Result<Vec<Queue>> {
    let mut conn = ctx.db.acquire().await?;
    let project_id = super::projects::filter_id(&mut conn, project).await?;
    let filter = Filter { project_id, target_branch: target_branch.map(str::to_owned), ..Filter::default() };
    let mut queues: Vec<Queue> = Vec::new();
    for entry in entries::list(&mut conn, &filter, LIST_LIMIT).await? {
        match queues.last_mut() {
            Some(q) if q.project == entry.project && q.target_branch == entry.target_branch => q.entries.push(entry),
            _ => queues.push(Queue {
                project: entry.project.clone(),
                target_branch: entry.target_branch.clone(),
                entries: vec![entry],
            }),
        }
    }
    Ok(queues)
}

/// The entry of wish `slug`.
pub async fn entry(conn: &mut PgConnection, slug: &str) -> Result<Entry> {
    let wish = find(&mut *conn, slug).await?;
    entries::for_wish(conn, wish.id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("wish `{slug}` is not in the merge queue")))
}

/// `completed → pending_merge`, with the wish's entry at the back of its queue, in the caller's
/// transaction. The wish needs a branch, and the project's repository must have it.
pub async fn enter(conn: &mut PgConnection, wish: &Wish) -> Result<(Wish, Entry)> {
    let branch = wish.branch.clone().ok_or_else(|| {
        Error::conflict("the wish has no branch to merge; give it one first", Some(wish.status.as_str()))
    })?;
    let project = project_of(&mut *conn, wish).await?;
    let wish = act(&mut *conn, wish, WishEvent::SubmitForMerge, None).await?;
    let entry = entries::enqueue(conn, wish.id, project.id, &project.target_branch, &branch).await?;
    Ok((wish, entry))
}

/// `POST /wishes/{slug}/submit`: the wish enters the merge queue.
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn submit(ctx: &Ctx, slug: &str) -> Result<WishDetail> {
    let mut tx = ctx.db.begin().await?;
    let wish = find(&mut tx, slug).await?;
    let (wish, _) = enter(&mut tx, &wish).await?;
    let detail = detail(&mut tx, wish).await?;
    ctx.feed.commit(tx).await?;
    Ok(detail)
}

/// Completed wishes of projects whose merge queue is enabled enter it, in the order they
/// completed; a `pending_merge` wish without a waiting entry (resumed from `conflict` by hand)
/// gets it back; how many entered.
pub async fn enter_completed(ctx: &Ctx) -> Result<usize> {
    let waiting = {
        let mut conn = ctx.db.acquire().await?;
        entries::completed_to_enter(&mut conn, 500).await?
    };
    let mut entered = 0;
    // One transaction for all of them, each wish in a savepoint of its own (one that cannot
    // enter is rolled back alone): one commit, where a wish a commit took 50 commits for 50.
    if !waiting.is_empty() {
        let mut tx = ctx.db.begin().await?;
        for id in waiting {
            let mut one = sqlx::Connection::begin(&mut *tx).await?;
            // Locked and checked again: a person may have changed it since.
            let wish = wishes::lock(&mut one, id).await?;
            let Some(wish) = wish.filter(|w| w.status == WishStatus::Completed && !w.held) else {
                one.rollback().await?;
                continue;
            };
            match enter(&mut one, &wish).await {
                Ok(_) => {
                    one.commit().await?;
                    entered += 1;
                }
                Err(Error::Conflict { detail, .. }) => {
                    one.rollback().await?;
                    tracing::debug!(wish = %wish.slug, %detail, "not entered");
                }
                Err(e) => return Err(e),
            }
        }
        ctx.feed.commit(tx).await?;
    }
    for id in {
        let mut conn = ctx.db.acquire().await?;
        entries::pending_without_entry(&mut conn, 500).await?
    } {
        let mut tx = ctx.db.begin().await?;
        let Some(wish) = wishes::lock(&mut tx, id).await? else { continue };
        let (Some(branch), WishStatus::PendingMerge) = (wish.branch.clone(), wish.status) else { continue };
        let project = project_of(&mut tx, &wish).await?;
        entries::enqueue(&mut tx, wish.id, project.id, &project.target_branch, &branch).await?;
        ctx.feed.commit(tx).await?;
        entered += 1;
    }
    Ok(entered)
}

async fn project_of(conn: &mut PgConnection, wish: &Wish) -> Result<Project> {
    project_by_id(conn, wish.project_id).await
}

pub(crate) async fn project_by_id(conn: &mut PgConnection, id: uuid::Uuid) -> Result<Project> {
    let slug = entries::project_slug(&mut *conn, id).await?;
    let project = match slug {
        Some(slug) => projects::find(conn, &slug, false).await?,
        None => None,
    };
    project.ok_or_else(|| Error::NotFound(format!("no project {id}")))
}

/// A failed or conflicting entry goes back to `pending` in its place, its wish to `pending_merge`.
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn retry(ctx: &Ctx, slug: &str, by: &str, summary: Option<&str>) -> Result<Entry> {
    let mut tx = ctx.db.begin().await?;
    let entry = requeue(&mut tx, slug, by, summary).await?;
    ctx.feed.commit(tx).await?;
    Ok(entry)
}

/// [`retry`] in the caller's transaction.
pub(crate) async fn requeue(conn: &mut PgConnection, slug: &str, by: &str, summary: Option<&str>) -> Result<Entry> {
    let wish = find(&mut *conn, slug).await?;
    let entry = entry(&mut *conn, slug).await?;
    if !matches!(entry.state, EntryState::Failed | EntryState::Conflict) {
        return Err(Error::conflict(
            format!("only a failed or conflicting entry is retried; this one is {}", entry.state),
            Some(entry.state.as_str()),
        ));
    }
    if wish.assignee.is_some() {
        // Whoever was asked to act (a person, after a fix agent gave up) has: the queue takes over.
        crate::db::conductor::set_wish_assignee(&mut *conn, wish.id, None, None).await?;
    }
    if matches!(wish.status, WishStatus::Failed | WishStatus::Conflict) {
        act(&mut *conn, &wish, WishEvent::Requeue, None).await?;
    } else if wish.status != WishStatus::PendingMerge {
        return Err(Error::conflict(
            format!("wish `{slug}` is {} now; resume it first", wish.status),
            Some(wish.status.as_str()),
        ));
    }
    entries::retry(conn, &entry, by, summary).await?.ok_or_else(|| changed(&entry))
}

fn changed(entry: &Entry) -> Error {
    Error::conflict(format!("the entry of `{}` changed meanwhile; try again", entry.wish), Some(entry.state.as_str()))
}

/// Removes the entry (not while it is processing); a wish still `pending_merge` goes back to
/// `completed` and does not re-enter on its own until submitted again.
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn remove(ctx: &Ctx, slug: &str) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    let entry = entry(&mut tx, slug).await?;
    if !crate::domain::merge_queue::removable(entry.state) {
        return Err(Error::conflict(
            format!("an entry that is {} cannot be removed", entry.state),
            Some(entry.state.as_str()),
        ));
    }
    let wish = find(&mut tx, slug).await?;
    if wish.status == WishStatus::PendingMerge {
        // Held wishes stay where they are: release first.
        let wish = act(&mut tx, &wish, WishEvent::Withdraw, None).await?;
        // Keep a withdrawn wish from re-entering on the next pass: it waits, held, for a person.
        act(&mut tx, &wish, WishEvent::Hold, None).await?;
    }
    if !entries::delete(&mut tx, &entry).await? {
        return Err(changed(&entry));
    }
    ctx.feed.commit(tx).await?;
    Ok(())
}

/// Holds (`true`) or releases an entry.
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn hold(ctx: &Ctx, slug: &str, held: bool) -> Result<Entry> {
    let mut tx = ctx.db.begin().await?;
    let entry = entry(&mut tx, slug).await?;
    if entry.held == held {
        let now = if held { "already held" } else { "not held" };
        return Err(Error::conflict(format!("the entry is {now}"), Some(entry.state.as_str())));
    }
    let entry = entries::set_held(&mut tx, &entry, held).await?.ok_or_else(|| changed(&entry))?;
    ctx.feed.commit(tx).await?;
    Ok(entry)
}

/// What a person may set of a project's merge settings.
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"merge_check": "./ci/test.sh", "gate_timeout_secs": 600, "fix_cap": 2,
    "on_conflict": "agent", "keep_branches": false, "batch_max": 4, "gate_concurrency": 4, "retry_flaky": false}))]
pub struct SettingsInput {
    /// The gate: run with `sh -c` in a scratch clone of the merge; empty or null for none.
    pub merge_check: Option<String>,
    #[schema(minimum = 1, maximum = 86400)]
    pub gate_timeout_secs: Option<i32>,
    #[schema(minimum = 0, maximum = 20)]
    pub fix_cap: Option<i32>,
    pub on_conflict: Option<OnConflict>,
    pub keep_branches: Option<bool>,
    /// The most entries merged onto one projected head and gated once.
    #[schema(minimum = 1, maximum = 64)]
    pub batch_max: Option<i32>,
    /// The most gates run at once.
    #[schema(minimum = 1, maximum = 32)]
    pub gate_concurrency: Option<i32>,
    /// Gate a red batch once more before bisecting it.
    pub retry_flaky: Option<bool>,
}

/// The merge settings of the project with this id.
pub async fn settings_by_id(ctx: &Ctx, project_id: uuid::Uuid) -> Result<MergeSettings> {
    let mut conn = ctx.db.acquire().await?;
    Ok(settings::get(&mut conn, project_id).await?)
}

pub async fn settings_of(ctx: &Ctx, project: &str) -> Result<MergeSettings> {
    let mut conn = ctx.db.acquire().await?;
    let id = project_id(&mut conn, project).await?;
    Ok(settings::get(&mut conn, id).await?)
}

async fn project_id(conn: &mut PgConnection, slug: &str) -> Result<uuid::Uuid> {
    projects::id_by_slug(conn, slug).await?.ok_or_else(|| Error::NotFound(format!("no project `{slug}`")))
}

/// Replaces a project's merge settings (fields left out keep their defaults), if `If-Match`
/// still matches their version.
#[tracing::instrument(skip_all, fields(project = ?project), err(level = "debug"))]
pub async fn put_settings(ctx: &Ctx, project: &str, input: SettingsInput, if_match: &IfMatch) -> Result<MergeSettings> {
    let defaults = MergeSettings::default();
    let merge_check = input.merge_check.map(|c| c.trim().to_owned()).filter(|c| !c.is_empty());
    let mut errors = Fields::default();
    errors.max_len_opt("merge_check", merge_check.as_deref(), 4000);
    if let Some(check) = &merge_check {
        errors.check(
            "merge_check",
            crate::domain::typed::check(check).is_ok(),
            "must be text without control characters but tab and newline",
        );
    }
    let timeout = input.gate_timeout_secs.unwrap_or(defaults.gate_timeout_secs);
    errors.check("gate_timeout_secs", (1..=86_400).contains(&timeout), "must be 1 to 86400 seconds");
    let fix_cap = input.fix_cap.unwrap_or(defaults.fix_cap);
    errors.check("fix_cap", (0..=20).contains(&fix_cap), "must be 0 to 20");
    let batch_max = input.batch_max.unwrap_or(defaults.batch_max);
    errors.check("batch_max", (1..=64).contains(&batch_max), "must be 1 to 64");
    let gate_concurrency = input.gate_concurrency.unwrap_or(defaults.gate_concurrency);
    errors.check("gate_concurrency", (1..=32).contains(&gate_concurrency), "must be 1 to 32");
    errors.finish()?;
    let new = MergeSettings {
        merge_check,
        gate_timeout_secs: timeout,
        fix_cap,
        on_conflict: input.on_conflict.unwrap_or(defaults.on_conflict),
        keep_branches: input.keep_branches.unwrap_or(defaults.keep_branches),
        batch_max,
        gate_concurrency,
        retry_flaky: input.retry_flaky.unwrap_or(defaults.retry_flaky),
        ..defaults
    };
    let mut tx = ctx.db.begin().await?;
    let id = project_id(&mut tx, project).await?;
    let current = settings::get(&mut tx, id).await?;
    if_match.check("the merge settings", current.version)?;
    let written = settings::put(&mut tx, id, project, &new, Some(current.version))
        .await?
        .ok_or_else(|| Error::Stale("the merge settings changed meanwhile; read them again".into()))?;
    ctx.feed.commit(tx).await?;
    Ok(written)
}

// The loop's steps.

/// A queue with work: its project, target branch and settings, and its open entries in order.
pub struct OpenQueue {
    pub project: Project,
    pub target_branch: String,
    pub settings: MergeSettings,
    pub entries: Vec<Entry>,
    /// The entries' wishes (matched by id).
    pub wishes: Vec<Wish>,
}

/// The queues with pending or processing entries.
pub async fn open_queues(ctx: &Ctx) -> Result<Vec<OpenQueue>> {
    let open = {
        let mut conn = ctx.db.acquire().await?;
        entries::open_queues(&mut conn).await?
    };
    let mut queues = Vec::new();
    for (project_id, target_branch) in open {
        // Three reads on connections of their own, at once: the pass waits for the slowest of
        // them (two round trips), not for their sum (five).
        let project = async {
            let mut conn = ctx.db.acquire().await?;
            project_by_id(&mut conn, project_id).await
        };
        let settings = async {
            let mut conn = ctx.db.acquire().await?;
            Ok::<_, Error>(settings::get(&mut conn, project_id).await?)
        };
        let entries = async {
            let mut conn = ctx.db.acquire().await?;
            let filter = Filter {
                project_id: Some(project_id),
                target_branch: Some(target_branch.clone()),
                open_only: true,
                ..Filter::default()
            };
            let open = entries::list(&mut conn, &filter, LIST_LIMIT).await?;
            let ids: Vec<uuid::Uuid> = open.iter().map(|e| e.wish_id).collect();
            Ok::<_, Error>((wishes::by_ids(&mut conn, &ids).await?, open))
        };
        let (project, settings, (wishes, open)) = tokio::try_join!(project, settings, entries)?;
        queues.push(OpenQueue { project, target_branch, settings, entries: open, wishes });
    }
    Ok(queues)
}

/// Records pending entries' predictions and the entry ahead each waits for, if any: one
/// transaction for a pass.
pub async fn record_predictions(ctx: &Ctx, changed: &[(&Entry, serde_json::Value, Option<String>)]) -> Result<()> {
    if changed.is_empty() {
        return Ok(());
    }
    let mut tx = ctx.db.begin().await?;
    for (entry, prediction, held_for) in changed {
        entries::set_prediction(&mut tx, entry, prediction, held_for.as_deref()).await?;
    }
    ctx.feed.commit(tx).await?;
    Ok(())
}

/// Records why a pending entry waits for something outside the queue (`None`: it goes on).
pub async fn set_waiting(ctx: &Ctx, entry: &Entry, waiting: Option<&str>) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    if entries::set_waiting(&mut tx, entry, waiting).await? {
        ctx.feed.commit(tx).await?;
    }
    Ok(())
}

/// A pending entry whose wish left `pending_merge` some other way (cancelled, resumed
/// elsewhere): it leaves the queue.
pub async fn drop_orphan(ctx: &Ctx, entry: &Entry) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    entries::delete(&mut tx, entry).await?;
    ctx.feed.commit(tx).await?;
    Ok(())
}

/// An entry to claim, with the commits it will merge: `(base, wish)`.
pub type ToClaim<'a> = (&'a Entry, (Option<&'a str>, Option<&'a str>));

/// Claims entries of one queue for this process (`pending → processing`), in order, each with
/// the commits it will merge (`(base, wish)`: the commit it is merged onto and the wish branch's,
/// as the pass saw them), in one transaction under the queue's lock; the entries claimed (those
/// before the first one another process got to first), none when the queue is another's.
pub async fn claim_all(
    ctx: &Ctx,
    wanted: &[ToClaim<'_>],
    run: DateTime<Utc>,
    lease: std::time::Duration,
) -> Result<Vec<Entry>> {
    let Some((first, _)) = wanted.first() else { return Ok(Vec::new()) };
    let mut tx = ctx.db.begin().await?;
    if !entries::lock_queue(&mut tx, first.project_id, &first.target_branch, &ctx.node.node_id, run).await? {
        return Ok(Vec::new());
    }
    let mut claimed = Vec::with_capacity(wanted.len());
    for (entry, commits) in wanted {
        let wish = wishes::lock(&mut tx, entry.wish_id).await?;
        if wish.as_ref().is_none_or(|w| w.status != WishStatus::PendingMerge || w.held) {
            break;
        }
        match entries::claim(&mut tx, entry, &ctx.node.node_id, run, lease, *commits).await? {
            Some(entry) => claimed.push(entry),
            None => break,
        }
    }
    ctx.feed.commit(tx).await?;
    Ok(claimed)
}

/// Records, for each claimed entry, the commit it is merged onto and its merge commit, once the
/// gate passed on them (`log`: its output) and before the target branch moves: one transaction,
/// all or none; `None`
/// when a claim is void (then nothing is recorded).
pub async fn record_all(ctx: &Ctx, chain: &[(&Entry, &str, &str)], log: Option<&str>) -> Result<Option<Vec<Entry>>> {
    let mut tx = ctx.db.begin().await?;
    let mut recorded = Vec::with_capacity(chain.len());
    for (entry, base, merge) in chain {
        let Some(wish) = entry.wish_commit.as_deref() else { return Ok(None) };
        match entries::record_commits(&mut tx, entry, base, wish, Some(merge), log).await? {
            Some(entry) => recorded.push(entry),
            None => return Ok(None),
        }
    }
    tx.commit().await?;
    Ok(Some(recorded))
}

/// Keeps every claim of this process alive while its gates run.
pub async fn renew_run(ctx: &Ctx, run: DateTime<Utc>, lease: std::time::Duration) -> Result<u64> {
    let mut conn = ctx.db.acquire().await?;
    Ok(entries::renew_run(&mut conn, &ctx.node.node_id, run, lease).await?)
}

/// The gate in `scratch` runs in process group `pgid`, led by `leader`: recorded before the gate
/// can get anywhere, so a process that starts after this one died ends it.
pub async fn gate_started(ctx: &Ctx, scratch: &str, run: DateTime<Utc>, pgid: i32, leader: &str) -> Result<()> {
    let mut conn = ctx.db.acquire().await?;
    Ok(crate::db::merge_queue::gates::started(&mut conn, &ctx.node.node_id, scratch, run, pgid, leader).await?)
}

pub async fn gate_ended(ctx: &Ctx, scratch: &str, run: DateTime<Utc>) -> Result<()> {
    let mut conn = ctx.db.acquire().await?;
    Ok(crate::db::merge_queue::gates::ended(&mut conn, &ctx.node.node_id, scratch, run).await?)
}

/// Gates of this node left by processes before `run`.
pub async fn gates_left(ctx: &Ctx, run: DateTime<Utc>) -> Result<Vec<crate::db::merge_queue::gates::LeftGate>> {
    let mut conn = ctx.db.acquire().await?;
    Ok(crate::db::merge_queue::gates::left_before(&mut conn, &ctx.node.node_id, run).await?)
}

pub async fn gate_forgotten(ctx: &Ctx, gate: &crate::db::merge_queue::gates::LeftGate) -> Result<()> {
    let mut conn = ctx.db.acquire().await?;
    Ok(crate::db::merge_queue::gates::forget(&mut conn, &ctx.node.node_id, gate).await?)
}

/// The target branch moved to the merge commits of `landed` (each in its place on its
/// first-parent line): every entry `completed` and its wish `merged`, in one transaction.
pub async fn merged_all(ctx: &Ctx, landed: &[Entry]) -> Result<Vec<Entry>> {
    let mut tx = ctx.db.begin().await?;
    let mut done = Vec::with_capacity(landed.len());
    for entry in landed {
        done.push(merged_in(&mut tx, entry).await?);
    }
    ctx.feed.commit(tx).await?;
    Ok(done)
}

/// Claimed entries that did not land this time go back to `pending` in their places, in one
/// transaction.
pub async fn release_all(ctx: &Ctx, left: &[Entry]) -> Result<()> {
    if left.is_empty() {
        return Ok(());
    }
    let mut tx = ctx.db.begin().await?;
    for entry in left {
        entries::finish(&mut tx, entry, EntryState::Pending, &Finish::default()).await?;
    }
    ctx.feed.commit(tx).await?;
    Ok(())
}

/// The target branch moved to the entry's merge commit: entry `completed`, wish `merged`, its
/// workers' history rows `merged`, wishes waiting for it started.
#[tracing::instrument(skip_all, fields(wish = %entry.wish), err(level = "debug"))]
pub async fn merged(ctx: &Ctx, entry: &Entry) -> Result<Entry> {
    let mut tx = ctx.db.begin().await?;
    let done = merged_in(&mut tx, entry).await?;
    ctx.feed.commit(tx).await?;
    Ok(done)
}

/// [`merged`] in the caller's transaction.
async fn merged_in(tx: &mut PgConnection, entry: &Entry) -> Result<Entry> {
    let done = entries::finish(&mut *tx, entry, EntryState::Completed, &Finish::default())
        .await?
        .ok_or_else(|| changed(entry))?;
    let wish = wishes::lock(&mut *tx, entry.wish_id).await?.ok_or_else(|| Error::NotFound("no wish".into()))?;
    let reason = entry.merge_commit.as_deref().map(|c| format!("merge commit {c}"));
    let wish = act(&mut *tx, &wish, WishEvent::Merged, reason.as_deref()).await?;
    history::mark_merged(&mut *tx, wish.id).await?;
    start_waiting(&mut *tx, &wish).await?;
    Ok(done)
}

/// The attempt did not merge: entry `conflict` or `failed`, its wish likewise, and the handoff
/// to a fix agent or a person — one transaction.
#[tracing::instrument(skip_all, fields(wish = %entry.wish), err(level = "debug"))]
pub async fn setback(
    ctx: &Ctx,
    entry: &Entry,
    setback: Setback,
    reason: &str,
    files: &[String],
    gate_log: Option<&str>,
) -> Result<Entry> {
    let (to, event) = match setback {
        Setback::Conflict => (EntryState::Conflict, WishEvent::Conflict),
        Setback::GateFailed | Setback::Refused => (EntryState::Failed, WishEvent::MergeFailed),
    };
    let mut tx = ctx.db.begin().await?;
    let how = Finish { failure_reason: Some(reason), conflict_files: files, gate_log };
    let ended = entries::finish(&mut tx, entry, to, &how).await?.ok_or_else(|| changed(entry))?;
    let wish = wishes::lock(&mut tx, entry.wish_id).await?.ok_or_else(|| Error::NotFound("no wish".into()))?;
    let wish = act(&mut tx, &wish, event, Some(reason)).await?;
    let (ended, brief) = fixes::hand_off(&mut tx, ended, &wish, setback).await?;
    ctx.feed.commit(tx).await?;
    if let Some(brief) = brief {
        crate::message_log::append(&ctx.data_dir, &brief).await;
    }
    Ok(ended)
}

/// A void claim goes back to `pending` (git said the target branch did not take its merge).
pub async fn recover(ctx: &Ctx, entry: &Entry) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    entries::finish(&mut tx, entry, EntryState::Pending, &Finish::default()).await?;
    ctx.feed.commit(tx).await?;
    Ok(())
}

/// A claimed entry that cannot move its target now goes back to `pending`, waiting for `why`
/// (one transaction); the pass after it was resolved takes it again.
pub async fn wait(ctx: &Ctx, entry: &Entry, why: &str) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    if let Some(pending) = entries::finish(&mut tx, entry, EntryState::Pending, &Finish::default()).await? {
        entries::set_waiting(&mut tx, &pending, Some(why)).await?;
    }
    ctx.feed.commit(tx).await?;
    Ok(())
}

/// The merge queues whose passes keep failing (git refusing a step), each with its next try.
pub async fn stalled_queues(ctx: &Ctx) -> Result<Vec<StalledStep>> {
    let mut conn = ctx.db.acquire().await?;
    Ok(stalled_steps::with_prefix(&mut conn, "merge_queue:").await?)
}

/// Git refused a step of the claimed entry's merge (a ref it cannot lock, say): the entry goes
/// back to `pending` saying so in git's words, the queue waits before it tries again (1 s,
/// doubling to a minute), and the first failure is an event.
pub async fn stalled(ctx: &Ctx, entry: &Entry, error: &str) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    let subject = stalled_steps::merge_queue(entry.project_id, &entry.target_branch);
    let (_, first) = stalled_steps::failed(&mut tx, &subject, "merge", error).await?;
    if let Some(pending) = entries::finish(&mut tx, entry, EntryState::Pending, &Finish::default()).await? {
        entries::set_waiting(&mut tx, &pending, Some(&format!("git refuses: {error}"))).await?;
        if first {
            tracing::warn!(wish = %entry.wish, error, "a merge step failed; the queue tries again after a wait");
            entries::record(&mut tx, "step_failing", &pending, serde_json::json!({"error": error})).await?;
        }
    }
    ctx.feed.commit(tx).await?;
    Ok(())
}

/// The queue's pass went through after failing: its record goes, with an event.
pub async fn unstalled(ctx: &Ctx, entry: &Entry) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    let subject = stalled_steps::merge_queue(entry.project_id, &entry.target_branch);
    if let Some(was) = stalled_steps::succeeded(&mut tx, &subject).await? {
        let extra = serde_json::json!({"attempts": was.attempts, "since": was.since});
        entries::record(&mut tx, "step_recovered", entry, extra).await?;
    }
    ctx.feed.commit(tx).await?;
    Ok(())
}

/// Entries processing under a void claim (see [`entries::void_claims`]).
pub async fn void_claims(ctx: &Ctx, run: DateTime<Utc>) -> Result<Vec<Entry>> {
    let mut conn = ctx.db.acquire().await?;
    Ok(entries::void_claims(&mut conn, &ctx.node.node_id, run).await?)
}

/// The project an entry belongs to.
pub async fn project_of_entry(ctx: &Ctx, entry: &Entry) -> Result<Project> {
    let mut conn = ctx.db.acquire().await?;
    project_by_id(&mut conn, entry.project_id).await
}
