//! Teams in the database: the team row (its clone, base branch, status and leader) and its
//! members, the agents whose `team` names it. Every change writes its `team.*` event.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db::events;
use crate::domain::team::TeamStatus;

/// A team as the API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"id": "5c2e1f0a-9b8d-4c7e-a6f5-4e3d2c1b0a99", "name": "login-team", "project": "switchyard",
    "project_id": "0b9f6a86-4c5e-4a43-9a59-7d5f6e1e8c11", "branch": "login-team", "base_branch": "main",
    "status": "in_progress", "clone_path": "/var/lib/switchyard/teams/login-team", "leader": "clever-fox",
    "members": ["clever-fox", "quiet-owl"], "moving": [], "version": 3, "created_at": "2025-01-15T10:30:00Z",
    "updated_at": "2025-01-15T10:40:00Z"}))]
pub struct Team {
    pub id: Uuid,
    /// Also the branch of its clone.
    pub name: String,
    /// The project's slug.
    pub project: String,
    pub project_id: Uuid,
    /// The branch the team works on (its name).
    pub branch: String,
    /// The branch it was made from.
    pub base_branch: String,
    pub status: TeamStatus,
    /// The team's `git clone --shared` of the project's repository, on the node `node_id`; made by
    /// that node's worker when it spawns the team's first agent (until then `null`).
    pub clone_path: Option<String>,
    /// The worker node that runs the team's agents and holds its clone: the first node to claim
    /// one of them (until then `null`).
    pub node_id: Option<String>,
    pub leader: Option<String>,
    /// Member agents' names, oldest first.
    pub members: Vec<String>,
    /// Members that joined while working in a directory of their own: each moves into the
    /// team's clone, on its branch, at its next start (a resume or respawn), in a new session
    /// there (a provider's session belongs to its directory).
    pub moving: Vec<String>,
    pub version: i32,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

pub(crate) fn subject(name: &str) -> String {
    format!("team:{name}")
}

/// A team to create; the caller checked every field. Its clone comes later, from the worker that
/// runs its agents.
#[derive(Debug, Clone)]
pub struct NewTeam {
    pub id: Uuid,
    pub name: String,
    pub project_id: Uuid,
    pub base_branch: String,
}

#[tracing::instrument(skip_all, fields(team = %new.name), err(level = "debug"))]
pub async fn insert(conn: &mut PgConnection, new: &NewTeam) -> Result<Team, sqlx::Error> {
    sqlx::query!(
        "INSERT INTO teams (id, name, project_id, base_branch) VALUES ($1, $2, $3, $4)",
        new.id,
        new.name,
        new.project_id,
        new.base_branch
    )
    .execute(&mut *conn)
    .await?;
    let team = get(conn, &new.name).await?.ok_or(sqlx::Error::RowNotFound)?;
    let payload = json!({"id": team.id, "project": team.project, "base_branch": team.base_branch,
        "clone_path": team.clone_path});
    events::record(conn, "team.created", &subject(&team.name), payload).await?;
    Ok(team)
}

/// Filters for [`list`].
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub name: Option<String>,
    pub project_id: Option<Uuid>,
    pub status: Option<TeamStatus>,
    pub after: Option<(DateTime<Utc>, Uuid)>,
}

