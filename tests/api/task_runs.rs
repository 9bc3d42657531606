//! Standalone tasks run by agents (Fetch's model) and boards whose gates act (Genie's), with a
//! fake agent (`tests/fake_agent/task-agent.sh`) that makes real commits in its real clone and
//! reports with the real `switchyard` CLI from a real tmux pane.

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};

use crate::conductor::Fakes;
use crate::helpers::*;

/// Long enough for agents to spawn, clone, commit and report on a loaded machine.
const RUN: Duration = Duration::from_secs(120);

/// The fake agent, told how to behave (`mode`: done, stop or ask).
fn fake(mode: &str) -> Fakes {
    let fakes = Fakes::new();
    fakes.say("mode", mode);
    fakes
}

/// How many times agent `name`'s program started.
fn starts(fakes: &Fakes, name: &str) -> usize {
    std::fs::read_to_string(fakes.path().join(format!("starts-{name}"))).map_or(0, |s| s.lines().count())
}

/// The app with its worker and conductor, and project `alpha` whose agents are the fake.
async fn app_with(fakes: &Fakes) -> (TestApp, Value) {
    let app = TestApp::builder()
        .providers(&fakes.providers_for("task-agent.sh"))
        .worker(|w| w.conductor = true)
        .spawn()
        .await;
    let project = app.create_project("alpha").await;
    app.patch_ok("/api/v1/projects/alpha", json!({"conductor_config": {"provider": "fake"}})).await;
    (app, project)
}

async fn task(app: &TestApp, id: &str) -> Value {
    app.get_ok(&format!("/api/v1/tasks/{id}")).await
}

/// Polls the task until `check` holds; on the deadline, fails showing the task, its runs and agents.
async fn wait_for_task(app: &TestApp, id: &str, what: &str, check: impl Fn(&Value) -> bool) -> Value {
    let context = [format!("/api/v1/tasks/{id}/runs"), "/api/v1/agents?limit=100".to_owned()];
    let context: Vec<&str> = context.iter().map(String::as_str).collect();
    app.get_until(&format!("/api/v1/tasks/{id}"), what, RUN, &context, check).await
}

async fn runs(app: &TestApp, id: &str) -> Vec<Value> {
    app.get_ok(&format!("/api/v1/tasks/{id}/runs")).await["items"].as_array().expect("runs").clone()
}

async fn agent_state(app: &TestApp, name: &str) -> String {
    app.get_ok(&format!("/api/v1/agents/{name}")).await["state"].as_str().unwrap_or_default().to_owned()
}

fn branch_file(repo: &Path, branch: &str, file: &str) -> String {
    git(repo, &["show", &format!("{branch}:{file}")])
}

/// A task dispatched to the fake agent behaving as `mode`: the fakes, the app, the project, the task's id.
async fn dispatched(mode: &str, title: &str) -> (Fakes, TestApp, Value, String) {
    let fakes = fake(mode);
    let (app, project) = app_with(&fakes).await;
    let id = new_task(&app, title).await;
    let answer = assert_json(app.post(&format!("/api/v1/tasks/{id}/dispatch"), json!({})).await, 202).await;
    assert_eq!(answer["task"]["status"], "in_progress");
    (fakes, app, project, id)
}

