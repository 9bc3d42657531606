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
//! Processing, with every step recorded in PostgreSQL before git acts on it: the merge (`--no-ff`,
//! two parents, the message naming the wish) is made where the gate runs, in a scratch clone
//! whose new objects go to the project's repository ([`git::merge_in_scratch`]), or in memory in
//! the project's repository when there is no gate ([`branches::merge_as`]); the gate runs
//! ([`gate`]); the merge commit is recorded; only then does the target branch move, by
//! compare-and-swap from the commit the merge was made on. A target branch checked out in a
//! working tree moves with it, as `git merge --ff-only` would ([`checked_out::advance`]), when the
//! tree is clean; while it is not, the entry waits (`waiting`: "uncommitted changes in <path>")
//! and goes on by itself once the tree is clean or on another branch. A person's staged, unstaged
//! or untracked work is never touched.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::{gate, predict};
use crate::app::merge_queue::{self as use_cases, OpenQueue};
use crate::app::repository::{self, Published};
use crate::app::Ctx;
use crate::db::merge_queue::settings::MergeSettings;
use crate::db::merge_queue::Entry;
use crate::db::stalled_steps;
use crate::domain::merge_queue::{EntryState, Setback};
use crate::git::branches::{self, Merge};
use crate::git::checked_out::{self, Advance};
use crate::git::merge::{self as git, ScratchMerge};

/// How long a claim lasts without renewal; renewed every [`RENEW`] while the gate runs.
const LEASE: Duration = Duration::from_secs(60);
const RENEW: Duration = Duration::from_secs(10);

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
}

/// What the pass saw of the claimed entry's branches.
struct Seen {
    /// The wish branch's commit is already in the target branch (see [`MergeQueue::premerge`]).
    already_merged: bool,
    /// Every branch, as the pass listed them.
    listing: Listing,
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
    /// Scratch clones being tidied after a gate passed there, left at its merge; each says
    /// whether it was.
    tidying: Mutex<HashMap<PathBuf, tokio::task::JoinHandle<bool>>>,
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
/// it, so a branch pushed meanwhile is seen that much later at most. Merges following each other
/// at once (a quick gate) list once every few merges instead of twice per merge; after a gate of
/// any length, or a rest, the pass lists again.
const LISTING_LASTS: Duration = Duration::from_millis(250);

impl MergeQueue {
    pub fn new(ctx: Ctx) -> MergeQueue {
        MergeQueue {
            ctx,
            run: Utc::now(),
            cache: predict::Cache::default(),
            moved: Mutex::default(),
            tidying: Mutex::default(),
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
                continue; // another process has this queue's one entry
            }
            let subject = stalled_steps::merge_queue(queue.project.id, &queue.target_branch);
            let stalled = stalled.iter().find(|s| s.subject == subject);
            if stalled.is_some_and(|s| s.retry_at > Utc::now()) {
                continue; // git refused its last step: it waits before the next try
            }
            if let Some(done) = self.next_in(&queue, stalled.is_some(), &mut tick).await? {
                tick.processed.push(done);
            }
        }
        Ok(tick)
    }