/// Up to `limit` teams after the filter's position, oldest first, with their members.
pub async fn list(conn: &mut PgConnection, filter: &ListFilter, limit: i64) -> Result<Vec<Team>, sqlx::Error> {
    let (after_at, after_id) = filter.after.unzip();
    let rows = sqlx::query!(
        r#"SELECT t.id, t.name, p.slug AS project, t.project_id, t.base_branch, t.status, t.clone_path, t.node_id, t.leader,
                  t.version, t.created_at, t.updated_at,
                  ARRAY(SELECT a.name FROM agents a WHERE a.team = t.name ORDER BY a.created_at, a.id) AS "members!",
                  ARRAY(SELECT a.name FROM agents a WHERE a.team = t.name AND a.clone_mode = 'team'
                          AND a.clone_path IS DISTINCT FROM t.clone_path AND a.clone_path IS NOT NULL
                        ORDER BY a.created_at, a.id) AS "moving!"
           FROM teams t JOIN projects p ON p.id = t.project_id
           WHERE ($1::text IS NULL OR t.name = $1)
             AND ($2::uuid IS NULL OR t.project_id = $2)
             AND ($3::text IS NULL OR t.status = $3)
             AND ($4::timestamptz IS NULL OR (t.created_at, t.id) > ($4, $5::uuid))
           ORDER BY t.created_at, t.id
           LIMIT $6"#,
        filter.name,
        filter.project_id,
        filter.status.map(|s| s.as_str()),
        after_at,
        after_id,
        limit
    )
    .fetch_all(conn)
    .await?;
    rows.into_iter()
        .map(|r| {
            Ok(Team {
                status: r.status.parse().map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
                id: r.id,
                branch: r.name.clone(),
                name: r.name,
                project: r.project,
                project_id: r.project_id,
                base_branch: r.base_branch,
                clone_path: r.clone_path,
                node_id: r.node_id,
                leader: r.leader,
                members: r.members,
                moving: r.moving,
                version: r.version,
                created_at: r.created_at,
                updated_at: r.updated_at,
            })
        })
        .collect()
}

pub async fn get(conn: &mut PgConnection, name: &str) -> Result<Option<Team>, sqlx::Error> {
    Ok(list(conn, &ListFilter { name: Some(name.to_owned()), ..ListFilter::default() }, 1).await?.pop())
}

/// Locks the team's row for a change that must not race another (members, status, disband).
pub async fn lock(conn: &mut PgConnection, name: &str) -> Result<Option<Team>, sqlx::Error> {
    let found =
        sqlx::query_scalar!("SELECT id FROM teams WHERE name = $1 FOR UPDATE", name).fetch_optional(&mut *conn).await?;
    match found {
        Some(_) => get(conn, name).await,
        None => Ok(None),
    }
}

/// Sets the team's status (the caller checked the transition on the locked row), with
/// `team.status_changed`.
pub async fn set_status(conn: &mut PgConnection, team: &Team, to: TeamStatus) -> Result<Team, sqlx::Error> {
    if team.status == to {
        return Ok(team.clone());
    }
    sqlx::query!(
        "UPDATE teams SET status = $2, version = version + 1, updated_at = now() WHERE id = $1 AND status = $3",
        team.id,
        to.as_str(),
        team.status.as_str()
    )
    .execute(&mut *conn)
    .await?;
    let payload = json!({"from": team.status, "to": to, "project": team.project});
    events::record(conn, "team.status_changed", &subject(&team.name), payload).await?;
    get(conn, &team.name).await?.ok_or(sqlx::Error::RowNotFound)
}

/// Sets (or clears) the leader, with `team.leader_changed`.
pub async fn set_leader(conn: &mut PgConnection, team: &Team, leader: Option<&str>) -> Result<Team, sqlx::Error> {
    if team.leader.as_deref() == leader {
        return Ok(team.clone());
    }
    sqlx::query!(
        "UPDATE teams SET leader = $2, version = version + 1, updated_at = now() WHERE id = $1",
        team.id,
        leader
    )
    .execute(&mut *conn)
    .await?;
    let payload = json!({"from": team.leader, "to": leader, "project": team.project});
    events::record(conn, "team.leader_changed", &subject(&team.name), payload).await?;
    get(conn, &team.name).await?.ok_or(sqlx::Error::RowNotFound)
}

/// Makes `agent` a member (`team.member_added`); false when it already was one. An agent with a
/// clone of its own works in the team's clone on its branch instead: at once when no node has
/// claimed it yet, else from its next start, in a new provider session (a session belongs to
/// its directory). One in the project's repository (`clone_mode` `none`) stays there.
pub async fn add_member(conn: &mut PgConnection, team: &Team, agent: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE agents SET team = $2, version = version + 1, updated_at = now(),
             clone_mode = CASE WHEN clone_mode = 'none' THEN clone_mode ELSE 'team' END,
             branch = CASE WHEN clone_mode = 'none' THEN branch ELSE $3 END,
             provider_session_id = CASE WHEN clone_mode = 'agent' AND node_id IS NOT NULL
                                        THEN gen_random_uuid() ELSE provider_session_id END
         WHERE name = $1 AND team IS DISTINCT FROM $2",
        agent,
        team.name,
        team.branch
    )
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(false);
    }
    member_event(conn, team, agent, "team.member_added").await?;
    Ok(true)
}

