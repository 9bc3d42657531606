//! Rate limits: per token on the API, per client address on the routes without a token (the
//! dashboard's login, the inbound hooks); past the burst the answer is 429 with `Retry-After`.
//! The limit here is 1 request a second with a burst of 3, so the requests after the burst are
//! refused until a second has passed; a slow machine may let one more through, which is why the
//! tests look for the refusal within a few requests after the burst.

use std::num::NonZeroU32;

use reqwest::{Response, StatusCode};
use switchyard::auth::Scope;
use switchyard::http::rate_limit::{Rate, RateLimitSettings};

use crate::helpers::{assert_problem, TestApp};

const BURST: u32 = 3;

fn low() -> Option<Rate> {
    Some(Rate { per_second: NonZeroU32::MIN, burst: NonZeroU32::new(BURST).expect("burst") })
}

async fn app(trusted_proxies: &[&str]) -> TestApp {
    TestApp::builder()
        .rate_limits(RateLimitSettings {
            per_token: low(),
            per_address: low(),
            trusted_proxies: trusted_proxies.iter().map(|p| p.parse().expect("cidr")).collect(),
        })
        .spawn()
        .await
}

/// A token made in the database, so making it spends nothing of the admin token's budget.
async fn token(app: &TestApp, scope: Scope) -> String {
    let mut tx = app.pool.begin().await.expect("begin");
    let name = format!("limited-{}", uuid::Uuid::new_v4().simple());
    let (_, secret) = switchyard::db::tokens::create(&mut tx, &name, scope).await.expect("token");
    tx.commit().await.expect("commit");
    secret
}

/// Sends `request` until it is refused: the burst passes (`passed` checks each answer), and
/// the refusal follows within a few more. Returns the refusal.
async fn until_refused(send: impl AsyncFn() -> Response, passed: impl Fn(StatusCode) -> bool) -> Response {
    for n in 1..=BURST + 5 {
        let response = send().await;
        if n <= BURST {
            assert!(passed(response.status()), "request {n} of the burst: {}", response.status());
            continue;
        }
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            return response;
        }
        assert!(passed(response.status()), "request {n}: {}", response.status());
    }
    panic!("no 429 within {} requests", BURST + 5);
}

fn retry_after(response: &Response) -> u64 {
    let value = response.headers().get("retry-after").expect("Retry-After").to_str().expect("ascii");
    value.parse().unwrap_or_else(|_| panic!("Retry-After in whole seconds: {value}"))
}

#[tokio::test]
async fn a_token_past_its_burst_gets_429_with_retry_after_and_another_token_is_unaffected() {
    let app = app(&[]).await;
    let (busy, other) = (token(&app, Scope::Read).await, token(&app, Scope::Read).await);
    let get = |secret: &str| app.client.get(app.url("/api/v1/projects")).bearer_auth(secret.to_owned()).send();
    let refused = until_refused(async || get(&busy).await.expect("get"), |s| s == StatusCode::OK).await;
    assert!(retry_after(&refused) >= 1);
    let problem = assert_problem(refused, 429).await;
    assert_eq!(problem["type"], "/problems/too-many-requests");
    assert_eq!(get(&other).await.expect("get").status(), StatusCode::OK, "each token has its own budget");
}

#[tokio::test]
async fn logging_in_too_often_from_one_address_gets_429() {
    let app = app(&[]).await;
    let post = || app.client.post(app.url("/login")).form(&[("token", "syt_wrong")]).send();
    let refused = until_refused(async || post().await.expect("login"), |s| s == StatusCode::UNAUTHORIZED).await;
    assert!(retry_after(&refused) >= 1);
    let page = refused.text().await.expect("page");
    assert!(page.contains("too many requests"), "{page}");
}

#[tokio::test]
async fn inbound_hooks_are_limited_by_address() {
    let app = app(&[]).await;
    // GitHub hooks are off here (404): the limit comes before anything else is looked at.
    let post = || app.client.post(app.url("/api/v1/hooks/github")).body("{}").send();
    let refused = until_refused(async || post().await.expect("hook"), |s| s == StatusCode::NOT_FOUND).await;
    assert!(retry_after(&refused) >= 1);
    assert_problem(refused, 429).await;
}

#[tokio::test]
async fn forwarded_for_names_the_client_only_behind_a_trusted_proxy() {
    let hook = |app: &TestApp, client: &str| {
        let request = app.client.post(app.url("/api/v1/hooks/github")).body("{}");
        request.header("x-forwarded-for", client.to_owned()).send()
    };
    // Untrusted: a forged header does not buy a fresh budget.
    let app1 = app(&[]).await;
    until_refused(async || hook(&app1, "203.0.113.1").await.expect("hook"), |s| s == StatusCode::NOT_FOUND).await;
    assert_eq!(hook(&app1, "203.0.113.2").await.expect("hook").status(), StatusCode::TOO_MANY_REQUESTS);
    // Behind a trusted proxy (the test connects from loopback): each client has its own budget.
    let app2 = app(&["127.0.0.0/8"]).await;
    until_refused(async || hook(&app2, "203.0.113.1").await.expect("hook"), |s| s == StatusCode::NOT_FOUND).await;
    assert_eq!(hook(&app2, "203.0.113.2").await.expect("hook").status(), StatusCode::NOT_FOUND);
}
