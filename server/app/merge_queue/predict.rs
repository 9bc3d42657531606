//! Conflict prediction that acts: an entry is trial-merged (`git merge-tree`, in memory) with the
//! target branch and with each entry ahead of it; the first entry ahead it would conflict with is
//! what it waits for (`held_for`). Each answer is cached by the two commit ids, so a pass costs one
//! trial merge per pair that changed: a new entry behind N others costs at most N + 1, not a
//! re-run of all. Only pairs that matter are trial-merged: each entry's changed paths (cached by
//! branch commit) show two entries that touch no common path (nor a file where the other has a
//! directory) merge cleanly. What a pass needs that is not cached is asked of git at once
//! ([`Cache::prefetch`]): every branch's changed paths in one `git log`, then every trial merge
//! in one `git merge-tree --stdin`, so N entries queued at once cost two git runs, not N² / 2
//! trial merges or 2 N runs. Renames count as their two paths; what a prediction misses (a
//! directory rename moving the other's new file, say) the real merge still tells.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use serde_json::{json, Value};

use crate::db::merge_queue::Entry;
use crate::domain::merge_queue::{held_for, Predicted};
use crate::git::conflicts::{
    changed_paths, changed_paths_many, may_conflict, trial_merge_commits, trial_merge_many, Outcome,
};

/// Answers kept; past this the cache starts afresh (the commits in flight are re-asked once).
const CAPACITY: usize = 100_000;

/// Trial merges by their (ordered) pair of commit ids; changed paths by (target, branch) commits.
#[derive(Default)]
pub struct Cache(Mutex<HashMap<(String, String), Predicted>>, Mutex<HashMap<(String, String), Vec<String>>>);

impl Cache {
    /// The paths the branch at `head` changed since it left `target`; `None` when git cannot say
    /// (then every pair with it is trial-merged).
    pub async fn changed(&self, repo: &Path, target: &str, head: &str) -> Option<Vec<String>> {
        let key = (target.to_owned(), head.to_owned());
        if let Some(hit) = self.1.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Some(hit);
        }
        let paths = changed_paths(repo, target, head).await?;
        if let Ok(mut cache) = self.1.lock() {
            if cache.len() >= CAPACITY {
                cache.clear();
            }
            cache.insert(key, paths.clone());
        }
        Some(paths)
    }

    /// The prediction for commits `a` and `b`, and whether git had to be asked.
    pub async fn trial(&self, repo: &Path, a: &str, b: &str) -> (Predicted, bool) {
        let key = pair(a, b);
        if let Some(hit) = self.0.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return (hit, false);
        }
        let (predicted, lasting) = predicted(trial_merge_commits(repo, a, b).await);
        if lasting {
            self.keep(key, predicted.clone());
        }
        (predicted, true)
    }

    fn keep(&self, key: (String, String), predicted: Predicted) {
        if let Ok(mut cache) = self.0.lock() {
            if cache.len() >= CAPACITY {
                cache.clear();
            }
            cache.insert(key, predicted);
        }
    }

    fn known_paths(&self, target: &str, head: &str) -> Option<Vec<String>> {
        self.1.lock().ok().and_then(|c| c.get(&(target.to_owned(), head.to_owned())).cloned())
    }

    /// Asks git, in two runs, everything the pass's predictions of `planned` (each entry's target
    /// and branch commits, in queue order: see [`entry`]) will ask that is not known yet: every
    /// branch's changed paths (one `git log` per target commit), then every trial merge a pair
    /// needs (one `git merge-tree --stdin`). N entries entering at once cost two git runs, not
    /// 2 N. What git could not answer here is asked again one at a time by [`entry`]. Returns
    /// how many trial merges were answered.
    pub async fn prefetch(&self, repo: &Path, planned: &[(Option<&str>, Option<&str>)]) -> usize {
        let mut by_target: HashMap<&str, Vec<String>> = HashMap::new();
        for (target, head) in planned {
            if let (Some(target), Some(head)) = (target, head) {
                if self.known_paths(target, head).is_none() {
                    by_target.entry(target).or_default().push((*head).to_owned());
                }
            }
        }
        for (target, mut heads) in by_target {
            heads.sort();
            heads.dedup();
            let Some(changed) = changed_paths_many(repo, target, &heads).await else { continue };
            if let Ok(mut cache) = self.1.lock() {
                if cache.len() + changed.len() >= CAPACITY {
                    cache.clear();
                }
                cache.extend(changed.into_iter().map(|(head, paths)| ((target.to_owned(), head), paths)));
            }
        }
        let paths: Vec<Option<Vec<String>>> =
            planned.iter().map(|(t, h)| t.zip(*h).and_then(|(t, h)| self.known_paths(t, h))).collect();
        let mut pairs = Vec::new();
        for (i, (target, head)) in planned.iter().enumerate() {
            let Some(head) = head else { continue };
            pairs.extend(target.map(|target| pair(target, head)));
            for (j, (_, other)) in planned[..i].iter().enumerate() {
                if let Some(other) = other.filter(|_| needs_trial(paths[i].as_deref(), paths[j].as_deref())) {
                    pairs.push(pair(other, head));
                }
            }
        }
        pairs.sort();
        pairs.dedup();
        if let Ok(cache) = self.0.lock() {
            pairs.retain(|key| !cache.contains_key(key));
        }
        let mut answered = 0;
        for (key, outcome) in pairs.clone().into_iter().zip(trial_merge_many(repo, &pairs).await) {
            if let (predicted, true) = predicted(outcome) {
                self.keep(key, predicted);
                answered += 1;
            }
        }
        answered
    }
}

