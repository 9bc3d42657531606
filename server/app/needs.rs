//! What needs a person, as the overview's "Needs you" lists it and `GET /api/v1/needs` returns
//! it: agents asking permission or a question (with what they ask and the options their screen
//! offers), providers that need something from the user, idle agents that did not report, steps
//! the conductor handed to a person, plans to approve and wishes to review, tasks handed to a
//! human, cards in a person's column and merge queue entries only a person can take on.
//!
//! A prompt's options are read from the agent's screen on this node, as the agent page reads
//! them; the answer is a key press checked on the screen ([`super::agent_panes::choose`]).

use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use super::agent_panes::{self, MenuOption};
use super::{Ctx, Result};
use crate::db::agents::{self, Agent};
use crate::db::handoffs::{self, Unreported};
use crate::db::{boards, events, merge_queue, stalled_steps, tasks, wishes};
use crate::domain::agent::{provider_need, AgentState};
use crate::domain::merge_queue::EntryState;
use crate::domain::wish::{WishPhase, WishStatus};

/// What kind of thing waits for a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum NeedKind {
    /// An agent asks permission (a command, an edit): answer with one of `options`.
    Permission,
    /// An agent asks a question: answer with one of `options`, or in words.
    Question,
    /// A provider stopped agents for want of something from the user (a login, an API key).
    Provider,
    /// An idle agent whose group or task is open and unreported.
    Unreported,
    /// A wish's group or step the conductor handed to a person (an agent stuck, a cap reached).
    Handoff,
    /// A planned wish waiting for a person to queue it.
    Approval,
    /// A wish waiting for a person's review.
    Review,
    /// A standalone task handed to a human.
    Task,
    /// A card in a board column only a person moves on.
    Card,
    /// A merge queue entry no fix agent can take.
    Merge,
    /// A step the server keeps retrying in vain (git refusing to merge a wish's groups).
    Stalled,
}

impl NeedKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            NeedKind::Permission => "permission",
            NeedKind::Question => "question",
            NeedKind::Provider => "provider",
            NeedKind::Unreported => "unreported",
            NeedKind::Handoff => "handoff",
            NeedKind::Approval => "approval",
            NeedKind::Review => "review",
            NeedKind::Task => "task",
            NeedKind::Card => "card",
            NeedKind::Merge => "merge",
            NeedKind::Stalled => "stalled",
        }
    }
}

/// One thing waiting for a person.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"kind": "permission", "name": "clever-fox", "detail": "asks permission",
    "agent": "clever-fox", "wish": "login", "group": "api", "task_id": null,
    "asked": "Bash command\nrm -rf build\nDo you want to proceed?",
    "options": [{"option": 1, "label": "Yes", "highlighted": true}, {"option": 2, "label": "No", "highlighted": false}],
    "link": "/agents/clever-fox", "since": "2026-11-22T09:30:00Z"}))]
pub struct Need {
    pub kind: NeedKind,
    /// What it is about: an agent's or provider's name, a task's or card's title, a wish's slug.
    pub name: String,
    /// What waits, in a few words (the overview's badge: "asks permission", "merge conflict in …").
    pub detail: String,
    /// The agent that asks, or that had the step.
    pub agent: Option<String>,
    /// The wish it belongs to (its slug), and the group.
    pub wish: Option<String>,
    pub group: Option<String>,
    /// The standalone task or card it is about.
    pub task_id: Option<Uuid>,
    /// What is asked, in the asker's words: the command and question a prompt shows (else what
    /// its hook said), why a step was handed over, what a provider said.
    pub asked: Option<String>,
    /// A prompt's options, as the agent's screen shows them: answer with
    /// `POST /agents/{agent}/input` `{"option": N}`. Empty when the screen cannot be read from
    /// this node, shows none yet, or for other kinds.
    pub options: Vec<MenuOption>,
    /// The dashboard page where it is answered.
    pub link: String,
    /// Since when it waits.
    pub since: DateTime<Utc>,
    /// Its place in the list (the agent's, task's, wish's or entry's id), for pagination.
    #[serde(skip)]
    pub id: Uuid,
}

impl Need {
    fn new(kind: NeedKind, id: Uuid, name: String, detail: String, link: String, since: DateTime<Utc>) -> Need {
        Need {
            kind,
            name,
            detail,
            agent: None,
            wish: None,
            group: None,
            task_id: None,
            asked: None,
            options: Vec::new(),
            link,
            since,
            id,
        }
    }
}

