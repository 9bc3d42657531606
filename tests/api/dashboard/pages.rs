//! Each page as HTML: what it shows, what it offers, what its forms do, and that text people typed
//! is shown as text (`<script>` in a wish title stays words on the page).

use reqwest::Method;
use serde_json::{json, Value};

use super::{redirected, Dashboard};
use crate::helpers::{engineer, merged, spawn_app, TestApp};

mod operator;
mod paging;
mod webhook_form;
mod wording;

const SCRIPT: &str = "<script>alert('x')</script>";
const SCRIPT_ESCAPED: &str = "&#60;script&#62;alert(&#39;x&#39;)&#60;/script&#62;";

/// An agent of project `alpha` running a shell (it stays `spawning`: no worker runs).
async fn agent(app: &TestApp, name: &str, task: &str) {
    app.create_agent(merged(engineer("alpha", name), json!({"provider": "shell", "task": task}))).await;
}

/// Wish `login` of project `alpha` with groups `api` and `ui` (after `api`), and `extra` fields.
async fn login_wish(app: &TestApp, extra: Value) {
    let body = json!({"slug": "login", "project": "alpha", "title": "Login",
        "groups": [{"key": "api", "title": "API"}, {"key": "ui", "title": "UI", "depends_on": ["api"]}]});
    app.create_wish(merged(body, extra)).await;
}

/// A board with a WIP-limited middle column; returns its id and its columns' ids.
async fn board(app: &TestApp, project: &str) -> (String, Vec<String>) {
    let columns = json!([{"name": "Todo"}, {"name": "Review", "gate": "human", "wip_limit": 1}, {"name": "Done"}]);
    let board = app.create_board(project, json!({"name": "Delivery", "columns": columns})).await;
    let columns =
        board["columns"].as_array().expect("columns").iter().map(|c| c["id"].as_str().expect("id").to_owned());
    (board["id"].as_str().expect("id").to_owned(), columns.collect())
}

#[tokio::test]
async fn text_people_typed_is_shown_as_text_on_every_page() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let evil = json!({"slug": "evil", "project": "alpha", "title": SCRIPT, "description": SCRIPT,
        "groups": [{"key": "api", "title": SCRIPT}]});
    app.create_wish(evil).await;
    let (board_id, _) = board(&app, "alpha").await;
    let task = json!({"project": "alpha", "title": SCRIPT, "board_id": board_id, "assignee": SCRIPT});
    app.create_task(task).await;
    agent(&app, "fox", SCRIPT).await;
    let dashboard = Dashboard::login(&app).await;
    for path in ["/", "/wishes", "/wishes/evil", &format!("/boards/{board_id}"), "/agents", "/agents/fox", "/events"] {
        let (status, html) = dashboard.get(path).await;
        assert_eq!(status, 200, "{path}");
        assert!(!html.contains(SCRIPT), "{path} shows the raw markup:\n{html}");
        assert!(html.contains(SCRIPT_ESCAPED) || path == "/events", "{path} shows the text:\n{html}");
    }
    let (_, events) = dashboard.get("/events").await;
    assert!(events.contains("title: &#60;script&#62;"), "the payload is escaped too");
}

