//! Making an agent's pane: its clone, Claude Code's hooks, its provider's own configuration
//! ([`provider_setup`]), its own token, then a window in the
//! node's tmux session running the provider's command. The row exists (in `spawning`) before any
//! of this happens, so a crash in between leaves a row the reconciler finishes, never a pane
//! nobody knows about.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sqlx::PgPool;

use crate::agent_writable::AgentWritable;
use crate::app::agents::{Agent, Cause};
use crate::app::{clones, worker_records};
use crate::domain::agent::{AgentEvent, SPAWN_FAILED};
use crate::feed::EventFeed;
use crate::providers::sandbox::{self, Visible};
use crate::providers::{Placeholders, Provider, Providers, Sandbox};
use crate::tmux::{Pane, Tmux, WindowSpec};
use crate::worker::claude_hooks;
use crate::worker::provider_setup::{self, UserConfig};
use crate::worker::session_niceness;

/// What spawning needs from the worker.
pub struct Spawner<'a> {
    pub db: &'a PgPool,
    pub feed: &'a EventFeed,
    pub tmux: &'a Tmux,
    pub session: &'a str,
    pub providers: std::sync::Arc<Providers>,
    pub data_dir: &'a Path,
    /// The API address agents (and `switchyard hook`) call back.
    pub api_url: &'a str,
    /// The API's Unix socket, where this process serves one.
    pub api_socket: Option<&'a Path>,
    /// The `switchyard` binary hooks run; `None`: this executable.
    pub exe: Option<&'a Path>,
    /// Whose provider logins agents get: `None`, the worker's user's.
    pub provider_home: Option<&'a Path>,
    /// Give each agent's session the provider's niceness too ([`session_niceness`]).
    pub nice_sessions: bool,
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
                let cause = Cause { detail: Some(format!("{SPAWN_FAILED}: {e:#}")), ..Cause::from("worker") };
                let mut tx = self.db.begin().await?;
                worker_records::observe(&mut tx, agent.id, None, AgentEvent::Fail, &cause).await?;
                self.feed.commit(tx).await?;
                Err(e)
            }
        }
    }

    async fn try_spawn(&self, agent: &Agent) -> anyhow::Result<Pane> {
        let provider = self
            .providers
            .get(&agent.provider)
            .ok_or_else(|| anyhow::anyhow!("provider `{}` is not configured on this node", agent.provider))?;
        let cwd = clones::workspace(self.db, self.feed, self.data_dir, agent).await?;
        if (agent.wish_id.is_some() || agent.task_id.is_some()) && agent.clone_mode == "agent" {
            // The conductor's agents are told how to report where their provider reads standing
            // instructions; kept out of their commits. A task's agent (no wish) reports on its task.
            let text = match agent.wish_id {
                Some(_) => crate::domain::briefs::standing_instructions(agent.role),
                None => crate::domain::briefs::task_instructions(),
            };
            clones::write_excluded(&cwd, &crate::domain::briefs::INSTRUCTION_FILES, &text)?;
        }
        let session_id = agent.provider_session_id.to_string();
        let clone = cwd.to_string_lossy();
        let values = Placeholders { session_id: &session_id, name: &agent.name, clone: &clone };
        // A session of ours that had a pane before is continued, not started afresh, in the
        // directory it ran in: one that moved (it joined a team) starts a new session there.
        let moved = agent.clone_path.as_deref().is_some_and(|was| Path::new(was) != cwd);
        // Its own clone elsewhere: another node's (it was taken over, or resumed there). The new
        // session knows nothing of the old one, so it is told its task again.
        let started_afresh = agent.tmux_session.is_some() && moved && agent.clone_mode == "agent";
        let mut command = if agent.tmux_session.is_some() && !moved {
            provider.resume_command(&values)
        } else {
            provider.command(&values)
        };
        let path = provider.search_path();
        let program = command.first().map(String::as_str).unwrap_or_default();
        if crate::programs::find_program(program, &path, &cwd).is_none() {
            anyhow::bail!("command not found: {program}");
        }
        let own_dir = crate::app::agents::own_dir(self.data_dir, &agent.name);
        let user = self.provider_home.map_or_else(UserConfig::from_env, UserConfig::under);
        // The project may choose its agents' permission policy over the provider's own.
        let chosen = {
            let mut conn = self.db.acquire().await?;
            crate::app::projects::permissions_for(&mut conn, agent.project_id, &agent.provider).await?
        };
        let policy = provider.policy(chosen);
        let exe = self.exe()?;
        let hook = provider.install_hooks.then_some(exe.as_path());
        let prepared = provider_setup::prepare(provider.setup, &own_dir, &cwd, &user, &provider.env, policy, hook)?;
        if provider.install_hooks && !prepared.hooks_installed {
            claude_hooks::install(&cwd, &exe)?;
        }
        command.extend(prepared.args);
        let mut tx = self.db.begin().await?;
        let token = worker_records::issue_token(&mut tx, agent.id).await?;
        let token_file = write_token(self.data_dir, &agent.name, &token)?;
        self.feed.commit(tx).await?;
        let api_url = match self.api_socket(provider) {
            Some(socket) => format!("{}{}", crate::data_dir::UNIX_URL_PREFIX, socket.display()),
            None => self.api_url.to_owned(),
        };
        let command = provider.niced(self.sandboxed(provider, agent, &cwd, &own_dir, &path, command)?);
        let spec = WindowSpec {
            session: self.session.to_owned(),
            name: agent.name.clone(),
            cwd: cwd.clone(),
            command,
            env: {
                let mut env = prepared.env;
                env.extend(provider.pane_env(&api_url, &agent.name, &token_file.to_string_lossy()));
                // What the agent's role and branch are, for scripts and `switchyard` itself.
                env.push(("SWITCHYARD_ROLE".to_owned(), agent.role.as_str().to_owned()));
                if let Some(branch) = &agent.branch {
                    env.push(("SWITCHYARD_BRANCH".to_owned(), branch.clone()));
                }
                if let Some(email) = fallback_email(&agent.name, &provider.env, std::env::var_os("EMAIL").is_some()) {
                    env.push(("EMAIL".to_owned(), email));
                }
                if provider.sandbox != Sandbox::None {
                    // `switchyard` on its PATH: its directory shows that binary alone inside.
                    let exe = self.exe()?;
                    let dir = exe.parent().unwrap_or(Path::new("/")).to_string_lossy().into_owned();
                    env.retain(|(key, _)| key != "PATH");
                    env.push(("PATH".to_owned(), format!("{dir}:{path}")));
                }
                env
            },
        };
        self.tmux.ensure_session(self.session).await?;
        let pane = self.tmux.new_window(&spec).await?;
        // `nice` alone orders the agent only within its pane's session; the session gets it too.
        if self.nice_sessions {
            session_niceness::set(pane.pid, provider.nice);
        }
        let mut tx = self.db.begin().await?;
        let pid = i32::try_from(pane.pid).ok();
        let clone_path = (agent.clone_mode != "none").then(|| cwd.to_string_lossy().into_owned());
        worker_records::record_pane(
            &mut tx,
            agent.id,
            self.session,
            &pane.window_id,
            &pane.pane_id,
            pid,
            clone_path.as_deref(),
        )
        .await?;
        if started_afresh {
            worker_records::retell_task(&mut tx, agent).await?;
        }
        self.feed.commit(tx).await?;
        Ok(pane)
    }

    /// `command` under the provider's sandbox: its clone (`cwd`) and own directory writable; the
    /// project's repository (its clone's objects), this binary (the hooks, the reports), the
    /// tools on `path`, the program itself and the provider's `sandbox_paths` read-only; an
    /// empty home.
    fn sandboxed(
        &self,
        provider: &Provider,
        agent: &Agent,
        cwd: &Path,
        own_dir: &Path,
        path: &str,
        command: Vec<String>,
    ) -> anyhow::Result<Vec<String>> {
        if provider.sandbox == Sandbox::None {
            return Ok(command);
        }
        if crate::programs::find_program("bwrap", path, cwd).is_none() {
            anyhow::bail!("provider `{}` has sandbox = \"bwrap\": install bubblewrap (bwrap)", provider.name);
        }
        // The repository its clone borrows objects from: the project's, or this node's mirror of it.
        let repo = crate::app::repository::local_dir(self.data_dir, &agent.repo);
        let mut read_only = vec![repo, self.exe()?];
        read_only.extend(Visible::tools(path));
        // A program named by its path (not on the PATH) is shown too, outside its clone.
        let program = command.first().and_then(|program| crate::programs::find_program(program, path, cwd));
        if let Some(dir) = program.as_deref().and_then(Path::parent).filter(|dir| !dir.starts_with(cwd)) {
            read_only.extend(Visible::tools(&dir.to_string_lossy()));
        }
        read_only.extend(provider.sandbox_paths.iter().cloned());
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let api_socket = self.api_socket(provider);
        let visible = Visible { workdir: cwd, own_dir, read_only, home: home.as_deref(), api_socket };
        Ok(sandbox::wrap(provider.sandbox, provider.network, &visible, command))
    }

    /// The `switchyard` binary agents run (their hooks, their reports).
    fn exe(&self) -> std::io::Result<PathBuf> {
        match self.exe {
            Some(exe) => Ok(exe.to_path_buf()),
            None => std::env::current_exe(),
        }
    }

    /// The API's Unix socket, for an agent of a provider without a network (`sandbox = "bwrap"`,
    /// `network = "none"`), when this process serves the API there (`serve`; a `worker` does not).
    fn api_socket(&self, provider: &Provider) -> Option<&Path> {
        let offline = provider.sandbox == Sandbox::Bwrap && provider.network == sandbox::Network::None;
        self.api_socket.filter(|_| offline)
    }
}

