//! `POST /api/v1/wishes/{slug}/groups/{key}/start|complete|fail|retry`: progress of a wish's
//! execution groups. Completing the last group completes the wish; a group that fails with no
//! iterations left fails it (one with iterations left goes back to `ready`).

use axum::extract::{Path, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use sqlx::PgConnection;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::error::{ApiError, ApiResult, Problem};
use crate::api::json::ApiJson;
use crate::api::task_actions::RetryBody;
use crate::api::wish_actions::act;
use crate::db::tasks::{self, Applied, Change};
use crate::db::wishes::{self, Group, Wish};
use crate::domain::task::TaskEvent;
use crate::domain::wish::{WishEvent, WishStatus};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start_group))
        .routes(routes!(complete_group))
        .routes(routes!(fail_group))
        .routes(routes!(retry_group))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"result": "merged API endpoints; tests green"}))]
pub struct GroupResult {
    /// What the group produced, or why it failed.
    pub result: Option<String>,
}

/// What a group action did: the wish (its state after the action), the group, and the groups
/// that became `ready` because of it. Only the touched rows are read, so the answer costs the
/// same in a wish of ten groups or a thousand (the whole DAG is `GET /wishes/{slug}`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({
    "slug": "login-page", "status": "executing",
    "group": {"key": "api", "status": "done", "depends_on": []},
    "now_ready": ["ui"]
}))]
pub struct GroupOutcome {
    #[serde(flatten)]
    pub wish: Wish,
    pub group: Group,
    /// Keys of the groups whose last dependency this action completed.
    #[schema(example = json!(["ui"]))]
    pub now_ready: Vec<String>,
}

/// Completes the wish when none of its groups is unfinished (after a release: completions check
/// through [`wishes::group_done`]). Takes the wish's row lock first, so this cannot race the
/// last group's completion.
pub async fn complete_if_done(conn: &mut PgConnection, wish: Wish) -> ApiResult<Wish> {
    let Some(locked) = wishes::lock(conn, wish.id).await? else { return Ok(wish) };
    complete_if_last(conn, locked).await
}

/// Applies `all_groups_done` to a wish read under its row lock whose groups are all done.
async fn complete_if_last(conn: &mut PgConnection, locked: Wish) -> ApiResult<Wish> {
    if locked.status != WishStatus::Executing || locked.held || locked.groups_open > 0 {
        return Ok(locked);
    }
    act(conn, &locked, WishEvent::AllGroupsDone, None).await
}

/// One action on one group, in one transaction with what it causes (the wish completing or
/// failing, dependents becoming ready).
pub(crate) async fn group_action(
    state: &AppState,
    slug: &str,
    key: &str,
    event: TaskEvent,
    change: Change,
) -> ApiResult<GroupOutcome> {
    let mut tx = state.db.begin().await?;
    let (wish, group) =
        wishes::for_group(&mut tx, slug, key).await?.ok_or_else(|| ApiError::NotFound(format!("no wish `{slug}`")))?;
    if wish.status != WishStatus::Executing {
        let detail = format!("the wish is {}; its groups move only while it is executing", wish.status);
        return Err(ApiError::conflict(detail, Some(wish.status.as_str())));
    }
    let starts_work = matches!(event, TaskEvent::Start | TaskEvent::Retry { .. });
    if starts_work && wish.held {
        return Err(ApiError::conflict("the wish is on hold; release it first", Some(wish.status.as_str())));
    }
    let no_group = || ApiError::NotFound(format!("wish `{slug}` has no group `{key}`"));
    let (current, depends_on) = group.ok_or_else(no_group)?;
    let (mut task, released) = match tasks::apply_to(&mut tx, current, event, &change).await? {
        None => return Err(no_group()),
        Some(Applied::Refused { current, message }) => {
            return Err(ApiError::conflict(message, Some(current.as_str())));
        }
        Some(Applied::Done(task, released)) => (task, released),
    };
    let wish = match event {
        // Last, so the wish's row lock is held only for the check and the commit.
        TaskEvent::Complete => match wishes::group_done(&mut tx, wish.id).await? {
            Some(locked) => complete_if_last(&mut tx, locked).await?,
            None => wish,
        },
        TaskEvent::Fail if task.iterations < task.max_iterations => {
            // Iterations left: the group goes back to the queue instead of failing the wish.
            let retry = TaskEvent::Retry { unmet_dependencies: 0 };
            if let Some(Applied::Done(retried, _)) =
                tasks::apply_to(&mut tx, task.clone(), retry, &Change::default()).await?
            {
                task = retried;
            }
            wish
        }
        TaskEvent::Fail => {
            let reason = format!(
                "group `{key}` failed after {} iterations: {}",
                task.iterations,
                task.result.as_deref().unwrap_or("no reason given")
            );
            act(&mut tx, &wish, WishEvent::GroupFailed, Some(&reason)).await?
        }
        _ => wish,
    };
    state.feed.commit(tx).await?;
    let group = Group::of(&task, depends_on);
    let now_ready = released.into_iter().filter_map(|r| r.group_key).collect();
    Ok(GroupOutcome { wish, group, now_ready })
}

