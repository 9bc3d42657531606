//! The real Codex CLI interrupted mid-work, as `recovery_claude` does Claude Code: its pane (or
//! the whole tmux server) killed while the scripted model streams its answer after the first
//! step of the engineer's brief. Switchyard resumes it into its own session (the built-in
//! provider's `codex resume --last`: the latest session in the agent's own `CODEX_HOME`, which
//! holds its sessions alone), tells it to go on, and the conversation goes on — the scripted
//! model finds the assignment further up it — to the group done and the wish merged.
//! Skipped, saying why, exactly as `real_clis` is when the CLIs are not installed.

use std::path::PathBuf;

use crate::real_clis::{agent_clis, walk};
use crate::recovery_claude::{conducted_by, killed_mid_turn_and_merged, Kill};
use crate::scripted_model::ScriptedModel;
use crate::unattended_codex::{providers_toml, user_home};

#[tokio::test(flavor = "multi_thread")]
async fn codex_whose_pane_is_killed_goes_on_in_its_own_conversation_and_its_group_lands() {
    interrupted_and_resumed(Kill::Pane).await;
}

/// The whole tmux server killed, every pane with it, as a reboot would.
#[tokio::test(flavor = "multi_thread")]
async fn codex_whose_tmux_server_is_killed_goes_on_in_its_own_conversation_and_its_group_lands() {
    interrupted_and_resumed(Kill::Server).await;
}

async fn interrupted_and_resumed(kill: Kill) {
    let Some(bin) = agent_clis() else { return };
    let model = ScriptedModel::start().await;
    let home = user_home(&model);
    let user = home.path().to_path_buf();
    let (app, repo) = conducted_by("codex", &providers_toml(&bin), |w| w.provider_home = Some(user)).await;
    let (name, _) = killed_mid_turn_and_merged(&app, &repo, &model, kill).await;

    // Its own conversation goes on: of the session files in its own CODEX_HOME, one holds the
    // resumed turn, and the brief's turn is before it in the same file.
    let own = switchyard::app::agents::own_dir(app._data_dir.path(), &name).join("codex/sessions");
    let sessions: Vec<PathBuf> = walk(&own)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("rollout-")))
        .collect();
    let texts: Vec<String> = sessions.iter().map(|p| std::fs::read_to_string(p).expect("a session file")).collect();
    let resumed: Vec<&String> = texts.iter().filter(|t| t.contains("Your session was interrupted")).collect();
    assert_eq!(resumed.len(), 1, "one session went on: {sessions:?}");
    let brief_at = resumed[0].find("Your assignment: group").expect("the brief's turn in the same session");
    let resumed_at = resumed[0].find("Your session was interrupted").expect("the turn after the resume");
    assert!(brief_at < resumed_at, "the old turn, then the new one");
    drop(home);
}
