//! `/new-wish`: the form that makes a wish with its plan, and `POST /wishes` that takes it. The
//! form is plain HTML (it works without JavaScript): "Add a group" posts it back for one more row;
//! a refused wish comes back with each message beside its field. Creation is the use case
//! [`crate::app::wishes::create`], so the form and `POST /api/v1/wishes` accept and refuse exactly
//! the same.

use std::collections::HashMap;

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::Router;

use crate::app::wishes::{self, NewWish};
use crate::app::Error;
use crate::db::projects;
use crate::db::sessions::Session;
use crate::db::wishes::NewGroup;
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::view::{list, render, see_other, Chrome, PageForm, PageResult};

pub fn router() -> Router<AppState> {
    Router::new().route("/new-wish", get(new_wish)).route("/wishes", post(create))
}

/// Empty group rows a new form starts with.
const START_ROWS: usize = 3;

#[derive(Debug, Clone, Default)]
pub(super) struct GroupFields {
    pub(super) key: String,
    pub(super) title: String,
    pub(super) goal: String,
    pub(super) depends_on: String,
}

impl GroupFields {
    fn is_blank(&self) -> bool {
        [&self.key, &self.title, &self.goal, &self.depends_on].iter().all(|f| f.trim().is_empty())
    }
}

/// What the person typed, to show again.
#[derive(Debug, Clone, Default)]
pub(super) struct WishFields {
    project: String,
    slug: String,
    title: String,
    description: String,
    branch: String,
    review_cap: String,
    blocked_by: String,
    pub(super) groups: Vec<GroupFields>,
}

impl WishFields {
    /// Reads the form's pairs: `slug=…`, `groups[2].key=…`, …
    pub(super) fn from_pairs(pairs: &[(String, String)]) -> WishFields {
        let mut fields = WishFields::default();
        let mut groups: std::collections::BTreeMap<usize, GroupFields> = Default::default();
        for (name, value) in pairs {
            if let Some((index, field)) = group_field(name) {
                let group = groups.entry(index).or_default();
                match field {
                    "key" => group.key = value.clone(),
                    "title" => group.title = value.clone(),
                    "goal" => group.goal = value.clone(),
                    "depends_on" => group.depends_on = value.clone(),
                    _ => {}
                }
                continue;
            }
            let slot = match name.as_str() {
                "project" => &mut fields.project,
                "slug" => &mut fields.slug,
                "title" => &mut fields.title,
                "description" => &mut fields.description,
                "branch" => &mut fields.branch,
                "review_cap" => &mut fields.review_cap,
                "blocked_by" => &mut fields.blocked_by,
                _ => continue,
            };
            *slot = value.clone();
        }
        // Blank rows are dropped, so `groups[i]` in an error is the i-th row shown again.
        fields.groups = groups.into_values().filter(|g| !g.is_blank()).collect();
        fields
    }

    /// The new wish; a bad number is refused here, everything else by the use case.
    fn to_new_wish(&self) -> Result<NewWish, Error> {
        let review_cap = match self.review_cap.trim() {
            "" => None,
            n => Some(n.parse().map_err(|_| Error::invalid("review_cap", "must be a whole number"))?),
        };
        Ok(NewWish {
            // No slug given: made from the title, as the CLI makes one.
            slug: match self.slug.trim() {
                "" => crate::domain::wish::slug_of(&self.title),
                given => given.to_owned(),
            },
            project: self.project.trim().to_owned(),
            title: self.title.clone(),
            description: self.description.trim().to_owned(),
            branch: Some(self.branch.trim().to_owned()).filter(|b| !b.is_empty()),
            review_cap,
            blocked_by: list(&self.blocked_by),
            groups: self.new_groups(),
        })
    }

    /// Fields holding only a plan's group rows (the plan editor's form).
    pub(super) fn of_groups(groups: Vec<GroupFields>) -> WishFields {
        WishFields { groups, ..WishFields::default() }
    }

    /// The plan's groups as the use cases take them.
    pub(super) fn new_groups(&self) -> Vec<NewGroup> {
        self.groups
            .iter()
            .map(|g| NewGroup {
                key: g.key.trim().to_owned(),
                title: g.title.clone(),
                goal: g.goal.trim().to_owned(),
                depends_on: list(&g.depends_on),
                max_iterations: None,
                provider: None,
            })
            .collect()
    }
}

/// `groups[3].title` → `(3, "title")`.
fn group_field(name: &str) -> Option<(usize, &str)> {
    let rest = name.strip_prefix("groups[")?;
    let (index, field) = rest.split_once("].")?;
    Some((index.parse().ok().filter(|i| *i < 200)?, field))
}

