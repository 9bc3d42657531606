//! One lane of a queue's pass: windows of its entries merged one after another onto the target
//! (a chain of projected heads), batches of them gated at once, green ones landed, a red one
//! bisected until its culprit is found; see the pass's introduction. Entries claimed and not
//! landed in a window (behind a culprit, or beyond the batches gated) stay claimed for the next
//! window, merged again onto the target as it is then.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio_util::sync::CancellationToken;

use super::scratch::Slots;
use super::{gate, merge, merged_branches, moving, reason, uncommitted, MergeQueue, Moved, LEASE};
use crate::app::merge_queue::{self as use_cases, OpenQueue};
use crate::db::merge_queue::settings::MergeSettings;
use crate::db::merge_queue::Entry;
use crate::domain::merge_queue::batches::{batch_cuts, bisect_cuts};
use crate::domain::merge_queue::{EntryState, Setback};
use crate::git::branches::{self, Merge};
use crate::git::merge as git;

/// What a queue's lanes share in a pass: the repository, the settings, the gates' scratch
/// clones (one per gate that may run at once) and the target's moves (one at a time).
pub(super) struct Round<'a> {
    pub(super) repo: PathBuf,
    target: String,
    pub(super) settings: &'a MergeSettings,
    /// Batches each lane gates at once (its share of the gates).
    depth: usize,
    pub(super) slots: Slots,
    landing: tokio::sync::Mutex<()>,
}

impl<'a> Round<'a> {
    pub(super) fn new(data_dir: &Path, queue: &'a OpenQueue, repo: PathBuf, gates: usize, depth: usize) -> Round<'a> {
        let target = queue.target_branch.replace('/', "+");
        // The first where the queue's gate always ran; the others apart, where no project's is.
        let dirs = (0..gates).map(|k| match k {
            0 => data_dir.join("merge-queue").join(&queue.project.slug).join(&target),
            k => {
                data_dir.join("merge-queue").join(".gates").join(&queue.project.slug).join(&target).join(k.to_string())
            }
        });
        Round {
            repo,
            target: queue.target_branch.clone(),
            settings: &queue.settings,
            depth,
            slots: Slots::new(dirs.collect()),
            landing: tokio::sync::Mutex::new(()),
        }
    }

    pub(super) fn most_at_once(&self) -> usize {
        self.slots.most_at_once()
    }
}

/// What a lane did.
#[derive(Default)]
pub(super) struct Outcome {
    pub processed: Vec<(String, EntryState)>,
    pub gates: usize,
    pub cancelled: usize,
    pub bisection: usize,
    /// Git refused a step: the lane's entries went back to pending, saying so.
    pub stalled: bool,
    /// An entry that landed.
    pub landed: Option<Entry>,
}

/// Claimed entries merged one after another onto `base`: `merges[i]` is `cars[i]`'s merge commit,
/// made on `merges[i - 1]` (or `base`).
struct Chain {
    base: String,
    cars: Vec<Entry>,
    merges: Vec<String>,
}

impl Chain {
    /// The projected head after the first `cut` entries.
    fn at(&self, cut: usize) -> &str {
        if cut == 0 {
            &self.base
        } else {
            &self.merges[cut - 1]
        }
    }
}

/// Why a lane stops before its entries are done.
enum Halt {
    /// The target moved under it (someone pushed), or its working tree is not clean: the entries
    /// go back to pending (the first waiting for that tree).
    Moved(Option<PathBuf>),
    /// A claim is void: whoever settles it decides.
    Void,
}

impl MergeQueue {
    /// Processes a lane's `entries` (pending, in queue order, as the pass read them) with the
    /// branch commits of `heads`, window after window, until each landed, left or waits.
    pub(super) async fn lane(
        &self,
        round: &Round<'_>,
        entries: Vec<Entry>,
        heads: &HashMap<String, git::BranchHead>,
    ) -> crate::app::Result<Outcome> {
        let mut out = Outcome::default();
        let mut waiting: VecDeque<Entry> = entries.into();
        let mut carried: Vec<Entry> = Vec::new();
        let result = self.windows(round, &mut waiting, &mut carried, heads, &mut out).await;
        let halt = match result {
            Ok(None) => return Ok(out),
            Ok(Some(halt)) => halt,
            // Git refused a step: said on the first entry, every claimed one back to pending.
            Err(crate::app::Error::Internal(e)) => {
                if let Some((first, rest)) = carried.split_first() {
                    use_cases::stalled(&self.ctx, first, &format!("{e:#}")).await?;
                    use_cases::release_all(&self.ctx, rest).await?;
                    out.processed.extend(carried.iter().map(|e| (e.wish.clone(), EntryState::Pending)));
                    out.stalled = true;
                }
                return Ok(out);
            }
            Err(e) => {
                use_cases::release_all(&self.ctx, &carried).await?;
                return Err(e);
            }
        };
        match halt {
            Halt::Moved(tree) => {
                let rest = match (tree, carried.split_first()) {
                    (Some(at), Some((first, rest))) => {
                        use_cases::wait(&self.ctx, first, &uncommitted(&at)).await?;
                        rest
                    }
                    _ => &carried[..],
                };
                use_cases::release_all(&self.ctx, rest).await?;
                out.processed.extend(carried.iter().map(|e| (e.wish.clone(), EntryState::Pending)));
            }
            Halt::Void => out.processed.extend(carried.iter().map(|e| (e.wish.clone(), EntryState::Processing))),
        }
        Ok(out)
    }

