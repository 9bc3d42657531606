//! `/projects/{slug}/conductor`: how the conductor runs a project's wishes (`conductor_config`:
//! who plans, whether plans need approval, who reviews, providers, how many agents at once,
//! whether clones are kept), changed through the same use case as `PATCH /projects/{slug}`,
//! at the version the form was read at (a change made meanwhile is a conflict, not overwritten).

use std::collections::HashMap;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use serde::Deserialize;

use crate::app::projects::{self as projects_app, ProjectPatch};
use crate::app::{Error, IfMatch};
use crate::db::projects;
use crate::db::sessions::Session;
use crate::domain::project::{ConductorConfig, PlanApproval, Planning, ReviewMode};
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::view::{render, see_other, Chrome, PageForm, PageResult};

pub fn router() -> Router<AppState> {
    Router::new().route("/projects/{slug}/conductor", get(show).post(save))
}

/// The form's fields as text, so a refused attempt is shown again as it was typed.
#[derive(Debug, Default, Deserialize)]
struct ConductorFields {
    planning: String,
    plan_approval: String,
    review: String,
    provider: String,
    /// Comma or space separated.
    fallback_providers: String,
    max_agents: String,
    /// Empty keeps the default.
    #[serde(default)]
    max_iterations: String,
    /// A checkbox: present when checked.
    #[serde(default)]
    keep_clones: Option<String>,
    /// `provider=policy` pairs, comma or space separated.
    #[serde(default)]
    permissions: String,
    version: String,
}

impl ConductorFields {
    fn of(config: &ConductorConfig, version: i32) -> ConductorFields {
        ConductorFields {
            planning: name(&config.planning),
            plan_approval: name(&config.plan_approval),
            review: name(&config.review),
            provider: config.provider.clone(),
            fallback_providers: config.fallback_providers.join(", "),
            max_agents: config.max_agents.to_string(),
            max_iterations: config.max_iterations.to_string(),
            keep_clones: config.keep_clones.then(|| "on".to_owned()),
            permissions: config
                .permissions
                .iter()
                .map(|(provider, policy)| format!("{provider}={}", policy.as_str()))
                .collect::<Vec<_>>()
                .join(", "),
            version: version.to_string(),
        }
    }

    /// The config the fields say; a choice or number that is not one is a bad field.
    fn config(&self) -> Result<ConductorConfig, Error> {
        fn choice<T: serde::de::DeserializeOwned>(field: &str, value: &str) -> Result<T, Error> {
            serde_json::from_value(serde_json::Value::String(value.trim().to_owned()))
                .map_err(|_| Error::invalid(format!("conductor_config.{field}"), "not one of the choices"))
        }
        let max_agents = self
            .max_agents
            .trim()
            .parse()
            .map_err(|_| Error::invalid("conductor_config.max_agents", "must be a whole number"))?;
        let max_iterations = match self.max_iterations.trim() {
            "" => ConductorConfig::default().max_iterations,
            n => n.parse().map_err(|_| Error::invalid("conductor_config.max_iterations", "must be a whole number"))?,
        };
        let mut permissions = std::collections::BTreeMap::new();
        for pair in self.permissions.split([',', ' ']).map(str::trim).filter(|s| !s.is_empty()) {
            let (provider, policy) = pair.split_once('=').ok_or_else(|| {
                Error::invalid("conductor_config.permissions", format!("{pair:?}: write provider=policy"))
            })?;
            let field = format!("conductor_config.permissions.{}", provider.trim());
            permissions.insert(provider.trim().to_owned(), choice(&field["conductor_config.".len()..], policy)?);
        }
        Ok(ConductorConfig {
            max_iterations,
            permissions,
            planning: choice::<Planning>("planning", &self.planning)?,
            plan_approval: choice::<PlanApproval>("plan_approval", &self.plan_approval)?,
            review: choice::<ReviewMode>("review", &self.review)?,
            provider: self.provider.trim().to_owned(),
            fallback_providers: self
                .fallback_providers
                .split([',', ' '])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            max_agents,
            keep_clones: self.keep_clones.is_some(),
        })
    }
}