    /// Predicts the queue's pending entries, then processes the first one free to go. One `git
    /// for-each-ref` (or the listing of the move just made) tells the pass every branch's commit
    /// and which ones are checked out; the entry is claimed with the commits it will merge while
    /// the merge is made ([`Self::premerge`]): neither needs the other's result, and a claim
    /// lost to another node costs only an unreferenced commit.
    async fn next_in(
        &self,
        queue: &OpenQueue,
        stalled: bool,
        tick: &mut Tick,
    ) -> crate::app::Result<Option<(String, EntryState)>> {
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
        let mut next = None;
        let mut ahead: Vec<predict::Ahead> = Vec::new();
        let mut changed = Vec::new();
        for ((entry, wish_held), (against, head)) in live.iter().copied().zip(planned) {
            let p = predict::entry(&self.cache, &repo, against, head, &ahead).await;
            let head = head.map(str::to_owned);
            tick.trial_merges += p.trial_merges;
            // The answers prefetched this pass were asked of git, not remembered.
            tick.cached += p.cached;
            tick.disjoint += p.disjoint;
            if next.is_none() && !entry.held && !wish_held && p.held_for.is_none() {
                next = Some(entry);
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
        let Some(entry) = next else { return Ok(None) };
        // A target checked out in a working tree that is not clean: nothing to gain from merging
        // now (the tree could not follow), so the entry waits, visibly, until it is.
        if let Some(at) = heads.get(&queue.target_branch).and_then(|h| h.checked_out_at.as_deref()) {
            if checked_out::dirty(at).await? {
                use_cases::set_waiting(&self.ctx, entry, Some(&uncommitted(at))).await?;
                return Ok(None);
            }
        }
        // What an earlier pass said another entry waited for is over (the claim clears this one's).
        for (stale, _) in live.iter().filter(|(e, _)| e.waiting.is_some() && e.id != entry.id) {
            use_cases::set_waiting(&self.ctx, stale, None).await?;
        }
        let wish = heads.get(&entry.wish_branch);
        let commits = (target.as_deref(), wish.map(|h| h.commit.as_str()));
        let scratch = queue.settings.merge_check.as_ref().map(|_| self.scratch(&queue.project.slug, entry));
        let (claimed, premerge) = tokio::join!(
            use_cases::claim(&self.ctx, entry, self.run, LEASE, commits),
            self.premerge(&repo, scratch.as_deref(), entry, commits),
        );
        let Some(claimed) = claimed? else { return Ok(None) };
        let processed = async {
            let (in_target, merge) = premerge?;
            let seen = Seen { already_merged: in_target, listing };
            self.process(&repo, &queue.settings, &claimed, seen, merge, scratch).await
        };
        match processed.await {
            Ok(state) => {
                if stalled {
                    use_cases::unstalled(&self.ctx, &claimed).await?;
                }
                Ok(Some((claimed.wish.clone(), state)))
            }
            // Git refused a step: said on the entry, back to pending (a merge that went through
            // before the refusal is found in the target by the next try, never made twice).
            Err(crate::app::Error::Internal(e)) => {
                use_cases::stalled(&self.ctx, &claimed, &format!("{e:#}")).await?;
                Ok(Some((claimed.wish.clone(), EntryState::Pending)))
            }
            Err(e) => Err(e),
        }
    }

    /// Whether the wish's commit is in the target's already, and their merge: with a gate, made
    /// in the scratch clone where the gate runs (`git merge` tells both at once); without one, in
    /// memory, while git is asked about the first (made even if the wish turns out merged
    /// already: asking first would wait for git twice).
    async fn premerge(
        &self,
        repo: &Path,
        scratch: Option<&Path>,
        entry: &Entry,
        commits: (Option<&str>, Option<&str>),
    ) -> crate::app::Result<(bool, Option<Merge>)> {
        let (Some(base), Some(wish)) = commits else { return Ok((false, None)) };
        let Some(dir) = scratch else {
            let (in_target, merge) =
                tokio::join!(branches::is_ancestor(repo, wish, base), self::merge(repo, entry, base, wish));
            return Ok((in_target?, Some(merge?)));
        };
        let tidying = self.tidying.lock().expect("tidying lock").remove(dir);
        let ready = match tidying {
            Some(tidying) => tidying.await.unwrap_or(false),
            None => false,
        };
        match git::merge_in_scratch(repo, dir, (base, wish), &message(entry), git::MERGE_QUEUE, ready).await? {
            ScratchMerge::Merged(commit) => Ok((false, Some(Merge::Clean(commit)))),
            ScratchMerge::AlreadyIn => Ok((true, None)),
            // The files, named as the merge made in memory names them. (Were that one clean, the
            // gate would run on a clone left at the base: refused.)
            ScratchMerge::Conflicts => match self::merge(repo, entry, base, wish).await? {
                Merge::Conflicts(files) => Ok((false, Some(Merge::Conflicts(files)))),
                Merge::Clean(_) => Err(crate::app::Error::Internal(anyhow::anyhow!(
                    "`git merge` conflicted where `git merge-tree` did not"
                ))),
            },
        }
    }

    /// The project's repository on this node: its `repo_path`, or this node's mirror of its
    /// remote, fetched now.
    async fn repository(&self, project_id: uuid::Uuid) -> crate::app::Result<PathBuf> {
        let mut conn = self.ctx.db.acquire().await?;
        Ok(repository::open(&mut conn, &self.ctx.data_dir, project_id).await?.path)
    }

    /// Where the gate of `entry`'s queue runs: one scratch clone per project and target branch.
    fn scratch(&self, project: &str, entry: &Entry) -> PathBuf {
        let target = entry.target_branch.replace('/', "+");
        self.ctx.data_dir.join("merge-queue").join(project).join(target)
    }

    /// One attempt at merging a claimed entry (its base and wish commits recorded by the claim,
    /// `merge` made of them by [`Self::premerge`] (with a gate, checked out in `scratch`) unless
    /// the wish was merged already); its state when it ended.
    async fn process(
        &self,
        repo: &Path,
        settings: &MergeSettings,
        entry: &Entry,
        seen: Seen,
        merge: Option<Merge>,
        scratch: Option<PathBuf>,
    ) -> crate::app::Result<EntryState> {
        let target = &entry.target_branch;
        let refused = |why: String| (Setback::Refused, why, Vec::new(), None);
        let (Some(base), Some(wish)) = (entry.base_commit.clone(), entry.wish_commit.clone()) else {
            let why = format!("`{target}` or `{}` is not a branch of the project's repository", entry.wish_branch);
            return self.setback(entry, refused(why)).await;
        };
        if seen.already_merged {
            // Already in the target (merged by someone else, or by us before a crash): nothing to merge.
            return Ok(use_cases::merged(&self.ctx, entry).await?.state);
        }
        // With a gate, the merge was made checked out in the scratch clone.
        let merged_in_scratch = scratch.is_some() && merge.is_some();
        let merge = match merge {
            Some(made) => made,
            None => self::merge(repo, entry, &base, &wish).await?,
        };
        let merge = match merge {
            Merge::Conflicts(files) => {
                let why = format!("merging `{}` into `{target}` conflicts in {}", entry.wish_branch, files.join(", "));
                return self.setback(entry, (Setback::Conflict, why, files, None)).await;
            }
            Merge::Clean(merge) => merge,
        };
        let mut log = None;
        if let (Some(check), Some(scratch)) = (&settings.merge_check, &scratch) {
            if !merged_in_scratch {
                git::checkout_scratch(scratch, &merge).await?;
            }
            let timeout = Duration::from_secs(settings.gate_timeout_secs as u64);
            let ctx = &self.ctx;
            let confined = self.confinement(repo);
            let run = gate::run(scratch, confined.as_ref(), check, (timeout, RENEW), || async move {
                if let Err(e) = use_cases::renew_lease(ctx, entry, LEASE).await {
                    tracing::warn!(error = %e, "renewing the merge claim");
                }
            })
            .await;
            if !run.passed {
                let why = format!("the gate `{check}` failed ({})", run.outcome);
                return self.setback(entry, (Setback::GateFailed, why, Vec::new(), Some(run.log))).await;
            }
            log = Some(run.log);
        }
        // The scratch clone is tidied while the target moves and the next pass reads the queue: it
        // stays at this merge, which is the next entry's base if the move succeeds.
        if let Some(dir) = scratch.filter(|_| log.is_some()) {
            let tidying = tokio::spawn({
                let dir = dir.clone();
                async move {
                    let tidied = git::tidy_scratch(&dir).await;
                    if let Err(e) = &tidied {
                        tracing::debug!(error = %e, "tidying the scratch clone");
                    }
                    tidied.is_ok()
                }
            });
            self.tidying.lock().expect("tidying lock").insert(dir, tidying);
        }
        // The listing the move needs is read while the commits are recorded: both come after the gate.
        let (recorded, now) = tokio::join!(
            use_cases::record_commits(&self.ctx, entry, &base, &wish, Some(&merge), log.as_deref()),
            moving(repo, Some(seen.listing)),
        );
        let Some(entry) = recorded? else {
            return Ok(EntryState::Processing); // the claim is void: whoever settles it decides
        };
        self.apply(repo, &entry, &merge, &base, settings.keep_branches, now?).await
    }

    /// Moves the target branch from `base` to the recorded merge commit; completes the entry and
    /// deletes its merged branches (unless the project keeps them). `now` is [`moving`]'s listing:
    /// whether the target is checked out now and which branches to delete.
    async fn apply(
        &self,
        repo: &Path,
        entry: &Entry,
        merge: &str,
        base: &str,
        keep_branches: bool,
        now: Listing,
    ) -> crate::app::Result<EntryState> {
        let target = &entry.target_branch;
        let reason = format!("switchyard merge queue: wish {}", entry.wish);
        let doomed = if keep_branches { Vec::new() } else { merged_branches(entry, &now.heads) };
        // A remote the target is pushed to goes first, with a lease: moved meanwhile, the entry
        // is rebuilt on its new head.
        let mut conn = self.ctx.db.acquire().await?;
        let published = repository::publish_target(&mut conn, entry.project_id, repo, (target, merge, base), &doomed);
        if published.await? == Published::Moved {
            drop(conn);
            use_cases::recover(&self.ctx, entry).await?;
            return Ok(EntryState::Pending);
        }
        drop(conn);
        if let Some(at) = now.heads.get(target).and_then(|h| h.checked_out_at.as_deref()) {
            // The branch and the working tree move together, or neither does.
            return match checked_out::advance(repo, at, target, merge, base, &reason).await? {
                Advance::Moved => {
                    let done = use_cases::merged(&self.ctx, entry).await?;
                    git::delete_branches(repo, &doomed).await;
                    Ok(done.state)
                }
                Advance::BranchMoved => {
                    use_cases::recover(&self.ctx, entry).await?;
                    Ok(EntryState::Pending)
                }
                Advance::Dirty => {
                    use_cases::wait(&self.ctx, entry, &uncommitted(at)).await?;
                    Ok(EntryState::Pending)
                }
            };
        }
        // The usual case in one git run: the target moves and the merged branches go together.
        if git::move_and_delete(repo, target, merge, base, &reason, &doomed).await? {
            let mut now = now;
            doomed.iter().for_each(|(branch, _)| _ = now.heads.remove(branch));
            if let Some(head) = now.heads.get_mut(target) {
                head.commit = merge.to_owned();
            }
            *self.moved.lock().expect("listing lock") = Some(now);
            return Ok(use_cases::merged(&self.ctx, entry).await?.state);
        }
        // Refused: the target moved, or (with branches to delete) one of them did; which, the
        // move alone tells.
        if doomed.is_empty() || !git::move_branch(repo, target, merge, base, &reason).await? {
            // Someone moved the target meanwhile: try again from its new commit.
            use_cases::recover(&self.ctx, entry).await?;
            return Ok(EntryState::Pending);
        }
        let done = use_cases::merged(&self.ctx, entry).await?;
        // One of them moved meanwhile: those still where they merged go.
        git::delete_branches(repo, &doomed).await;
        Ok(done.state)
    }

    async fn setback(
        &self,
        entry: &Entry,
        (setback, why, files, log): (Setback, String, Vec<String>, Option<String>),
    ) -> crate::app::Result<EntryState> {
        Ok(use_cases::setback(&self.ctx, entry, setback, &why, &files, log.as_deref()).await?.state)
    }

    /// A claim whose process is gone: completed if the target branch has its merge (or the CAS it
    /// was about to make still applies: the gate passed on that very base), else pending again.
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
                return self.apply(&repo, entry, merge, base, keep, now).await;
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

/// Why an entry waits for the working tree at `at`.
fn uncommitted(at: &Path) -> String {
    format!("uncommitted changes in {}", at.display())
}
