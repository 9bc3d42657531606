//! Delivering one message into one agent's pane, exactly once: paste, settle, Enter, confirm.
//!
//! Each step is recorded before it is taken (`db::messages::delivery`), and where it stopped
//! decides how it goes on ([`next_step`]): a crash or a dead pane at any point leaves either a
//! message never pasted into this pane (paste it), text waiting in the input line (press Enter,
//! never paste again), or an Enter whose effect the pane shows (the line emptied, or the agent
//! started a turn). A `UserPromptSubmit` hook carrying the text confirms it directly
//! (`api::agent_hooks`); for agents without hooks, or when their hook does not come, the pane
//! confirms it.
//!
//! An answer to a menu on the agent's screen (a permission dialog, a question with options) that
//! is the number of an option the menu offers is chosen with key presses instead
//! ([`Typist::highlight`]): a menu ignores a pasted "3", and the Enter after it would pick the
//! highlighted option. The arrow keys choose nothing, so only the Enter is recorded before it is
//! pressed, with the option and the menu's labels; the menu gone (or changed) confirms it. A
//! resumed choice is never pasted, and Enter is pressed again only while the same menu still
//! shows the option highlighted.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::app::agents::{self, Agent};
use crate::app::delivery_records::{self, Due, Pending};
use crate::app::hooks;
use crate::app::local_panes::{Chosen, Highlighted, Typist};
use crate::domain::agent::AgentState;
use crate::domain::message::{next_step, Attempt, Confirmation, PaneNow, Step, MAX_ENTER_PRESSES};
use crate::feed::EventFeed;

/// What one delivery run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Delivered(Confirmation),
    /// The agent is no longer idle at that pane (it started a turn, asked something, or its pane
    /// went): delivery goes on when it is idle again.
    NotNow(String),
    /// The text stays in the input line whatever Enter does.
    Stuck(String),
}

#[derive(Clone)]
pub struct Delivery {
    pub db: PgPool,
    /// Types into the panes, with the configured settle and confirm times.
    pub typist: Typist,
    pub feed: EventFeed,
}

impl Delivery {
    /// One step: delivers the oldest message due to `agent_id` on `node_id`, if any is (the
    /// agent is idle there, with a pane, and mail waits for it). `None`: nothing was due.
    pub async fn tick(&self, node_id: &str, agent_id: Uuid) -> anyhow::Result<Option<Outcome>> {
        let due = {
            let mut conn = self.db.acquire().await?;
            delivery_records::due_on_node(&mut conn, node_id).await?
        };
        match due.into_iter().find(|due| due.agent_id == agent_id) {
            Some(due) => Ok(Some(self.deliver(&due).await?)),
            None => Ok(None),
        }
    }