#[tokio::test]
async fn the_overview_puts_what_needs_a_person_first() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    for name in ["owl", "fox"] {
        agent(&app, name, "Help").await;
    }
    // A worker would observe this; here the row is set as it would be.
    sqlx::query("UPDATE agents SET state = 'question' WHERE name = 'fox'").execute(&app.pool).await.expect("state");
    app.create_task(json!({"project": "alpha", "title": "Sign the release", "assignee": "human"})).await;
    login_wish(&app, json!({})).await;
    app.start_wish("login").await;

    let dashboard = Dashboard::login(&app).await;
    let newest = || async { sqlx::query_scalar::<_, i64>("SELECT max(id) FROM events").fetch_one(&app.pool).await };
    let newest_before = newest().await.expect("max");
    let (_, html) = dashboard.get("/").await;
    let newest_after = newest().await.expect("max");
    let needs = section(&html, "needs");
    assert!(needs.contains("asks a question") && needs.contains("href=\"/agents/fox\""), "{needs}");
    assert!(needs.contains("handed to a human") && needs.contains("Sign the release"), "{needs}");
    assert!(!needs.contains("owl"), "a spawning agent needs nobody");
    let agents = section(&html, "agents");
    assert!(agents.find("/agents/fox").expect("fox") < agents.find("/agents/owl").expect("owl"), "asking first");
    assert!(agents.contains("question <strong>1</strong>") && agents.contains("spawning <strong>1</strong>"));
    let wishes = section(&html, "wishes");
    assert!(wishes.contains("/wishes/login") && wishes.contains("0 of 2") && wishes.contains(">executing<"));
    assert!(section(&html, "merge-queue").contains("No wish is waiting to be merged"));
    assert!(section(&html, "recent").contains("wish.executing"));
    // The live stream starts no later than the newest event the page could show (a background
    // loop may write one more while the page renders): nothing is missed.
    let after: i64 = html
        .split_once("sse-connect=\"/live?after=")
        .and_then(|(_, rest)| rest.split('"').next()?.parse().ok())
        .expect("the page follows the live stream");
    // It may start earlier: the log shows an event once every older transaction on the database
    // server ended, and other tests' transactions may still be open.
    assert!(after <= newest_after && newest_before > 0, "{after} after {newest_after}");
    // A part alone, as a live refresh fetches it.
    let (status, part) = dashboard.get("/?block=needs").await;
    assert_eq!(status, 200);
    assert!(part.trim_start().starts_with("<section id=\"needs\"") && !part.contains("<html"), "{part}");
    assert!(part.contains("asks a question") && part.contains("Sign the release"), "{part}");
    // Each part reads what it shows, and only that.
    let (_, part) = dashboard.get("/?block=agents").await;
    assert!(part.find("/agents/fox").expect("fox") < part.find("/agents/owl").expect("owl"), "{part}");
    assert!(part.contains("question <strong>1</strong>") && !part.contains("Sign the release"), "{part}");
    let (_, part) = dashboard.get("/?block=wishes").await;
    assert!(part.contains("/wishes/login") && !part.contains("/agents/fox"), "{part}");
    let (_, part) = dashboard.get("/?block=recent").await;
    assert!(part.contains("wish.executing") && !part.contains("asks a question"), "{part}");
    assert_eq!(dashboard.get("/?block=nope").await.0, 404);
}

/// The element with this id and what follows it, up to the next section.
/// The overview keeps parts it read while no event touched them (issue 19: fewer reads under
/// load); a change made through the API shows on the next load all the same, in the part it
/// touches, and a change of another kind leaves the others as they were.
#[tokio::test]
async fn the_overview_shows_each_change_on_the_next_load_though_it_keeps_parts_it_read() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let dashboard = Dashboard::login(&app).await;
    let needs = || async { section(&dashboard.get("/").await.1, "needs").to_owned() };
    let agents = || async { section(&dashboard.get("/").await.1, "agents").to_owned() };
    assert!(!needs().await.contains("Sign the release"));
    assert!(!agents().await.contains("/agents/fox"));

    let task = app.create_task(json!({"project": "alpha", "title": "Sign the release", "assignee": "human"})).await;
    assert!(needs().await.contains("Sign the release"), "the task handed to a human, at once");
    agent(&app, "fox", "Help").await;
    assert!(agents().await.contains("/agents/fox"), "the new agent, at once");
    // Loaded again and again, parts kept or not: the same.
    for _ in 0..3 {
        let (_, html) = dashboard.get("/").await;
        assert!(
            section(&html, "needs").contains("Sign the release") && section(&html, "agents").contains("/agents/fox")
        );
    }
    let id = task["id"].as_str().expect("id");
    let cancelled = app.post(&format!("/api/v1/tasks/{id}/cancel"), json!({})).await;
    assert_eq!(cancelled.status(), 200, "{:?}", cancelled.text().await);
    let (_, html) = dashboard.get("/").await;
    assert!(!section(&html, "needs").contains("Sign the release"), "cancelled: no longer waiting");
    assert!(section(&html, "agents").contains("/agents/fox"));
    // A part alone, as the live stream asks for it, also shows the change.
    app.create_task(json!({"project": "alpha", "title": "Sign it again", "assignee": "human"})).await;
    let (_, part) = dashboard.get("/?block=needs").await;
    assert!(part.contains("Sign it again"), "{part}");
    let (_, html) = dashboard.get("/").await;
    assert!(section(&html, "needs").contains("Sign it again"));
}

