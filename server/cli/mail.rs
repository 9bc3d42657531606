//! `switchyard msg send|inbox|read` and `switchyard chat post|read`: the mailbox and team chat
//! from a shell, so an agent never needs curl. Inside an agent's pane they act as that agent
//! with its own token; elsewhere as the operator with `SWITCHYARD_TOKEN`
//! ([`super::client::Credentials`]).

use std::io::Read;
use std::time::Duration;

use serde_json::{json, Value};

use super::client::Credentials;
use crate::cli::args::{ChatCommand, MsgCommand};

const TIMEOUT: Duration = Duration::from_secs(30);
/// A bundle of a clone's whole history may take longer to send.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// The API said no (with its HTTP status), or could not be reached (none).
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) status: Option<reqwest::StatusCode>,
    pub(crate) message: String,
}

/// The JSON answer of a success, or the problem's `detail` and status.
async fn answer(url: &str, response: reqwest::Response) -> Result<Value, Refusal> {
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|e| Refusal { status: Some(status), message: format!("reading the answer of {url}: {e}") })?;
    let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    if status.is_success() {
        return Ok(value);
    }
    let detail = value.get("detail").and_then(Value::as_str).map(str::to_owned).unwrap_or_else(|| value.to_string());
    Err(Refusal { status: Some(status), message: format!("{detail} ({status})") })
}

/// How long a command that must not be lost (an agent's report) keeps sending a request the
/// server does not answer: long enough for `serve` to restart on a loaded machine.
pub(crate) const PERSIST: Duration = Duration::from_secs(600);
/// The longest pause between two tries: a restarted server is found within it.
const BACKOFF_CAP: Duration = Duration::from_secs(3);

/// Sends what `request` builds until the server answers it: again after a connection error or a
/// timeout, and after a 5xx (a server that cannot reach its database, or is stopping), waiting a
/// little longer each time (up to [`BACKOFF_CAP`]), for up to [`PERSIST`] (or
/// `SWITCHYARD_PERSIST_SECS`). A success or a 4xx is the answer.
async fn persist(url: &str, request: impl Fn() -> reqwest::RequestBuilder) -> Result<Value, Refusal> {
    let budget =
        std::env::var("SWITCHYARD_PERSIST_SECS").ok().and_then(|s| s.parse().ok()).map_or(PERSIST, Duration::from_secs);
    let deadline = tokio::time::Instant::now() + budget;
    let mut pause = Duration::from_millis(200);
    let mut told = false;
    loop {
        let why = match request().send().await {
            Ok(response) if !response.status().is_server_error() => return answer(url, response).await,
            Ok(response) => format!("{} answered {}", url, response.status()),
            Err(e) => format!("calling {url}: {e}"),
        };
        if tokio::time::Instant::now() + pause > deadline {
            return Err(Refusal { status: None, message: format!("{why} (gave up after {}s)", budget.as_secs()) });
        }
        if !told {
            eprintln!("{why}; trying again for up to {}s", budget.as_secs());
            told = true;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(BACKOFF_CAP);
    }
}

/// A blocking-style client over one small runtime: each command makes a few calls.
pub(crate) struct Api {
    pub(crate) credentials: Credentials,
    client: reqwest::Client,
    /// Where the requests go (a placeholder host for the API on a Unix socket).
    base: String,
    runtime: tokio::runtime::Runtime,
}

impl Api {
    pub(crate) fn new(listen: std::net::SocketAddr) -> Result<Api, String> {
        let credentials = Credentials::from_env()?.listening_on(listen);
        let (client, base) = super::client::http_client(credentials.base(), TIMEOUT)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("starting the runtime: {e}"))?;
        Ok(Api { credentials, client, base, runtime })
    }

    fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Result<Value, String> {
        self.call_with_key(method, path, body, None)
    }

    /// Calls the API; with an idempotency key, a request that failed to get an answer (the
    /// connection refused or cut) is sent once more with the same key, so it is created once.
    pub(crate) fn call_with_key(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
        key: Option<&str>,
    ) -> Result<Value, String> {
        let url = format!("{}/api/v1{path}", self.base);
        self.runtime.block_on(async {
            let request = || {
                let mut request = self.client.request(method.clone(), &url).bearer_auth(&self.credentials.token);
                if let Some(body) = &body {
                    request = request.json(body);
                }
                if let Some(key) = key {
                    request = request.header("Idempotency-Key", key);
                }
                request
            };
            let response = match (request().send().await, key) {
                (Ok(response), _) => response,
                (Err(_), Some(_)) => request().send().await.map_err(|e| format!("calling {url}: {e}"))?,
                (Err(e), None) => return Err(format!("calling {url}: {e}")),
            };
            answer(&url, response).await.map_err(|refused| refused.message)
        })
    }

    /// PUTs `bytes` as `application/octet-stream` (a git bundle); a refusal keeps its status.
    /// Sent again while the server cannot answer ([`persist`]): the same bundle moves the branch
    /// to the same commit.
    pub(crate) fn put_bytes(&self, path: &str, bytes: Vec<u8>) -> Result<Value, Refusal> {
        let url = format!("{}/api/v1{path}", self.base);
        let request = || {
            self.client
                .put(&url)
                .bearer_auth(&self.credentials.token)
                .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
                .timeout(UPLOAD_TIMEOUT)
                .body(bytes.clone())
        };
        self.runtime.block_on(persist(&url, request))
    }

    /// POSTs `body` with the idempotency key `key`, again and again while the server cannot
    /// answer (down, restarting, failing: [`persist`]), until it answers or [`PERSIST`] has
    /// passed. The key makes the request count once however often it is sent; a refusal (4xx)
    /// is final.
    pub(crate) fn post_persistently(&self, path: &str, body: Value, key: &str) -> Result<Value, String> {
        let url = format!("{}/api/v1{path}", self.base);
        let request =
            || self.client.post(&url).bearer_auth(&self.credentials.token).header("Idempotency-Key", key).json(&body);
        self.runtime.block_on(persist(&url, request)).map_err(|refused| refused.message)
    }

    /// [`Api::get`], again while the server cannot answer ([`persist`]).
    pub(crate) fn get_persistently(&self, path: &str) -> Result<Value, String> {
        let url = format!("{}/api/v1{path}", self.base);
        let request = || self.client.get(&url).bearer_auth(&self.credentials.token);
        self.runtime.block_on(persist(&url, request)).map_err(|refused| refused.message)
    }

    pub(crate) fn get(&self, path: &str) -> Result<Value, String> {
        self.call(reqwest::Method::GET, path, None)
    }

    pub(crate) fn post(&self, path: &str, body: Value) -> Result<Value, String> {
        self.call(reqwest::Method::POST, path, Some(body))
    }

    /// Every item of a paginated list, following `next_cursor`.
    pub(crate) fn all(&self, path: &str) -> Result<Vec<Value>, String> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let sep = if path.contains('?') { '&' } else { '?' };
            let page = match &cursor {
                Some(c) => self.get(&format!("{path}{sep}limit=200&cursor={c}"))?,
                None => self.get(&format!("{path}{sep}limit=200"))?,
            };
            items.extend(page["items"].as_array().cloned().unwrap_or_default());
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => return Ok(items),
            }
        }
    }

    /// The team to use: the one named, else the agent's own.
    fn team(&self, named: Option<String>) -> Result<String, String> {
        if let Some(team) = named {
            return Ok(team);
        }
        let agent = self.credentials.agent.as_deref().ok_or("pass --team (the operator is in no team)")?;
        let me = self.get(&format!("/agents/{agent}"))?;
        me["team"].as_str().map(str::to_owned).ok_or_else(|| format!("agent `{agent}` is in no team; pass --team"))
    }
}

