//! `/`: what needs a person first (an agent asking permission or a question, a task handed to a
//! human, a merge queue entry handed to a person, with its files or reason), then agents by state, wishes in flight, the merge queue
//! (wishes pending merge), what agents' tokens cost (in all and per project) and the latest events.

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use chrono::Utc;

use crate::db::agents::{self, ListFilter};
use crate::db::sessions::Session;
use crate::db::tasks;
use crate::db::{events, wishes};
use crate::domain::agent::{provider_need, AgentState};
use crate::domain::wish::WishStatus;
use crate::http::AppState;
use crate::pages::agents::AgentRow;
use crate::pages::events::EventRow;
use crate::pages::handoffs::Handoffs;
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
}

const IN_FLIGHT: [&str; 4] = ["planned", "queued", "executing", "completed"];
const SHOWN: i64 = 50;
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
    // while they are read is not missed.
    let chrome = {
        let mut conn = state.db.acquire().await?;
        Chrome::new(&mut conn, &session, "overview", "Overview").await?
    };
    let now = Utc::now();
    // The parts are independent: each reads on a connection of its own, all at once, so the
    // page waits for the slowest part rather than for the sum of their round trips.
    let part = |name: &'static str| {
        let state = &state;
        async move {
            if shows(name) {
                Ok(Some(state.db.acquire().await?))
            } else {
                PageResult::Ok(None)
            }
        }
    };
    // Both the needs and the agents read the most pressing agents: once, by whichever asks first.
    let pressing = tokio::sync::OnceCell::new();
    let needs = async {
        if !shows("needs") {
            return PageResult::Ok(Vec::new());
        }
        let asking = async {
            let mut conn = state.db.acquire().await?;
            PageResult::Ok(pressing.get_or_try_init(|| agents::most_pressing(&mut conn, SHOWN)).await?)
        };
        let (asking, others) = tokio::try_join!(asking, needs(&state, now))?;
        Ok(asking_agents(asking, now).chain(others).collect())
    };
    // The conductor's hand-offs, in the needs too.
    let handoffs = async {
        if !shows("needs") {
            return PageResult::Ok(Handoffs::default());
        }
        Handoffs::load(&state, now, SHOWN).await
    };
    let agent_rows = async {
        let Some(mut conn) = part("agents").await? else { return PageResult::Ok((Vec::new(), Vec::new())) };
        // Those blocked on a person first, then the most recently active.
        let pressing =
            async { PageResult::Ok(pressing.get_or_try_init(|| agents::most_pressing(&mut conn, SHOWN)).await?) };
        let counts = async { PageResult::Ok(agents::count_all_by_state(&mut *state.db.acquire().await?).await?) };
        let (pressing, counts) = tokio::try_join!(pressing, counts)?;
        let rows = pressing.iter().map(|a| AgentRow::new(a, now)).collect();
        let counts = AgentState::ALL
            .iter()
            .map(|s| {
                let n = counts.iter().find(|(state, _)| state == s).map_or(0, |(_, n)| *n);
                (s.as_str(), crate::pages::view::words(s.as_str()), n)
            })
            .collect();
        Ok((rows, counts))
    };
    let in_flight = async {
        let Some(mut conn) = part("wishes").await? else { return PageResult::Ok(Vec::new()) };
        let flying = wishes::in_states(&mut conn, &IN_FLIGHT, SHOWN).await?;
        Ok(WishRow::load(&mut conn, flying, now).await?)
    };
    let merge_queue = async {
        let Some(mut conn) = part("merge_queue").await? else { return PageResult::Ok(Vec::new()) };
        let pending = wishes::in_states(&mut conn, &[WishStatus::PendingMerge.as_str()], SHOWN).await?;
        let mut rows = WishRow::load(&mut conn, pending, now).await?;
        // First in, first merged: the queue reads oldest first.
        rows.reverse();
        Ok(rows)
    };
    let costs = async {
        if !shows("costs") {
            return PageResult::Ok((Default::default(), Vec::new()));
        }
        let usage = async { PageResult::Ok(crate::app::usage::report(&state.app, &Default::default()).await?) };
        let by_project =
            async { PageResult::Ok(crate::db::agent_usage::by_project(&mut *state.db.acquire().await?).await?) };
        let (usage, by_project) = tokio::try_join!(usage, by_project)?;
        let prices = state.providers.prices();
        Ok((usage, by_project.into_iter().map(|(slug, by_model)| (slug, prices.cost(&by_model).summary())).collect()))
    };
    let recent = async {
        let Some(mut conn) = part("recent").await? else { return PageResult::Ok(Vec::new()) };
        let newest = events::newest(&mut conn, None, None, None, 15).await?;
        Ok(EventRow::load(&mut conn, &newest, now).await?)
    };
    let (needs, handoffs, (agents, counts), in_flight, merge_queue, (usage, project_costs), events) =
        tokio::try_join!(needs, handoffs, agent_rows, in_flight, merge_queue, costs, recent)?;
    let page =
        OverviewPage { chrome, needs, handoffs, counts, agents, in_flight, merge_queue, usage, project_costs, events };
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

