//! Command line and environment: every setting, its default, and the checks that make a bad
//! setting fail at start with a message naming it.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use secrecy::{ExposeSecret, SecretString};

use crate::app::merge_queue::gate::GateSettings;
use crate::http::rate_limit::{Rate, RateLimitSettings};
use crate::webhooks::ssrf::AllowList;
use crate::webhooks::WebhookSettings;
use crate::worker::{WorkerConfig, HEARTBEAT_EVERY};

#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// PostgreSQL to use; when unset, an embedded cluster under the data directory is started.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    pub database_url: Option<SecretString>,
    /// Where Switchyard keeps its state (embedded cluster, clones, the message log).
    /// Default: ~/.local/share/switchyard, or /var/lib/switchyard when run as root.
    #[arg(long, env = "SWITCHYARD_DATA_DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// Address of the API and dashboard.
    #[arg(long, env = "SWITCHYARD_LISTEN", default_value = "127.0.0.1:8080", global = true)]
    pub listen: SocketAddr,
    /// Address of the worker's status endpoint.
    #[arg(long, env = "SWITCHYARD_STATUS_LISTEN", default_value = "127.0.0.1:8765", global = true)]
    pub status_listen: SocketAddr,
    /// Log format.
    #[arg(long, env = "SWITCHYARD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub log_format: LogFormat,
    /// Directory holding the PostgreSQL server binaries (initdb, postgres) for the embedded
    /// cluster; found with pg_config or under /usr/lib/postgresql when unset.
    #[arg(long, env = "SWITCHYARD_PG_BINDIR", global = true)]
    pub pg_bindir: Option<PathBuf>,
    /// Run the worker beside the API (`serve`); `false` makes an API-only replica.
    #[arg(long, env = "SWITCHYARD_WORKER", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub run_worker: bool,
    /// Run the conductor (wishes run themselves: planners, engineers, merges into wish branches,
    /// reviews) in this process; `false` leaves every step to people.
    #[arg(long, env = "SWITCHYARD_CONDUCTOR", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub run_conductor: bool,
    /// The tmux socket (`tmux -L`) the worker runs agents on.
    #[arg(long, env = "SWITCHYARD_TMUX_SOCKET", default_value = "switchyard", global = true)]
    pub tmux_socket: String,
    /// The API address agents call back (`SWITCHYARD_URL` in their panes); default: the listen address.
    #[arg(long, env = "SWITCHYARD_PUBLIC_URL", global = true)]
    pub public_url: Option<String>,
    /// Milliseconds between the worker's reconcile passes.
    #[arg(long, env = "SWITCHYARD_RECONCILE_MS", default_value_t = 10_000, global = true)]
    pub reconcile_ms: u64,
    /// Milliseconds between the node's heartbeats; a node silent for six of these (of the
    /// observer's) is gone, and its agents are taken over. Every node of a fleet should agree.
    #[arg(long, env = "SWITCHYARD_HEARTBEAT_MS", default_value_t = HEARTBEAT_EVERY.as_millis() as u64, global = true)]
    pub heartbeat_ms: u64,
    /// Seconds an agent may stay quiet (working without output, or idle with work left) before a nudge.
    #[arg(long, env = "SWITCHYARD_NUDGE_AFTER_S", default_value_t = 600, global = true)]
    pub nudge_after_s: u64,
    /// Nudges without progress before an `agent.stuck` event.
    #[arg(long, env = "SWITCHYARD_MAX_NUDGES", default_value_t = 3, global = true)]
    pub max_nudges: i32,
    /// Milliseconds a TUI is given to take in a message pasted into its input before Enter (plus
    /// a little per byte for large messages): an agent whose hook confirms its turns gets Enter
    /// as soon as its input line shows the paste, at the latest after this; any other, after
    /// this and once its input line shows the paste.
    #[arg(long, env = "SWITCHYARD_MESSAGE_SETTLE_MS", default_value_t = 300, global = true)]
    pub message_settle_ms: u64,
    /// Milliseconds to wait for an agent's hook to confirm a submitted message before reading its
    /// screen instead.
    #[arg(long, env = "SWITCHYARD_MESSAGE_CONFIRM_MS", default_value_t = 10_000, global = true)]
    pub message_confirm_ms: u64,
    /// Give each agent's tmux session its provider's niceness too, where the kernel shares the CPU
    /// between sessions first (autogroups): there `nice` alone only orders an agent's processes
    /// among themselves.
    #[arg(long, env = "SWITCHYARD_NICE_SESSIONS", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub nice_sessions: bool,
    /// Run the merge queue in this process (`serve` and `worker`); any number of nodes may.
    #[arg(long, env = "SWITCHYARD_MERGE_QUEUE", default_value_t = true, action = clap::ArgAction::Set, global = true)]
    pub merge_queue: bool,
    /// The network of merge gates, which run code from agents' branches under bubblewrap: `host`
    /// (the default) keeps builds that fetch their dependencies working, and a gate holds nothing
    /// to send (no token, nothing of the data directory); `none` takes it away.
    #[arg(long, env = "SWITCHYARD_GATE_NETWORK", value_enum, default_value_t = crate::providers::Network::Host, global = true)]
    pub gate_network: crate::providers::Network,
    /// More paths merge gates see read-only (comma-separated, absolute): a toolchain outside
    /// the system and `PATH`, a dependency cache.
    #[arg(long, env = "SWITCHYARD_GATE_PATHS", value_delimiter = ',', global = true)]
    pub gate_paths: Vec<std::path::PathBuf>,
    #[command(flatten)]
    pub webhooks: WebhookArgs,
    #[command(flatten)]
    pub rate_limits: RateLimitArgs,
}