    /// Delivers the due message, going on from wherever an earlier run stopped.
    #[tracing::instrument(skip_all, fields(agent = %due.agent, message = %due.message_id), err)]
    pub async fn deliver(&self, due: &Due) -> anyhow::Result<Outcome> {
        let pane = due.pane.as_str();
        // Each round presses Enter at most once; the record caps the presses per attempt.
        for _ in 0..=MAX_ENTER_PRESSES + 1 {
            let Some(message) = self.pending(due.message_id).await? else {
                return self.settled(due.message_id).await;
            };
            let mut agent = match self.agent_at(due, pane).await? {
                Ok(agent) => agent,
                Err(why) => return Ok(Outcome::NotNow(why)),
            };
            if let Some(option) = message.chosen_option.filter(|_| message.attempt_pane.as_deref() == Some(pane)) {
                return self.resume_choice(due, &message, option).await;
            }
            let input = match self.input(pane).await {
                Ok(input) => input,
                Err(e) => return Ok(Outcome::NotNow(format!("reading the pane: {e}"))),
            };
            let worked = match message.submitted_at {
                Some(at) => {
                    let mut conn = self.db.acquire().await?;
                    delivery_records::worked_since(&mut conn, &due.agent, at).await?
                }
                None => false,
            };
            let attempt = Attempt {
                pane: message.attempt_pane.as_deref(),
                input_before: message.input_before.as_deref(),
                input_after: message.input_after.as_deref(),
                submitted: message.submitted_at.is_some(),
                enter_presses: message.enter_presses,
            };
            let mut step = next_step(&attempt, &PaneNow { pane, input: &input, worked_since_enter: worked });
            let mut input_before = message.input_before.clone();
            let mut input_after = message.input_after.clone();
            if step == Step::PressEnter && !attempt.submitted && input_after.is_none() {
                // Resumed with the text waiting (the line differs from before): that line is it.
                input_after = Some(input.clone());
            }
            // An answer is typed into the question it answers; anything else waits for the prompt.
            let ready = |state: AgentState| state == AgentState::Idle || (due.answer && state == AgentState::Question);
            if step == Step::Paste {
                if !ready(agent.state) {
                    return Ok(Outcome::NotNow(format!("the agent is {}", agent.state)));
                }
                if due.answer {
                    if let Some(option) = self.offered(&message, pane).await {
                        return self.choose(due, option).await;
                    }
                }
                if let Err(why) = self.paste(&message, pane, &input).await? {
                    return Ok(Outcome::NotNow(why));
                }
                // Just pasted: the text is in the line, even if the TUI has not drawn it yet. Enter
                // waits until the line shows it (a TUI takes Enter as a submission once it has
                // taken the paste in); where no hook confirms, the line is the evidence (a TUI busy
                // under load draws late, and an Enter pressed before can be lost while the
                // unchanged line reads as "Enter took it"); a line that never showed it says
                // nothing by emptying. The line showing it is recorded with the Enter: a delivery
                // resumed later presses Enter again only into that line.
                let shown = self.typist.await_drawn(pane, &input, message.body.len(), hooks(&agent)).await;
                // The pane may have died, or the agent started something, while it was drawn.
                agent = match self.agent_at(due, pane).await? {
                    Ok(agent) => agent,
                    Err(why) => return Ok(Outcome::NotNow(why)),
                };
                input_before = (hooks(&agent) || shown.is_some()).then(|| input.clone());
                input_after = shown;
                step = Step::PressEnter;
            }
            match step {
                Step::Paste | Step::PressEnter => {
                    if agent.state.needs_person() && !ready(agent.state) {
                        return Ok(Outcome::NotNow(format!("the agent is {}", agent.state)));
                    }
                    let lines = (input_before.as_deref(), input_after.as_deref());
                    if let Some(outcome) = self.press_enter(due, hooks(&agent), lines).await? {
                        return Ok(outcome);
                    }
                }
                Step::Delivered(by) => {
                    self.mark_delivered(due.message_id, by).await?;
                    return Ok(Outcome::Delivered(by));
                }
                Step::GiveUp => {
                    let why = format!("the text stays in the input line after {MAX_ENTER_PRESSES} Enters");
                    let mut conn = self.db.acquire().await?;
                    delivery_records::failed(&mut conn, due.message_id, &why).await?;
                    return Ok(Outcome::Stuck(why));
                }
            }
        }
        Ok(Outcome::NotNow("not confirmed yet".into()))
    }

    async fn pending(&self, id: Uuid) -> anyhow::Result<Option<Pending>> {
        let mut conn = self.db.acquire().await?;
        Ok(delivery_records::pending(&mut conn, id).await?)
    }

    /// What became of a message that is no longer pending: delivered (by a hook, mostly), or gone
    /// with its agent.
    async fn settled(&self, id: Uuid) -> anyhow::Result<Outcome> {
        let mut conn = self.db.acquire().await?;
        Ok(match delivery_records::confirmed_by(&mut conn, id).await? {
            Some(by) => Outcome::Delivered(by),
            None => Outcome::NotNow("the message is gone with its agent".into()),
        })
    }

    /// The agent's state, while it is still live at `pane`; else why delivery stops here.
    async fn agent_at(&self, due: &Due, pane: &str) -> anyhow::Result<Result<Agent, String>> {
        let mut conn = self.db.acquire().await?;
        let Some(agent) = agents::get(&mut conn, due.agent_id).await? else {
            return Ok(Err("the agent is gone".into()));
        };
        if !agent.state.is_live() || agent.tmux_pane.as_deref() != Some(pane) {
            return Ok(Err(format!("the agent is {} in another pane", agent.state)));
        }
        Ok(Ok(agent))
    }

    /// What is typed in the pane's input line now.
    async fn input(&self, pane: &str) -> Result<String, crate::tmux::TmuxError> {
        self.typist.input_line(pane).await
    }

