//! Who the command-line client is and where it calls: what `switchyard hook`, `msg` and `chat`
//! read from the environment. In an agent's pane the worker sets `SWITCHYARD_URL`,
//! `SWITCHYARD_AGENT` and `SWITCHYARD_TOKEN_FILE` (a 0600 file holding the agent's own token,
//! never the token itself); an operator sets `SWITCHYARD_TOKEN`, and the API is found at
//! `SWITCHYARD_URL`, else at the configured listen address (`SWITCHYARD_LISTEN`, `--listen`).
//! Errors never show the token.

/// The API address when `SWITCHYARD_URL` is unset (the default listen address).
pub const DEFAULT_URL: &str = "http://127.0.0.1:8080";

#[derive(Clone)]
pub struct Credentials {
    /// `SWITCHYARD_URL`, without a trailing `/`.
    pub url: Option<String>,
    /// Where the API is when `url` is not given: the configured listen address.
    pub fallback: String,
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
        Ok(Credentials { url, agent, token, fallback: DEFAULT_URL.to_owned() })
    }

    /// The API is at the listen address `listen` unless `SWITCHYARD_URL` says otherwise.
    pub fn listening_on(self, listen: std::net::SocketAddr) -> Credentials {
        Credentials { fallback: url_of_listen(listen), ..self }
    }

    /// The API address: `SWITCHYARD_URL`, else the listen address.
    pub fn base(&self) -> &str {
        self.url.as_deref().unwrap_or(&self.fallback)
    }
}

/// A client for the API at `url` and the URL to call it by: a `unix:<socket>` URL is reached over
/// that socket (the requests name a placeholder host).
pub fn http_client(url: &str, timeout: std::time::Duration) -> Result<(reqwest::Client, String), String> {
    let builder = reqwest::Client::builder().timeout(timeout);
    let (builder, base) = match url.strip_prefix(crate::data_dir::UNIX_URL_PREFIX) {
        Some(socket) => (builder.unix_socket(std::path::PathBuf::from(socket)), "http://switchyard".to_owned()),
        None => (builder, url.trim_end_matches('/').to_owned()),
    };
    Ok((builder.build().map_err(|e| e.to_string())?, base))
}

/// The URL a client on this machine calls for a server listening on `addr`: a wildcard address
/// (`0.0.0.0`, `::`) is reached on loopback.
pub fn url_of_listen(addr: std::net::SocketAddr) -> String {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    format!("http://{}", std::net::SocketAddr::new(ip, addr.port()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_wildcard_listen_address_is_called_on_loopback() {
        let url = |a: &str| super::url_of_listen(a.parse().expect("addr"));
        assert_eq!(url("0.0.0.0:9000"), "http://127.0.0.1:9000");
        assert_eq!(url("[::]:9000"), "http://[::1]:9000");
        assert_eq!(url("10.1.2.3:8080"), "http://10.1.2.3:8080");
    }
}