/// How fast callers may go.
#[derive(Debug, Clone, Args)]
pub struct RateLimitArgs {
    /// Requests per second each API token may make on average (`0`: no limit).
    #[arg(long, env = "SWITCHYARD_RATE_LIMIT_PER_TOKEN", default_value_t = 50, global = true)]
    pub rate_limit_per_token: u32,
    /// Requests a token may make at once before its average counts.
    #[arg(long, env = "SWITCHYARD_RATE_LIMIT_PER_TOKEN_BURST", default_value_t = 200, global = true)]
    pub rate_limit_per_token_burst: u32,
    /// Requests per second each client address may make to the routes without a token (the
    /// dashboard's login, the inbound hooks) on average (`0`: no limit).
    #[arg(long, env = "SWITCHYARD_RATE_LIMIT_PER_ADDRESS", default_value_t = 5, global = true)]
    pub rate_limit_per_address: u32,
    /// Requests an address may make at once to those routes before its average counts.
    #[arg(long, env = "SWITCHYARD_RATE_LIMIT_PER_ADDRESS_BURST", default_value_t = 20, global = true)]
    pub rate_limit_per_address_burst: u32,
    /// Reverse proxies whose `X-Forwarded-For` names the client, comma-separated addresses or
    /// CIDRs (`10.0.0.0/8`). Empty: the client is whoever connected, and the header is ignored.
    #[arg(long, env = "SWITCHYARD_TRUSTED_PROXIES", default_value = "", global = true)]
    pub trusted_proxies: String,
}

/// Outgoing and incoming webhooks.
#[derive(Debug, Clone, Args)]
pub struct WebhookArgs {
    /// Destinations webhooks may reach although they are loopback, private, link-local or
    /// metadata addresses: comma-separated `loopback`, `private`, `link-local`, CIDRs
    /// (`10.0.0.0/8`), addresses or host names. Everything public is allowed, unless `only` is listed.
    #[arg(long, env = "SWITCHYARD_WEBHOOK_ALLOWED_HOSTS", default_value = "", global = true)]
    pub webhook_allowed_hosts: String,
    /// Waits between delivery attempts after a failure, comma-separated (`5s,5m,30m,2h,5h,10h,10h`
    /// by default; `ms`, `s`, `m`, `h` suffixes). A delivery fails for good when it is used up.
    #[arg(long, env = "SWITCHYARD_WEBHOOK_RETRY_SCHEDULE", global = true)]
    pub webhook_retry_schedule: Option<String>,
    /// An endpoint whose deliveries have all failed for this long is disabled (default `5d`).
    #[arg(long, env = "SWITCHYARD_WEBHOOK_DISABLE_AFTER", default_value = "5d", global = true)]
    pub webhook_disable_after: String,
    /// How long one delivery attempt may take (default `10s`). A claimed delivery is leased for
    /// twice this plus a second: a sender that dies leaves it to another after the lease.
    #[arg(long, env = "SWITCHYARD_WEBHOOK_TIMEOUT", default_value = "10s", global = true)]
    pub webhook_timeout: String,
    /// Secret of the GitHub webhook (`X-Hub-Signature-256`); `/api/v1/hooks/github` answers 404
    /// while it is unset.
    #[arg(long, env = "SWITCHYARD_GITHUB_WEBHOOK_SECRET", global = true, hide_env_values = true)]
    pub github_webhook_secret: Option<SecretString>,
    /// Inbound generic hooks, comma-separated `name=whsec_…`: each enables
    /// `POST /api/v1/hooks/generic/{name}`, verified with that Standard Webhooks secret.
    #[arg(long, env = "SWITCHYARD_INBOUND_HOOKS", global = true, hide_env_values = true)]
    pub inbound_hooks: Option<SecretString>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Validated settings shared by every subcommand.
#[derive(Debug, Clone)]
pub struct Settings {
    pub database_url: Option<SecretString>,
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub status_listen: SocketAddr,
    pub log_format: LogFormat,
    pub pg_bindir: Option<PathBuf>,
    pub worker: WorkerConfig,
    /// How the merge queue's gates run on this node.
    pub gate: GateSettings,
    pub webhooks: WebhookSettings,
    pub rate_limits: RateLimitSettings,
    /// The main pool's size, [`crate::db::POOL_CONNECTIONS`]: not a setting a user makes (a
    /// node's budget is fixed, README "Many nodes"); tests run with fewer to find hold-and-wait.
    pub pool_connections: u32,
}

impl Settings {
    /// Where the database is.
    pub fn database(&self) -> crate::db::Location<'_> {
        crate::db::Location {
            database_url: self.database_url.as_ref(),
            data_dir: &self.data_dir,
            pg_bindir: self.pg_bindir.as_deref(),
            pool_connections: self.pool_connections,
        }
    }
}

