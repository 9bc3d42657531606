//! Wishes: create one with its plan, walk its lifecycle, review
//! it, record the merge queue's verdict, move its card. Group progress is [`super::groups`].

use serde::Deserialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::idempotency::{self, Idempotency};
use super::wish_lifecycle::{act, detail, find, refused_provider, start_waiting, WishDetail};
use super::{boards, Ctx, Error, FieldError, Fields, Result};
use crate::db::board_columns::{Card, LockedColumn};
use crate::db::projects as projects_db;
use crate::db::wishes::{self, NewGroup, Wish};
use crate::domain::agent_kind::is_valid_branch;
use crate::domain::plan::{self, PlanError};
use crate::domain::project::ConductorConfig;
use crate::domain::review::Verdict;
use crate::domain::typed;
use crate::domain::wish::{WishEvent, WishStatus};
use crate::providers::Providers;

/// What a new wish is made of.
#[derive(Debug, Default)]
pub struct NewWish {
    pub slug: String,
    /// The project's slug.
    pub project: String,
    pub title: String,
    pub description: String,
    pub branch: Option<String>,
    pub review_cap: Option<i32>,
    /// Slugs of wishes that must merge first.
    pub blocked_by: Vec<String>,
    /// The plan; may be empty (a draft planned later).
    pub groups: Vec<NewGroup>,
}

// The merge queue's verdict on a `pending_merge` wish.
#[derive(Debug, Clone, Copy, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(example = "merged")]
pub enum MergeOutcome {
    Merged,
    Conflict,
    Failed,
}

/// Validates and inserts a wish with its plan, in the caller's transaction.
pub async fn create(conn: &mut PgConnection, providers: &Providers, new: NewWish) -> Result<WishDetail> {
    let mut errors = Fields::default();
    errors.check("slug", plan::is_valid_key(&new.slug), "use lowercase letters, digits and '-' (at most 63)");
    errors.check(
        "title",
        !new.title.trim().is_empty() && new.title.chars().count() <= 300,
        "must be 1 to 300 characters",
    );
    errors.rule("title", typed::check_line(new.title.trim()));
    errors.max_len("description", &new.description, MAX_DESCRIPTION);
    errors.rule("description", typed::check(&new.description));
    errors.check("review_cap", new.review_cap.is_none_or(|c| c >= 1), "must be at least 1");
    let branch = new.branch.map(|b| b.trim().to_owned());
    if let Some(branch) = &branch {
        errors.check("branch", is_valid_branch(branch), "must be a branch name git accepts (not HEAD)");
    }
    errors.check("blocked_by", new.blocked_by.len() <= 100, "at most 100 wishes");
    errors.check("groups", new.groups.len() <= MAX_GROUPS, format!("at most {MAX_GROUPS} groups"));
    let groups = errors.take(checked_groups(new.groups))?.unwrap_or_default();
    if errors.is_ok() && !groups.is_empty() {
        errors.take(validate_plan(&groups))?;
    }
    errors.finish()?;
    let order = if groups.is_empty() { Vec::new() } else { validate_plan(&groups)? };
    let project = projects_db::find(conn, &new.project, false)
        .await?
        .ok_or_else(|| Error::invalid("project", format!("no project `{}`", new.project)))?;
    if branch.as_deref() == Some(project.target_branch.as_str()) {
        return Err(Error::invalid(
            "branch",
            format!("is the project's target branch; a wish's work merges into `{}`", project.target_branch),
        ));
    }
    confined_groups(providers, &project.conductor_config, None, &groups)?;
    let blocked_by = blocker_ids(conn, &new.blocked_by).await?;
    let row = wishes::NewWish {
        slug: new.slug,
        project_id: project.id,
        title: new.title.trim().to_owned(),
        description: new.description,
        branch,
        review_cap: new.review_cap,
        blocked_by,
    };
    let wish = wishes::insert(conn, &row).await.map_err(|e| match e {
        sqlx::Error::Database(d) if d.is_unique_violation() => {
            Error::conflict(format!("a wish `{}` exists already", row.slug), None)
        }
        other => other.into(),
    })?;
    let wish = wishes::insert_groups(conn, &wish, &groups, &order).await?;
    detail(conn, wish).await
}

/// Creates a wish in its own transaction, recording its idempotency key (if any) in it.
#[tracing::instrument(skip_all, fields(slug = ?new.slug), err(level = "debug"))]
pub async fn create_now(ctx: &Ctx, new: NewWish, idem: Option<&Idempotency>) -> Result<WishDetail> {
    let mut tx = ctx.db.begin().await?;
    let detail = create(&mut tx, &ctx.providers.current(), new).await?;
    idempotency::record(&mut tx, idem, &detail).await?;
    ctx.feed.commit(tx).await?;
    Ok(detail)
}