/// What an asking agent asks and the options it offers.
#[derive(Debug, Clone, Default)]
pub struct Ask {
    pub asked: Option<String>,
    pub options: Vec<MenuOption>,
}

/// What `agent` asks, read from its screen on this node ([`crate::detect::prompt::asked`]);
/// without a readable screen, or before the dialog is drawn, what its latest change to asking
/// said (the hook's "permission to use Bash: rm -rf build", the screen's line).
pub async fn ask(ctx: &Ctx, agent: &Agent) -> Result<Ask> {
    if !agent.state.needs_person() {
        return Ok(Ask::default());
    }
    let (asked, options) = match agent_panes::screen(ctx, &agent.name, 0).await {
        Ok(screen) => (screen.asked, screen.options),
        Err(_) => (None, Vec::new()),
    };
    let asked = match asked {
        Some(asked) => Some(asked),
        None => last_asked(ctx, &agent.name).await?,
    };
    Ok(Ask { asked, options })
}

/// What the agent's latest change of state said it asks, if that change was to asking.
async fn last_asked(ctx: &Ctx, name: &str) -> Result<Option<String>> {
    let mut conn = ctx.db.acquire().await?;
    let newest = events::history(&mut conn, &agents::subject(name), 50).await?;
    let text = |e: &events::Event, key: &str| e.payload.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    Ok(newest
        .iter()
        .find(|e| e.event_type == "agent.state_changed")
        .filter(|e| matches!(e.payload["to"].as_str(), Some("permission" | "question")))
        .and_then(|e| text(e, "detail").or_else(|| text(e, "line")))
        .filter(|t| !t.trim().is_empty()))
}

/// The agents asking a person (of `agents`, those in `permission` or `question`), each with
/// what it asks and its wish, read at once.
pub async fn asking(ctx: &Ctx, agents: &[Agent]) -> Result<Vec<Need>> {
    let asking: Vec<&Agent> = agents.iter().filter(|a| a.state.needs_person()).collect();
    let wish_ids: Vec<Uuid> = asking.iter().filter_map(|a| a.wish_id).collect();
    let wishes =
        if wish_ids.is_empty() { Vec::new() } else { wishes::by_ids(&mut *ctx.db.acquire().await?, &wish_ids).await? };
    let asks = futures_util::future::try_join_all(asking.iter().map(|a| ask(ctx, a))).await?;
    let mut needs = Vec::with_capacity(asking.len());
    for (agent, ask) in asking.into_iter().zip(asks) {
        let (kind, detail) = match agent.state {
            AgentState::Permission => (NeedKind::Permission, "asks permission"),
            _ => (NeedKind::Question, "asks a question"),
        };
        let since = agent.last_activity.unwrap_or(agent.updated_at);
        let link = format!("/agents/{}", agent.name);
        let mut need = Need::new(kind, agent.id, agent.name.clone(), detail.to_owned(), link, since);
        need.agent = Some(agent.name.clone());
        need.wish = agent.wish_id.and_then(|id| wishes.iter().find(|w| w.id == id)).map(|w| w.slug.clone());
        need.asked = ask.asked;
        need.options = ask.options;
        needs.push(need);
    }
    Ok(needs)
}

/// Providers that stopped agents for want of something from the user (a login, an API key,
/// network access), one per provider and need: the provider's own words and its agents.
pub fn providers(failed: &[Agent]) -> Vec<Need> {
    let mut needs: Vec<(Need, Vec<String>)> = Vec::new();
    for agent in failed {
        let Some(words) = agent.failure_reason.as_deref() else { continue };
        let Some(need) = provider_need(words) else { continue };
        let detail = format!("needs {need}");
        match needs.iter_mut().find(|(n, _)| n.name == agent.provider && n.detail == detail) {
            Some((_, names)) => names.push(agent.name.clone()),
            None => {
                let link = format!("/agents/{}", agent.name);
                let mut need =
                    Need::new(NeedKind::Provider, agent.id, agent.provider.clone(), detail, link, agent.updated_at);
                need.agent = Some(agent.name.clone());
                need.asked = Some(format!("“{words}”"));
                needs.push((need, vec![agent.name.clone()]));
            }
        }
    }
    needs
        .into_iter()
        .map(|(mut need, names)| {
            need.asked = need.asked.map(|words| format!("{words} (agents: {})", names.join(", ")));
            need
        })
        .collect()
}