/// A rate: `per_second` 0 is no limit; a burst of 0 with a limit cannot be met.
fn rate(per_second: u32, burst: u32, setting: &'static str) -> Result<Option<Rate>, ConfigError> {
    let Some(per_second) = std::num::NonZeroU32::new(per_second) else { return Ok(None) };
    let burst = std::num::NonZeroU32::new(burst)
        .ok_or_else(|| ConfigError { setting, reason: "must be at least 1 while there is a limit".into() })?;
    Ok(Some(Rate { per_second, burst }))
}

impl RateLimitArgs {
    pub fn validate(&self) -> Result<RateLimitSettings, ConfigError> {
        let per_token =
            rate(self.rate_limit_per_token, self.rate_limit_per_token_burst, "SWITCHYARD_RATE_LIMIT_PER_TOKEN_BURST")?;
        let per_address = rate(
            self.rate_limit_per_address,
            self.rate_limit_per_address_burst,
            "SWITCHYARD_RATE_LIMIT_PER_ADDRESS_BURST",
        )?;
        let trusted_proxies = self
            .trusted_proxies
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                p.parse::<ipnet::IpNet>().or_else(|_| p.parse::<std::net::IpAddr>().map(ipnet::IpNet::from)).map_err(
                    |_| ConfigError {
                        setting: "SWITCHYARD_TRUSTED_PROXIES",
                        reason: format!("`{p}` is not an address or a CIDR like 10.0.0.0/8"),
                    },
                )
            })
            .collect::<Result<_, _>>()?;
        Ok(RateLimitSettings { per_token, per_address, trusted_proxies })
    }
}

/// A setting that cannot be used, named as the user would write it.
#[derive(Debug, thiserror::Error)]
#[error("invalid setting {setting}: {reason}")]
pub struct ConfigError {
    pub setting: &'static str,
    pub reason: String,
}

impl GlobalArgs {
    pub fn validate(&self) -> Result<Settings, ConfigError> {
        if let Some(url) = &self.database_url {
            let url = url.expose_secret();
            if url.trim().is_empty() {
                return Err(ConfigError {
                    setting: "DATABASE_URL",
                    reason: "is empty; unset it to use the embedded PostgreSQL".into(),
                });
            }
            if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
                return Err(ConfigError {
                    setting: "DATABASE_URL",
                    reason: "must start with postgres:// or postgresql://".into(),
                });
            }
            url.parse::<sqlx::postgres::PgConnectOptions>().map_err(|e| ConfigError {
                setting: "DATABASE_URL",
                reason: format!("not a PostgreSQL URL ({})", redact(&e.to_string(), url)),
            })?;
        }
        if self.listen == self.status_listen && self.listen.port() != 0 {
            return Err(ConfigError {
                setting: "SWITCHYARD_STATUS_LISTEN",
                reason: format!("{} is also SWITCHYARD_LISTEN; give each its own port", self.listen),
            });
        }
        let data_dir = match &self.data_dir {
            Some(dir) if dir.as_os_str().is_empty() => {
                return Err(ConfigError { setting: "SWITCHYARD_DATA_DIR", reason: "is empty".into() })
            }
            Some(dir) => absolute(dir).map_err(|reason| ConfigError { setting: "SWITCHYARD_DATA_DIR", reason })?,
            None => default_data_dir().map_err(|reason| ConfigError { setting: "SWITCHYARD_DATA_DIR", reason })?,
        };
        if let Some(dir) = &self.pg_bindir {
            if !dir.is_dir() {
                return Err(ConfigError {
                    setting: "SWITCHYARD_PG_BINDIR",
                    reason: format!("{} is not a directory", dir.display()),
                });
            }
        }
        Ok(Settings {
            database_url: self.database_url.clone(),
            data_dir,
            listen: self.listen,
            status_listen: self.status_listen,
            log_format: self.log_format,
            pg_bindir: self.pg_bindir.clone(),
            worker: self.worker()?,
            gate: GateSettings { network: self.gate_network, read_only: self.gate_paths.clone() },
            webhooks: self.webhooks.validate()?,
            rate_limits: self.rate_limits.validate()?,
            pool_connections: crate::db::POOL_CONNECTIONS,
        })
    }
}

