//! The merge queue's passes, run by the worker's merge-queue loop, one per
//! `serve`/`worker` process; any number of nodes may run it. Each [`MergeQueue::tick`]:
//! 1. lets completed wishes of projects with the queue enabled enter it;
//! 2. settles claims left by a process that died: git says whether the target branch took the
//!    entry's merge commit (then it is completed) or not (then it waits again) — never twice;
//! 3. for each queue (project, target branch) with nothing processing: predicts every pending
//!    entry against the target branch and the entries ahead of it ([`predict`]; a trial merge
//!    per pair of commits that matters, cached, those not known yet asked of git in one `git
//!    merge-tree --stdin`), so an entry that would conflict with one ahead
//!    waits for it; then claims the first entry free to go and processes it. An entry is
//!    predicted against the target as it stood when its branch last changed, not again after
//!    every merge ahead of it: what those merges bring is predicted pair by pair, and the real
//!    merge tells the rest — so a pass over N entries costs no git work once they are known.
//!
//! Processing ([`train`]): the queue's entries free to go are split into lanes whose changed
//! paths are disjoint; in each lane, a window of entries is merged one after another (`--no-ff`,
//! one merge commit per wish, the message naming it) onto the target's commit — the projected
//! heads — and cut into batches of up to `batch_max`, each gated at once (up to
//! `gate_concurrency` gates, shared by the lanes) on the head of everything ahead of it, each in
//! a scratch clone of its own. A green batch lands everything up to its head (the entries ahead
//! with it); a red one cancels the batches built on it and is bisected: its parts are gated in
//! parallel, each on those before it, the green ones landing, until the one entry that fails
//! (the culprit) is found, which alone leaves the queue, to its fixer with the gate's log. Every
//! step is recorded in PostgreSQL before git acts on it: the claims with the commits they merge,
//! the merge commits once their gate passed; only then does the target branch move, by
//! compare-and-swap from the commit the merges were made on ([`MergeQueue::move_target`], the
//! one place it moves). A target branch checked out in a working tree moves with it, as `git
//! merge --ff-only` would ([`checked_out::advance`]), when the tree is clean; while it is not,
//! the entry waits (`waiting`: "uncommitted changes in <path>") and goes on by itself once the
//! tree is clean or on another branch. A person's staged, unstaged or untracked work is never
//! touched.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::{gate, predict};
use crate::app::merge_queue::{self as use_cases, OpenQueue};
use crate::app::repository::{self, Published};
use crate::app::Ctx;
use crate::db::merge_queue::Entry;
use crate::db::stalled_steps;
use crate::domain::merge_queue::batches;
use crate::domain::merge_queue::EntryState;
use crate::git::branches::{self, Merge};
use crate::git::checked_out::{self, Advance};
use crate::git::merge as git;

mod scratch;
mod train;

/// How long a claim lasts without renewal; renewed every [`RENEW`] while gates run.
const LEASE: Duration = Duration::from_secs(60);
const RENEW: Duration = Duration::from_secs(10);
/// How long a restarted process waits for a gate group its predecessor left to end.
const GROUP_PATIENCE: Duration = Duration::from_secs(10);

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tick {
    /// Wishes that entered a queue.
    pub entered: usize,
    /// Void claims settled: `(wish, state now)`.
    pub recovered: Vec<(String, EntryState)>,
    /// Trial merges run (cache misses) and answered from the cache.
    pub trial_merges: usize,
    pub cached: usize,
    /// Pairs known clean without a trial merge (no common changed path).
    pub disjoint: usize,
    /// Entries processed: `(wish, how it ended)`.
    pub processed: Vec<(String, EntryState)>,
    /// Gates that ran to their end, and those cancelled before (a speculation built on a red
    /// batch, or one a later green batch made moot).
    pub gates: usize,
    pub cancelled_gates: usize,
    /// Of `gates`, those run to find a culprit (bisection, and a flaky gate's second run).
    pub bisection_gates: usize,
    /// The most gates that ran at once.
    pub most_gates_at_once: usize,
    /// The lanes the pass's queues were split into.
    pub lanes: usize,
}

pub struct MergeQueue {
    ctx: Ctx,
    /// This process's run: claims it makes carry it, and a claim of this node with another run
    /// was made by a process that is gone.
    run: DateTime<Utc>,
    cache: predict::Cache,
    /// The branches of the repository whose target branch this process moved last, as listed
    /// just before the move and changed by it: the listing of a pass that follows at once.
    moved: Mutex<Option<Listing>>,
    /// How gates run: under bubblewrap with these settings, or (`None`: it is not installed) as
    /// the server's user.
    gate: Option<gate::GateSettings>,
}

