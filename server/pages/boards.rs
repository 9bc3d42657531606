//! `/boards`: every project's boards, and a form to make one (from a template or the default
//! columns); `/boards/{id}`: the Kanban board — columns with their gate and WIP limit, task and
//! wish cards, a form to add a task, reconcile for cards that lost their column. A card, task or
//! wish, moves by drag and drop or, from the keyboard, with its ← → buttons. Everything changes
//! through the use cases the API calls too ([`crate::app::boards`], [`crate::app::tasks`] and the
//! wish's [`crate::app::wishes::move_to`]).

use askama::Template;
use axum::extract::State;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use uuid::Uuid;

use crate::app::boards::flow::Mover;
use crate::app::boards::{self as boards_app, no_board, NewBoard};
use crate::app::tasks::{self as tasks_app, NewTask};
use crate::app::wishes as wishes_app;
use crate::db::board_columns as columns_db;
use crate::db::boards::{self, Board};
use crate::db::sessions::Session;
use crate::db::{board_templates, projects, tasks, wishes};
use crate::http::error::ApiError;
use crate::http::AppState;
use crate::pages::live::topic;
use crate::pages::view::{
    no_block, render, see_other, words, BlockQuery, Chrome, PageForm, PagePath, PageQuery, PageResult,
};

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
    /// Its target branch is checked out in a working tree the merge queue will move.
    warning: Option<String>,
}

#[derive(Template)]
#[template(path = "boards/list.html", blocks = ["boards"])]
struct ListPage {
    chrome: Chrome,
    projects: Vec<ProjectBoards>,
    templates: Vec<String>,
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn list(State(state): State<AppState>, session: Session, PageQuery(query): PageQuery<BlockQuery>) -> PageResult {
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
        let warning = crate::app::projects::target_checked_out(&project.repo_path, &project.target_branch);
        listed.push(ProjectBoards { slug: project.slug, name: project.name, boards, warning });
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
struct BoardForm {
    project: String,
    name: String,
    /// Empty: the default columns.
    template: Option<String>,
}

#[tracing::instrument(skip_all, err(Debug, level = "debug"))]
async fn create_board(State(state): State<AppState>, PageForm(form): PageForm<BoardForm>) -> PageResult {
    let new = NewBoard { name: form.name, columns: None, template: form.template.filter(|t| !t.trim().is_empty()) };
    let board = boards_app::create_now(&state, form.project.trim(), new).await?;
    Ok(see_other(&format!("/boards/{}", board.id)))
}

/// A card on the board.
struct Card {
    /// The task's or wish's id (its ← → buttons are `l-<id>` and `r-<id>`).
    id: String,
    /// Its element: `t-<task id>` or `w-<wish id>`.
    element: String,
    /// What a move sends for it ([`CardKey`]).
    key: String,
    title: String,
    status: &'static str,
    status_label: String,
    assignee: Option<String>,
    /// A task opens its page (a wish's group too: it says which wish drives it); a wish, its wish.
    link: String,
}

/// A column with its cards and its neighbours' names (where ← and → send a card).
struct ColumnView {
    id: Uuid,
    name: String,
    gate: &'static str,
    action_skill: Option<String>,
    /// `WIP 3 / 5`, or how many cards when there is no limit (tasks and wishes both count).
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

#[tracing::instrument(skip_all, fields(board = ?id), err(Debug, level = "debug"))]
async fn board(
    State(state): State<AppState>,
    session: Session,
    PagePath(id): PagePath<Uuid>,
    PageQuery(query): PageQuery<BlockQuery>,
) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let board = boards::get(&mut conn, id).await?.ok_or_else(|| no_board(id))?;
    let chrome = Chrome::new(&mut conn, &session, "boards", format!("Board {}", board.name)).await?;
    let filter = tasks::ListFilter { board_id: Some(id), ..tasks::ListFilter::default() };
    let task_list = tasks::list(&mut conn, &filter, MAX_CARDS).await?;
    let wish_list = wishes::on_board(&mut conn, id).await?;
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
                Some(limit) => format!("WIP {} / {limit}", c.cards()),
                None if c.cards() == 1 => "1 card, no WIP limit".to_owned(),
                None => format!("{} cards, no WIP limit", c.cards()),
            },
            full: c.is_full(),
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
        column.cards.push(Card {
            id: task.id.to_string(),
            element: format!("t-{}", task.id),
            key: task.id.to_string(),
            title: task.title.clone(),
            status: task.status.as_str(),
            status_label: words(task.status.as_str()),
            assignee: task.assignee.clone(),
            link: format!("/tasks/{}", task.id),
        });
    }
    for wish in &wish_list {
        let Some(column) = columns.iter_mut().find(|c| Some(c.id) == wish.column_id) else { continue };
        column.cards.push(Card {
            id: wish.id.to_string(),
            element: format!("w-{}", wish.id),
            key: format!("wish:{}", wish.slug),
            title: format!("Wish: {}", wish.title),
            status: wish.status.as_str(),
            status_label: words(wish.status.as_str()),
            assignee: None,
            link: format!("/wishes/{}", wish.slug),
        });
    }
    let triggers = format!("sse:{}, sse:tasks", topic("board", &id.to_string()));
    let page = BoardPage { chrome, board, columns, strays, triggers };
    match query.block.as_deref() {
        None => Ok(render(&page)),
        Some("board") => Ok(render(&page.as_board())),
        Some(other) => Err(no_block(other)),
    }
}

