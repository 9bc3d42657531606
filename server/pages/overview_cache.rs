//! What the overview read last, part by part, kept for as long as the event log says it holds.
//!
//! Under load every round trip to PostgreSQL waits its turn for a core, and the overview is a
//! dozen reads, most of which (wishes, the merge queue, hand-offs, tasks and cards waiting for a
//! person) change far less often than agents do. Each request asks the log one question first,
//! in the statement that reads its head anyway ([`changes_since`]): which types of events did
//! transactions record since the oldest part kept was read? A part read when every transaction
//! before `h` had ended reflects all their changes; it still holds if no transaction from `h` on
//! recorded an event it depends on: of a type it names, or of a kind it names (a type's first
//! word: `agent`, `task`, `wish`, …). An event whose type and kind no part names (and that is not
//! known to change nothing kept) touches every part. So a page reflects everything committed
//! before it was asked for, whether its parts were read now or kept.
//!
//! [`changes_since`]: crate::db::events::changes_since
//!
//! Kept parts also age out after [`MAX_AGE`], for what changes without an event (tokens an
//! agent's transcript adds, a usage limit running out, the order of recent activity): no later
//! than the live stream, which refreshes a part only on events, would show it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::db::events::Changes;

/// The longest a part is kept, whatever the events say.
const MAX_AGE: Duration = Duration::from_secs(5);

/// Kinds of events that change nothing a part keeps.
const CHANGE_NOTHING_KEPT: [&str; 5] = ["message", "chat", "webhook", "token", "dashboard"];

/// What each of the overview's parts depends on: kinds of events, or single types.
const AGENTS: &[&str] = &["agent", "team", "project", "node"];
/// Token use changes when a transcript is counted, the agents it is summed over when one is
/// spawned or deleted (not with every change of state, which is most of what happens).
const COSTS: &[&str] = &["project", "agent.spawned", "agent.deleted", "agent.usage_counted"];
const WORK: &[&str] = &["wish", "task", "group", "merge", "project"];
const HUMAN_TASKS: &[&str] = &["task", "board", "wish", "group", "project"];
const CARDS: &[&str] = &["task", "board", "board_template", "project"];
/// Idle agents with their work unreported: agents' states, their work's, and mail delivered.
const UNREPORTED: &[&str] = &["agent", "task", "group", "wish", "message"];
const NAMED: [&[&str]; 6] = [AGENTS, COSTS, WORK, HUMAN_TASKS, CARDS, UNREPORTED];

pub struct OverviewCache {
    /// Agents by state, the most pressing, the failed and the providers at a limit.
    pub agents: Slot<crate::db::agents::AtAGlance>,
    /// Tokens and their cost, in all and per project.
    pub costs: Slot<(crate::app::usage::UsageReport, Vec<(String, String)>)>,
    /// Tasks handed to a human.
    pub human_tasks: Slot<Vec<crate::db::tasks::Task>>,
    /// Cards in a person's column.
    pub cards: Slot<Vec<crate::db::boards::WaitingCard>>,
    /// Idle agents whose group or task is unreported.
    pub unreported: Slot<Vec<crate::db::handoffs::Unreported>>,
    /// Merge queue entries only a person can help.
    pub handed: Slot<Vec<crate::db::merge_queue::Entry>>,
    /// Planned wishes, then executing ones (for approvals and reviews).
    pub waiting_wishes: Slot<(Vec<crate::db::wishes::Wish>, Vec<crate::db::wishes::Wish>)>,
    /// Steps handed to a person; kept only while there are none (each shows its agent's screen).
    pub steps: Slot<Vec<crate::pages::handoffs::Handoff>>,
    /// Wishes in flight and pending merge, each with its groups' progress.
    pub in_flight: Slot<Progressing>,
    pub merge_queue: Slot<Progressing>,
}

/// Wishes and, by id, their `(groups done, groups)`.
pub type Progressing = (Vec<crate::db::wishes::Wish>, HashMap<uuid::Uuid, (i64, i64)>);

