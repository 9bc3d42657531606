//! `/wishes/{slug}/changes`: what the wish's branch changes against the project's target branch
//! (files with their +/− counts, each file's diff in plain text), or once it merged what its merge
//! commit brought to the target, fetched by the wish page after
//! it loads (it runs git) and a page of its own without JavaScript; and, while the wish waits for
//! a person's review, the review: pass, or fail with comments on lines, sent as one verdict whose
//! notes name each `file:line` ([`crate::app::wishes::review`], as an agent's review is).

use std::path::Path as FsPath;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::Router;

use crate::app::wish_lifecycle::find;
use crate::app::wishes::review;
use crate::app::Fields;
use crate::db::sessions::Session;
use crate::domain::review::Verdict;
use crate::domain::wish::{WishPhase, WishStatus};
use crate::git::branches;
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::diff::{self, DiffFile};
use crate::pages::view::{no_block, render, see_other, BlockQuery, Chrome, PageForm, PageResult};
use crate::pages::wish_conductor::Landed;
use crate::pages::wishes::project_of;

pub fn router() -> Router<AppState> {
    Router::new().route("/wishes/{slug}/changes", get(changes)).route("/wishes/{slug}/review", post(submit))
}

#[derive(Template)]
#[template(path = "wishes/changes.html", blocks = ["changes"])]
struct ChangesPage {
    chrome: Chrome,
    slug: String,
    title: String,
    target: String,
    /// The wish's branch, when it has one and has not merged.
    branch: Option<String>,
    /// The merged wish's merge commit (short): the diff is what it brought to `target`.
    merge_commit: Option<String>,
    /// Why the diff cannot be shown (the branch is not in the repository yet, git failed).
    unavailable: Option<String>,
    files: Vec<DiffFile>,
    added: u64,
    removed: u64,
    /// The wish waits for a person's review: the review form is offered.
    reviewing: bool,
}

#[tracing::instrument(skip_all, fields(slug = ?slug), err(Debug, level = "debug"))]
async fn changes(
    State(state): State<AppState>,
    session: Session,
    Path(slug): Path<String>,
    Query(query): Query<BlockQuery>,
) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "wishes", format!("Changes of {slug}")).await?;
    let wish = find(&mut conn, &slug).await?;
    let project = project_of(&mut conn, wish.project_id).await?;
    let reviewing = wish.status == WishStatus::Executing && wish.phase == WishPhase::HumanReview && !wish.held;
    let (target, repo) = project
        .map(|p| {
            let dir = crate::app::repository::local_dir(&state.data_dir, p.location());
            (p.target_branch, dir.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    let landed = Landed::load(&mut conn, &wish, &target, &repo).await?;
    drop(conn);
    let (mut files, mut unavailable) = (Vec::new(), None);
    match (&landed, &wish.branch) {
        // Merged: what landed is the merge commit against the target as it was before it.
        (Some(Landed { commit: Some(commit), base: Some(base), .. }), _) => {
            match branches::changes(FsPath::new(&repo), base, commit).await {
                Ok(changed) => files = changed,
                Err(e) => unavailable = Some(format!("git could not read the merge commit: {e}")),
            }
        }
        (Some(landed), _) => {
            unavailable = Some(format!(
            "The wish merged into {}; its merge was not made by the merge queue, so there is no merge commit to show.",
            landed.target
        ))
        }
        (None, None) => unavailable = Some("The wish has no branch yet: it gets one when it starts.".to_owned()),
        (None, Some(branch)) => match branches::head(FsPath::new(&repo), branch).await {
            Ok(Some(_)) => match branches::changes(FsPath::new(&repo), &target, branch).await {
                Ok(changed) => files = changed,
                Err(e) => unavailable = Some(format!("git could not compare the branches: {e}")),
            },
            Ok(None) => unavailable = Some(format!("The branch {branch} is not in the project's repository yet.")),
            Err(e) => unavailable = Some(format!("git could not read the branch: {e}")),
        },
    }
    let added = files.iter().filter_map(|f| f.added).map(u64::from).sum();
    let removed = files.iter().filter_map(|f| f.removed).map(u64::from).sum();
    let page = ChangesPage {
        chrome,
        slug: wish.slug,
        title: wish.title,
        branch: if landed.is_some() { None } else { wish.branch },
        merge_commit: landed.as_ref().and_then(|l| l.commit.as_ref().map(|_| l.short().to_owned())),
        target: landed.map_or(target, |l| l.target),
        unavailable,
        files: diff::files(files),
        added,
        removed,
        reviewing,
    };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("changes") => Ok(render(&page.as_changes())),
        Some(other) => Err(no_block(other)),
    }
}

/// The longest comment or note kept, in characters (an agent's notes file has the same bound).
const MAX_NOTE: usize = 100_000;
/// The most line comments one review carries.
const MAX_COMMENTS: usize = 500;

/// A person's review: `verdict` (`pass` or `fail`), general `notes`, and line comments as
/// `comment_at` (`file:line`) followed by its `comment`, in the order the page lists them.
#[tracing::instrument(skip_all, fields(slug = ?slug), err(Debug, level = "debug"))]
async fn submit(
    State(state): State<AppState>,
    Path(slug): Path<String>,
    PageForm(pairs): PageForm<Vec<(String, String)>>,
) -> PageResult {
    let (mut verdict, mut general, mut comments) = (String::new(), String::new(), Vec::<(String, String)>::new());
    let mut at = String::new();
    for (name, value) in pairs {
        match name.as_str() {
            "verdict" => verdict = value,
            "notes" => general = value,
            "comment_at" => at = value,
            "comment" => comments.push((std::mem::take(&mut at), value)),
            _ => {}
        }
    }
    let mut errors = Fields::default();
    errors.max_len("notes", &general, MAX_NOTE);
    errors.check("comment", comments.len() <= MAX_COMMENTS, format!("at most {MAX_COMMENTS} comments"));
    for (i, (at, body)) in comments.iter().enumerate() {
        errors.max_len(format!("comment[{i}]"), body, MAX_NOTE);
        errors.max_len(format!("comment_at[{i}]"), at, 5_000);
    }
    let verdict = match verdict.as_str() {
        "pass" => Verdict::Pass,
        "fail" => Verdict::Fail,
        _ => {
            errors.check("verdict", false, "must be `pass` or `fail`");
            Verdict::Fail
        }
    };
    errors.finish().map_err(ApiError::from)?;
    let notes = diff::review_notes(&general, &comments);
    if verdict == Verdict::Fail && notes.is_empty() {
        let why = "say what must change: comment on a line or write a note";
        return Err(ApiError::from(crate::app::Error::invalid("notes", why)).into());
    }
    review(&state, &slug, verdict, &notes).await?;
    Ok(see_other(&format!("/wishes/{slug}")))
}