#[derive(Debug, Deserialize)]
struct TaskForm {
    title: String,
    goal: Option<String>,
    column_id: Option<Uuid>,
    assignee: Option<String>,
}

#[tracing::instrument(skip_all, fields(board = ?id), err(Debug, level = "debug"))]
async fn create_task(
    State(state): State<AppState>,
    PagePath(id): PagePath<Uuid>,
    PageForm(form): PageForm<TaskForm>,
) -> PageResult {
    let mut conn = state.db.acquire().await?;
    let board = boards::find(&mut conn, id, false).await?.ok_or_else(|| no_board(id))?;
    drop(conn);
    let new = NewTask {
        project: board.project,
        title: form.title,
        goal: form.goal.filter(|g| !g.trim().is_empty()),
        assignee: form.assignee.map(|a| a.trim().to_owned()).filter(|a| !a.is_empty()),
        board_id: Some(id),
        column_id: form.column_id,
        ..NewTask::default()
    };
    tasks_app::create_now(&state, new, None).await?;
    Ok(see_other(&format!("/boards/{id}")))
}

/// `left=<card>` or `right=<card>` (a ← → button: the neighbouring column), or `card` and
/// `column_id` (a drop).
#[derive(Debug, Default, Deserialize)]
struct MoveForm {
    left: Option<CardKey>,
    right: Option<CardKey>,
    card: Option<CardKey>,
    column_id: Option<Uuid>,
}

/// A card as a move names it: a task's id, or `wish:<slug>`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
enum CardKey {
    Task(Uuid),
    Wish(String),
}

impl TryFrom<String> for CardKey {
    type Error = String;

    fn try_from(key: String) -> Result<CardKey, String> {
        match key.strip_prefix("wish:") {
            Some(slug) => Ok(CardKey::Wish(slug.to_owned())),
            None => key.parse().map(CardKey::Task).map_err(|_| format!("`{key}` is neither a task id nor wish:<slug>")),
        }
    }
}

impl CardKey {
    /// The column the card is in now, if any.
    async fn column(&self, conn: &mut sqlx::PgConnection) -> Result<Option<Uuid>, sqlx::Error> {
        Ok(match self {
            CardKey::Task(id) => tasks::get(conn, *id).await?.and_then(|t| t.column_id),
            CardKey::Wish(slug) => wishes::get(conn, slug).await?.and_then(|w| w.column_id),
        })
    }

