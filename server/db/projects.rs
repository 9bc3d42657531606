//! Projects in the database: one row per repository, its configs as jsonb, and a `version` that
//! every change increments (the API's ETag).

use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret, SecretString};
use serde::Serialize;
use sqlx::types::Json;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::events;
use crate::domain::project::{ConductorConfig, ForkConfig, MergeQueueConfig, PrShepherdConfig};

/// A project as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "0b9f6a86-4c5e-4a43-9a59-7d5f6e1e8c11", "slug": "switchyard", "name": "Switchyard",
    "repo_path": "/srv/repos/switchyard", "target_branch": "main", "github_url": "https://github.com/acme/switchyard",
    "fork_config": {"is_fork": false, "upstream_url": null, "upstream_owner": null, "upstream_repo": null, "force_fork_mode": false},
    "merge_queue_config": {"enabled": true, "track_mode": "all"}, "pr_shepherd_config": {"enabled": false, "track_mode": "author"},
    "conductor_config": {"planning": "agent", "plan_approval": "auto", "review": "agent", "provider": "claude",
        "fallback_providers": [], "max_agents": 4, "keep_clones": false},
    "version": 1, "created_at": "2025-01-15T10:30:00Z", "updated_at": "2025-01-15T10:30:00Z"}))]
pub struct Project {
    pub id: Uuid,
    pub slug: String,
    pub name: String,
    /// The repository on the server; empty when the repository is `repo_url`.
    pub repo_path: String,
    /// The repository as a git remote (`file://`, `git://`, `ssh://`, `https://`), of which each
    /// node keeps its own mirror; `null` when it is `repo_path`.
    pub repo_url: Option<String>,
    /// Whether a credential for `repo_url` is kept (it is never shown).
    pub repo_secret_set: bool,
    /// The remote of `repo_path` the merged target is pushed to: `null` for `origin` when the
    /// repository has one, empty for none.
    pub push_remote: Option<String>,
    pub target_branch: String,
    pub github_url: Option<String>,
    pub fork_config: ForkConfig,
    pub merge_queue_config: MergeQueueConfig,
    pub pr_shepherd_config: PrShepherdConfig,
    /// How the conductor runs the project's wishes: planning, approval, review, provider, limits.
    pub conductor_config: ConductorConfig,
    /// Incremented by every change; send it back in `If-Match` to update safely.
    pub version: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The fields a client sets: everything but identity, version and timestamps.
#[derive(Debug, Clone, PartialEq)]
pub struct ProjectFields {
    pub name: String,
    pub repo_path: String,
    pub repo_url: Option<String>,
    pub repo_secret: SecretChange,
    pub push_remote: Option<String>,
    pub target_branch: String,
    pub github_url: Option<String>,
    pub fork_config: ForkConfig,
    pub merge_queue_config: MergeQueueConfig,
    pub pr_shepherd_config: PrShepherdConfig,
    /// How the conductor runs the project's wishes: planning, approval, review, provider, limits.
    pub conductor_config: ConductorConfig,
}

/// What becomes of a project's `repo_secret`: it is written, never read back by a client (nor
/// shown by `Debug`).
#[derive(Clone, Default, Debug)]
pub enum SecretChange {
    #[default]
    Keep,
    Set(SecretString),
    Clear,
}

impl PartialEq for SecretChange {
    fn eq(&self, other: &SecretChange) -> bool {
        self.parts() == other.parts()
    }
}

impl SecretChange {
    /// Whether the stored secret stays, and the new one (or none) when it does not.
    fn parts(&self) -> (bool, Option<&str>) {
        match self {
            SecretChange::Keep => (true, None),
            SecretChange::Set(secret) => (false, Some(secret.expose_secret())),
            SecretChange::Clear => (false, None),
        }
    }
}

impl Project {
    /// Where its repository is: `repo_url` when it is on a remote, else `repo_path`.
    pub fn location(&self) -> &str {
        self.repo_url.as_deref().unwrap_or(&self.repo_path)
    }

