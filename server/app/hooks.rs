//! What hooks report: an agent's Claude Code hook (its state, and the message a turn started
//! with), an event GitHub sent (CI failed, a pull request opened or merged), and the record that
//! an inbound hook's delivery was acted on. Checking signatures and reading the senders' formats
//! is the way in's; these record what they said.

use serde::Serialize;
use serde_json::{json, Value};
use sqlx::PgConnection;

use super::{Ctx, Error, Result};
use crate::db::agents::{self, Applied, Cause};
use crate::db::{events, messages, webhooks};
use crate::detect::hooks::{signal, HookSignal};
use crate::domain::agent::{AgentEvent, AgentState};

/// How long after a turn's end its transcript is read once more.
const TRANSCRIPT_REREAD: std::time::Duration = std::time::Duration::from_secs(2);

/// What the hook did to the agent.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"agent": "clever-fox", "hook_event_name": "PermissionRequest", "state": "permission", "changed": true,
    "delivered": null}))]
pub struct HookOutcome {
    pub agent: String,
    pub hook_event_name: String,
    /// The agent's state after the hook.
    pub state: AgentState,
    /// Whether the hook changed the state.
    pub changed: bool,
    /// The message this hook confirmed as delivered (a `UserPromptSubmit` carrying its text).
    pub delivered: Option<uuid::Uuid>,
}

/// The question or permission the hook is about, shown on the agent's task.
fn detail(payload: &Value) -> Option<String> {
    let field = |name: &str| payload.get(name).and_then(Value::as_str).filter(|s| !s.is_empty());
    match field("hook_event_name")? {
        "PermissionRequest" => field("tool_name").map(|tool| match tool_asks(payload) {
            Some(what) => format!("permission to use {tool}: {what}"),
            None => format!("permission to use {tool}"),
        }),
        "Notification" => field("message").map(str::to_owned),
        _ => None,
    }
}

/// What a tool asks to do, from its input: the command it runs, else the file it touches or
/// the address it fetches, on one line and at most [`TOOL_ASKS_CHARS`] characters.
fn tool_asks(payload: &Value) -> Option<String> {
    let input = payload.get("tool_input")?;
    let what = ["command", "file_path", "url", "path", "pattern"]
        .iter()
        .find_map(|key| input.get(*key).and_then(Value::as_str).filter(|s| !s.trim().is_empty()))?;
    let line = what.split_whitespace().collect::<Vec<_>>().join(" ");
    Some(match line.char_indices().nth(TOOL_ASKS_CHARS) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line,
    })
}

const TOOL_ASKS_CHARS: usize = 300;

/// A menu answered through Switchyard closed with the chosen option (seen on the screen): the
/// dialog its hook announced is over, and no hook says so — Claude Code's `PreToolUse` runs for
/// its question tool alone, so nothing follows a permission until the turn ends. Recorded as the
/// agent's word that it works again, as a hook's would be (the arbiter trusts it over the
/// screen for a while, then the screen decides: idle, if the answer ended the turn), so neither
/// the agent nor "needs you" shows a dialog already answered. Only for an agent whose hooks
/// speak (`hook_seen`, its last hook's time read before the answer) and while no hook came since:
/// a dialog opened meanwhile keeps its word. The caller commits through the feed, then calls
/// `hook_recorded`.
pub async fn answered(
    conn: &mut PgConnection,
    agent_id: uuid::Uuid,
    hook_seen: Option<chrono::DateTime<chrono::Utc>>,
) -> Result<()> {
    let Some(seen) = hook_seen else { return Ok(()) };
    if !agents::record_hook_unless_newer(conn, agent_id, seen, AgentState::Working).await? {
        return Ok(());
    }
    let cause =
        Cause { source: "answer", detail: Some("the menu closed with the chosen option".into()), ..Cause::default() };
    agents::apply(conn, agent_id, None, AgentEvent::Observed(crate::domain::agent::Activity::Working), &cause).await?;
    Ok(())
}