/// A choice's name as the API writes it (`agent`, `human`, …).
fn name(choice: &impl serde::Serialize) -> String {
    serde_json::to_value(choice).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

#[derive(Template)]
#[template(path = "conductor/settings.html")]
struct SettingsPage {
    chrome: Chrome,
    slug: String,
    name: String,
    fields: ConductorFields,
    providers: Vec<String>,
    /// Field path → message, from a refused attempt.
    errors: HashMap<String, String>,
    /// A message that belongs to no one field (a conflict).
    general: Option<String>,
    saved: bool,
}

impl SettingsPage {
    fn err(&self, field: &str) -> &str {
        self.errors.get(&format!("conductor_config.{field}")).map(String::as_str).unwrap_or("")
    }

    fn checked(&self, field: &str, value: &str) -> bool {
        let current = match field {
            "planning" => &self.fields.planning,
            "plan_approval" => &self.fields.plan_approval,
            "review" => &self.fields.review,
            _ => &self.fields.provider,
        };
        current.trim() == value
    }
}

async fn page(
    state: &AppState,
    session: &Session,
    slug: &str,
    fields: Option<ConductorFields>,
) -> PageResult<SettingsPage> {
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, session, "wishes", format!("Conductor settings of {slug}")).await?;
    let project =
        projects::find(&mut conn, slug, false).await?.ok_or_else(|| ApiError::from(projects_app::no_project(slug)))?;
    let fields = fields.unwrap_or_else(|| ConductorFields::of(&project.conductor_config, project.version));
    let providers = state.providers.current().names().into_iter().map(str::to_owned).collect();
    Ok(SettingsPage {
        chrome,
        slug: project.slug,
        name: project.name,
        fields,
        providers,
        errors: HashMap::new(),
        general: None,
        saved: false,
    })
}

#[derive(Debug, Default, Deserialize)]
struct ShowQuery {
    /// Set by the redirect after a save.
    saved: Option<String>,
}

#[tracing::instrument(skip_all, fields(slug = ?slug), err(Debug, level = "debug"))]
async fn show(
    State(state): State<AppState>,
    session: Session,
    Path(slug): Path<String>,
    Query(query): Query<ShowQuery>,
) -> PageResult {
    let mut page = page(&state, &session, &slug, None).await?;
    page.saved = query.saved.is_some();
    Ok(render(&page))
}

#[tracing::instrument(skip_all, fields(slug = ?slug), err(Debug, level = "debug"))]
async fn save(
    State(state): State<AppState>,
    session: Session,
    Path(slug): Path<String>,
    PageForm(fields): PageForm<ConductorFields>,
) -> PageResult {
    let attempt = async {
        let patch = ProjectPatch { conductor_config: Some(fields.config()?), ..ProjectPatch::default() };
        projects_app::update(&state, &slug, &IfMatch::new(Some(fields.version.trim())), patch).await
    };
    let refusal = match attempt.await {
        Ok(_) => return Ok(see_other(&format!("/projects/{slug}/conductor?saved=1"))),
        Err(e @ (Error::Invalid(_) | Error::Conflict { .. } | Error::Stale(_))) => e,
        Err(other) => return Err(other.into()),
    };
    let mut page = page(&state, &session, &slug, Some(fields)).await?;
    let status = match refusal {
        Error::Invalid(errors) => {
            page.errors = errors.into_iter().map(|e| (e.field, e.message)).collect();
            StatusCode::UNPROCESSABLE_ENTITY
        }
        other => {
            page.general = Some(format!("{other} Reload the page to see the settings as they are now."));
            StatusCode::CONFLICT
        }
    };
    let mut response = render(&page);
    *response.status_mut() = status;
    Ok(response.into_response())
}
