//! The node's background loops, one home for all of them. [`fleet`] runs agents in tmux on this
//! node: [`spawner`] makes panes (from [`crate::providers`], in [`crate::app::clones`], with
//! Claude Code's hooks from [`claude_hooks`] and each provider's own configuration from
//! [`provider_setup`]); [`watcher`] turns control-mode output and screens into states;
//! [`reconciler`] holds the registry against tmux; [`mailbox`] delivers messages to idle agents,
//! each through a [`delivery`] that confirms it was submitted exactly once. Beside them, loops
//! that only schedule `app`'s use cases (git work included): the [`conductor`], the
//! [`merge_queue`], the [`webhook_sender`] and the [`state_file`] writer. Each loop takes one step
//! per `tick()` (the fleet's [`fleet::Running::tick`], [`mailbox::Mailbox::tick`],
//! [`delivery::Delivery::tick`], [`reconciler::Reconciler::tick`],
//! `app::merge_queue::MergeQueue::tick`), so tests drive them step by step.

pub mod claude_hooks;
pub mod conductor;
pub mod delivery;
pub mod fleet;
pub mod mailbox;
pub mod merge_queue;
pub mod provider_setup;
pub mod reconciler;
pub mod session_niceness;
pub mod settings;
pub mod spawner;
pub mod state_file;
pub mod watcher;
pub mod webhook_sender;

pub use settings::{WorkerConfig, HEARTBEATS_MISSED, HEARTBEAT_EVERY, MIRROR_SWEEP_HEARTBEATS};
