//! An agent's life as the worker drives it: claiming spawning rows (`FOR UPDATE SKIP LOCKED`),
//! recording the pane it made, applying state changes (`domain::agent::transition`) with a
//! conditional update and their events, and the bookkeeping of activity, nudges and hooks.
//!
//! A state change also moves the agent's task: asking for permission or a question puts an
//! `in_progress` task in `waiting_input`, and getting on with the work answers it back, in the
//! same transaction, whichever signal (hook, screen, API) saw the change.

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::row::AgentRow;
use super::{get, subject, Agent};
use crate::db::{events, tasks, teams, tokens};
use crate::domain::agent::{swapped_from, transition, AgentEvent, AgentState};
use crate::domain::task::TaskEvent;

/// Why a state change happens: which signal saw it, and what comes with it.
#[derive(Debug, Clone, Default)]
pub struct Cause {
    /// `hook`, `screen`, `control`, `reconciler`, `api`, `worker`.
    pub source: &'static str,
    /// The failure reason (for `error`), or the question or permission asked (for
    /// `question`/`permission`, shown on the agent's task).
    pub detail: Option<String>,
    /// For a usage limit: when the worker may resume the agent.
    pub suspended_until: Option<DateTime<Utc>>,
    /// The signal itself, when its source has names for them: the hook's event (`Stop`), so the
    /// state can be explained later; a screen rule's name (`spinner`).
    pub signal: Option<String>,
    /// The screen line the rule in `signal` matched.
    pub line: Option<String>,
}

impl Cause {
    pub fn from(source: &'static str) -> Cause {
        Cause { source, ..Cause::default() }
    }
}

/// The outcome of [`apply`].
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Applied {
    /// The state changed (and its events were written).
    Changed { agent: Agent, from: AgentState },
    /// The event leads to the state the agent is already in: nothing was written.
    Unchanged(Agent),
    /// The agent's state does not allow the event.
    Refused { current: AgentState, message: String },
    /// The agent is no longer in the state the caller expected: re-read and decide again.
    Stale { current: AgentState },
}

/// A losing writer re-reads and tries again; reached only under pathological contention.
const ATTEMPTS: usize = 16;

/// Applies `event` to an agent: `None` when there is no such agent. With `expected`, only if the
/// agent is still in that state (else [`Applied::Stale`]); without it, the current state is read
/// and the conditional update retried if another writer wins meanwhile.
///
/// Writes `agent.state_changed` {from, to, source}, and `agent.stopped` when the agent reaches
/// `done`, `error` or `suspended`; reaching `done` or `error` revokes the agent's token (a
/// respawn issues a new one). A resume (→ `spawning`) puts the row back in the worker's queue:
/// its node and pane are cleared so a worker claims it again.
#[tracing::instrument(skip_all, fields(agent = %id, event = event.name(), source = cause.source), err(level = "debug"))]
pub async fn apply(
    conn: &mut PgConnection,
    id: Uuid,
    expected: Option<AgentState>,
    event: AgentEvent,
    cause: &Cause,
) -> Result<Option<Applied>, sqlx::Error> {
    for _ in 0..ATTEMPTS {
        let Some(current) = get(conn, id).await? else { return Ok(None) };
        if expected.is_some_and(|e| e != current.state) {
            return Ok(Some(Applied::Stale { current: current.state }));
        }
        let to = match transition(current.state, &event) {
            Ok(to) => to,
            Err(illegal) => return Ok(Some(Applied::Refused { current: current.state, message: illegal.to_string() })),
        };
        if to == current.state {
            return Ok(Some(Applied::Unchanged(current)));
        }
        let Some(agent) = conditional_update(conn, &current, to, cause).await? else {
            if expected.is_some() {
                let now = get(conn, id).await?.map(|a| a.state).unwrap_or(current.state);
                return Ok(Some(Applied::Stale { current: now }));
            }
            continue;
        };
        let from = current.state;
        let name = subject(&current.name);
        let mut payload = json!({"from": from, "to": to, "source": cause.source, "detail": cause.detail});
        // Only sources that name their signals (hooks, screen rules) add them, as `swap` does.
        if let Some(signal) = &cause.signal {
            payload["signal"] = json!(signal);
        }
        if let Some(line) = &cause.line {
            payload["line"] = json!(line);
        }
        events::record(&mut *conn, "agent.state_changed", &name, payload).await?;
        if matches!(to, AgentState::Done | AgentState::Error | AgentState::Suspended) {
            let payload = json!({"state": to, "source": cause.source, "reason": cause.detail,
                "suspended_until": cause.suspended_until});
            events::record(&mut *conn, "agent.stopped", &name, payload).await?;
        }
        if matches!(to, AgentState::Done | AgentState::Error) {
            tokens::revoke_for_stopped_agent(conn, current.id, &current.name, to.as_str()).await?;
        }
        follow_task(conn, &current, from, to, cause).await?;
        return Ok(Some(Applied::Changed { agent, from }));
    }
    let current = get(conn, id).await?.map(|a| a.state).unwrap_or(AgentState::Error);
    Ok(Some(Applied::Refused { current, message: "the agent is changing too often; try again".into() }))
}

