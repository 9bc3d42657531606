//! `/boards`: every project's boards, and a form to make one (from a template or the default
//! columns); `/boards/{id}`: the Kanban board — columns with their gate and WIP limit, task and
//! wish cards, a form to add a task, reconcile for cards that lost their column. A card moves by
//! drag and drop or, from the keyboard, with its ← → buttons. Everything changes through the
//! API's own functions (`boards::create`, `boards::reconcile`, `insert_task`, `move_to`).

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use uuid::Uuid;

use crate::api::boards::{self as board_api, no_board, CreateBoard};
use crate::api::error::ApiError;
use crate::api::task_actions::move_to;
use crate::api::tasks::{insert_task, CreateTask};
use crate::api::AppState;
use crate::db::board_columns as columns_db;
use crate::db::boards::{self, Board};
use crate::db::sessions::Session;
use crate::db::{board_templates, projects, tasks, wishes};
use crate::pages::live::topic;
use crate::pages::view::{no_block, render, see_other, words, BlockQuery, Chrome, PageForm, PageResult};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/boards", get(list).post(create_board))
        .route("/boards/{id}", get(board))
        .route("/boards/{id}/tasks", post(create_task))
        .route("/boards/{id}/move", post(move_card))
        .route("/boards/{id}/reconcile", post(reconcile))
}

/// A board in the list.
struct BoardRow {
    id: Uuid,
    name: String,
    columns: String,
    cards: i64,
}

struct ProjectBoards {
    slug: String,
    name: String,
    boards: Vec<BoardRow>,
}

#[derive(Template)]
#[template(path = "boards/list.html", blocks = ["boards"])]
struct ListPage {
    chrome: Chrome,
    projects: Vec<ProjectBoards>,
    templates: Vec<String>,
}

#[tracing::instrument(skip_all, err(Debug))]
async fn list(State(state): State<AppState>, session: Session, Query(query): Query<BlockQuery>) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let chrome = Chrome::new(&mut conn, &session, "boards", "Boards").await?;
    let mut listed = Vec::new();
    for project in projects::list(&mut conn, None, 1000).await? {
        let boards = boards::list(&mut conn, project.id, None, 1000).await?;
        let boards = boards
            .into_iter()
            .map(|b| BoardRow {
                id: b.id,
                columns: b.columns.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(" → "),
                cards: b.columns.iter().map(|c| c.task_count + c.wish_count).sum(),
                name: b.name,
            })
            .collect();
        listed.push(ProjectBoards { slug: project.slug, name: project.name, boards });
    }
    let templates = board_templates::list(&mut conn, None, 1000).await?.into_iter().map(|t| t.name).collect();
    let page = ListPage { chrome, projects: listed, templates };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("boards") => Ok(render(&page.as_boards())),
        Some(other) => Err(no_block(other)),
    }
}

#[derive(Debug, Deserialize)]
struct NewBoard {
    project: String,
    name: String,
    /// Empty: the default columns.
    template: Option<String>,
}

#[tracing::instrument(skip_all, err(Debug))]
async fn create_board(State(state): State<AppState>, PageForm(form): PageForm<NewBoard>) -> PageResult {
    let body = CreateBoard { name: form.name, columns: None, template: form.template.filter(|t| !t.trim().is_empty()) };
    let mut tx = state.db.begin().await?;
    let board = board_api::create(&mut tx, form.project.trim(), body).await?;
    state.feed.commit(tx).await?;
    Ok(see_other(&format!("/boards/{}", board.id)))
}

/// A card on the board.
struct Card {
    id: String,
    title: String,
    status: &'static str,
    status_label: String,
    assignee: Option<String>,
    /// Wishes, and a wish's groups, open their wish.
    link: Option<String>,
    /// Tasks move between columns; a wish's place is its own.
    movable: bool,
}

/// A column with its cards and its neighbours' names (where ← and → send a card).
struct ColumnView {
    id: Uuid,
    name: String,
    gate: &'static str,
    action_skill: Option<String>,
    /// `WIP 3 / 5`, or how many tasks when there is no limit.
    load: String,
    full: bool,
    cards: Vec<Card>,
    prev: Option<String>,
    next: Option<String>,
}

