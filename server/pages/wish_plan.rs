//! `/wishes/{slug}/plan`: a draft's plan as a form — its groups' keys, titles, goals and
//! dependencies — and `POST` that replaces it with what the person typed, leaving the wish a
//! draft. The use case is [`crate::app::wishes::replace_plan`], which checks a plan as the
//! API's `plan` does; a refused plan comes back with each message beside its field.

use std::collections::HashMap;

use askama::Template;
use axum::extract::State;
use axum::routing::get;
use axum::Router;

use crate::app::wish_lifecycle::find;
use crate::app::wishes;
use crate::app::Error;
use crate::db::sessions::Session;
use crate::db::wishes::groups as wish_groups;
use crate::domain::wish::WishStatus;
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::view::{render, see_other, Chrome, PageForm, PagePath, PageResult};
use crate::pages::wish_form::{refused, render_with, GroupFields, WishFields};

pub fn router() -> Router<AppState> {
    Router::new().route("/wishes/{slug}/plan", get(edit).post(save))
}

#[derive(Template)]
#[template(path = "wishes/plan.html")]
struct PlanPage {
    chrome: Chrome,
    slug: String,
    title: String,
    /// Only a draft's plan can be edited; otherwise the page says so and shows no form.
    draft: bool,
    fields: WishFields,
    errors: HashMap<String, String>,
    general: Option<String>,
}

impl PlanPage {
    fn err(&self, field: &str) -> &str {
        self.errors.get(field).map(String::as_str).unwrap_or("")
    }

    fn group_err(&self, index: &usize, field: &str) -> &str {
        self.err(&format!("groups[{index}].{field}"))
    }
}

/// The page for wish `slug`, showing `fields` (the stored plan when `None`) and a blank row.
async fn page(
    state: &AppState,
    session: &Session,
    slug: &str,
    fields: Option<WishFields>,
) -> Result<PlanPage, ApiError> {
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, session, "wishes", format!("Plan of {slug}")).await?;
    let wish = find(&mut conn, slug).await?;
    let fields = match fields {
        Some(fields) => fields,
        None => {
            let groups = wish_groups(&mut conn, wish.id).await?;
            let mut rows: Vec<GroupFields> = groups
                .into_iter()
                .map(|g| GroupFields { key: g.key, title: g.title, goal: g.goal, depends_on: g.depends_on.join(", ") })
                .collect();
            rows.push(GroupFields::default());
            WishFields::of_groups(rows)
        }
    };
    Ok(PlanPage {
        chrome,
        slug: wish.slug,
        title: wish.title,
        draft: wish.status == WishStatus::Draft,
        fields,
        errors: HashMap::new(),
        general: None,
    })
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn edit(State(state): State<AppState>, session: Session, PagePath(slug): PagePath<String>) -> PageResult {
    Ok(render(&page(&state, &session, &slug, None).await?))
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn save(
    State(state): State<AppState>,
    session: Session,
    PagePath(slug): PagePath<String>,
    PageForm(pairs): PageForm<Vec<(String, String)>>,
) -> PageResult {
    let mut fields = WishFields::from_pairs(&pairs);
    if pairs.iter().any(|(name, _)| name == "add_group") {
        fields.groups.push(GroupFields::default());
        return Ok(render(&page(&state, &session, &slug, Some(fields)).await?));
    }
    let refusal = match wishes::replace_plan(&state, &slug, fields.new_groups()).await {
        Ok(_) => return Ok(see_other(&format!("/wishes/{slug}"))),
        Err(e @ (Error::Invalid(_) | Error::Conflict { .. })) => e,
        Err(other) => return Err(other.into()),
    };
    fields.groups.push(GroupFields::default());
    let mut page = page(&state, &session, &slug, Some(fields)).await?;
    let status = refused(refusal, &mut page.errors, &mut page.general);
    Ok(render_with(&page, status))
}
