//! Inbound hooks: other systems tell Switchyard things. These routes authenticate by signature,
//! not bearer token, and check it on the raw body before parsing anything.
//!
//! - `POST /hooks/github`: GitHub's `X-Hub-Signature-256` with `SWITCHYARD_GITHUB_WEBHOOK_SECRET`.
//!   Failed check runs and workflow runs become `ci.failed`; pull requests opened, merged and
//!   closed become `pr.created`, `pr.merged`, `pr.closed` — on the agent working on the branch
//!   (`agent:<name>`), else the wish whose branch matches (`wish:<slug>`), else `branch:<name>`;
//!   the payload names both the agent and the wish when they exist.
//! - `POST /hooks/generic/{name}`: a Standard Webhooks signature with the secret configured for
//!   `name` in `SWITCHYARD_INBOUND_HOOKS`; the body `{"task": {…}}` or `{"wish": {…}}` files work
//!   exactly as `POST /tasks` or `POST /wishes` would.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::json::parse;
use crate::api::tasks::{with_etag, CreateTask};
use crate::api::wishes::CreateWish;
use crate::app::hooks::{self, GithubEvent};
use crate::http::error::{ApiError, ApiResult, Problem};
use crate::http::extract::ApiPath;
use crate::http::AppState;
use crate::webhooks::signature;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(github)).routes(routes!(generic))
}

/// What an inbound hook recorded.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"recorded": ["ci.failed"]}))]
pub struct Recorded {
    /// The event types written; empty when the delivery was of no interest (e.g. `ping`).
    pub recorded: Vec<String>,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Receives GitHub webhooks (content type `application/json`). The signature is checked before
/// the body is read as JSON.
#[utoipa::path(post, path = "/hooks/github", tag = "hooks", security(()), request_body(content = Object,
        description = "A GitHub webhook payload: `check_run`, `workflow_run`, `pull_request` or `ping`"),
    params(("X-Hub-Signature-256" = String, Header, description = "`sha256=` and the hex HMAC-SHA256 of the body"),
        ("X-GitHub-Event" = String, Header, description = "The GitHub event name")),
    responses((status = 202, body = Recorded, description = "Accepted"),
        (status = 400, body = Problem, description = "The body is not the JSON GitHub sends"),
        (status = 401, body = Problem, description = "Missing or wrong signature"),
        (status = 404, body = Problem, description = "No GitHub secret is configured")))]
#[tracing::instrument(skip_all, fields(event = header(&headers, "x-github-event").unwrap_or("")), err(level = "debug"))]
pub async fn github(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<Recorded>)> {
    let secret = state
        .webhooks
        .github_secret
        .as_ref()
        .ok_or_else(|| ApiError::NotFound("GitHub hooks are off: set SWITCHYARD_GITHUB_WEBHOOK_SECRET".into()))?;
    if !signature::verify_github(secret.expose_secret().as_bytes(), header(&headers, "x-hub-signature-256"), &body) {
        return Err(ApiError::Unauthorized("X-Hub-Signature-256 is missing or does not match the body"));
    }
    let payload: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::BadRequest(format!("the body is not JSON: {e}")))?;
    let Some((event_type, branch, details)) = github_event(header(&headers, "x-github-event").unwrap_or(""), &payload)
    else {
        return Ok((StatusCode::ACCEPTED, Json(Recorded { recorded: Vec::new() })));
    };
    hooks::record_github(&state, GithubEvent { event_type, branch, details }).await?;
    Ok((StatusCode::ACCEPTED, Json(Recorded { recorded: vec![event_type.to_owned()] })))
}

