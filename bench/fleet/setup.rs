//! The fleet benchmark's side of the database: its agents registered through the use case
//! (`app::agents::create`), the server's counters, and the mail it sends meanwhile.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use rand::Rng;
use sqlx::PgPool;
use switchyard::app::{self, agents::NewAgentInput, agents::Workspace, projects::NewProject};
use switchyard::domain::agent_kind::{AgentKind, AgentRole};

pub struct Setup {
    pool: PgPool,
    ctx: app::Ctx,
    _dir: tempfile::TempDir,
    _repo: tempfile::TempDir,
}

/// PostgreSQL's own counters for the bench's database.
pub struct Counters {
    pub commits: i64,
    pub wal: i64,
    /// Transaction ids handed out: the transactions that wrote.
    pub xids: i64,
}

impl Setup {
    pub async fn new(database_url: &str) -> anyhow::Result<Setup> {
        let pool = sqlx::postgres::PgPoolOptions::new().max_connections(4).connect(database_url).await?;
        switchyard::db::migrate(&pool).await?;
        let dir = tempfile::tempdir()?;
        let node = switchyard::node::NodeInfo::load(dir.path())?;
        let logins = switchyard::providers::logins::UserConfig::under(&dir.path().join("home"));
        let providers = switchyard::providers::LiveProviders::load(dir.path(), logins)?;
        let ctx = app::Ctx::new(app::Parts {
            db: pool.clone(),
            feed: Default::default(),
            node,
            data_dir: dir.path().to_path_buf(),
            providers,
            panes: None,
        });
        let repo = super::common::git_repo()?;
        let project = NewProject {
            slug: "fleet".into(),
            name: "Fleet".into(),
            repo_path: repo.path().display().to_string(),
            repo_url: None,
            repo_secret: None,
            push_remote: None,
            target_branch: None,
            github_url: None,
            fork_config: None,
            merge_queue_config: None,
            pr_shepherd_config: None,
            conductor_config: None,
        };
        app::projects::create(&ctx, project, None).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
        Ok(Setup { pool, ctx, _dir: dir, _repo: repo })
    }

    /// Registers `n` agents (each waiting for a node to claim it); answers their names.
    pub async fn agents(&self, n: usize) -> anyhow::Result<Vec<String>> {
        let created = futures_util::stream::iter(0..n)
            .map(|i| async move {
                let input = NewAgentInput {
                    name: Some(format!("sim-{i}")),
                    project: "fleet".into(),
                    kind: AgentKind::Worker,
                    role: AgentRole::Engineer,
                    provider: "shell".into(),
                    task: None,
                    wish: None,
                    group: None,
                    workspace: Some(Workspace::ProjectRepo),
                    branch: None,
                    team: None,
                };
                app::agents::create(&self.ctx, input, None).await.map(|a| a.name)
            })
            .buffer_unordered(4)
            .collect::<Vec<_>>()
            .await;
        created.into_iter().map(|r| r.map_err(|e| anyhow::anyhow!("{e:?}"))).collect()
    }

    /// How many agents have a pane.
    pub async fn placed(&self) -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar("SELECT count(*) FROM agents WHERE tmux_pane IS NOT NULL").fetch_one(&self.pool).await?)
    }

    pub async fn counters(&self) -> anyhow::Result<Counters> {
        let (commits, wal, xids): (i64, i64, i64) = sqlx::query_as(
            "SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()),
                    (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint,
                    pg_snapshot_xmax(pg_current_snapshot())::text::bigint",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(Counters { commits, wal, xids })
    }

    /// Sends messages from the operator to random agents for `length`, to each agent one per
    /// `every_s` seconds on average; answers how many.
    pub async fn mail_for(&self, names: &[String], length: Duration, every_s: u64) -> anyhow::Result<u64> {
        let per_second = names.len() as f64 / every_s.max(1) as f64;
        let started = Instant::now();
        let mut sent = 0u64;
        while started.elapsed() < length {
            let due = (started.elapsed().as_secs_f64() * per_second) as u64;
            while sent < due {
                let to = &names[rand::thread_rng().gen_range(0..names.len())];
                let body = format!("message {sent}: go on with the next step");
                app::messages::send(&self.ctx, "operator".into(), to, body, None)
                    .await
                    .map_err(|e| anyhow::anyhow!("{e:?}"))?;
                sent += 1;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(sent)
    }

    pub async fn close(self) {
        self.pool.close().await;
    }
}
