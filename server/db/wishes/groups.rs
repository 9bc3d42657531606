//! A wish's plan in the database: its execution groups are tasks with `wish_id` and a
//! `group_key`, depending on each other through `task_dependencies`; storing a plan, reading
//! groups, and the bookkeeping of a group's completion on the wish.

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{Wish, WishRow};
use crate::db::tasks::{self, NewTask};
use crate::domain::plan::GroupSpec;
use crate::domain::task::TaskStatus;

/// One execution group of a plan, as given by the user.
#[derive(Debug, Clone)]
pub struct NewGroup {
    pub key: String,
    pub title: String,
    pub goal: String,
    pub depends_on: Vec<String>,
    /// How many times the group may be tried; none given, its project's `max_iterations`.
    pub max_iterations: Option<i32>,
    /// The provider of the group's agent (`any`: the project's, or a fallback at a usage limit).
    pub provider: Option<String>,
}

impl NewGroup {
    pub fn spec(&self) -> GroupSpec {
        GroupSpec { key: self.key.clone(), depends_on: self.depends_on.clone() }
    }
}

/// Stores a plan's groups as tasks, in topological `order`, each depending on its groups' tasks;
/// returns the wish counting them open.
pub async fn insert_groups(
    conn: &mut PgConnection,
    wish: &Wish,
    groups: &[NewGroup],
    order: &[usize],
) -> Result<Wish, sqlx::Error> {
    let mut ids = std::collections::HashMap::new();
    // A group that names no cap of its own gets its project's.
    let cap = crate::db::projects::conductor_config(&mut *conn, wish.project_id).await?.max_iterations;
    let cap = i32::try_from(cap).unwrap_or(i32::MAX);
    for &i in order {
        let group = &groups[i];
        let depends_on = group.depends_on.iter().filter_map(|k| ids.get(k.as_str()).copied()).collect();
        let task = tasks::insert(
            conn,
            &NewTask {
                project_id: wish.project_id,
                wish_id: Some(wish.id),
                group_key: Some(group.key.clone()),
                title: group.title.clone(),
                goal: group.goal.clone(),
                depends_on,
                max_iterations: Some(group.max_iterations.unwrap_or(cap)),
                provider: group.provider.clone(),
                ..NewTask::default()
            },
        )
        .await?;
        ids.insert(group.key.as_str(), task.id);
    }
    let added = i32::try_from(groups.len()).unwrap_or(i32::MAX);
    let row = sqlx::query_as!(
        WishRow,
        "UPDATE wishes SET groups_open = groups_open + $2 WHERE id = $1 RETURNING *",
        wish.id,
        added
    )
    .fetch_one(conn)
    .await?;
    Wish::try_from(row)
}

/// Replaces a draft's plan.
pub async fn delete_groups(conn: &mut PgConnection, wish_id: Uuid) -> Result<u64, sqlx::Error> {
    let deleted = sqlx::query!("DELETE FROM tasks WHERE wish_id = $1", wish_id).execute(&mut *conn).await?;
    sqlx::query!("UPDATE wishes SET groups_open = 0 WHERE id = $1", wish_id).execute(conn).await?;
    Ok(deleted.rows_affected())
}

/// What a group action starts from, in one statement: the wish, and its group `key` (when it
/// has one) with the keys that group depends on.
pub async fn for_group(
    conn: &mut PgConnection,
    slug: &str,
    key: &str,
) -> Result<Option<(Wish, Option<(tasks::Task, Vec<String>)>)>, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT to_jsonb(w) AS "wish!: sqlx::types::Json<WishRow>",
                  to_jsonb(t) AS "task: sqlx::types::Json<tasks::TaskRow>",
                  ARRAY(SELECT d.group_key FROM task_dependencies td JOIN tasks d ON d.id = td.depends_on
                        WHERE td.task_id = t.id ORDER BY d.group_key) AS "depends_on!: Vec<String>"
           FROM wishes w LEFT JOIN tasks t ON t.wish_id = w.id AND t.group_key = $2
           WHERE w.slug = $1"#,
        slug,
        key
    )
    .fetch_optional(conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let wish = Wish::try_from(row.wish.0)?;
    let group = row.task.map(|t| tasks::Task::try_from(t.0)).transpose()?.map(|task| (task, row.depends_on));
    Ok(Some((wish, group)))
}

