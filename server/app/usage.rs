//! Reading an agent's token use from the transcript its hooks name (`transcript_path`), a little
//! more at each hook: from where the last reading stopped, at most [`MAX_READ`] at a time, whole
//! lines only. The path comes from an untrusted agent, so only an absolute path to a regular
//! `.jsonl` file is read, and what is read only ever adds token counts. The file is read on the
//! machine that takes the hook (one node: the agent's); elsewhere the path does not exist and
//! nothing is counted.
//!
//! Codex and Gemini CLI send no hook naming a log: their session logs are found by the worker
//! in the provider directory it made for the agent, and read the same way when the agent goes
//! idle ([`read_session_log`]).
//!
//! Also the reports: tokens and cost per model summed over the agents of a scope (an agent, a
//! wish's group, a wish, a project, everything), at the prices in `providers.toml`.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::{Ctx, Error, Result};
use crate::agent_writable::AgentWritable;
use crate::db::agent_usage::{self, Scope};
use crate::db::{agents, projects, wishes};
use crate::domain::cost::Cost;
use crate::domain::usage::{read_chunk, Chunk, Usage};
use crate::feed::EventFeed;
use crate::providers::{LiveProviders, Provider, Setup};

/// The most read at one hook; a longer transcript is caught up at the next ones.
const MAX_READ: u64 = 4 << 20;

/// Reads what was added to the transcript at `path` since the last reading and adds its usage,
/// with an `agent.usage_counted` event naming what was added (costs shown elsewhere change).
#[tracing::instrument(skip_all, fields(agent = %agent_name), err(level = "debug"))]
pub async fn read_transcript(
    ctx: &Ctx,
    agent_id: Uuid,
    agent_name: &str,
    path: &str,
) -> Result<BTreeMap<String, Usage>> {
    let file = Path::new(path);
    if !file.is_absolute() || file.extension().is_none_or(|e| e != "jsonl") {
        return Ok(BTreeMap::new());
    }
    // Beneath the agent's own directory (where Switchyard points Claude Code), the agent writes
    // every part of the path: it is read there without following a link anywhere.
    let own_dir = super::agents::own_dir(&ctx.data_dir, agent_name);
    if let Some(rel) = file.strip_prefix(&own_dir).ok().and_then(Path::to_str).map(str::to_owned) {
        let read = move |offset| read_log(&own_dir, &rel, offset);
        return count(&ctx.db, &ctx.feed, agent_id, agent_name, path, read, read_chunk).await;
    }
    let owned = file.to_owned();
    let read = move |offset| read_from(&owned, offset);
    count(&ctx.db, &ctx.feed, agent_id, agent_name, path, read, read_chunk).await
}

/// A CLI that keeps its session log in the agent's own provider directory, where the server
/// made it (the worker's provider setup): no hook names the log, so it is read when the
/// agent goes idle (a turn ended), at the newest session's file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionLog {
    /// `<agent dir>/codex` is `CODEX_HOME`: `sessions/YYYY/MM/DD/rollout-*.jsonl`.
    Codex,
    /// `<agent dir>/gemini` is `GEMINI_CLI_HOME`: `.gemini/tmp/<project>/chats/session-*.jsonl`.
    Gemini,
}

/// Where an agent's session log is read from: its own directory (`<data_dir>/agents/<name>`)
/// and which CLI's log it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionLogOf {
    pub own_dir: PathBuf,
    pub log: SessionLog,
}

impl SessionLogOf {
    /// The session log of an agent of `provider`, when Switchyard made its provider directory:
    /// a provider configured with a directory of its own (`CODEX_HOME` in its `env`) is the
    /// user's, maybe shared by agents, so nothing there is counted as one agent's.
    pub fn of(provider: &Provider, data_dir: &Path, agent_name: &str) -> Option<SessionLogOf> {
        let (log, variable) = match provider.setup {
            Setup::Codex => (SessionLog::Codex, "CODEX_HOME"),
            Setup::Gemini => (SessionLog::Gemini, "GEMINI_CLI_HOME"),
            Setup::None | Setup::Claude => return None,
        };
        (!provider.env.contains_key(variable))
            .then(|| SessionLogOf { own_dir: super::agents::own_dir(data_dir, agent_name), log })
    }
}

