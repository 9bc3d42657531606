//! The application layer: one function per use case (create a wish, complete a group, register
//! an agent, disband a team, …), called alike by the API, the dashboard, the inbound webhooks and
//! the worker — the only thing they call that changes state. Each takes plain inputs and either
//! a [`Ctx`] (it opens and commits its own transaction) or a `&mut PgConnection` (a step that
//! composes with others in the caller's transaction), and answers an [`Error`] that says what
//! went wrong in the model's words, not in HTTP's.
//!
//! Dependencies point one way: `api`, `pages`, `worker` → `app` → `db`, `git`, `tmux`,
//! `providers` → `domain`; nothing here knows about the ways in.

pub mod agent_panes;
pub mod agent_states;
pub mod agents;
pub mod boards;
pub mod branch_uploads;
pub mod clones;
pub mod conductor;
pub mod delivery_records;
pub mod error;
pub mod events;
pub mod groups;
pub mod history;
pub mod hooks;
pub mod idempotency;
pub mod if_match;
pub mod local_panes;
pub mod merge_queue;
pub mod messages;
pub mod needs;
pub mod projects;
pub mod provider_status;
pub mod repository;
pub mod state_document;
pub mod tasks;
pub mod teams;
pub mod tokens;
pub mod usage;
pub mod webhook_deliveries;
pub mod webhooks;
pub mod wish_lifecycle;
pub mod wishes;
pub mod worker_records;

use std::path::PathBuf;
use std::sync::Arc;

use sqlx::PgPool;

pub use error::{Error, FieldError, Fields, Result};
pub use if_match::IfMatch;
pub use local_panes::LocalPanes;

use crate::feed::EventFeed;
use crate::node::NodeInfo;
use crate::providers::LiveProviders;

/// What use cases reach: the database, the feed their commits go through, this node, its data
/// directory, the providers and (where a worker runs beside) this node's panes. Cloning is one
/// reference count.
#[derive(Clone)]
pub struct Ctx(Arc<Parts>);

pub struct Parts {
    pub db: PgPool,
    /// What commits that record events go through (it announces them to every replica).
    pub feed: EventFeed,
    pub node: NodeInfo,
    /// Where agents' clones, token files and the message log live; nothing outside it is removed.
    pub data_dir: PathBuf,
    /// The providers agents may run (built-ins merged with `<data_dir>/providers.toml`, read
    /// again when it changes: take [`LiveProviders::current`] at each use).
    pub providers: LiveProviders,
    /// This node's agent panes; `None` where no worker runs beside this process.
    pub panes: Option<LocalPanes>,
}

impl Ctx {
    pub fn new(parts: Parts) -> Ctx {
        Ctx(Arc::new(parts))
    }
}

impl std::ops::Deref for Ctx {
    type Target = Parts;
    fn deref(&self) -> &Parts {
        &self.0
    }
}
