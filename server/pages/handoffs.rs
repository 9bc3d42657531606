//! The overview's "Needs a person" for the conductor: wish groups and wishes handed to `human`
//! (with the reason, the agent's last screen and summary, and what a person can do: answer the
//! agent, retry with a new agent, mark the group done, cancel the wish, hand the step back),
//! planned wishes waiting to be queued, wishes waiting for a person's review, and each
//! provider's state (at a usage limit until when). The actions are the API's use cases
//! ([`crate::app::conductor::handoff`], [`crate::app::groups`], [`crate::app::messages`]).

use axum::extract::{Path, State};
use axum::routing::post;
use axum::Router;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::app::conductor::handoff;
use crate::app::provider_status::{self, Readiness};
use crate::app::{agent_panes, groups, messages, Ctx};
use crate::db::agents::Agent;
use crate::db::tasks::Change;
use crate::db::{events, handoffs, wishes};
use crate::domain::message::OPERATOR;
use crate::domain::task::TaskEvent;
use crate::domain::wish::WishStatus;
use crate::http::AppState;
use crate::pages::view::{ago, iso, see_other, truncate, PageForm, PageResult};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/wishes/{slug}/groups/{key}/redispatch", post(redispatch))
        .route("/wishes/{slug}/groups/{key}/done", post(mark_done))
        .route("/wishes/{slug}/hand-back", post(hand_back))
        .route("/wishes/{slug}/answer", post(answer))
}

/// A step the conductor handed to a person: a group (`key` set) or a wish's own step.
#[derive(Clone)]
pub struct Handoff {
    pub slug: String,
    pub title: String,
    pub key: Option<String>,
    pub reason: String,
    pub since: String,
    /// The agent that had the step, its summary and the last lines of its pane (when it has one).
    pub agent: Option<String>,
    pub summary: Option<String>,
    pub screen: Option<String>,
}

/// A wish a person is waiting on for something else than a handoff.
pub struct WishLink {
    pub slug: String,
    pub title: String,
    pub since: String,
}

/// A provider, until when it is at a usage limit (none: available), and whether this node can
/// start its program and it can reach its model ([`provider_status`]).
pub struct ProviderState {
    pub name: String,
    pub until: Option<String>,
    pub until_iso: Option<String>,
    /// The program this node cannot find (`claude`, not installed): never "available".
    pub missing: Option<String>,
    /// What it lacks to reach its model (an API key, a login): "installed, not configured".
    pub unconfigured: Option<String>,
}

/// Everything of the conductor's that waits for a person.
#[derive(Default)]
pub struct Handoffs {
    pub steps: Vec<Handoff>,
    pub approvals: Vec<WishLink>,
    pub reviews: Vec<WishLink>,
    pub providers: Vec<ProviderState>,
}

impl Handoffs {
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty() && self.approvals.is_empty() && self.reviews.is_empty()
    }

    /// The hand-offs from their parts, as the overview read them: the steps ([`steps`]), the
    /// planned and executing wishes ([`waiting_wishes`]) and the providers at a usage limit.
    pub fn new(
        ctx: &Ctx,
        steps: Vec<Handoff>,
        (planned, executing): (Vec<wishes::Wish>, Vec<wishes::Wish>),
        limited: &[(String, DateTime<Utc>)],
        now: DateTime<Utc>,
        limit: usize,
    ) -> Handoffs {
        let link = |w: wishes::Wish| WishLink { since: ago(w.updated_at, now), slug: w.slug, title: w.title };
        let approvals = planned.into_iter().filter(|w| !w.held).map(link).collect();
        let reviews = executing.into_iter().filter(crate::app::needs::awaits_review).take(limit).map(link).collect();
        // Looked up on each view: a few stat calls, and an install or a login shows at once.
        let providers = provider_status::statuses(ctx)
            .into_iter()
            .map(|p| {
                let until = limited.iter().find(|(name, _)| *name == p.name).map(|(_, until)| *until);
                let detail = |readiness| p.detail.clone().filter(|_| p.status == readiness);
                ProviderState {
                    until: until.map(|t| format!("{} UTC", t.format("%Y-%m-%d %H:%M:%S"))),
                    until_iso: until.map(iso),
                    missing: p.program.clone().filter(|_| p.status == Readiness::NotInstalled),
                    unconfigured: detail(Readiness::NotConfigured),
                    name: p.name,
                }
            })
            .collect();
        Handoffs { steps, approvals, reviews, providers }
    }
}

/// The steps handed to a person: groups, then wishes' own steps, each read on a connection of its
/// own, at once.
pub async fn steps(ctx: &Ctx, now: DateTime<Utc>, limit: i64) -> PageResult<Vec<Handoff>> {
    let (groups, wishes) = tokio::try_join!(group_steps(ctx, now, limit), wish_steps(ctx, now, limit))?;
    Ok(groups.into_iter().chain(wishes).collect())
}

/// The planned wishes (up to `limit`) and the executing ones (which may wait for a review), read
/// at once.
pub async fn waiting_wishes(ctx: &Ctx, limit: i64) -> PageResult<(Vec<wishes::Wish>, Vec<wishes::Wish>)> {
    let read = |status: WishStatus, limit: i64| async move {
        PageResult::Ok(wishes::in_states(&mut *ctx.db.acquire().await?, &[status.as_str()], limit).await?)
    };
    tokio::try_join!(read(WishStatus::Planned, limit), read(WishStatus::Executing, 1000))
}