#[derive(Template)]
#[template(path = "boards/board.html", blocks = ["board"])]
struct BoardPage {
    chrome: Chrome,
    board: Board,
    columns: Vec<ColumnView>,
    strays: i64,
    triggers: String,
}

/// Tasks shown on one board at most; more is no longer a board anyone reads.
const MAX_CARDS: i64 = 5000;

#[tracing::instrument(skip_all, fields(board = %id), err(Debug))]
async fn board(
    State(state): State<AppState>,
    session: Session,
    Path(id): Path<Uuid>,
    Query(query): Query<BlockQuery>,
) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let board = boards::get(&mut conn, id).await?.ok_or_else(|| no_board(id))?;
    let chrome = Chrome::new(&mut conn, &session, "boards", format!("Board {}", board.name)).await?;
    let filter = tasks::ListFilter { board_id: Some(id), ..tasks::ListFilter::default() };
    let task_list = tasks::list(&mut conn, &filter, MAX_CARDS).await?;
    let wish_list = wishes::on_board(&mut conn, id).await?;
    let wish_slugs: std::collections::HashMap<Uuid, String> = {
        let ids: Vec<Uuid> = task_list.iter().filter_map(|t| t.wish_id).collect();
        let mut slugs = std::collections::HashMap::new();
        for wish_id in ids {
            if let std::collections::hash_map::Entry::Vacant(slot) = slugs.entry(wish_id) {
                if let Some(slug) = tasks::refs::wish_slug(&mut conn, wish_id).await? {
                    slot.insert(slug);
                }
            }
        }
        slugs
    };
    let strays = columns_db::strays(&mut conn, id).await?.total();
    let mut columns: Vec<ColumnView> = board
        .columns
        .iter()
        .map(|c| ColumnView {
            id: c.id,
            name: c.name.clone(),
            gate: c.gate.as_str(),
            action_skill: c.action_skill.clone(),
            load: match c.wip_limit {
                Some(limit) => format!("WIP {} / {limit}", c.task_count),
                None if c.task_count == 1 => "1 task, no WIP limit".to_owned(),
                None => format!("{} tasks, no WIP limit", c.task_count),
            },
            full: c.wip_limit.is_some_and(|l| c.task_count >= i64::from(l)),
            cards: Vec::new(),
            prev: None,
            next: None,
        })
        .collect();
    for i in 0..columns.len() {
        columns[i].prev = i.checked_sub(1).map(|p| columns[p].name.clone());
        columns[i].next = columns.get(i + 1).map(|n| n.name.clone());
    }
    for task in &task_list {
        let Some(column) = columns.iter_mut().find(|c| Some(c.id) == task.column_id) else { continue };
        let wish = task.wish_id.and_then(|w| wish_slugs.get(&w));
        column.cards.push(Card {
            id: task.id.to_string(),
            title: task.title.clone(),
            status: task.status.as_str(),
            status_label: words(task.status.as_str()),
            assignee: task.assignee.clone(),
            link: wish.map(|slug| format!("/wishes/{slug}")),
            movable: true,
        });
    }
    for wish in &wish_list {
        let Some(column) = columns.iter_mut().find(|c| Some(c.id) == wish.column_id) else { continue };
        column.cards.push(Card {
            id: wish.id.to_string(),
            title: format!("Wish: {}", wish.title),
            status: wish.status.as_str(),
            status_label: words(wish.status.as_str()),
            assignee: None,
            link: Some(format!("/wishes/{}", wish.slug)),
            movable: false,
        });
    }
    let triggers = format!("sse:{} delay:150ms, sse:tasks delay:300ms", topic("board", &id.to_string()));
    let page = BoardPage { chrome, board, columns, strays, triggers };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("board") => Ok(render(&page.as_board())),
        Some(other) => Err(no_block(other)),
    }
}

#[derive(Debug, Deserialize)]
struct NewTask {
    title: String,
    goal: Option<String>,
    column_id: Option<Uuid>,
    assignee: Option<String>,
}