fn section<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html.find(&format!("id=\"{id}\"")).unwrap_or_else(|| panic!("no #{id} in:\n{html}"));
    let rest = &html[start..];
    let end = rest[1..].find("<section").map(|i| i + 1).unwrap_or(rest.len());
    &rest[..end]
}

#[tokio::test]
async fn a_board_shows_gates_and_limits_and_moves_cards_within_them() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let (board_id, columns) = board(&app, "alpha").await;
    let dashboard = Dashboard::login(&app).await;
    let path = format!("/boards/{board_id}");

    let created =
        dashboard.post_form(&format!("{path}/tasks"), &[("title", "Write docs"), ("column_id", &columns[0])]).await;
    assert_eq!(redirected(created).await, path);
    let other = dashboard.post_form(&format!("{path}/tasks"), &[("title", "Fix bug"), ("assignee", "human")]).await;
    assert_eq!(redirected(other).await, path);
    let tasks = app.get_ok("/api/v1/tasks?project=alpha").await;
    let id_of = |title: &str| {
        tasks["items"].as_array().expect("items").iter().find(|t| t["title"] == title).expect("task")["id"]
            .as_str()
            .expect("id")
            .to_owned()
    };
    let (docs, bug) = (id_of("Write docs"), id_of("Fix bug"));

    let (_, html) = dashboard.get(&path).await;
    assert!(html.contains("gate: human") && html.contains("WIP 0 / 1"), "{html}");
    assert!(html.contains("aria-label=\"Move “Write docs” to Review\""), "the keyboard move control");
    assert!(html.contains("draggable=\"true\""), "and drag and drop");

    // → moves a card to the next column; the WIP limit then refuses a second one there.
    let moved = dashboard.post_form(&format!("{path}/move"), &[("right", &docs)]).await;
    assert_eq!(redirected(moved).await, path);
    let task = app.task(&docs).await;
    assert_eq!(task["column_id"], columns[1].as_str());
    let (_, html) = dashboard.get(&format!("{path}?block=board")).await;
    assert!(html.contains("WIP 1 / 1 (full)"), "{html}");
    let full = dashboard.post_form(&format!("{path}/move"), &[("card", &bug), ("column_id", &columns[1])]).await;
    assert_eq!(full.status(), 409);
    assert_eq!(full.headers()["hx-retarget"], "#flash");
    assert!(full.text().await.expect("body").contains("column `Review` is full"));
    let nowhere = dashboard.post_form(&format!("{path}/move"), &[("left", &bug)]).await;
    assert_eq!(nowhere.status(), 422, "the first column has nothing on its left");

    // Reconcile puts a card that lost its column back on the board.
    sqlx::query("UPDATE tasks SET column_id = NULL WHERE id = $1::uuid")
        .bind(&bug)
        .execute(&app.pool)
        .await
        .expect("stray");
    let (_, html) = dashboard.get(&path).await;
    assert!(html.contains("1 card(s) of this board sit in no column"), "{html}");
    assert_eq!(redirected(dashboard.post_form(&format!("{path}/reconcile"), &[]).await).await, path);
    let task = app.task(&bug).await;
    assert_eq!(task["column_id"], columns[0].as_str());
}

/// The column form with this id on a board page, up to its end.
fn column<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html.find(&format!("data-column=\"{id}\"")).unwrap_or_else(|| panic!("no column {id} in:\n{html}"));
    let rest = &html[start..];
    &rest[..rest.find("</form>").unwrap_or(rest.len())]
}