/// `ready → in_progress` (counts an iteration).
#[utoipa::path(post, path = "/wishes/{slug}/groups/{key}/start", tag = "wishes",
    params(("slug" = String, Path), ("key" = String, Path)),
    responses((status = 200, body = GroupOutcome), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(slug = %slug, key = %key), err)]
pub async fn start_group(
    State(state): State<AppState>,
    Path((slug, key)): Path<(String, String)>,
) -> ApiResult<Json<GroupOutcome>> {
    Ok(Json(group_action(&state, &slug, &key, TaskEvent::Start, Change::default()).await?))
}

/// `in_progress → done`; dependents whose last dependency this was become `ready`, and the wish
/// completes when it was the last group.
#[utoipa::path(post, path = "/wishes/{slug}/groups/{key}/complete", tag = "wishes",
    params(("slug" = String, Path), ("key" = String, Path)), request_body(content = GroupResult, description = "optional"),
    responses((status = 200, body = GroupOutcome), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(slug = %slug, key = %key), err)]
pub async fn complete_group(
    State(state): State<AppState>,
    Path((slug, key)): Path<(String, String)>,
    body: Option<ApiJson<GroupResult>>,
) -> ApiResult<Json<GroupOutcome>> {
    let result = body.and_then(|ApiJson(b)| b.result);
    Ok(Json(group_action(&state, &slug, &key, TaskEvent::Complete, Change { result, ..Change::default() }).await?))
}

/// `in_progress → failed`; back to `ready` while iterations are left, else the wish fails.
#[utoipa::path(post, path = "/wishes/{slug}/groups/{key}/fail", tag = "wishes",
    params(("slug" = String, Path), ("key" = String, Path)), request_body(content = GroupResult, description = "optional"),
    responses((status = 200, body = GroupOutcome), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(slug = %slug, key = %key), err)]
pub async fn fail_group(
    State(state): State<AppState>,
    Path((slug, key)): Path<(String, String)>,
    body: Option<ApiJson<GroupResult>>,
) -> ApiResult<Json<GroupOutcome>> {
    let result = body.and_then(|ApiJson(b)| b.result);
    Ok(Json(group_action(&state, &slug, &key, TaskEvent::Fail, Change { result, ..Change::default() }).await?))
}

/// `failed|cancelled → ready` (or `blocked` while dependencies are unmet), after the wish was
/// resumed and started again. A group that has used all its `max_iterations` needs a higher
/// cap in the body.
#[utoipa::path(post, path = "/wishes/{slug}/groups/{key}/retry", tag = "wishes",
    params(("slug" = String, Path), ("key" = String, Path)),
    request_body(content = RetryBody, description = "optional"),
    responses((status = 200, body = GroupOutcome), (status = 404, body = Problem), (status = 409, body = Problem),
        (status = 422, body = Problem)))]
#[tracing::instrument(skip_all, fields(slug = %slug, key = %key), err)]
pub async fn retry_group(
    State(state): State<AppState>,
    Path((slug, key)): Path<(String, String)>,
    body: Option<ApiJson<RetryBody>>,
) -> ApiResult<Json<GroupOutcome>> {
    let change = body.map(|ApiJson(b)| b).unwrap_or_default().change()?;
    Ok(Json(group_action(&state, &slug, &key, TaskEvent::Retry { unmet_dependencies: 0 }, change).await?))
}