async fn new_task(app: &TestApp, title: &str) -> String {
    let created = app.create_task(json!({"project": "alpha", "title": title, "goal": "write work.txt"})).await;
    created["id"].as_str().expect("id").to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dispatched_task_is_done_by_its_agent_which_commits_and_is_stopped() {
    let fakes = fake("done");
    let (app, project) = app_with(&fakes).await;
    let id = new_task(&app, "Write the work").await;

    let dispatched = assert_json(app.post(&format!("/api/v1/tasks/{id}/dispatch"), json!({})).await, 202).await;
    assert_eq!(dispatched["task"]["status"], "in_progress");
    assert_eq!(dispatched["run"]["iteration"], 1);
    assert_eq!(dispatched["run"]["provider"], "fake");
    // A second dispatch while the first runs is refused.
    assert_problem(app.post(&format!("/api/v1/tasks/{id}/dispatch"), json!({})).await, 409).await;

    let done = wait_for_task(&app, &id, "the task is done", |t| t["status"] == "done").await;
    assert_eq!(done["result"], "wrote work.txt");
    let run = &runs(&app, &id).await[0];
    assert_eq!((run["status"].as_str(), run["iteration"].as_i64()), (Some("done"), Some(1)), "{run}");
    let agent = run["agent_name"].as_str().expect("agent").to_owned();
    assert_eq!(done["assignee"], agent.as_str());
    let branch = run["branch"].as_str().expect("branch");
    assert!(branch.starts_with("task/"), "{branch}");
    assert_eq!(branch_file(&repo_of(&project), branch, "work.txt").trim(), "the work");
    eventually("the agent is stopped", RUN, || async { agent_state(&app, &agent).await == "done" }).await;

    // A done task is not dispatched again; an unknown provider is a bad field.
    let again = assert_problem(app.post(&format!("/api/v1/tasks/{id}/dispatch"), json!({})).await, 409).await;
    assert_eq!(again["current_state"], "done", "{again}");
    let other = new_task(&app, "Another").await;
    let bad = app.post(&format!("/api/v1/tasks/{other}/dispatch"), json!({"provider": "nope"})).await;
    assert_eq!(assert_problem(bad, 422).await["errors"][0]["field"], "provider");
    assert_eq!(task(&app, &other).await["status"], "ready", "a refused dispatch changes nothing");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_stops_without_reporting_gets_more_iterations_then_the_task_fails() {
    let (fakes, app, _project, id) = dispatched("stop", "Never finished").await;

    let failed = wait_for_task(&app, &id, "the task fails", |t| t["status"] == "failed").await;
    assert!(failed["result"].as_str().unwrap_or_default().contains("max_iterations 3"), "{failed}");
    let run = &runs(&app, &id).await[0];
    assert_eq!((run["status"].as_str(), run["iteration"].as_i64()), (Some("failed"), Some(3)), "{run}");
    let agent = run["agent_name"].as_str().expect("agent").to_owned();
    // Iteration 2 made the agent exit; iteration 3 started it again in a new pane.
    assert_eq!(starts(&fakes, &agent), 2);
    let iterations: Vec<i32> = sqlx::query_scalar(
        "SELECT (payload->>'iteration')::int FROM events WHERE type = 'task_run.iteration' AND subject = $1 ORDER BY id",
    )
    .bind(format!("task:{id}"))
    .fetch_all(&app.pool)
    .await
    .expect("iteration events");
    assert_eq!(iterations, [1, 2, 3], "each iteration is an event");
    eventually("the agent is stopped", RUN, || async { agent_state(&app, &agent).await == "done" }).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_question_waits_for_an_answer_that_reaches_the_agent_which_acts_on_it() {
    let (_fakes, app, project, id) = dispatched("ask", "Paint it").await;

    let waiting = wait_for_task(&app, &id, "the task waits for input", |t| t["status"] == "waiting_input").await;
    assert_eq!(waiting["question"], "Which colour?");
    let answered = app.post_ok(&format!("/api/v1/tasks/{id}/answer"), json!({"answer": "colour-blue"})).await;
    assert_eq!(answered["status"], "in_progress");

    let done = wait_for_task(&app, &id, "the task is done", |t| t["status"] == "done").await;
    assert_eq!(done["result"], "painted colour-blue");
    let branch = runs(&app, &id).await[0]["branch"].as_str().expect("branch").to_owned();
    assert_eq!(branch_file(&repo_of(&project), &branch, "colour.txt").trim(), "colour-blue");
}

/// A task whose fake agent asks on its screen with a menu (`question.py`, Codex's question
/// dialog: a menu that takes keys, ignores a pasted number, and takes pasted words as notes),
/// answered with `answer`: what the agent did with it (its task's result), and the answer's
/// message once delivered.
async fn answered_on_screen(answer: &str) -> (Value, Value) {
    let fakes = fake("screen");
    // Codex's screen rules: the fake draws Codex's question dialog and reads the answer from its
    // terminal, so the answer must be typed into the pane while the agent asks (it is never idle).
    let providers =
        fakes.providers_for("task-agent.sh").replacen("screen_rules = \"generic\"", "screen_rules = \"codex\"", 1);
    let app = TestApp::builder().providers(&providers).worker(|w| w.conductor = true).spawn().await;
    let project = app.create_project("alpha").await;
    app.patch_ok("/api/v1/projects/alpha", json!({"conductor_config": {"provider": "fake"}})).await;
    let id = new_task(&app, "Choose").await;
    assert_json(app.post(&format!("/api/v1/tasks/{id}/dispatch"), json!({})).await, 202).await;

    let waiting = wait_for_task(&app, &id, "the task waits for input", |t| t["status"] == "waiting_input").await;
    // The task says what the dialog asks, read off the screen.
    assert!(
        waiting["question"].as_str().unwrap_or_default().contains("Should a failed input delivery be retried?"),
        "{waiting}"
    );
    let agent = runs(&app, &id).await[0]["agent_name"].as_str().expect("agent").to_owned();
    assert_eq!(agent_state(&app, &agent).await, "question");
    app.post_ok(&format!("/api/v1/tasks/{id}/answer"), json!({"answer": answer})).await;

    let done = wait_for_task(&app, &id, "the task is done", |t| t["status"] == "done").await;
    let branch = runs(&app, &id).await[0]["branch"].as_str().expect("branch").to_owned();
    let committed = branch_file(&repo_of(&project), &branch, "choice.txt");
    assert_eq!(done["result"].as_str(), Some(format!("answered: {}", committed.trim()).as_str()), "{done}");
    let body = answer.trim().to_owned();
    let delivered = |inbox: &Value| {
        inbox["items"].as_array().is_some_and(|m| m.iter().any(|m| m["body"] == body && m["delivered_at"].is_string()))
    };
    let inbox =
        app.get_until(&format!("/api/v1/messages?to={agent}"), "the answer is delivered", RUN, &[], delivered).await;
    let message = inbox["items"].as_array().into_iter().flatten().find(|m| m["body"] == body).cloned();
    (done, message.expect("the answer"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_options_number_answers_the_menu_on_the_agents_screen_with_that_option() {
    // Option 1 is highlighted: a pasted "3" and Enter would pick it.
    let (done, message) = answered_on_screen(" 3 ").await;
    assert_eq!(done["result"], "answered: option 3", "the menu's option 3 was chosen: {done}");
    assert_eq!(message["confirmed_by"], "screen", "the menu closed: {message}");
    assert_eq!(message["attempts"], 1, "chosen once: {message}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_text_answer_to_a_question_on_the_agents_screen_arrives_as_text() {
    let (done, _message) = answered_on_screen("colour-blue").await;
    assert_eq!(done["result"], "answered: words: colour-blue", "{done}");
}

#[tokio::test(flavor = "multi_thread")]
async fn board_gates_act_an_agent_reviews_a_person_approves_and_auto_moves_on() {
    let fakes = fake("done");
    let (app, _project) = app_with(&fakes).await;
    let board = app.create_board("alpha", json!({"name": "Flow", "template": "software"})).await;
    let names: Vec<&str> =
        board["columns"].as_array().expect("columns").iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, ["Backlog", "Plan", "Build", "Review", "Approve", "Done"]);
    let columns = column_ids(&board);
    let (plan, build, review, approve, done) = (columns[1], columns[2], columns[3], columns[4], columns[5]);
    let created = app
        .create_task(json!({"project": "alpha", "title": "Check it", "board_id": id(&board), "column_id": build}))
        .await;
    let task_id = created["id"].as_str().expect("id").to_owned();

    // Into the agent column: a reviewer does the skill and the card moves on to Approve.
    let moved = app.post_ok(&format!("/api/v1/tasks/{task_id}/move"), json!({"column_id": review})).await;
    assert_eq!(moved["column_id"], review.to_string());
    let approved =
        wait_for_task(&app, &task_id, "the card reaches Approve", |t| t["column_id"] == approve.to_string()).await;
    assert_eq!(approved["status"], "ready", "a review does not finish the task");
    let run = &runs(&app, &task_id).await[0];
    assert_eq!(
        (run["kind"].as_str(), run["skill"].as_str(), run["status"].as_str()),
        (Some("skill"), Some("review"), Some("done"))
    );

    // Only a person moves it out of Approve.
    let someone = app.create_agent(engineer("alpha", "bystander")).await;
    let token = app.agent_token(&someone).await;
    let refused = app
        .client
        .post(app.url(&format!("/api/v1/tasks/{task_id}/move")))
        .bearer_auth(&token)
        .json(&json!({"column_id": done}))
        .send()
        .await
        .expect("request");
    let problem = assert_problem(refused, 403).await;
    assert!(problem["detail"].as_str().unwrap_or_default().contains("gate `human`"), "{problem}");
    let finished = app.post_ok(&format!("/api/v1/tasks/{task_id}/move"), json!({"column_id": done})).await;
    assert_eq!(finished["status"], "done", "the last column is done");

    // Gate auto: a task that completes in Plan moves on past Build (auto too) to Review, whose
    // agent reviews it, then waits for a person in Approve.
    let other = app
        .create_task(json!({"project": "alpha", "title": "Plan it", "board_id": id(&board), "column_id": plan}))
        .await;
    let other = other["id"].as_str().expect("id").to_owned();
    app.post_ok(&format!("/api/v1/tasks/{other}/start"), json!({})).await;
    let completed = app.post_ok(&format!("/api/v1/tasks/{other}/complete"), json!({})).await;
    assert_eq!(completed["status"], "done");
    assert_eq!(completed["column_id"], review.to_string(), "past Build: {completed}");
    wait_for_task(&app, &other, "the reviewed card reaches Approve", |t| t["column_id"] == approve.to_string()).await;

    // On the simple board (all columns auto) a task completed in its first column is in Done.
    let simple = app.create_board("alpha", json!({"name": "Plain", "template": "simple"})).await;
    let simple_columns = column_ids(&simple);
    let plain = app
        .create_task(
            json!({"project": "alpha", "title": "Just do it", "board_id": id(&simple), "column_id": simple_columns[0]}),
        )
        .await;
    let plain = plain["id"].as_str().expect("id").to_owned();
    app.post_ok(&format!("/api/v1/tasks/{plain}/start"), json!({})).await;
    let completed = app.post_ok(&format!("/api/v1/tasks/{plain}/complete"), json!({})).await;
    assert_eq!(
        (completed["status"].as_str(), completed["column_id"].as_str()),
        (Some("done"), Some(simple_columns[2].to_string().as_str())),
        "{completed}"
    );
}

#[tokio::test]
async fn the_task_page_dispatches_and_shows_the_run_and_the_overview_lists_cards_waiting_on_a_person() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let board = app.create_board("alpha", json!({"name": "Flow", "template": "software"})).await;
    let approve = column_ids(&board)[4];
    let id = new_task(&app, "From the page").await;
    let dashboard = crate::dashboard::Dashboard::login(&app).await;

    let (_, html) = dashboard.get(&format!("/tasks/{id}")).await;
    assert!(html.contains(&format!("action=\"/tasks/{id}/dispatch\"")), "a Dispatch button: {html}");
    let bad = dashboard.post_form(&format!("/tasks/{id}/dispatch"), &[("provider", "nope")]).await;
    assert_eq!(bad.status(), 422);
    let to =
        crate::dashboard::redirected(dashboard.post_form(&format!("/tasks/{id}/dispatch"), &[("provider", "")]).await)
            .await;
    assert_eq!(to, format!("/tasks/{id}"));
    let (_, html) = dashboard.get(&to).await;
    assert!(html.contains("iteration 1 of 3") && html.contains(">pending<"), "the run is shown: {html}");
    assert!(!html.contains(&format!("action=\"/tasks/{id}/dispatch\"")), "no second dispatch while one is live");
    assert_eq!(task(&app, &id).await["status"], "in_progress");

    let waiting = app
        .create_task(
            json!({"project": "alpha", "title": "Sign it off", "board_id": id_of(&board), "column_id": approve}),
        )
        .await;
    assert_eq!(waiting["status"], "ready");
    let (_, html) = dashboard.get("/").await;
    let needs = html.split("id=\"needs\"").nth(1).expect("needs").split("<section").next().unwrap_or_default();
    assert!(needs.contains("Sign it off") && needs.contains("waits in `Approve` for a person"), "{needs}");
}

fn id_of(value: &Value) -> String {
    value["id"].as_str().expect("id").to_owned()
}

/// A person's change to a task (`fail`, `cancel`, a move) holds the task, then ends its run; the
/// conductor, which holds the runs it claims, passes by a run whose task is held instead of
/// waiting for it: the two never wait on each other in opposite orders (the fuzzer found that
/// deadlock as a 503).
#[tokio::test]
async fn the_conductor_passes_by_a_run_whose_task_a_person_is_changing() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let id = new_task(&app, "held by a person").await;
    assert_json(app.post(&format!("/api/v1/tasks/{id}/dispatch"), json!({})).await, 202).await;
    let run: uuid::Uuid = runs(&app, &id).await[0]["id"].as_str().expect("run id").parse().expect("a uuid");
    let task: uuid::Uuid = id.parse().expect("a uuid");

    let mut person = app.pool.begin().await.expect("begin");
    sqlx::query("UPDATE tasks SET updated_at = now() WHERE id = $1").bind(task).execute(&mut *person).await.unwrap();
    let mut conductor = app.pool.begin().await.expect("begin");
    let claimed = switchyard::db::task_runs::claim_pending(&mut conductor, 10).await.expect("claim");
    assert!(claimed.is_empty(), "the conductor took a run whose task a person holds: {claimed:?}");
    // So the person's change ends the run without waiting on the conductor (a deadlock would
    // hold it until PostgreSQL broke it, one side failing).
    let ended = tokio::time::timeout(
        Duration::from_secs(30),
        switchyard::db::task_runs::finish(&mut person, run, "cancelled", Some("a person failed the task")),
    )
    .await
    .expect("the person's change waited on the conductor")
    .expect("finish");
    assert!(ended.is_some());
    person.commit().await.expect("commit");
    conductor.commit().await.expect("commit");
    assert_eq!(runs(&app, &id).await[0]["status"], "cancelled");
}
