//! The panes of this node's agents, for the use cases that act on a pane (input, interrupt,
//! screen, suspend, kill). An agent on another node is refused with where it runs: only its own
//! node's tmux can reach it.
//!
//! [`Typist`] is the one way text is typed into a pane, whoever types it (the mailbox's
//! delivery, a nudge, the input API, the dashboard's answers): paste literally (a paste buffer,
//! never keys), let the TUI take the paste in (longer for more text), press Enter, and confirm
//! that a turn started. The mailbox records each of these steps around it; the others have
//! nothing to record but what they typed.

use std::future::Future;
use std::time::{Duration, Instant};

use chrono::Utc;
use sqlx::PgPool;

use super::{Error, Result};
use crate::db::agents::Agent;
use crate::db::messages::delivery::worked_since;
use crate::detect::screen::ScreenRules;
use crate::detect::{input_line, prompt};
use crate::domain::message::{settle_for, Confirmation};
use crate::domain::typed;
use crate::feed::EventFeed;
use crate::tmux::{Key, Tmux, TmuxError};

/// How often the pane is read while waiting for a confirmation that is not pushed.
const POLL: Duration = Duration::from_millis(50);
/// How long a drawn paste must read the same to be taken as drawn, where only the line can tell
/// whether Enter took it, and how often the line is read meanwhile.
const STILL: Duration = Duration::from_millis(150);
const STILL_POLL: Duration = Duration::from_millis(50);
/// How often the input line is read for the paste where a hook confirms the turn: Enter goes at
/// the first reading that shows it (Claude Code draws a paste 10–100 ms after it, and drops an
/// Enter pressed before that).
const DRAWN_POLL: Duration = Duration::from_millis(10);

#[derive(Clone)]
pub struct LocalPanes {
    pub tmux: Tmux,
    pub node_id: String,
    /// How long a TUI is given to take in a paste before Enter (plus a little per byte).
    pub settle: Duration,
    /// How long to wait, after Enter, for a turn to start.
    pub confirm: Duration,
}

/// Why a pane cannot be reached from here.
#[derive(Debug, thiserror::Error)]
pub enum Unreachable {
    #[error("agent `{0}` has no pane yet (or any more)")]
    NoPane(String),
    #[error("agent `{name}` runs on node `{node}`; this API runs beside node `{here}`")]
    OtherNode { name: String, node: String, here: String },
}

impl LocalPanes {
    /// The agent's pane, if it is on this node.
    pub fn pane<'a>(&self, agent: &'a Agent) -> Result<&'a str, Unreachable> {
        let pane = agent.tmux_pane.as_deref().ok_or_else(|| Unreachable::NoPane(agent.name.clone()))?;
        match &agent.node_id {
            Some(node) if *node == self.node_id => Ok(pane),
            Some(node) => {
                Err(Unreachable::OtherNode { name: agent.name.clone(), node: node.clone(), here: self.node_id.clone() })
            }
            None => Err(Unreachable::NoPane(agent.name.clone())),
        }
    }

    /// What types into this node's panes, with the configured settle and confirm times.
    pub fn typist(&self) -> Typist {
        Typist { tmux: self.tmux.clone(), settle: self.settle, confirm: self.confirm }
    }
}

/// How to interrupt a provider mid-turn, by the screen rules it is read with: the coding TUIs
/// stop on Escape (Ctrl-C would quit them, or ask whether to), whatever the provider is named
/// in the config; anything else gets Ctrl-C.
pub fn interrupt_key(screen_rules: ScreenRules) -> Key {
    match screen_rules {
        ScreenRules::ClaudeCode | ScreenRules::Codex | ScreenRules::Gemini => Key::Escape,
        ScreenRules::Generic => Key::CtrlC,
    }
}

/// A pane that vanished between the lookup and the call is the agent's state, not a fault of
/// ours: a conflict, and the reconciler settles the agent. Anything else from tmux is ours.
pub fn tmux_failed(e: TmuxError) -> Error {
    if e.is_missing() {
        Error::conflict("the agent's pane is gone; the worker will settle the agent", None)
    } else if let TmuxError::Invalid { what, reason } = e {
        Error::invalid(what, reason)
    } else {
        Error::internal(e)
    }
}

/// Types into panes by the one protocol: paste, settle, Enter, confirm. Its steps are separate
/// so the mailbox can record each before taking it; [`Typist::type_text`] takes them all.
#[derive(Clone)]
pub struct Typist {
    pub tmux: Tmux,
    pub settle: Duration,
    pub confirm: Duration,
}

/// How long each step of a menu answer waits for the screen to show it: the highlight on the
/// option, then the menu gone.
const MENU_STEP: Duration = Duration::from_secs(10);

