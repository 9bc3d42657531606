//! The form on `/webhooks` that subscribes a URL to events, and `POST /webhooks` that takes it:
//! what `POST /api/v1/webhooks` takes (url, events, project, description, format) through the same
//! use case ([`crate::app::webhooks::create`]), so the form accepts and refuses exactly what the
//! API does. A refusal comes back with each message beside its field and what was typed kept; the
//! new subscription's signing secret is shown on the answer only, as after a rotation.

use std::collections::HashMap;

use axum::extract::State;
use axum::routing::post;
use axum::Router;
use sqlx::PgConnection;

use super::webhooks::{list_page, secret_page};
use super::wish_form::{refused, render_with};
use crate::app::webhooks::{self as webhooks_app, NewWebhook};
use crate::app::Error;
use crate::db::projects;
use crate::db::sessions::Session;
use crate::domain::webhook::HOOKS;
use crate::domain::webhook_format::WebhookFormat;
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::view::{filled, list, PageForm, PageResult};

pub fn router() -> Router<AppState> {
    Router::new().route("/webhooks", post(create))
}

/// What the person typed, to show again.
#[derive(Debug, Clone, Default)]
pub(super) struct WebhookFields {
    pub(super) url: String,
    /// The hook names ticked (`on_pr_created`, …).
    pub(super) hooks: Vec<String>,
    /// Event types and patterns, separated by commas or spaces (`task.*, wish.merged`).
    pub(super) other_events: String,
    /// Empty: every project.
    pub(super) project: String,
    pub(super) description: String,
    /// Empty: `standard`.
    pub(super) format: String,
}

impl WebhookFields {
    /// Reads the form's pairs; `events` repeats, once per box ticked.
    fn from_pairs(pairs: &[(String, String)]) -> WebhookFields {
        let mut fields = WebhookFields::default();
        for (name, value) in pairs {
            let slot = match name.as_str() {
                "events" => {
                    fields.hooks.push(value.clone());
                    continue;
                }
                "url" => &mut fields.url,
                "other_events" => &mut fields.other_events,
                "project" => &mut fields.project,
                "description" => &mut fields.description,
                "format" => &mut fields.format,
                _ => continue,
            };
            *slot = value.clone();
        }
        fields
    }

    /// The new subscription; a format the form does not offer is refused here, everything else
    /// by the use case.
    fn to_new_webhook(&self) -> Result<NewWebhook, Error> {
        let format = match self.format.trim() {
            "" => None,
            name => Some(name.parse::<WebhookFormat>().map_err(|e| Error::invalid("format", e.to_string()))?),
        };
        let mut events = self.hooks.clone();
        events.extend(list(&self.other_events));
        Ok(NewWebhook {
            url: self.url.trim().to_owned(),
            events,
            project: filled(&self.project),
            description: filled(&self.description),
            secret: None,
            enabled: None,
            format,
        })
    }
}

/// The form as the list page shows it: the fields, the choices, and a refusal's messages.
#[derive(Debug, Default)]
pub(super) struct WebhookForm {
    pub(super) fields: WebhookFields,
    pub(super) projects: Vec<String>,
    /// Field → message, from a refused attempt (`events[2]` is shown beside the events).
    pub(super) errors: HashMap<String, String>,
    /// A message that belongs to no one field.
    pub(super) general: Option<String>,
}

impl WebhookForm {
    pub(super) async fn load(conn: &mut PgConnection, fields: WebhookFields) -> Result<WebhookForm, ApiError> {
        let projects = projects::list(conn, None, 1000).await?.into_iter().map(|p| p.slug).collect();
        Ok(WebhookForm { fields, projects, ..WebhookForm::default() })
    }

    pub(super) fn err(&self, field: &str) -> &str {
        self.errors.get(field).map(String::as_str).unwrap_or("")
    }

    /// Each hook name with what it means and whether it is ticked.
    pub(super) fn hooks(&self) -> Vec<(&'static str, &'static str, bool)> {
        HOOKS.iter().map(|(name, means)| (*name, *means, self.fields.hooks.iter().any(|h| h == name))).collect()
    }

    /// Each body format with whether it is chosen (`standard` when none is).
    pub(super) fn formats(&self) -> Vec<(&'static str, bool)> {
        let chosen = if self.fields.format.is_empty() { WebhookFormat::Standard.as_str() } else { &self.fields.format };
        WebhookFormat::ALL.iter().map(|f| (f.as_str(), f.as_str() == chosen)).collect()
    }
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn create(
    State(state): State<AppState>,
    session: Session,
    PageForm(pairs): PageForm<Vec<(String, String)>>,
) -> PageResult {
    let fields = WebhookFields::from_pairs(&pairs);
    let attempt = async {
        let new = fields.to_new_webhook()?;
        webhooks_app::create(&state, &state.webhooks.allowed_hosts, new, None).await
    };
    let refusal = match attempt.await {
        Ok(created) => return secret_page(&state, &session, created, true).await,
        Err(e @ (Error::Invalid(_) | Error::Conflict { .. })) => e,
        Err(other) => return Err(other.into()),
    };
    let mut conn = state.db.acquire().await?;
    let mut form = WebhookForm::load(&mut conn, fields).await?;
    let status = refused(refusal, &mut form.errors, &mut form.general);
    // One entry of the list is wrong (`events[2]`): its message goes beside the events.
    form.errors = form
        .errors
        .into_iter()
        .map(|(field, message)| (if field.starts_with("events[") { "events".to_owned() } else { field }, message))
        .collect();
    let page = list_page(&mut conn, &session, form).await?;
    Ok(render_with(&page, status))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pages::wish_form::tests::pairs;

    #[test]
    fn ticked_hooks_and_typed_patterns_are_one_list_of_events() {
        let fields = WebhookFields::from_pairs(&pairs(&[
            ("_csrf", "x"),
            ("url", " https://hooks.example.com/a "),
            ("events", "on_pr_created"),
            ("events", "on_ci_failed"),
            ("other_events", "task.*, wish.merged"),
            ("project", ""),
            ("format", "ntfy"),
        ]));
        let new = fields.to_new_webhook().expect("a subscription");
        assert_eq!(new.url, "https://hooks.example.com/a");
        assert_eq!(new.events, ["on_pr_created", "on_ci_failed", "task.*", "wish.merged"]);
        assert_eq!((new.project, new.format), (None, Some(WebhookFormat::Ntfy)));
        let form = WebhookForm { fields, ..WebhookForm::default() };
        assert!(form.hooks().iter().any(|(name, _, ticked)| *name == "on_ci_failed" && *ticked));
        assert_eq!(form.formats().iter().filter(|(_, chosen)| *chosen).count(), 1);
    }

    #[test]
    fn a_format_the_form_does_not_offer_names_its_field() {
        let fields = WebhookFields { format: "telegram".into(), ..WebhookFields::default() };
        match fields.to_new_webhook() {
            Err(Error::Invalid(errors)) => assert_eq!(errors[0].field, "format"),
            other => panic!("{other:?}"),
        }
    }
}
