//! Reading an agent's token use from the transcript its hooks name (`transcript_path`), a little
//! more at each hook: from where the last reading stopped, at most [`MAX_READ`] at a time, whole
//! lines only. The path comes from an untrusted agent, so only an absolute path to a regular
//! `.jsonl` file is read, and what is read only ever adds token counts. The file is read on the
//! machine that takes the hook (one node: the agent's); elsewhere the path does not exist and
//! nothing is counted.
//!
//! Also the reports: tokens and cost per model summed over the agents of a scope (an agent, a
//! wish's group, a wish, a project, everything), at the prices in `providers.toml`.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use std::collections::BTreeMap;

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{Ctx, Error, Result};
use crate::db::agent_usage::{self, Scope};
use crate::db::{agents, projects, wishes};
use crate::domain::cost::Cost;
use crate::domain::usage::{read_chunk, Usage};

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
    let mut tx = ctx.db.begin().await?;
    let mut progress = agent_usage::lock(&mut tx, agent_id, path).await?;
    let offset = u64::try_from(progress.read_offset).unwrap_or(0);
    let owned = file.to_owned();
    let bytes = tokio::task::spawn_blocking(move || read_from(&owned, offset))
        .await
        .map_err(|e| anyhow::anyhow!("reading the transcript: {e}"))?;
    let Some(bytes) = bytes else { return Ok(BTreeMap::new()) };
    let chunk = read_chunk(&bytes, progress.last_message.take());
    progress.read_offset += i64::try_from(chunk.consumed).unwrap_or(0);
    progress.last_message = chunk.last_message;
    agent_usage::add(&mut tx, agent_id, &progress, &chunk.usage).await?;
    if chunk.usage.is_empty() {
        tx.commit().await?;
    } else {
        let payload = serde_json::json!({ "added": chunk.usage });
        crate::db::events::record(&mut tx, "agent.usage_counted", &agents::subject(agent_name), payload).await?;
        ctx.feed.commit(tx).await?;
    }
    Ok(chunk.usage)
}

/// Up to [`MAX_READ`] bytes of the regular file at `path` from `offset`; `None` when it is not
/// one (missing, a directory, a device). Opened without blocking: a fifo the agent named would
/// otherwise hang the open until something wrote to it.
fn read_from(path: &Path, offset: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).ok()?;
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
    /// The providers none of whose agents in the scope has reported token use (only Claude
    /// Code's transcripts are read): their agents' work is in none of the sums. A provider with
    /// an agent that reported is never listed.
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

/// The report of the agents in `scope`, priced with the configured prices. Its two reads go on
/// connections of their own, at once: pages show it beside other parts, and under load every
/// round trip waits its turn for a core.
pub async fn report(ctx: &Ctx, scope: &Scope) -> Result<UsageReport> {
    let by_model = async { Ok::<_, Error>(agent_usage::by_model(&mut *ctx.db.acquire().await?, scope).await?) };
    // What was recorded, not what the provider's config promises: a custom provider may post
    // hooks with transcripts too, and a Claude Code agent may not have finished a turn yet.
    let unreported = async { Ok::<_, Error>(agent_usage::unreported(&mut *ctx.db.acquire().await?, scope).await?) };
    let (by_model, unreported) = tokio::try_join!(by_model, unreported)?;
    let cost = ctx.providers.prices().cost(&by_model);
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