/// Every branch of a repository, as git listed it at `at` (and as our own moves changed it since).
struct Listing {
    repo: PathBuf,
    at: Instant,
    heads: HashMap<String, git::BranchHead>,
}

/// How long a listing stands for a new one: git is asked again for the first pass or move after
/// it, so a branch pushed meanwhile is seen that much later at most.
const LISTING_LASTS: Duration = Duration::from_millis(250);

impl MergeQueue {
    pub fn new(ctx: Ctx) -> MergeQueue {
        MergeQueue {
            ctx,
            run: Utc::now(),
            cache: predict::Cache::default(),
            moved: Mutex::default(),
            gate: Self::bwrap_installed().then(gate::GateSettings::default),
        }
    }

    /// Gates run under bubblewrap with `settings` (where it is installed).
    pub fn with_gate(mut self, settings: gate::GateSettings) -> MergeQueue {
        self.gate = Self::bwrap_installed().then_some(settings);
        self
    }

    /// Whether bubblewrap is there to confine gates; where it is not, they run unconfined, and
    /// the queue says so: they run code from agents' branches as the server's user.
    fn bwrap_installed() -> bool {
        let installed = crate::programs::on_own_path("bwrap").is_absolute();
        if !installed {
            tracing::warn!("bubblewrap (bwrap) is not installed: merge gates run unconfined, as the server's user");
        }
        installed
    }

    /// The sandbox of a gate over `repo`'s scratch clone: the repository (whose objects the
    /// scratch clone borrows), the tools on the server's `PATH` and the configured paths shown.
    fn confinement(&self, repo: &Path) -> Option<gate::Confinement> {
        let settings = self.gate.as_ref()?;
        let mut read_only = vec![repo.to_path_buf()];
        read_only.extend(crate::providers::sandbox::Visible::tools(&std::env::var("PATH").unwrap_or_default()));
        read_only.extend(settings.read_only.iter().cloned());
        Some(gate::Confinement { network: settings.network, read_only })
    }

    /// One pass over every open queue (see the module's introduction).
    pub async fn tick(&self) -> crate::app::Result<Tick> {
        // The gates a dead predecessor of this process left running end first: nothing of theirs
        // may touch a scratch clone or a claim this pass settles.
        self.end_left_gates().await?;
        // Three reads at once, a round trip each instead of one after another: a queue of many
        // pays them every pass. The queues are read again only when a wish entered or a void
        // claim was settled meanwhile, which the first reading could not show.
        let (entered, void, queues, stalled) = tokio::try_join!(
            use_cases::enter_completed(&self.ctx),
            use_cases::void_claims(&self.ctx, self.run),
            use_cases::open_queues(&self.ctx),
            use_cases::stalled_queues(&self.ctx)
        )?;
        let mut tick = Tick { entered, ..Tick::default() };
        for entry in &void {
            let state = self.settle(entry).await?;
            tick.recovered.push((entry.wish.clone(), state));
        }
        let queues = match entered > 0 || !void.is_empty() {
            true => use_cases::open_queues(&self.ctx).await?,
            false => queues,
        };
        for queue in queues {
            if queue.entries.iter().any(|e| e.state == EntryState::Processing) {
                continue; // another process has this queue's entries
            }
            let subject = stalled_steps::merge_queue(queue.project.id, &queue.target_branch);
            let stalled = stalled.iter().find(|s| s.subject == subject);
            if stalled.is_some_and(|s| s.retry_at > Utc::now()) {
                continue; // git refused its last step: it waits before the next try
            }
            self.next_in(&queue, stalled.is_some(), &mut tick).await?;
        }
        Ok(tick)
    }

    /// Ends the process groups of gates that earlier runs of this node left (the process was
    /// killed while they ran), each before its scratch clone is used again.
    async fn end_left_gates(&self) -> crate::app::Result<()> {
        for left in use_cases::gates_left(&self.ctx, self.run).await? {
            if !gate::end_left(left.pgid, &left.leader, GROUP_PATIENCE).await {
                return Err(crate::app::Error::Internal(anyhow::anyhow!(
                    "the gate left running in {} (process group {}) does not end",
                    left.scratch,
                    left.pgid
                )));
            }
            tracing::info!(scratch = %left.scratch, pgid = left.pgid, "ended a gate a stopped process left running");
            use_cases::gate_forgotten(&self.ctx, &left).await?;
        }
        Ok(())
    }