/// Idle agents whose group or task is still open and unreported: their turn ended without the
/// report the conductor waits for. `ids` finds each agent's id (its place in the list).
pub fn unreported(idle: Vec<Unreported>, ids: &[Agent]) -> impl Iterator<Item = Need> + '_ {
    idle.into_iter().map(move |u| {
        let id = ids.iter().find(|a| a.name == u.agent).map_or(Uuid::nil(), |a| a.id);
        let link = format!("/agents/{}", u.agent);
        let mut need = Need::new(NeedKind::Unreported, id, u.agent.clone(), "idle, not reported".into(), link, u.since);
        need.asked = Some(match &u.wish {
            Some(wish) => format!("stopped without reporting group `{}` of wish `{wish}`", u.work),
            None => format!("stopped without reporting task “{}”", u.work),
        });
        if u.wish.is_some() {
            need.group = Some(u.work.clone());
        }
        need.wish = u.wish;
        need.agent = Some(u.agent);
        need
    })
}

/// Tasks handed to a human (a wish's groups are the conductor's hand-offs, listed apart), cards
/// in a person's column, merge queue entries no fix agent can take.
pub fn others(
    human: Vec<tasks::Task>,
    cards: Vec<boards::WaitingCard>,
    handed: Vec<merge_queue::Entry>,
    limit: usize,
) -> impl Iterator<Item = Need> {
    let human = human.into_iter().filter(|t| !t.status.is_terminal() && t.wish_id.is_none());
    let human = human.take(limit).map(|t| {
        let link = t.board_id.map(|b| format!("/boards/{b}")).unwrap_or_else(|| "/boards".to_owned());
        let mut need = Need::new(NeedKind::Task, t.id, t.title, "handed to a human".into(), link, t.updated_at);
        need.task_id = Some(t.id);
        need.asked = t.question;
        need
    });
    let cards = cards.into_iter().map(|c| {
        let detail = format!("waits in `{}` for a person", c.column);
        let mut need =
            Need::new(NeedKind::Card, c.task_id, c.title, detail, format!("/boards/{}", c.board_id), c.updated_at);
        need.task_id = Some(c.task_id);
        need
    });
    let handed = handed.into_iter().map(|e| {
        let detail = match e.state {
            EntryState::Conflict => format!("merge conflict in {}", e.conflict_files.join(", ")),
            _ => format!("merge failed: {}", e.failure_reason.as_deref().unwrap_or("see the entry")),
        };
        let mut need = Need::new(NeedKind::Merge, e.id, e.wish.clone(), detail, "/merge-queue".into(), e.updated_at);
        need.wish = Some(e.wish);
        need
    });
    human.chain(cards).chain(handed)
}

/// How many tries in vain (about 15 s with the waits between them) make a step a person's to see.
const STALLED_AFTER_ATTEMPTS: i32 = 4;

/// Steps the server keeps retrying in vain, in git's words: merging a wish's reported groups, a
/// merge queue's merge.
pub async fn stalled(ctx: &Ctx) -> Result<Vec<Need>> {
    let mut conn = ctx.db.acquire().await?;
    let steps = stalled_steps::failing(&mut conn, STALLED_AFTER_ATTEMPTS, READ).await?;
    let ids: Vec<Uuid> = steps.iter().filter_map(|s| s.subject.strip_prefix("wish:")?.parse().ok()).collect();
    let wishes = if ids.is_empty() { Vec::new() } else { wishes::by_ids(&mut conn, &ids).await? };
    Ok(steps
        .into_iter()
        .filter_map(|s| {
            if let Some(queue) = s.subject.strip_prefix("merge_queue:") {
                let (project, target) = queue.split_once(':')?;
                let detail = format!("merging into `{target}` keeps failing ({} tries)", s.attempts);
                let name = format!("merge queue of `{target}`");
                let mut need =
                    Need::new(NeedKind::Stalled, project.parse().ok()?, name, detail, "/merge-queue".into(), s.since);
                need.asked = Some(s.error);
                return Some(need);
            }
            let wish = wishes.iter().find(|w| stalled_steps::wish_integration(w.id) == s.subject)?;
            let detail = format!("merging its groups keeps failing ({} tries)", s.attempts);
            let link = format!("/wishes/{}", wish.slug);
            let mut need = Need::new(NeedKind::Stalled, wish.id, wish.slug.clone(), detail, link, s.since);
            need.asked = Some(s.error);
            need.wish = Some(wish.slug.clone());
            Some(need)
        })
        .collect())
}

