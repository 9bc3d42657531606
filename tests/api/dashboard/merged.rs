//! A merged wish's page in headless Chromium: what merged, into which branch, with the merge
//! commit, its message and its diff; nothing of the branch it no longer has (its phase, who it
//! waits on, how to check the branch out, a conflict prediction).

use fantoccini::{Client, Locator};
use switchyard::domain::merge_queue::EntryState;

use super::browser::{browser, login_link, screenshot, until_text};
use crate::helpers::spawn_app;
use crate::merge_queue::{completed_wish, entry, processed, project, Shape};

/// The text of the part `css` of the page, its whitespace made single spaces.
async fn text_of(client: &Client, css: &str) -> String {
    let element = client.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"));
    element.text().await.expect("text").split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test]
async fn a_merged_wishs_page_shows_what_merged_where_with_its_merge_commit_and_diff() {
    let Some((client, _driver)) = browser().await else { return };
    let app = spawn_app().await;
    let p = project(&app, "shop", Shape::Bare, &[]).await;
    p.push("wish/login", &[("login.txt", "sign in here\n")]);
    completed_wish(&app, "shop", "login").await;
    assert_eq!(processed(&app.merge_queue().tick().await.expect("tick")), [("login", EntryState::Completed)]);
    let merge = entry(&app, "login").await["merge_commit"].as_str().expect("a merge commit").to_owned();

    client.goto(&login_link(&app).await).await.expect("log in");
    client.goto(&app.url("/wishes/login")).await.expect("the wish page");
    // The diff comes after the page loads (it runs git).
    until_text(&client, "#changes", "sign in here").await;
    let changes = text_of(&client, "#changes").await;
    assert!(changes.contains(&format!("Merge commit {} on main: 1 file changed", &merge[..12])), "{changes}");
    assert!(changes.contains("login.txt"), "{changes}");

    let conductor = text_of(&client, "#conductor").await;
    assert!(conductor.contains("Merged into main"), "{conductor}");
    assert!(conductor.contains(&format!("Merge commit {}", &merge[..12])), "{conductor}");
    assert!(conductor.contains("Merge wish `login`: Wish login"), "the merge commit's message: {conductor}");
    let head = text_of(&client, "#head").await;
    assert!(head.contains("merged") && head.contains("wish/login, merged into main"), "{head}");

    let page = text_of(&client, "main").await;
    for stale in ["Waiting on", "the conductor", "git clone", "not in the project's repository", "Conflict prediction"]
    {
        assert!(!page.contains(stale), "a merged wish's page does not say `{stale}`: {page}");
    }
    screenshot(&client, "wish-merged").await;
    client.close().await.expect("close the browser");
}
