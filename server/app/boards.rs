//! Boards: a project's Kanban pipeline — create one (from explicit columns, a template, or the
//! default set), rename, delete and reconcile it — and the templates new boards copy their
//! columns from. Its columns are [`columns`]; cards move through [`super::tasks::move_to`] and
//! [`super::wishes::move_to`].

pub mod columns;
pub mod flow;

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{Ctx, Error, Fields, IfMatch, Result};
use crate::db::board_columns::{self as columns_db, LockedColumn, Moved};
use crate::db::board_templates::{self as templates_db, BoardTemplate};
use crate::db::boards::{self, Board, BoardHead};
use crate::db::projects;
use crate::domain::board::{default_columns, validate_columns, ColumnSpec, InvalidColumn};

const MAX_TEMPLATE_DESCRIPTION: usize = 2000;

/// A column the domain refuses is a bad field of the caller's input.
impl From<InvalidColumn> for Error {
    fn from(invalid: InvalidColumn) -> Error {
        Error::invalid(invalid.field, invalid.message)
    }
}

/// Columns the domain refuses: each bad field of the caller's input.
impl From<Vec<InvalidColumn>> for Error {
    fn from(invalid: Vec<InvalidColumn>) -> Error {
        Error::Invalid(invalid.into_iter().map(|i| super::FieldError::new(i.field, i.message)).collect())
    }
}

/// What a new board is made of: `columns` or `template`, not both; with neither the board gets
/// Backlog, In progress, Review (gate `human`) and Done.
#[derive(Debug, Default)]
pub struct NewBoard {
    pub name: String,
    pub columns: Option<Vec<ColumnSpec>>,
    /// The name of a board template to copy the columns from.
    pub template: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"moved": 3, "tasks": 2, "wishes": 1, "column_id": "9a0e6c1e-3f7d-4b5a-8d0e-2b7c4e9f1a11"}))]
pub struct Reconciled {
    /// Tasks plus wishes put back on the board.
    pub moved: i64,
    pub tasks: i64,
    pub wishes: i64,
    /// The column they were put in: the board's first.
    pub column_id: Option<Uuid>,
}

/// The conflict of a card sent to a column at its WIP limit.
pub fn column_full(column: &LockedColumn) -> Error {
    let limit = column.wip_limit.unwrap_or_default();
    Error::conflict(format!("column `{}` is full: its WIP limit is {limit}", column.name), None)
}

pub fn no_board(id: Uuid) -> Error {
    Error::NotFound(format!("no board {id}"))
}

/// Validates and creates a board in project `slug`, in the caller's transaction.
pub async fn create(conn: &mut PgConnection, slug: &str, new: NewBoard) -> Result<Board> {
    let project = projects::find(&mut *conn, slug, false)
        .await?
        .ok_or_else(|| Error::NotFound(format!("no project `{slug}`")))?;
    // Every bad field is named at once: the name, the columns, the template.
    let mut errors = Fields::default();
    let name = errors.take(board_name(&new.name))?;
    let columns = match (new.columns, &new.template) {
        (Some(_), Some(_)) => {
            errors.check("template", false, "give either columns or a template, not both");
            None
        }
        (Some(columns), None) => errors.take(validate_columns("columns", &columns).map_err(Error::from))?,
        (None, Some(template)) => {
            let found = templates_db::find_by_name(&mut *conn, template).await?;
            errors.check("template", found.is_some(), format!("no board template named `{template}`"));
            found.map(|t| t.columns)
        }
        (None, None) => Some(default_columns()),
    };
    errors.finish()?;
    let (Some(name), Some(columns)) = (name, columns) else { unreachable!("every None recorded an error") };
    boards::create(conn, project.id, &project.slug, &name, &columns, new.template.as_deref())
        .await
        .map_err(Error::unique_as("boards_project_id_name_key", format!("project `{slug}` has a board named `{name}`")))
}

/// Creates a board in its own transaction (the API and the dashboard).
#[tracing::instrument(skip_all, fields(project = ?slug), err(level = "debug"))]
pub async fn create_now(ctx: &Ctx, slug: &str, new: NewBoard) -> Result<Board> {
    let mut tx = ctx.db.begin().await?;
    let board = create(&mut tx, slug, new).await?;
    ctx.feed.commit(tx).await?;
    Ok(board)
}