/// The event a GitHub delivery stands for, its branch and payload; `None` when it is of no interest.
fn github_event(name: &str, p: &Value) -> Option<(&'static str, Option<String>, Value)> {
    let failing = |c: &Value| matches!(c.as_str(), Some("failure" | "timed_out" | "startup_failure"));
    let repository = p["repository"]["full_name"].clone();
    let text = |v: &Value| v.as_str().map(str::to_owned);
    match name {
        "check_run" if p["action"] == "completed" && failing(&p["check_run"]["conclusion"]) => {
            let run = &p["check_run"];
            let branch = text(&run["check_suite"]["head_branch"]);
            Some((
                "ci.failed",
                branch.clone(),
                json!({"source": "github", "kind": "check_run", "name": run["name"],
                "conclusion": run["conclusion"], "branch": branch, "sha": run["head_sha"], "url": run["html_url"],
                "repository": repository}),
            ))
        }
        "workflow_run" if p["action"] == "completed" && failing(&p["workflow_run"]["conclusion"]) => {
            let run = &p["workflow_run"];
            let branch = text(&run["head_branch"]);
            Some((
                "ci.failed",
                branch.clone(),
                json!({"source": "github", "kind": "workflow_run", "name": run["name"],
                "conclusion": run["conclusion"], "branch": branch, "sha": run["head_sha"], "url": run["html_url"],
                "repository": repository}),
            ))
        }
        "pull_request" => {
            let pr = &p["pull_request"];
            let event_type = match p["action"].as_str()? {
                "opened" | "reopened" => "pr.created",
                "closed" if pr["merged"] == true => "pr.merged",
                "closed" => "pr.closed",
                _ => return None,
            };
            let branch = text(&pr["head"]["ref"]);
            Some((
                event_type,
                branch.clone(),
                json!({"source": "github", "number": pr["number"], "title": pr["title"],
                "url": pr["html_url"], "branch": branch, "repository": repository}),
            ))
        }
        _ => None,
    }
}

/// What a generic hook files: exactly one of `task` or `wish`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"task": {"project": "switchyard", "title": "Fix the flaky login test"}}))]
pub struct GenericHook {
    /// As the body of `POST /tasks`.
    pub task: Option<CreateTask>,
    /// As the body of `POST /wishes`.
    pub wish: Option<CreateWish>,
}

/// Lets any tool file work: a Standard Webhooks–signed POST whose body creates a task or a wish.
/// The signature (and a timestamp within 5 minutes) is checked before the body is parsed.
#[utoipa::path(post, path = "/hooks/generic/{name}", tag = "hooks", security(()), request_body = GenericHook,
    params(("name" = String, Path, description = "A hook named in SWITCHYARD_INBOUND_HOOKS"),
        ("webhook-id" = String, Header), ("webhook-timestamp" = String, Header, description = "Unix seconds"),
        ("webhook-signature" = String, Header, description = "`v1,<base64 HMAC-SHA256 of id.timestamp.body>`")),
    responses((status = 201, description = "The task or wish, as `POST /tasks` or `POST /wishes` answers"),
        (status = 200, description = "This `webhook-id` was acted on before: nothing filed twice"),
        (status = 401, body = Problem, description = "Missing, stale or wrong signature"),
        (status = 404, body = Problem, description = "No hook of that name"),
        (status = 422, body = Problem, description = "Not exactly one of `task` and `wish`, or a bad field in it")))]
#[tracing::instrument(skip_all, fields(name = ?name), err(level = "debug"))]
pub async fn generic(
    State(state): State<AppState>,
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let (_, secret) = state
        .webhooks
        .inbound
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| ApiError::NotFound(format!("no inbound hook `{name}`")))?;
    let verified = signature::verify(
        secret.expose_secret(),
        header(&headers, "webhook-id"),
        header(&headers, "webhook-timestamp"),
        header(&headers, "webhook-signature"),
        &body,
        chrono::Utc::now().timestamp(),
    );
    if let Err(e) = verified {
        tracing::info!(reason = %e, "refused an inbound hook");
        return Err(ApiError::Unauthorized("the Standard Webhooks signature is missing, stale or wrong"));
    }
    let hook: GenericHook = parse(&body)?;
    let message_id = header(&headers, "webhook-id").unwrap_or_default();
    let mut tx = state.db.begin().await?;
    // The work and the record that this `webhook-id` was acted on commit together: a retry after
    // a failure files it, a replay after success does not.
    if !hooks::first_delivery(&mut tx, &name, message_id).await? {
        return Ok((StatusCode::OK, Json(json!({"duplicate": true, "webhook_id": message_id}))).into_response());
    }
    let response = match (hook.task, hook.wish) {
        (Some(task), None) => {
            let task = crate::app::tasks::create(&mut tx, &state.providers.current(), task.into()).await?;
            let mut response = with_etag(task.version, task);
            *response.status_mut() = StatusCode::CREATED;
            response
        }
        (None, Some(wish)) => (
            StatusCode::CREATED,
            Json(json!(crate::app::wishes::create(&mut tx, &state.providers.current(), wish.into()).await?)),
        )
            .into_response(),
        _ => return Err(ApiError::validation("task", "send exactly one of `task` and `wish`")),
    };
    state.feed.commit(tx).await?;
    Ok(response)
}
