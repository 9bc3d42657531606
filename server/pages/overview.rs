//! `/`: what needs a person first (an agent asking permission or a question, an idle agent that
//! did not report its group, a task handed to a human, a merge queue entry handed to a person, with its files or reason), then agents by state, wishes in flight, the merge queue
//! (wishes pending merge), what agents' tokens cost (in all and per project) and the latest events.

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use chrono::Utc;

use crate::db::agents;
use crate::db::handoffs as handoffs_db;
use crate::db::sessions::Session;
use crate::db::{boards, events, merge_queue, tasks, wishes};
use crate::domain::agent::{provider_need, AgentState};
use crate::http::AppState;
use crate::pages::agents::AgentRow;
use crate::pages::events::EventRow;
use crate::pages::handoffs::{self, Handoffs};
use crate::pages::overview_cache::Progressing;
use crate::pages::view::{ago, no_block, render, BlockQuery, Chrome, PageQuery, PageResult};
use crate::pages::wishes::WishRow;

pub fn router() -> Router<AppState> {
    Router::new().route("/", get(overview))
}

/// One thing waiting for a person.
pub struct Need {
    pub what: &'static str,
    pub name: String,
    pub link: String,
    pub detail: String,
    pub state: &'static str,
    pub since: String,
    /// More words after the name (the provider's own, for a provider that needs something).
    pub note: String,
}