impl Default for OverviewCache {
    fn default() -> OverviewCache {
        OverviewCache {
            agents: Slot::new(AGENTS),
            costs: Slot::new(COSTS),
            human_tasks: Slot::new(HUMAN_TASKS),
            cards: Slot::new(CARDS),
            unreported: Slot::new(UNREPORTED),
            handed: Slot::new(WORK),
            waiting_wishes: Slot::new(WORK),
            steps: Slot::new(WORK).kept_only_if(Vec::is_empty),
            in_flight: Slot::new(WORK),
            merge_queue: Slot::new(WORK),
        }
    }
}

impl OverviewCache {
    /// The oldest horizon a kept part was read at: where [`changes_since`] must look from
    /// (`i64::MAX`, which matches nothing, when nothing is kept).
    ///
    /// [`changes_since`]: crate::db::events::changes_since
    pub fn oldest(&self) -> i64 {
        let slots = [
            self.agents.horizon(),
            self.costs.horizon(),
            self.human_tasks.horizon(),
            self.cards.horizon(),
            self.unreported.horizon(),
            self.handed.horizon(),
            self.waiting_wishes.horizon(),
            self.steps.horizon(),
            self.in_flight.horizon(),
            self.merge_queue.horizon(),
        ];
        slots.into_iter().flatten().min().unwrap_or(i64::MAX)
    }

    /// `slot`'s value: kept, if no event since it was read touched it, else read by `read` (and
    /// kept). `changes` is what the log said when this request began.
    pub async fn read<T: Clone, E, F: Future<Output = Result<T, E>>>(
        &self,
        changes: &Changes,
        slot: &Slot<T>,
        read: impl FnOnce() -> F,
    ) -> Result<T, E> {
        {
            let mut kept = lock(&slot.kept);
            if let Some(k) =
                kept.as_mut().filter(|k| k.at.elapsed() < MAX_AGE && !touched(changes, slot.depends_on, k.horizon))
            {
                // Nothing up to this request's horizon touched it: a later check starts there.
                k.horizon = k.horizon.max(changes.horizon);
                return Ok(k.value.clone());
            }
        }
        let value = read().await?;
        if (slot.keep_if)(&value) {
            let mut kept = lock(&slot.kept);
            // A part another request read after a later horizon stays.
            if kept.as_ref().is_none_or(|k| k.horizon <= changes.horizon) {
                *kept = Some(Kept { horizon: changes.horizon, at: Instant::now(), value: value.clone() });
            }
        }
        Ok(value)
    }
}

/// Whether a transaction from `horizon` on recorded an event that `depends_on` names (by type or
/// kind), or one that no part names.
fn touched(changes: &Changes, depends_on: &[&str], horizon: i64) -> bool {
    // Read before where the check looked from (a slot [`OverviewCache::oldest`] left out): it
    // cannot be vouched for.
    if horizon < changes.from_tx {
        return true;
    }
    let names = |names: &[&str], event_type: &str| {
        let kind = event_type.split('.').next().unwrap_or(event_type);
        names.iter().any(|n| *n == event_type || *n == kind)
    };
    changes.types.iter().any(|(event_type, &tx)| {
        tx >= horizon
            && (names(depends_on, event_type)
                || !(names(&CHANGE_NOTHING_KEPT, event_type) || NAMED.iter().any(|n| names(n, event_type))))
    })
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One part as last read.
pub struct Slot<T> {
    depends_on: &'static [&'static str],
    keep_if: fn(&T) -> bool,
    kept: Mutex<Option<Kept<T>>>,
}

struct Kept<T> {
    /// Every transaction before this one had ended when the value was read (or last found
    /// untouched): it reflects them all.
    horizon: i64,
    /// When it was read.
    at: Instant,
    value: T,
}