/// BODY as given, or standard input (byte for byte) when it is `-` or absent.
pub(super) fn body_or_stdin(body: Option<String>) -> Result<String, String> {
    match body {
        Some(body) if body != "-" => Ok(body),
        _ => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| format!("reading standard input: {e}"))?;
            Ok(text)
        }
    }
}

/// `listen`: the configured listen address, where the API is unless `SWITCHYARD_URL` says.
pub fn msg(command: MsgCommand, listen: std::net::SocketAddr) -> Result<(), String> {
    let api = Api::new(listen)?;
    match command {
        MsgCommand::Send { to, body } => {
            let body = body_or_stdin(body)?;
            // A fresh key per invocation: a retry after a cut connection sends the message once.
            let key = uuid::Uuid::new_v4().to_string();
            let sent = api.call_with_key(
                reqwest::Method::POST,
                "/messages",
                Some(json!({"to": to, "body": body})),
                Some(&key),
            )?;
            say!("{} to {} ({})", sent["id"].as_str().unwrap_or(""), to, sent["state"].as_str().unwrap_or(""));
        }
        MsgCommand::Inbox { unread, mark_read, agent, json } => {
            let base = match agent.or_else(|| api.credentials.agent.clone()) {
                Some(agent) => format!("/agents/{agent}/messages"),
                None => "/messages?to=operator".to_owned(),
            };
            let path =
                if unread { format!("{base}{}unread=true", if base.contains('?') { '&' } else { '?' }) } else { base };
            for message in api.all(&path)? {
                if json {
                    say!("{message}");
                } else {
                    print_message(&message);
                }
                if mark_read && message["read"] == false {
                    api.post(&format!("/messages/{}/read", message["id"].as_str().unwrap_or("")), json!({}))?;
                }
            }
        }
        MsgCommand::Read { id } => {
            api.post(&format!("/messages/{id}/read"), json!({}))?;
            say!("{id} read");
        }
    }
    Ok(())
}

fn print_message(m: &Value) {
    let field = |name: &str| m[name].as_str().unwrap_or("").to_owned();
    let read = if m["read"] == true { "read" } else { "unread" };
    say!(
        "── {} · from {} to {} · {} · {} · {}",
        field("created_at"),
        field("from"),
        field("to"),
        field("state"),
        read,
        field("id")
    );
    say!("{}", field("body"));
}

pub fn chat(command: ChatCommand, listen: std::net::SocketAddr) -> Result<(), String> {
    let api = Api::new(listen)?;
    match command {
        ChatCommand::Post { body, team } => {
            let team = api.team(team)?;
            let body = body_or_stdin(body)?;
            let post = api.post(&format!("/teams/{team}/chat"), json!({"body": body}))?;
            say!("posted to {team} ({})", post["id"].as_str().unwrap_or(""));
        }
        ChatCommand::Read { team, json } => {
            let team = api.team(team)?;
            for post in api.all(&format!("/teams/{team}/chat"))? {
                if json {
                    say!("{post}");
                } else {
                    let field = |name: &str| post[name].as_str().unwrap_or("").to_owned();
                    say!("[{}] {}: {}", field("created_at"), field("from"), field("body"));
                }
            }
        }
    }
    Ok(())
}