    /// The lane's windows; `carried` holds the entries claimed and not settled yet.
    async fn windows(
        &self,
        round: &Round<'_>,
        waiting: &mut VecDeque<Entry>,
        carried: &mut Vec<Entry>,
        heads: &HashMap<String, git::BranchHead>,
        out: &mut Outcome,
    ) -> crate::app::Result<Option<Halt>> {
        let size = round.settings.batch_max.max(1) as usize * round.depth;
        let mut first_window = true;
        while !carried.is_empty() || !waiting.is_empty() {
            // The target as the pass listed it, then as git says after each window.
            let target = match first_window {
                true => heads.get(&round.target).map(|h| h.commit.clone()),
                false => branches::head(&round.repo, &round.target).await?,
            };
            first_window = false;
            let chain = self.chain(round, target, waiting, carried, heads, size, out).await?;
            let Some(chain) = chain else { continue };
            if let Some(halt) = self.gate_and_land(round, chain, carried, out).await? {
                return Ok(Some(halt));
            }
        }
        Ok(None)
    }

    /// The window's chain: the carried entries, then waiting ones, merged one after another onto
    /// `target` up to `size` of them, claimed before anything of them moves. It ends before an
    /// entry that conflicts with it, is missing or is in it already; such an entry at the front
    /// is settled here (conflict, refused, or merged already) and `None` returned.
    #[allow(clippy::too_many_arguments)]
    async fn chain(
        &self,
        round: &Round<'_>,
        target: Option<String>,
        waiting: &mut VecDeque<Entry>,
        carried: &mut Vec<Entry>,
        heads: &HashMap<String, git::BranchHead>,
        size: usize,
        out: &mut Outcome,
    ) -> crate::app::Result<Option<Chain>> {
        let repo = &round.repo;
        let mut cars: Vec<(Entry, bool, String)> = Vec::new(); // (entry, claimed, wish commit)
        let mut merges: Vec<String> = Vec::new();
        let Some(base) = target else {
            let entry = front(carried, waiting, heads);
            let why = format!("`{}` is not a branch of the project's repository", round.target);
            return self.settle_front(entry, "", Err((Setback::Refused, why, Vec::new())), out).await;
        };
        while cars.len() < size {
            let (entry, claimed) = match carried.get(cars.len()) {
                Some(e) => (e.clone(), true),
                None => match waiting.front() {
                    Some(e) if cars.len() >= carried.len() => (e.clone(), false),
                    _ => break,
                },
            };
            let wish = match claimed {
                true => entry.wish_commit.clone(),
                false => heads.get(&entry.wish_branch).map(|h| h.commit.clone()),
            };
            let prev = merges.last().cloned().unwrap_or_else(|| base.clone());
            let Some(wish) = wish else {
                if cars.is_empty() {
                    let entry = front(carried, waiting, heads);
                    let why = format!("`{}` is not a branch of the project's repository", entry.0.wish_branch);
                    return self.settle_front(entry, &base, Err((Setback::Refused, why, Vec::new())), out).await;
                }
                break;
            };
            let (inside, merged) =
                tokio::join!(branches::is_ancestor(repo, &wish, &prev), merge(repo, &entry, &prev, &wish));
            if inside? {
                if cars.is_empty() {
                    let entry = front(carried, waiting, heads);
                    return self.settle_front(entry, &base, Ok(()), out).await;
                }
                break;
            }
            match merged? {
                Merge::Clean(commit) => merges.push(commit),
                Merge::Conflicts(files) if cars.is_empty() => {
                    let entry = front(carried, waiting, heads);
                    let why = format!(
                        "merging `{}` into `{}` conflicts in {}",
                        entry.0.wish_branch,
                        round.target,
                        files.join(", ")
                    );
                    return self.settle_front(entry, &base, Err((Setback::Conflict, why, files)), out).await;
                }
                // Conflicting with an entry ahead in the window: it waits for the window to land.
                Merge::Conflicts(_) => break,
            }
            if !claimed {
                waiting.pop_front();
            }
            cars.push((entry, claimed, wish));
        }
        // Claimed before git moves anything: those not claimed yet, each with what it merges.
        let wanted: Vec<use_cases::ToClaim> = cars
            .iter()
            .enumerate()
            .filter(|(_, (_, claimed, _))| !claimed)
            .map(|(i, (entry, _, wish))| {
                let on = if i == 0 { base.as_str() } else { merges[i - 1].as_str() };
                (entry, (Some(on), Some(wish.as_str())))
            })
            .collect();
        let new = use_cases::claim_all(&self.ctx, &wanted, self.run, LEASE).await?;
        let mut new = new.into_iter();
        let mut chain = Chain { base, cars: Vec::new(), merges: Vec::new() };
        for ((entry, claimed, _), merge) in cars.into_iter().zip(merges) {
            let entry = match claimed {
                true => entry,
                false => match new.next() {
                    Some(claimed) => claimed,
                    // Another process got to it (or a person changed it): the lane ends with the
                    // window as claimed.
                    None => {
                        waiting.clear();
                        break;
                    }
                },
            };
            chain.cars.push(entry);
            chain.merges.push(merge);
        }
        *carried = chain.cars.clone();
        Ok((!chain.cars.is_empty()).then_some(chain))
    }

