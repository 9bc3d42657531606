//! Conflict prediction before groups are dispatched: a wish whose target branch moved since it
//! started (another wish merged, a person pushed) takes the target in first when git predicts
//! the merge clean (`merge-tree`, in memory, then a compare-and-swap of the wish's branch), so
//! its next groups start from what they will be merged into, and the merge queue finds no
//! surprise late. A predicted conflict is recorded once per target commit
//! (`wish.conflict_predicted`, with the files) and the groups start from the wish's branch as it
//! is: the conflict is resolved once, by the merge queue's fix turn, not by every group.

use sqlx::PgConnection;

use crate::app::repository::Repo;
use crate::db::conductor::{self, Conducted};
use crate::db::{events, wishes};
use crate::git::branches::{self, Merge};

/// The commit the wish's next groups start from (see the module's comment).
pub async fn starting_point(
    conn: &mut PgConnection,
    c: &Conducted,
    local: &Repo,
    branch: &str,
) -> Result<String, String> {
    let repo = local.path();
    let (target, wish) = super::dispatch::wish_branch(c, local, branch).await?;
    if branches::is_ancestor(repo, &target, &wish).await.map_err(|e| e.to_string())? {
        return Ok(wish);
    }
    let message = format!("Merge `{}` into wish {} before its next groups start", c.target_branch, c.wish.slug);
    let subject = wishes::subject(&c.wish);
    match branches::merge(repo, &wish, &target, &message).await.map_err(|e| e.to_string())? {
        Merge::Clean(merge) => {
            if local.compare_and_swap(branch, &merge, &wish).await.is_err() {
                // The branch moved meanwhile (a group merged on another node): start from where it is.
                return branches::head(repo, branch)
                    .await
                    .map_err(|e| e.to_string())?
                    .ok_or("the branch is gone".into());
            }
            let payload = serde_json::json!({"wish": c.wish.slug, "target": c.target_branch,
                "target_commit": target, "merge_commit": merge});
            events::record(conn, "wish.caught_up", &subject, payload).await.map_err(|e| e.to_string())?;
            Ok(merge)
        }
        Merge::Conflicts(files) => {
            if !conductor::conflict_predicted(conn, &subject, &target).await.map_err(|e| e.to_string())? {
                let payload = serde_json::json!({"wish": c.wish.slug, "target": c.target_branch,
                    "target_commit": target, "files": files});
                events::record(conn, "wish.conflict_predicted", &subject, payload).await.map_err(|e| e.to_string())?;
            }
            Ok(wish)
        }
    }
}
