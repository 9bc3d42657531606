//! The panes of this node's agents, for the use cases that act on a pane (input, interrupt,
//! screen, suspend, kill). An agent on another node is refused with where it runs: only its own
//! node's tmux can reach it.

use crate::db::agents::Agent;
use crate::tmux::{Key, Tmux};

#[derive(Clone)]
pub struct LocalPanes {
    pub tmux: Tmux,
    pub node_id: String,
}

/// Why a pane cannot be reached from here.
#[derive(Debug, thiserror::Error)]
pub enum Unreachable {
    #[error("agent `{0}` has no pane yet (or any more)")]
    NoPane(String),
    #[error("agent `{name}` runs on node `{node}`; this API runs beside node `{here}`")]
    OtherNode { name: String, node: String, here: String },
}

impl LocalPanes {
    /// The agent's pane, if it is on this node.
    pub fn pane<'a>(&self, agent: &'a Agent) -> Result<&'a str, Unreachable> {
        let pane = agent.tmux_pane.as_deref().ok_or_else(|| Unreachable::NoPane(agent.name.clone()))?;
        match &agent.node_id {
            Some(node) if *node == self.node_id => Ok(pane),
            Some(node) => {
                Err(Unreachable::OtherNode { name: agent.name.clone(), node: node.clone(), here: self.node_id.clone() })
            }
            None => Err(Unreachable::NoPane(agent.name.clone())),
        }
    }
}

/// How to interrupt a provider mid-turn: the coding TUIs stop on Escape (Ctrl-C would quit
/// them); anything else gets Ctrl-C.
pub fn interrupt_key(provider: &str) -> Key {
    match provider {
        "claude" | "codex" | "gemini" => Key::Escape,
        _ => Key::CtrlC,
    }
}
