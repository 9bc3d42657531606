//! After a setback (a conflict, a failed gate, a failed CI run, a target branch that cannot be
//! moved): a fix agent on the wish's branch, briefed by its first message, up to the project's
//! fix cap — or a person (`assignee: human`, shown on the overview). A fix agent reports done
//! through the agents' report endpoint, which lands in [`fix_done`]: the wish re-enters the queue.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{project_by_id, requeue, Result};
use crate::app::wish_lifecycle::act;
use crate::app::Error;
use crate::db::agents::{self, Agent, NewAgent};
use crate::db::merge_queue::{self as entries, settings, Entry};
use crate::db::messages::{self, Message, NewMessage};
use crate::db::wishes::{self, Wish};
use crate::domain::agent_kind::{AgentKind, AgentRole, RESERVED_NAMES};
use crate::domain::merge_queue::{conflict_brief, gate_brief, handoff, EntryState, Handoff, Setback};
use crate::domain::wish::{WishEvent, WishStatus};

/// Who speaks in a fix agent's brief: Switchyard itself (a reserved name, never an agent's).
fn sender() -> String {
    RESERVED_NAMES[2].to_owned()
}

/// Hands a failed or conflicting entry to its next fixer, in the caller's transaction; with a fix
/// agent, its brief — a message in its mailbox, delivered and confirmed like any other — which
/// the caller appends to the message log once the transaction commits
/// ([`crate::message_log::append`]).
pub(crate) async fn hand_off(
    conn: &mut PgConnection,
    entry: Entry,
    wish: &Wish,
    setback: Setback,
) -> Result<(Entry, Option<Message>)> {
    let settings = settings::get(&mut *conn, entry.project_id).await?;
    let to_human = settings.on_conflict == settings::OnConflict::Human;
    let why = entry.failure_reason.clone().unwrap_or_default();
    let brief = match handoff(setback, entry.fix_attempts, settings.fix_cap, to_human) {
        Handoff::Human => None,
        Handoff::FixAgent(n) => {
            let brief = match setback {
                Setback::Conflict => {
                    conflict_brief(&entry.wish, &entry.wish_branch, &entry.target_branch, &entry.conflict_files)
                }
                _ => {
                    let check = settings.merge_check.as_deref().unwrap_or("CI");
                    let log = entry.gate_log.as_deref().unwrap_or("");
                    gate_brief(&entry.wish, &entry.wish_branch, &entry.target_branch, check, log)
                }
            };
            Some(spawn_fixer(conn, &entry, wish, n, brief).await?)
        }
    };
    let fix_agent = brief.as_ref().map(|m| m.to.as_str());
    let entry = entries::hand_off(conn, &entry, fix_agent, &why)
        .await?
        .ok_or_else(|| Error::conflict("the entry changed meanwhile", Some(entry.state.as_str())))?;
    Ok((entry, brief))
}

/// Registers fix agent number `n` of the entry (a worker with role `fix` on the wish's branch,
/// so its clone follows `origin/<wish branch>`) and queues its brief as its first message.
async fn spawn_fixer(conn: &mut PgConnection, entry: &Entry, wish: &Wish, n: i32, brief: String) -> Result<Message> {
    let project = project_by_id(&mut *conn, entry.project_id).await?;
    let name = free_name(&mut *conn, &entry.wish, n).await?;
    let task = format!("Fix wish `{}` for the merge queue ({})", entry.wish, entry.state);
    let new = NewAgent {
        id: Uuid::new_v4(),
        name: name.clone(),
        project_id: project.id,
        kind: AgentKind::Worker,
        role: AgentRole::Fix,
        // The wish's provider, else the one the project's conductor gives its agents.
        provider: wish.provider.clone().unwrap_or_else(|| project.conductor_config.provider.clone()),
        clone_mode: "agent".to_owned(),
        branch: Some(entry.wish_branch.clone()),
        repo: project.repo_url.clone().unwrap_or_else(|| project.repo_path.clone()),
        team: None,
        wish_id: Some(wish.id),
        task_id: None,
        task: Some(task),
    };
    let agent = agents::insert(&mut *conn, &new).await?;
    let message = NewMessage {
        from: sender(),
        to: name.clone(),
        recipient_id: Some(agent.id),
        body: brief,
        project: Some(project.slug),
    };
    Ok(messages::insert(conn, &message).await?)
}

/// `fix-<wish>-<n>`, shortened to the name rule's 63 characters, with a suffix if taken.
async fn free_name(conn: &mut PgConnection, wish: &str, n: i32) -> Result<String> {
    let suffix = format!("-{n}");
    let keep = 63 - "fix-".len() - suffix.len() - 5;
    let stem: String = wish.chars().take(keep).collect();
    let name = format!("fix-{}{suffix}", stem.trim_end_matches('-'));
    if agents::by_name(&mut *conn, &name).await?.is_none() {
        return Ok(name);
    }
    Ok(format!("{name}-{}", &Uuid::new_v4().simple().to_string()[..4]))
}

/// A fix agent of the wish reports its branch fixed (`switchyard fix done`): the wish goes back
/// to `pending_merge` and its entry to `pending`, where it was in its queue.
#[tracing::instrument(skip_all, fields(wish = %wish.slug, agent = %agent.name), err(level = "debug"))]
pub async fn fix_done(conn: &mut PgConnection, wish: &Wish, agent: &Agent, summary: &str) -> Result<()> {
    let entry = entries::for_wish(&mut *conn, wish.id)
        .await?
        .ok_or_else(|| Error::conflict(format!("wish `{}` is not in the merge queue", wish.slug), None))?;
    if agent.wish_id != Some(wish.id) || agent.role != AgentRole::Fix {
        return Err(Error::conflict(
            format!("agent `{}` is not a fix agent of wish `{}`", agent.name, wish.slug),
            None,
        ));
    }
    if entry.fix_agent.as_deref() != Some(agent.name.as_str()) {
        return Err(Error::conflict(
            format!("wish `{}` is not waiting for agent `{}` (its entry is {})", wish.slug, agent.name, entry.state),
            Some(entry.state.as_str()),
        ));
    }
    requeue(conn, &wish.slug, &agent.name, Some(summary)).await.map(drop)
}

/// CI failed on the branch of wish `slug` (the inbound GitHub hook): a waiting entry fails as a
/// failed gate would, with the report as its log, and is handed to a fix agent (or a person).
/// Anything else (not queued, being processed, already failed) is left to the queue. The fix
/// agent's brief, if one was sent, for the caller to append to the message log once committed.
pub async fn ci_failed(conn: &mut PgConnection, slug: &str, details: &Value) -> Result<Option<Message>> {
    let Some(wish) = wishes::get(&mut *conn, slug).await? else { return Ok(None) };
    let Some(entry) = entries::for_wish(&mut *conn, wish.id).await? else { return Ok(None) };
    if entry.state != EntryState::Pending || wish.status != WishStatus::PendingMerge || wish.held {
        return Ok(None);
    }
    let name = details.get("name").and_then(Value::as_str).unwrap_or("a check");
    let reason = format!("CI failed: {name}");
    let log = serde_json::to_string_pretty(details).unwrap_or_default();
    let Some(failed) = entries::fail_waiting(&mut *conn, &entry, &reason, &log).await? else { return Ok(None) };
    let wish = act(&mut *conn, &wish, WishEvent::MergeFailed, Some(&reason)).await?;
    Ok(hand_off(conn, failed, &wish, Setback::GateFailed).await?.1)
}