    /// Records the attempt (with the input line as it is), pastes, records the paste.
    async fn paste(&self, message: &Pending, pane: &str, input: &str) -> anyhow::Result<Result<(), String>> {
        {
            let mut conn = self.db.acquire().await?;
            if !delivery_records::attempt(&mut conn, message.id, pane, input).await? {
                return Ok(Err("delivered meanwhile".into()));
            }
        }
        // Who sent it comes first, so an agent never takes another agent's words for a person's.
        let text = crate::domain::message::typed(&message.sender, &message.body);
        if let Err(e) = self.typist.paste(pane, &text).await {
            let why = format!("pasting failed: {e}");
            let mut conn = self.db.acquire().await?;
            delivery_records::failed(&mut conn, message.id, &why).await?;
            return Ok(Err(why));
        }
        {
            let mut conn = self.db.acquire().await?;
            delivery_records::pasted(&mut conn, message.id, pane).await?;
        }
        Ok(Ok(()))
    }

    /// Records the Enter (with the line as it showed the text, the second of `lines`), presses it
    /// and waits for a confirmation (by the agent's hook where it has `hooks`); `None`: not
    /// confirmed in time (the next round reads the pane).
    async fn press_enter(
        &self,
        due: &Due,
        hooks: bool,
        (input_before, input_after): (Option<&str>, Option<&str>),
    ) -> anyhow::Result<Option<Outcome>> {
        let pane = due.pane.as_str();
        let entered =
            delivery_records::enter(&mut *self.db.acquire().await?, due.message_id, pane, input_after).await?;
        // Settled on a connection of its own, once the one above went back.
        let Some(submitted_at) = entered else { return Ok(Some(self.settled(due.message_id).await?)) };
        if let Err(e) = self.typist.press_enter(pane).await {
            let why = format!("pressing Enter failed: {e}");
            let mut conn = self.db.acquire().await?;
            delivery_records::failed(&mut conn, due.message_id, &why).await?;
            return Ok(None);
        }
        let confirmed = || self.confirmed(due, submitted_at, hooks, input_before);
        self.typist.await_turn(&self.feed, confirmed).await
    }

    /// Whether the message went, once Enter was pressed: a hook confirmed it (it is no longer
    /// pending), or — for agents without hooks, where nothing is pushed — the pane says so (the
    /// agent started a turn, or the text left the input line).
    async fn confirmed(
        &self,
        due: &Due,
        submitted_at: DateTime<Utc>,
        hooks: bool,
        input_before: Option<&str>,
    ) -> anyhow::Result<Option<Outcome>> {
        if self.pending(due.message_id).await?.is_none() {
            return Ok(Some(self.settled(due.message_id).await?));
        }
        if hooks {
            return Ok(None);
        }
        let worked = {
            let mut conn = self.db.acquire().await?;
            delivery_records::worked_since(&mut conn, &due.agent, submitted_at).await?
        };
        let emptied = match (input_before, self.input(&due.pane).await) {
            (Some(before), Ok(now)) => before == now,
            _ => false,
        };
        let by = if worked {
            Confirmation::State
        } else if emptied {
            Confirmation::Screen
        } else {
            return Ok(None);
        };
        self.mark_delivered(due.message_id, by).await?;
        Ok(Some(Outcome::Delivered(by)))
    }

    /// The option `message` answers the menu on `pane`'s screen with: its body is the number of
    /// one the menu offers. `None`: it is text (or the screen cannot be read; it is pasted then,
    /// as before menus were answered by keys, and the paste's own checks apply).
    async fn offered(&self, message: &Pending, pane: &str) -> Option<u32> {
        let option = message.body.trim().parse::<u32>().ok().filter(|n| *n > 0)?;
        self.typist.offers(pane, &option.to_string()).await.ok()?.then_some(option)
    }

    /// Answers the menu with `option`: highlights it (checked on the screen), records the Enter,
    /// presses it, and confirms by the menu closing.
    async fn choose(&self, due: &Due, option: u32) -> anyhow::Result<Outcome> {
        let pane = due.pane.as_str();
        let highlighted = match self.typist.highlight(pane, option).await {
            Ok(Ok(highlighted)) => highlighted,
            Ok(Err(why)) => return Ok(Outcome::NotNow(why)),
            Err(e) => return Ok(Outcome::NotNow(format!("reading the pane: {e}"))),
        };
        // The pane may have died, or the agent moved on, while the highlight moved.
        let hook_seen = match self.agent_at(due, pane).await? {
            Ok(agent) => agent.last_hook_at,
            Err(why) => return Ok(Outcome::NotNow(why)),
        };
        let labels = &highlighted.labels;
        let chosen =
            delivery_records::choice(&mut *self.db.acquire().await?, due.message_id, pane, option, labels).await?;
        if chosen.is_none() {
            return self.settled(due.message_id).await;
        }
        self.enter_choice(due, highlighted, 1, hook_seen).await
    }

