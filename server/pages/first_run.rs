//! The overview's first steps, shown until each is done: set up a provider (the exact
//! `providers.toml` snippet, in this server's data directory), make a project (the same form as
//! on Boards), make a wish. Each step's done or not is read from what is there, not remembered.

use crate::app::provider_status::{self, Readiness};
use crate::db::{projects, wishes};
use crate::http::AppState;
use crate::pages::view::PageResult;

/// The steps from an empty install to a first wish.
pub struct FirstRun {
    /// A provider other than `shell` is installed and configured.
    pub provider: bool,
    pub project: bool,
    pub wish: bool,
    /// Where `providers.toml` is (or would be).
    pub providers_file: String,
    /// The built-in agent CLIs and why each is not available yet, in words.
    pub waiting: Vec<(String, String)>,
}

impl FirstRun {
    /// The steps as things stand; `None` once every step is done.
    pub async fn read(state: &AppState) -> PageResult<Option<FirstRun>> {
        let mut conn = state.db.acquire().await?;
        let project = !projects::list(&mut conn, None, 1).await?.is_empty();
        let wish = !wishes::list(&mut conn, None, None, None, 1).await?.is_empty();
        let statuses = provider_status::statuses(state);
        let provider = statuses.iter().any(|p| p.name != "shell" && p.status == Readiness::Available);
        if provider && project && wish {
            return Ok(None);
        }
        let waiting = statuses
            .into_iter()
            .filter(|p| p.status != Readiness::Available)
            .filter_map(|p| Some((p.name, p.detail?)))
            .collect();
        let providers_file = state.data_dir.join(crate::providers::CONFIG_FILE).display().to_string();
        Ok(Some(FirstRun { provider, project, wish, providers_file, waiting }))
    }
}