/// Records one Claude Code hook of agent `name` (its JSON as the hook got it): the hook itself
/// (`last_hook_at`, `last_hook_state`, which let a recent hook win over the screen), the state it
/// means, applied with its event (the agent's task follows), and — for a `UserPromptSubmit`
/// whose prompt is the message being delivered — that message's confirmation, all in one
/// transaction. A refused state change keeps the hook's record all the same: the arbiter should
/// know a late hook came.
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn record_agent_hook(ctx: &Ctx, name: &str, payload: &Value) -> Result<HookOutcome> {
    let event_name = payload
        .as_object()
        .and_then(|o| o.get("hook_event_name"))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::invalid("hook_event_name", "the hook JSON must be an object naming its event"))?
        .to_owned();
    tracing::debug!(hook = %event_name, "hook received");
    let (event, mapped) = match signal(payload) {
        Some(HookSignal::Activity(activity)) => (Some(AgentEvent::Observed(activity)), Some(activity.state())),
        Some(HookSignal::SessionEnded) => (Some(AgentEvent::Finish), Some(AgentState::Done)),
        None => (None, None),
    };
    let no_agent = || Error::NotFound(format!("no agent `{name}`"));
    let mut tx = ctx.db.begin().await?;
    let agent = agents::by_name(&mut tx, name).await?.ok_or_else(no_agent)?;
    // A session that ends is the agent's end only while it is live and not spawning (a suspended
    // Claude Code runs its SessionEnd hook as its window closes, while the resumed one starts) and
    // owes no report:
    // Claude Code ends its session on a signal too (`reason: other`: its pane killed, its tmux
    // server gone), and the reconciler resumes an agent whose pane is really gone.
    let (event, mapped) = match event {
        Some(AgentEvent::Finish)
            if !agent.state.is_live()
                || agent.state == AgentState::Spawning
                || super::worker_records::has_unreported_work(&mut tx, &agent).await? =>
        {
            (None, None)
        }
        _ => (event, mapped),
    };
    agents::record_hook(&mut tx, agent.id, mapped).await?;
    // The prompt a turn started with: if it is the message being delivered, that is its
    // confirmation, committed with the state it causes.
    let delivered = match (event_name.as_str(), payload.get("prompt").and_then(Value::as_str)) {
        ("UserPromptSubmit", Some(prompt)) => {
            messages::delivery::confirm_by_prompt(&mut tx, agent.id, prompt).await?.map(|m| m.id)
        }
        _ => None,
    };
    let outcome = match event {
        None => Ok((agent.state, false)),
        Some(event) => {
            let cause =
                Cause { source: "hook", detail: detail(payload), signal: Some(event_name.clone()), ..Cause::default() };
            match agents::apply(&mut tx, agent.id, None, event, &cause).await? {
                None => return Err(no_agent()),
                Some(Applied::Changed { agent, .. }) => Ok((agent.state, true)),
                Some(Applied::Unchanged(agent)) => Ok((agent.state, false)),
                Some(Applied::Refused { current, message }) => Err(Error::conflict(message, Some(current.as_str()))),
                // Not with `expected: None`; answered like a refusal all the same.
                Some(Applied::Stale { current }) => {
                    Err(Error::conflict("the agent changed meanwhile", Some(current.as_str())))
                }
            }
        }
    };
    // Most hooks change nothing but the hook's own record: those record no event.
    if matches!(outcome, Ok((_, true))) || delivered.is_some() {
        ctx.feed.commit(tx).await?;
    } else {
        tx.commit().await?;
    }
    ctx.feed.hook_recorded();
    // A turn ended: its tokens are in the transcript now. Counting them is no part of the hook's
    // record (a transcript that cannot be read costs only the count).
    let turn_ended = matches!(event_name.as_str(), "Stop" | "SubagentStop" | "SessionEnd");
    if let Some(path) = payload.get("transcript_path").and_then(Value::as_str).filter(|_| turn_ended) {
        if let Err(e) = super::usage::read_transcript(ctx, agent.id, &agent.name, path).await {
            tracing::warn!(agent = name, error = %e, "reading the agent's transcript");
        }
        // Claude Code may still be writing the turn's last entry as its hook runs (seen on a
        // loaded machine: the turn's second answer counted only at the next hook, if one came).
        // What a reading finds is counted once whenever it is read, so read again a moment on.
        let (ctx, id, agent_name, path) = (ctx.clone(), agent.id, agent.name.clone(), path.to_owned());
        tokio::spawn(async move {
            tokio::time::sleep(TRANSCRIPT_REREAD).await;
            if let Err(e) = super::usage::read_transcript(&ctx, id, &agent_name, &path).await {
                tracing::debug!(agent = agent_name, error = %e, "reading the agent's transcript again");
            }
        });
    }
    let (state, changed) = outcome?;
    Ok(HookOutcome { agent: name.to_owned(), hook_event_name: event_name, state, changed, delivered })
}