    /// The project's repository on this node: its `repo_path`, or this node's mirror of its
    /// remote, fetched now.
    async fn repository(&self, project_id: uuid::Uuid) -> crate::app::Result<PathBuf> {
        Ok(repository::open(&self.ctx.db, &self.ctx.data_dir, project_id).await?.path)
    }

    /// Predicts the queue's pending entries, then processes those free to go, lane by lane
    /// ([`train`]). One `git for-each-ref` (or the listing of the move just made) tells the pass
    /// every branch's commit and which ones are checked out.
    async fn next_in(&self, queue: &OpenQueue, stalled: bool, tick: &mut Tick) -> crate::app::Result<()> {
        let repo = self.repository(queue.project.id).await?;
        let wishes: HashMap<_, _> = queue.wishes.iter().map(|w| (w.id, w)).collect();
        let mut live = Vec::new();
        for entry in &queue.entries {
            match wishes.get(&entry.wish_id) {
                Some(w) if w.status == crate::domain::wish::WishStatus::PendingMerge => live.push((entry, w.held)),
                _ => use_cases::drop_orphan(&self.ctx, entry).await?,
            }
        }
        // The listing our last move left, while it is recent and names every branch the pass
        // needs (a branch made since is git's to tell); else git is asked.
        let ours = self.moved.lock().expect("listing lock").take().filter(|l| {
            l.repo == repo
                && l.at.elapsed() < LISTING_LASTS
                && live.iter().all(|(entry, _)| l.heads.contains_key(&entry.wish_branch))
        });
        let listing = match ours {
            Some(listing) => listing,
            None => list(&repo).await?,
        };
        let heads = &listing.heads;
        let target = heads.get(&queue.target_branch).map(|h| h.commit.clone());
        // Each entry's branch commit and the target commit it is predicted against, asked of git
        // for all entries at once; the predictions below then find their answers in the cache.
        let planned: Vec<_> = live
            .iter()
            .map(|(entry, _)| {
                let head = heads.get(&entry.wish_branch).map(|h| h.commit.as_str());
                (predict::target_for(entry, head, target.as_deref()), head)
            })
            .collect();
        let asked = self.cache.prefetch(&repo, &planned).await;
        tick.trial_merges += asked;
        let mut ready = Vec::new();
        let mut ahead: Vec<predict::Ahead> = Vec::new();
        let mut changed = Vec::new();
        for ((entry, wish_held), (against, head)) in live.iter().copied().zip(planned) {
            let p = predict::entry(&self.cache, &repo, against, head, &ahead).await;
            let head = head.map(str::to_owned);
            tick.trial_merges += p.trial_merges;
            // The answers prefetched this pass were asked of git, not remembered.
            tick.cached += p.cached;
            tick.disjoint += p.disjoint;
            if !entry.held && !wish_held && p.held_for.is_none() {
                ready.push((entry, p.changed.clone()));
            }
            if entry.prediction.as_ref() != Some(&p.document) || entry.held_for != p.held_for {
                changed.push((entry, p.document, p.held_for));
            }
            ahead.push(predict::Ahead { entry, head, changed: p.changed });
        }
        tick.cached = tick.cached.saturating_sub(asked);
        // One transaction for the pass's predictions: the merge of one entry ahead changes those of
        // every entry behind it.
        use_cases::record_predictions(&self.ctx, &changed).await?;
        let Some((first, _)) = ready.first() else { return Ok(()) };
        // A target checked out in a working tree that is not clean: nothing to gain from merging
        // now (the tree could not follow), so the entry waits, visibly, until it is.
        if let Some(at) = heads.get(&queue.target_branch).and_then(|h| h.checked_out_at.as_deref()) {
            if checked_out::dirty(at).await? {
                use_cases::set_waiting(&self.ctx, first, Some(&uncommitted(at))).await?;
                return Ok(());
            }
        }
        // What an earlier pass said an entry waited for is over (a claim clears its own).
        for (stale, _) in live.iter().filter(|(e, _)| e.waiting.is_some() && !ready.iter().any(|(r, _)| r.id == e.id)) {
            use_cases::set_waiting(&self.ctx, stale, None).await?;
        }
        // Lanes only pay with gates to share; each lane gets its share of them to speculate with.
        let settings = &queue.settings;
        let (batch, concurrency) = (settings.batch_max.max(1) as usize, settings.gate_concurrency.max(1) as usize);
        let most = match settings.merge_check {
            Some(_) => concurrency.min(ready.len().div_ceil(batch)),
            None => 1,
        };
        let lanes = batches::lanes(ready.len(), most, |a, b| match (&ready[a].1, &ready[b].1) {
            (Some(a), Some(b)) => crate::git::conflicts::may_conflict(a, b),
            _ => true,
        });
        let depth = (concurrency / lanes.len().max(1)).max(1);
        let round = train::Round::new(&self.ctx.data_dir, queue, repo, concurrency, depth);
        let runs = lanes.iter().map(|lane| {
            let entries: Vec<Entry> = lane.iter().map(|&i| ready[i].0.clone()).collect();
            self.lane(&round, entries, heads)
        });
        let outcomes = futures_util::future::join_all(runs).await;
        tick.lanes += lanes.len();
        tick.most_gates_at_once = tick.most_gates_at_once.max(round.most_at_once());
        let mut recovered = None;
        for outcome in outcomes {
            let outcome = outcome?;
            tick.processed.extend(outcome.processed);
            tick.gates += outcome.gates;
            tick.cancelled_gates += outcome.cancelled;
            tick.bisection_gates += outcome.bisection;
            if !outcome.stalled {
                recovered = recovered.or(outcome.landed);
            }
        }
        if let Some(entry) = recovered.filter(|_| stalled) {
            use_cases::unstalled(&self.ctx, &entry).await?;
        }
        Ok(())
    }

