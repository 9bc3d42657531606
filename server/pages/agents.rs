//! `/agents`: every agent with its state, provider, task and last activity (those waiting for a
//! person first); `/agents/{name}`: one agent with a live view of its pane, its prompt's choices
//! as buttons, a box to type into it, and suspend / resume / kill / interrupt.

use askama::Template;
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::app::agent_panes::MenuOption;
use crate::app::{self, agent_panes};
use crate::db::agents::{self, Agent, ListFilter};
use crate::db::events;
use crate::db::sessions::Session;
use crate::domain::agent::{AgentEvent, AgentState};
use crate::domain::agent_kind::{AgentKind, AgentRole};
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::events::EventRow;
use crate::pages::live::topic;
use crate::pages::view::{
    ago, filled, iso, no_block, render, see_other, truncate, words, BlockQuery, Chrome, PageForm, PagePath, PageQuery,
    PageResult,
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/agents", get(list).post(create))
        .route("/agents/{name}/delete", post(delete))
        .route("/agents/{name}", get(detail))
        .route("/agents/{name}/input", post(input))
        .route("/agents/{name}/answer", post(answer))
        .route("/agents/{name}/{action}", post(act))
}

/// An agent as a row of a table.
pub struct AgentRow {
    pub name: String,
    pub state: &'static str,
    pub state_label: String,
    pub needs_person: bool,
    pub provider: String,
    pub task: String,
    pub last_activity: Option<DateTime<Utc>>,
    pub activity_ago: String,
    pub activity_iso: Option<String>,
}

impl AgentRow {
    pub fn new(agent: &Agent, now: DateTime<Utc>) -> AgentRow {
        AgentRow {
            name: agent.name.clone(),
            state: agent.state.as_str(),
            state_label: words(agent.state.as_str()),
            needs_person: agent.state.needs_person(),
            provider: agent.provider.clone(),
            task: agent.task.as_deref().map(|t| truncate(t, 80)).unwrap_or_default(),
            last_activity: agent.last_activity,
            activity_ago: agent.last_activity.map(|t| ago(t, now)).unwrap_or_default(),
            activity_iso: agent.last_activity.map(iso),
        }
    }
}

#[derive(Template)]
#[template(path = "agents/list.html", blocks = ["agents"])]
struct ListPage {
    chrome: Chrome,
    agents: Vec<AgentRow>,
    filter: Option<String>,
    states: Vec<(&'static str, String)>,
    /// What the registration form offers.
    projects: Vec<String>,
    providers: Vec<String>,
    kinds: Vec<&'static str>,
    roles: Vec<&'static str>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    block: Option<String>,
    state: Option<String>,
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn list(State(state): State<AppState>, session: Session, PageQuery(query): PageQuery<ListQuery>) -> PageResult {
    let filter = crate::http::query::filter::<AgentState>("state", query.state.as_deref().filter(|s| !s.is_empty()))?;
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "agents", "Agents").await?;
    let now = Utc::now();
    let all = agents::list(&mut conn, &ListFilter { state: filter, ..ListFilter::default() }, 2000).await?;
    let mut rows: Vec<AgentRow> = all.iter().map(|a| AgentRow::new(a, now)).collect();
    rows.sort_by_key(|a| (!a.needs_person, std::cmp::Reverse(a.last_activity)));
    let states = AgentState::ALL.iter().map(|s| (s.as_str(), words(s.as_str()))).collect();
    let projects = crate::db::projects::list(&mut conn, None, 1000).await?.into_iter().map(|p| p.slug).collect();
    let page = ListPage {
        chrome,
        agents: rows,
        filter: filter.map(|s| s.as_str().to_owned()),
        states,
        projects,
        providers: state.providers.current().names().into_iter().map(str::to_owned).collect(),
        kinds: AgentKind::ALL.iter().map(AgentKind::as_str).collect(),
        roles: AgentRole::ALL.iter().map(AgentRole::as_str).collect(),
    };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("agents") => Ok(render(&page.as_agents())),
        Some(other) => Err(no_block(other)),
    }
}

/// What the pane shows, or why it cannot be shown.
struct PaneView {
    text: Option<String>,
    unavailable: Option<String>,
}