#[derive(Template)]
#[template(path = "overview.html", blocks = ["needs", "agents", "wishes", "merge_queue", "costs", "recent"])]
struct OverviewPage {
    chrome: Chrome,
    needs: Vec<Need>,
    handoffs: Handoffs,
    counts: Vec<(&'static str, String, i64)>,
    agents: Vec<AgentRow>,
    in_flight: Vec<WishRow>,
    merge_queue: Vec<WishRow>,
    /// Every agent's tokens and their cost, then each project's `(slug, in words)`.
    usage: crate::app::usage::UsageReport,
    project_costs: Vec<(String, String)>,
    events: Vec<EventRow>,
    /// bubblewrap is not installed on this node: its agents run unsandboxed.
    unsandboxed: bool,
}

const IN_FLIGHT: [&str; 4] = ["planned", "queued", "executing", "completed"];
const PENDING_MERGE: [&str; 1] = ["pending_merge"];
/// How many of each list are shown (the agents' list: as many as [`agents::at_a_glance`] reads, 50).
const SHOWN: i64 = 50;
/// How many of the latest events are listed.
const RECENT: i64 = 15;
/// The parts the live stream refreshes one at a time (`?block=`): each reads only its own.
const BLOCKS: [&str; 6] = ["needs", "agents", "wishes", "merge_queue", "costs", "recent"];

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn overview(
    State(state): State<AppState>,
    session: Session,
    PageQuery(query): PageQuery<BlockQuery>,
) -> PageResult {
    let block = query.block.as_deref();
    if let Some(other) = block.filter(|b| !BLOCKS.contains(b)) {
        return Err(no_block(other));
    }
    let shows = |name: &str| block.is_none_or(|b| b == name);
    // First: the live stream starts where the log stood before any part was read, so a change
    // while they are read is not missed. The same statement says which parts kept from earlier
    // requests still hold, and reads the latest events.
    let cache = &state.overview;
    let newest = if shows("recent") { RECENT } else { 0 };
    let changes = events::changes_since(&mut *state.db.acquire().await?, cache.oldest(), newest).await?;
    let chrome = Chrome::after(changes.head, &session, "overview", "Overview");
    let now = Utc::now();
    let ctx = &state.app;
    // The parts are independent: each reads on a connection of its own, all at once, so the
    // page waits for the slowest part rather than for the sum of their round trips.
    let agents = async {
        if !shows("needs") && !shows("agents") {
            return PageResult::Ok(Default::default());
        }
        let glance = || async { PageResult::Ok(agents::at_a_glance(&mut *state.db.acquire().await?).await?) };
        cache.read(&changes, &cache.agents, glance).await
    };
    let needs = async {
        if !shows("needs") {
            return PageResult::Ok(Default::default());
        }
        let human = cache.read(&changes, &cache.human_tasks, || async {
            let filter = tasks::ListFilter { assignee: Some("human".to_owned()), ..tasks::ListFilter::default() };
            PageResult::Ok(tasks::list(&mut *state.db.acquire().await?, &filter, 500).await?)
        });
        let cards = cache.read(&changes, &cache.cards, || async {
            PageResult::Ok(boards::waiting_on_a_person(&mut *state.db.acquire().await?, SHOWN).await?)
        });
        let handed = cache.read(&changes, &cache.handed, || async {
            let handed = merge_queue::Filter { needs_person: true, ..Default::default() };
            PageResult::Ok(merge_queue::list(&mut *state.db.acquire().await?, &handed, SHOWN).await?)
        });
        let unreported = cache.read(&changes, &cache.unreported, || async {
            PageResult::Ok(handoffs_db::idle_unreported(&mut *state.db.acquire().await?, SHOWN).await?)
        });
        // The conductor's hand-offs, in the needs too.
        let steps = cache.read(&changes, &cache.steps, || handoffs::steps(ctx, now, SHOWN));
        let waiting = cache.read(&changes, &cache.waiting_wishes, || handoffs::waiting_wishes(ctx, SHOWN));
        PageResult::Ok(Some(tokio::try_join!(human, cards, handed, steps, waiting, unreported)?))
    };
    let in_flight = async {
        if !shows("wishes") {
            return PageResult::Ok(Default::default());
        }
        cache.read(&changes, &cache.in_flight, || progressing(&state, &IN_FLIGHT)).await
    };
    let merge_queue = async {
        if !shows("merge_queue") {
            return PageResult::Ok(Default::default());
        }
        cache.read(&changes, &cache.merge_queue, || progressing(&state, &PENDING_MERGE)).await
    };
    let costs = async {
        if !shows("costs") {
            return PageResult::Ok(Default::default());
        }
        let costs = || async {
            let usage = async { PageResult::Ok(crate::app::usage::report(ctx, &Default::default()).await?) };
            let by_project =
                async { PageResult::Ok(crate::db::agent_usage::by_project(&mut *state.db.acquire().await?).await?) };
            let (usage, by_project) = tokio::try_join!(usage, by_project)?;
            let prices = state.providers.prices();
            let by_project = by_project.into_iter().map(|(slug, by_model)| (slug, prices.cost(&by_model).summary()));
            PageResult::Ok((usage, by_project.collect()))
        };
        cache.read(&changes, &cache.costs, costs).await
    };
    let recent = async {
        if !shows("recent") {
            return PageResult::Ok(Vec::new());
        }
        Ok(EventRow::load(&mut *state.db.acquire().await?, &changes.newest, now).await?)
    };
    let (glance, needs, in_flight, merge_queue, (usage, project_costs), events) =
        tokio::try_join!(agents, needs, in_flight, merge_queue, costs, recent)?;
    let (needs, handoffs) = match needs {
        Some((human, cards, handed, steps, waiting, unreported)) => {
            let handoffs = Handoffs::new(ctx, steps, waiting, &glance.at_limit, now, SHOWN as usize);
            let needs = asking_agents(&glance.pressing, now)
                .chain(provider_needs(&glance.failed, now))
                .chain(unreported_needs(unreported, now))
                .chain(others_needs(human, cards, handed, now))
                .collect();
            (needs, handoffs)
        }
        None => (Vec::new(), Handoffs::default()),
    };
    let agents = glance.pressing.iter().map(|a| AgentRow::new(a, now)).collect();
    let counts = AgentState::ALL
        .iter()
        .map(|s| {
            let n = glance.counts.iter().find(|(state, _)| state == s).map_or(0, |(_, n)| *n);
            (s.as_str(), crate::pages::view::words(s.as_str()), n)
        })
        .collect();
    let wish_rows = |(list, progress): Progressing| WishRow::with_progress(list, &progress, now);
    let in_flight = wish_rows(in_flight);
    // First in, first merged: the queue reads oldest first.
    let merge_queue = wish_rows(merge_queue).into_iter().rev().collect();
    let unsandboxed = !crate::providers::sandbox::bubblewrap_installed();
    let page = OverviewPage {
        chrome,
        needs,
        handoffs,
        counts,
        agents,
        in_flight,
        merge_queue,
        usage,
        project_costs,
        events,
        unsandboxed,
    };
    let response: Response = match block {
        Some("needs") => render(&page.as_needs()),
        Some("agents") => render(&page.as_agents()),
        Some("wishes") => render(&page.as_wishes()),
        Some("merge_queue") => render(&page.as_merge_queue()),
        Some("costs") => render(&page.as_costs()),
        Some("recent") => render(&page.as_recent()),
        _ => render(&page),
    };
    Ok(response)
}

/// Up to [`SHOWN`] wishes in `states`, newest first, with their groups' progress.
async fn progressing(state: &AppState, states: &[&str]) -> PageResult<Progressing> {
    let mut conn = state.db.acquire().await?;
    let list = wishes::in_states(&mut conn, states, SHOWN).await?;
    let ids: Vec<uuid::Uuid> = list.iter().map(|w| w.id).collect();
    let progress = wishes::progress(&mut conn, &ids).await?;
    Ok((list, progress))
}

/// The agents asking a person (from `pressing`, where they come first).
fn asking_agents(pressing: &[agents::Agent], now: chrono::DateTime<Utc>) -> impl Iterator<Item = Need> + '_ {
    pressing.iter().filter(|a| a.state.needs_person()).map(move |a| Need {
        what: "agent",
        name: a.name.clone(),
        link: format!("/agents/{}", a.name),
        detail: if a.state == AgentState::Permission { "asks permission" } else { "asks a question" }.to_owned(),
        state: a.state.as_str(),
        since: ago(a.last_activity.unwrap_or(a.updated_at), now),
        note: String::new(),
    })
}