/// Renames a board, if it is still at a version `if_match` names.
#[tracing::instrument(skip_all, fields(board = ?id), err(level = "debug"))]
pub async fn rename(ctx: &Ctx, id: Uuid, if_match: &IfMatch, name: &str) -> Result<Board> {
    let name = board_name(name)?;
    let mut tx = ctx.db.begin().await?;
    let head = locked(&mut tx, id, if_match).await?;
    if head.name != name {
        boards::rename(&mut tx, &head, &name).await.map_err(Error::unique_as(
            "boards_project_id_name_key",
            format!("the project has a board named `{name}`"),
        ))?;
    }
    let board = boards::get(&mut tx, id).await?.ok_or_else(|| no_board(id))?;
    ctx.feed.commit(tx).await?;
    Ok(board)
}

/// Deletes a board and its columns. Its tasks and wishes stay, on no board.
#[tracing::instrument(skip_all, fields(board = ?id), err(level = "debug"))]
pub async fn delete(ctx: &Ctx, id: Uuid) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    let head = boards::find(&mut tx, id, true).await?.ok_or_else(|| no_board(id))?;
    boards::delete(&mut tx, &head).await?;
    ctx.feed.commit(tx).await?;
    Ok(())
}

/// Puts every task and wish of the board that sits in no column of it (none, or another
/// board's) into its first column, in the caller's transaction, and says how many moved.
pub async fn reconcile(conn: &mut PgConnection, id: Uuid) -> Result<Reconciled> {
    boards::find(&mut *conn, id, true).await?.ok_or_else(|| no_board(id))?;
    let first = boards::columns_of(&mut *conn, &[id]).await?.first().map(|c| c.id);
    if first.is_none() {
        let strays = columns_db::strays(&mut *conn, id).await?;
        if strays.total() > 0 {
            return Err(Error::conflict(
                format!(
                    "{} tasks and {} wishes need a column, but the board has none; add one first",
                    strays.tasks, strays.wishes
                ),
                None,
            ));
        }
    }
    let Moved { tasks, wishes } = columns_db::reconcile(conn, id, first).await?;
    Ok(Reconciled { moved: tasks + wishes, tasks, wishes, column_id: first })
}

/// Reconciles a board in its own transaction (the API and the dashboard).
#[tracing::instrument(skip_all, fields(board = ?id), err(level = "debug"))]
pub async fn reconcile_now(ctx: &Ctx, id: Uuid) -> Result<Reconciled> {
    let mut tx = ctx.db.begin().await?;
    let reconciled = reconcile(&mut tx, id).await?;
    ctx.feed.commit(tx).await?;
    Ok(reconciled)
}

/// Creates a board template: 1 to 30 columns with distinct names, under a name boards use in
/// `template`.
#[tracing::instrument(skip_all, fields(name = ?name), err(level = "debug"))]
pub async fn create_template(
    ctx: &Ctx,
    name: &str,
    description: Option<&str>,
    columns: &[ColumnSpec],
) -> Result<BoardTemplate> {
    let name = name.trim();
    let description = description.unwrap_or("").trim();
    let mut errors = Fields::default();
    errors.check("name", !name.is_empty() && name.chars().count() <= 100, "must be 1 to 100 characters");
    errors.max_len("description", description, MAX_TEMPLATE_DESCRIPTION);
    let columns = errors.take(validate_columns("columns", columns).map_err(Error::from))?;
    errors.finish()?;
    let columns = columns.unwrap_or_default();
    let mut tx = ctx.db.begin().await?;
    let template = templates_db::create(&mut tx, name, description, &columns)
        .await
        .map_err(Error::unique_as("board_templates_name_key", format!("a board template named `{name}` exists")))?;
    ctx.feed.commit(tx).await?;
    Ok(template)
}

/// Locks the board for a change and checks `If-Match` against its version.
async fn locked(conn: &mut PgConnection, id: Uuid, if_match: &IfMatch) -> Result<BoardHead> {
    let head = boards::find(conn, id, true).await?.ok_or_else(|| no_board(id))?;
    if_match.check(&format!("board {id}"), head.version)?;
    Ok(head)
}

fn board_name(name: &str) -> Result<String> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 200 {
        return Err(Error::invalid("name", "must be 1 to 200 characters"));
    }
    Ok(name.to_owned())
}