/// One lifecycle event that needs nothing but the wish: queue, start, hold, release, cancel,
/// interrupt, resume, submit (and plan, keeping the plan it has).
#[tracing::instrument(skip_all, fields(slug = ?slug, event = ?event), err(level = "debug"))]
pub async fn lifecycle(ctx: &Ctx, slug: &str, event: WishEvent, reason: Option<&str>) -> Result<WishDetail> {
    let mut tx = ctx.db.begin().await?;
    let wish = find(&mut tx, slug).await?;
    let mut wish = act(&mut tx, &wish, event, reason).await?;
    if event == WishEvent::Release {
        wish = super::groups::complete_if_done(&mut tx, wish).await?;
    }
    let detail = detail(&mut tx, wish).await?;
    ctx.feed.commit(tx).await?;
    Ok(detail)
}

/// `draft → planned`; with `groups`, the draft's plan is replaced first (checked as on create).
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn plan(ctx: &Ctx, slug: &str, groups: Option<Vec<NewGroup>>) -> Result<WishDetail> {
    let mut tx = ctx.db.begin().await?;
    let mut wish = find(&mut tx, slug).await?;
    if let Some(groups) = groups {
        if wish.status != WishStatus::Draft {
            return Err(Error::conflict("only a draft's plan can be replaced", Some(wish.status.as_str())));
        }
        let groups = checked_groups(groups)?;
        let order = validate_plan(&groups)?;
        confined_plan(&mut tx, &ctx.providers.current(), &wish, &groups).await?;
        wishes::delete_groups(&mut tx, wish.id).await?;
        wish = wishes::insert_groups(&mut tx, &wish, &groups, &order).await?;
    }
    let wish = act(&mut tx, &wish, WishEvent::Plan, None).await?;
    let detail = detail(&mut tx, wish).await?;
    ctx.feed.commit(tx).await?;
    Ok(detail)
}

/// Replaces a draft's plan and leaves it a draft: a person editing the plan in the dashboard
/// (`plan` also moves the wish on). Checked exactly as `plan` checks it; the wish's row is
/// locked, so a plan that moved on meanwhile is refused rather than rewritten.
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn replace_plan(ctx: &Ctx, slug: &str, groups: Vec<NewGroup>) -> Result<WishDetail> {
    let groups = checked_groups(groups)?;
    let order = validate_plan(&groups)?;
    let mut tx = ctx.db.begin().await?;
    let found = find(&mut tx, slug).await?;
    let wish = wishes::lock(&mut tx, found.id).await?.ok_or_else(|| Error::NotFound(format!("no wish `{slug}`")))?;
    if wish.status != WishStatus::Draft {
        return Err(Error::conflict("only a draft's plan can be edited", Some(wish.status.as_str())));
    }
    confined_plan(&mut tx, &ctx.providers.current(), &wish, &groups).await?;
    wishes::delete_groups(&mut tx, wish.id).await?;
    let wish = wishes::insert_groups(&mut tx, &wish, &groups, &order).await?;
    let keys: Vec<&str> = groups.iter().map(|g| g.key.as_str()).collect();
    crate::db::events::record(
        &mut tx,
        "wish.plan_changed",
        &wishes::subject(&wish),
        serde_json::json!({"groups": keys}),
    )
    .await?;
    let detail = detail(&mut tx, wish).await?;
    ctx.feed.commit(tx).await?;
    Ok(detail)
}

/// Records a review of a wish under review: a pass completes it, a fail sends
/// the notes to a fix agent, a fail at the cap fails it ([`super::wish_lifecycle::verdict`]).
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn review(ctx: &Ctx, slug: &str, verdict: Verdict, notes: &str) -> Result<WishDetail> {
    let mut tx = ctx.db.begin().await?;
    let wish = find(&mut tx, slug).await?;
    let updated = super::wish_lifecycle::verdict(&mut tx, wish, verdict, notes).await?;
    let detail = detail(&mut tx, updated).await?;
    ctx.feed.commit(tx).await?;
    Ok(detail)
}

/// The merge queue's verdict on a `pending_merge` wish. On `merged`, queued wishes that waited
/// for it are re-checked and start if nothing else blocks them.
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn record_merge(ctx: &Ctx, slug: &str, outcome: MergeOutcome, why: Option<&str>) -> Result<WishDetail> {
    let event = match outcome {
        MergeOutcome::Merged => WishEvent::Merged,
        MergeOutcome::Conflict => WishEvent::Conflict,
        MergeOutcome::Failed => WishEvent::MergeFailed,
    };
    let mut tx = ctx.db.begin().await?;
    let wish = find(&mut tx, slug).await?;
    let wish = act(&mut tx, &wish, event, why).await?;
    if wish.status == WishStatus::Merged {
        start_waiting(&mut tx, &wish).await?;
    }
    let detail = detail(&mut tx, wish).await?;
    ctx.feed.commit(tx).await?;
    Ok(detail)
}