/// The cache's key of a pair of commits: the same whichever side is named first.
fn pair(a: &str, b: &str) -> (String, String) {
    if a <= b {
        (a.to_owned(), b.to_owned())
    } else {
        (b.to_owned(), a.to_owned())
    }
}

/// A trial merge's outcome as a prediction, and whether it lasts (is cached): git's failure to
/// answer does not, it may answer next time.
fn predicted(outcome: Outcome) -> (Predicted, bool) {
    match outcome {
        Outcome::Clean => (Predicted::Clean, true),
        Outcome::Conflicts(files) => (Predicted::Conflict { files }, true),
        Outcome::Missing(what) => (Predicted::Unknown { why: format!("`{what}` is missing") }, true),
        Outcome::Unknown(why) => (Predicted::Unknown { why }, false),
    }
}

/// Whether two entries with these changed paths need a trial merge: unless both are known and
/// share no path, git must say.
fn needs_trial(mine: Option<&[String]>, theirs: Option<&[String]>) -> bool {
    mine.zip(theirs).is_none_or(|(a, b)| may_conflict(a, b))
}

/// The target commit to predict `entry` against: the one its stored prediction was made on
/// while its branch is still at `head` (the merges since then are the entries that were ahead,
/// each predicted against it on its own), else the target's commit now.
pub fn target_for<'a>(entry: &'a Entry, head: Option<&str>, now: Option<&'a str>) -> Option<&'a str> {
    let stored = entry.prediction.as_ref().filter(|p| head.is_some() && p["wish_commit"].as_str() == head);
    stored.and_then(|p| p["target_commit"].as_str()).or(now)
}

/// An entry's prediction, as stored on it.
pub struct EntryPrediction {
    pub document: Value,
    pub held_for: Option<String>,
    pub trial_merges: usize,
    pub cached: usize,
    /// Pairs known clean without a trial merge: their changed paths are disjoint.
    pub disjoint: usize,
    /// The paths this entry's branch changed, for the entries behind it.
    pub changed: Option<Vec<String>>,
}

/// An entry ahead, as the ones behind it are predicted against: its branch's commit and the
/// paths it changed.
pub struct Ahead<'a> {
    pub entry: &'a Entry,
    pub head: Option<String>,
    pub changed: Option<Vec<String>>,
}

/// Predicts the entry whose branch is at `head` against the target branch (at `target`) and each
/// entry ahead (with its branch's commit).
pub async fn entry(
    cache: &Cache,
    repo: &Path,
    target: Option<&str>,
    head: Option<&str>,
    ahead: &[Ahead<'_>],
) -> EntryPrediction {
    let (mut trial_merges, mut cached, mut disjoint) = (0, 0, 0);
    let Some(head) = head else {
        let missing = Predicted::Unknown { why: "the wish branch is missing".into() };
        let document = json!({"target": missing});
        return EntryPrediction { document, held_for: None, trial_merges, cached, disjoint, changed: None };
    };
    let changed = match target {
        Some(target) => cache.changed(repo, target, head).await,
        None => None,
    };
    let mut count = |asked: bool| if asked { trial_merges += 1 } else { cached += 1 };
    let against_target = match target {
        Some(target) => {
            let (p, asked) = cache.trial(repo, target, head).await;
            count(asked);
            p
        }
        None => Predicted::Unknown { why: "the target branch is missing".into() },
    };
    let mut answers = Vec::with_capacity(ahead.len());
    for Ahead { entry: other, head: other_head, changed: theirs } in ahead {
        let p = match other_head {
            Some(_) if !needs_trial(changed.as_deref(), theirs.as_deref()) => {
                disjoint += 1;
                Predicted::Clean
            }
            Some(other_head) => {
                let (p, asked) = cache.trial(repo, other_head, head).await;
                count(asked);
                p
            }
            None => Predicted::Unknown { why: "its branch is missing".into() },
        };
        answers.push((other.wish.as_str(), p));
    }
    let waits_for = held_for(answers.iter().map(|(slug, p)| (*slug, p))).map(str::to_owned);
    let conflicts: Vec<Value> = answers
        .iter()
        .filter_map(|(slug, p)| match p {
            Predicted::Conflict { files } => Some(json!({"wish": slug, "files": files})),
            _ => None,
        })
        .collect();
    // No count of the clean ones: it would change, and rewrite every entry behind, at each merge.
    let document = json!({"target": against_target, "conflicts_ahead": conflicts,
        "wish_commit": head, "target_commit": target});
    EntryPrediction { document, held_for: waits_for, trial_merges, cached, disjoint, changed }
}
