//! The read-only `state.json` document in multiclaude's schema (`repos` → each project as a
//! `Repository`: `github_url`, `tmux_session`, `agents`, `task_history`, its three configs and
//! `target_branch`; `current_repo`; `hooks`), built from the database. Fields without a value are
//! left out, as multiclaude's `omitempty` fields are; names and types are the seed's. Kept as
//! `<data dir>/state.json` too ([`write_if_changed`]), rewritten atomically (a temp file, fsync,
//! rename, fsync of the directory).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};
use sqlx::{PgConnection, PgPool};

use super::Result;
use crate::db::agents::{self, ListFilter};
use crate::db::history::{self, Filter};
use crate::db::{projects, state_document};
use crate::domain::webhook::HOOKS;

/// The most projects, agents per project and history rows per project exported.
const MOST: i64 = 10_000;

/// The whole document, as `GET /api/v1/state` answers and `<data dir>/state.json` holds.
pub async fn document(conn: &mut PgConnection) -> Result<Value> {
    let mut repos = Map::new();
    for project in projects::list(&mut *conn, None, MOST).await? {
        let filter = ListFilter { project_id: Some(project.id), ..ListFilter::default() };
        let agents = agents::list(&mut *conn, &filter, MOST).await?;
        let tmux_session = agents.iter().find_map(|a| a.tmux_session.clone()).unwrap_or_default();
        let mut agent_map = Map::new();
        for a in &agents {
            let mut agent = json!({
                "type": a.kind,
                "pid": a.pid.unwrap_or(0),
                "created_at": a.created_at,
                "ready_for_cleanup": a.ready_for_cleanup,
                "session_id": a.provider_session_id.to_string(),
            });
            let optional = [
                ("worktree_path", a.clone_path.clone()),
                ("tmux_window", a.tmux_window.clone()),
                ("task", a.task.clone()),
                ("summary", a.summary.clone()),
                ("failure_reason", a.failure_reason.clone()),
                ("last_nudge", a.last_nudge.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))),
            ];
            put_some(&mut agent, optional);
            agent_map.insert(a.name.clone(), agent);
        }
        let rows =
            history::list(&mut *conn, &Filter { project_id: Some(project.id), ..Filter::default() }, MOST).await?;
        let task_history: Vec<Value> = rows
            .into_iter()
            .map(|h| {
                let mut row = json!({"name": h.name, "status": h.status, "created_at": h.created_at});
                put_some(
                    &mut row,
                    [
                        ("task", h.task),
                        ("branch", h.branch),
                        ("pr_url", h.pr_url),
                        ("summary", h.summary),
                        ("failure_reason", h.failure_reason),
                        ("completed_at", h.completed_at.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))),
                    ],
                );
                if let Some(n) = h.pr_number {
                    row["pr_number"] = json!(n);
                }
                row
            })
            .collect();
        repos.insert(
            project.slug.clone(),
            json!({
                "github_url": project.github_url.unwrap_or_default(),
                "tmux_session": tmux_session,
                "agents": agent_map,
                "task_history": task_history,
                "merge_queue_config": project.merge_queue_config,
                "pr_shepherd_config": project.pr_shepherd_config,
                "fork_config": project.fork_config,
                "target_branch": project.target_branch,
            }),
        );
    }
    let configured: BTreeMap<String, String> = state_document::hook_urls(conn).await?.into_iter().collect();
    let hooks: Map<String, Value> = HOOKS
        .iter()
        .map(|(name, _)| (name.to_string(), json!(configured.get(*name).cloned().unwrap_or_default())))
        .collect();
    let mut document = json!({"repos": repos, "hooks": hooks});
    // multiclaude's default repository: the only one, when there is exactly one.
    if repos_len(&document) == 1 {
        let only = document["repos"].as_object().and_then(|r| r.keys().next().cloned());
        document["current_repo"] = json!(only);
    }
    Ok(document)
}

fn repos_len(document: &Value) -> usize {
    document["repos"].as_object().map_or(0, Map::len)
}

fn put_some<const N: usize>(object: &mut Value, fields: [(&str, Option<String>); N]) {
    for (key, value) in fields {
        if let Some(value) = value {
            object[key] = json!(value);
        }
    }
}

/// Where the document is kept as a file.
fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("state.json")
}

/// Builds the document and replaces the file with it unless the file holds `written` already;
/// answers the bytes written, if it wrote.
pub async fn write_if_changed(
    pool: &PgPool,
    data_dir: &Path,
    written: Option<&[u8]>,
) -> anyhow::Result<Option<Vec<u8>>> {
    let document = {
        let mut conn = pool.acquire().await?;
        document(&mut conn).await.map_err(|e| anyhow::anyhow!("{e}"))?
    };
    let bytes = serde_json::to_vec_pretty(&document)?;
    // A file removed by hand is written again even when nothing changed.
    if written == Some(bytes.as_slice()) && path(data_dir).exists() {
        return Ok(None);
    }
    let dir = data_dir.to_path_buf();
    let bytes = tokio::task::spawn_blocking(move || replace(&dir, &bytes).map(|()| bytes)).await??;
    Ok(Some(bytes))
}

fn replace(dir: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = dir.join("state.json.tmp");
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path(dir))?;
    std::fs::File::open(dir)?.sync_all()
}
