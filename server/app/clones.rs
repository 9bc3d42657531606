//! Removing a clone without losing work: what removing it would lose is asked of git first (with
//! no row locked), a clone holding unmerged work is kept unless forced, and the directory goes only
//! after the commit that forgets it.

use std::path::Path;

use super::{Error, Result};
use crate::git::clones::{self, UnmergedWork};

/// What removing `clone` would lose (compared with `target` in the project's repository `repo`),
/// refused unless `force`. `owner` names whose clone it is in the refusal ("agent `fox`");
/// `state` is the owner's state.
pub async fn check_before_removing(
    clone: &Path,
    (repo, target): (&Path, &str),
    owner: &str,
    state: &str,
    force: bool,
) -> Result<Option<UnmergedWork>> {
    let work = match clones::unmerged_work(clone, repo, target).await {
        Ok(work) => work,
        Err(e) if !force => {
            return Err(Error::conflict(
                format!(
                "cannot tell whether {owner}'s clone holds unmerged work ({e}); pass force=true to remove it anyway"
            ),
                Some(state),
            ))
        }
        Err(_) => None,
    };
    match work {
        Some(work) if !force => Err(Error::conflict(
            format!(
                "{owner}'s clone {} holds work not merged into `{target}`: {}; merge or push it, or pass force=true",
                clone.display(),
                work.describe()
            ),
            Some(state),
        )),
        other => Ok(other),
    }
}

/// Removes a clone whose owner is gone (committed); false, with a warning, when it could not be.
/// Its work was checked before, so what is left is only a directory to delete.
pub async fn remove_after_commit(clone: &Path, owner: &str) -> bool {
    match clones::remove(clone).await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(owner, clone = %clone.display(), error = %e, "removing a clone whose owner is gone");
            false
        }
    }
}