impl GlobalArgs {
    fn worker(&self) -> Result<WorkerConfig, ConfigError> {
        if self.tmux_socket.is_empty() || self.tmux_socket.contains(['/', ':', '.']) {
            let reason = "must be a plain name (no `/`, `:` or `.`)".into();
            return Err(ConfigError { setting: "SWITCHYARD_TMUX_SOCKET", reason });
        }
        if let Some(url) = &self.public_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                let reason = "must start with http:// or https://".into();
                return Err(ConfigError { setting: "SWITCHYARD_PUBLIC_URL", reason });
            }
        }
        if self.reconcile_ms < 50 {
            return Err(ConfigError { setting: "SWITCHYARD_RECONCILE_MS", reason: "must be at least 50".into() });
        }
        if self.heartbeat_ms < 50 {
            return Err(ConfigError { setting: "SWITCHYARD_HEARTBEAT_MS", reason: "must be at least 50".into() });
        }
        if self.max_nudges < 1 {
            return Err(ConfigError { setting: "SWITCHYARD_MAX_NUDGES", reason: "must be at least 1".into() });
        }
        if self.message_confirm_ms < 50 {
            return Err(ConfigError { setting: "SWITCHYARD_MESSAGE_CONFIRM_MS", reason: "must be at least 50".into() });
        }
        if let Some(relative) = self.gate_paths.iter().find(|p| !p.is_absolute()) {
            let reason = format!("must be absolute paths, not {}", relative.display());
            return Err(ConfigError { setting: "SWITCHYARD_GATE_PATHS", reason });
        }
        Ok(WorkerConfig {
            enabled: self.run_worker,
            conductor: self.run_conductor,
            tmux_socket: self.tmux_socket.clone(),
            public_url: self.public_url.clone(),
            reconcile_every: std::time::Duration::from_millis(self.reconcile_ms),
            heartbeat_every: std::time::Duration::from_millis(self.heartbeat_ms),
            nudge_after: std::time::Duration::from_secs(self.nudge_after_s),
            max_nudges: self.max_nudges,
            message_settle: std::time::Duration::from_millis(self.message_settle_ms),
            message_confirm: std::time::Duration::from_millis(self.message_confirm_ms),
            merge_queue: self.merge_queue,
            nice_sessions: self.nice_sessions,
            switchyard_exe: None,
            provider_home: None,
        })
    }
}