/// What an asking agent asks and its options as one-tap buttons (`agents/_ask.html`), wherever
/// it is shown: the overview, its wish's page, its own page.
pub struct AskView {
    pub agent: String,
    pub asked: Option<String>,
    pub options: Vec<MenuOption>,
    /// The page an answer comes back to.
    pub back: String,
}

#[derive(Template)]
#[template(path = "agents/detail.html", blocks = ["summary", "prompt", "pane", "history"])]
struct DetailPage {
    chrome: Chrome,
    /// Its own events, newest first.
    history: Vec<EventRow>,
    history_url: String,
    agent: Agent,
    row: AgentRow,
    topic: String,
    created: String,
    pane: PaneView,
    asking: bool,
    /// While it asks: what, and its options.
    ask: Option<AskView>,
    live: bool,
    resumable: bool,
    /// Why it is in its state, in a sentence.
    why: String,
    /// The tokens it used, from its transcript, and their cost.
    usage: crate::app::usage::UsageReport,
}

/// The agent's own events shown on its page.
const HISTORY: i64 = 50;

/// Lines of history above the visible screen shown in the pane view.
const PANE_HISTORY: u32 = 40;

#[tracing::instrument(skip_all, fields(agent = ?name), err(Debug, level = "debug"))]
async fn detail(
    State(state): State<AppState>,
    session: Session,
    PagePath(name): PagePath<String>,
    PageQuery(query): PageQuery<BlockQuery>,
) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "agents", format!("Agent {name}")).await?;
    let agent =
        agents::by_name(&mut conn, &name).await?.ok_or_else(|| ApiError::NotFound(format!("no agent `{name}`")))?;
    let now = Utc::now();
    let history = events::history(&mut conn, &agents::subject(&agent.name), HISTORY).await?;
    let history = EventRow::load(&mut conn, &history, now).await?;
    let scope = crate::db::agent_usage::Scope { agent: Some(agent.id), ..Default::default() };
    let usage = crate::app::usage::report(&mut conn, &state.providers, &scope).await?;
    drop(conn);
    let pane = match agent_panes::screen(&state.app, &name, PANE_HISTORY).await {
        Ok(screen) => PaneView { text: Some(screen.text.trim_end().to_owned()), unavailable: None },
        Err(app::Error::Conflict { detail, .. }) => PaneView { text: None, unavailable: Some(detail) },
        Err(other) => return Err(other.into()),
    };
    let ask = if agent.state.needs_person() {
        let ask = app::needs::ask(&state.app, &agent).await?;
        let back = format!("/agents/{}", agent.name);
        Some(AskView { agent: agent.name.clone(), asked: ask.asked, options: ask.options, back })
    } else {
        None
    };
    let why = crate::app::agent_states::explain(&state.app, &name).await?.summary;
    let page = DetailPage {
        chrome,
        why,
        usage,
        history,
        history_url: format!("/agents/{}?block=history", agent.name),
        row: AgentRow::new(&agent, now),
        topic: topic("agent", &agent.name),
        created: ago(agent.created_at, now),
        asking: agent.state.needs_person(),
        ask,
        live: agent.state.is_live(),
        resumable: matches!(agent.state, AgentState::Suspended | AgentState::Error),
        pane,
        agent,
    };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("summary") => Ok(render(&page.as_summary())),
        Some("prompt") => Ok(render(&page.as_prompt())),
        Some("pane") => Ok(render(&page.as_pane())),
        Some("history") => Ok(render(&page.as_history())),
        Some(other) => Err(no_block(other)),
    }
}

#[derive(Debug, Deserialize)]
struct InputForm {
    text: String,
    /// A checkbox: present when ticked.
    submit: Option<String>,
}

#[tracing::instrument(skip_all, fields(agent = ?name), err(Debug, level = "debug"))]
async fn input(
    State(state): State<AppState>,
    PagePath(name): PagePath<String>,
    PageForm(form): PageForm<InputForm>,
) -> PageResult {
    agent_panes::input(&state.app, &name, &form.text, form.submit.is_some()).await?;
    Ok(see_other(&format!("/agents/{name}")))
}