/// The groups handed to a person, each with why and the agent that had it.
async fn group_steps(ctx: &Ctx, now: DateTime<Utc>, limit: i64) -> PageResult<Vec<Handoff>> {
    let mut read = Vec::new();
    {
        let mut conn = ctx.db.acquire().await?;
        let conn = &mut *conn;
        for (task, slug) in handoffs::groups(&mut *conn, limit).await? {
            // The latest hand-off says why, and which agent had the group.
            let assigned = events::about(&mut *conn, &format!("task:{}", task.id), "task.assigned", 1000).await?;
            let last = assigned.iter().rev().find(|e| e.payload["assignee"] == crate::app::wish_lifecycle::HUMAN);
            let text = |field: &str| last.and_then(|e| e.payload[field].as_str()).map(str::to_owned);
            let agent = match text("previous") {
                Some(name) => crate::db::agents::by_name(&mut *conn, &name).await?,
                None => None,
            };
            let wish_title = wishes::get(&mut *conn, &slug).await?.map(|w| w.title).unwrap_or_default();
            let handoff = Handoff {
                title: format!("{} — group {}", wish_title, task.title),
                key: task.group_key.clone(),
                reason: text("reason").unwrap_or_else(|| "handed to a person".to_owned()),
                since: ago(task.updated_at, now),
                slug,
                agent: None,
                summary: None,
                screen: None,
            };
            read.push((agent, handoff));
        }
    }
    Ok(with_screens(ctx, read).await)
}

/// The wishes whose step (plan, review, merge) is handed to a person, each with its agent.
async fn wish_steps(ctx: &Ctx, now: DateTime<Utc>, limit: i64) -> PageResult<Vec<Handoff>> {
    let mut read = Vec::new();
    {
        let mut conn = ctx.db.acquire().await?;
        let conn = &mut *conn;
        for wish in handoffs::wishes(&mut *conn, limit).await? {
            // The step's agent: the newest of the wish's agents that had no group.
            let agent = handoffs::agents_of(&mut *conn, wish.id).await?.into_iter().find(|a| a.task_id.is_none());
            let handoff = Handoff {
                reason: wish.failure_reason.clone().unwrap_or_else(|| "handed to a person".to_owned()),
                since: ago(wish.updated_at, now),
                slug: wish.slug,
                title: wish.title,
                key: None,
                agent: None,
                summary: None,
                screen: None,
            };
            read.push((agent, handoff));
        }
    }
    Ok(with_screens(ctx, read).await)
}

/// The hand-offs with their agents' screens, read once the connection that found them went
/// back: reading a screen takes a connection of its own.
async fn with_screens(ctx: &Ctx, read: Vec<(Option<Agent>, Handoff)>) -> Vec<Handoff> {
    let mut steps = Vec::with_capacity(read.len());
    for (agent, handoff) in read {
        steps.push(step(ctx, agent.as_ref(), handoff).await);
    }
    steps
}

/// Lines of the agent's pane shown with a hand-off.
const SCREEN_LINES: usize = 15;

/// The hand-off with what its agent left: its summary and, while its pane is still there on this
/// node, the pane's last lines.
async fn step(ctx: &Ctx, agent: Option<&Agent>, mut handoff: Handoff) -> Handoff {
    let Some(agent) = agent else { return handoff };
    handoff.agent = Some(agent.name.clone());
    handoff.summary = agent.summary.as_deref().map(|s| truncate(s, 500));
    if agent.tmux_pane.is_some() {
        if let Ok(screen) = agent_panes::screen(ctx, &agent.name, 0).await {
            let lines: Vec<&str> = screen.text.trim_end().lines().collect();
            let tail = lines[lines.len().saturating_sub(SCREEN_LINES)..].join("\n");
            handoff.screen = Some(tail).filter(|t| !t.trim().is_empty());
        }
    }
    handoff
}

/// A person gives the group to a new agent.
#[tracing::instrument(skip_all, fields(slug = ?slug, key = ?key), err(Debug, level = "debug"))]
async fn redispatch(State(state): State<AppState>, Path((slug, key)): Path<(String, String)>) -> PageResult {
    handoff::redispatch(&state, &slug, &key).await?;
    Ok(see_other(&format!("/wishes/{slug}")))
}

/// A person marks the group done (they did or checked the work themselves).
#[tracing::instrument(skip_all, fields(slug = ?slug, key = ?key), err(Debug, level = "debug"))]
async fn mark_done(State(state): State<AppState>, Path((slug, key)): Path<(String, String)>) -> PageResult {
    let change = Change { result: Some("marked done by a person".to_owned()), ..Change::default() };
    groups::act_on(&state, &slug, &key, TaskEvent::Complete, change).await?;
    Ok(see_other(&format!("/wishes/{slug}")))
}

/// A person hands the wish's step back to the conductor, which runs it again with a new agent.
#[tracing::instrument(skip_all, fields(slug = ?slug), err(Debug, level = "debug"))]
async fn hand_back(State(state): State<AppState>, Path(slug): Path<String>) -> PageResult {
    handoff::hand_back(&state, &slug).await?;
    Ok(see_other(&format!("/wishes/{slug}")))
}

#[derive(Debug, Deserialize)]
struct AnswerForm {
    to: String,
    body: String,
}

/// A person answers the agent that had the step: a message from `operator`, delivered when it
/// is idle.
#[tracing::instrument(skip_all, fields(slug = ?slug, to = ?form.to), err(Debug, level = "debug"))]
async fn answer(
    State(state): State<AppState>,
    Path(slug): Path<String>,
    PageForm(form): PageForm<AnswerForm>,
) -> PageResult {
    messages::send(&state, OPERATOR.to_owned(), &form.to, form.body, None).await?;
    Ok(see_other(&format!("/wishes/{slug}")))
}