#[tracing::instrument(skip_all, fields(board = %id), err(Debug))]
async fn create_task(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    PageForm(form): PageForm<NewTask>,
) -> PageResult {
    let mut tx = state.db.begin().await?;
    let board = boards::find(&mut tx, id, false).await?.ok_or_else(|| no_board(id))?;
    let body = CreateTask {
        project: board.project,
        title: form.title,
        goal: form.goal.filter(|g| !g.trim().is_empty()),
        assignee: form.assignee.map(|a| a.trim().to_owned()).filter(|a| !a.is_empty()),
        provider: None,
        max_iterations: None,
        board_id: Some(id),
        column_id: form.column_id,
        depends_on: Vec::new(),
    };
    insert_task(&mut tx, body).await?;
    state.feed.commit(tx).await?;
    Ok(see_other(&format!("/boards/{id}")))
}

/// `left=<task id>` or `right=<task id>` (a ← → button: the neighbouring column), or `task` and
/// `column_id` (a drop).
#[derive(Debug, Default, Deserialize)]
struct MoveForm {
    left: Option<Uuid>,
    right: Option<Uuid>,
    task: Option<Uuid>,
    column_id: Option<Uuid>,
}

/// Where a move goes: a column, or one step left or right of where the card is.
#[derive(Debug, PartialEq)]
enum Target {
    Column(Uuid),
    Step(isize),
}

impl MoveForm {
    fn target(&self) -> Result<(Uuid, Target), ApiError> {
        match (self.left, self.right, self.task, self.column_id) {
            (Some(task), None, None, None) => Ok((task, Target::Step(-1))),
            (None, Some(task), None, None) => Ok((task, Target::Step(1))),
            (None, None, Some(task), Some(column)) => Ok((task, Target::Column(column))),
            _ => Err(ApiError::validation("task", "send `left` or `right` with a task id, or `task` and `column_id`")),
        }
    }
}

#[tracing::instrument(skip_all, fields(board = %id), err(Debug))]
async fn move_card(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    PageForm(form): PageForm<MoveForm>,
) -> PageResult {
    let (task, target) = form.target()?;
    let mut tx = state.db.begin().await?;
    let column = match target {
        Target::Column(column) => column,
        Target::Step(step) => {
            let columns = boards::columns_of(&mut tx, &[id]).await?;
            let current = tasks::get(&mut tx, task).await?.and_then(|t| t.column_id);
            let here = columns.iter().position(|c| Some(c.id) == current);
            here.and_then(|i| i.checked_add_signed(step))
                .and_then(|i| columns.get(i))
                .map(|c| c.id)
                .ok_or_else(|| ApiError::validation("task", "the card has no column on that side on this board"))?
        }
    };
    move_to(&mut tx, task, column).await?;
    state.feed.commit(tx).await?;
    Ok(see_other(&format!("/boards/{id}")))
}

#[tracing::instrument(skip_all, fields(board = %id), err(Debug))]
async fn reconcile(State(state): State<AppState>, Path(id): Path<Uuid>) -> PageResult {
    let mut tx = state.db.begin().await?;
    board_api::reconcile(&mut tx, id).await?;
    state.feed.commit(tx).await?;
    Ok(see_other(&format!("/boards/{id}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_is_a_step_left_or_right_or_a_drop_on_a_column() {
        let (t, c) = (Uuid::new_v4(), Uuid::new_v4());
        let left = MoveForm { left: Some(t), ..MoveForm::default() };
        assert_eq!(left.target().expect("parsed"), (t, Target::Step(-1)));
        let right = MoveForm { right: Some(t), ..MoveForm::default() };
        assert_eq!(right.target().expect("parsed"), (t, Target::Step(1)));
        let drop = MoveForm { task: Some(t), column_id: Some(c), ..MoveForm::default() };
        assert_eq!(drop.target().expect("parsed"), (t, Target::Column(c)));
        assert!(MoveForm { left: Some(t), right: Some(t), ..MoveForm::default() }.target().is_err());
        assert!(MoveForm::default().target().is_err());
    }
}