    /// A choice whose Enter was recorded before an earlier run stopped: delivered if the menu is
    /// gone (or changed); Enter again only while the same menu shows the option highlighted.
    async fn resume_choice(&self, due: &Due, message: &Pending, option: i32) -> anyhow::Result<Outcome> {
        let labels: Vec<String> =
            message.input_after.as_deref().unwrap_or_default().lines().map(str::to_owned).collect();
        let wanted = usize::try_from(option - 1).unwrap_or_default();
        let label = labels.get(wanted).cloned().unwrap_or_default();
        let chosen = Chosen { option: u32::try_from(option).unwrap_or_default(), label };
        let highlighted = Highlighted { labels, wanted, keys: Vec::new(), chosen };
        match self.typist.stays(&due.pane, &highlighted).await {
            Ok(true) => {}
            Ok(false) => {
                self.mark_delivered(due.message_id, Confirmation::Screen).await?;
                return Ok(Outcome::Delivered(Confirmation::Screen));
            }
            Err(e) => return Ok(Outcome::NotNow(format!("reading the pane: {e}"))),
        }
        // Its hook, read before an earlier run's Enter, is not known: the screen decides alone.
        self.enter_again(due, highlighted, message.enter_presses, None).await
    }

    /// Presses Enter on the highlighted option (recorded already, `presses` so far), again while
    /// the menu stays as it was, at most [`MAX_ENTER_PRESSES`] in all.
    /// `hook_seen`: the agent's last hook, read before the Enter ([`hooks::answered`]).
    async fn enter_choice(
        &self,
        due: &Due,
        mut highlighted: Highlighted,
        presses: i32,
        hook_seen: Option<DateTime<Utc>>,
    ) -> anyhow::Result<Outcome> {
        match self.typist.enter_choice(&due.pane, &mut highlighted).await {
            Ok(true) => {
                let mut tx = self.db.begin().await?;
                delivery_records::delivered(&mut tx, due.message_id, Confirmation::Screen).await?;
                hooks::answered(&mut tx, due.agent_id, hook_seen).await?;
                self.feed.commit(tx).await?;
                self.feed.hook_recorded();
                Ok(Outcome::Delivered(Confirmation::Screen))
            }
            Ok(false) => Box::pin(self.enter_again(due, highlighted, presses, hook_seen)).await,
            Err(e) => {
                let why = format!("pressing Enter failed: {e}");
                let mut conn = self.db.acquire().await?;
                delivery_records::failed(&mut conn, due.message_id, &why).await?;
                Ok(Outcome::NotNow(why))
            }
        }
    }

    /// The menu stayed as it was after `presses` Enters: records another and presses it, unless
    /// there were enough.
    async fn enter_again(
        &self,
        due: &Due,
        highlighted: Highlighted,
        presses: i32,
        hook_seen: Option<DateTime<Utc>>,
    ) -> anyhow::Result<Outcome> {
        let mut conn = self.db.acquire().await?;
        if presses >= MAX_ENTER_PRESSES {
            let why =
                format!("option {} stays highlighted on the menu after {presses} Enters", highlighted.chosen.option);
            delivery_records::failed(&mut conn, due.message_id, &why).await?;
            return Ok(Outcome::Stuck(why));
        }
        if !delivery_records::choice_enter(&mut conn, due.message_id, &due.pane).await? {
            drop(conn);
            return self.settled(due.message_id).await;
        }
        drop(conn);
        Box::pin(self.enter_choice(due, highlighted, presses + 1, hook_seen)).await
    }

    async fn mark_delivered(&self, id: Uuid, by: Confirmation) -> anyhow::Result<()> {
        let mut tx = self.db.begin().await?;
        delivery_records::delivered(&mut tx, id, by).await?;
        self.feed.commit(tx).await?;
        Ok(())
    }
}

/// Whether the agent's hooks confirm what it is sent: it has sent one.
fn hooks(agent: &Agent) -> bool {
    agent.last_hook_at.is_some()
}