/// Reads what was added to the agent's newest session log since the last reading and adds its
/// usage, as [`read_transcript`] does. The agent writes its directory: the log is found and
/// read there without following a link anywhere ([`AgentWritable`]), and what is read only ever
/// adds token counts.
#[tracing::instrument(skip_all, fields(agent = %agent_name), err(level = "debug"))]
pub async fn read_session_log(
    db: &PgPool,
    feed: &EventFeed,
    agent_id: Uuid,
    agent_name: &str,
    of: &SessionLogOf,
) -> Result<BTreeMap<String, Usage>> {
    let found = {
        let of = of.clone();
        tokio::task::spawn_blocking(move || newest_log(&of))
            .await
            .map_err(|e| anyhow::anyhow!("finding the session log: {e}"))?
    };
    let Some(rel) = found.map_err(|e| anyhow::anyhow!("finding the session log: {e}"))? else {
        return Ok(BTreeMap::new());
    };
    let path = of.own_dir.join(&rel).to_string_lossy().into_owned();
    let own_dir = of.own_dir.clone();
    let read = move |offset| read_log(&own_dir, &rel, offset);
    let parse = match of.log {
        SessionLog::Codex => crate::domain::usage::codex::read_chunk,
        SessionLog::Gemini => crate::domain::usage::gemini::read_chunk,
    };
    count(db, feed, agent_id, agent_name, &path, read, parse).await
}

/// The newest session's log beneath the agent's own directory, as a path relative to it; `None`
/// when there is none yet. Names sort by time: Codex's folders are dates and its files
/// `rollout-<time>-<id>.jsonl`, Gemini CLI's `session-<time>-<id>.jsonl`.
fn newest_log(of: &SessionLogOf) -> std::io::Result<Option<String>> {
    let own = AgentWritable::open(&of.own_dir)?;
    let newest = |dir: &AgentWritable, keep: &dyn Fn(&str) -> bool| -> std::io::Result<Option<String>> {
        Ok(dir.names()?.into_iter().filter_map(|n| n.into_string().ok()).filter(|n| keep(n)).max())
    };
    let date = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    match of.log {
        SessionLog::Codex => {
            let mut rel = String::from("codex/sessions");
            for _ in 0..3 {
                let Some(dir) = own.dir(&rel)? else { return Ok(None) };
                let Some(name) = newest(&dir, &date)? else { return Ok(None) };
                rel = format!("{rel}/{name}");
            }
            let Some(dir) = own.dir(&rel)? else { return Ok(None) };
            let log = |n: &str| n.starts_with("rollout-") && n.ends_with(".jsonl");
            Ok(newest(&dir, &log)?.map(|name| format!("{rel}/{name}")))
        }
        SessionLog::Gemini => {
            let Some(tmp) = own.dir("gemini/.gemini/tmp")? else { return Ok(None) };
            let log = |n: &str| n.starts_with("session-") && n.ends_with(".jsonl");
            let mut found: Option<(String, String)> = None;
            for project in tmp.names()?.into_iter().filter_map(|n| n.into_string().ok()) {
                // A project's folder that is not one (a file, a link) holds no log of ours.
                let Ok(Some(chats)) = tmp.dir(&format!("{project}/chats")) else { continue };
                if let Some(name) = newest(&chats, &log)? {
                    if found.as_ref().is_none_or(|(newest, _)| name > *newest) {
                        found = Some((name, project));
                    }
                }
            }
            Ok(found.map(|(name, project)| format!("gemini/.gemini/tmp/{project}/chats/{name}")))
        }
    }
}

/// Up to [`MAX_READ`] bytes from `offset` of the regular file at `rel` beneath the agent's own
/// directory, `None` when it is not one or a link is on the way.
fn read_log(own_dir: &Path, rel: &str, offset: u64) -> Option<Vec<u8>> {
    AgentWritable::open(own_dir).and_then(|dir| dir.read_at(rel, offset, MAX_READ)).ok().flatten()
}

/// Reads what was added to the log at `path` from where the last reading stopped (`read` gives
/// the bytes from an offset), sums it with `parse` and adds it, with its event.
async fn count(
    db: &PgPool,
    feed: &EventFeed,
    agent_id: Uuid,
    agent_name: &str,
    path: &str,
    read: impl FnOnce(u64) -> Option<Vec<u8>> + Send + 'static,
    parse: fn(&[u8], Option<String>) -> Chunk,
) -> Result<BTreeMap<String, Usage>> {
    let mut tx = db.begin().await?;
    let mut progress = agent_usage::lock(&mut tx, agent_id, path).await?;
    let offset = u64::try_from(progress.read_offset).unwrap_or(0);
    let bytes = tokio::task::spawn_blocking(move || read(offset))
        .await
        .map_err(|e| anyhow::anyhow!("reading the transcript: {e}"))?;
    let Some(bytes) = bytes else { return Ok(BTreeMap::new()) };
    let chunk = parse(&bytes, progress.last_message.take());
    progress.read_offset += i64::try_from(chunk.consumed).unwrap_or(0);
    progress.last_message = chunk.last_message;
    agent_usage::add(&mut tx, agent_id, &progress, &chunk.usage).await?;
    if chunk.usage.is_empty() {
        tx.commit().await?;
    } else {
        let payload = serde_json::json!({ "added": chunk.usage });
        crate::db::events::record(&mut tx, "agent.usage_counted", &agents::subject(agent_name), payload).await?;
        feed.commit(tx).await?;
    }
    Ok(chunk.usage)
}