/// [`apply`] of an observation that swaps working and idle ([`swapped_from`]), in one statement
/// run on its own: the conditional update and its `agent.state_changed` event (with its webhook
/// deliveries, made by the trigger on `events`) commit together without a transaction's extra
/// round trips. Such a change writes nothing else: no task follows it, nothing stops. Returns the
/// agent's name and the state it left, or `None` when the agent is not in the state `to` swaps
/// from (or is gone): the caller then takes [`apply`]'s whole path.
#[tracing::instrument(skip_all, fields(agent = %id, to = %to, source = cause.source), err(level = "debug"))]
pub async fn swap(
    conn: &mut PgConnection,
    id: Uuid,
    pane: &str,
    to: AgentState,
    cause: &Cause,
) -> Result<Option<(String, AgentState)>, sqlx::Error> {
    let Some(from) = swapped_from(to) else { return Ok(None) };
    // The same columns and payload as `conditional_update` and `apply` write for this change;
    // the subject is `subject(name)`.
    sqlx::query_scalar!(
        r#"WITH changed AS (
               UPDATE agents SET state = $3, version = version + 1, updated_at = now(), suspended_until = NULL
               WHERE id = $1 AND state = $2 AND tmux_pane = $8
               RETURNING name)
           INSERT INTO events (type, subject, payload)
           SELECT 'agent.state_changed', 'agent:' || name,
                  jsonb_build_object('from', $2::text, 'to', $3::text, 'source', $4::text, 'detail', $5::text)
                  || jsonb_strip_nulls(jsonb_build_object('signal', $6::text, 'line', $7::text))
           FROM changed
           RETURNING (SELECT name FROM changed) AS "name!""#,
        id,
        from.as_str(),
        to.as_str(),
        cause.source,
        cause.detail,
        cause.signal,
        cause.line,
        pane,
    )
    .fetch_optional(conn)
    .await
    .map(|name| name.map(|name| (name, from)))
}

/// Locks the agent's row for the rest of the caller's transaction if it is still in `pane`:
/// false when it has left it (killed, resumed into a new pane), so what that pane showed is no
/// longer the agent's.
pub async fn lock_in_pane(conn: &mut PgConnection, id: Uuid, pane: &str) -> Result<bool, sqlx::Error> {
    let found = sqlx::query_scalar!("SELECT id FROM agents WHERE id = $1 AND tmux_pane = $2 FOR UPDATE", id, pane)
        .fetch_optional(conn)
        .await?;
    Ok(found.is_some())
}

/// One `UPDATE … WHERE state = $old`, returning the agent as it is now; `None` when another
/// writer changed the agent first.
async fn conditional_update(
    conn: &mut PgConnection,
    current: &Agent,
    to: AgentState,
    cause: &Cause,
) -> Result<Option<Agent>, sqlx::Error> {
    let resuming = to == AgentState::Spawning;
    let failing = to == AgentState::Error;
    // A suspended agent's pane is gone: its pane id and pid would name a dead process, or
    // another agent's once tmux reuses them. (Its window is kept: closing it reads that.)
    let suspending = to == AgentState::Suspended;
    let updated = sqlx::query_as!(
        AgentRow,
        r#"UPDATE agents SET state = $3, version = version + 1, updated_at = now(),
             failure_reason = CASE WHEN $4 THEN COALESCE($5, failure_reason) ELSE failure_reason END,
             suspended_until = CASE WHEN $6 THEN $7::timestamptz ELSE NULL END,
             node_id = CASE WHEN $8 THEN NULL ELSE node_id END,
             tmux_pane = CASE WHEN $8 OR $6 THEN NULL ELSE tmux_pane END,
             tmux_window = CASE WHEN $8 THEN NULL ELSE tmux_window END,
             pid = CASE WHEN $8 OR $6 THEN NULL ELSE pid END,
             nudge_count = CASE WHEN $8 THEN 0 ELSE nudge_count END
         WHERE id = $1 AND state = $2
         RETURNING *"#,
        current.id,
        current.state.as_str(),
        to.as_str(),
        failing,
        cause.detail,
        suspending,
        cause.suspended_until,
        resuming,
    )
    .fetch_optional(conn)
    .await?;
    updated.map(Agent::try_from).transpose()
}

