//! Messages between the operator and agents, and teams' group chats: send a message, mark one
//! read, post to a team's chat. Who may speak as whom is the caller's to decide (it knows the
//! request's token); these take the speaker as already checked, and decide whom an agent may
//! message ([`agent_may_message`]).

use sqlx::PgConnection;
use uuid::Uuid;

use super::idempotency::{self, Idempotency};
use super::{Ctx, Error, Result};
use crate::db::agents;
use crate::db::agents::Agent;
use crate::db::messages::{self, Message, NewMessage};
use crate::db::team_chat::{self, ChatPost, BODY_LIMIT};
use crate::db::teams::Team;
use crate::domain::message::{agent_may_message, check_body, Party, OPERATOR, SWITCHYARD};

/// Stores a message from `from` to `to` (an agent's name or `operator`), pending delivery, and
/// appends it to the message log (`<data_dir>/outbox.jsonl`) once committed. The worker of the recipient's node
/// delivers it.
#[tracing::instrument(skip_all, fields(to = ?to), err(level = "debug"))]
pub async fn send(ctx: &Ctx, from: String, to: &str, body: String, idem: Option<&Idempotency>) -> Result<Message> {
    check_body(&body).map_err(|why| Error::invalid("body", why))?;
    let to = to.trim().to_owned();
    let mut tx = ctx.db.begin().await?;
    // An agent sending: the event belongs to its project (the operator's has none of its own).
    let sender = match from.as_str() {
        OPERATOR | SWITCHYARD => None,
        agent => Some(
            agents::by_name(&mut tx, agent)
                .await?
                .ok_or_else(|| Error::invalid("from", format!("no agent `{agent}`")))?,
        ),
    };
    let sender_project = match &sender {
        Some(agent) => agents::project_slug(&mut tx, agent.id).await?,
        None => None,
    };
    let (recipient_id, project) = if to == OPERATOR {
        (None, sender_project)
    } else {
        let agent = agents::by_name(&mut tx, &to)
            .await?
            .ok_or_else(|| Error::invalid("to", format!("no agent `{to}` (nor `operator`)")))?;
        if let Some(sender) = &sender {
            if !agent_may_message(&party(sender), &party(&agent)) {
                return Err(Error::Forbidden(format!(
                    "agent `{from}` may message the operator, its team and the agents of its own wish or task; \
                     `{to}` is none of these"
                )));
            }
        }
        (Some(agent.id), agents::project_slug(&mut tx, agent.id).await?)
    };
    let new = NewMessage { from, to, recipient_id, body, project };
    let message = messages::insert(&mut tx, &new).await?;
    idempotency::record(&mut tx, idem, &message).await?;
    ctx.feed.commit(tx).await?;
    crate::message_log::append(&ctx.data_dir, &message).await;
    Ok(message)
}

fn party(agent: &Agent) -> Party<'_> {
    Party { team: agent.team.as_deref(), wish: agent.wish_id, task: agent.task_id }
}

/// Marks message `id` read (again is fine).
#[tracing::instrument(skip_all, fields(message = ?id), err(level = "debug"))]
pub async fn mark_read(ctx: &Ctx, id: Uuid) -> Result<Message> {
    let mut tx = ctx.db.begin().await?;
    let message = messages::mark_read(&mut tx, id).await?.ok_or_else(|| Error::NotFound(format!("no message {id}")))?;
    ctx.feed.commit(tx).await?;
    Ok(message)
}

/// Posts `body` to the team's chat as `from`; the post is a `chat.posted` event too, so the live
/// stream and webhooks see it.
#[tracing::instrument(skip_all, fields(team = ?team.name), err(level = "debug"))]
pub async fn post_to_team(ctx: &Ctx, team: &Team, from: &str, body: &str) -> Result<ChatPost> {
    if body.trim().is_empty() || body.len() > BODY_LIMIT || body.contains('\0') {
        return Err(Error::invalid("body", format!("must be 1 to {BODY_LIMIT} bytes, not blank, without NUL")));
    }
    let mut tx = ctx.db.begin().await?;
    let post = team_chat::post(&mut tx, team, from, body).await?;
    ctx.feed.commit(tx).await?;
    Ok(post)
}

/// Queues a message from Switchyard to `agent`; its node's mailbox types it when the agent is idle.
/// Answers with the message's id.
pub async fn tell(conn: &mut PgConnection, agent: &Agent, body: String) -> Result<Uuid> {
    let body = crate::domain::typed::plain(&body);
    let project = agents::project_slug(&mut *conn, agent.id).await?;
    let new =
        NewMessage { from: SWITCHYARD.to_owned(), to: agent.name.clone(), recipient_id: Some(agent.id), body, project };
    Ok(messages::insert(conn, &new).await?.id)
}