    /// Settles the front entry alone: merged already (`Ok`), or a setback; claimed first if it
    /// is not yet. Always `None`: no chain this time.
    async fn settle_front(
        &self,
        (entry, claimed, wish): (Entry, bool, Option<String>),
        base: &str,
        how: Result<(), (Setback, String, Vec<String>)>,
        out: &mut Outcome,
    ) -> crate::app::Result<Option<Chain>> {
        let entry = match claimed {
            true => entry,
            false => {
                let base = Some(base).filter(|b| !b.is_empty());
                let wanted = [(&entry, (base, wish.as_deref()))];
                match use_cases::claim_all(&self.ctx, &wanted, self.run, LEASE).await?.pop() {
                    Some(claimed) => claimed,
                    None => return Ok(None),
                }
            }
        };
        let state = match how {
            // Already in the target (merged by someone else, or by us before a crash).
            Ok(()) => use_cases::merged(&self.ctx, &entry).await?.state,
            Err((setback, why, files)) => {
                use_cases::setback(&self.ctx, &entry, setback, &why, &files, None).await?.state
            }
        };
        out.processed.push((entry.wish.clone(), state));
        Ok(None)
    }

    /// Gates the chain's batches at once and lands the green ones; a red one is bisected to its
    /// culprit, which leaves. What is neither landed nor the culprit stays in `carried`.
    async fn gate_and_land(
        &self,
        round: &Round<'_>,
        chain: Chain,
        carried: &mut Vec<Entry>,
        out: &mut Outcome,
    ) -> crate::app::Result<Option<Halt>> {
        let len = chain.cars.len();
        let Some(check) = round.settings.merge_check.clone() else {
            // No gate: the whole window lands at once.
            if let Some(halt) = self.land(round, &chain, (0, len), None, out).await? {
                return Ok(Some(halt));
            }
            carried.clear();
            return Ok(None);
        };
        let cuts = batch_cuts(len, round.settings.batch_max.max(1) as usize, round.depth);
        let end = cuts.last().copied().unwrap_or(0);
        let mut landed = 0;
        let mut red: Option<(usize, gate::GateRun)> = None;
        let (mut next, mut retried, mut bisecting) = (cuts, false, false);
        loop {
            let found = self.speculate(round, &chain, &mut landed, &next, bisecting, out).await?;
            *carried = chain.cars[landed..].to_vec();
            let found = match found {
                Ok(found) => found,
                Err(halt) => return Ok(Some(halt)),
            };
            if let Some((cut, run)) = found {
                if red.as_ref().is_none_or(|(r, _)| cut < *r) {
                    red = Some((cut, run));
                }
            }
            let Some((at, _)) = red.as_ref().filter(|(r, _)| *r > landed) else { break };
            let at = *at;
            if at - landed == 1 {
                break;
            }
            bisecting = true;
            if round.settings.retry_flaky && !retried {
                // Once more, as it was: a flaky gate gets its second chance before bisection.
                retried = true;
                red = None;
                next = vec![at];
                continue;
            }
            next = bisect_cuts(landed, at, round.depth);
        }
        match red.filter(|(r, _)| *r == landed + 1) {
            Some((_, run)) => {
                let culprit = &chain.cars[landed];
                let why = format!("the gate `{check}` failed ({})", run.outcome);
                let ended =
                    use_cases::setback(&self.ctx, culprit, Setback::GateFailed, &why, &[], Some(&run.log)).await?;
                out.processed.push((culprit.wish.clone(), ended.state));
                *carried = chain.cars[landed + 1..].to_vec();
            }
            None => *carried = chain.cars[landed.max(end).min(len)..].to_vec(),
        }
        Ok(None)
    }