#[tokio::test]
async fn a_wish_card_moves_on_the_board_page_with_the_csrf_token_and_not_without() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let (board_id, columns) = board(&app, "alpha").await;
    login_wish(&app, json!({})).await;
    let wish_id = app.get_ok("/api/v1/wishes/login").await["id"].as_str().expect("id").to_owned();
    let dashboard = Dashboard::login(&app).await;
    let path = format!("/boards/{board_id}");

    // Dropped on the board's first column, the wish (on no board yet) comes onto this board.
    let dropped =
        dashboard.post_form(&format!("{path}/move"), &[("card", "wish:login"), ("column_id", &columns[0])]).await;
    assert_eq!(redirected(dropped).await, path);
    let (_, html) = dashboard.get(&path).await;
    let todo = column(&html, &columns[0]);
    assert!(todo.contains(&format!("id=\"w-{wish_id}\"")) && todo.contains("data-card=\"wish:login\""), "{todo}");
    assert!(todo.contains("aria-label=\"Move “Wish: Login” to Review\""), "the keyboard move control: {todo}");

    // Without the token nothing moves.
    let bare = dashboard.request(Method::POST, &format!("{path}/move")).form(&[("right", "wish:login")]).send().await;
    assert_eq!(bare.expect("post").status(), 403);
    assert_eq!(app.get_ok("/api/v1/wishes/login").await["column_id"], columns[0].as_str());

    // → with the token: the wish is in Review, which it fills (wishes count toward the limit).
    let moved = dashboard.post_form(&format!("{path}/move"), &[("right", "wish:login")]).await;
    assert_eq!(redirected(moved).await, path);
    let wish = app.get_ok("/api/v1/wishes/login").await;
    assert_eq!((&wish["board_id"], &wish["column_id"]), (&json!(board_id), &json!(columns[1])));
    let (_, html) = dashboard.get(&format!("{path}?block=board")).await;
    let review = column(&html, &columns[1]);
    assert!(review.contains(&format!("id=\"w-{wish_id}\"")) && review.contains("WIP 1 / 1 (full)"), "{review}");
    assert!(!column(&html, &columns[0]).contains("wish:login"), "it left Todo");
    let task = app.create_task(json!({"project": "alpha", "title": "Fix bug", "board_id": board_id})).await;
    let task = task["id"].as_str().expect("id");
    let full = dashboard.post_form(&format!("{path}/move"), &[("card", task), ("column_id", &columns[1])]).await;
    assert_eq!(full.status(), 409);
    assert!(full.text().await.expect("body").contains("column `Review` is full"));
}

#[tokio::test]
async fn a_board_is_made_from_a_template_on_the_boards_page() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let template =
        json!({"name": "review-heavy", "columns": [{"name": "Todo"}, {"name": "Sign-off", "gate": "human"}]});
    app.post_ok("/api/v1/board-templates", template).await;
    let dashboard = Dashboard::login(&app).await;
    let (_, html) = dashboard.get("/boards").await;
    assert!(html.contains("<option value=\"review-heavy\">template review-heavy</option>"), "{html}");
    let made =
        dashboard.post_form("/boards", &[("project", "alpha"), ("name", "QA"), ("template", "review-heavy")]).await;
    let location = redirected(made).await;
    let (_, html) = dashboard.get(&location).await;
    assert!(html.contains("<h1>QA</h1>") && html.contains(">Sign-off</h2>"), "{html}");
    let taken = dashboard.post_form("/boards", &[("project", "alpha"), ("name", "QA")]).await;
    assert_eq!(taken.status(), 409);
    let (_, list) = dashboard.get("/boards").await;
    assert!(list.contains("Todo → Sign-off"), "{list}");
}

