//! `POST /api/v1/agents/{name}/report`: an agent reports on its own step (what the `switchyard
//! group|review|wish|fix|task` commands send), through [`crate::app::conductor::reports`].
//! An agent's token may call it for itself only; an operator's write token for any agent.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::idempotency::{self, IdempotentJson};
use crate::api::wishes::{to_groups, GroupInput};
use crate::app::conductor::reports::{self, Report, ReportOutcome};
use crate::domain::review::Verdict;
use crate::http::error::{ApiResult, Problem};
use crate::http::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(report))
}

/// One report, by `kind`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[schema(examples(
    json!({"kind": "group_done", "summary": "Added the login form and its tests"}),
    json!({"kind": "review_fail", "notes": "server/login.rs:42 does not check the CSRF token"}),
    json!({"kind": "plan", "groups": [{"key": "api", "title": "The API", "goal": "POST /login"}]})
))]
pub enum ReportBody {
    /// An engineer's group is done (its branch has new commits, pushed).
    GroupDone {
        #[serde(default)]
        #[schema(max_length = 20000)]
        summary: String,
    },
    /// An engineer cannot do its group: a person takes over.
    GroupBlocked {
        #[schema(min_length = 1, max_length = 20000, pattern = r"\S")]
        reason: String,
    },
    /// A reviewer passes its wish.
    ReviewPass {
        #[serde(default)]
        #[schema(max_length = 20000)]
        notes: String,
    },
    /// A reviewer fails its wish; the notes go to a fix agent.
    ReviewFail {
        #[schema(max_length = 20000)]
        notes: String,
    },
    /// A planner's plan for its draft wish.
    Plan { groups: Vec<GroupInput> },
    /// A fix agent's work is on the wish's branch (pushed).
    FixDone {
        #[serde(default)]
        #[schema(max_length = 20000)]
        summary: String,
    },
    /// A standalone task's agent is done.
    TaskDone {
        #[serde(default)]
        #[schema(max_length = 20000)]
        result: String,
    },
    TaskFail {
        #[schema(min_length = 1, max_length = 20000, pattern = r"\S")]
        reason: String,
    },
    TaskAsk {
        #[schema(min_length = 1, max_length = 20000, pattern = r"\S")]
        question: String,
    },
}

impl From<ReportBody> for Report {
    fn from(body: ReportBody) -> Report {
        match body {
            ReportBody::GroupDone { summary } => Report::GroupDone { summary },
            ReportBody::GroupBlocked { reason } => Report::GroupBlocked { reason },
            ReportBody::ReviewPass { notes } => Report::Review { verdict: Verdict::Pass, notes },
            ReportBody::ReviewFail { notes } => Report::Review { verdict: Verdict::Fail, notes },
            ReportBody::Plan { groups } => Report::Plan { groups: to_groups(groups) },
            ReportBody::FixDone { summary } => Report::FixDone { summary },
            ReportBody::TaskDone { result } => Report::TaskDone { result },
            ReportBody::TaskFail { reason } => Report::TaskFail { reason },
            ReportBody::TaskAsk { question } => Report::TaskAsk { question },
        }
    }
}

/// Reports on the agent's own step: its group done or blocked, its review's verdict, its plan,
/// its fix, its task. The report acts on the agent's own work only, whatever it names. A refusal
/// (409) names the state it found the step in.
#[utoipa::path(post, path = "/agents/{name}/report", tag = "agents", params(("name" = String, Path),
        ("Idempotency-Key" = Option<String>, Header, description = "Makes the report safe to retry: the same key with the same body within 24 hours answers the first response again (the report is not applied twice); with another body, 422.")),
    request_body = ReportBody,
    responses((status = 200, body = ReportOutcome), (status = 403, body = Problem, description = "Another agent's token"),
        (status = 404, body = Problem),
        (status = 409, body = Problem, description = "Not the agent's step now, or done without new commits"),
        (status = 422, body = Problem, description = "A bad report (a refused plan names each problem)")))]
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn report(
    State(state): State<AppState>,
    Path(name): Path<String>,
    IdempotentJson(body, idem): IdempotentJson<ReportBody>,
) -> ApiResult<Response> {
    if let Some(first) = idempotency::replay(&state, idem.as_ref()).await? {
        return Ok(first);
    }
    Ok(Json(reports::report(&state.app, &name, body.into(), idem.as_ref()).await?).into_response())
}