/// Records that an agent registered into the team joined it (its row already names the team).
pub async fn member_event(conn: &mut PgConnection, team: &Team, agent: &str, kind: &str) -> Result<(), sqlx::Error> {
    let payload = json!({"agent": agent, "project": team.project});
    events::record(conn, kind, &subject(&team.name), payload).await?;
    Ok(())
}

/// Takes `agent` out of the team (and off its lead), with `team.member_removed`; false when it
/// was not a member.
pub async fn remove_member(conn: &mut PgConnection, team: &Team, agent: &str) -> Result<bool, sqlx::Error> {
    // One of the team's clone (none live there: the caller checked) goes back to a clone of its
    // own, on its default branch (`git::clones::default_branch`), from its next start.
    let done = sqlx::query!(
        "UPDATE agents SET team = NULL, version = version + 1, updated_at = now(),
             clone_mode = CASE WHEN clone_mode = 'team' THEN 'agent' ELSE clone_mode END,
             branch = CASE WHEN clone_mode = 'team' THEN 'switchyard/' || agents.name ELSE branch END
         WHERE name = $1 AND team = $2",
        agent,
        team.name
    )
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(false);
    }
    if team.leader.as_deref() == Some(agent) {
        set_leader(conn, team, None).await?;
    }
    member_event(conn, team, agent, "team.member_removed").await?;
    Ok(true)
}

/// Deletes the team (its chat with it; its members stay, no longer in a team), with
/// `team.disbanded`.
#[tracing::instrument(skip_all, fields(team = %team.name), err(level = "debug"))]
pub async fn delete(conn: &mut PgConnection, team: &Team, clone_removed: bool) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM teams WHERE id = $1", team.id).execute(&mut *conn).await?;
    let payload = json!({"id": team.id, "project": team.project, "members": team.members,
        "clone_path": team.clone_path, "clone_removed": clone_removed});
    events::record(conn, "team.disbanded", &subject(&team.name), payload).await?;
    Ok(())
}

/// Members of the team that run in its clone and are live (they would lose their directory);
/// one no node has claimed yet runs nowhere, and one still running in its own clone (it moves at
/// its next start) runs elsewhere.
pub async fn live_in_clone(conn: &mut PgConnection, team: &str) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT a.name FROM agents a JOIN teams t ON t.name = a.team WHERE a.team = $1 AND a.clone_mode = 'team'
           AND a.state IN ('spawning', 'working', 'idle', 'permission', 'question')
           AND NOT (a.state = 'spawning' AND a.node_id IS NULL)
           AND (a.clone_path IS NULL OR a.clone_path IS NOT DISTINCT FROM t.clone_path)
         ORDER BY a.created_at, a.id",
        team
    )
    .fetch_all(conn)
    .await
}

/// Records the clone the team's node made, once (`team.clone_made`); false when the team is gone
/// or had a clone recorded already.
pub async fn record_clone(conn: &mut PgConnection, team: &str, node_id: &str, path: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!(
        "UPDATE teams SET clone_path = $3, version = version + 1, updated_at = now()
         WHERE name = $1 AND node_id = $2 AND clone_path IS NULL",
        team,
        node_id,
        path
    )
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(false);
    }
    events::record(conn, "team.clone_made", &subject(team), json!({"node_id": node_id, "clone_path": path})).await?;
    Ok(true)
}

/// Pins to `node_id` the teams no node holds yet whose agents wait to be spawned: the first
/// step of a claim, so that its locks come in the order the team routes take them (team, then
/// agents). A team another transaction holds just now is skipped, never waited for.
pub async fn pin_waiting(conn: &mut PgConnection, node_id: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE teams SET node_id = $1, version = version + 1, updated_at = now()
         WHERE id IN (SELECT t.id FROM teams t
                      WHERE t.node_id IS NULL
                        AND EXISTS (SELECT 1 FROM agents a
                                    WHERE a.team = t.name AND a.state = 'spawning' AND a.node_id IS NULL)
                      FOR NO KEY UPDATE SKIP LOCKED)",
        node_id
    )
    .execute(conn)
    .await?;
    Ok(())
}