/// Idle agents whose group or task is still open and unreported: their turn ended without the
/// report the conductor waits for.
fn unreported_needs(idle: Vec<handoffs_db::Unreported>, now: chrono::DateTime<Utc>) -> impl Iterator<Item = Need> {
    idle.into_iter().map(move |u| Need {
        what: "agent",
        link: format!("/agents/{}", u.agent),
        detail: "idle, not reported".to_owned(),
        state: AgentState::Idle.as_str(),
        since: ago(u.since, now),
        note: match u.wish {
            Some(wish) => format!("stopped without reporting group `{}` of wish `{wish}`", u.work),
            None => format!("stopped without reporting task “{}”", u.work),
        },
        name: u.agent,
    })
}

/// What else waits for a person besides agents and the conductor's hand-offs: tasks handed to a
/// human, cards in a person's column, merge queue entries no fix agent can take.
fn others_needs(
    human: Vec<tasks::Task>,
    cards: Vec<boards::WaitingCard>,
    handed: Vec<merge_queue::Entry>,
    now: chrono::DateTime<Utc>,
) -> impl Iterator<Item = Need> {
    // A wish's groups handed to a person are the conductor's hand-offs, listed with their actions.
    let human = human.into_iter().filter(|t| !t.status.is_terminal() && t.wish_id.is_none());
    let human = human.take(SHOWN as usize).map(move |t| Need {
        what: "task",
        name: t.title,
        link: t.board_id.map(|b| format!("/boards/{b}")).unwrap_or_else(|| "/boards".to_owned()),
        detail: "handed to a human".to_owned(),
        state: "human",
        since: ago(t.updated_at, now),
        note: String::new(),
    });
    // Cards in a `human` column (not the last): only a person moves them on.
    let cards = cards.into_iter().map(move |c| Need {
        what: "card",
        name: c.title,
        link: format!("/boards/{}", c.board_id),
        detail: format!("waits in `{}` for a person", c.column),
        state: "human",
        since: ago(c.updated_at, now),
        note: String::new(),
    });
    // Merge queue entries no fix agent can take (the cap is reached, or only a person can help).
    let handed = handed.into_iter().map(move |e| Need {
        what: "wish",
        link: "/merge-queue".to_owned(),
        detail: match e.state {
            crate::domain::merge_queue::EntryState::Conflict => {
                format!("merge conflict in {}", e.conflict_files.join(", "))
            }
            _ => format!("merge failed: {}", e.failure_reason.as_deref().unwrap_or("see the entry")),
        },
        state: e.state.as_str(),
        since: ago(e.updated_at, now),
        note: String::new(),
        name: e.wish,
    });
    human.chain(cards).chain(handed)
}

/// Providers that stopped agents for want of something from the user (a login, an API key,
/// network access), one line per provider and need: the provider's own words and its agents.
fn provider_needs(failed: &[agents::Agent], now: chrono::DateTime<Utc>) -> Vec<Need> {
    let mut needs: Vec<(Need, Vec<String>)> = Vec::new();
    for agent in failed {
        let Some(words) = agent.failure_reason.as_deref() else { continue };
        let Some(need) = provider_need(words) else { continue };
        let detail = format!("needs {need}");
        match needs.iter_mut().find(|(n, _)| n.name == agent.provider && n.detail == detail) {
            Some((_, names)) => names.push(agent.name.clone()),
            None => {
                let need = Need {
                    what: "provider",
                    name: agent.provider.clone(),
                    link: format!("/agents/{}", agent.name),
                    detail,
                    state: AgentState::Error.as_str(),
                    since: ago(agent.updated_at, now),
                    note: format!("“{words}”"),
                };
                needs.push((need, vec![agent.name.clone()]));
            }
        }
    }
    needs
        .into_iter()
        .map(|(mut need, names)| {
            need.note = format!("{} (agents: {})", need.note, names.join(", "));
            need
        })
        .collect()
}