/// Moves wish `slug` to a column of its board (or, on no board yet, of a board of its project)
/// under the column's WIP limit, in the caller's transaction.
pub async fn move_to(conn: &mut PgConnection, slug: &str, column_id: Uuid) -> Result<Wish> {
    let wish = find(&mut *conn, slug).await?;
    let column = LockedColumn::lock(&mut *conn, None, Some(column_id), Some(Card::Wish(wish.id)))
        .await?
        .filter(|c| c.project_id == wish.project_id && wish.board_id.is_none_or(|board| board == c.board_id))
        .ok_or_else(|| {
            let on = if wish.board_id.is_some() { "this wish's board" } else { "a board of this wish's project" };
            Error::invalid("column_id", format!("no such column on {on}"))
        })?;
    if column.is_full() {
        return Err(boards::column_full(&column));
    }
    wishes::move_to_column(conn, &wish, &column)
        .await?
        .ok_or_else(|| Error::conflict(format!("wish `{slug}` was put on another board meanwhile; try again"), None))
}

/// Moves a wish's card in its own transaction.
#[tracing::instrument(skip_all, fields(slug = ?slug), err(level = "debug"))]
pub async fn move_card(ctx: &Ctx, slug: &str, column_id: Uuid) -> Result<WishDetail> {
    let mut tx = ctx.db.begin().await?;
    let wish = move_to(&mut tx, slug, column_id).await?;
    let detail = detail(&mut tx, wish).await?;
    ctx.feed.commit(tx).await?;
    Ok(detail)
}

/// The groups as given, titles trimmed, each checked; errors name `groups[i].<field>`.
fn checked_groups(groups: Vec<NewGroup>) -> Result<Vec<NewGroup>> {
    let mut errors = Fields::default();
    for (i, g) in groups.iter().enumerate() {
        errors.check(
            format!("groups[{i}].title"),
            !g.title.trim().is_empty() && g.title.chars().count() <= 300,
            "must be 1 to 300 characters",
        );
        errors.rule(format!("groups[{i}].title"), typed::check_line(g.title.trim()));
        errors.max_len(format!("groups[{i}].goal"), &g.goal, MAX_DESCRIPTION);
        errors.rule(format!("groups[{i}].goal"), typed::check(&g.goal));
        errors.check(format!("groups[{i}].depends_on"), g.depends_on.len() <= MAX_GROUPS, "too many entries");
        errors.check(
            format!("groups[{i}].max_iterations"),
            g.max_iterations.is_none_or(|m| m >= 1),
            "must be at least 1",
        );
        errors.max_len_opt(format!("groups[{i}].provider"), g.provider.as_deref(), 64);
    }
    errors.finish()?;
    Ok(groups.into_iter().map(|g| NewGroup { title: g.title.trim().to_owned(), ..g }).collect())
}

/// [`refused_provider`] for each group of a plan; errors name `groups[i].provider`.
fn confined_groups(
    providers: &Providers,
    config: &ConductorConfig,
    wish_provider: Option<&str>,
    groups: &[NewGroup],
) -> Result<()> {
    let mut errors = Fields::default();
    for (i, group) in groups.iter().enumerate() {
        let Some(named) = group.provider.as_deref() else { continue };
        if let Some(why) = refused_provider(providers, config, wish_provider, named) {
            errors.check(format!("groups[{i}].provider"), false, format!("group `{}`: {why}", group.key));
        }
    }
    errors.finish()
}

/// [`confined_groups`] for the plan of an existing wish, read with its project's settings.
async fn confined_plan(conn: &mut PgConnection, providers: &Providers, wish: &Wish, groups: &[NewGroup]) -> Result<()> {
    let config = projects_db::conductor_config(conn, wish.project_id).await?;
    confined_groups(providers, &config, wish.provider.as_deref(), groups)
}

/// The longest description or group goal kept, in characters.
const MAX_DESCRIPTION: usize = 100_000;
/// The most groups a plan may have: about what a 4 MB body holds (the domain bench runs wishes of
/// 6,400 groups).
const MAX_GROUPS: usize = 50_000;

/// Checks the plan and returns its topological order; errors name the offending keys.
pub fn validate_plan(groups: &[NewGroup]) -> Result<Vec<usize>> {
    let specs: Vec<_> = groups.iter().map(NewGroup::spec).collect();
    let index_of = |key: &str| groups.iter().position(|g| g.key == key).unwrap_or(0);
    plan::validate(&specs).map_err(|error| {
        let field = match &error {
            PlanError::Empty => "groups".to_owned(),
            PlanError::InvalidKey { key } | PlanError::DuplicateKey { key } => {
                format!("groups[{}].key", index_of(key))
            }
            PlanError::SelfDependency { key } => format!("groups[{}].depends_on", index_of(key)),
            PlanError::UnknownDependency { group, .. } => format!("groups[{}].depends_on", index_of(group)),
            PlanError::Cycle { .. } => "groups".to_owned(),
        };
        Error::Invalid(vec![FieldError::new(field, error.to_string())])
    })
}

async fn blocker_ids(conn: &mut PgConnection, slugs: &[String]) -> Result<Vec<Uuid>> {
    let found = wishes::ids_by_slug(conn, slugs).await?;
    let missing: Vec<&str> = slugs.iter().filter(|s| !found.iter().any(|(f, _)| f == *s)).map(String::as_str).collect();
    if !missing.is_empty() {
        return Err(Error::invalid("blocked_by", format!("no such wish: {}", missing.join(", "))));
    }
    Ok(found.into_iter().map(|(_, id)| id).collect())
}