impl<T> Slot<T> {
    fn new(depends_on: &'static [&'static str]) -> Slot<T> {
        Slot { depends_on, keep_if: |_| true, kept: Mutex::new(None) }
    }

    fn kept_only_if(self, keep_if: fn(&T) -> bool) -> Slot<T> {
        Slot { keep_if, ..self }
    }

    fn horizon(&self) -> Option<i64> {
        lock(&self.kept).as_ref().filter(|k| k.at.elapsed() < MAX_AGE).map(|k| k.horizon)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(horizon: i64, types: &[(&str, i64)]) -> Changes {
        let types = types.iter().map(|(t, tx)| ((*t).to_owned(), *tx)).collect();
        Changes { horizon, types, from_tx: 0, ..Changes::default() }
    }

    async fn read(cache: &OverviewCache, changes: &Changes, value: u32) -> u32 {
        let slot = &cache.in_flight;
        let progressing = cache
            .read(changes, slot, || async {
                Ok::<_, ()>((Vec::new(), HashMap::from([(uuid::Uuid::nil(), (i64::from(value), 0))])))
            })
            .await
            .unwrap();
        progressing.1[&uuid::Uuid::nil()].0 as u32
    }

    #[tokio::test]
    async fn a_part_is_read_again_once_an_event_it_depends_on_was_recorded_after_it() {
        let cache = OverviewCache::default();
        assert_eq!(cache.oldest(), i64::MAX, "nothing kept: nothing to look for");
        assert_eq!(read(&cache, &changes(100, &[]), 1).await, 1);
        assert_eq!(cache.oldest(), 100);
        // Agents, messages and chat change nothing about wishes.
        let unrelated = changes(105, &[("agent.state_changed", 104), ("message.created", 103), ("chat.posted", 101)]);
        assert_eq!(read(&cache, &unrelated, 2).await, 1, "kept");
        assert_eq!(cache.oldest(), 105, "found untouched up to the later horizon");
        // A task event from before the part's horizon was reflected when it was read.
        assert_eq!(read(&cache, &changes(106, &[("task.completed", 104)]), 3).await, 1);
        assert_eq!(read(&cache, &changes(110, &[("task.completed", 107)]), 4).await, 4, "a group changed");
        // A kind nobody named may change anything.
        assert_eq!(read(&cache, &changes(120, &[("frobnicate.now", 115)]), 5).await, 5);
        // Nothing was looked for before the part's horizon: it cannot be vouched for.
        let unchecked = Changes { from_tx: 121, ..changes(130, &[]) };
        assert_eq!(read(&cache, &unchecked, 6).await, 6);
    }

    #[tokio::test]
    async fn costs_are_read_again_when_tokens_are_counted_not_when_an_agent_changes_state() {
        let cache = &OverviewCache::default();
        let read = |changes: Changes, n: usize| async move {
            let report = crate::app::usage::UsageReport {
                unreported: vec![crate::app::usage::Unreported { provider: "codex".into(), agents: n as i64 }],
                ..Default::default()
            };
            let (kept, _) =
                cache.read(&changes, &cache.costs, || async { Ok::<_, ()>((report, Vec::new())) }).await.unwrap();
            kept.unreported[0].agents
        };
        assert_eq!(read(changes(100, &[]), 1).await, 1);
        assert_eq!(read(changes(102, &[("agent.state_changed", 101), ("agent.stuck", 101)]), 2).await, 1);
        assert_eq!(read(changes(104, &[("agent.usage_counted", 103)]), 3).await, 3);
        assert_eq!(read(changes(106, &[("agent.spawned", 105)]), 4).await, 4);
    }

    #[tokio::test]
    async fn a_part_kept_only_while_empty_is_read_again_once_it_shows_something() {
        let cache = OverviewCache::default();
        let steps = |n: usize| {
            let step = crate::pages::handoffs::Handoff {
                slug: "w".into(),
                title: "t".into(),
                key: None,
                reason: "r".into(),
                since: "now".into(),
                agent: None,
                summary: None,
                screen: None,
            };
            vec![step; n]
        };
        let quiet = changes(100, &[]);
        let read = |n| cache.read(&quiet, &cache.steps, move || async move { Ok::<_, ()>(steps(n)) });
        assert_eq!(read(0).await.unwrap().len(), 0);
        assert_eq!(read(1).await.unwrap().len(), 0, "none were kept");
        let cache = OverviewCache::default();
        let read = |n| cache.read(&quiet, &cache.steps, move || async move { Ok::<_, ()>(steps(n)) });
        assert_eq!(read(2).await.unwrap().len(), 2);
        assert_eq!(read(1).await.unwrap().len(), 1, "steps show live screens: never kept");
    }
}