/// An event GitHub reported, as the way in read it.
#[derive(Debug)]
pub struct GithubEvent {
    /// `ci.failed`, `pr.created`, `pr.merged` or `pr.closed`.
    pub event_type: &'static str,
    /// The branch it is about, when it names one.
    pub branch: Option<String>,
    /// The event's payload; the wish, agent and project it concerns are added.
    pub details: Value,
}

/// Records a GitHub event on the agent working on its branch (its own branch, or
/// `switchyard/<name>` by default), else on the wish whose branch it is, else on the branch; the
/// payload names both the agent and the wish when they exist.
#[tracing::instrument(skip_all, fields(event = reported.event_type), err(level = "debug"))]
pub async fn record_github(ctx: &Ctx, reported: GithubEvent) -> Result<()> {
    let GithubEvent { event_type, branch, mut details } = reported;
    let mut tx = ctx.db.begin().await?;
    let wish = match &branch {
        Some(b) => crate::db::wishes::slug_on_branch(&mut tx, b).await?,
        None => None,
    };
    let agent = match &branch {
        Some(b) => crate::db::agents::on_branch(&mut tx, b).await?,
        None => None,
    };
    details["wish"] = json!(wish);
    details["agent"] = json!(agent.as_ref().map(|(name, _)| name));
    if let Some((_, project)) = &agent {
        // An agent's subject names no project; the payload does, for filters and subscriptions.
        details["project"] = json!(project);
    }
    let agent = agent.map(|(name, _)| name);
    let subject = match (&agent, &wish, &branch) {
        (Some(name), _, _) => format!("agent:{name}"),
        (None, Some(slug), _) => format!("wish:{slug}"),
        (None, None, Some(b)) => format!("branch:{b}"),
        (None, None, None) => "github".to_owned(),
    };
    events::record(&mut tx, event_type, &subject, details.clone()).await?;
    let mut brief = None;
    match (event_type, &wish, &branch) {
        ("ci.failed", Some(slug), _) => brief = super::merge_queue::ci_failed(&mut tx, slug, &details).await?,
        ("pr.created" | "pr.merged" | "pr.closed", _, Some(branch)) => {
            let status = match event_type {
                "pr.created" => "open",
                "pr.merged" => "merged",
                _ => "closed",
            };
            let url = details.get("url").and_then(Value::as_str);
            let number = details.get("number").and_then(Value::as_i64).and_then(|n| i32::try_from(n).ok());
            crate::db::history::record_pr(&mut tx, branch, url, number, status).await?;
        }
        _ => {}
    }
    ctx.feed.commit(tx).await?;
    if let Some(brief) = brief {
        crate::message_log::append(&ctx.data_dir, &brief).await;
    }
    Ok(())
}

/// Records that inbound hook `hook` received delivery `message_id` (its `webhook-id`), in the
/// caller's transaction, so the work it files and this record commit together: a retry after a
/// failure files it, a replay after success does not. False when it was received before.
pub async fn first_delivery(conn: &mut PgConnection, hook: &str, message_id: &str) -> Result<bool> {
    Ok(webhooks::first_delivery(conn, hook, message_id).await?)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_permission_request_names_its_tool_for_the_task() {
        let payload = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash"});
        assert_eq!(detail(&payload).as_deref(), Some("permission to use Bash"));
        let note = json!({"hook_event_name": "Notification", "message": "Claude needs your permission to use Bash"});
        assert_eq!(detail(&note).as_deref(), Some("Claude needs your permission to use Bash"));
    }

    #[test]
    fn a_permission_request_says_the_command_or_file_it_asks_for() {
        let bash = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash",
            "tool_input": {"command": "rm -rf build\n  && ls", "description": "Clean"}});
        assert_eq!(detail(&bash).as_deref(), Some("permission to use Bash: rm -rf build && ls"));
        let edit = json!({"hook_event_name": "PermissionRequest", "tool_name": "Edit",
            "tool_input": {"file_path": "/src/a.rs", "old_string": "x"}});
        assert_eq!(detail(&edit).as_deref(), Some("permission to use Edit: /src/a.rs"));
        let long = json!({"hook_event_name": "PermissionRequest", "tool_name": "Bash",
            "tool_input": {"command": "é".repeat(400)}});
        assert_eq!(detail(&long).unwrap().chars().count(), "permission to use Bash: ".len() + TOOL_ASKS_CHARS + 1);
    }
}