    /// Moves the target branch from `base` to `head` (the last of the merge commits just
    /// recorded) by compare-and-swap — the one place the queue moves it — deleting the merged
    /// `doomed` branches with it (unless one moved meanwhile: then after it). A target checked
    /// out in a working tree moves with the tree, or not at all. `now` is [`moving`]'s listing.
    async fn move_target(
        &self,
        repo: &Path,
        (project_id, target): (uuid::Uuid, &str),
        (head, base): (&str, &str),
        reason: &str,
        doomed: &[(String, String)],
        now: Listing,
    ) -> crate::app::Result<Moved> {
        // A remote the target is pushed to goes first, with a lease: moved meanwhile, the local
        // target was brought to its new head where it could follow, and the entries are rebuilt.
        let published = {
            let mut conn = self.ctx.db.acquire().await?;
            repository::publish_target(&mut conn, project_id, repo, (target, head, base), doomed).await?
        };
        if published == Published::Moved {
            return Ok(Moved::Raced);
        }
        if let Some(at) = now.heads.get(target).and_then(|h| h.checked_out_at.clone()) {
            // The branch and the working tree move together, or neither does.
            return match checked_out::advance(repo, &at, target, head, base, reason).await? {
                Advance::Moved => {
                    git::delete_branches(repo, doomed).await;
                    Ok(Moved::Yes)
                }
                Advance::BranchMoved => Ok(Moved::Raced),
                Advance::Dirty => Ok(Moved::Dirty(at)),
            };
        }
        // The usual case in one git run: the target moves and the merged branches go together.
        if git::move_and_delete(repo, target, head, base, reason, doomed).await? {
            let mut now = now;
            doomed.iter().for_each(|(branch, _)| _ = now.heads.remove(branch));
            if let Some(moved) = now.heads.get_mut(target) {
                moved.commit = head.to_owned();
            }
            *self.moved.lock().expect("listing lock") = Some(now);
            return Ok(Moved::Yes);
        }
        // Refused: the target moved, or (with branches to delete) one of them did; which, the
        // move alone tells.
        if doomed.is_empty() || !git::move_branch(repo, target, head, base, reason).await? {
            return Ok(Moved::Raced);
        }
        // One of them moved meanwhile: those still where they merged go.
        git::delete_branches(repo, doomed).await;
        Ok(Moved::Yes)
    }