/// How many times Enter is pressed on a menu that stays as it was (an Enter it did not take).
const ENTER_TRIES: usize = 3;

/// A menu option an agent's screen offered and that was answered.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
#[schema(example = json!({"option": 3, "label": "No, and tell Claude what to do differently (esc)"}))]
pub struct Chosen {
    pub option: u32,
    pub label: String,
}

/// A menu option whose highlight the screen showed ([`Typist::highlight`]), ready for Enter.
#[derive(Debug, Clone)]
pub struct Highlighted {
    /// The menu's labels, in order: the same menu is the same labels.
    pub labels: Vec<String>,
    /// Where the option is among them.
    pub wanted: usize,
    /// The keys pressed so far.
    pub keys: Vec<Key>,
    pub chosen: Chosen,
}

impl Highlighted {
    /// Whether `options` (a screen's) are this menu with this option highlighted.
    pub fn shown_in(&self, options: &[prompt::PromptOption]) -> bool {
        labels(options) == self.labels && prompt::selected(options) == Some(self.wanted)
    }
}

fn labels(options: &[prompt::PromptOption]) -> Vec<String> {
    options.iter().map(|o| o.label.clone()).collect()
}

/// What [`Typist::type_text`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Typed {
    /// Enter was pressed after the text.
    pub submitted: bool,
    /// How the pane showed that a turn started; `None` when it was not submitted, or the pane
    /// showed nothing within the confirm time (the text went in all the same).
    pub confirmed: Option<Confirmation>,
}

impl Typist {
    /// What is typed in the pane's input line now.
    pub async fn input_line(&self, pane: &str) -> Result<String, TmuxError> {
        Ok(input_line::typed(&self.tmux.cursor_line(pane).await?))
    }

    /// Pastes `text` literally: `;`, `C-c` and newlines arrive as text. Text that would end a
    /// bracketed paste (and have the rest typed as keys) is refused whoever sent it; the use
    /// cases refuse every control character before it gets here ([`crate::domain::typed`]).
    pub async fn paste(&self, pane: &str, text: &str) -> Result<(), TmuxError> {
        if typed::ends_paste(text) {
            return Err(TmuxError::Invalid { what: "text", reason: "it would end the bracketed paste".into() });
        }
        self.tmux.paste(pane, text).await
    }

    /// Presses named keys, in order (never text: the names are tmux's, from a closed set).
    pub async fn press_keys(&self, pane: &str, keys: &[Key]) -> Result<(), TmuxError> {
        for key in keys {
            self.tmux.send_key(pane, *key).await?;
        }
        Ok(())
    }

    /// Whether the menu on the pane's screen offers `option` (an option's number typed as text
    /// into a menu is ignored, and the Enter after it picks whatever is highlighted).
    pub async fn offers(&self, pane: &str, option: &str) -> Result<bool, TmuxError> {
        let screen = self.tmux.capture(pane, 0).await?;
        Ok(prompt::options(&screen).iter().any(|o| o.number == option))
    }

    /// Answers the menu on the pane's screen with `option`, by key presses checked on the
    /// screen: the arrow keys move the highlight to it, Enter is pressed only once the screen
    /// shows it there (in the same menu), and it is answered once the menu is gone. The keys
    /// pressed and the option; or why not, as a sentence (nothing pressed when the screen does
    /// not offer it).
    pub async fn choose(&self, pane: &str, option: u32) -> Result<std::result::Result<(Vec<Key>, Chosen), String>> {
        self.choose_saying(pane, option, None).await
    }

    /// [`Typist::choose`] for an option the screen must show labelled `label`: under another
    /// label (another menu) no key is pressed. For the dialogs Switchyard answers itself
    /// ([`crate::detect::screen::StartChoice`]).
    pub async fn choose_labelled(
        &self,
        pane: &str,
        option: u32,
        label: &str,
    ) -> Result<std::result::Result<(Vec<Key>, Chosen), String>> {
        self.choose_saying(pane, option, Some(label)).await
    }

    async fn choose_saying(
        &self,
        pane: &str,
        option: u32,
        label: Option<&str>,
    ) -> Result<std::result::Result<(Vec<Key>, Chosen), String>> {
        let mut highlighted = match self.highlight_saying(pane, option, label).await? {
            Ok(highlighted) => highlighted,
            Err(why) => return Ok(Err(why)),
        };
        // An Enter the menu did not take leaves it as it was, the option still highlighted: pressed
        // again, a few times at most. One it took closes it (or changes it: the next question).
        for _ in 0..ENTER_TRIES {
            if self.enter_choice(pane, &mut highlighted).await? {
                return Ok(Ok((highlighted.keys, highlighted.chosen)));
            }
        }
        Ok(Err(format!("chose option {option} ({:?}), but the menu is still on the screen", highlighted.keys)))
    }

