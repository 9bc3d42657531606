//! `/wishes`: every wish with its lifecycle state and progress; `/wishes/{slug}`: one wish with its
//! plan drawn as a graph (each group's state, arrows from dependencies), its reviews, its
//! blockers, a conflict prediction for its branch, and the lifecycle actions that are legal now.
//! The actions are the use cases the API calls too ([`crate::app::wishes`], [`crate::app::groups`]).

use askama::Template;
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use sqlx::PgConnection;

use crate::app::groups;
use crate::app::wish_lifecycle::{detail as wish_detail, find};
use crate::db::agents;
use crate::db::sessions::Session;
use crate::db::tasks::Change;
use crate::db::wishes::{self, Blocker, Wish};
use crate::db::{events, projects};
use crate::domain::agent_kind::AgentRole;
use crate::domain::project::Planning;
use crate::domain::task::{transition as task_transition, TaskEvent};
use crate::domain::wish::{transition, WishEvent, WishStatus};
use crate::git::conflicts::{self, Outcome};
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::dag::{self, Dag};
use crate::pages::live::topic;
use crate::pages::view::{ago, iso, no_block, render, see_other, words, Chrome, PagePath, PageQuery, PageResult};
use crate::pages::wish_conductor::ConductorView;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/wishes", get(list))
        .route("/wishes/{slug}", get(detail))
        .route("/wishes/{slug}/conflicts", get(conflicts_part))
        .route("/wishes/{slug}/actions/{action}", post(act))
        .route("/wishes/{slug}/groups/{key}/actions/{action}", post(act_on_group))
}

/// A wish as a row of a table.
pub struct WishRow {
    pub slug: String,
    pub title: String,
    pub status: &'static str,
    pub status_label: String,
    pub held: bool,
    pub done: i64,
    pub total: i64,
    pub updated_ago: String,
    pub updated_iso: String,
}

impl WishRow {
    /// Rows for these wishes, with how far each one's groups have got (one query for all).
    pub async fn load(conn: &mut PgConnection, list: Vec<Wish>, now: DateTime<Utc>) -> Result<Vec<WishRow>, ApiError> {
        let ids: Vec<uuid::Uuid> = list.iter().map(|w| w.id).collect();
        let progress = wishes::progress(conn, &ids).await?;
        Ok(WishRow::with_progress(list, &progress, now))
    }

    /// The rows of `list`, given each wish's `(groups done, groups)` by id.
    pub fn with_progress(
        list: Vec<Wish>,
        progress: &std::collections::HashMap<uuid::Uuid, (i64, i64)>,
        now: DateTime<Utc>,
    ) -> Vec<WishRow> {
        list.into_iter()
            .map(|w| {
                let (done, total) = progress.get(&w.id).copied().unwrap_or((0, 0));
                WishRow {
                    status: w.status.as_str(),
                    status_label: words(w.status.as_str()),
                    held: w.held,
                    done,
                    total,
                    updated_ago: ago(w.updated_at, now),
                    updated_iso: iso(w.updated_at),
                    slug: w.slug,
                    title: w.title,
                }
            })
            .collect()
    }
}

#[derive(Template)]
#[template(path = "wishes/list.html", blocks = ["wishes"])]
struct ListPage {
    chrome: Chrome,
    wish_rows: Vec<WishRow>,
    filter: Option<String>,
    states: Vec<(&'static str, String)>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    block: Option<String>,
    status: Option<String>,
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn list(State(state): State<AppState>, session: Session, PageQuery(query): PageQuery<ListQuery>) -> PageResult {
    let filter = crate::http::query::filter::<WishStatus>("status", query.status.as_deref().filter(|s| !s.is_empty()))?;
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "wishes", "Wishes").await?;
    let states: Vec<&str> = match filter {
        Some(s) => vec![s.as_str()],
        None => WishStatus::ALL.iter().map(|s| s.as_str()).collect(),
    };
    let found = wishes::in_states(&mut conn, &states, 500).await?;
    let wish_rows = WishRow::load(&mut conn, found, Utc::now()).await?;
    let states = WishStatus::ALL.iter().map(|s| (s.as_str(), words(s.as_str()))).collect();
    let page = ListPage { chrome, wish_rows, filter: filter.map(|s| s.as_str().to_owned()), states };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("wishes") => Ok(render(&page.as_wishes())),
        Some(other) => Err(no_block(other)),
    }
}

/// A group as a row under the graph.
struct GroupRow {
    key: String,
    title: String,
    status: &'static str,
    status_label: String,
    depends_on: String,
    iterations: String,
    result: String,
    /// Its page.
    task_id: uuid::Uuid,
    /// The agent working on it (a live one first), linked to its page.
    agent: Option<String>,
    /// What its agents' tokens cost, in words; empty when none were reported.
    cost: String,
    /// `(action, label)` legal now; none unless the wish is executing (groups move only then).
    actions: Vec<(&'static str, &'static str)>,
}