/// Counts one more of the wish's groups done and returns the wish as it is now. The update
/// waits for any other completion of the same wish to commit, so of two concurrent last
/// completions exactly one reads `groups_open == 0`.
pub async fn group_done(conn: &mut PgConnection, wish_id: Uuid) -> Result<Option<Wish>, sqlx::Error> {
    let row =
        sqlx::query_as!(WishRow, "UPDATE wishes SET groups_open = groups_open - 1 WHERE id = $1 RETURNING *", wish_id)
            .fetch_optional(conn)
            .await?;
    row.map(Wish::try_from).transpose()
}

/// A group as shown with its wish: the task, and the keys it depends on.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Group {
    pub key: String,
    pub task_id: Uuid,
    pub title: String,
    pub goal: String,
    #[schema(value_type = String, example = "ready")]
    pub status: TaskStatus,
    pub depends_on: Vec<String>,
    pub assignee: Option<String>,
    pub result: Option<String>,
    pub iterations: i32,
    pub max_iterations: i32,
    /// The group's branch in the project's repository, once dispatched (`group/<wish>/<key>`).
    pub branch: Option<String>,
    /// The wish-branch merge commit that took the group in.
    pub merge_commit: Option<String>,
}

impl Group {
    /// The group that `task` is, depending on the groups `depends_on`.
    pub fn of(task: &tasks::Task, depends_on: Vec<String>) -> Group {
        Group {
            key: task.group_key.clone().unwrap_or_default(),
            task_id: task.id,
            title: task.title.clone(),
            goal: task.goal.clone(),
            status: task.status,
            depends_on,
            assignee: task.assignee.clone(),
            result: task.result.clone(),
            iterations: task.iterations,
            max_iterations: task.max_iterations,
            branch: task.branch.clone(),
            merge_commit: task.merge_commit.clone(),
        }
    }
}

/// The wish's groups with their dependencies' keys, in creation order.
pub async fn groups(conn: &mut PgConnection, wish_id: Uuid) -> Result<Vec<Group>, sqlx::Error> {
    group_rows(conn, wish_id, None).await
}

/// One group of the wish, read without touching the others.
pub async fn group(conn: &mut PgConnection, wish_id: Uuid, key: &str) -> Result<Option<Group>, sqlx::Error> {
    Ok(group_rows(conn, wish_id, Some(key)).await?.pop())
}

async fn group_rows(conn: &mut PgConnection, wish_id: Uuid, key: Option<&str>) -> Result<Vec<Group>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT t.id, t.group_key AS "key!", t.title, t.goal, t.status, t.assignee, t.result, t.iterations,
                  t.max_iterations, t.branch, t.merge_commit,
                  COALESCE(array_agg(d.group_key ORDER BY d.group_key) FILTER (WHERE d.id IS NOT NULL), '{}')
                    AS "depends_on!: Vec<String>"
           FROM tasks t
           LEFT JOIN task_dependencies td ON td.task_id = t.id
           LEFT JOIN tasks d ON d.id = td.depends_on
           WHERE t.wish_id = $1 AND ($2::text IS NULL OR t.group_key = $2)
           GROUP BY t.id
           ORDER BY t.created_at, t.id"#,
        wish_id,
        key
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(Group {
                status: r.status.parse().map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
                key: r.key,
                task_id: r.id,
                title: r.title,
                goal: r.goal,
                depends_on: r.depends_on,
                assignee: r.assignee,
                result: r.result,
                iterations: r.iterations,
                max_iterations: r.max_iterations,
                branch: r.branch,
                merge_commit: r.merge_commit,
            })
        })
        .collect()
}

pub async fn group_task(conn: &mut PgConnection, wish_id: Uuid, key: &str) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!("SELECT id FROM tasks WHERE wish_id = $1 AND group_key = $2", wish_id, key)
        .fetch_optional(conn)
        .await
}

/// The keys and results (summaries) of the groups `task_id` depends on, by key.
pub async fn dependency_results(
    conn: &mut PgConnection,
    task_id: Uuid,
) -> Result<Vec<(String, Option<String>)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT d.group_key AS "key!", d.result FROM task_dependencies td JOIN tasks d ON d.id = td.depends_on
           WHERE td.task_id = $1 AND d.group_key IS NOT NULL ORDER BY d.group_key"#,
        task_id
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(|r| (r.key, r.result)).collect())
}