/// Moves the agent's task with the agent: asking (permission or question) puts an `in_progress`
/// task in `waiting_input`; going back to work answers it. A task in any other status is left
/// alone (a person may have moved it), so a refusal here is not an error; so is a group already
/// reported done.
async fn follow_task(
    conn: &mut PgConnection,
    agent: &Agent,
    from: AgentState,
    to: AgentState,
    cause: &Cause,
) -> Result<(), sqlx::Error> {
    let Some(task_id) = agent.task_id else { return Ok(()) };
    let change = if to.needs_person() && !from.needs_person() {
        let question = cause.detail.clone().unwrap_or_else(|| match to {
            AgentState::Permission => format!("{} is asking for permission", agent.name),
            _ => format!("{} is asking a question", agent.name),
        });
        Some((TaskEvent::Ask, tasks::Change { question: Some(question), ..tasks::Change::default() }))
    } else if from.needs_person() && matches!(to, AgentState::Working | AgentState::Idle) {
        let answer = format!("answered in {}'s pane ({})", agent.name, cause.source);
        Some((TaskEvent::Answer, tasks::Change { answer: Some(answer), ..tasks::Change::default() }))
    } else {
        None
    };
    if let Some((event, change)) = change {
        let Some(task) = tasks::get(conn, task_id).await? else { return Ok(()) };
        // A group reported done waits only for its merge: a permission asked after the report
        // (a late hook) must not take it out of the merge's way.
        if event == TaskEvent::Ask && task.reported_at.is_some() {
            return Ok(());
        }
        if let Some(tasks::Applied::Refused { current, .. }) = tasks::apply_to(conn, task, event, &change).await? {
            tracing::debug!(task = %task_id, status = %current, "the agent's task did not follow its state");
        }
    }
    Ok(())
}