    /// A claim whose process is gone: completed if the target branch has its merge (or the CAS it
    /// was about to make still applies: its merge commit is recorded only once the gate passed on
    /// it, on that very base), else pending again. Claims are settled in queue order, so a
    /// batch's recorded merges land one after another.
    async fn settle(&self, entry: &Entry) -> crate::app::Result<EntryState> {
        let repo = self.repository(entry.project_id).await?;
        let head = branches::head(&repo, &entry.target_branch).await?;
        if let (Some(merge), Some(base), Some(head)) = (&entry.merge_commit, &entry.base_commit, &head) {
            if branches::is_ancestor(&repo, merge, head).await? {
                // Died between moving a checked-out target and its working tree: the tree follows.
                let at = git::checked_out(&repo).and_then(|mut out| out.remove(&entry.target_branch));
                if let Some(at) = at.filter(|_| head == merge) {
                    if !checked_out::catch_up(&at, base, merge).await? {
                        tracing::warn!(tree = %at.display(), "a working tree was left behind by its branch");
                    }
                }
                return Ok(use_cases::merged(&self.ctx, entry).await?.state);
            }
            if head == base {
                let keep = use_cases::settings_by_id(&self.ctx, entry.project_id).await?.keep_branches;
                let now = moving(&repo, None).await?;
                let doomed = if keep { Vec::new() } else { merged_branches(entry, &now.heads) };
                let reason = reason(&entry.wish);
                return match self
                    .move_target(&repo, (entry.project_id, &entry.target_branch), (merge, base), &reason, &doomed, now)
                    .await?
                {
                    Moved::Yes => Ok(use_cases::merged(&self.ctx, entry).await?.state),
                    Moved::Raced => {
                        use_cases::recover(&self.ctx, entry).await?;
                        Ok(EntryState::Pending)
                    }
                    Moved::Dirty(at) => {
                        use_cases::wait(&self.ctx, entry, &uncommitted(&at)).await?;
                        Ok(EntryState::Pending)
                    }
                };
            }
        }
        use_cases::recover(&self.ctx, entry).await?;
        Ok(EntryState::Pending)
    }
}

/// The `--no-ff` merge of `wish` into `base` for `entry`, made in memory by [`git::MERGE_QUEUE`]
/// with a message naming the wish.
async fn merge(repo: &Path, entry: &Entry, base: &str, wish: &str) -> crate::app::Result<Merge> {
    Ok(branches::merge_as(repo, base, wish, &message(entry), git::MERGE_QUEUE).await?)
}

/// The message of `entry`'s merge commit, naming the wish.
fn message(entry: &Entry) -> String {
    format!(
        "Merge wish `{}`: {}\n\nMerged by the Switchyard merge queue from branch `{}`.",
        entry.wish, entry.title, entry.wish_branch
    )
}

/// Every branch of `repo`, from one `git for-each-ref`.
async fn list(repo: &Path) -> crate::app::Result<Listing> {
    let at = Instant::now();
    Ok(Listing { repo: repo.to_owned(), at, heads: git::heads(repo, &[]).await? })
}

/// Every branch just before a merge moves the target: whether it is checked out, which merged
/// branches to delete and (changed by the move) the next pass's listing. The pass's `listing`
/// while it is recent, with where each branch is checked out read again from git's own files (a
/// person may have checked the target out during the gate); else listed again.
async fn moving(repo: &Path, listing: Option<Listing>) -> crate::app::Result<Listing> {
    let recent = listing.filter(|l| l.at.elapsed() < LISTING_LASTS);
    let (Some(mut listing), Some(checked_out)) = (recent, git::checked_out(repo)) else { return list(repo).await };
    for (branch, head) in &mut listing.heads {
        head.checked_out_at = checked_out.get(branch).cloned();
    }
    Ok(listing)
}

/// The merged wish branch (if still at the merged commit) and its group branches, except any a
/// working tree has checked out, each with the commit it must still be at to be deleted.
fn merged_branches(entry: &Entry, now: &HashMap<String, git::BranchHead>) -> Vec<(String, String)> {
    let group = format!("group/{}/", entry.wish);
    let mut doomed = Vec::new();
    for (branch, head) in now.iter().filter(|(_, head)| head.checked_out_at.is_none()) {
        if branch.starts_with(&group) {
            doomed.push((branch.clone(), head.commit.clone()));
        } else if *branch == entry.wish_branch {
            // Only at the commit that merged: a branch that moved since keeps its new work.
            doomed.extend(entry.wish_commit.clone().map(|at| (branch.clone(), at)));
        }
    }
    doomed
}

/// How a move of the target went.
enum Moved {
    Yes,
    /// The target (or the branch under the working tree) moved meanwhile: nothing changed.
    Raced,
    /// Checked out in this working tree, which is not clean.
    Dirty(PathBuf),
}

/// The reflog's words for a move that merged `wish` (the last of a batch).
fn reason(wish: &str) -> String {
    format!("switchyard merge queue: wish {wish}")
}

/// Why an entry waits for the working tree at `at`.
fn uncommitted(at: &Path) -> String {
    format!("uncommitted changes in {}", at.display())
}