/// What a person can do to a group from the wish page: start it by hand, complete or fail it
/// for an agent that cannot, retry it.
const GROUP_ACTIONS: [(&str, &str); 4] =
    [("start", "Start"), ("complete", "Complete"), ("fail", "Fail"), ("retry", "Retry")];

fn group_event(action: &str) -> Option<TaskEvent> {
    Some(match action {
        "start" => TaskEvent::Start,
        "complete" => TaskEvent::Complete,
        "fail" => TaskEvent::Fail,
        "retry" => TaskEvent::Retry { unmet_dependencies: 0 },
        _ => return None,
    })
}

/// One recorded review.
struct ReviewRow {
    verdict: String,
    notes: String,
    at: String,
}

/// A lifecycle action the wish allows now.
struct Action {
    name: &'static str,
    label: &'static str,
    style: &'static str,
    /// The question asked before it is taken, for an action that stops agents.
    confirm: Option<&'static str>,
}

#[derive(Template)]
#[template(path = "wishes/detail.html", blocks = ["head", "needs", "conductor", "plan", "reviews"])]
struct DetailPage {
    chrome: Chrome,
    /// Its agents asking a person, with what they ask and their options.
    needs: Vec<crate::pages::overview::NeedRow>,
    wish: Wish,
    project: String,
    status_label: String,
    /// htmx triggers: the wish's own events and its groups' (which name the wish by id).
    triggers: String,
    blockers: Vec<Blocker>,
    /// Merging its reported groups keeps failing: why, and since when.
    stalled: Option<Stalled>,
    actions: Vec<Action>,
    groups: Vec<GroupRow>,
    dag: Dag,
    reviews: Vec<ReviewRow>,
    /// The planner agent at work on the draft's plan.
    planner: Option<String>,
    /// What the plan part says while there is no plan and no planner at work.
    no_plan: &'static str,
    conductor: ConductorView,
    /// Its agents' tokens and their cost.
    usage: crate::app::usage::UsageReport,
}

/// A step that keeps failing, as the wish's head says it.
struct Stalled {
    error: String,
    attempts: i32,
    since: String,
}

/// The actions offered, in this order, when the lifecycle allows them.
const ACTIONS: [(&str, &str, &str); 9] = [
    ("plan", "Plan", "primary"),
    ("queue", "Queue", "primary"),
    ("start", "Start", "primary"),
    ("submit", "Submit for merge", "primary"),
    ("resume", "Resume", "primary"),
    ("hold", "Hold", ""),
    ("release", "Release", "primary"),
    ("interrupt", "Interrupt", ""),
    ("cancel", "Cancel", "danger"),
];

/// What a person is asked before an action that ends or parks the wish's agents.
fn confirmation(action: &str) -> Option<&'static str> {
    match action {
        "cancel" => Some("Cancel this wish? Its agents are stopped; it can be resumed later."),
        "hold" => Some("Hold this wish? Its agents are suspended until it is released."),
        _ => None,
    }
}

fn event_for(action: &str) -> Option<WishEvent> {
    Some(match action {
        "plan" => WishEvent::Plan,
        "queue" => WishEvent::Queue,
        "start" => WishEvent::Start,
        "submit" => WishEvent::SubmitForMerge,
        "resume" => WishEvent::Resume { to: None },
        "hold" => WishEvent::Hold,
        "release" => WishEvent::Release,
        "interrupt" => WishEvent::Interrupt,
        "cancel" => WishEvent::Cancel,
        _ => return None,
    })
}

