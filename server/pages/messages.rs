//! `/messages`: the mailbox. Messages still waiting to be delivered (with their attempts and the
//! last attempt's error) and those delivered (and how that was confirmed), each a page at a time
//! ([`paging`](crate::pages::paging)), and a form to send one as the operator. Sending is the use
//! case [`crate::app::messages::send`], as for `POST /api/v1/messages`.

use askama::Template;
use axum::extract::State;
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::app::messages::send;
use crate::db::agents::{self, ListFilter};
use crate::db::messages::{self, Message};
use crate::db::sessions::Session;
use crate::domain::message::OPERATOR;
use crate::http::pagination::Position;
use crate::http::AppState;
use crate::pages::paging::{ListAt, PageLinks, Paged};
use crate::pages::view::{ago, iso, no_block, render, see_other, truncate, Chrome, PageForm, PageQuery, PageResult};

pub fn router() -> Router<AppState> {
    Router::new().route("/messages", get(mailbox).post(send_one))
}

/// At most this many messages of each kind are shown on a page.
const PAGE: i64 = 200;

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
    /// One page of them, oldest first: the order they are delivered in.
    pending: Vec<MessageRow>,
    pending_pages: PageLinks,
    /// One page of them, newest first.
    delivered: Vec<MessageRow>,
    delivered_pages: PageLinks,
    /// Who a message can be sent to.
    recipients: Vec<String>,
}

/// Each list's cursor: `?pending_before=` and `?delivered_before=` show its page older than it
/// (its newest page without it); a link of one list keeps the other's.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MailboxQuery {
    block: Option<String>,
    pending_before: Option<String>,
    delivered_before: Option<String>,
}

/// The page of pending (`pending`) or delivered messages before `cursor`, with its links.
async fn one_list(
    conn: &mut sqlx::PgConnection,
    pending: bool,
    cursor: Option<&str>,
    list: ListAt<'_>,
) -> PageResult<Paged<Message>> {
    let rows = messages::newest(conn, pending, list.before(cursor)?, PAGE + 1).await?;
    Ok(list.page(rows, PAGE, cursor, |m| Position { created_at: m.created_at, id: m.id }))
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn mailbox(
    State(state): State<AppState>,
    session: Session,
    PageQuery(query): PageQuery<MailboxQuery>,
) -> PageResult {
    let (pending_before, delivered_before) = (query.pending_before.as_deref(), query.delivered_before.as_deref());
    let keep_delivered: Vec<(&str, &str)> = delivered_before.map(|c| ("delivered_before", c)).into_iter().collect();
    let keep_pending: Vec<(&str, &str)> = pending_before.map(|c| ("pending_before", c)).into_iter().collect();
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "messages", "Mailbox").await?;
    let now = Utc::now();
    let at = |param, block, keep| ListAt { path: "/messages", param, block, keep };
    let pending =
        one_list(&mut conn, true, pending_before, at("pending_before", "pending", keep_delivered.as_slice())).await?;
    let delivered =
        one_list(&mut conn, false, delivered_before, at("delivered_before", "delivered", keep_pending.as_slice()))
            .await?;
    let mut recipients: Vec<String> =
        agents::list(&mut conn, &ListFilter::default(), 2000).await?.into_iter().map(|a| a.name).collect();
    recipients.sort();
    recipients.push(OPERATOR.to_owned());
    let page = MailboxPage {
        chrome,
        pending: pending.items.into_iter().rev().map(|m| MessageRow::new(m, now)).collect(),
        pending_pages: pending.links,
        delivered: delivered.items.into_iter().map(|m| MessageRow::new(m, now)).collect(),
        delivered_pages: delivered.links,
        recipients,
    };
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
#[tracing::instrument(skip_all, fields(to = ?form.to), err(Debug, level = "debug"))]
async fn send_one(State(state): State<AppState>, PageForm(form): PageForm<SendForm>) -> PageResult {
    send(&state, OPERATOR.to_owned(), &form.to, form.body, None).await?;
    Ok(see_other("/messages"))
}
