//! `POST /api/v1/wishes/{slug}/<action>`: the wish lifecycle, and
//! moving a wish's card between board columns. An illegal transition is a 409 carrying the wish's
//! current state.

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use crate::api::json::ApiJson;
use crate::api::wishes::{to_groups, GroupInput};
use crate::app::wish_lifecycle::WishDetail;
use crate::app::wishes::{self, MergeOutcome};
use crate::domain::review::Verdict;
use crate::domain::wish::{WishEvent, WishStatus};
use crate::http::error::{ApiResult, Problem};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(plan_wish))
        .routes(routes!(queue_wish))
        .routes(routes!(start_wish))
        .routes(routes!(hold_wish))
        .routes(routes!(release_wish))
        .routes(routes!(cancel_wish))
        .routes(routes!(interrupt_wish))
        .routes(routes!(resume_wish))
        .routes(routes!(review_wish))
        .routes(routes!(submit_wish))
        .routes(routes!(record_merge))
        .routes(routes!(move_wish))
        .routes(routes!(hand_back_wish))
}

/// Hands a wish that waits for a person (`assignee: human`: its planner, reviewer or fixer
/// ended or gave up) back to the conductor, which runs that step again with a new agent.
#[utoipa::path(post, path = "/wishes/{slug}/hand-back", tag = "wishes", params(("slug" = String, Path)),
    responses((status = 200, body = WishDetail), (status = 404, body = Problem),
        (status = 409, body = Problem, description = "The wish does not wait for a person")))]
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn hand_back_wish(State(state): State<AppState>, Path(slug): Path<String>) -> ApiResult<Json<WishDetail>> {
    Ok(Json(crate::app::conductor::handoff::hand_back(&state, &slug).await?))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"groups": [{"key": "api", "title": "API"}, {"key": "ui", "title": "UI", "depends_on": ["api"]}]}))]
pub struct PlanBody {
    /// Replaces the draft's plan when given.
    pub groups: Option<Vec<GroupInput>>,
}

/// `draft → planned`. With `groups`, the draft's plan is replaced first (checked like on create).
#[utoipa::path(post, path = "/wishes/{slug}/plan", tag = "wishes", params(("slug" = String, Path)),
    request_body(content = Option<PlanBody>, description = "optional"),
    responses((status = 200, body = WishDetail), (status = 409, body = Problem), (status = 422, body = Problem)))]
pub async fn plan_wish(
    State(state): State<AppState>,
    Path(slug): Path<String>,
    body: Option<ApiJson<PlanBody>>,
) -> ApiResult<Json<WishDetail>> {
    let groups = body.and_then(|ApiJson(b)| b.groups).map(to_groups);
    Ok(Json(wishes::plan(&state, &slug, groups).await?))
}

macro_rules! lifecycle_action {
    ($name:ident, $path:literal, $event:expr, $doc:literal) => {
        #[doc = $doc]
        #[utoipa::path(post, path = $path, tag = "wishes", params(("slug" = String, Path)),
            responses((status = 200, body = WishDetail), (status = 404, body = Problem), (status = 409, body = Problem)))]
        #[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
        pub async fn $name(State(state): State<AppState>, Path(slug): Path<String>) -> ApiResult<Json<WishDetail>> {
            Ok(Json(wishes::lifecycle(&state, &slug, $event, None).await?))
        }
    };
}

lifecycle_action!(queue_wish, "/wishes/{slug}/queue", WishEvent::Queue, "`planned → queued`.");
lifecycle_action!(
    start_wish,
    "/wishes/{slug}/start",
    WishEvent::Start,
    "`queued → executing`; refused while a `blocked_by` wish has not merged (it then starts when they have)."
);
lifecycle_action!(hold_wish, "/wishes/{slug}/hold", WishEvent::Hold, "Holds the wish: no transition until released.");
lifecycle_action!(release_wish, "/wishes/{slug}/release", WishEvent::Release, "Releases a held wish.");
lifecycle_action!(cancel_wish, "/wishes/{slug}/cancel", WishEvent::Cancel, "Cancels the wish (resumable).");
lifecycle_action!(
    interrupt_wish,
    "/wishes/{slug}/interrupt",
    WishEvent::Interrupt,
    "`queued|executing → interrupted`."
);
/// `completed → pending_merge`: the wish's branch enters the merge queue of its project's target
/// branch, at the back.
#[utoipa::path(post, path = "/wishes/{slug}/submit", tag = "wishes", params(("slug" = String, Path)),
    responses((status = 200, body = WishDetail), (status = 404, body = Problem), (status = 409, body = Problem)))]
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn submit_wish(State(state): State<AppState>, Path(slug): Path<String>) -> ApiResult<Json<WishDetail>> {
    Ok(Json(crate::app::merge_queue::submit(&state, &slug).await?))
}