    /// The first half of [`Typist::choose`]: moves the menu's highlight to `option` and waits for
    /// the screen to show it there. Nothing is chosen yet (arrow keys only move the highlight).
    pub async fn highlight(&self, pane: &str, option: u32) -> Result<std::result::Result<Highlighted, String>> {
        self.highlight_saying(pane, option, None).await
    }

    /// [`Typist::highlight`], only when option `option` says `label` (when one is given).
    async fn highlight_saying(
        &self,
        pane: &str,
        option: u32,
        label: Option<&str>,
    ) -> Result<std::result::Result<Highlighted, String>> {
        let menu = prompt::options(&self.tmux.capture(pane, 0).await.map_err(tmux_failed)?);
        let Some(wanted) = menu.iter().position(|o| o.number == option.to_string()) else {
            let offered = match menu.len() {
                0 => "it shows no menu".to_owned(),
                n => format!("it offers 1 to {n}"),
            };
            return Ok(Err(format!("the agent's screen has no option {option}: {offered}")));
        };
        if let Some(label) = label.filter(|label| menu[wanted].label != *label) {
            return Ok(Err(format!("option {option} says {:?}, not {label:?}; nothing chosen", menu[wanted].label)));
        }
        let Some(at) = prompt::selected(&menu) else {
            return Ok(Err("the agent's screen shows a list, not a menu with a highlighted option".to_owned()));
        };
        // A menu just drawn may not take keys yet: wait for its screen to hold still first.
        self.settled_screen(pane).await?;
        let keys = vec![if wanted > at { Key::Down } else { Key::Up }; wanted.abs_diff(at)];
        self.press_keys(pane, &keys).await.map_err(tmux_failed)?;
        let chosen = Chosen { option, label: menu[wanted].label.clone() };
        let highlighted = Highlighted { labels: labels(&menu), wanted, keys, chosen };
        if !self.watch_menu(pane, |options| highlighted.shown_in(options)).await? {
            return Ok(Err(format!(
                "pressed {:?}, but the screen did not show option {option} highlighted; nothing chosen",
                highlighted.keys
            )));
        }
        Ok(Ok(highlighted))
    }

    /// Presses Enter on a [`Highlighted`] option and answers whether the menu closed (or
    /// changed: the next question) within a while; false: it stays as it was, the Enter not taken.
    pub async fn enter_choice(&self, pane: &str, highlighted: &mut Highlighted) -> Result<bool> {
        self.press_keys(pane, &[Key::Enter]).await.map_err(tmux_failed)?;
        highlighted.keys.push(Key::Enter);
        self.watch_menu_for(pane, MENU_STEP / ENTER_TRIES as u32, |options| !highlighted.shown_in(options)).await
    }

    /// Whether the pane's screen keeps showing `highlighted`'s menu with its option highlighted
    /// for as long as [`Typist::enter_choice`] gives an Enter to close it (one just pressed may
    /// not have shown yet).
    pub async fn stays(&self, pane: &str, highlighted: &Highlighted) -> Result<bool> {
        let gone = self.watch_menu_for(pane, MENU_STEP / ENTER_TRIES as u32, |options| !highlighted.shown_in(options));
        Ok(!gone.await?)
    }

    /// Reads the pane's screen until its menu options satisfy `seen`, for at most [`MENU_STEP`].
    async fn watch_menu(&self, pane: &str, seen: impl Fn(&[prompt::PromptOption]) -> bool) -> Result<bool> {
        self.watch_menu_for(pane, MENU_STEP, seen).await
    }