/// Up to [`MAX_READ`] bytes of the regular file at `path` from `offset`; `None` when it is not
/// one (missing, a directory, a device, a link). Opened without blocking: a fifo the agent named
/// would otherwise hang the open until something wrote to it.
fn read_from(path: &Path, offset: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = libc::O_NONBLOCK | libc::O_NOFOLLOW;
    let mut file = std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    file.seek(SeekFrom::Start(offset)).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_READ).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Tokens and cost of a scope's agents, and which of them report no usage.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
pub struct UsageReport {
    #[serde(flatten)]
    pub cost: Cost,
    /// The providers none of whose agents in the scope has reported token use (Claude Code's
    /// transcripts and Codex's and Gemini CLI's session logs are read; other providers report
    /// none): their agents' work is in none of the sums. A provider with an agent that reported
    /// is never listed.
    pub unreported: Vec<Unreported>,
}

/// A provider none of whose agents in the scope reported token use, and how many agents in the
/// scope run it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Unreported {
    pub provider: String,
    pub agents: i64,
}

impl UsageReport {
    /// In words: the cost with each unpriced model named, then each provider that reports none.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if !self.cost.models.is_empty() || self.unreported.is_empty() {
            parts.push(self.cost.summary());
        }
        for u in &self.unreported {
            let agents = if u.agents == 1 { String::new() } else { format!(" ({} agents)", u.agents) };
            parts.push(format!("no usage reported by {}{agents}", u.provider));
        }
        parts.join("; ")
    }
}

/// The report of the agents in `scope`, priced with the configured prices of `providers`, read on
/// the caller's connection: a node has few connections, and a request that holds one while it
/// waits for a second can deadlock with others doing the same.
pub async fn report(conn: &mut PgConnection, providers: &LiveProviders, scope: &Scope) -> Result<UsageReport> {
    let by_model = agent_usage::by_model(&mut *conn, scope).await?;
    // What was recorded, not what the provider's config promises: a custom provider may post
    // hooks with transcripts too, and a Claude Code agent may not have finished a turn yet.
    let unreported = agent_usage::unreported(conn, scope).await?;
    let cost = providers.current().prices().cost(&by_model);
    let unreported = unreported.into_iter().map(|(provider, agents)| Unreported { provider, agents }).collect();
    Ok(UsageReport { cost, unreported })
}

/// Names of a scope as a caller gives them (project and wish slugs, a group key of the wish, an
/// agent name).
#[derive(Debug, Default)]
pub struct ScopeNames<'a> {
    pub project: Option<&'a str>,
    pub wish: Option<&'a str>,
    pub group: Option<&'a str>,
    pub agent: Option<&'a str>,
}