    pub fn fields(&self) -> ProjectFields {
        ProjectFields {
            name: self.name.clone(),
            repo_path: self.repo_path.clone(),
            repo_url: self.repo_url.clone(),
            repo_secret: SecretChange::Keep,
            push_remote: self.push_remote.clone(),
            target_branch: self.target_branch.clone(),
            github_url: self.github_url.clone(),
            fork_config: self.fork_config.clone(),
            merge_queue_config: self.merge_queue_config.clone(),
            pr_shepherd_config: self.pr_shepherd_config.clone(),
            conductor_config: self.conductor_config.clone(),
        }
    }
}

struct ProjectRow {
    id: Uuid,
    slug: String,
    name: String,
    repo_path: String,
    repo_url: Option<String>,
    repo_secret_set: bool,
    push_remote: Option<String>,
    target_branch: String,
    github_url: Option<String>,
    fork_config: Json<ForkConfig>,
    merge_queue_config: Json<MergeQueueConfig>,
    pr_shepherd_config: Json<PrShepherdConfig>,
    conductor_config: Json<ConductorConfig>,
    version: i32,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<ProjectRow> for Project {
    fn from(r: ProjectRow) -> Project {
        Project {
            id: r.id,
            slug: r.slug,
            name: r.name,
            repo_path: r.repo_path,
            repo_url: r.repo_url,
            repo_secret_set: r.repo_secret_set,
            push_remote: r.push_remote,
            target_branch: r.target_branch,
            github_url: r.github_url,
            fork_config: r.fork_config.0,
            merge_queue_config: r.merge_queue_config.0,
            pr_shepherd_config: r.pr_shepherd_config.0,
            conductor_config: r.conductor_config.0,
            version: r.version,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// What stops a project from being deleted: work that still refers to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dependents {
    pub tasks: i64,
    pub wishes: i64,
    pub agents: i64,
}

#[tracing::instrument(skip_all, fields(slug = %slug), err(level = "debug"))]
pub async fn create(conn: &mut PgConnection, slug: &str, fields: &ProjectFields) -> Result<Project, sqlx::Error> {
    let row = sqlx::query_as!(
        ProjectRow,
        r#"INSERT INTO projects (id, slug, name, repo_path, target_branch, github_url,
                                 fork_config, merge_queue_config, pr_shepherd_config, conductor_config,
                                 repo_url, repo_secret, push_remote)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
           RETURNING id, slug, name, repo_path, repo_url, repo_secret IS NOT NULL AS "repo_secret_set!", push_remote,
                  target_branch, github_url,
                     fork_config AS "fork_config: Json<ForkConfig>",
                     merge_queue_config AS "merge_queue_config: Json<MergeQueueConfig>",
                     pr_shepherd_config AS "pr_shepherd_config: Json<PrShepherdConfig>",
                     conductor_config AS "conductor_config: Json<ConductorConfig>",
                     version, created_at, updated_at"#,
        Uuid::new_v4(),
        slug,
        fields.name,
        fields.repo_path,
        fields.target_branch,
        fields.github_url,
        Json(&fields.fork_config) as _,
        Json(&fields.merge_queue_config) as _,
        Json(&fields.pr_shepherd_config) as _,
        Json(&fields.conductor_config) as _,
        fields.repo_url,
        fields.repo_secret.parts().1,
        fields.push_remote,
    )
    .fetch_one(&mut *conn)
    .await?;
    let payload = serde_json::json!({"name": row.name, "repo_path": row.repo_path, "repo_url": row.repo_url,
        "target_branch": row.target_branch});
    events::record(conn, "project.created", &format!("project:{slug}"), payload).await?;
    Ok(row.into())
}

/// One page of projects after `after` (`created_at`, `id`), oldest first; `limit + 1` rows so
/// the caller can tell whether there is a next page.
pub async fn list(
    conn: &mut PgConnection,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Project>, sqlx::Error> {
    let rows = sqlx::query_as!(
        ProjectRow,
        r#"SELECT id, slug, name, repo_path, repo_url, repo_secret IS NOT NULL AS "repo_secret_set!", push_remote,
                  target_branch, github_url,
                  fork_config AS "fork_config: Json<ForkConfig>",
                  merge_queue_config AS "merge_queue_config: Json<MergeQueueConfig>",
                  pr_shepherd_config AS "pr_shepherd_config: Json<PrShepherdConfig>",
                     conductor_config AS "conductor_config: Json<ConductorConfig>",
                  version, created_at, updated_at
           FROM projects
           WHERE $1::timestamptz IS NULL OR (created_at, id) > ($1, $2)
           ORDER BY created_at, id
           LIMIT $3::bigint + 1"#,
        after.map(|a| a.0),
        after.map(|a| a.1),
        limit
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(Project::from).collect())
}

/// The id of the project with this slug (for rows that only refer to a project).
pub async fn id_by_slug(conn: &mut PgConnection, slug: &str) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!("SELECT id FROM projects WHERE slug = $1", slug).fetch_optional(conn).await
}

/// The project with this slug; with `lock`, its row is locked until the transaction ends, so a
/// read-modify-write (or a delete after counting dependents) cannot interleave with another.
pub async fn find(conn: &mut PgConnection, slug: &str, lock: bool) -> Result<Option<Project>, sqlx::Error> {
    // Two statements rather than string-built SQL, so both stay checked at compile time.
    let row = if lock {
        sqlx::query_as!(
            ProjectRow,
            r#"SELECT id, slug, name, repo_path, repo_url, repo_secret IS NOT NULL AS "repo_secret_set!", push_remote,
                  target_branch, github_url,
                      fork_config AS "fork_config: Json<ForkConfig>",
                      merge_queue_config AS "merge_queue_config: Json<MergeQueueConfig>",
                      pr_shepherd_config AS "pr_shepherd_config: Json<PrShepherdConfig>",
                     conductor_config AS "conductor_config: Json<ConductorConfig>",
                      version, created_at, updated_at
               FROM projects WHERE slug = $1 FOR UPDATE"#,
            slug
        )
        .fetch_optional(conn)
        .await?
    } else {
        sqlx::query_as!(
            ProjectRow,
            r#"SELECT id, slug, name, repo_path, repo_url, repo_secret IS NOT NULL AS "repo_secret_set!", push_remote,
                  target_branch, github_url,
                      fork_config AS "fork_config: Json<ForkConfig>",
                      merge_queue_config AS "merge_queue_config: Json<MergeQueueConfig>",
                      pr_shepherd_config AS "pr_shepherd_config: Json<PrShepherdConfig>",
                     conductor_config AS "conductor_config: Json<ConductorConfig>",
                      version, created_at, updated_at
               FROM projects WHERE slug = $1"#,
            slug
        )
        .fetch_optional(conn)
        .await?
    };
    Ok(row.map(Project::from))
}

/// Writes new field values and increments the version; `changed` names the fields for the event.
#[tracing::instrument(skip_all, fields(slug = %current.slug), err(level = "debug"))]
pub async fn update(
    conn: &mut PgConnection,
    current: &Project,
    fields: &ProjectFields,
    changed: &[&str],
) -> Result<Project, sqlx::Error> {
    let row = sqlx::query_as!(
        ProjectRow,
        r#"UPDATE projects SET name = $2, repo_path = $3, target_branch = $4, github_url = $5,
                  fork_config = $6, merge_queue_config = $7, pr_shepherd_config = $8, conductor_config = $9,
                  repo_url = $10, repo_secret = CASE WHEN $11 THEN repo_secret ELSE $12 END, push_remote = $13,
                  version = version + 1, updated_at = now()
           WHERE id = $1
           RETURNING id, slug, name, repo_path, repo_url, repo_secret IS NOT NULL AS "repo_secret_set!", push_remote,
                  target_branch, github_url,
                     fork_config AS "fork_config: Json<ForkConfig>",
                     merge_queue_config AS "merge_queue_config: Json<MergeQueueConfig>",
                     pr_shepherd_config AS "pr_shepherd_config: Json<PrShepherdConfig>",
                     conductor_config AS "conductor_config: Json<ConductorConfig>",
                     version, created_at, updated_at"#,
        current.id,
        fields.name,
        fields.repo_path,
        fields.target_branch,
        fields.github_url,
        Json(&fields.fork_config) as _,
        Json(&fields.merge_queue_config) as _,
        Json(&fields.pr_shepherd_config) as _,
        Json(&fields.conductor_config) as _,
        fields.repo_url,
        fields.repo_secret.parts().0,
        fields.repo_secret.parts().1,
        fields.push_remote,
    )
    .fetch_one(&mut *conn)
    .await?;
    let payload = serde_json::json!({"changed": changed, "version": row.version});
    events::record(conn, "project.updated", &format!("project:{}", row.slug), payload).await?;
    Ok(row.into())
}

/// How many tasks, wishes and agents still belong to the project.
pub async fn dependents(conn: &mut PgConnection, project_id: Uuid) -> Result<Dependents, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT (SELECT count(*) FROM tasks WHERE project_id = $1) AS "tasks!",
                  (SELECT count(*) FROM wishes WHERE project_id = $1) AS "wishes!",
                  (SELECT count(*) FROM agents WHERE project_id = $1) AS "agents!""#,
        project_id
    )
    .fetch_one(conn)
    .await?;
    Ok(Dependents { tasks: row.tasks, wishes: row.wishes, agents: row.agents })
}

/// Deletes the project; its boards (and their columns) go with it by cascade.
#[tracing::instrument(skip_all, fields(slug = %project.slug), err(level = "debug"))]
pub async fn delete(conn: &mut PgConnection, project: &Project) -> Result<(), sqlx::Error> {
    let boards = sqlx::query_scalar!(r#"SELECT count(*) AS "n!" FROM boards WHERE project_id = $1"#, project.id)
        .fetch_one(&mut *conn)
        .await?;
    sqlx::query!("DELETE FROM projects WHERE id = $1", project.id).execute(&mut *conn).await?;
    let payload = serde_json::json!({"name": project.name, "boards_deleted": boards});
    events::record(conn, "project.deleted", &format!("project:{}", project.slug), payload).await?;
    Ok(())
}

/// The repositories projects and agents name: each project's `repo_url` and each agent's `repo`
/// (a path or a URL; an agent keeps the one its clone was made from). What a node's mirrors of
/// remotes are kept for.
pub async fn repositories_named(conn: &mut PgConnection) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT repo_url AS "repo!" FROM projects WHERE repo_url IS NOT NULL
           UNION SELECT repo FROM agents"#
    )
    .fetch_all(conn)
    .await
}

