//! Long lists a page at a time: a team's chat and the mailbox show their newest 200 entries and an
//! Older link (a plain link) to the next 200, in `(created_at, id)` order, so entries made in the
//! same instant are neither shown twice nor skipped; an older page links back to the newest and
//! does not follow the live stream; a cursor the server did not make is a 4xx page.

use std::collections::BTreeSet;

use super::{login_team, section};
use crate::dashboard::Dashboard;
use crate::helpers::spawn_app;

/// The numbers of the entries (`<prefix><number>`) a part of a page shows, top to bottom.
fn numbers(html: &str, prefix: &str) -> Vec<u32> {
    let pattern = regex::Regex::new(&format!(r"{prefix}(\d+)<")).expect("pattern");
    pattern.captures_iter(html).map(|c| c[1].parse().expect("a number")).collect()
}

/// Where the link that says `text` in a part of a page goes, if there is one.
fn link(html: &str, text: &str) -> Option<String> {
    let pattern = regex::Regex::new(&format!(r#"<a href="([^"]+)"[^>]*>{text}</a>"#)).expect("pattern");
    pattern.captures(html).map(|c| c[1].replace("&#38;", "&").replace("&amp;", "&"))
}

/// The numbers in `(created_at, id)` order, newest first, as `query` reads them.
async fn newest_first(pool: &sqlx::PgPool, query: &str) -> Vec<u32> {
    let rows: Vec<i32> = sqlx::query_scalar(query).fetch_all(pool).await.expect("order");
    rows.into_iter().map(|n| n as u32).collect()
}

/// A list on a page: where its newest page is, the part of the page that shows it, how its
/// entries and links are named, and whether it shows a page oldest first.
struct List<'a> {
    start: &'a str,
    part: &'a str,
    prefix: &'a str,
    what: &'a str,
    oldest_first: bool,
}

/// Follows the list's Older links from its newest page to its last, asserting that each page
/// shows the next entries of `order` (newest first), so none twice and none missed; that only the
/// newest page follows the live stream, and the others link back to it. Returns each page.
async fn page_through(dashboard: &Dashboard, list: &List<'_>, order: &[u32], sizes: &[usize]) -> Vec<String> {
    let mut path = list.start.to_owned();
    let (mut pages, mut seen) = (Vec::new(), Vec::new());
    for (index, size) in sizes.iter().enumerate() {
        let (status, html) = dashboard.get(&path).await;
        assert_eq!(status, 200, "{path}");
        let part = section(&html, list.part);
        let mut shown = numbers(part, list.prefix);
        if list.oldest_first {
            shown.reverse();
        }
        assert_eq!(shown, order[seen.len()..seen.len() + size], "page {} is the next {size}", index + 1);
        seen.extend(shown);
        assert_eq!(part.contains("hx-trigger"), index == 0, "only the newest page is live: {path}");
        let newest = link(part, &format!("Newest {}", list.what));
        assert_eq!(newest.as_deref(), (index > 0).then_some(list.start), "an older page links to the newest");
        match link(part, &format!("Older {}", list.what)) {
            Some(older) => path = older,
            None => assert_eq!(index + 1, sizes.len(), "page {} has an Older link", index + 1),
        }
        pages.push(html);
    }
    assert_eq!(seen.iter().collect::<BTreeSet<_>>().len(), order.len(), "each entry once, none missing");
    pages
}

#[tokio::test]
async fn a_team_chat_pages_back_from_the_newest_posts_without_duplicates_or_gaps() {
    let app = spawn_app().await;
    login_team(&app).await;
    // 450 posts, three to each instant: only their ids order them within it.
    sqlx::query(
        "INSERT INTO team_chat (id, team_id, sender, body, created_at)
         SELECT gen_random_uuid(), t.id, 'fox', 'post ' || i, timestamptz '2025-01-01' + (i / 3) * interval '1 second'
         FROM teams t, generate_series(0, 449) i WHERE t.name = 'login'",
    )
    .execute(&app.pool)
    .await
    .expect("posts");
    let order =
        newest_first(&app.pool, "SELECT substr(body, 6)::int FROM team_chat ORDER BY created_at DESC, id DESC").await;
    let dashboard = Dashboard::login(&app).await;

    let chat = List { start: "/teams/login", part: "chat", prefix: "post ", what: "posts", oldest_first: true };
    let pages = page_through(&dashboard, &chat, &order, &[200, 200, 50]).await;
    let newest = numbers(section(&pages[0], "chat"), "post ");
    assert!(newest[197..].iter().all(|n| *n >= 447), "the newest posts, last: {newest:?}");

    for bad in ["nonsense", "bm90IGEgY3Vyc29y", ""] {
        let (status, html) = dashboard.get(&format!("/teams/login?before={bad}")).await;
        assert_eq!(status, 422, "`{bad}`: {html}");
        assert!(html.contains("before: is not a link to a page of this list"), "it says what was wrong: {html}");
    }
}

#[tokio::test]
async fn the_mailbox_pages_back_through_delivered_and_waiting_messages_each_keeping_the_others_page() {
    let app = spawn_app().await;
    login_team(&app).await;
    // 450 delivered messages, three to each instant, and 201 still waiting for fox.
    sqlx::query(
        "INSERT INTO messages (id, sender, recipient, body, delivered_at, confirmed_by, created_at)
         SELECT gen_random_uuid(), 'owl', 'operator', 'mail ' || i, now(), 'operator',
                timestamptz '2025-01-01' + (i / 3) * interval '1 second'
         FROM generate_series(0, 449) i",
    )
    .execute(&app.pool)
    .await
    .expect("delivered");
    sqlx::query(
        "INSERT INTO messages (id, sender, recipient, recipient_id, body, created_at)
         SELECT gen_random_uuid(), 'operator', 'fox', a.id, 'wait ' || i, timestamptz '2025-01-01' + i * interval '1 second'
         FROM agents a, generate_series(0, 200) i WHERE a.name = 'fox'",
    )
    .execute(&app.pool)
    .await
    .expect("pending");
    let order = newest_first(
        &app.pool,
        "SELECT substr(body, 6)::int FROM messages WHERE delivered_at IS NOT NULL ORDER BY created_at DESC, id DESC",
    )
    .await;
    let dashboard = Dashboard::login(&app).await;

    let delivered = List {
        start: "/messages",
        part: "delivered",
        prefix: "mail ",
        what: "delivered messages",
        oldest_first: false,
    };
    let pages = page_through(&dashboard, &delivered, &order, &[200, 200, 50]).await;
    // Whichever page of delivered messages is shown, the waiting ones stay on their newest page,
    // live, and their Older link keeps the delivered messages' page.
    for (index, html) in pages.iter().enumerate() {
        let pending = section(html, "pending");
        assert_eq!(numbers(pending, "wait ").first(), Some(&1), "the newest 200 of 201, oldest first");
        assert!(pending.contains("hx-trigger=\"sse:messages"), "{pending}");
        let older = link(pending, "Older waiting messages").expect("an older page of waiting messages");
        assert_eq!(older.contains("delivered_before="), index > 0, "{older}");
        if index == 1 {
            let (_, html) = dashboard.get(&older).await;
            assert_eq!(numbers(section(&html, "pending"), "wait "), [0], "the oldest waiting message");
            assert_eq!(numbers(section(&html, "delivered"), "mail "), order[200..400], "delivered stays on its page");
        }
    }

    for bad in ["/messages?delivered_before=nonsense", "/messages?pending_before=bm90IGEgY3Vyc29y"] {
        let (status, _) = dashboard.get(bad).await;
        assert_eq!(status, 422, "{bad}");
    }
}