#[tokio::test]
async fn the_wish_form_makes_a_wish_with_its_plan_and_explains_a_refusal_beside_the_field() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    let dashboard = Dashboard::login(&app).await;
    let (_, form) = dashboard.get("/new-wish").await;
    assert!(form.contains("name=\"groups[2].key\""), "three empty rows to start with");

    let more = dashboard.post_form("/wishes", &[("slug", "login"), ("add_group", "1"), ("groups[0].key", "api")]).await;
    assert_eq!(more.status(), 200);
    let more = more.text().await.expect("body");
    assert!(more.contains("value=\"api\"") && more.contains("name=\"groups[1].key\""), "kept, plus a row");

    let cycle = [
        ("project", "alpha"),
        ("slug", "login"),
        ("title", "Login"),
        ("groups[0].key", "api"),
        ("groups[0].title", "API"),
        ("groups[1].key", ""),
        ("groups[2].key", "ui"),
        ("groups[2].title", "UI"),
        ("groups[2].depends_on", "api, db"),
    ];
    let refused = dashboard.post_form("/wishes", &cycle).await;
    assert_eq!(refused.status(), 422);
    let html = refused.text().await.expect("body");
    assert!(html.contains("The wish was not made"), "{html}");
    let beside = html.find("name=\"groups[1].depends_on\"").expect("the second row (the blank one dropped)");
    assert!(html[beside..].contains("field-error"), "the message sits by the field:\n{html}");
    assert!(html.contains("db"), "it names the unknown key");

    let good: Vec<(&str, &str)> =
        cycle.iter().map(|&(k, v)| if k == "groups[2].depends_on" { (k, "api") } else { (k, v) }).collect();
    let made = dashboard.post_form("/wishes", &good).await;
    assert_eq!(redirected(made).await, "/wishes/login");
    let wish = app.get_ok("/api/v1/wishes/login").await;
    let ui = wish["groups"].as_array().expect("groups").iter().find(|g| g["key"] == "ui").expect("ui").clone();
    assert_eq!(ui["depends_on"], json!(["api"]));
    let again = dashboard.post_form("/wishes", &good).await;
    assert_eq!(again.status(), 409);
    assert!(again.text().await.expect("body").contains("a wish `login` exists already"));

    // No slug and no groups: the slug is made from the title, as the CLI makes it, and the draft
    // waits for a planner, which the form says it may leave to one.
    assert!(form.contains("Leave every row empty and a planner agent will plan the wish"), "{form}");
    let words = [("project", "alpha"), ("title", "Sign in with a passkey"), ("description", "Passkeys, please.")];
    let made = dashboard.post_form("/wishes", &words).await;
    assert_eq!(redirected(made).await, "/wishes/sign-in-with-a-passkey");
    let (_, page) = dashboard.get("/wishes/sign-in-with-a-passkey").await;
    assert!(page.contains("A planner agent plans this wish from its description"), "{page}");
    let (_, overview) = dashboard.get("/?block=wishes").await;
    assert!(overview.contains("sign-in-with-a-passkey"), "a draft to plan is in flight: {overview}");
}

#[tokio::test]
async fn a_wish_page_draws_its_plan_and_offers_only_the_legal_actions() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    login_wish(&app, json!({"branch": "feature/login"})).await;
    let dashboard = Dashboard::login(&app).await;
    let (_, html) = dashboard.get("/wishes/login").await;
    assert!(html.contains("<g class=\"node st-ready\" data-group=\"api\">"), "{html}");
    assert!(html.contains("<g class=\"node st-blocked\" data-group=\"ui\">"));
    assert!(html.contains("class=\"edge\""), "an arrow from api to ui");
    assert!(html.contains("/actions/plan") && !html.contains("/actions/queue"), "a draft can only be planned");
    assert!(html.contains("/actions/hold") && html.contains("/actions/cancel"));
    // Cancel stops the wish's agents: the page asks first, as Kill does on an agent's page.
    assert!(
        html.contains(r#"action="/wishes/login/actions/cancel" hx-confirm="Cancel this wish? Its agents are stopped"#),
        "{html}"
    );

    for step in ["plan", "queue", "start"] {
        let done = dashboard.post_form(&format!("/wishes/login/actions/{step}"), &[]).await;
        assert_eq!(redirected(done).await, "/wishes/login");
    }
    let refused = dashboard.post_form("/wishes/login/actions/queue", &[]).await;
    assert_eq!(refused.status(), 409, "an illegal step is refused as by the API");
    app.post_ok("/api/v1/wishes/login/groups/api/start", json!({})).await;
    app.post_ok("/api/v1/wishes/login/groups/api/fail", json!({"result": "tests red"})).await;
    let (_, plan) = dashboard.get("/wishes/login?block=plan").await;
    // Its cap is the project's (3 unless the project says otherwise), the group giving none.
    assert!(plan.contains("1 of 3"), "a failed group with iterations left goes back to ready: {plan}");
    // With every group done the wish is under review.
    for (group, action) in [("api", "start"), ("api", "complete"), ("ui", "start"), ("ui", "complete")] {
        app.post_ok(&format!("/api/v1/wishes/login/groups/{group}/{action}"), json!({})).await;
    }
    app.post_ok("/api/v1/wishes/login/review", json!({"verdict": "fail", "notes": "missing tests"})).await;
    let (_, reviews) = dashboard.get("/wishes/login?block=reviews").await;
    assert!(reviews.contains("missing tests") && reviews.contains(">fail<"), "{reviews}");

    // The branch is not in the repository: the prediction says so instead of guessing.
    let (status, conflicts) = dashboard.get("/wishes/login/conflicts").await;
    assert_eq!(status, 200);
    assert!(conflicts.contains("branch feature/login is not in the project&#39;s repository yet"), "{conflicts}");
}