    /// Waits (at most [`MENU_STEP`]) until two readings of the pane's screen 150 ms apart agree.
    async fn settled_screen(&self, pane: &str) -> Result<()> {
        let deadline = Instant::now() + MENU_STEP;
        let mut last = self.tmux.capture(pane, 0).await.map_err(tmux_failed)?;
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(150)).await;
            let now = self.tmux.capture(pane, 0).await.map_err(tmux_failed)?;
            if now == last {
                break;
            }
            last = now;
        }
        Ok(())
    }

    /// [`Typist::watch_menu`] for at most `within`.
    async fn watch_menu_for(
        &self,
        pane: &str,
        within: Duration,
        seen: impl Fn(&[prompt::PromptOption]) -> bool,
    ) -> Result<bool> {
        let deadline = Instant::now() + within;
        loop {
            let screen = self.tmux.capture(pane, 0).await.map_err(tmux_failed)?;
            if seen(&prompt::options(&screen)) {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Lets the TUI take in a paste of `bytes` before Enter, or Enter may land inside the paste.
    pub async fn settle(&self, bytes: usize) {
        tokio::time::sleep(settle_for(self.settle, bytes)).await;
    }

    /// Waits for a paste of `bytes` to show in the input line (`before` is the line before it)
    /// and the line to hold still, and answers the line showing it; `None`: it never showed, so
    /// the line is no evidence of a submission. A TUI takes Enter as a submission only once it
    /// has taken the paste in, and drawing it is the sign of that.
    ///
    /// Where no `hook` confirms the turn, the line is the only evidence, so the wait is careful:
    /// the settle time first, then up to the confirm time for the line to read the same for
    /// [`STILL`]. A TUI busy under load draws a paste late, and in steps (the first lines, then
    /// Gemini CLI's `[Pasted Text: 12 lines]`): an Enter pressed before it is drawn can be lost
    /// (Gemini CLI takes one in its first 40 ms after a paste as a newline), and a line recorded
    /// half-drawn would read, unchanged by the lost Enter, as "Enter took the text".
    ///
    /// Where a hook confirms it, a lost Enter shows as the hook not coming (the delivery presses
    /// again), so Enter goes as soon as the line shows the paste, waiting at most the settle time
    /// for it: this wait is most of Switchyard's part of a message's latency to such an agent.
    pub async fn await_drawn(&self, pane: &str, before: &str, bytes: usize, hook: bool) -> Option<String> {
        let (still, poll, within) = if hook {
            (Duration::ZERO, DRAWN_POLL, settle_for(self.settle, bytes))
        } else {
            self.settle(bytes).await;
            (STILL, STILL_POLL, self.confirm)
        };
        let deadline = Instant::now() + within;
        let mut drawn: Option<(String, Instant)> = None;
        loop {
            match self.input_line(pane).await {
                Ok(now) if now != before => {
                    let since = match &drawn {
                        Some((line, since)) if *line == now => *since,
                        _ => Instant::now(),
                    };
                    if since.elapsed() >= still {
                        return Some(now);
                    }
                    drawn = Some((now, since));
                }
                Err(_) => return None,
                Ok(_) => drawn = None,
            }
            if Instant::now() >= deadline {
                return drawn.map(|(line, _)| line);
            }
            tokio::time::sleep(poll).await;
        }
    }

    pub async fn press_enter(&self, pane: &str) -> Result<(), TmuxError> {
        self.tmux.send_key(pane, Key::Enter).await
    }

    /// Waits up to the confirm time for `probe` to see that a turn started: it looks at once,
    /// then after every commit (a hook or a state change is one) and every 50 ms (the pane
    /// pushes nothing). `None`: not seen in time.
    pub async fn await_turn<T, F, Fut>(&self, feed: &EventFeed, mut probe: F) -> anyhow::Result<Option<T>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<Option<T>>>,
    {
        let deadline = Instant::now() + self.confirm;
        let mut wake = feed.subscribe();
        loop {
            if let Some(seen) = probe().await? {
                return Ok(Some(seen));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::select! {
                _ = wake.changed() => {}
                _ = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// Types `text` into `agent`'s `pane` where nothing records the steps (input, answers,
    /// nudges): paste; with `submit`, settle by size, press Enter and wait for the turn to start
    /// — the text left the input line, or the agent went `working` (which its hook, where it has
    /// one, reports at once).
    pub async fn type_text(
        &self,
        db: &PgPool,
        feed: &EventFeed,
        agent: &str,
        pane: &str,
        text: &str,
        submit: bool,
    ) -> Result<Typed> {
        // Unreadable is not fatal: the line is only what "the text left it" is compared with.
        let before = self.input_line(pane).await.ok();
        self.paste(pane, text).await.map_err(tmux_failed)?;
        if !submit {
            return Ok(Typed { submitted: false, confirmed: None });
        }
        self.settle(text.len()).await;
        let entered_at = Utc::now();
        self.press_enter(pane).await.map_err(tmux_failed)?;
        let started = || async {
            let worked = match db.acquire().await {
                Ok(mut conn) => worked_since(&mut conn, agent, entered_at).await.unwrap_or(false),
                Err(_) => false,
            };
            if worked {
                return Ok(Some(Confirmation::State));
            }
            let emptied = match (&before, self.input_line(pane).await) {
                (Some(before), Ok(now)) => *before == now,
                _ => false,
            };
            Ok(emptied.then_some(Confirmation::Screen))
        };
        let confirmed = self.await_turn(feed, started).await?;
        Ok(Typed { submitted: true, confirmed })
    }
}
