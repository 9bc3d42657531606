//! The dashboard: its pages as a browser gets them (HTML asserted, user text escaped), logging in
//! and out, CSRF, the live stream, and end to end in headless Chromium (`browser`).

pub(crate) mod browser;
mod conductor;
mod costs;
mod first_run;
mod forms;
mod live;
mod login;
mod merged;
mod notify;
mod pages;
mod phone;
mod plan_editor;

use reqwest::{Method, StatusCode};

use crate::helpers::TestApp;

/// A browser-like client with a dashboard session: its cookie and the CSRF token its pages carry.
pub struct Dashboard {
    pub address: String,
    pub client: reqwest::Client,
    pub cookie: String,
    pub csrf: String,
}

/// A client that shows redirects instead of following them.
pub fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client")
}

/// The session cookie a response sets (`name=value`), if any.
pub fn session_cookie(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("switchyard_session="))
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
}

/// The CSRF token in a page's forms.
pub fn csrf_in(html: &str) -> String {
    let marker = "name=\"_csrf\" value=\"";
    let start = html.find(marker).map(|i| i + marker.len()).unwrap_or_else(|| panic!("no CSRF field in:\n{html}"));
    html[start..].split('"').next().expect("a value").to_owned()
}

impl Dashboard {
    /// Logs in with the app's admin token through the login form.
    pub async fn login(app: &TestApp) -> Dashboard {
        let client = no_redirects();
        let response = client
            .post(app.url("/login"))
            .form(&[("token", app.admin_token.as_str()), ("next", "/")])
            .send()
            .await
            .expect("login");
        assert_eq!(response.status(), StatusCode::SEE_OTHER, "{:?}", response.text().await);
        let cookie = session_cookie(&response).expect("a session cookie");
        let mut dashboard = Dashboard { address: app.address.clone(), client, cookie, csrf: String::new() };
        let (status, html) = dashboard.get("/").await;
        assert_eq!(status, 200);
        dashboard.csrf = csrf_in(&html);
        dashboard
    }

    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.client.request(method, format!("{}{path}", self.address)).header("cookie", &self.cookie)
    }

    /// A page (or a part of one), as status and HTML.
    pub async fn get(&self, path: &str) -> (u16, String) {
        let response = self.request(Method::GET, path).send().await.expect("get");
        let status = response.status().as_u16();
        (status, response.text().await.expect("body"))
    }

    /// Submits a form the way a page does without JavaScript (the CSRF token as a field).
    pub async fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> reqwest::Response {
        let mut all: Vec<(&str, &str)> = vec![("_csrf", self.csrf.as_str())];
        all.extend_from_slice(fields);
        self.request(Method::POST, path).form(&all).send().await.expect("post")
    }
}

/// Asserts a form post answered "see the page it changed" and returns where.
pub async fn redirected(response: reqwest::Response) -> String {
    let status = response.status();
    let location = response.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    assert_eq!(status, StatusCode::SEE_OTHER, "{:?}", response.text().await);
    location
}