/// How the conductor runs the project's wishes (the defaults for a project that is gone).
pub async fn conductor_config(conn: &mut PgConnection, project_id: Uuid) -> Result<ConductorConfig, sqlx::Error> {
    let config = sqlx::query_scalar!(
        r#"SELECT conductor_config AS "config!: Json<ConductorConfig>" FROM projects WHERE id = $1"#,
        project_id
    )
    .fetch_optional(conn)
    .await?;
    Ok(config.map(|c| c.0).unwrap_or_default())
}

/// Where the project's repository is: its `repo_path`, or its `repo_url` when it is on a remote.
pub async fn repo_path(conn: &mut PgConnection, project_id: Uuid) -> Result<String, sqlx::Error> {
    sqlx::query_scalar!(r#"SELECT COALESCE(repo_url, repo_path) AS "repo!" FROM projects WHERE id = $1"#, project_id)
        .fetch_one(conn)
        .await
}

/// What git needs to reach a project's repository from this node.
pub struct Repository {
    pub repo_path: String,
    pub repo_url: Option<String>,
    pub repo_secret: Option<secrecy::SecretString>,
    pub push_remote: Option<String>,
}

/// Where the project's repository is and how it is reached.
pub async fn repository(conn: &mut PgConnection, project_id: Uuid) -> Result<Repository, sqlx::Error> {
    let row =
        sqlx::query!("SELECT repo_path, repo_url, repo_secret, push_remote FROM projects WHERE id = $1", project_id)
            .fetch_one(conn)
            .await?;
    Ok(Repository {
        repo_path: row.repo_path,
        repo_url: row.repo_url,
        repo_secret: row.repo_secret.map(secrecy::SecretString::from),
        push_remote: row.push_remote,
    })
}