#[derive(Debug, Deserialize)]
struct AnswerForm {
    /// The number of the chosen option (its button).
    #[serde(default)]
    option: Option<String>,
    /// Free text (the words field).
    #[serde(default)]
    answer: Option<String>,
    /// The page the answer was given on (the overview, a wish's page), where it comes back to;
    /// a path on this site only, else the agent's page.
    #[serde(default)]
    back: Option<String>,
}

/// Answers a permission or question prompt: an option's button chooses it on the menu with key
/// presses checked on the screen (a menu ignores its number typed as text); words are typed,
/// then Enter.
#[tracing::instrument(skip_all, fields(agent = ?name), err(Debug, level = "debug"))]
async fn answer(
    State(state): State<AppState>,
    PagePath(name): PagePath<String>,
    PageForm(form): PageForm<AnswerForm>,
) -> PageResult {
    let back = match form.back.as_deref() {
        Some(back) => crate::pages::login::safe_next(Some(back)),
        None => format!("/agents/{name}"),
    };
    if let Some(option) = form.option.as_deref() {
        let option = option.trim().parse::<u32>().ok().filter(|n| *n > 0);
        let option = option.ok_or_else(|| ApiError::validation("option", "must be an option's number"))?;
        agent_panes::choose(&state.app, &name, option).await?;
        return Ok(see_other(&back));
    }
    let answer = form.answer.as_deref().unwrap_or_default().trim();
    if answer.is_empty() {
        return Err(ApiError::validation("answer", "choose an option or type an answer").into());
    }
    agent_panes::input(&state.app, &name, answer, true).await?;
    Ok(see_other(&back))
}

#[tracing::instrument(skip_all, fields(agent = ?name, action = ?action), err(Debug, level = "debug"))]
async fn act(State(state): State<AppState>, PagePath((name, action)): PagePath<(String, String)>) -> PageResult {
    match action.as_str() {
        "interrupt" => {
            agent_panes::interrupt(&state.app, &name).await?;
        }
        "suspend" => {
            agent_panes::stop(&state.app, &name, AgentEvent::Suspend, "suspended from the dashboard").await?;
        }
        "resume" => {
            agent_panes::stop(&state.app, &name, AgentEvent::Resume, "resumed from the dashboard").await?;
        }
        "kill" => {
            agent_panes::stop(&state.app, &name, AgentEvent::Fail, "killed from the dashboard").await?;
        }
        other => return Err(ApiError::NotFound(format!("no agent action `{other}`")).into()),
    }
    Ok(see_other(&format!("/agents/{name}")))
}

#[derive(Debug, Deserialize)]
struct AgentForm {
    /// Empty: a name made from the kind.
    name: String,
    project: String,
    provider: String,
    kind: String,
    role: String,
    /// Empty: none.
    task: String,
}

/// Registers an agent as the API does; a worker claims it and opens its pane.
#[tracing::instrument(skip_all, fields(project = ?form.project), err(Debug, level = "debug"))]
async fn create(State(state): State<AppState>, PageForm(form): PageForm<AgentForm>) -> PageResult {
    let kind = crate::http::query::filter::<AgentKind>("kind", Some(form.kind.as_str()))?.unwrap_or(AgentKind::Worker);
    let role =
        crate::http::query::filter::<AgentRole>("role", Some(form.role.as_str()))?.unwrap_or(AgentRole::Engineer);
    let input = app::agents::NewAgentInput {
        name: filled(&form.name),
        project: form.project,
        kind,
        role,
        provider: form.provider,
        task: filled(&form.task),
        wish: None,
        group: None,
        workspace: None,
        branch: None,
        team: None,
    };
    let agent = app::agents::create(&state.app, input, None).await?;
    Ok(see_other(&format!("/agents/{}", agent.name)))
}

/// Removes a stopped agent from the registry (a live one is refused: stop it first).
#[tracing::instrument(skip_all, fields(agent = ?name), err(Debug, level = "debug"))]
async fn delete(State(state): State<AppState>, PagePath(name): PagePath<String>) -> PageResult {
    app::agents::delete(&state.app, &name, false).await?;
    Ok(see_other("/agents"))
}
