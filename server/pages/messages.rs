//! `/messages`: the mailbox. Messages still waiting to be delivered (with their attempts and the
//! last attempt's error) and those delivered (and how that was confirmed), and a form to send one
//! as the operator. Sending is the API's own (`messages::send`).

use askama::Template;
use axum::extract::{Query, State};
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::api::messages::send;
use crate::api::AppState;
use crate::db::agents::{self, ListFilter};
use crate::db::messages::{self, Message};
use crate::db::sessions::Session;
use crate::domain::message::OPERATOR;
use crate::pages::view::{ago, iso, no_block, render, see_other, truncate, BlockQuery, Chrome, PageForm, PageResult};

pub fn router() -> Router<AppState> {
    Router::new().route("/messages", get(mailbox).post(send_one))
}

/// At most this many messages of each kind are shown (the newest).
const SHOWN: i64 = 200;

/// A message as a row of a table.
struct MessageRow {
    from: String,
    to: String,
    /// The body's first line, shortened.
    first_line: String,
    sent_ago: String,
    sent_iso: String,
    attempts: i32,
    last_error: Option<String>,
    confirmed_by: Option<&'static str>,
    delivered_ago: Option<String>,
}

impl MessageRow {
    fn new(m: Message, now: DateTime<Utc>) -> MessageRow {
        MessageRow {
            first_line: truncate(m.body.lines().find(|l| !l.trim().is_empty()).unwrap_or(""), 120),
            sent_ago: ago(m.created_at, now),
            sent_iso: iso(m.created_at),
            attempts: m.attempts,
            confirmed_by: m.confirmed_by.map(|c| c.as_str()),
            delivered_ago: m.delivered_at.map(|at| ago(at, now)),
            last_error: m.last_error,
            from: m.from,
            to: m.to,
        }
    }
}

#[derive(Template)]
#[template(path = "messages/mailbox.html", blocks = ["pending", "delivered"])]
struct MailboxPage {
    chrome: Chrome,
    /// Oldest first: the order they are delivered in.
    pending: Vec<MessageRow>,
    /// Newest first.
    delivered: Vec<MessageRow>,
    /// Who a message can be sent to.
    recipients: Vec<String>,
}

#[tracing::instrument(skip_all, err(Debug))]
async fn mailbox(State(state): State<AppState>, session: Session, Query(query): Query<BlockQuery>) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "messages", "Mailbox").await?;
    let now = Utc::now();
    let mut pending: Vec<MessageRow> =
        messages::newest(&mut conn, true, SHOWN).await?.into_iter().map(|m| MessageRow::new(m, now)).collect();
    pending.reverse();
    let delivered =
        messages::newest(&mut conn, false, SHOWN).await?.into_iter().map(|m| MessageRow::new(m, now)).collect();
    let mut recipients: Vec<String> =
        agents::list(&mut conn, &ListFilter::default(), 2000).await?.into_iter().map(|a| a.name).collect();
    recipients.sort();
    recipients.push(OPERATOR.to_owned());
    let page = MailboxPage { chrome, pending, delivered, recipients };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("pending") => Ok(render(&page.as_pending())),
        Some("delivered") => Ok(render(&page.as_delivered())),
        Some(other) => Err(no_block(other)),
    }
}

#[derive(Debug, Deserialize)]
struct SendForm {
    to: String,
    body: String,
}

/// Sends a message as the operator.
#[tracing::instrument(skip_all, fields(to = %form.to), err(Debug))]
async fn send_one(State(state): State<AppState>, PageForm(form): PageForm<SendForm>) -> PageResult {
    send(&state, OPERATOR.to_owned(), &form.to, form.body).await?;
    Ok(see_other("/messages"))
}