#[tracing::instrument(skip_all, fields(slug = ?slug), err(Debug, level = "debug"))]
async fn detail(
    State(state): State<AppState>,
    session: Session,
    PagePath(slug): PagePath<String>,
    PageQuery(query): PageQuery<crate::pages::view::BlockQuery>,
) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "wishes", format!("Wish {slug}")).await?;
    let wish = find(&mut conn, &slug).await?;
    let snapshot = wishes::snapshot(&mut conn, &wish).await?;
    // The domain says which actions are legal now; the page offers exactly those.
    let actions = ACTIONS
        .iter()
        .filter(|(name, _, _)| event_for(name).is_some_and(|e| transition(&snapshot, &e).is_ok()))
        .map(|&(name, label, style)| Action { name, label, style, confirm: confirmation(name) })
        .collect();
    let (project, repo, target, config) = project_of(&mut conn, wish.project_id)
        .await?
        .map(|p| (p.location().to_owned(), p))
        .map(|(repo, p)| (p.slug, repo, p.target_branch, p.conductor_config))
        .unwrap_or_default();
    let reviews = events::about(&mut conn, &wishes::subject(&wish), "wish.reviewed", 200)
        .await?
        .iter()
        .map(|e| ReviewRow {
            verdict: e.payload.get("verdict").and_then(|v| v.as_str()).unwrap_or("?").to_owned(),
            notes: e.payload.get("notes").and_then(|v| v.as_str()).unwrap_or("").to_owned(),
            at: ago(e.created_at, Utc::now()),
        })
        .collect();
    let full = wish_detail(&mut conn, wish).await?;
    let repo_dir = crate::app::repository::local_dir(&state.data_dir, &repo);
    let repos = (repo.as_str(), &*repo_dir.to_string_lossy());
    let conductor = ConductorView::load(&mut conn, &full.wish, &full.groups, &project, repos, &target).await?;
    let executing = full.wish.status == WishStatus::Executing;
    let filter = agents::ListFilter { project_id: Some(full.wish.project_id), ..agents::ListFilter::default() };
    let mut workers: Vec<agents::Agent> =
        agents::list(&mut conn, &filter, 2000).await?.into_iter().filter(|a| a.wish_id == Some(full.wish.id)).collect();
    // The live agent of a group first, then the latest one.
    workers.sort_by_key(|a| (!a.state.is_live(), std::cmp::Reverse(a.created_at)));
    let scope = crate::db::agent_usage::Scope { wish: Some(full.wish.id), ..Default::default() };
    let usage = crate::app::usage::report(&mut conn, &state.providers, &scope).await?;
    let group_usage = crate::db::agent_usage::by_group(&mut conn, full.wish.id).await?;
    // Given back before the agents' screens are read: that takes connections of its own.
    drop(conn);
    let here = format!("/wishes/{}", full.wish.slug);
    let needs = crate::app::needs::asking(&state.app, &workers).await?;
    let needs = needs.into_iter().map(|n| crate::pages::overview::NeedRow::new(n, Utc::now(), &here)).collect();
    let providers = state.providers.current();
    let prices = providers.prices();
    let dag = dag::layout(&full.groups);
    // The table lists the groups in the drawing's order.
    let mut listed: Vec<&wishes::Group> = full.groups.iter().collect();
    listed.sort_by_key(|g| dag.nodes.iter().position(|n| n.key == g.key));
    let groups = listed
        .into_iter()
        .map(|g| GroupRow {
            key: g.key.clone(),
            title: g.title.clone(),
            status: g.status.as_str(),
            status_label: words(g.status.as_str()),
            depends_on: g.depends_on.join(", "),
            iterations: format!("{} of {}", g.iterations, g.max_iterations),
            result: g.result.clone().unwrap_or_default(),
            task_id: g.task_id,
            agent: workers.iter().find(|a| a.task_id == Some(g.task_id)).map(|a| a.name.clone()),
            cost: group_usage.get(&g.task_id).map(|u| prices.cost(u).summary()).unwrap_or_default(),
            actions: GROUP_ACTIONS
                .iter()
                .filter(|(action, _)| {
                    executing && group_event(action).is_some_and(|e| task_transition(g.status, &e).is_ok())
                })
                .copied()
                .collect(),
        })
        .collect();
    let planner = workers
        .iter()
        .find(|a| a.role == AgentRole::Planner && a.state.is_live() && !a.ready_for_cleanup)
        .map(|a| a.name.clone());
    let no_plan = if full.wish.status != WishStatus::Draft {
        "This wish has no plan."
    } else if config.planning == Planning::Agent && !full.wish.description.trim().is_empty() {
        "A planner agent plans this wish from its description: it starts in a moment."
    } else {
        "This wish has no plan yet: give its groups with Edit the plan."
    };
    let page = DetailPage {
        chrome,
        needs,
        project,
        planner,
        no_plan,
        status_label: words(full.wish.status.as_str()),
        triggers: format!("sse:{}, sse:{}", topic("wish", &full.wish.slug), topic("wish", &full.wish.id.to_string())),
        blockers: full.blocked_by,
        stalled: full.stalled.map(|s| Stalled {
            error: s.error,
            attempts: s.attempts,
            since: s.since.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        }),
        actions,
        dag,
        groups,
        reviews,
        conductor,
        usage,
        wish: full.wish,
    };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("head") => Ok(render(&page.as_head())),
        Some("needs") => Ok(render(&page.as_needs())),
        Some("conductor") => Ok(render(&page.as_conductor())),
        Some("plan") => Ok(render(&page.as_plan())),
        Some("reviews") => Ok(render(&page.as_reviews())),
        Some(other) => Err(no_block(other)),
    }
}

