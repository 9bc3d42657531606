//! How the worker runs agents on this node: its settings, which `config` fills from the command
//! line and tests set directly.

/// How often a node heartbeats unless told otherwise.
pub const HEARTBEAT_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// Heartbeats a node may miss before the others count it gone (30 s at the default 5 s).
pub const HEARTBEATS_MISSED: u32 = 6;
/// Heartbeats between two sweeps of the node's mirrors of remotes no project uses any more (once
/// a minute at the default 5 s): another node deleted or moved the project.
pub const MIRROR_SWEEP_HEARTBEATS: u32 = 12;

/// How the worker runs agents on this node.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// `serve` runs the worker unless this is false (an API-only replica).
    pub enabled: bool,
    /// The conductor runs in this process (`serve` and `worker`) unless this is false.
    pub conductor: bool,
    pub tmux_socket: String,
    pub public_url: Option<String>,
    pub reconcile_every: std::time::Duration,
    /// How often the node heartbeats, on a timer of its own; a node silent for
    /// [`HEARTBEATS_MISSED`] of these is gone and its agents are settled.
    pub heartbeat_every: std::time::Duration,
    pub nudge_after: std::time::Duration,
    pub max_nudges: i32,
    /// Between pasting a message and pressing Enter.
    pub message_settle: std::time::Duration,
    /// How long a hook may take to confirm a submitted message before the screen is read.
    pub message_confirm: std::time::Duration,
    /// Run the merge queue's loop in this process (any number of nodes may).
    pub merge_queue: bool,
    /// Give each agent's session (its autogroup) the provider's niceness too.
    pub nice_sessions: bool,
    /// The `switchyard` binary agents' hooks run; `None`: the running executable (tests run the
    /// application inside the test binary, so they name the real one).
    pub switchyard_exe: Option<std::path::PathBuf>,
    /// The home whose provider logins (`~/.claude`, `~/.codex`, `~/.gemini`) agents get; `None`:
    /// the worker's own (`HOME` and the providers' variables). Tests give one of their own.
    pub provider_home: Option<std::path::PathBuf>,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            enabled: true,
            conductor: true,
            tmux_socket: "switchyard".into(),
            public_url: None,
            reconcile_every: std::time::Duration::from_secs(10),
            heartbeat_every: HEARTBEAT_EVERY,
            nudge_after: std::time::Duration::from_secs(600),
            max_nudges: 3,
            message_settle: std::time::Duration::from_millis(300),
            message_confirm: std::time::Duration::from_secs(10),
            merge_queue: true,
            nice_sessions: true,
            switchyard_exe: None,
            provider_home: None,
        }
    }
}