#[tokio::test]
async fn the_agent_pages_show_state_and_say_why_a_pane_cannot_be_shown() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    agent(&app, "fox", "Add a login page").await;
    let dashboard = Dashboard::login(&app).await;
    let (_, list) = dashboard.get("/agents").await;
    assert!(list.contains("href=\"/agents/fox\"") && list.contains(">spawning<") && list.contains("Add a login page"));
    let (_, filtered) = dashboard.get("/agents?state=idle").await;
    assert!(filtered.contains("No agents in this state"), "{filtered}");
    assert_eq!(dashboard.get("/agents?state=sleepy").await.0, 422);
    let (_, detail) = dashboard.get("/agents/fox").await;
    assert!(detail.contains("no worker runs beside this API") || detail.contains("has no pane yet"), "{detail}");
    assert!(detail.contains("/agents/fox/kill") && detail.contains("Type into the pane"));
    let killed = dashboard.post_form("/agents/fox/kill", &[]).await;
    assert_eq!(redirected(killed).await, "/agents/fox");
    let (_, detail) = dashboard.get("/agents/fox").await;
    assert!(detail.contains(">error<") && detail.contains("/agents/fox/resume"), "{detail}");
    assert_eq!(dashboard.get("/agents/nobody").await.0, 404);
}

#[tokio::test]
async fn the_webhook_pages_show_deliveries_and_send_one_again() {
    let app = TestApp::builder().webhooks(crate::webhooks::test_settings()).spawn().await;
    let created = app
        .post_ok(
            "/api/v1/webhooks",
            json!({"url": "http://127.0.0.1:9/hook",
        "events": ["on_pr_created"], "description": "CI bridge"}),
        )
        .await;
    let id = created["id"].as_str().expect("id").to_owned();
    let dashboard = Dashboard::login(&app).await;
    let (_, list) = dashboard.get("/webhooks").await;
    assert!(list.contains("http://127.0.0.1:9/hook") && list.contains("CI bridge") && list.contains("on_pr_created"));
    let sent = dashboard.post_form(&format!("/webhooks/{id}/test"), &[]).await;
    assert_eq!(redirected(sent).await, format!("/webhooks/{id}"));
    let (_, detail) = dashboard.get(&format!("/webhooks/{id}")).await;
    assert!(detail.contains("webhook.test"), "{detail}");
    let delivery: uuid::Uuid =
        sqlx::query_scalar("SELECT id FROM webhook_deliveries").fetch_one(&app.pool).await.expect("id");
    let again = dashboard.post_form(&format!("/webhooks/{id}/deliveries/{delivery}/redeliver"), &[]).await;
    assert_eq!(redirected(again).await, format!("/webhooks/{id}"));
    let unknown =
        dashboard.post_form(&format!("/webhooks/{id}/deliveries/{}/redeliver", uuid::Uuid::new_v4()), &[]).await;
    assert_eq!(unknown.status(), 404);
}

