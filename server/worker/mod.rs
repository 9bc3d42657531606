//! The worker: runs agents in tmux on this node. So far: providers (what command runs an agent),
//! clones (where it works) and Claude Code's hooks (how it reports its state).

pub mod claude_hooks;
pub mod clones;
pub mod providers;