#[derive(Template)]
#[template(path = "wishes/new.html")]
struct FormPage {
    chrome: Chrome,
    projects: Vec<String>,
    fields: WishFields,
    /// Field path → message, from a refused attempt.
    errors: HashMap<String, String>,
    /// A message that belongs to no one field (a conflict).
    general: Option<String>,
}

impl FormPage {
    fn err(&self, field: &str) -> &str {
        self.errors.get(field).map(String::as_str).unwrap_or("")
    }

    fn group_err(&self, index: &usize, field: &str) -> &str {
        self.err(&format!("groups[{index}].{field}"))
    }
}

async fn form_page(state: &AppState, session: &Session, fields: WishFields) -> Result<FormPage, ApiError> {
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, session, "wishes", "Make a wish").await?;
    let projects = projects::list(&mut conn, None, 1000).await?.into_iter().map(|p| p.slug).collect();
    Ok(FormPage { chrome, projects, fields, errors: HashMap::new(), general: None })
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn new_wish(State(state): State<AppState>, session: Session) -> PageResult {
    let fields = WishFields { groups: vec![GroupFields::default(); START_ROWS], ..WishFields::default() };
    Ok(render(&form_page(&state, &session, fields).await?))
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn create(
    State(state): State<AppState>,
    session: Session,
    PageForm(pairs): PageForm<Vec<(String, String)>>,
) -> PageResult {
    let mut fields = WishFields::from_pairs(&pairs);
    if pairs.iter().any(|(name, _)| name == "add_group") {
        fields.groups.push(GroupFields::default());
        return Ok(render(&form_page(&state, &session, fields).await?));
    }
    let attempt = async {
        let detail = wishes::create_now(&state, fields.to_new_wish()?, None).await?;
        Ok::<_, Error>(detail.wish.slug)
    };
    let refusal = match attempt.await {
        Ok(slug) => return Ok(see_other(&format!("/wishes/{slug}"))),
        Err(e @ (Error::Invalid(_) | Error::Conflict { .. })) => e,
        Err(other) => return Err(other.into()),
    };
    if fields.groups.is_empty() {
        fields.groups.push(GroupFields::default());
    }
    let mut page = form_page(&state, &session, fields).await?;
    let status = refused(refusal, &mut page.errors, &mut page.general);
    Ok(render_with(&page, status))
}

/// Puts a refusal's messages on a form page: each beside its field (422), or one for the whole
/// page (409, a conflict).
pub(super) fn refused(
    refusal: Error,
    errors: &mut HashMap<String, String>,
    general: &mut Option<String>,
) -> StatusCode {
    match refusal {
        Error::Invalid(fields) => {
            *errors = fields.into_iter().map(|e| (e.field, e.message)).collect();
            StatusCode::UNPROCESSABLE_ENTITY
        }
        other => {
            *general = Some(other.to_string());
            StatusCode::CONFLICT
        }
    }
}

/// The page rendered with `status`.
pub(super) fn render_with(page: &impl Template, status: StatusCode) -> axum::response::Response {
    let mut response = render(page);
    *response.status_mut() = status;
    response.into_response()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A form's pairs, as a browser posts them (the other forms' tests use it too).
    pub(in crate::pages) fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn group_rows_are_read_in_order_and_blank_ones_dropped() {
        let fields = WishFields::from_pairs(&pairs(&[
            ("groups[3].depends_on", "schema web"),
            ("groups[3].key", "e2e"),
            ("groups[0].key", "schema"),
            ("groups[1].title", ""),
            ("_csrf", "x"),
            ("slug", "billing"),
        ]));
        assert_eq!(fields.slug, "billing");
        let keys: Vec<&str> = fields.groups.iter().map(|g| g.key.as_str()).collect();
        assert_eq!(keys, ["schema", "e2e"]);
        let request = fields.to_new_wish().expect("a request");
        assert_eq!(request.groups[1].depends_on, ["schema", "web"]);
        assert!(request.branch.is_none());
    }

    #[test]
    fn a_review_cap_that_is_not_a_number_names_its_field() {
        let fields = WishFields { review_cap: "three".into(), ..WishFields::default() };
        match fields.to_new_wish() {
            Err(Error::Invalid(errors)) => assert_eq!(errors[0].field, "review_cap"),
            other => panic!("{other:?}"),
        }
        assert_eq!(group_field("groups[12].goal"), Some((12, "goal")));
        assert_eq!(group_field("groups[x].goal"), None);
    }
}
