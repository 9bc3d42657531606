//! `switchyard serve` killed with SIGKILL while the conductor runs a wish — once just after it
//! dispatched the first group, once just after it merged one into the wish's branch: after each
//! restart on the same database, data directory and tmux server the wish goes on from where it
//! was, each group runs on exactly one agent, and each is merged once.

use std::time::Duration;

use serde_json::{json, Value};

use crate::conductor::Fakes;
use crate::helpers::{eventually, git};
use crate::mailbox_crash::Installation;

/// The wish's status, and each group's and agent's, as rows of text.
async fn where_it_stands(installation: &Installation) -> String {
    let pool = installation.pool().await;
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT 'wish ' || slug || ' ' || status::text FROM wishes
         UNION ALL SELECT 'group ' || coalesce(group_key, '?') || ' ' || status::text || ' assignee=' || coalesce(assignee, '-')
                || ' reported=' || (reported_at IS NOT NULL)::text || ' merged=' || (merge_commit IS NOT NULL)::text FROM tasks
         UNION ALL SELECT 'agent ' || name || ' ' || state::text || ' task=' || coalesce(task_id::text, '-') FROM agents
         UNION ALL (SELECT 'event ' || type || ' ' || subject || ' ' || payload::text FROM events
                     WHERE subject LIKE 'wish:%' OR type LIKE 'wish.%' ORDER BY id)",
    )
    .fetch_all(&pool)
    .await
    .expect("where it stands");
    pool.close().await;
    rows.into_iter().map(|(r,)| r).collect::<Vec<_>>().join("\n")
}

/// Counts rows of a query over the installation's database.
async fn count(installation: &Installation, sql: &str) -> i64 {
    let pool = installation.pool().await;
    let n = sqlx::query_scalar(sql).fetch_one(&pool).await.expect("count");
    pool.close().await;
    n
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wish_survives_sigkill_after_a_dispatch_and_after_a_merge_with_one_agent_and_one_merge_per_group() {
    let fakes = Fakes::new();
    let logs = tempfile::tempdir().expect("logs");
    let mut installation = Installation::with_providers(&fakes.providers(), logs).await;
    installation.start(50, 3000);
    let token = installation.token().await;
    let (client, api) = (installation.client.clone(), installation.api());
    let call = |method: reqwest::Method, path: &str, body: Value| {
        client.request(method, format!("{api}/api/v1{path}")).bearer_auth(&token).json(&body).send()
    };
    let repo = installation.repo.path().to_path_buf();
    // Measured up to `completed`: the merge queue (its own tests) would take the wish on from
    // there.
    let project = json!({"slug": "alpha", "name": "Alpha", "repo_path": repo,
                         "conductor_config": {"provider": "fake", "review": "none"},
                         "merge_queue_config": {"enabled": false, "track_mode": "all"}});
    assert_eq!(call(reqwest::Method::POST, "/projects", project).await.expect("project").status(), 201);
    let wish = json!({"slug": "crash", "project": "alpha", "title": "t", "groups": [
        {"key": "a", "title": "A"}, {"key": "b", "title": "B", "depends_on": ["a"]},
        {"key": "c", "title": "C"}, {"key": "d", "title": "D", "depends_on": ["c"]}]});
    assert_eq!(call(reqwest::Method::POST, "/wishes", wish).await.expect("wish").status(), 201);
    assert_eq!(call(reqwest::Method::POST, "/wishes/crash/plan", json!({})).await.expect("plan").status(), 200);

    eventually("a group is dispatched", Duration::from_secs(60), || async {
        count(&installation, "SELECT count(*) FROM events WHERE type = 'task.assigned'").await > 0
    })
    .await;
    installation.crash();
    installation.start(50, 3000);
    eventually("a group is merged into the wish's branch", Duration::from_secs(90), || async {
        count(&installation, "SELECT count(*) FROM tasks WHERE merge_commit IS NOT NULL").await > 0
    })
    .await;
    installation.crash();
    installation.start(50, 3000);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while count(&installation, "SELECT count(*) FROM wishes WHERE slug = 'crash' AND status = 'completed'").await != 1 {
        // Stuck: what the wish, its groups and their agents look like says where.
        assert!(
            std::time::Instant::now() < deadline,
            "the wish did not complete: {}\nthe panes:\n{}",
            where_it_stands(&installation).await,
            installation.screens()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let per_group: Vec<(String, i64)> = {
        let pool = installation.pool().await;
        let rows = sqlx::query_as(
            "SELECT t.group_key, count(a.id) FROM tasks t LEFT JOIN agents a ON a.task_id = t.id
             GROUP BY t.group_key ORDER BY t.group_key",
        )
        .fetch_all(&pool)
        .await
        .expect("agents per group");
        pool.close().await;
        rows
    };
    let expected: Vec<(String, i64)> = ["a", "b", "c", "d"].iter().map(|k| ((*k).to_owned(), 1)).collect();
    assert_eq!(per_group, expected, "each group ran on exactly one agent");
    assert_eq!(git(&repo, &["rev-list", "--merges", "--count", "main..wish/crash"]).trim(), "4", "one merge per group");
    let handed = count(&installation, "SELECT count(*) FROM tasks WHERE assignee = 'human'").await;
    assert_eq!(handed, 0, "no group was handed to a person");
}
