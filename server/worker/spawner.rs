//! Making an agent's pane: its clone, Claude Code's hooks, its own token, then a window in the
//! node's tmux session running the provider's command. The row exists (in `spawning`) before any
//! of this happens, so a crash in between leaves a row the reconciler finishes, never a pane
//! nobody knows about.

use std::path::{Path, PathBuf};

use sqlx::PgPool;

use crate::db::agents::{Agent, Cause};
use crate::db::{agents, tokens};
use crate::domain::agent::AgentEvent;
use crate::tmux::{Pane, Tmux, WindowSpec};
use crate::worker::providers::{Placeholders, Providers};
use crate::worker::{claude_hooks, clones};

/// What spawning needs from the worker.
pub struct Spawner<'a> {
    pub db: &'a PgPool,
    pub tmux: &'a Tmux,
    pub session: &'a str,
    pub providers: &'a Providers,
    pub data_dir: &'a Path,
    /// The API address agents (and `switchyard hook`) call back.
    pub api_url: &'a str,
}

impl Spawner<'_> {
    /// Spawns a claimed agent. A failure that retrying will not fix (unknown provider, a clone
    /// that cannot be made) puts the agent in `error` with the reason; the error is returned for
    /// the log either way.
    #[tracing::instrument(skip_all, fields(agent = %agent.name), err)]
    pub async fn spawn(&self, agent: &Agent) -> anyhow::Result<Pane> {
        match self.try_spawn(agent).await {
            Ok(pane) => Ok(pane),
            Err(e) => {
                let cause = Cause { detail: Some(format!("spawning failed: {e:#}")), ..Cause::from("worker") };
                let mut tx = self.db.begin().await?;
                agents::apply(&mut tx, agent.id, None, AgentEvent::Fail, &cause).await?;
                tx.commit().await?;
                Err(e)
            }
        }
    }

    async fn try_spawn(&self, agent: &Agent) -> anyhow::Result<Pane> {
        let provider = self
            .providers
            .get(&agent.provider)
            .ok_or_else(|| anyhow::anyhow!("provider `{}` is not configured on this node", agent.provider))?;
        let cwd = self.workspace(agent).await?;
        if provider.install_hooks {
            let exe = std::env::current_exe()?;
            claude_hooks::install(&cwd, &exe)?;
        }
        let mut tx = self.db.begin().await?;
        let token = tokens::issue_agent_token(&mut tx, agent.id).await?;
        tx.commit().await?;
        let session_id = agent.provider_session_id.to_string();
        let clone = cwd.to_string_lossy();
        let values = Placeholders { session_id: &session_id, name: &agent.name, clone: &clone };
        // A session of ours that had a pane before is continued, not started afresh.
        let command =
            if agent.tmux_session.is_some() { provider.resume_command(&values) } else { provider.command(&values) };
        let spec = WindowSpec {
            session: self.session.to_owned(),
            name: agent.name.clone(),
            cwd: cwd.clone(),
            command,
            env: provider.pane_env(self.api_url, &agent.name, &token),
        };
        self.tmux.ensure_session(self.session).await?;
        let pane = self.tmux.new_window(&spec).await?;
        let mut conn = self.db.acquire().await?;
        let pid = i32::try_from(pane.pid).ok();
        let clone_path = (agent.clone_mode == "agent").then(|| cwd.to_string_lossy().into_owned());
        agents::record_pane(
            &mut conn,
            agent.id,
            self.session,
            &pane.window_id,
            &pane.pane_id,
            pid,
            clone_path.as_deref(),
        )
        .await?;
        Ok(pane)
    }

    /// The directory the agent works in: its own clone on its branch, or the project's repository.
    async fn workspace(&self, agent: &Agent) -> anyhow::Result<PathBuf> {
        if agent.clone_mode != "agent" {
            return Ok(PathBuf::from(&agent.repo));
        }
        let dest = clones::clone_dir(self.data_dir, &agent.name);
        let branch = agent.branch.clone().unwrap_or_else(|| clones::default_branch(&agent.name));
        let target = {
            let mut conn = self.db.acquire().await?;
            agents::project_target_branch(&mut conn, agent.project_id).await?
        };
        clones::make(Path::new(&agent.repo), &dest, &branch, &target).await?;
        Ok(dest)
    }
}
