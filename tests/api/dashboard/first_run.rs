//! The first-run path in a real browser, from an empty install: the overview shows the three
//! steps, each "not done"; a provider added to `providers.toml` (no restart) marks the first
//! done; the overview's project form makes a project; its wish link opens the wish form, which
//! makes a wish; then the steps are gone.

use std::time::Duration;

use fantoccini::{Client, Locator};

use super::browser::{browser, click_button, fill, login_link, screenshot, until_text};
use crate::helpers::{eventually, git_repo, TestApp};

/// Whether the overview, loaded afresh, shows step `id` as done.
async fn step_done(client: &Client, base: &str, id: &str) -> bool {
    client.goto(&format!("{base}/")).await.expect("overview");
    match client.find(Locator::Css(&format!("#{id}"))).await {
        Ok(step) => step.attr("class").await.ok().flatten().is_some_and(|c| c.split(' ').any(|w| w == "done")),
        Err(_) => false,
    }
}

#[tokio::test]
async fn an_empty_install_leads_from_a_provider_to_a_project_to_a_wish_in_a_real_browser() {
    let Some((client, _driver)) = browser().await else { return };
    let app = TestApp::builder().spawn().await;
    let base = app.address.clone();
    client.goto(&login_link(&app).await).await.expect("login link");
    until_text(&client, "h1", "Overview").await;

    // Nothing is set up: every step says so, with the file to edit and the exact snippet.
    until_text(&client, "#first-run", "Your first wish").await;
    for step in ["#step-provider", "#step-project", "#step-wish"] {
        until_text(&client, step, "not done").await;
    }
    let file = app._data_dir.path().join("providers.toml");
    until_text(&client, "#step-provider", &file.display().to_string()).await;
    until_text(&client, "#step-provider", "env = { ANTHROPIC_API_KEY = ").await;
    screenshot(&client, "first-run").await;

    // A provider of one's own (installed, nothing to configure), without a restart.
    let mut toml = std::fs::read_to_string(&file).unwrap_or_default();
    toml.push_str("\n[providers.mine]\ncommand = [\"bash\"]\n");
    std::fs::write(&file, toml).expect("edit providers.toml");
    eventually("the provider step is done", Duration::from_secs(60), || step_done(&client, &base, "step-provider"))
        .await;

    // The project, from the overview's form.
    let repo = git_repo();
    fill(&client, "#first-run #np-slug", "alpha").await;
    fill(&client, "#first-run #np-name", "Alpha").await;
    fill(&client, "#first-run #np-repo", &repo.path().display().to_string()).await;
    click_button(&client, "Create project").await;
    // The form leads back to the overview, which no longer offers it.
    eventually("back on the overview without the form", Duration::from_secs(20), || async {
        client.current_url().await.is_ok_and(|u| u.path() == "/")
            && client.find(Locator::Css("#first-run #np-slug")).await.is_err()
    })
    .await;
    assert_eq!(app.get_ok("/api/v1/projects/alpha").await["name"], "Alpha");
    assert!(step_done(&client, &base, "step-project").await, "the project step is done");

    // The wish, from the step's link.
    let link = client.find(Locator::Css("#step-wish a[href='/new-wish']")).await.expect("the wish link");
    link.click().await.expect("click");
    until_text(&client, "h1", "Make a wish").await;
    fill(&client, "#slug", "hello").await;
    fill(&client, "#title", "Say hello").await;
    click_button(&client, "Make the wish").await;
    until_text(&client, "#wish-h", "Say hello").await;

    // Every step done: the overview no longer shows them.
    client.goto(&format!("{base}/")).await.expect("overview");
    until_text(&client, "h1", "Overview").await;
    assert!(client.find(Locator::Css("#first-run")).await.is_err(), "the first steps are gone once done");
    client.close().await.expect("close");
}