    /// Moves the card through its use case (its checks, WIP limit and event), in the caller's
    /// transaction.
    async fn move_to(&self, tx: &mut sqlx::PgConnection, column: Uuid) -> crate::app::Result<()> {
        match self {
            CardKey::Task(id) => tasks_app::move_to(tx, *id, column, Mover::Person).await.map(drop),
            CardKey::Wish(slug) => wishes_app::move_to(tx, slug, column).await.map(drop),
        }
    }
}

/// Where a move goes: a column, or one step left or right of where the card is.
#[derive(Debug, PartialEq)]
enum Target {
    Column(Uuid),
    Step(isize),
}

impl MoveForm {
    fn target(self) -> Result<(CardKey, Target), ApiError> {
        match (self.left, self.right, self.card, self.column_id) {
            (Some(card), None, None, None) => Ok((card, Target::Step(-1))),
            (None, Some(card), None, None) => Ok((card, Target::Step(1))),
            (None, None, Some(card), Some(column)) => Ok((card, Target::Column(column))),
            _ => Err(ApiError::validation("card", "send `left` or `right` with a card, or `card` and `column_id`")),
        }
    }
}

#[tracing::instrument(skip_all, fields(board = ?id), err(Debug, level = "debug"))]
async fn move_card(
    State(state): State<AppState>,
    PagePath(id): PagePath<Uuid>,
    PageForm(form): PageForm<MoveForm>,
) -> PageResult {
    let (card, target) = form.target()?;
    let mut tx = state.db.begin().await?;
    let column = match target {
        Target::Column(column) => column,
        Target::Step(step) => {
            let columns = boards::columns_of(&mut tx, &[id]).await?;
            let current = card.column(&mut tx).await?;
            let here = columns.iter().position(|c| Some(c.id) == current);
            here.and_then(|i| i.checked_add_signed(step))
                .and_then(|i| columns.get(i))
                .map(|c| c.id)
                .ok_or_else(|| ApiError::validation("card", "the card has no column on that side on this board"))?
        }
    };
    card.move_to(&mut tx, column).await?;
    state.feed.commit(tx).await?;
    Ok(see_other(&format!("/boards/{id}")))
}

#[tracing::instrument(skip_all, fields(board = ?id), err(Debug, level = "debug"))]
async fn reconcile(State(state): State<AppState>, PagePath(id): PagePath<Uuid>) -> PageResult {
    boards_app::reconcile_now(&state, id).await?;
    Ok(see_other(&format!("/boards/{id}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_move_is_a_step_left_or_right_or_a_drop_on_a_column() {
        let (t, c) = (CardKey::Task(Uuid::new_v4()), Uuid::new_v4());
        let left = MoveForm { left: Some(t.clone()), ..MoveForm::default() };
        assert_eq!(left.target().expect("parsed"), (t.clone(), Target::Step(-1)));
        let right = MoveForm { right: Some(t.clone()), ..MoveForm::default() };
        assert_eq!(right.target().expect("parsed"), (t.clone(), Target::Step(1)));
        let drop = MoveForm { card: Some(t.clone()), column_id: Some(c), ..MoveForm::default() };
        assert_eq!(drop.target().expect("parsed"), (t.clone(), Target::Column(c)));
        assert!(MoveForm { left: Some(t.clone()), right: Some(t), ..MoveForm::default() }.target().is_err());
        assert!(MoveForm::default().target().is_err());
    }

    #[test]
    fn a_card_is_named_by_a_task_id_or_a_wish_slug() {
        let id = Uuid::new_v4();
        assert_eq!(CardKey::try_from(id.to_string()), Ok(CardKey::Task(id)));
        assert_eq!(CardKey::try_from("wish:login".to_owned()), Ok(CardKey::Wish("login".to_owned())));
        assert!(CardKey::try_from("login".to_owned()).is_err());
        let form: MoveForm = serde_urlencoded::from_str("right=wish%3Alogin").expect("form");
        assert_eq!(form.right, Some(CardKey::Wish("login".to_owned())));
    }
}
