//! The conductor's part of the wish page: the wish's phase, who it waits on and why, its branch
//! with the git commands that check it out, and each group's branch and agent; once the wish
//! merged, what landed where ([`Landed`]) instead.

use sqlx::PgConnection;

use crate::db::agents::Agent;
use crate::db::wishes::{Group, Wish};
use crate::db::{handoffs, merge_queue};
use crate::domain::wish::WishStatus;
use crate::git::branches;
use crate::http::error::ApiError;
use crate::pages::view::words;

/// What the conductor is doing with a wish.
pub struct ConductorView {
    pub phase: &'static str,
    pub phase_label: String,
    /// `human` when a person must act, with the reason.
    pub assignee: Option<String>,
    pub reason: Option<String>,
    /// The latest review's notes (what a fix agent was told).
    pub review_notes: Option<String>,
    /// git commands that give a person the wish's branch: a new clone, or a fetch in theirs.
    pub checkout: Vec<String>,
    /// Where the project's conductor settings are changed.
    pub settings: String,
    pub groups: Vec<GroupRun>,
    /// The wish merged: what landed where (its phase and branch are history then).
    pub landed: Option<Landed>,
}

/// What a merged wish left on its project's target branch.
pub struct Landed {
    pub target: String,
    /// The merge commit, when the merge queue made one (a merge reported through the API, or a
    /// branch the target already held, has none).
    pub commit: Option<String>,
    /// The target's commit before the merge: what merged is the diff from it to the merge commit.
    pub base: Option<String>,
    /// The merge commit's message as git has it (or why git could not read it).
    pub message: String,
}

impl Landed {
    /// What wish `wish` merged into `target` of the repository at `repo`; `None` unless it merged.
    pub async fn load(
        conn: &mut PgConnection,
        wish: &Wish,
        target: &str,
        repo: &str,
    ) -> Result<Option<Landed>, ApiError> {
        if wish.status != WishStatus::Merged {
            return Ok(None);
        }
        let entry = merge_queue::for_wish(conn, wish.id).await?;
        let target = entry.as_ref().map_or(target, |e| e.target_branch.as_str()).to_owned();
        let (commit, base) = entry.map(|e| (e.merge_commit, e.base_commit)).unwrap_or_default();
        let message = match &commit {
            Some(commit) => branches::message(std::path::Path::new(repo), commit)
                .await
                .unwrap_or_else(|e| format!("(git could not read the commit: {e})")),
            None => String::new(),
        };
        Ok(Some(Landed { target, commit, base, message }))
    }

    /// The merge commit's hash as people quote it.
    pub fn short(&self) -> &str {
        self.commit.as_deref().map_or("", |c| &c[..c.len().min(12)])
    }
}

/// One group's run: its branch and the agent on it (or the last one, if a person has it now).
pub struct GroupRun {
    pub key: String,
    pub branch: Option<String>,
    pub agent: Option<String>,
    pub agent_state: Option<&'static str>,
    pub handed_to_person: bool,
    pub merged: bool,
}

impl ConductorView {
    pub async fn load(
        conn: &mut PgConnection,
        wish: &Wish,
        groups: &[Group],
        project: &str,
        (repo_path, repo_dir): (&str, &str),
        target: &str,
    ) -> Result<ConductorView, ApiError> {
        let agents = handoffs::agents_of(conn, wish.id).await?;
        let newest_on = |task_id| agents.iter().find(|a: &&Agent| a.task_id == Some(task_id));
        let groups = groups
            .iter()
            .map(|g| {
                let agent = newest_on(g.task_id);
                GroupRun {
                    key: g.key.clone(),
                    branch: g.branch.clone(),
                    agent: agent.map(|a| a.name.clone()),
                    agent_state: agent.map(|a| a.state.as_str()),
                    handed_to_person: g.assignee.as_deref() == Some(crate::app::wish_lifecycle::HUMAN),
                    merged: g.merge_commit.is_some(),
                }
            })
            .collect();
        let landed = Landed::load(&mut *conn, wish, target, repo_dir).await?;
        let checkout = match &wish.branch {
            // A merged wish's branch is gone: its work is on the target branch.
            Some(_) if landed.is_some() => Vec::new(),
            Some(branch) => {
                let (repo, branch, dir) = (quoted(repo_path), quoted(branch), quoted(&wish.slug));
                vec![
                    format!("git clone --branch {branch} {repo} {dir}"),
                    format!("git fetch {repo} {branch} && git switch --detach FETCH_HEAD"),
                ]
            }
            None => Vec::new(),
        };
        let handed = wish.assignee.is_some();
        Ok(ConductorView {
            phase: wish.phase.as_str(),
            phase_label: words(wish.phase.as_str()),
            assignee: wish.assignee.clone(),
            reason: if handed { wish.failure_reason.clone() } else { None },
            review_notes: wish.review_notes.clone(),
            checkout,
            settings: format!("/projects/{project}/conductor"),
            groups,
            landed,
        })
    }
}

/// `text` as one shell word: as it is when it is made of safe characters, else single-quoted.
fn quoted(text: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+:@=,".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn paths_become_one_shell_word() {
        assert_eq!(quoted("/srv/repos/alpha"), "/srv/repos/alpha");
        assert_eq!(quoted("wish/login"), "wish/login");
        assert_eq!(quoted("/srv/my repo"), "'/srv/my repo'");
        assert_eq!(quoted("it's; rm -rf"), r"'it'\''s; rm -rf'");
        assert_eq!(quoted(""), "''");
    }
}
