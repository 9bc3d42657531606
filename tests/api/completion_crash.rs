//! `switchyard serve` killed with SIGKILL while 1,000 task completions are in flight, each task
//! with a dependent waiting on it: after a restart on the same data, every completion the server
//! acknowledged is done, and each dependent of a done task became `ready` exactly once (one
//! `task.ready` event), while the dependent of a task left in progress is still `blocked`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};

use crate::binary::{switchyard, Served};
use crate::webhook_crash::wait_ready;

const TASKS: usize = 1000;

fn started(data_dir: &std::path::Path) -> Served {
    let mut cmd = switchyard(data_dir);
    // Only the API is under test: no worker, no conductor; no rate limit on the drill's bursts.
    cmd.env("SWITCHYARD_WORKER", "false")
        .env("SWITCHYARD_CONDUCTOR", "false")
        .env("SWITCHYARD_RATE_LIMIT_PER_TOKEN", "0")
        .env("SWITCHYARD_TMUX_SOCKET", format!("sy-completion-crash-{}", std::process::id()));
    Served::start(cmd)
}

pub(crate) struct Api {
    pub(crate) client: reqwest::Client,
    pub(crate) base: String,
    pub(crate) token: String,
}

impl Api {
    pub(crate) async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> reqwest::Result<(u16, Value)> {
        let mut request = self.client.request(method, format!("{}/api/v1{path}", self.base)).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        Ok((status, response.json().await.unwrap_or(Value::Null)))
    }

    pub(crate) async fn post_ok(&self, path: &str, body: Value) -> Value {
        let (status, answer) = self.send(reqwest::Method::POST, path, Some(body)).await.expect("request");
        assert!((200..300).contains(&status), "POST {path}: {status} {answer}");
        answer
    }

    pub(crate) async fn get_ok(&self, path: &str) -> Value {
        let (status, answer) = self.send(reqwest::Method::GET, path, None).await.expect("request");
        assert_eq!(status, 200, "GET {path}: {answer}");
        answer
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn completions_acknowledged_before_a_sigkill_are_done_and_each_dependent_became_ready_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = tempfile::tempdir().expect("repo");
    crate::helpers::git(repo.path(), &["init", "-q", "-b", "main"]);
    crate::helpers::git(repo.path(), &["commit", "-q", "--allow-empty", "-m", "start"]);
    let client = reqwest::Client::new();
    let first = started(dir.path());
    wait_ready(&client, &first.api).await;
    let token =
        first.stdout().lines().map(str::trim).find(|l| l.starts_with("sy_")).expect("bootstrap token").to_owned();
    let api = Arc::new(Api { client: client.clone(), base: first.api.clone(), token });
    api.post_ok("/projects", json!({"slug": "drill", "name": "Drill", "repo_path": repo.path()})).await;

    // TASKS pairs: `a{i}`, started, and `b{i}` waiting for it.
    let pairs: Vec<(String, String)> = futures::stream::iter(0..TASKS)
        .map(|i| {
            let api = api.clone();
            async move {
                let a = api.post_ok("/tasks", json!({"project": "drill", "title": format!("a{i}")})).await;
                let a = a["id"].as_str().expect("id").to_owned();
                let b = api
                    .post_ok("/tasks", json!({"project": "drill", "title": format!("b{i}"), "depends_on": [a]}))
                    .await;
                api.post_ok(&format!("/tasks/{a}/start"), json!({})).await;
                (a, b["id"].as_str().expect("id").to_owned())
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;

    // Every completion at once; the server dies once a third of them were answered (a refusal,
    // such as a 503 when no connection frees up in time, counts: it is never acknowledged). The
    // deadline only bounds a hang: in the full suite on 2 cores a third took over 120 s once.
    let answered = Arc::new(AtomicUsize::new(0));
    let completions: Vec<_> = pairs
        .iter()
        .map(|(a, _)| {
            let (api, answered, a) = (api.clone(), answered.clone(), a.clone());
            tokio::spawn(async move {
                let outcome = api.send(reqwest::Method::POST, &format!("/tasks/{a}/complete"), Some(json!({}))).await;
                if outcome.is_ok() {
                    answered.fetch_add(1, Ordering::SeqCst);
                }
                (a, matches!(outcome, Ok((200, _))))
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(300);
    while answered.load(Ordering::SeqCst) < TASKS / 3 {
        assert!(Instant::now() < deadline, "completions were not answered in time");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.crash();
    let mut acked = Vec::new();
    for completion in completions {
        let (a, ok) = completion.await.expect("join");
        if ok {
            acked.push(a);
        }
    }
    assert!(acked.len() < TASKS, "the kill came after every completion; nothing was in flight");
    assert!(!acked.is_empty(), "no completion was acknowledged before the kill");

    let second = started(dir.path());
    wait_ready(&client, &second.api).await;
    let api = Api { client: client.clone(), base: second.api.clone(), token: api.token.clone() };
    let status = |task: Value| task["status"].as_str().unwrap_or_default().to_owned();
    let mut statuses = HashMap::new();
    for (a, b) in &pairs {
        statuses.insert(a.clone(), status(api.get_ok(&format!("/tasks/{a}")).await));
        statuses.insert(b.clone(), status(api.get_ok(&format!("/tasks/{b}")).await));
    }
    for a in &acked {
        assert_eq!(statuses[a], "done", "task {a}'s completion was acknowledged, then lost");
    }
    // Every `task.ready` event, counted per task.
    let mut ready: HashMap<String, usize> = HashMap::new();
    let mut after: Option<i64> = None;
    loop {
        let from = after.map(|a| format!("&after={a}")).unwrap_or_default();
        let page = api.get_ok(&format!("/events?types=task.ready&limit=1000{from}")).await;
        let items = page["items"].as_array().expect("items");
        for event in items {
            let subject = event["subject"].as_str().unwrap_or_default();
            *ready.entry(subject.trim_start_matches("task:").to_owned()).or_default() += 1;
        }
        match page["next_after"].as_i64() {
            Some(next) if !items.is_empty() && Some(next) != after => after = Some(next),
            _ => break,
        }
    }
    let mut done = 0;
    for (a, b) in &pairs {
        match statuses[a].as_str() {
            "done" => {
                done += 1;
                assert_eq!(statuses[b], "ready", "{b} waits for {a}, which is done");
                assert_eq!(ready.get(b), Some(&1), "{b} did not become ready exactly once");
            }
            "in_progress" => {
                assert_eq!(statuses[b], "blocked", "{b} waits for {a}, still in progress");
                assert_eq!(ready.get(b), None, "{b} became ready although {a} is not done");
            }
            other => panic!("task {a} is {other}"),
        }
    }
    assert!(done >= acked.len());
    println!(
        "{TASKS} completions in flight: {} acknowledged before the kill, {done} done after the restart",
        acked.len()
    );
    second.stop();
}