/// Claims up to `limit` spawning rows that no node has taken, oldest first, for `node_id`.
/// `SKIP LOCKED` lets several workers claim at once without waiting for or doubling each other.
#[tracing::instrument(skip_all, fields(node = %node_id), err(level = "debug"))]
pub async fn claim_spawning(conn: &mut PgConnection, node_id: &str, limit: i64) -> Result<Vec<Agent>, sqlx::Error> {
    // A team's agents run where its clone is: on the node the team is pinned to, or (not pinned
    // yet) on whichever node claims one of them first, which pins it first. `NO KEY UPDATE`,
    // the lock the update takes anyway: a stronger one would block the foreign-key checks of
    // writes that name the agent (a team's leader) while they hold the team.
    teams::pin_waiting(conn, node_id).await?;
    let ids = sqlx::query_scalar!(
        "UPDATE agents SET node_id = $1, version = version + 1, updated_at = now()
         WHERE id IN (SELECT a.id FROM agents a LEFT JOIN teams t ON t.name = a.team
                      WHERE a.state = 'spawning' AND a.node_id IS NULL
                        AND (a.team IS NULL OR t.node_id = $1)
                      ORDER BY a.created_at, a.id LIMIT $2 FOR NO KEY UPDATE OF a SKIP LOCKED)
         RETURNING id",
        node_id,
        limit
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut claimed = Vec::with_capacity(ids.len());
    for id in ids {
        let agent = get(conn, id).await?.ok_or(sqlx::Error::RowNotFound)?;
        events::record(&mut *conn, "agent.claimed", &subject(&agent.name), json!({"node_id": node_id})).await?;
        claimed.push(agent);
    }
    claimed.sort_by_key(|a| (a.created_at, a.id));
    Ok(claimed)
}

/// Records the pane the worker made for an agent (and its clone). `None`: no such agent.
#[tracing::instrument(skip_all, fields(agent = %id, pane = %pane), err(level = "debug"))]
pub async fn record_pane(
    conn: &mut PgConnection,
    id: Uuid,
    session: &str,
    window: &str,
    pane: &str,
    pid: Option<i32>,
    clone_path: Option<&str>,
) -> Result<Option<Agent>, sqlx::Error> {
    let name = sqlx::query_scalar!(
        "UPDATE agents SET tmux_session = $2, tmux_window = $3, tmux_pane = $4, pid = $5,
             clone_path = COALESCE($6, clone_path), last_activity = now(),
             version = version + 1, updated_at = now()
         WHERE id = $1 RETURNING name",
        id,
        session,
        window,
        pane,
        pid,
        clone_path
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(name) = name else { return Ok(None) };
    let payload = json!({"tmux_session": session, "tmux_window": window, "tmux_pane": pane, "pid": pid,
        "clone_path": clone_path});
    events::record(&mut *conn, "agent.pane_opened", &subject(&name), payload).await?;
    get(conn, id).await
}

/// The agents `node_id` manages that are live: what the reconciler holds against tmux, and the
/// worker watches (read after every batch of spawns). Not through [`super::list`]: its plan for every
/// filter at once reads every agent there ever was, this one only the node's live ones.
pub async fn list_live_on_node(conn: &mut PgConnection, node_id: &str) -> Result<Vec<Agent>, sqlx::Error> {
    // Columns, not `to_jsonb(a)`: made JSON, 500 live agents cost the database 27 ms per read.
    let rows = sqlx::query_as!(
        AgentRow,
        "SELECT * FROM agents
         WHERE node_id = $1 AND state IN ('spawning', 'working', 'idle', 'permission', 'question')
         ORDER BY created_at, id",
        node_id
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter().map(Agent::try_from).collect()
}

/// Notes that the agents produced output just now (the worker calls it at most every few
/// seconds per agent, not per burst). No event: the state changes output leads to write their
/// own. An agent whose row another transaction holds is skipped: its next output notes it, and
/// the worker's loop, which waits for this, neither waits for that transaction nor deadlocks
/// with it (a plain update of many rows locks them in no set order; an integration concluding
/// several agents did, and PostgreSQL broke the cycle only after a second). Returns how many
/// agents were noted.
pub async fn touch_activity(conn: &mut PgConnection, ids: &[Uuid]) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE agents SET last_activity = now()
         WHERE id IN (SELECT id FROM agents WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE SKIP LOCKED)",
        ids
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}

/// Records a nudge sent to the agent, with its `agent.nudged` event; returns how many nudges it
/// has had since it was last (re)spawned, or `None` when there is no such agent.
#[tracing::instrument(skip_all, fields(agent = %id), err(level = "debug"))]
pub async fn record_nudge(conn: &mut PgConnection, id: Uuid) -> Result<Option<i32>, sqlx::Error> {
    let row = sqlx::query!(
        "UPDATE agents SET last_nudge = now(), nudge_count = nudge_count + 1, version = version + 1,
             updated_at = now()
         WHERE id = $1 RETURNING name, nudge_count",
        id
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    events::record(conn, "agent.nudged", &subject(&row.name), json!({"nudge_count": row.nudge_count})).await?;
    Ok(Some(row.nudge_count))
}

/// Records that a hook arrived and the state it maps to (`None`: a hook that says nothing about
/// the state). The arbiter reads these to let a recent hook win over the screen; the caller
/// tells the workers after commit ([`crate::feed::EventFeed::hook_recorded`]). No event of its
/// own: a hook fires on every tool call; the state change it causes writes one.
pub async fn record_hook(conn: &mut PgConnection, id: Uuid, state: Option<AgentState>) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE agents SET last_hook_at = now(), last_hook_state = COALESCE($2, last_hook_state),
             last_activity = now()
         WHERE id = $1",
        id,
        state.map(|s| s.as_str())
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Records `state` as the agent's hook word now, only while its last hook is still the one
/// read at `seen` (none came since). False when one did.
pub async fn record_hook_unless_newer(
    conn: &mut PgConnection,
    id: Uuid,
    seen: DateTime<Utc>,
    state: AgentState,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE agents SET last_hook_at = now(), last_hook_state = $3, last_activity = now()
         WHERE id = $1 AND last_hook_at = $2",
        id,
        seen,
        state.as_str()
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Gives a claimed agent that never got a pane back to the queue (its node stopped), so another
/// worker claims it. Only while it is still `spawning` on that node.
#[tracing::instrument(skip_all, fields(agent = %id, node = %node_id), err(level = "debug"))]
pub async fn release_claim(conn: &mut PgConnection, id: Uuid, node_id: &str) -> Result<bool, sqlx::Error> {
    let name = sqlx::query_scalar!(
        "UPDATE agents SET node_id = NULL, version = version + 1, updated_at = now()
         WHERE id = $1 AND node_id = $2 AND state = 'spawning' AND tmux_pane IS NULL RETURNING name",
        id,
        node_id
    )
    .fetch_optional(&mut *conn)
    .await?;
    let Some(name) = name else { return Ok(false) };
    events::record(conn, "agent.released", &subject(&name), json!({"node_id": node_id})).await?;
    Ok(true)
}

/// Locks the agent's row if it is still on `node_id`, for the rest of the caller's transaction:
/// false when it has left that node (another live node took it over first).
pub async fn lock_on_node(conn: &mut PgConnection, id: Uuid, node_id: &str) -> Result<bool, sqlx::Error> {
    let found =
        sqlx::query_scalar!("SELECT id FROM agents WHERE id = $1 AND node_id = $2 FOR NO KEY UPDATE", id, node_id)
            .fetch_optional(conn)
            .await?;
    Ok(found.is_some())
}

/// Between two agents of one provider resumed after the same usage-limit reset.
pub const RESUME_STAGGER: std::time::Duration = std::time::Duration::from_secs(2);

/// Agents of `node_id` suspended until a time that has come (a usage limit's reset, or the wait
/// before a resume after an interruption), whose step was not concluded meanwhile, staggered: of the
/// agents of one provider that reset at once, the n-th (from 0) is due [`RESUME_STAGGER`] × n
/// after the reset, so they do not all start in the same second (and hit the limit again).
pub async fn limits_reset(conn: &mut PgConnection, node_id: &str) -> Result<Vec<Agent>, sqlx::Error> {
    let ids = sqlx::query_scalar!(
        r#"SELECT id AS "id!" FROM (
             SELECT id, suspended_until,
                    row_number() OVER (PARTITION BY provider ORDER BY suspended_until, id) - 1 AS n
             FROM agents WHERE node_id = $1 AND state = 'suspended' AND suspended_until <= now()
               AND NOT ready_for_cleanup) due
           WHERE suspended_until + make_interval(secs => n * $2::float8) <= now()
           ORDER BY suspended_until, id"#,
        node_id,
        RESUME_STAGGER.as_secs_f64()
    )
    .fetch_all(&mut *conn)
    .await?;
    super::get_all(conn, ids).await
}

/// Whether the agent was resumed from a suspension and has not worked since: its screen still
/// shows the session it was suspended in (a usage limit drawn again is that old one). Working
/// again means a turn of its own: a message submitted to it after the resume, then a `working`
/// state after that submission. A `working` read alone is not enough: a CLI starting up under
/// load reads as working while it still draws the old limit.
pub async fn resumed_and_not_worked_since(conn: &mut PgConnection, name: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (
             SELECT 1 FROM events r
             WHERE r.subject = $1 AND r.type = 'agent.state_changed'
               AND r.payload->>'from' = 'suspended' AND r.payload->>'to' = 'spawning'
               AND NOT EXISTS (
                 SELECT 1 FROM messages m JOIN agents a ON a.id = m.recipient_id
                 WHERE a.name = $2 AND m.submitted_at > r.created_at
                   AND EXISTS (SELECT 1 FROM events w
                               WHERE w.subject = $1 AND w.type = 'agent.state_changed'
                                 AND w.payload->>'to' = 'working' AND w.created_at > m.submitted_at))
           ) AS "stale!""#,
        super::subject(name),
        name
    )
    .fetch_one(conn)
    .await
}

/// How many agents `node_id` manages, by state.
pub async fn count_by_state(
    conn: &mut PgConnection,
    node_id: &str,
) -> Result<std::collections::BTreeMap<String, i64>, sqlx::Error> {
    let rows =
        sqlx::query!(r#"SELECT state, count(*) AS "count!" FROM agents WHERE node_id = $1 GROUP BY state"#, node_id)
            .fetch_all(conn)
            .await?;
    Ok(rows.into_iter().map(|r| (r.state, r.count)).collect())
}

/// The last hook (time and the state it mapped to) of each of these agents.
pub async fn last_hooks(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, (Option<DateTime<Utc>>, Option<AgentState>)>, sqlx::Error> {
    let rows = sqlx::query!("SELECT id, last_hook_at, last_hook_state FROM agents WHERE id = ANY($1)", ids)
        .fetch_all(conn)
        .await?;
    Ok(rows.into_iter().map(|r| (r.id, (r.last_hook_at, r.last_hook_state.and_then(|s| s.parse().ok())))).collect())
}

/// How many times the agent was suspended as interrupted (its pane gone while its work was
/// unreported, [`crate::domain::interruption`]) within `window` of now: the resumes it had.
pub async fn interruptions_within(
    conn: &mut PgConnection,
    name: &str,
    window: std::time::Duration,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM events
           WHERE subject = $1 AND type = 'agent.state_changed' AND payload->>'signal' = $2
             AND created_at > now() - make_interval(secs => $3::float8)"#,
        subject(name),
        INTERRUPTED,
        window.as_secs_f64()
    )
    .fetch_one(conn)
    .await
}

/// The signal of a suspension for an interruption, in its `agent.state_changed` event.
pub const INTERRUPTED: &str = "interrupted";