    /// Gates the chain's prefixes `cuts` at once, on top of the `landed` ones. A green one lands
    /// everything up to it (cancelling the gates below it, now moot); a red one cancels those
    /// above it (built on it). The shortest red prefix with its run, if any; or why the lane
    /// halts.
    async fn speculate(
        &self,
        round: &Round<'_>,
        chain: &Chain,
        landed: &mut usize,
        cuts: &[usize],
        bisecting: bool,
        out: &mut Outcome,
    ) -> crate::app::Result<Result<Option<(usize, gate::GateRun)>, Halt>> {
        let tokens: Vec<(usize, CancellationToken)> = cuts.iter().map(|&c| (c, CancellationToken::new())).collect();
        let mut gates: FuturesUnordered<_> = tokens
            .iter()
            .map(|(cut, token)| async move {
                // Cancelled: the gate's future goes, and its process group with it.
                tokio::select! {
                    biased;
                    _ = token.cancelled() => (*cut, None),
                    run = self.gate_at(round, chain.at(*cut)) => (*cut, Some(run)),
                }
            })
            .collect();
        let mut red: Option<(usize, gate::GateRun)> = None;
        let cancel = |keep: &dyn Fn(usize) -> bool| {
            for (cut, token) in &tokens {
                if !keep(*cut) {
                    token.cancel();
                }
            }
        };
        while let Some((cut, run)) = gates.next().await {
            let Some(run) = run else {
                out.cancelled += 1;
                continue;
            };
            let run = run?;
            out.gates += 1;
            out.bisection += usize::from(bisecting);
            let red_at = red.as_ref().map(|(r, _)| *r);
            if run.passed && cut > *landed && red_at.is_none_or(|r| cut < r) {
                let log = run.log.clone();
                if let Some(halt) = self.land(round, chain, (*landed, cut), Some(&log), out).await? {
                    cancel(&|_| false);
                    while let Some((_, run)) = gates.next().await {
                        out.cancelled += usize::from(run.is_none());
                    }
                    return Ok(Err(halt));
                }
                *landed = cut;
                let landed = *landed;
                cancel(&|c| c > landed);
            } else if !run.passed && cut > *landed && red_at.is_none_or(|r| cut < r) {
                red = Some((cut, run));
                cancel(&|c| c <= cut);
            }
        }
        Ok(Ok(red))
    }

