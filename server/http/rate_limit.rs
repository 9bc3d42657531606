//! Rate limits: each API token, and each client address on the routes that take no token (the
//! dashboard's login, the inbound hooks), may make so many requests a second on average and a
//! burst at once (GCRA, from `governor`). Past it the answer is 429 with `Retry-After`.
//!
//! The client address is the connection's peer. Behind a reverse proxy every request comes from
//! the proxy, so when the peer is one of `SWITCHYARD_TRUSTED_PROXIES` the client is read from
//! `X-Forwarded-For` instead: the rightmost address that is not itself a trusted proxy (anything
//! left of it the client wrote itself). Without trusted proxies the header is ignored, or anyone
//! could pick a fresh address for every request.

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use uuid::Uuid;

use crate::http::error::ApiError;
use crate::http::AppState;

/// A rate: `per_second` on average, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub per_second: std::num::NonZeroU32,
    pub burst: std::num::NonZeroU32,
}

/// Rate limits, validated; `None` is no limit (so the default, for tests and benchmarks, has
/// none; the command line's defaults are in [`RateLimitArgs`]).
#[derive(Debug, Clone, Default)]
pub struct RateLimitSettings {
    pub per_token: Option<Rate>,
    pub per_address: Option<Rate>,
    /// Peers whose `X-Forwarded-For` is believed.
    pub trusted_proxies: Vec<ipnet::IpNet>,
}

/// Forgotten keys (whose bucket is full again) are dropped every this many checks, so a stream of
/// new addresses cannot grow the tables without end.
const SWEEP_EVERY: u64 = 4096;

/// The limiters of one server, shared by every request.
pub struct RateLimits {
    per_token: Option<DefaultKeyedRateLimiter<Uuid>>,
    per_address: Option<DefaultKeyedRateLimiter<IpAddr>>,
    trusted_proxies: Vec<ipnet::IpNet>,
    checks: AtomicU64,
}

impl RateLimits {
    pub fn new(settings: &RateLimitSettings) -> RateLimits {
        RateLimits {
            per_token: settings.per_token.as_ref().map(keyed),
            per_address: settings.per_address.as_ref().map(keyed),
            trusted_proxies: settings.trusted_proxies.clone(),
            checks: AtomicU64::new(0),
        }
    }

    /// One request made with the token `token_id`.
    pub fn check_token(&self, token_id: Uuid) -> Result<(), ApiError> {
        self.sweep();
        check(self.per_token.as_ref(), &token_id, "this token")
    }

    /// One request from the client at `peer` (or behind it, see the module's docs).
    pub fn check_address(&self, peer: SocketAddr, headers: &HeaderMap) -> Result<(), ApiError> {
        self.sweep();
        let client = self.client_address(peer.ip(), headers);
        check(self.per_address.as_ref(), &client, "this address")
    }

    /// The client's address: the peer's, unless the peer is a trusted proxy.
    pub fn client_address(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let trusted = |ip: &IpAddr| self.trusted_proxies.iter().any(|net| net.contains(ip));
        if !trusted(&peer) {
            return peer;
        }
        let forwarded: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .collect();
        // Walk back from the proxy nearest us; the first hop it did not add itself is the client.
        // A hop that is not an address ends the walk at the last one that was.
        let mut client = peer;
        for hop in forwarded.into_iter().rev() {
            let Ok(hop) = hop.trim().parse::<IpAddr>() else { break };
            client = hop;
            if !trusted(&hop) {
                break;
            }
        }
        client
    }

    fn sweep(&self) {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            for limiter in self.per_token.iter() {
                limiter.retain_recent();
                limiter.shrink_to_fit();
            }
            for limiter in self.per_address.iter() {
                limiter.retain_recent();
                limiter.shrink_to_fit();
            }
        }
    }
}

fn keyed<K: std::hash::Hash + Eq + Clone>(rate: &Rate) -> DefaultKeyedRateLimiter<K> {
    RateLimiter::keyed(Quota::per_second(rate.per_second).allow_burst(rate.burst))
}

fn check<K>(limiter: Option<&DefaultKeyedRateLimiter<K>>, key: &K, who: &str) -> Result<(), ApiError>
where
    K: std::hash::Hash + Eq + Clone,
{
    let Some(limiter) = limiter else { return Ok(()) };
    limiter.check_key(key).map_err(|not_until| {
        let wait = not_until.wait_time_from(DefaultClock::default().now());
        let retry_after = retry_after_seconds(wait);
        ApiError::TooManyRequests {
            detail: format!("{who} made too many requests; try again in {retry_after} s"),
            retry_after,
        }
    })
}

/// Whole seconds, rounded up and at least one (`Retry-After` has no fractions, and 0 would
/// invite an immediate retry that fails again).
fn retry_after_seconds(wait: Duration) -> u64 {
    let whole = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    whole.max(1)
}

/// Limits the routes without a token by client address. A router driven without a socket (no
/// `ConnectInfo`) has no peer to key on and is not limited.
pub async fn limit_by_address(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if let Some(ConnectInfo(peer)) = request.extensions().get::<ConnectInfo<SocketAddr>>() {
        if let Err(error) = state.rate_limits.check_address(*peer, request.headers()) {
            return error.into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn limits(trusted: &[&str]) -> RateLimits {
        RateLimits::new(&RateLimitSettings {
            trusted_proxies: trusted.iter().map(|t| t.parse().expect("cidr")).collect(),
            ..RateLimitSettings::default()
        })
    }

    fn forwarded(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-for", HeaderValue::from_str(value).expect("header"));
        headers
    }

    #[test]
    fn forwarded_for_is_ignored_without_trusted_proxies() {
        let peer: IpAddr = "10.0.0.5".parse().unwrap();
        assert_eq!(limits(&[]).client_address(peer, &forwarded("203.0.113.9")), peer);
    }

    #[test]
    fn behind_a_trusted_proxy_the_client_is_the_first_untrusted_hop_from_the_right() {
        let limits = limits(&["10.0.0.0/8"]);
        let peer: IpAddr = "10.0.0.5".parse().unwrap();
        // The client wrote 1.2.3.4 itself; the proxy appended the address it saw.
        let client = limits.client_address(peer, &forwarded("1.2.3.4, 203.0.113.9, 10.1.1.1"));
        assert_eq!(client, "203.0.113.9".parse::<IpAddr>().unwrap());
        assert_eq!(limits.client_address(peer, &HeaderMap::new()), peer);
        let untrusted: IpAddr = "192.0.2.1".parse().unwrap();
        assert_eq!(limits.client_address(untrusted, &forwarded("203.0.113.9")), untrusted);
    }

    #[test]
    fn retry_after_is_whole_seconds_and_at_least_one() {
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(200)), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1200)), 2);
        assert_eq!(retry_after_seconds(Duration::from_secs(3)), 3);
    }
}
