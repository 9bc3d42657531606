//! The worker: runs agents in tmux on this node. [`fleet`] is its loop; [`spawner`] makes panes
//! (from [`providers`], in [`clones`], with Claude Code's hooks from [`claude_hooks`]);
//! [`watcher`] turns control-mode output and screens into states; [`reconciler`] holds the
//! registry against tmux.

pub mod claude_hooks;
pub mod clones;
pub mod fleet;
pub mod panes;
pub mod providers;
pub mod reconciler;
pub mod spawner;
pub mod watcher;
