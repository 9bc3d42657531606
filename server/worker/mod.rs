//! The worker: runs agents in tmux on this node. [`fleet`] is its loop; [`spawner`] makes panes
//! (from [`crate::providers`], in [`crate::git::clones`], with Claude Code's hooks from [`claude_hooks`] and each
//! provider's own configuration from [`provider_setup`]);
//! [`watcher`] turns control-mode output and screens into states; [`reconciler`] holds the
//! registry against tmux; [`mailbox`] delivers messages to idle agents, each through a
//! [`delivery`] that confirms it was submitted exactly once. Each loop takes one step per
//! `tick()` (the fleet's [`fleet::Running::tick`], [`mailbox::Mailbox::tick`],
//! [`delivery::Delivery::tick`], [`reconciler::Reconciler::tick`]), so tests drive them step by step.

pub mod claude_hooks;
pub mod conductor;
pub mod delivery;
pub mod fleet;
pub mod mailbox;
pub mod provider_setup;
pub mod reconciler;
pub mod session_niceness;
pub mod spawner;
pub mod watcher;
