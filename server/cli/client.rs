//! Who the command-line client is and where it calls: what `switchyard hook`, `msg` and `chat`
//! read from the environment. In an agent's pane the worker sets `SWITCHYARD_URL`,
//! `SWITCHYARD_AGENT` and `SWITCHYARD_TOKEN_FILE` (a 0600 file holding the agent's own token,
//! never the token itself); an operator sets `SWITCHYARD_TOKEN` (and `SWITCHYARD_URL` when the
//! API is not on the default address). Errors never show the token.

/// The API address when `SWITCHYARD_URL` is unset (the default listen address).
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

#[derive(Clone)]
pub struct Credentials {
    /// `SWITCHYARD_URL`, without a trailing `/`.
    pub url: Option<String>,
    /// `SWITCHYARD_AGENT`: the agent this pane runs; `None` for the operator.
    pub agent: Option<String>,
    pub token: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("url", &self.url).field("agent", &self.agent).finish_non_exhaustive()
    }
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Credentials {
    /// Reads the environment. An agent (`SWITCHYARD_AGENT`) uses its token file first, so an
    /// operator token that leaked into a pane's environment never speaks for the agent.
    pub fn from_env() -> Result<Credentials, String> {
        let agent = var("SWITCHYARD_AGENT");
        if let Some(name) = &agent {
            if !crate::domain::agent_kind::is_valid_name(name) {
                return Err(format!("SWITCHYARD_AGENT {name:?} is not an agent name"));
            }
        }
        let from_file = || -> Option<Result<String, String>> {
            let file = var("SWITCHYARD_TOKEN_FILE")?;
            Some(
                std::fs::read_to_string(&file)
                    .map(|t| t.trim().to_owned())
                    .map_err(|e| format!("reading SWITCHYARD_TOKEN_FILE: {e}")),
            )
        };
        let token = match (&agent, from_file()) {
            (Some(_), Some(file)) => file?,
            (_, file) => match (var("SWITCHYARD_TOKEN"), file) {
                (Some(token), _) => token,
                (None, Some(file)) => file?,
                (None, None) => return Err("neither SWITCHYARD_TOKEN nor SWITCHYARD_TOKEN_FILE is set".into()),
            },
        };
        let url = var("SWITCHYARD_URL").map(|u| u.trim_end_matches('/').to_owned());
        Ok(Credentials { url, agent, token })
    }

    /// The API address, or the default one.
    pub fn base(&self) -> &str {
        self.url.as_deref().unwrap_or(DEFAULT_URL)
    }
}