impl WebhookArgs {
    pub fn validate(&self) -> Result<WebhookSettings, ConfigError> {
        let allowed_hosts = AllowList::parse(&self.webhook_allowed_hosts)
            .map_err(|reason| ConfigError { setting: "SWITCHYARD_WEBHOOK_ALLOWED_HOSTS", reason })?;
        let retry_schedule = match &self.webhook_retry_schedule {
            Some(list) => list
                .split(',')
                .map(|d| parse_duration(d.trim()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|reason| ConfigError { setting: "SWITCHYARD_WEBHOOK_RETRY_SCHEDULE", reason })?,
            None => crate::domain::webhook::default_schedule(),
        };
        let disable_after = parse_duration(self.webhook_disable_after.trim())
            .map_err(|reason| ConfigError { setting: "SWITCHYARD_WEBHOOK_DISABLE_AFTER", reason })?;
        let timeout = parse_duration(self.webhook_timeout.trim()).ok().filter(|t| !t.is_zero()).ok_or_else(|| {
            ConfigError { setting: "SWITCHYARD_WEBHOOK_TIMEOUT", reason: "must be a duration like 10s".into() }
        })?;
        let mut inbound = Vec::new();
        if let Some(list) = &self.inbound_hooks {
            for entry in list.expose_secret().split(',').filter(|e| !e.trim().is_empty()) {
                let bad = |reason: &str| ConfigError { setting: "SWITCHYARD_INBOUND_HOOKS", reason: reason.to_owned() };
                let (name, secret) = entry.trim().split_once('=').ok_or_else(|| bad("write each as name=whsec_…"))?;
                if !crate::domain::project::is_valid_slug(name) {
                    return Err(bad("a hook name must be lowercase letters, digits and '-'"));
                }
                if crate::webhooks::signature::decode_secret(secret).is_none() {
                    return Err(bad("a secret must be whsec_ followed by base64"));
                }
                inbound.push((name.to_owned(), SecretString::from(secret.to_owned())));
            }
        }
        Ok(WebhookSettings {
            allowed_hosts,
            retry_schedule,
            disable_after,
            timeout,
            github_secret: self.github_webhook_secret.clone().filter(|s| !s.expose_secret().is_empty()),
            inbound,
            dashboard_url: None,
        })
    }
}

/// `250ms`, `5s`, `5m`, `2h`, `5d`.
pub fn parse_duration(value: &str) -> Result<std::time::Duration, String> {
    use std::time::Duration;
    let split = value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let n: u64 = number.parse().map_err(|_| format!("`{value}` is not a duration like 5s, 5m or 2h"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        "d" => Ok(Duration::from_secs(n * 86400)),
        _ => Err(format!("`{value}` has no unit (ms, s, m, h, d)")),
    }
}

/// Never echo a URL that may hold a password: drop it from error text.
fn redact(message: &str, url: &str) -> String {
    message.replace(url, "<DATABASE_URL>")
}

fn absolute(dir: &std::path::Path) -> Result<PathBuf, String> {
    std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// XDG's data home for a person; /var/lib for root, because the embedded cluster runs as the
/// `postgres` user, which cannot reach anything under /root.
fn default_data_dir() -> Result<PathBuf, String> {
    if nix::unistd::geteuid().is_root() {
        return Ok(PathBuf::from("/var/lib/switchyard"));
    }
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(xdg).join("switchyard"));
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".local/share/switchyard")),
        None => Err("HOME is not set, so there is no default; set SWITCHYARD_DATA_DIR".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::Cli;
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<Settings, ConfigError> {
        let mut argv = vec!["switchyard"];
        argv.extend_from_slice(args);
        argv.push("migrate");
        Cli::try_parse_from(argv).expect("parses").global.validate()
    }

    #[test]
    fn a_database_url_that_is_not_postgres_names_the_setting() {
        let err = parse(&["--database-url", "mysql://x"]).unwrap_err();
        assert_eq!(err.setting, "DATABASE_URL");
    }

    #[test]
    fn the_same_port_for_api_and_status_is_refused() {
        let err = parse(&["--listen", "127.0.0.1:9000", "--status-listen", "127.0.0.1:9000"]).unwrap_err();
        assert_eq!(err.setting, "SWITCHYARD_STATUS_LISTEN");
    }

    #[test]
    fn a_relative_data_dir_becomes_absolute() {
        let settings = parse(&["--data-dir", "rel/dir"]).expect("valid");
        assert!(settings.data_dir.is_absolute());
        assert!(settings.data_dir.ends_with("rel/dir"));
    }

    #[test]
    fn a_password_in_a_bad_url_is_not_echoed() {
        let err = parse(&["--database-url", "postgres://u:hunter2@h:notaport/db"]).unwrap_err();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn rate_limits_default_to_generous_for_tokens_and_strict_for_addresses() {
        let limits = parse(&[]).expect("valid").rate_limits;
        assert_eq!(limits.per_token.map(|r| (r.per_second.get(), r.burst.get())), Some((50, 200)));
        assert_eq!(limits.per_address.map(|r| (r.per_second.get(), r.burst.get())), Some((5, 20)));
        assert!(limits.trusted_proxies.is_empty());
        let off = parse(&["--rate-limit-per-token", "0"]).expect("valid").rate_limits;
        assert_eq!(off.per_token, None);
    }

    #[test]
    fn a_bad_trusted_proxy_or_burst_names_the_setting() {
        let err = parse(&["--trusted-proxies", "10.0.0.0/8, nonsense"]).unwrap_err();
        assert_eq!(err.setting, "SWITCHYARD_TRUSTED_PROXIES");
        let err = parse(&["--rate-limit-per-address-burst", "0"]).unwrap_err();
        assert_eq!(err.setting, "SWITCHYARD_RATE_LIMIT_PER_ADDRESS_BURST");
        let ok = parse(&["--trusted-proxies", "10.0.0.0/8,192.168.1.7"]).expect("valid").rate_limits;
        assert_eq!(ok.trusted_proxies.len(), 2);
    }
}
