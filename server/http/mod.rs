//! The HTTP kit the API and the dashboard share: the state every handler and page reaches, errors
//! as problem+json, extractors that name the field they refuse, pagination, ETags, rate limits and
//! the caches of verified credentials. It names neither `api` nor `pages`; [`crate::routes`]
//! joins them.

pub mod error;
pub mod etag;
pub mod extract;
pub mod pagination;
pub mod query;
pub mod rate_limit;
pub mod token_cache;

use std::sync::Arc;

use crate::webhooks::WebhookSettings;
use token_cache::{SessionCache, TokenCache};

/// What every handler and page can reach. Cloned for every extractor and layer of every request,
/// so a clone is one reference count.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// The application's parts, shared by every request: the use cases' context and what only HTTP
/// needs beside it.
pub struct Shared {
    /// What the use cases reach; `state.db`, `state.feed`, … read through to it.
    pub app: crate::app::Ctx,
    pub webhooks: Arc<WebhookSettings>,
    /// Bearer tokens verified in the last second.
    pub tokens: Arc<TokenCache>,
    /// Dashboard sessions verified in the last second.
    pub sessions: Arc<SessionCache>,
    /// `GET /tasks/{id}`'s reads, batched into one statement under load.
    pub task_reads: crate::db::tasks::Reads,
    /// Where requests are counted and timed (served on the status listener).
    pub metrics: crate::metrics::Metrics,
    /// Requests left to each token and to each client address on the routes without one.
    pub rate_limits: rate_limit::RateLimits,
}

impl std::ops::Deref for Shared {
    type Target = crate::app::Ctx;
    fn deref(&self) -> &crate::app::Ctx {
        &self.app
    }
}

/// The largest request body any route takes.
pub const BODY_LIMIT: usize = 4 * 1024 * 1024;
