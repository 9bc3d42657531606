//! `switchyard serve` killed with SIGKILL in the middle of typing a message into an agent's pane
//! (the fake agent of `fake_inbox`, which logs every prompt submitted): after a restart on the
//! same database, data directory and tmux server, the message is submitted exactly once — never
//! lost, never typed again into the line that already holds it.

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use switchyard::auth::Scope;
use uuid::Uuid;

use crate::binary::{switchyard, Served};
use crate::fake_inbox::{hooks_run, idle_agent, prompts, providers_toml, send, wait_delivered};
use crate::helpers::{eventually, fresh_database, git_repo};

/// One switchyard installation that is started, killed and started again.
pub(crate) struct Installation {
    data: tempfile::TempDir,
    logs: tempfile::TempDir,
    pub(crate) repo: tempfile::TempDir,
    pub(crate) database_url: String,
    /// The API's port, the same across restarts: agents' hooks call it.
    port: u16,
    socket: String,
    served: Option<Served>,
    /// The logs of the runs that ended, shown when the test fails.
    past_logs: Vec<String>,
    pub(crate) client: reqwest::Client,
}

impl Drop for Installation {
    fn drop(&mut self) {
        if let Some(served) = self.served.take() {
            self.past_logs.push(served.log());
            served.crash();
        }
        if std::thread::panicking() {
            for (run, log) in self.past_logs.iter().enumerate() {
                eprintln!("---- switchyard run {} logged:\n{log}", run + 1);
            }
        }
        let _ = std::process::Command::new("tmux").args(["-L", &self.socket, "kill-server"]).status();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

impl Installation {
    /// A fresh database and data directory; with `hold_submit`, the fake agent takes a prompt
    /// only once the test creates `<logs>/<agent>.log.go` after Enter.
    async fn new(hold_submit: bool) -> Installation {
        let logs = tempfile::tempdir().expect("logs");
        let hold = if hold_submit { "1" } else { "" };
        let providers = providers_toml(logs.path(), &[("FAKE_SUBMIT_HOLD", hold)]);
        Installation::with_providers(&providers, logs).await
    }

    /// A fresh database and data directory whose agents run `providers`.
    pub(crate) async fn with_providers(providers: &str, logs: tempfile::TempDir) -> Installation {
        let data = tempfile::tempdir().expect("data dir");
        std::fs::write(data.path().join("providers.toml"), providers).expect("providers.toml");
        let (database_url, _) = fresh_database().await;
        Installation {
            data,
            logs,
            repo: git_repo(),
            database_url,
            port: free_port(),
            socket: format!("sy-crash-{}", &Uuid::new_v4().simple().to_string()[..10]),
            served: None,
            past_logs: Vec::new(),
            client: reqwest::Client::new(),
        }
    }

    /// What every pane of the installation's tmux server shows (its last 40 lines), by window.
    pub(crate) fn screens(&self) -> String {
        let tmux = |args: &[&str]| {
            let out = std::process::Command::new("tmux").args(["-L", &self.socket]).args(args).output();
            out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default()
        };
        let panes = tmux(&["list-panes", "-a", "-F", "#{pane_id} #{window_name} #{pane_current_command}"]);
        panes
            .lines()
            .map(|line| {
                let pane = line.split(' ').next().unwrap_or_default();
                format!("== {line}\n{}", tmux(&["capture-pane", "-p", "-J", "-t", pane, "-S", "-40"]).trim_end())
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub(crate) fn api(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub(crate) fn start(&mut self, settle_ms: u64, confirm_ms: u64) {
        let mut cmd = switchyard(self.data.path());
        cmd.env("DATABASE_URL", &self.database_url)
            .env("SWITCHYARD_LISTEN", format!("127.0.0.1:{}", self.port))
            .env("SWITCHYARD_TMUX_SOCKET", &self.socket)
            .env("SWITCHYARD_RECONCILE_MS", "300")
            .env("SWITCHYARD_MESSAGE_SETTLE_MS", settle_ms.to_string())
            .env("SWITCHYARD_MESSAGE_CONFIRM_MS", confirm_ms.to_string())
            .env("RUST_LOG", "info,switchyard=debug");
        self.served = Some(Served::start(cmd));
    }

    pub(crate) fn crash(&mut self) {
        let served = self.served.take().expect("running");
        self.past_logs.push(served.log());
        served.crash();
    }

    pub(crate) async fn pool(&self) -> sqlx::PgPool {
        sqlx::PgPool::connect(&self.database_url).await.expect("connect")
    }

    /// An admin token, made in the database the server migrated.
    pub(crate) async fn token(&self) -> String {
        let pool = self.pool().await;
        let mut tx = pool.begin().await.expect("begin");
        let (_, secret) = switchyard::db::tokens::create(&mut tx, "crash-test", Scope::Admin).await.expect("token");
        tx.commit().await.expect("commit");
        secret
    }

    /// A project and an idle fake agent `fox` in it.
    async fn fox(&self, token: &str) {
        let created = self
            .client
            .post(format!("{}/api/v1/projects", self.api()))
            .bearer_auth(token)
            .json(&json!({"slug": "alpha", "name": "Alpha", "repo_path": self.repo.path()}))
            .send()
            .await
            .expect("project");
        assert_eq!(created.status(), 201, "{:?}", created.text().await);
        idle_agent(&self.client, &self.api(), token, "alpha", "fox").await;
    }

    /// Whether delivery recorded the paste and the Enter of the message.
    async fn steps(&self, id: Uuid) -> (bool, bool) {
        let pool = self.pool().await;
        let (pasted, submitted): (bool, bool) =
            sqlx::query_as("SELECT pasted_at IS NOT NULL, submitted_at IS NOT NULL FROM messages WHERE id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .expect("row");
        pool.close().await;
        (pasted, submitted)
    }

    fn logs(&self) -> &Path {
        self.logs.path()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_between_the_paste_and_enter_submits_the_message_once_after_a_restart() {
    // A long settle: the server dies while the pasted text waits in the input line. An agent
    // without hooks, whose Enter waits for the settle; one with hooks gets it as soon as its
    // line shows the paste.
    let logs = tempfile::tempdir().expect("logs");
    let providers = providers_toml(logs.path(), &[("FAKE_HOOKS", "0")]);
    let mut installation = Installation::with_providers(&providers, logs).await;
    installation.start(4000, 3000);
    let token = installation.token().await;
    installation.fox(&token).await;
    let (client, api) = (installation.client.clone(), installation.api());
    let first = send(&client, &api, &token, "fox", "typed before the crash; submitted after").await;
    let second = send(&client, &api, &token, "fox", "the next one").await;
    eventually("the first message is pasted, Enter not pressed", Duration::from_secs(15), || async {
        installation.steps(first).await == (true, false)
    })
    .await;
    installation.crash();
    assert!(prompts(installation.logs(), "fox").is_empty(), "nothing submitted before the crash");

    installation.start(200, 3000);
    let delivered = wait_delivered(&client, &api, &token, first, Duration::from_secs(30)).await;
    assert_eq!(delivered["attempts"], 1, "not pasted again, only Enter pressed: {delivered}");
    wait_delivered(&client, &api, &token, second, Duration::from_secs(30)).await;
    assert_eq!(prompts(installation.logs(), "fox"), ["typed before the crash; submitted after", "the next one"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_after_enter_before_the_confirmation_neither_loses_nor_repeats_the_message() {
    // The agent takes the prompt only after the server is dead, so its hook is lost.
    let mut installation = Installation::new(true).await;
    installation.start(50, 10_000);
    let token = installation.token().await;
    installation.fox(&token).await;
    let (client, api) = (installation.client.clone(), installation.api());
    let first = send(&client, &api, &token, "fox", "submitted while the server was down").await;
    let second = send(&client, &api, &token, "fox", "after the restart").await;
    let enter = installation.logs().join("fox.log.enter");
    eventually("Enter reached the agent for the first message", Duration::from_secs(15), || async { enter.exists() })
        .await;
    assert_eq!(installation.steps(first).await, (true, true), "Enter is recorded before it is pressed");
    installation.crash();
    std::fs::write(installation.logs().join("fox.log.go"), "").expect("let the agent take it");
    eventually("the agent took the first message", Duration::from_secs(10), || async {
        prompts(installation.logs(), "fox").len() == 1
    })
    .await;
    // Its hook gave up on the dead server before the next one starts (it tries once, for 2 s).
    eventually("the agent's hook for the first message has run", Duration::from_secs(10), || async {
        hooks_run(installation.logs(), "fox").iter().any(|hook| hook == "UserPromptSubmit")
    })
    .await;

    installation.start(50, 5000);
    let delivered = wait_delivered(&client, &api, &token, first, Duration::from_secs(30)).await;
    assert_eq!(delivered["attempts"], 1, "{delivered}");
    assert_eq!(delivered["confirmed_by"], "screen", "its hook was lost; the emptied input line confirmed it");
    wait_delivered(&client, &api, &token, second, Duration::from_secs(30)).await;
    assert_eq!(prompts(installation.logs(), "fox"), ["submitted while the server was down", "after the restart"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_killed_during_100_rapid_messages_submits_each_once_and_in_order_after_a_restart() {
    const MESSAGES: usize = 100;
    let mut installation = Installation::new(false).await;
    installation.start(50, 3000);
    let token = installation.token().await;
    installation.fox(&token).await;
    let (client, api) = (installation.client.clone(), installation.api());
    let texts: Vec<String> = (0..MESSAGES).map(|i| format!("rapid message {i:03}")).collect();
    let mut ids = Vec::new();
    for text in &texts {
        ids.push(send(&client, &api, &token, "fox", text).await);
    }
    eventually("the agent took some of the messages", Duration::from_secs(60), || async {
        prompts(installation.logs(), "fox").len() >= 5
    })
    .await;
    installation.crash();
    let before = prompts(installation.logs(), "fox").len();
    assert!(before < MESSAGES, "every message was delivered before the kill; none was in flight");

    installation.start(50, 3000);
    for id in &ids {
        wait_delivered(&client, &api, &token, *id, Duration::from_secs(180)).await;
    }
    assert_eq!(prompts(installation.logs(), "fox"), texts, "each message once, in the order sent");
    println!("{MESSAGES} messages: {before} submitted before the kill, the rest after the restart");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delivery_resumed_after_the_database_was_down_never_presses_enter_without_its_text() {
    // The agent takes the prompt only once the database is down, so its hooks are lost; its
    // input line counts its prompts, so after its turn it reads otherwise than before the paste.
    let logs = tempfile::tempdir().expect("logs");
    let providers = providers_toml(logs.path(), &[("FAKE_SUBMIT_HOLD", "1"), ("FAKE_COUNT_PROMPTS", "1")]);
    let mut installation = Installation::with_providers(&providers, logs).await;
    let (mut outage, proxied) = crate::db_outage::Outage::new(&installation.database_url).await;
    installation.database_url = proxied;
    installation.start(50, 5000);
    let token = installation.token().await;
    installation.fox(&token).await;
    let (client, api) = (installation.client.clone(), installation.api());
    let first = send(&client, &api, &token, "fox", "taken while the database was down").await;
    let enter = installation.logs().join("fox.log.enter");
    eventually("Enter reached the agent", Duration::from_secs(15), || async { enter.exists() }).await;
    assert_eq!(installation.steps(first).await, (true, true), "Enter is recorded before it is pressed");

    outage.cut();
    std::fs::write(installation.logs().join("fox.log.go"), "").expect("let the agent take it");
    eventually("the agent took the message and its turn ended", Duration::from_secs(20), || async {
        prompts(installation.logs(), "fox").len() == 1
            && hooks_run(installation.logs(), "fox").iter().any(|h| h == "Stop")
    })
    .await;
    outage.restore().await;

    let delivered = wait_delivered(&client, &api, &token, first, Duration::from_secs(60)).await;
    assert_eq!(delivered["confirmed_by"], "screen", "the line no longer shows the text: {delivered}");
    let second = send(&client, &api, &token, "fox", "after the outage").await;
    wait_delivered(&client, &api, &token, second, Duration::from_secs(60)).await;
    assert_eq!(prompts(installation.logs(), "fox"), ["taken while the database was down", "after the outage"]);
    let bare = std::fs::read_to_string(installation.logs().join("fox.log.bare")).unwrap_or_default();
    assert_eq!(bare, "", "Enter was pressed into a line without the message");
}
