//! Bearer tokens and dashboard sessions verified in the last second, by the SHA-256 of their
//! secret: under load nearly every request then costs no lookup (a dashboard page under load
//! waits its turn for a core at every round trip to the database, so one fewer shows). A
//! revoked token or an ended session stops working at once on the replica that revoked or ended
//! it (its cache is cleared) and within a second everywhere else (another replica, `switchyard
//! token revoke`). Agent tokens are never cached: a respawn replaces them at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::db::sessions::Session;
use crate::db::tokens::Caller;

/// How long a verified secret is trusted without asking the database again.
const TTL: Duration = Duration::from_secs(1);
/// Past this many entries the expired ones are dropped (and, if that is not enough, all).
const CAPACITY: usize = 10_000;

/// What a secret's hash was verified to stand for, and when.
pub struct VerifiedCache<V> {
    entries: Mutex<HashMap<String, (V, Instant)>>,
}

pub type TokenCache = VerifiedCache<Caller>;
pub type SessionCache = VerifiedCache<Session>;

impl<V> Default for VerifiedCache<V> {
    fn default() -> Self {
        VerifiedCache { entries: Mutex::new(HashMap::new()) }
    }
}

impl<V: Clone> VerifiedCache<V> {
    /// What a secret's hash stands for, if it was verified less than [`TTL`] ago.
    pub fn get(&self, hash: &str) -> Option<V> {
        let entries = self.entries.lock().ok()?;
        entries.get(hash).filter(|(_, at)| at.elapsed() < TTL).map(|(value, _)| value.clone())
    }

    /// Remembers what was just read from the database (or whose use was just recorded).
    pub fn put(&self, hash: String, value: V, verified_at: Instant) {
        let Ok(mut entries) = self.entries.lock() else { return };
        if entries.len() >= CAPACITY {
            entries.retain(|_, (_, at)| at.elapsed() < TTL);
            if entries.len() >= CAPACITY {
                entries.clear();
            }
        }
        entries.insert(hash, (value, verified_at));
    }

    /// Forgets everything: after a revocation or a logout, the next request of each asks the
    /// database.
    pub fn clear(&self) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Scope;

    fn caller() -> Caller {
        Caller {
            token_id: uuid::Uuid::new_v4(),
            name: "ci".into(),
            scope: Scope::Read,
            last_used_at: None,
            agent: None,
        }
    }

    #[test]
    fn a_token_is_trusted_for_a_second_and_forgotten_on_clear() {
        let cache = TokenCache::default();
        cache.put("h".into(), caller(), Instant::now());
        assert_eq!(cache.get("h").map(|c| c.name), Some("ci".to_owned()));
        cache.clear();
        assert!(cache.get("h").is_none());
        let old = Instant::now().checked_sub(TTL * 2).expect("an instant two seconds ago");
        cache.put("h".into(), caller(), old);
        assert!(cache.get("h").is_none(), "an entry older than the TTL is not trusted");
    }
}