pub(super) async fn project_of(conn: &mut PgConnection, id: uuid::Uuid) -> Result<Option<projects::Project>, ApiError> {
    Ok(projects::list(conn, None, 10_000).await?.into_iter().find(|p| p.id == id))
}

#[tracing::instrument(skip_all, fields(slug = ?slug, action = ?action), err(Debug, level = "debug"))]
async fn act(State(state): State<AppState>, PagePath((slug, action)): PagePath<(String, String)>) -> PageResult {
    let event = event_for(&action).ok_or_else(|| ApiError::NotFound(format!("no wish action `{action}`")))?;
    if event == WishEvent::SubmitForMerge {
        crate::app::merge_queue::submit(&state, &slug).await?;
    } else {
        crate::app::wishes::lifecycle(&state, &slug, event, None).await?;
    }
    Ok(see_other(&format!("/wishes/{slug}")))
}

#[tracing::instrument(skip_all, fields(slug = ?slug, key = ?key, action = ?action), err(Debug, level = "debug"))]
async fn act_on_group(
    State(state): State<AppState>,
    PagePath((slug, key, action)): PagePath<(String, String, String)>,
) -> PageResult {
    let event = group_event(&action).ok_or_else(|| ApiError::NotFound(format!("no group action `{action}`")))?;
    // A failure says who failed it; the agent's own failures say why.
    let result = (event == TaskEvent::Fail).then(|| "failed by a person from the dashboard".to_owned());
    let change = Change { result, ..Change::default() };
    groups::act_on(&state, &slug, &key, event, change).await?;
    Ok(see_other(&format!("/wishes/{slug}#group-{key}")))
}

/// One line of the prediction.
struct Prediction {
    against: String,
    outcome: &'static str,
    detail: String,
}

#[derive(Template)]
#[template(path = "wishes/conflicts.html")]
struct ConflictsPart {
    branch: Option<String>,
    predictions: Vec<Prediction>,
    /// Why there is nothing to predict, when there is not.
    nothing: &'static str,
}

/// Wishes whose branches are compared with this one's.
const IN_FLIGHT: [&str; 5] = ["queued", "executing", "completed", "pending_merge", "conflict"];
/// At most this many other branches are trial-merged per request.
const MAX_OTHERS: usize = 10;

/// The conflict prediction, fetched after the page has loaded: it runs git.
#[tracing::instrument(skip_all, fields(slug = ?slug), err(Debug, level = "debug"))]
async fn conflicts_part(State(state): State<AppState>, PagePath(slug): PagePath<String>) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let wish = find(&mut conn, &slug).await?;
    let project = project_of(&mut conn, wish.project_id).await?;
    let others: Vec<Wish> = wishes::in_states(&mut conn, &IN_FLIGHT, 100)
        .await?
        .into_iter()
        .filter(|w| w.id != wish.id && w.project_id == wish.project_id && w.branch.is_some())
        .take(MAX_OTHERS)
        .collect();
    drop(conn);
    if wish.status.is_terminal() {
        let nothing = "The wish has ended (merged or cancelled), so there is nothing to predict.";
        return Ok(render(&ConflictsPart { branch: None, predictions: vec![], nothing }));
    }
    let (Some(branch), Some(project)) = (wish.branch.clone(), project) else {
        let nothing = "The wish has no branch yet, so there is nothing to predict.";
        return Ok(render(&ConflictsPart { branch: None, predictions: vec![], nothing }));
    };
    let repo = crate::app::repository::local_dir(&state.data_dir, project.location());
    let mut predictions = vec![predict(&repo, &branch, &project.target_branch, project.target_branch.clone()).await];
    for other in &others {
        let theirs = other.branch.clone().unwrap_or_default();
        predictions.push(predict(&repo, &branch, &theirs, format!("wish {} ({theirs})", other.slug)).await);
    }
    // What the branch changes is the page's changes part (files, counts, diffs), not shown here.
    Ok(render(&ConflictsPart { branch: Some(branch), predictions, nothing: "" }))
}

async fn predict(repo: &std::path::Path, ours: &str, theirs: &str, against: String) -> Prediction {
    let (outcome, detail) = match conflicts::trial_merge(repo, ours, theirs).await {
        Outcome::Clean => ("clean", "merges cleanly".to_owned()),
        Outcome::Conflicts(files) => ("conflict", format!("conflicts in {}", files.join(", "))),
        Outcome::Missing(branch) => ("unknown", format!("branch {branch} is not in the project's repository yet")),
        Outcome::Unknown(why) => ("unknown", format!("cannot tell: {why}")),
    };
    Prediction { against, outcome, detail }
}