#[tokio::test]
async fn the_events_page_filters_by_type_and_pages_back() {
    let app = spawn_app().await;
    app.create_project("alpha").await;
    login_wish(&app, json!({})).await;
    let dashboard = Dashboard::login(&app).await;
    let (_, all) = dashboard.get("/events").await;
    assert!(all.contains("project.created") && all.contains("wish.created"));
    assert!(all.contains("href=\"/wishes/login\""), "a subject links to its page");
    let (_, wishes) = dashboard.get("/events?type=wish.").await;
    assert!(wishes.contains("wish.created") && !wishes.contains("project.created"), "{wishes}");
    let first: i64 = sqlx::query_scalar("SELECT min(id) FROM events").fetch_one(&app.pool).await.expect("min");
    let (_, older) = dashboard.get(&format!("/events?before={}", first + 1)).await;
    assert!(
        older.contains(&format!(">{first}<")) && !older.contains("hx-trigger=\"sse:events"),
        "an old page stays put"
    );
}

#[tokio::test]
async fn a_wrong_link_shows_a_page_to_a_browser_and_problem_json_to_a_script() {
    let app = spawn_app().await;
    let page = app.client.get(app.url("/no/such/page")).header("accept", "text/html").send().await.expect("get");
    assert_eq!(page.status(), 404);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    assert!(page.text().await.expect("body").contains("Back to the dashboard"));
    let script = app.client.get(app.url("/no/such/page")).send().await.expect("get");
    crate::helpers::assert_problem(script, 404).await;
    let api = app.client.get(app.url("/api/v1/nothing")).header("accept", "text/html").send().await.expect("get");
    crate::helpers::assert_problem(api, 404).await;
}

/// A project `alpha` over a repository with a `main` branch, agents `fox` and `owl` of it, and
/// team `login` of both, led by `fox`.
async fn login_team(app: &TestApp) {
    app.create_project("alpha").await;
    for name in ["fox", "owl"] {
        app.create_agent(merged(engineer("alpha", name), json!({"provider": "shell"}))).await;
    }
    let team = json!({"name": "login", "project": "alpha", "base_branch": "main", "leader": "fox",
        "members": ["fox", "owl"]});
    app.post_ok("/api/v1/teams", team).await;
}