/// What else waits for a person besides the conductor's hand-offs: providers that need
/// something, tasks handed to a human, cards in a person's column, merge queue entries no fix
/// agent can take. Each is read on a connection of its own, all at once: under load every
/// round trip waits its turn for a core, so the page waits for the slowest, not for the sum.
async fn needs(state: &AppState, now: chrono::DateTime<Utc>) -> PageResult<Vec<Need>> {
    let providers = async { Ok(provider_needs(&mut *state.db.acquire().await?, now).await?) };
    let human = async {
        let filter = tasks::ListFilter { assignee: Some("human".to_owned()), ..tasks::ListFilter::default() };
        PageResult::Ok(tasks::list(&mut *state.db.acquire().await?, &filter, 500).await?)
    };
    let cards = async { Ok(crate::db::boards::waiting_on_a_person(&mut *state.db.acquire().await?, SHOWN).await?) };
    let handed = async {
        let handed = crate::db::merge_queue::Filter { needs_person: true, ..Default::default() };
        PageResult::Ok(crate::db::merge_queue::list(&mut *state.db.acquire().await?, &handed, SHOWN).await?)
    };
    let (mut needs, human, cards, handed) = tokio::try_join!(providers, human, cards, handed)?;
    // A wish's groups handed to a person are the conductor's hand-offs, listed with their actions.
    let human = human.iter().filter(|t| !t.status.is_terminal() && t.wish_id.is_none());
    needs.extend(human.take(SHOWN as usize).map(|t| Need {
        what: "task",
        name: t.title.clone(),
        link: t.board_id.map(|b| format!("/boards/{b}")).unwrap_or_else(|| "/boards".to_owned()),
        detail: "handed to a human".to_owned(),
        state: "human",
        since: ago(t.updated_at, now),
        note: String::new(),
    }));
    // Cards in a `human` column (not the last): only a person moves them on.
    needs.extend(cards.into_iter().map(|c| Need {
        what: "card",
        name: c.title,
        link: format!("/boards/{}", c.board_id),
        detail: format!("waits in `{}` for a person", c.column),
        state: "human",
        since: ago(c.updated_at, now),
        note: String::new(),
    }));
    // Merge queue entries no fix agent can take (the cap is reached, or only a person can help).
    needs.extend(handed.iter().map(|e| Need {
        what: "wish",
        name: e.wish.clone(),
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
    }));
    Ok(needs)
}

/// Providers that stopped agents for want of something from the user (a login, an API key,
/// network access), one line per provider and need: the provider's own words and its agents.
async fn provider_needs(conn: &mut sqlx::PgConnection, now: chrono::DateTime<Utc>) -> sqlx::Result<Vec<Need>> {
    let failed =
        agents::list(conn, &ListFilter { state: Some(AgentState::Error), ..ListFilter::default() }, 500).await?;
    let mut needs: Vec<(Need, Vec<String>)> = Vec::new();
    for agent in &failed {
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
    Ok(needs
        .into_iter()
        .map(|(mut need, names)| {
            need.note = format!("{} (agents: {})", need.note, names.join(", "));
            need
        })
        .collect())
}