    /// Lands the chain's entries `from..to` (their gate passed; `log` its output): their merge
    /// commits recorded, then the target moved to the last of them. Were the target moved
    /// meanwhile by another lane (whose changes touch none of their paths), they are merged
    /// again onto it first. `Some` when they did not land.
    async fn land(
        &self,
        round: &Round<'_>,
        chain: &Chain,
        (from, to): (usize, usize),
        log: Option<&str>,
        out: &mut Outcome,
    ) -> crate::app::Result<Option<Halt>> {
        let _one = round.landing.lock().await;
        let repo = &round.repo;
        let ours = self.moved.lock().expect("listing lock").take().filter(|l| l.repo == *repo);
        let now = moving(repo, ours).await?;
        let Some(current) = now.heads.get(&round.target).map(|h| h.commit.clone()) else {
            return Ok(Some(Halt::Moved(None)));
        };
        let cars = &chain.cars[from..to];
        let mut bases: Vec<String> = (from..to).map(|i| chain.at(i).to_owned()).collect();
        let mut merges: Vec<String> = chain.merges[from..to].to_vec();
        if current != chain.at(from) {
            let mut prev = current.clone();
            for (k, car) in cars.iter().enumerate() {
                let wish = car.wish_commit.as_deref().unwrap_or_default();
                match merge(repo, car, &prev, wish).await? {
                    Merge::Clean(commit) => {
                        bases[k] = std::mem::replace(&mut prev, commit.clone());
                        merges[k] = commit;
                    }
                    Merge::Conflicts(_) => return Ok(Some(Halt::Moved(None))),
                }
            }
        }
        let chained: Vec<(&Entry, &str, &str)> =
            cars.iter().zip(&bases).zip(&merges).map(|((e, b), m)| (e, b.as_str(), m.as_str())).collect();
        let Some(recorded) = use_cases::record_all(&self.ctx, &chained, log).await? else {
            return Ok(Some(Halt::Void));
        };
        let doomed: Vec<(String, String)> = match round.settings.keep_branches {
            true => Vec::new(),
            false => recorded.iter().flat_map(|e| merged_branches(e, &now.heads)).collect(),
        };
        let head = merges.last().expect("a chain to land");
        let reason = reason(&cars[cars.len() - 1].wish);
        match self
            .move_target(repo, (cars[0].project_id, &round.target), (head, &current), &reason, &doomed, now)
            .await?
        {
            Moved::Yes => {}
            Moved::Raced => return Ok(Some(Halt::Moved(None))),
            Moved::Dirty(at) => return Ok(Some(Halt::Moved(Some(at)))),
        }
        let done = use_cases::merged_all(&self.ctx, &recorded).await?;
        out.processed.extend(done.iter().map(|e| (e.wish.clone(), e.state)));
        out.landed = out.landed.take().or_else(|| done.first().cloned());
        Ok(None)
    }
}

/// The entry at the front of the lane: the first carried one, else the first waiting one,
/// with whether it is claimed already and its branch's commit.
fn front(
    carried: &mut Vec<Entry>,
    waiting: &mut VecDeque<Entry>,
    heads: &HashMap<String, git::BranchHead>,
) -> (Entry, bool, Option<String>) {
    if !carried.is_empty() {
        let entry = carried.remove(0);
        let wish = entry.wish_commit.clone();
        return (entry, true, wish);
    }
    let entry = waiting.pop_front().expect("an entry at the front");
    let wish = heads.get(&entry.wish_branch).map(|h| h.commit.clone());
    (entry, false, wish)
}
