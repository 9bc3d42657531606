//! Acting on an agent's pane on this node: type into it, interrupt it, read its screen, and
//! the state changes that close it (suspend, kill) or ask for a new one (resume). Text goes in
//! literally through the one typing protocol ([`super::local_panes::Typist`]); state changes are
//! written before tmux is touched, so the record never lags what tmux did.

use serde::Serialize;
use sqlx::PgConnection;

pub use super::local_panes::Chosen;
use super::local_panes::{interrupt_key, tmux_failed, LocalPanes};
use super::{Ctx, Error, Result};
use crate::db::agents::{self, Agent, Applied, Cause};
use crate::db::events;
use crate::detect::prompt;
use crate::detect::screen::ScreenRules;
use crate::domain::agent::AgentEvent;
use crate::domain::typed;
use crate::tmux::Key;

/// The largest input accepted in one call.
pub const INPUT_LIMIT: usize = 256 * 1024;

/// The most keys pressed in one call.
pub const KEYS_LIMIT: usize = 64;

/// The most history lines a screen read asks for.
pub const SCREEN_HISTORY_LIMIT: u32 = 2000;

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"agent": "clever-fox", "pane": "%7", "bytes": 58, "keys": [], "submitted": true, "chosen": null}))]
pub struct Delivered {
    pub agent: String,
    pub pane: String,
    /// Bytes of text typed (0 when keys were pressed).
    pub bytes: usize,
    /// The keys pressed, in order (empty when text was typed).
    pub keys: Vec<Key>,
    /// Enter was pressed after the text.
    pub submitted: bool,
    /// The menu option answered, once the screen showed it highlighted and then the menu closed.
    pub chosen: Option<Chosen>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"agent": "clever-fox", "pane": "%7", "text": "✻ Thinking… (esc to interrupt)\n", "options": [], "asked": null}))]
pub struct Screen {
    pub agent: String,
    pub pane: String,
    /// The pane's text, colour codes removed.
    pub text: String,
    /// While the agent asks (`permission`, `question`): the options of the menu its screen
    /// shows, by number and label (an option's description is not part of its label); answer
    /// with `POST /agents/{name}/input` `{"option": N}`. Empty otherwise.
    pub options: Vec<MenuOption>,
    /// While the agent asks and its screen shows a menu: what the menu asks, in the CLI's words
    /// (the lines above its options: the dialog's title, the command or file, the question).
    pub asked: Option<String>,
}

/// One option of the menu an agent's screen shows.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"option": 2, "label": "Never retry", "highlighted": false}))]
pub struct MenuOption {
    pub option: u32,
    pub label: String,
    /// The option Enter would pick now.
    pub highlighted: bool,
}

async fn agent(ctx: &Ctx, name: &str) -> Result<Agent> {
    let mut conn = ctx.db.acquire().await?;
    agents::by_name(&mut conn, name).await?.ok_or_else(|| Error::NotFound(format!("no agent `{name}`")))
}

fn panes(ctx: &Ctx) -> Result<&LocalPanes> {
    ctx.panes.as_ref().ok_or_else(|| Error::conflict("no worker runs beside this API", None))
}

/// The agent's pane on this node, or a conflict saying why it cannot be reached.
fn pane<'a>(ctx: &Ctx, agent: &'a Agent) -> Result<&'a str> {
    panes(ctx)?.pane(agent).map_err(|e| Error::conflict(e.to_string(), Some(agent.state.as_str())))
}