/// Writes the token of the agent's new pane to a file of its own in `<data_dir>/agents/<name>`,
/// readable by this user only (the directories 0700, the file 0600, written whole before it
/// appears), removes the files of its earlier panes, and returns its path. Each agent has a
/// directory of its own: the one an agent is shown holds no other agent's token. The agent can
/// write there, so nothing in it is followed ([`AgentWritable`]).
fn write_token(data_dir: &Path, name: &str, token: &str) -> std::io::Result<PathBuf> {
    let pane_key = uuid::Uuid::new_v4().simple().to_string();
    let path = crate::app::agents::token_file(data_dir, name, &pane_key[..12]);
    let own_dir = AgentWritable::create(path.parent().unwrap_or(data_dir), 0o700)?;
    let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    own_dir.replace(&file_name, token.as_bytes(), 0o600)?;
    // An earlier pane's token is revoked already, and that pane reads its own file: removing
    // the file is tidying, so a failure to is logged, not a failed spawn (`token` is what older
    // versions wrote).
    for entry in own_dir.names()? {
        let entry = entry.to_string_lossy().into_owned();
        let earlier = entry.starts_with(crate::app::agents::TOKEN_FILE_PREFIX) || entry == "token";
        if earlier && entry != file_name {
            if let Err(e) = own_dir.remove_file(&entry) {
                tracing::warn!(agent = name, error = %e, "removing an earlier pane's token file");
            }
        }
    }
    Ok(path)
}