/// The scope the names say; a name that matches nothing is refused.
pub async fn scope(conn: &mut PgConnection, names: &ScopeNames<'_>) -> Result<Scope> {
    let mut scope = Scope::default();
    if let Some(slug) = names.project {
        let project = projects::find(conn, slug, false).await?;
        scope.project = Some(project.ok_or_else(|| Error::invalid("project", format!("no project `{slug}`")))?.id);
    }
    if let Some(slug) = names.wish {
        let wish = wishes::get(conn, slug).await?.ok_or_else(|| Error::invalid("wish", format!("no wish `{slug}`")))?;
        scope.wish = Some(wish.id);
        if let Some(key) = names.group {
            let group = wishes::group(conn, wish.id, key).await?;
            scope.group = Some(
                group.ok_or_else(|| Error::invalid("group", format!("wish `{slug}` has no group `{key}`")))?.task_id,
            );
        }
    } else if names.group.is_some() {
        return Err(Error::invalid("group", "a group is named within its wish: give `wish` too"));
    }
    if let Some(name) = names.agent {
        let agent =
            agents::by_name(conn, name).await?.ok_or_else(|| Error::invalid("agent", format!("no agent `{name}`")))?;
        scope.agent = Some(agent.id);
    }
    Ok(scope)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::{newest_log, read_log, SessionLog, SessionLogOf};

    const LINE: &str = "{\"type\":\"event_msg\"}\n";

    #[test]
    fn the_newest_session_log_in_the_agents_own_directory_is_read() {
        let agent = tempfile::tempdir().unwrap();
        let codex = SessionLogOf { own_dir: agent.path().into(), log: SessionLog::Codex };
        assert_eq!(newest_log(&codex).unwrap(), None, "no session yet");
        for day in ["2026/11/27", "2026/11/28"] {
            let dir = agent.path().join("codex/sessions").join(day);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("rollout-{}-a.jsonl", day.replace('/', "-"))), LINE).unwrap();
        }
        std::fs::write(agent.path().join("codex/sessions/2026/11/28/notes.txt"), LINE).unwrap();
        let rel = newest_log(&codex).unwrap().unwrap();
        assert_eq!(rel, "codex/sessions/2026/11/28/rollout-2026-11-28-a.jsonl");
        assert_eq!(read_log(agent.path(), &rel, 0).as_deref(), Some(LINE.as_bytes()));
        assert_eq!(read_log(agent.path(), &rel, 5).as_deref(), Some(&LINE.as_bytes()[5..]), "from the offset");

        let gemini = SessionLogOf { own_dir: agent.path().into(), log: SessionLog::Gemini };
        for (project, session) in
            [("alpha", "session-2026-11-28T10-00-aaaa.jsonl"), ("beta", "session-2026-11-28T11-00-bbbb.jsonl")]
        {
            let dir = agent.path().join("gemini/.gemini/tmp").join(project).join("chats");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(session), LINE).unwrap();
        }
        let rel = newest_log(&gemini).unwrap().unwrap();
        assert_eq!(rel, "gemini/.gemini/tmp/beta/chats/session-2026-11-28T11-00-bbbb.jsonl");
        assert_eq!(read_log(agent.path(), &rel, 0).as_deref(), Some(LINE.as_bytes()));
    }

    /// The agent writes its own directory: a link it plants where its session log is (or on the
    /// way to it) to a file of someone else's is never followed.
    #[test]
    fn a_session_log_linked_out_of_the_agents_own_directory_is_not_read() {
        let (agent, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let secret = outside.path().join("rollout-2026-11-28-z.jsonl");
        std::fs::write(&secret, LINE).unwrap();
        let codex = SessionLogOf { own_dir: agent.path().into(), log: SessionLog::Codex };

        // The log itself a link.
        let day = agent.path().join("codex/sessions/2026/11/28");
        std::fs::create_dir_all(&day).unwrap();
        symlink(&secret, day.join("rollout-2026-11-28-z.jsonl")).unwrap();
        let rel = newest_log(&codex).unwrap().unwrap();
        assert_eq!(read_log(agent.path(), &rel, 0), None);

        // Its folder a link.
        std::fs::remove_dir_all(&day).unwrap();
        symlink(outside.path(), &day).unwrap();
        let found = newest_log(&codex);
        assert!(found.as_ref().is_err(), "{found:?}");
        assert_eq!(read_log(agent.path(), "codex/sessions/2026/11/28/rollout-2026-11-28-z.jsonl", 0), None);

        // The provider directory itself a link.
        std::fs::remove_dir_all(agent.path().join("codex")).unwrap();
        std::fs::create_dir_all(outside.path().join("sessions/2026/11/28")).unwrap();
        std::fs::copy(&secret, outside.path().join("sessions/2026/11/28/rollout-2026-11-28-z.jsonl")).unwrap();
        symlink(outside.path(), agent.path().join("codex")).unwrap();
        assert!(newest_log(&codex).is_err());
        assert_eq!(read_log(agent.path(), "codex/sessions/2026/11/28/rollout-2026-11-28-z.jsonl", 0), None);

        // Gemini CLI's project folder a link: it holds no log of ours.
        let gemini = SessionLogOf { own_dir: agent.path().into(), log: SessionLog::Gemini };
        std::fs::create_dir_all(outside.path().join("chats")).unwrap();
        std::fs::copy(&secret, outside.path().join("chats/session-2026-11-28T10-00-zzzz.jsonl")).unwrap();
        std::fs::create_dir_all(agent.path().join("gemini/.gemini/tmp")).unwrap();
        symlink(outside.path(), agent.path().join("gemini/.gemini/tmp/owl")).unwrap();
        assert_eq!(newest_log(&gemini).unwrap(), None);
    }

    #[test]
    fn a_fifo_named_as_a_transcript_is_not_read_and_does_not_hang() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("session.jsonl");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(super::read_from(&fifo, 0), None);
        let file = dir.path().join("real.jsonl");
        std::fs::write(&file, "{}\n").unwrap();
        assert_eq!(super::read_from(&file, 0).as_deref(), Some(&b"{}\n"[..]));
    }
}
