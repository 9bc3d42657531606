//! `/teams`: every team with its project, state, leader and size; `/teams/{name}`: one team's
//! members, branches and state, and its chat, a page at a time ([`paging`](crate::pages::paging)),
//! where the operator can post. The chat post is the use case
//! [`crate::app::messages::post_to_team`], as for `POST /api/v1/teams/{name}/chat`.

use askama::Template;
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use chrono::Utc;
use serde::Deserialize;

use crate::app::messages::post_to_team;
use crate::app::teams::not_found;
use crate::db::sessions::Session;
use crate::db::team_chat as chat;
use crate::db::teams::{self, ListFilter, Team};
use crate::domain::message::OPERATOR;
use crate::domain::team::TeamStatus;
use crate::http::pagination::Position;
use crate::http::AppState;
use crate::pages::live::topic;
use crate::pages::paging::{ListAt, PageLinks};
use crate::pages::view::{
    ago, iso, no_block, render, see_other, words, BlockQuery, Chrome, PageForm, PagePath, PageQuery, PageResult,
};

pub fn router() -> Router<AppState> {
    Router::new().route("/teams", get(list)).route("/teams/{name}", get(detail)).route("/teams/{name}/chat", post(say))
}

/// At most this many teams are listed, and this many of a chat's posts shown on a page.
const MAX_TEAMS: i64 = 500;
const CHAT_PAGE: i64 = 200;

#[derive(Template)]
#[template(path = "teams/list.html", blocks = ["teams"])]
struct ListPage {
    chrome: Chrome,
    /// Each team with its state in words.
    teams: Vec<(Team, String)>,
    /// The projects a new team may belong to.
    projects: Vec<String>,
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn list(State(state): State<AppState>, session: Session, PageQuery(query): PageQuery<BlockQuery>) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "teams", "Teams").await?;
    let teams = teams::list(&mut conn, &ListFilter::default(), MAX_TEAMS)
        .await?
        .into_iter()
        .map(|t| {
            let label = words(t.status.as_str());
            (t, label)
        })
        .collect();
    let projects = crate::db::projects::list(&mut conn, None, 1000).await?.into_iter().map(|p| p.slug).collect();
    let page = ListPage { chrome, teams, projects };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("teams") => Ok(render(&page.as_teams())),
        Some(other) => Err(no_block(other)),
    }
}

/// One chat post as shown.
struct PostView {
    from: String,
    body: String,
    ago: String,
    iso: String,
}

#[derive(Template)]
#[template(path = "teams/detail.html", blocks = ["head", "chat"])]
struct DetailPage {
    chrome: Chrome,
    team: Team,
    status_label: String,
    /// Every team status, for the status form.
    statuses: Vec<(&'static str, String)>,
    /// The topics of the team's own events and of its chat's posts.
    team_topic: String,
    chat_topic: String,
    /// One page of the chat, oldest first (it reads top to bottom, newest last).
    posts: Vec<PostView>,
    /// The older page, the newest, and (on the newest) the chat's live refresh.
    chat_pages: PageLinks,
}

/// `?before=<cursor>`: the chat's page older than the cursor (the newest page without it).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct DetailQuery {
    block: Option<String>,
    before: Option<String>,
}

#[tracing::instrument(skip_all, fields(team = ?name), err(Debug, level = "debug"))]
async fn detail(
    State(state): State<AppState>,
    session: Session,
    PagePath(name): PagePath<String>,
    PageQuery(query): PageQuery<DetailQuery>,
) -> PageResult {
    let path = format!("/teams/{name}");
    let list = ListAt { path: &path, param: "before", block: "chat", keep: &[] };
    let before = list.before(query.before.as_deref())?;
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "teams", format!("Team {name}")).await?;
    let team = teams::get(&mut conn, &name).await?.ok_or_else(|| not_found(&name))?;
    let rows = chat::newest(&mut conn, &team, before, CHAT_PAGE + 1).await?;
    let shown =
        list.page(rows, CHAT_PAGE, query.before.as_deref(), |p| Position { created_at: p.created_at, id: p.id });
    let now = Utc::now();
    let posts = shown
        .items
        .into_iter()
        .rev()
        .map(|p| PostView { ago: ago(p.created_at, now), iso: iso(p.created_at), from: p.from, body: p.body })
        .collect();
    let page = DetailPage {
        chrome,
        status_label: words(team.status.as_str()),
        statuses: TeamStatus::ALL.iter().map(|s| (s.as_str(), words(s.as_str()))).collect(),
        team_topic: topic("team", &team.name),
        chat_topic: topic("chat", &team.name),
        posts,
        chat_pages: shown.links,
        team,
    };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("head") => Ok(render(&page.as_head())),
        Some("chat") => Ok(render(&page.as_chat())),
        Some(other) => Err(no_block(other)),
    }
}

#[derive(Debug, Deserialize)]
struct ChatForm {
    body: String,
}

/// Posts to the team's chat as the operator.
#[tracing::instrument(skip_all, fields(team = ?name), err(Debug, level = "debug"))]
async fn say(
    State(state): State<AppState>,
    PagePath(name): PagePath<String>,
    PageForm(form): PageForm<ChatForm>,
) -> PageResult {
    let team = {
        let mut conn = state.db.acquire().await?;
        teams::get(&mut conn, &name).await?.ok_or_else(|| not_found(&name))?
    };
    post_to_team(&state, &team, OPERATOR, &form.body).await?;
    Ok(see_other(&format!("/teams/{name}")))
}
