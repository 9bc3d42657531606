//! Logging in (one-time link, pasted token), the session check, CSRF, logging out.

use reqwest::{Method, StatusCode};

use super::{no_redirects, redirected, session_cookie, Dashboard};
use crate::helpers::{spawn_app, TestApp};

/// A one-time login code for the app's admin token, as `serve` makes at first start.
async fn login_code(app: &TestApp) -> String {
    let token_id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM tokens WHERE name LIKE 'test-admin-%'")
        .fetch_one(&app.pool)
        .await
        .expect("the admin token");
    let mut conn = app.pool.acquire().await.expect("conn");
    switchyard::db::sessions::create_login_code(&mut conn, token_id).await.expect("code")
}

/// Posts the login form with these fields (from another site's page when `origin` says so).
async fn post_login(app: &TestApp, fields: &[(&str, &str)], origin: Option<&str>) -> reqwest::Response {
    let mut request = no_redirects().post(app.url("/login")).form(fields);
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.send().await.expect("login")
}

#[tokio::test]
async fn a_login_link_opens_one_session_and_then_opens_nothing() {
    let app = spawn_app().await;
    let code = login_code(&app).await;
    let client = no_redirects();
    let first = client.get(app.url(&format!("/login?code={code}"))).send().await.expect("login");
    assert_eq!(first.status(), StatusCode::SEE_OTHER);
    assert_eq!(first.headers()["location"], "/");
    let set = first.headers()["set-cookie"].to_str().expect("ascii").to_owned();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Lax"), "{set}");
    assert!(!set.contains("Secure"), "plain HTTP: a Secure cookie would never come back");
    let cookie = session_cookie(&first).expect("cookie");
    let home = client.get(app.url("/")).header("cookie", &cookie).send().await.expect("home");
    assert_eq!(home.status(), 200);
    assert!(home.text().await.expect("body").contains("<h1>Overview</h1>"));

    let again = client.get(app.url(&format!("/login?code={code}"))).send().await.expect("login");
    assert_eq!(again.status(), StatusCode::UNAUTHORIZED);
    assert!(session_cookie(&again).is_none());
    assert!(again.text().await.expect("body").contains("This login link was used already"));

    // Behind a TLS proxy the cookie is Secure.
    let code = login_code(&app).await;
    let tls = client
        .get(app.url(&format!("/login?code={code}")))
        .header("x-forwarded-proto", "https")
        .send()
        .await
        .expect("login");
    assert!(tls.headers()["set-cookie"].to_str().expect("ascii").contains("; Secure"));
}

#[tokio::test]
async fn an_admin_token_pasted_into_the_form_logs_in_every_time_and_others_are_refused() {
    let app = spawn_app().await;
    Dashboard::login(&app).await;
    Dashboard::login(&app).await;
    let read = app.token("read").await;
    let refused = post_login(&app, &[("token", read.as_str())], None).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(refused.text().await.expect("body").contains("the dashboard needs an admin token"));
    let unknown = post_login(&app, &[("token", "sy_nothing")], None).await;
    assert_eq!(unknown.status(), StatusCode::UNAUTHORIZED);
    let admin = app.admin_token.as_str();
    let forged = post_login(&app, &[("token", admin)], Some("https://evil.example")).await;
    assert_eq!(forged.status(), StatusCode::FORBIDDEN, "a login posted from another site");
    // `next` brings the person back where they were, but never to another site.
    let back = post_login(&app, &[("token", admin), ("next", "/wishes?status=queued")], None).await;
    assert_eq!(redirected(back).await, "/wishes?status=queued");
    let away = post_login(&app, &[("token", admin), ("next", "//evil.example/")], None).await;
    assert_eq!(redirected(away).await, "/");
    for next in ["/\t/evil.example", "/\r\nSet-Cookie: x=1", "/\n/evil.example", "/\u{7f}", "/\\evil.example"] {
        let away = post_login(&app, &[("token", admin), ("next", next)], None).await;
        assert_eq!(redirected(away).await, "/", "{next:?}");
    }
}

#[tokio::test]
async fn a_login_link_whose_next_leaves_the_site_lands_on_the_overview() {
    let app = spawn_app().await;
    for next in ["/%09/evil.example", "/%0D%0ALocation:%20//evil.example", "/%7F", "https://evil.example"] {
        let code = login_code(&app).await;
        let response =
            no_redirects().get(app.url(&format!("/login?code={code}&next={next}"))).send().await.expect("login");
        assert_eq!(redirected(response).await, "/", "{next}");
    }
}