#[tokio::test]
async fn teams_show_their_members_and_chat_and_the_operator_posts_with_the_csrf_token() {
    let app = spawn_app().await;
    login_team(&app).await;
    app.post_ok("/api/v1/teams/login/chat", json!({"body": "first post"})).await;
    app.post_ok("/api/v1/teams/login/chat", json!({"body": SCRIPT})).await;
    let dashboard = Dashboard::login(&app).await;

    let (status, html) = dashboard.get("/teams").await;
    assert_eq!(status, 200);
    assert!(html.contains("href=\"/teams\" aria-current=\"page\""), "the nav marks Teams");
    let teams = section(&html, "teams");
    assert!(teams.contains("href=\"/teams/login\"") && teams.contains("alpha"), "{teams}");
    assert!(teams.contains(">in progress<") && teams.contains("href=\"/agents/fox\""), "{teams}");
    assert!(teams.contains("<td class=\"num\">2</td>"), "two members: {teams}");

    let (status, html) = dashboard.get("/teams/login").await;
    assert_eq!(status, 200);
    let head = section(&html, "head");
    assert!(head.contains("href=\"/agents/owl\"") && head.contains("fox</a> <span class=\"muted\">(leader)"), "{head}");
    assert!(head.contains("<code>login</code>") && head.contains("<code>main</code>"), "branch and base: {head}");
    assert!(head.contains("hx-trigger=\"sse:team-login\""), "{head}");
    let chat = section(&html, "chat");
    assert!(chat.contains("hx-trigger=\"sse:chat-login\""), "{chat}");
    assert!(!chat.contains(SCRIPT) && chat.contains(SCRIPT_ESCAPED), "a post is text: {chat}");
    assert!(chat.find("first post").expect("first") < chat.find(SCRIPT_ESCAPED).expect("second"), "newest last");

    // Without the token nothing is posted; with it the post is the operator's.
    let bare = dashboard.request(Method::POST, "/teams/login/chat").form(&[("body", "hello")]).send().await;
    assert_eq!(bare.expect("post").status(), 403);
    let posted = dashboard.post_form("/teams/login/chat", &[("body", "From the dashboard")]).await;
    assert_eq!(redirected(posted).await, "/teams/login");
    let history = app.get_ok("/api/v1/teams/login/chat").await;
    let bodies: Vec<(&str, &str)> = history["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|p| (p["from"].as_str().expect("from"), p["body"].as_str().expect("body")))
        .collect();
    assert_eq!(bodies, [("operator", "first post"), ("operator", SCRIPT), ("operator", "From the dashboard")]);
    let (_, part) = dashboard.get("/teams/login?block=chat").await;
    assert!(part.trim_start().starts_with("<section id=\"chat\"") && part.contains("From the dashboard"), "{part}");
    let blank = dashboard.post_form("/teams/login/chat", &[("body", "  ")]).await;
    assert_eq!(blank.status(), 422, "a blank post is refused, naming the field");
    assert_eq!(dashboard.get("/teams/nope").await.0, 404);
}

#[tokio::test]
async fn the_mailbox_shows_pending_and_delivered_mail_and_sends_as_operator_with_the_csrf_token() {
    let app = spawn_app().await;
    login_team(&app).await;
    let waiting = app.post_ok("/api/v1/messages", json!({"to": "fox", "body": format!("{SCRIPT}\nsecond line")})).await;
    // The worker would record this; here the row is set as it would be.
    sqlx::query("UPDATE messages SET attempts = 2, last_error = 'the pane was busy' WHERE id = $1::uuid")
        .bind(waiting["id"].as_str().expect("id"))
        .execute(&app.pool)
        .await
        .expect("attempts");
    app.post_ok("/api/v1/messages", json!({"to": "operator", "body": "Done with the form"})).await;
    let dashboard = Dashboard::login(&app).await;

    let (status, html) = dashboard.get("/messages").await;
    assert_eq!(status, 200);
    assert!(html.contains("href=\"/messages\" aria-current=\"page\""), "the nav marks the mailbox");
    let pending = section(&html, "pending");
    assert!(pending.contains("href=\"/agents/fox\"") && pending.contains("the pane was busy"), "{pending}");
    assert!(pending.contains("<td class=\"num\">2</td>"), "two attempts: {pending}");
    assert!(!pending.contains(SCRIPT) && pending.contains(SCRIPT_ESCAPED), "the body is text: {pending}");
    assert!(!pending.contains("second line"), "only the first line: {pending}");
    assert!(pending.contains("hx-trigger=\"sse:messages\""), "{pending}");
    let delivered = section(&html, "delivered");
    assert!(delivered.contains("Done with the form") && delivered.contains(">operator</td>"), "{delivered}");
    assert!(!delivered.contains("fox"), "fox's message is not delivered: {delivered}");

    let bare = dashboard.request(Method::POST, "/messages").form(&[("to", "owl"), ("body", "hi")]).send().await;
    assert_eq!(bare.expect("post").status(), 403);
    let sent = dashboard.post_form("/messages", &[("to", "owl"), ("body", "Review fox's branch")]).await;
    assert_eq!(redirected(sent).await, "/messages");
    let owl = app.get_ok("/api/v1/agents/owl/messages").await;
    let items = owl["items"].as_array().expect("items");
    assert_eq!(items.len(), 1, "only the one sent with the token: {owl}");
    assert_eq!((&items[0]["from"], &items[0]["body"]), (&json!("operator"), &json!("Review fox's branch")));
    let (_, part) = dashboard.get("/messages?block=pending").await;
    assert!(part.contains("Review fox&#39;s branch") && !part.contains("<html"), "{part}");
    let nobody = dashboard.post_form("/messages", &[("to", "nobody"), ("body", "hi")]).await;
    assert_eq!(nobody.status(), 422, "an unknown recipient is refused");
}