/// Types `text` into the agent's pane, literally, and with `submit` presses Enter after letting
/// the TUI take it in, then waits (up to the confirm time) for the turn to start. Not seeing it
/// start is no failure: the text went in, and the answer says what was done. Text is text:
/// control characters other than tab and newline are refused ([`typed::check`]).
#[tracing::instrument(skip_all, fields(agent = ?name, bytes = text.len(), submit), err(level = "debug"))]
pub async fn input(ctx: &Ctx, name: &str, text: &str, submit: bool) -> Result<Delivered> {
    if text.is_empty() || text.len() > INPUT_LIMIT {
        return Err(Error::invalid("text", format!("must be 1 to {INPUT_LIMIT} bytes")));
    }
    typed::check(text).map_err(|why| Error::invalid("text", why))?;
    let agent = agent(ctx, name).await?;
    let pane = pane(ctx, &agent)?;
    // An option's number typed into a menu would be ignored (menus take key presses, not
    // pastes) and the Enter after it would pick the highlighted option, whatever it says: the
    // number of an option the screen offers is that option, chosen.
    if let Ok(option) = text.trim().parse::<u32>() {
        let screen = panes(ctx)?.tmux.capture(pane, 0).await.map_err(tmux_failed)?;
        if prompt::options(&screen).iter().any(|o| o.number == option.to_string()) {
            return choose(ctx, name, option).await;
        }
    }
    let typed = panes(ctx)?.typist().type_text(&ctx.db, &ctx.feed, &agent.name, pane, text, submit).await?;
    if submit && typed.confirmed.is_none() {
        tracing::debug!("no turn seen starting within the confirm time");
    }
    Ok(Delivered {
        agent: agent.name.clone(),
        pane: pane.to_owned(),
        bytes: text.len(),
        keys: Vec::new(),
        submitted: submit,
        chosen: None,
    })
}

/// Answers the menu on the agent's screen with `option` ([`super::local_panes::Typist::choose`]); a
/// screen without that option, a highlight that does not arrive or a menu that stays is a
/// conflict saying so.
#[tracing::instrument(skip_all, fields(agent = ?name, option), err(level = "debug"))]
pub async fn choose(ctx: &Ctx, name: &str, option: u32) -> Result<Delivered> {
    let agent = agent(ctx, name).await?;
    let pane = pane(ctx, &agent)?;
    let (keys, chosen) = panes(ctx)?
        .typist()
        .choose(pane, option)
        .await?
        .map_err(|why| Error::conflict(why, Some(agent.state.as_str())))?;
    // The answer is given; a record of it that fails leaves the dialog to the screen's next
    // reading, not the answer unsaid.
    if let Err(e) = record_answered(ctx, &agent).await {
        tracing::warn!(agent = %agent.name, error = %e, "recording that the menu was answered");
    }
    Ok(Delivered {
        agent: agent.name.clone(),
        pane: pane.to_owned(),
        bytes: 0,
        keys,
        submitted: false,
        chosen: Some(chosen),
    })
}

async fn record_answered(ctx: &Ctx, agent: &Agent) -> Result<()> {
    let mut tx = ctx.db.begin().await?;
    super::hooks::answered(&mut tx, agent.id, agent.last_hook_at).await?;
    ctx.feed.commit(tx).await?;
    ctx.feed.hook_recorded();
    Ok(())
}

/// Presses `keys` in the agent's pane, in order: named keys from a closed set, never text.
#[tracing::instrument(skip_all, fields(agent = ?name, keys = ?keys), err(level = "debug"))]
pub async fn press_keys(ctx: &Ctx, name: &str, keys: &[Key]) -> Result<Delivered> {
    if keys.is_empty() || keys.len() > KEYS_LIMIT {
        return Err(Error::invalid("keys", format!("must name 1 to {KEYS_LIMIT} keys")));
    }
    let agent = agent(ctx, name).await?;
    let pane = pane(ctx, &agent)?;
    panes(ctx)?.typist().press_keys(pane, keys).await.map_err(tmux_failed)?;
    Ok(Delivered {
        agent: agent.name.clone(),
        pane: pane.to_owned(),
        bytes: 0,
        keys: keys.to_vec(),
        submitted: false,
        chosen: None,
    })
}

/// Interrupts the agent's turn (Escape for Claude Code, Codex and Gemini; Ctrl-C otherwise).
#[tracing::instrument(skip_all, fields(agent = ?name), err(level = "debug"))]
pub async fn interrupt(ctx: &Ctx, name: &str) -> Result<Agent> {
    let agent = agent(ctx, name).await?;
    let pane = pane(ctx, &agent)?;
    let rules = ctx.providers.current().get(&agent.provider).map_or(ScreenRules::Generic, |p| p.screen_rules);
    panes(ctx)?.tmux.send_key(pane, interrupt_key(rules)).await.map_err(tmux_failed)?;
    Ok(agent)
}