#[tokio::test]
async fn pages_without_a_session_send_the_browser_to_the_login_form() {
    let app = spawn_app().await;
    let client = no_redirects();
    let page = client.get(app.url("/wishes?status=queued")).send().await.expect("get");
    assert_eq!(page.status(), StatusCode::SEE_OTHER);
    assert_eq!(page.headers()["location"], "/login?next=%2Fwishes%3Fstatus%3Dqueued");
    let live = client.get(app.url("/live")).send().await.expect("get");
    assert_eq!(live.status(), StatusCode::SEE_OTHER, "the live stream needs the session too");
    let htmx = client.get(app.url("/?block=needs")).header("hx-request", "true").send().await.expect("get");
    assert_eq!(htmx.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(htmx.headers()["hx-redirect"], "/login?next=%2F%3Fblock%3Dneeds");
    let stale = client.get(app.url("/")).header("cookie", "switchyard_session=sys_gone").send().await.expect("get");
    assert_eq!(stale.status(), StatusCode::SEE_OTHER);
    // The login page itself and the static files need no session.
    assert_eq!(client.get(app.url("/login")).send().await.expect("get").status(), 200);
    let css = client.get(app.url("/static/app.css")).send().await.expect("get");
    assert_eq!(css.status(), 200);
    assert_eq!(css.headers()["cache-control"], "public, max-age=31536000, immutable");
}

#[tokio::test]
async fn a_state_changing_post_without_the_csrf_token_is_refused() {
    let app = spawn_app().await;
    let project = app.create_project("alpha").await;
    let slug = project["slug"].as_str().expect("slug");
    let dashboard = Dashboard::login(&app).await;
    let board = [("project", slug), ("name", "Delivery")];

    let bare = dashboard.request(Method::POST, "/boards").form(&board).send().await.expect("post");
    assert_eq!(bare.status(), StatusCode::FORBIDDEN);
    assert!(bare.text().await.expect("body").contains("CSRF token"));
    let wrong = dashboard
        .request(Method::POST, "/boards")
        .header("x-csrf-token", "not-the-token")
        .form(&board)
        .send()
        .await
        .expect("post");
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    let logout = dashboard.request(Method::POST, "/logout").send().await.expect("post");
    assert_eq!(logout.status(), StatusCode::FORBIDDEN, "even logging out needs the token");
    let boards: i64 = sqlx::query_scalar("SELECT count(*) FROM boards").fetch_one(&app.pool).await.expect("count");
    assert_eq!(boards, 0, "nothing was created");

    // The same requests with the token: htmx sends it as a header, a plain form as a field.
    let header = dashboard
        .request(Method::POST, "/boards")
        .header("x-csrf-token", &dashboard.csrf)
        .form(&board)
        .send()
        .await
        .expect("post");
    assert!(redirected(header).await.starts_with("/boards/"));
    let field = dashboard.post_form("/boards", &[("project", slug), ("name", "Second")]).await;
    assert!(redirected(field).await.starts_with("/boards/"));
}

#[tokio::test]
async fn logging_out_ends_the_session_and_revoking_the_token_ends_it_too() {
    let app = spawn_app().await;
    let dashboard = Dashboard::login(&app).await;
    let response = dashboard.post_form("/logout", &[]).await;
    assert!(response.headers()["set-cookie"].to_str().expect("ascii").contains("Max-Age=0"));
    assert_eq!(redirected(response).await, "/login");
    let (status, _) = dashboard.get("/").await;
    assert_eq!(status, 303, "the old cookie opens nothing");

    let admin = app.token("admin").await;
    let client = no_redirects();
    let login = post_login(&app, &[("token", admin.as_str())], None).await;
    let cookie = session_cookie(&login).expect("cookie");
    let page = client.get(app.url("/agents")).header("cookie", &cookie).send().await.expect("get");
    assert_eq!(page.status(), 200);
    let name: String = sqlx::query_scalar("SELECT name FROM tokens WHERE scope = 'admin' ORDER BY created_at DESC")
        .fetch_one(&app.pool)
        .await
        .expect("name");
    let revoked = app.admin(Method::DELETE, &format!("/api/v1/tokens/{name}")).send().await.expect("revoke");
    assert!(revoked.status().is_success(), "{:?}", revoked.text().await);
    let page = client.get(app.url("/agents")).header("cookie", &cookie).send().await.expect("get");
    assert_eq!(page.status(), StatusCode::SEE_OTHER, "a session ends with its token");
}