/// The email an agent's commits carry when nothing else gives one: the agent's own name.
/// git commits only with an email, and finds none where the user's `~/.gitconfig` is not seen
/// (the sandbox's home is empty) on a machine without a domain name ("unable to auto-detect
/// email address"): every brief's `git commit` failed. `EMAIL` is git's last resort, so an
/// identity the agent's git config gives still wins; `None` when the provider's environment or
/// the worker's (`worker_has_one`) sets it.
fn fallback_email(agent: &str, provider_env: &BTreeMap<String, String>, worker_has_one: bool) -> Option<String> {
    (!worker_has_one && !provider_env.contains_key("EMAIL")).then(|| format!("{agent}@agents.switchyard.invalid"))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn an_agent_commits_as_itself_unless_an_email_is_given() {
        let none = std::collections::BTreeMap::new();
        assert_eq!(super::fallback_email("fox", &none, false).as_deref(), Some("fox@agents.switchyard.invalid"));
        assert_eq!(super::fallback_email("fox", &none, true), None);
        let given = [("EMAIL".to_owned(), "me@example.com".to_owned())].into_iter().collect();
        assert_eq!(super::fallback_email("fox", &given, false), None);
    }

    #[test]
    fn the_token_file_is_readable_by_its_owner_only() {
        let dir = tempfile::tempdir().expect("dir");
        let path = super::write_token(dir.path(), "fox", "sy_secret").expect("write");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "sy_secret");
        assert_eq!(std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777, 0o600);
        for dir in [path.parent().expect("own dir"), &dir.path().join("agents")] {
            assert_eq!(std::fs::metadata(dir).expect("meta").permissions().mode() & 0o777, 0o700, "{dir:?}");
        }
        let owl = super::write_token(dir.path(), "owl", "sy_other").expect("write");
        let listed: Vec<_> = std::fs::read_dir(path.parent().expect("dir")).expect("list").flatten().collect();
        assert_eq!(listed.len(), 1, "fox's directory holds fox's token only, not {owl:?}");
    }

    #[test]
    fn a_new_panes_token_is_a_file_of_its_own_and_the_earlier_panes_file_is_gone() {
        let dir = tempfile::tempdir().expect("dir");
        let first = super::write_token(dir.path(), "fox", "sy_first").expect("write");
        // The provider's configuration beside it stays.
        std::fs::create_dir(first.parent().expect("own dir").join("claude")).expect("config dir");
        let second = super::write_token(dir.path(), "fox", "sy_second").expect("write");
        assert_ne!(first, second);
        assert!(!first.exists(), "the earlier pane's token file is still there");
        assert_eq!(std::fs::read_to_string(&second).expect("read"), "sy_second");
        let mut listed: Vec<String> = std::fs::read_dir(second.parent().expect("dir"))
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        listed.sort();
        let own = second.file_name().expect("name").to_string_lossy().into_owned();
        assert_eq!(listed, ["claude".to_owned(), own]);
    }

    #[test]
    fn links_planted_in_the_agents_directory_are_neither_written_through_nor_followed() {
        let (dir, outside) = (tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("outside"));
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "precious").expect("victim");
        let own = dir.path().join("agents/fox");
        std::fs::create_dir_all(&own).expect("own dir");
        // What the agent can do from its pane: its own directory is writable in its sandbox.
        std::os::unix::fs::symlink(&victim, own.join(".token.tmp")).expect("link");
        std::os::unix::fs::symlink(&victim, own.join("token-planted")).expect("link");
        let path = super::write_token(dir.path(), "fox", "sy_new").expect("write");
        assert_eq!(std::fs::read_to_string(&victim).expect("victim"), "precious");
        assert_eq!(std::fs::read_to_string(&path).expect("token"), "sy_new");
        assert!(std::fs::symlink_metadata(own.join("token-planted")).is_err(), "the link itself is tidied away");
    }
}