#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeBody {
    /// Force a state (draft, planned or queued) instead of the last good one.
    #[schema(value_type = Option<String>, example = "queued", pattern = "^(draft|planned|queued)$")]
    pub to: Option<WishStatus>,
}

/// From `failed`, `conflict`, `interrupted` or `cancelled` back to the last good state:
/// queued if it was ever queued, planned if it has a plan, else draft; a conflict goes back to
/// `pending_merge`.
#[utoipa::path(post, path = "/wishes/{slug}/resume", tag = "wishes", params(("slug" = String, Path)),
    request_body(content = Option<ResumeBody>, description = "optional"),
    responses((status = 200, body = WishDetail), (status = 409, body = Problem), (status = 422, body = Problem)))]
pub async fn resume_wish(
    State(state): State<AppState>,
    Path(slug): Path<String>,
    body: Option<ApiJson<ResumeBody>>,
) -> ApiResult<Json<WishDetail>> {
    let to = body.and_then(|ApiJson(b)| b.to);
    Ok(Json(wishes::lifecycle(&state, &slug, WishEvent::Resume { to }, None).await?))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewBody {
    #[schema(example = "fail")]
    pub verdict: Verdict,
    #[serde(default)]
    pub notes: String,
}

/// Records a review of an executing wish: each verdict moves
/// `review_iteration`; a fail at the cap fails the wish.
#[utoipa::path(post, path = "/wishes/{slug}/review", tag = "wishes", params(("slug" = String, Path)),
    request_body = ReviewBody,
    responses((status = 200, body = WishDetail), (status = 409, body = Problem), (status = 422, body = Problem)))]
pub async fn review_wish(
    State(state): State<AppState>,
    Path(slug): Path<String>,
    ApiJson(body): ApiJson<ReviewBody>,
) -> ApiResult<Json<WishDetail>> {
    Ok(Json(wishes::review(&state, &slug, body.verdict, &body.notes).await?))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"outcome": "conflict", "detail": "src/lib.rs conflicts with main"}))]
pub struct MergeBody {
    pub outcome: MergeOutcome,
    pub detail: Option<String>,
}

/// The merge queue's verdict on a `pending_merge` wish. On `merged`, queued wishes that waited
/// for it are re-checked and start if nothing else blocks them.
#[utoipa::path(post, path = "/wishes/{slug}/merge-result", tag = "wishes", params(("slug" = String, Path)),
    request_body = MergeBody,
    responses((status = 200, body = WishDetail), (status = 409, body = Problem), (status = 422, body = Problem)))]
pub async fn record_merge(
    State(state): State<AppState>,
    Path(slug): Path<String>,
    ApiJson(body): ApiJson<MergeBody>,
) -> ApiResult<Json<WishDetail>> {
    Ok(Json(wishes::record_merge(&state, &slug, body.outcome, body.detail.as_deref()).await?))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"column_id": "7c9e6679-7425-40de-944b-e07fc1f90ae7"}))]
pub struct MoveWishBody {
    /// A column of the wish's board; for a wish on no board yet, of any board of its project.
    pub column_id: Uuid,
}

/// Moves the wish's card to another column of its board. A wish on no board yet may go to a
/// column of any board of its project, which becomes its board. Not a lifecycle change.
#[utoipa::path(post, path = "/wishes/{slug}/move", tag = "wishes", params(("slug" = String, Path)),
    request_body = MoveWishBody,
    responses((status = 200, body = WishDetail, description = "The wish as it is now"),
        (status = 404, body = Problem, description = "No such wish"),
        (status = 409, body = Problem, description = "The column is full (WIP limit: tasks and wishes count), or the wish was put on another board meanwhile"),
        (status = 422, body = Problem, description = "No such column on the wish's board, or an unknown field")))]
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn move_wish(
    State(state): State<AppState>,
    Path(slug): Path<String>,
    ApiJson(body): ApiJson<MoveWishBody>,
) -> ApiResult<Json<WishDetail>> {
    Ok(Json(wishes::move_card(&state, &slug, body.column_id).await?))
}
