//! API tokens: how they are made, how they are stored (only a hash), and what each scope allows.

use base64::Engine;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a token may do. Ordered: each of read, write and admin includes the ones before it;
/// `agent` is below them all: it allows only what [`agent_may`] lists, for its own agent.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, clap::ValueEnum, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
#[schema(example = "write")]
pub enum Scope {
    /// Held by one agent: it may only report on itself (hooks), read itself, use its mailbox and
    /// its team's chat ([`agent_may`]). Issued by the worker when it spawns the agent; never
    /// through the tokens API or CLI.
    #[value(skip)]
    Agent,
    /// GET only.
    Read,
    /// Read and change projects, boards, tasks, wishes, agents.
    Write,
    /// Everything, including tokens and settings.
    Admin,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Agent => "agent",
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }

    pub fn parse(value: &str) -> Option<Scope> {
        match value {
            "agent" => Some(Scope::Agent),
            "read" => Some(Scope::Read),
            "write" => Some(Scope::Write),
            "admin" => Some(Scope::Admin),
            _ => None,
        }
    }

    pub fn allows(self, needed: Scope) -> bool {
        self != Scope::Agent && self >= needed
    }
}

/// Whether an agent token of agent `own` may make this request: read itself, post its hooks,
/// report on its own work and send its branch;
/// read its inbox, send messages and mark them read; read its team and use its chat. `path` is
/// under `/api/v1` (with or without it). Routes that take another name or an id (a message, a
/// team) check in their handler that it is the agent's own.
pub fn agent_may(own: &str, method: &axum::http::Method, path: &str) -> bool {
    use axum::http::Method;
    let path = path.strip_prefix("/api/v1").unwrap_or(path).trim_end_matches('/');
    let parts: Vec<&str> = path.split('/').skip(1).collect();
    let (get, post) = (*method == Method::GET, *method == Method::POST);
    match parts.as_slice() {
        ["agents", name] => get && *name == own,
        ["agents", name, "hooks"] => post && *name == own,
        ["agents", name, "report"] => post && *name == own,
        ["agents", name, "branch"] => *method == Method::PUT && *name == own,
        // Its own task's card only, and never out of a `human` column: the use case checks both.
        ["tasks", _, "move"] => post,
        ["agents", name, "messages"] => get && *name == own,
        ["messages"] => post,
        ["messages", _] => get,
        ["messages", _, "read"] => post,
        ["teams", _] => get,
        ["teams", _, "chat"] => get || post,
        _ => false,
    }
}

/// A token as the user sees it once: `sy_` and 32 random bytes, base64url.
pub struct NewToken {
    pub secret: String,
    pub hash: String,
}

pub fn generate_token() -> NewToken {
    generate_secret("sy_")
}

/// 32 random bytes, base64url, after `prefix` (which says what the secret is for: `sy_` a token,
/// `syl_` a one-time dashboard login code, `sys_` a dashboard session cookie), with its hash.
pub fn generate_secret(prefix: &str) -> NewToken {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let secret = format!("{prefix}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes));
    let hash = hash_token(&secret);
    NewToken { secret, hash }
}

/// SHA-256 is enough here: tokens carry 256 random bits, so there is nothing to brute-force, and
/// a fast hash keeps every request's lookup cheap.
pub fn hash_token(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_stored_as_their_hash() {
        let a = generate_token();
        let b = generate_token();
        assert_ne!(a.secret, b.secret);
        assert!(a.secret.len() >= 3 + 43, "{}", a.secret);
        assert_eq!(a.hash, hash_token(&a.secret));
        assert!(!a.hash.contains(&a.secret));
    }

    #[test]
    fn an_agent_token_may_only_read_itself_and_post_its_hooks() {
        use axum::http::Method;
        assert!(agent_may("fox", &Method::POST, "/api/v1/agents/fox/hooks"));
        assert!(agent_may("fox", &Method::GET, "/agents/fox"));
        assert!(!agent_may("fox", &Method::POST, "/api/v1/agents/owl/hooks"));
        assert!(!agent_may("fox", &Method::GET, "/api/v1/agents/owl"));
        assert!(!agent_may("fox", &Method::GET, "/api/v1/agents"));
        assert!(!agent_may("fox", &Method::DELETE, "/api/v1/agents/fox"));
        assert!(!agent_may("fox", &Method::PATCH, "/api/v1/agents/fox"));
        assert!(!agent_may("fox", &Method::GET, "/api/v1/tasks"));
        assert!(!agent_may("fox", &Method::GET, "/api/v1/agents/fox/screen"));
        assert!(agent_may("fox", &Method::PUT, "/api/v1/agents/fox/branch"));
        assert!(!agent_may("fox", &Method::PUT, "/api/v1/agents/owl/branch"));
        assert!(!Scope::Agent.allows(Scope::Read));
    }

    #[test]
    fn an_agent_token_may_use_its_mailbox_and_its_teams_chat() {
        use axum::http::Method;
        assert!(agent_may("fox", &Method::GET, "/api/v1/agents/fox/messages"));
        assert!(!agent_may("fox", &Method::GET, "/api/v1/agents/owl/messages"));
        assert!(agent_may("fox", &Method::POST, "/api/v1/messages"));
        assert!(!agent_may("fox", &Method::GET, "/api/v1/messages"));
        assert!(agent_may("fox", &Method::POST, "/api/v1/messages/3f2a/read"));
        assert!(agent_may("fox", &Method::GET, "/api/v1/teams/login/chat"));
        assert!(agent_may("fox", &Method::POST, "/api/v1/teams/login/chat"));
        assert!(!agent_may("fox", &Method::DELETE, "/api/v1/teams/login"));
        assert!(!agent_may("fox", &Method::POST, "/api/v1/teams/login/members"));
    }

    #[test]
    fn each_scope_includes_the_lower_ones() {
        assert!(Scope::Admin.allows(Scope::Write));
        assert!(Scope::Write.allows(Scope::Read));
        assert!(!Scope::Read.allows(Scope::Write));
        assert!(!Scope::Write.allows(Scope::Admin));
    }
}