/// Applies `event` (suspend, fail, resume) first, then closes the window where it is on this
/// node: the record never lags what tmux did.
#[tracing::instrument(skip_all, fields(agent = ?name, event = ?event), err(level = "debug"))]
pub async fn stop(ctx: &Ctx, name: &str, event: AgentEvent, reason: &str) -> Result<Agent> {
    let agent = agent(ctx, name).await?;
    let window = agent.tmux_window.clone();
    let local = panes(ctx).ok().and_then(|p| p.pane(&agent).ok().map(|_| p.clone()));
    let cause = Cause { detail: Some(reason.to_owned()), ..Cause::from("api") };
    let mut tx = ctx.db.begin().await?;
    let agent = match agents::apply(&mut tx, agent.id, None, event, &cause).await? {
        Some(Applied::Changed { agent, .. }) | Some(Applied::Unchanged(agent)) => agent,
        Some(Applied::Refused { current, message }) => return Err(Error::conflict(message, Some(current.as_str()))),
        Some(Applied::Stale { current }) => {
            return Err(Error::conflict("the agent changed meanwhile; try again", Some(current.as_str())))
        }
        None => return Err(Error::NotFound(format!("no agent `{name}`"))),
    };
    ctx.feed.commit(tx).await?;
    if let (Some(panes), Some(window)) = (local, window) {
        if let Err(e) = panes.tmux.kill_window(&window).await {
            if !e.is_missing() {
                tracing::warn!(agent = %agent.name, error = %e, "closing the agent's window");
            }
        }
    }
    Ok(agent)
}

/// The agent's pane text (colour codes removed) with `lines` of history above the screen.
pub async fn screen(ctx: &Ctx, name: &str, lines: u32) -> Result<Screen> {
    if lines > SCREEN_HISTORY_LIMIT {
        return Err(Error::invalid("lines", format!("must be at most {SCREEN_HISTORY_LIMIT}")));
    }
    let agent = agent(ctx, name).await?;
    let pane = pane(ctx, &agent)?;
    let text = panes(ctx)?.tmux.capture(pane, lines).await.map_err(tmux_failed)?;
    let (options, asked) =
        if agent.state.needs_person() { (menu(&text), prompt::asked(&text)) } else { (Vec::new(), None) };
    Ok(Screen { agent: agent.name.clone(), pane: pane.to_owned(), text, options, asked })
}

/// The menu options `screen` shows ([`prompt::options`]).
fn menu(screen: &str) -> Vec<MenuOption> {
    prompt::options(screen)
        .into_iter()
        .filter_map(|o| Some(MenuOption { option: o.number.parse().ok()?, label: o.label, highlighted: o.selected }))
        .collect()
}

/// The program in the foreground of a shell agent's pane when another process group than the
/// pane's own holds its terminal (`cargo`, `sleep` run by the shell): what keeps the agent
/// working however still its screen is. `None` for providers with screen rules, or when the
/// pane cannot be reached from here ([`crate::tmux::foreground`]).
pub async fn foreground_command(ctx: &Ctx, agent: &Agent) -> Option<String> {
    ctx.providers.current().get(&agent.provider)?.shell()?;
    let pane = pane(ctx, agent).ok()?;
    let out = panes(ctx).ok()?.tmux.run(&["display-message", "-p", "-t", pane, "#{pane_pid}"]).await;
    crate::tmux::foreground::other_group_holding(out.ok()?.trim().parse().ok()?)
}

/// Records a nudge of a quiet agent (`agent.nudged`), and once it has had `max_nudges` that it
/// is stuck (`agent.stuck`; a conductor agent's step goes to a person), in the caller's transaction: the nudge is typed only once this is
/// committed, so a crash never types one that was not counted. Answers the nudges so far.
pub async fn record_nudge(conn: &mut PgConnection, agent: &Agent, max_nudges: i32) -> Result<i32> {
    let count = agents::record_nudge(&mut *conn, agent.id).await?.unwrap_or(0);
    if count >= max_nudges {
        let payload = serde_json::json!({"nudges": count, "state": agent.state});
        events::record(&mut *conn, "agent.stuck", &format!("agent:{}", agent.name), payload).await?;
        if agent.wish_id.is_some() && !agent.ready_for_cleanup {
            let reason = format!("agent `{}` did not report after {count} nudges", agent.name);
            super::wish_lifecycle::give_up(conn, agent, &reason).await?;
        }
    }
    Ok(count)
}