/// Whether a wish in `executing` waits for a person's review.
pub fn awaits_review(wish: &wishes::Wish) -> bool {
    wish.phase == WishPhase::HumanReview && wish.assignee.is_none()
}

/// The conductor's steps handed to a person, plans to approve and wishes to review.
async fn conductor(ctx: &Ctx, limit: i64) -> Result<Vec<Need>> {
    let mut conn = ctx.db.acquire().await?;
    let mut needs = Vec::new();
    for (task, slug) in handoffs::groups(&mut conn, limit).await? {
        let assigned = events::about(&mut conn, &format!("task:{}", task.id), "task.assigned", 1000).await?;
        let last = assigned.iter().rev().find(|e| e.payload["assignee"] == super::wish_lifecycle::HUMAN);
        let text = |field: &str| last.and_then(|e| e.payload[field].as_str()).map(str::to_owned);
        let link = format!("/wishes/{slug}");
        let mut need =
            Need::new(NeedKind::Handoff, task.id, task.title, "handed to a person".into(), link, task.updated_at);
        need.agent = text("previous");
        need.asked = text("reason");
        need.group = task.group_key;
        need.wish = Some(slug);
        needs.push(need);
    }
    // A wish's own step (plan, review, merge) handed to a person, a plan to queue, a review.
    let of_wish = |kind: NeedKind, wish: wishes::Wish, detail: &str, page: &str| {
        let link = format!("/wishes/{}{page}", wish.slug);
        let mut need = Need::new(kind, wish.id, wish.slug.clone(), detail.to_owned(), link, wish.updated_at);
        need.asked = wish.failure_reason.filter(|_| kind == NeedKind::Handoff);
        need.wish = Some(wish.slug);
        need
    };
    for wish in handoffs::wishes(&mut conn, limit).await? {
        needs.push(of_wish(NeedKind::Handoff, wish, "handed to a person", ""));
    }
    let planned = wishes::in_states(&mut conn, &[WishStatus::Planned.as_str()], limit).await?;
    for wish in planned.into_iter().filter(|w| !w.held) {
        needs.push(of_wish(NeedKind::Approval, wish, "plan waits for approval", ""));
    }
    let executing = wishes::in_states(&mut conn, &[WishStatus::Executing.as_str()], 1000).await?;
    for wish in executing.into_iter().filter(awaits_review) {
        needs.push(of_wish(NeedKind::Review, wish, "waits for your review", "#changes"));
    }
    Ok(needs)
}

/// How many of each part are read for the list.
const READ: i64 = 1000;

/// Everything that needs a person, longest waiting first (then by id, the list's order for
/// pagination).
#[tracing::instrument(skip_all, err(level = "debug"))]
pub async fn list(ctx: &Ctx) -> Result<Vec<Need>> {
    let mut conn = ctx.db.acquire().await?;
    let in_state = |state| agents::ListFilter { state: Some(state), ..agents::ListFilter::default() };
    let mut asking_agents = agents::list(&mut conn, &in_state(AgentState::Permission), READ).await?;
    asking_agents.extend(agents::list(&mut conn, &in_state(AgentState::Question), READ).await?);
    let failed = agents::list(&mut conn, &in_state(AgentState::Error), READ).await?;
    let filter = tasks::ListFilter { assignee: Some("human".to_owned()), ..tasks::ListFilter::default() };
    let human = tasks::list(&mut conn, &filter, READ).await?;
    let cards = boards::waiting_on_a_person(&mut conn, READ).await?;
    let handed = merge_queue::Filter { needs_person: true, ..Default::default() };
    let handed = merge_queue::list(&mut conn, &handed, READ).await?;
    let idle = handoffs::idle_unreported(&mut conn, READ).await?;
    let idle_agents =
        if idle.is_empty() { Vec::new() } else { agents::list(&mut conn, &in_state(AgentState::Idle), 10_000).await? };
    drop(conn);
    let mut needs = asking(ctx, &asking_agents).await?;
    needs.extend(providers(&failed));
    needs.extend(unreported(idle, &idle_agents));
    needs.extend(conductor(ctx, READ).await?);
    needs.extend(stalled(ctx).await?);
    needs.extend(others(human, cards, handed, READ as usize));
    needs.sort_by_key(|n| (n.since, n.id));
    Ok(needs)
}
