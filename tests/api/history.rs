//! The history of a merged wish's workers, as the API lists it: each row names its work in a
//! line (its group's title, the planner's step), carries the summary its group reported, and only
//! the workers whose work merged are marked `merged`.

use serde_json::{json, Value};

use crate::helpers::spawn_app;
use crate::merge_queue::{project, Shape};

#[tokio::test]
async fn a_merged_wishs_history_names_each_workers_work_with_its_groups_summary_and_merges_only_the_work() {
    let app = spawn_app().await;
    let p = project(&app, "hist", Shape::Bare, &[]).await;
    app.skip_reviews("hist").await;
    p.push("wish/h", &[("h.txt", "h\n")]);
    app.create_wish(json!({"slug": "h", "project": "hist", "title": "Wish h", "branch": "wish/h",
        "groups": [{"key": "work", "title": "Write h.txt"}]}))
        .await;
    app.start_wish("h").await;
    app.post_ok("/api/v1/wishes/h/groups/work/start", json!({})).await;
    let brief = "Plan the wish \"Wish h\": split it into groups.\n\nThe wish:\nmany lines of brief";
    let workers = [
        json!({"name": "planner-h", "role": "planner", "wish": "h", "task": brief}),
        json!({"name": "busy-bee", "role": "engineer", "wish": "h", "group": "work", "task": brief}),
    ];
    for worker in workers {
        let mut body = json!({"project": "hist", "kind": "worker", "provider": "claude"});
        body.as_object_mut().unwrap().extend(worker.as_object().unwrap().clone());
        app.create_agent(body).await;
    }
    app.post_ok("/api/v1/wishes/h/groups/work/complete", json!({"result": "wrote h.txt"})).await;
    // Their steps done, both finish (as the conductor stops them).
    sqlx::query("UPDATE agents SET state = 'done'").execute(&app.pool).await.expect("finish");

    app.post_ok("/api/v1/wishes/h/submit", json!({})).await;
    app.merge_queue().tick().await.expect("tick");
    assert_eq!(app.get_ok("/api/v1/wishes/h").await["status"], "merged");

    let history = app.get_ok("/api/v1/history?project=hist").await;
    let row = |name: &str| -> Value {
        let items = history["items"].as_array().expect("items");
        items.iter().find(|h| h["name"] == name).cloned().unwrap_or_else(|| panic!("no row of {name}: {history}"))
    };
    let engineer = row("busy-bee");
    assert_eq!(engineer["task"], "Write h.txt", "its group's title, not its brief: {engineer}");
    assert_eq!(engineer["summary"], "wrote h.txt", "the summary its group reported: {engineer}");
    assert_eq!(engineer["status"], "merged");
    let planner = row("planner-h");
    assert_eq!(planner["task"], "Plan: Wish h", "{planner}");
    assert_eq!(planner["status"], "no-pr", "nothing of the planner's merged: {planner}");
}
