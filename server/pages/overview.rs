//! `/`: what needs a person first (an agent asking permission or a question, an idle agent that
//! did not report its group, a task handed to a human, a merge queue entry handed to a person, with its files or reason), then agents by state, wishes in flight, the merge queue
//! (wishes pending merge), what agents' tokens cost (in all and per project) and the latest events.

use askama::Template;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use axum::Extension;
use axum::Router;
use chrono::Utc;

use crate::app::needs;
use crate::db::agents;
use crate::db::handoffs as handoffs_db;
use crate::db::sessions::Session;
use crate::db::{boards, events, merge_queue, tasks, wishes};
use crate::domain::agent::AgentState;
use crate::http::AppState;
use crate::pages::agents::{AgentRow, AskView};
use crate::pages::events::EventRow;
use crate::pages::first_run::FirstRun;
use crate::pages::handoffs::{self, Handoffs};
use crate::pages::overview_cache::{OverviewCache, Progressing};
use crate::pages::view::{ago, no_block, render, BlockQuery, Chrome, PageQuery, PageResult};
use crate::pages::wishes::WishRow;

/// The overview, with the cache of its parts that this router's requests share.
pub fn router() -> Router<AppState> {
    Router::new().route("/", get(overview)).layer(Extension(Arc::new(OverviewCache::default())))
}

/// One thing waiting for a person, as a row of "Needs you".
pub struct NeedRow {
    pub need: needs::Need,
    /// What it is about, in a word (`agent`, `provider`, `task`, `card`, `wish`).
    pub what: &'static str,
    /// Its badge's style.
    pub state: &'static str,
    pub since: String,
    /// For an agent that asks: what it asks and its options as buttons.
    pub ask: Option<AskView>,
}

impl NeedRow {
    /// `here`: the page the row is on, where an answer comes back to.
    pub fn new(need: needs::Need, now: chrono::DateTime<Utc>, here: &str) -> NeedRow {
        use needs::NeedKind as K;
        let (what, state) = match need.kind {
            K::Permission => ("agent", AgentState::Permission.as_str()),
            K::Question => ("agent", AgentState::Question.as_str()),
            K::Unreported => ("agent", AgentState::Idle.as_str()),
            K::Provider => ("provider", AgentState::Error.as_str()),
            K::Task => ("task", "human"),
            K::Card => ("card", "human"),
            K::Handoff | K::Approval | K::Review => ("wish", "human"),
            K::Merge => ("wish", "conflict"),
            K::Stalled => ("wish", "error"),
        };
        let ask = matches!(need.kind, K::Permission | K::Question).then(|| AskView {
            agent: need.name.clone(),
            asked: need.asked.clone(),
            options: need.options.clone(),
            back: here.to_owned(),
        });
        NeedRow { what, state, since: ago(need.since, now), ask, need }
    }

    /// More words after the name (a provider's own, why an agent stopped), for rows that ask
    /// nothing with buttons.
    pub fn note(&self) -> &str {
        if self.ask.is_some() {
            return "";
        }
        self.need.asked.as_deref().unwrap_or_default()
    }
}

#[derive(Template)]
#[template(path = "overview.html", blocks = ["needs", "agents", "wishes", "merge_queue", "costs", "recent"])]
struct OverviewPage {
    chrome: Chrome,
    needs: Vec<NeedRow>,
    /// An agent asks: the list is read again every few seconds too (its options are drawn after
    /// the state changes).
    asking: bool,
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
    /// The first steps, until each is done (read for the whole page only).
    first_run: Option<FirstRun>,
    /// Why `providers.toml` as it is now is not used (the last good providers are).
    providers_error: Option<String>,
}

/// A draft is in flight too: a planner may be planning it.
const IN_FLIGHT: [&str; 5] = ["draft", "planned", "queued", "executing", "completed"];
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
    Extension(cache): Extension<Arc<OverviewCache>>,
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
            let usage = async {
                let mut conn = state.db.acquire().await?;
                PageResult::Ok(crate::app::usage::report(&mut conn, &state.providers, &Default::default()).await?)
            };
            let by_project =
                async { PageResult::Ok(crate::db::agent_usage::by_project(&mut *state.db.acquire().await?).await?) };
            let (usage, by_project) = tokio::try_join!(usage, by_project)?;
            let providers = state.providers.current();
            let prices = providers.prices();
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
    let first_run = async {
        match block {
            Some(_) => PageResult::Ok(None),
            None => FirstRun::read(&state).await,
        }
    };
    let (glance, needs, in_flight, merge_queue, (usage, project_costs), events, first_run) =
        tokio::try_join!(agents, needs, in_flight, merge_queue, costs, recent, first_run)?;
    let (needs, handoffs) = match needs {
        Some((human, cards, handed, steps, waiting, unreported)) => {
            let handoffs = Handoffs::new(ctx, steps, waiting, &glance.at_limit, now, SHOWN as usize);
            let mut needs = needs::asking(ctx, &glance.pressing).await?;
            needs.extend(needs::providers(&glance.failed));
            needs.extend(needs::unreported(unreported, &glance.pressing));
            needs.extend(needs::others(human, cards, handed, SHOWN as usize));
            needs.extend(needs::stalled(ctx).await?);
            (needs.into_iter().map(|n| NeedRow::new(n, now, "/")).collect(), handoffs)
        }
        None => (Vec::new(), Handoffs::default()),
    };
    let asking = needs.iter().any(|n: &NeedRow| n.ask.is_some());
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
        asking,
        handoffs,
        counts,
        agents,
        in_flight,
        merge_queue,
        usage,
        project_costs,
        events,
        unsandboxed,
        first_run,
        providers_error: state.providers.error(),
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
