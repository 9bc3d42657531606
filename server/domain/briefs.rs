//! What the conductor tells its agents: each one's first message (its assignment) and the
//! standing instructions a provider reads from its clone (`CLAUDE.md`, `AGENTS.md`, `GEMINI.md`).
//! A real coding agent knows nothing of Switchyard: these say how to report, what "done"
//! requires and whom to ask. Text only — whatever comes from a repository or a person is made
//! typeable first ([`crate::domain::typed::plain`]).

use crate::domain::agent_kind::AgentRole;
use crate::domain::typed::plain;

/// The files providers read standing instructions from, in the clone's root.
pub const INSTRUCTION_FILES: [&str; 3] = ["CLAUDE.md", "AGENTS.md", "GEMINI.md"];

/// The most of a diff put into a reviewer's first message; the rest it reads with git.
const DIFF_IN_BRIEF: usize = 20_000;

/// How an agent of `role` reports, for its standing instructions.
pub fn standing_instructions(role: AgentRole) -> String {
    let commands = match role {
        AgentRole::Planner => {
            "- Give the plan: write it to plan.yaml (or plan.json) and run `switchyard wish plan --file plan.yaml`.\n\
             The plan is a list of groups: `groups: [{key, title, goal, depends_on: [keys], provider (optional)}]`.\n\
             Keys are lowercase letters, digits and dashes; a group runs after the groups it depends on.\n\
             If the plan is refused, the reason comes back as a message: fix the plan and give it again.\n"
        }
        AgentRole::Engineer => {
            "- When the goal is done: commit your work on the branch checked out here, then run\n\
             `switchyard group done --summary \"what you did\"` (it pushes your branch; done needs at least one new commit).\n\
             - On a long goal, commit and run `switchyard group push` now and then: it pushes your branch without\n\
             reporting, so your work so far is kept if the machine you run on is lost.\n\
             - If you cannot do it: `switchyard group blocked --reason \"why\"`; a person takes over.\n\
             - If Switchyard says your branch conflicts with the wish's branch: run `git fetch origin` and\n\
             `git merge origin/<the wish branch it names>`, resolve, commit, and report done again.\n"
        }
        AgentRole::Reviewer => {
            "- Read the wish's branch (checked out here) against the target branch: `git diff origin/<target>...HEAD`.\n\
             - Then answer `switchyard review pass` or write your findings to notes.md and run\n\
             `switchyard review fail --notes-file notes.md` (name files and lines). Do not change the branch.\n"
        }
        AgentRole::Fix | AgentRole::Qa => {
            "- Fix what the message says on the branch checked out here, commit, then run\n\
             `switchyard fix done --summary \"what you changed\"` (it pushes the branch).\n"
        }
    };
    format!(
        "# Working under Switchyard\n\n\
         You are an agent run by Switchyard. Your assignment arrives as your first message.\n\n\
         ## How to report\n{commands}\
         - Ask a person: `switchyard msg send --to operator \"your question\"`; read answers with `switchyard msg inbox`.\n\
         - Work only in this directory and on its branch. Do not commit this file.\n"
    )
}

/// Standing instructions for an agent on a standalone task or a board column's skill.
pub fn task_instructions() -> String {
    "# Working under Switchyard\n\n\
     You are an agent run by Switchyard. Your assignment arrives as your first message.\n\n\
     ## How to report\n\
     - When it is done: commit your work on the branch checked out here, then run\n\
     `switchyard task done --result \"what you did\"` (it pushes your branch).\n\
     - If you cannot do it: `switchyard task fail --reason \"why\"`; a person takes over.\n\
     - If you need a person's answer: `switchyard task ask \"your question\"`; the answer comes as a message.\n\
     - Stopping without one of these makes Switchyard ask you to go on, a few times, then the task fails.\n\
     - Work only in this directory and on its branch. Do not commit this file.\n"
        .to_owned()
}

/// The first message of a standalone task's agent.
pub fn task(title: &str, goal: &str, branch: &str, max_iterations: i32) -> String {
    format!(
        "Your assignment: the task \"{}\".\n\nWhat to do:\n{}\n\n\
         Your branch is `{branch}` (checked out here). When done, commit and run:\n\
         switchyard task done --result \"what you did\"\n\
         If you cannot do it: switchyard task fail --reason \"why\"\n\
         To ask a person: switchyard task ask \"your question\" (the answer comes as a message)\n\
         You have {max_iterations} iteration(s): stopping without reporting uses one.\n",
        plain(title),
        plain(if goal.trim().is_empty() { title } else { goal }),
    )
}

/// The first message of an agent asked to do a board column's skill on a task.
pub fn skill(skill: &str, column: &str, title: &str, goal: &str, branch: &str) -> String {
    format!(
        "Your assignment: do `{}` on the task \"{}\" (its card is in the board's column `{}`).\n\n\
         The task:\n{}\n\nIts work is on `{branch}` (checked out here).\n\
         When the {} is done: switchyard task done --result \"what you found\" (the card moves on)\n\
         If it cannot pass: switchyard task fail --reason \"why\" (a person takes over)\n",
        plain(skill),
        plain(title),
        plain(column),
        plain(if goal.trim().is_empty() { title } else { goal }),
        plain(skill),
    )
}

/// What an agent that stopped without reporting is told when its next iteration begins; a
/// fresh agent (no provider session to resume) gets its brief again.
pub fn continuation(iteration: i32, max_iterations: i32, brief: Option<&str>) -> String {
    let mut text = format!(
        "Continue (iteration {iteration} of {max_iterations}): you stopped without reporting. Go on with your \
         assignment, then run `switchyard task done --result \"…\"`, or `switchyard task fail --reason \"…\"` if \
         you cannot do it.\n"
    );
    if let Some(brief) = brief {
        text.push_str("\nYour assignment was:\n");
        text.push_str(&plain(brief));
    }
    text
}

/// What an agent started afresh on another machine is told (its earlier session could not go on
/// there): that its branch holds what it reported, and its brief again.
pub fn started_again(branch: Option<&str>, brief: &str) -> String {
    let mut text = String::from(
        "You are starting again on another machine: the one you worked on was lost, with your session there. ",
    );
    if let Some(branch) = branch {
        text.push_str(&format!(
            "Your clone is on your branch `{}` as you last reported it: look at what is there, then go on from it.\n",
            plain(branch)
        ));
    } else {
        text.push('\n');
    }
    text.push_str("\nYour assignment was:\n");
    text.push_str(&plain(brief));
    text
}

/// A person's answer to the question an agent asked.
pub fn answer(question: Option<&str>, answer: &str) -> String {
    format!(
        "Answer to your question{}:\n{}\n\nGo on with your task, then report with `switchyard task done` or `task fail`.\n",
        question.map(|q| format!(" (\"{}\")", plain(q))).unwrap_or_default(),
        plain(answer)
    )
}

/// An engineer's first message: its goal, the wish, and what its dependencies produced.
pub fn engineer(
    wish_title: &str,
    wish_description: &str,
    key: &str,
    goal: &str,
    branch: &str,
    dependencies: &[(String, Option<String>)],
) -> String {
    let mut text = format!(
        "Your assignment: group `{key}` of the wish \"{}\".\n\nGoal:\n{}\n\nThe wish:\n{}\n",
        plain(wish_title),
        plain(goal),
        plain(wish_description)
    );
    if !dependencies.is_empty() {
        text.push_str("\nWhat the groups before yours produced (already merged into your branch):\n");
        for (dep, summary) in dependencies {
            text.push_str(&format!("- {dep}: {}\n", plain(summary.as_deref().unwrap_or("(no summary)"))));
        }
    }
    text.push_str(&format!(
        "\nYour branch is `{branch}`. When done, commit and run: switchyard group done --summary \"what you did\"\n\
         If you cannot do it: switchyard group blocked --reason \"why\"\n"
    ));
    text
}

/// A planner's first message.
pub fn planner(wish_title: &str, wish_description: &str) -> String {
    format!(
        "Plan the wish \"{}\": split it into groups of work that agents can do in parallel where they are\n\
         independent.\n\nThe wish:\n{}\n\n\
         Write plan.yaml like:\n\
         groups:\n  - key: api\n    title: The API\n    goal: What exactly to build\n    depends_on: []\n\
         then run: switchyard wish plan --file plan.yaml\n",
        plain(wish_title),
        plain(wish_description)
    )
}

/// A reviewer's first message: the change at a glance and as much of the diff as fits.
pub fn reviewer(wish_title: &str, wish_description: &str, target: &str, stat: &str, patch: &str) -> String {
    let shown = truncate(patch, DIFF_IN_BRIEF);
    let more = if shown.len() < patch.len() {
        format!("\n(The diff is longer: read all of it with `git diff origin/{target}...HEAD`.)\n")
    } else {
        String::new()
    };
    format!(
        "Review the wish \"{}\" before it merges into `{target}`.\n\nThe wish:\n{}\n\nChanged:\n{}\nDiff:\n{}\n{more}\n\
         Answer with: switchyard review pass   or   switchyard review fail --notes-file notes.md\n",
        plain(wish_title),
        plain(wish_description),
        plain(stat),
        plain(shown)
    )
}

/// A fix agent's first message after a failed review.
pub fn review_fix(wish_title: &str, branch: &str, notes: &str) -> String {
    format!(
        "The review of the wish \"{}\" failed. Fix what it says on `{branch}` (checked out here), commit, then run:\n\
         switchyard fix done --summary \"what you changed\"\n\nThe review's notes:\n{}\n",
        plain(wish_title),
        plain(notes)
    )
}

/// What an engineer is told when its branch conflicts with the wish's.
pub fn conflict(wish_branch: &str, files: &[String]) -> String {
    let list: Vec<String> = files.iter().map(|f| format!("- {}", plain(f))).collect();
    format!(
        "Your branch conflicts with the wish's branch `{wish_branch}` in:\n{}\n\n\
         Run `git fetch origin && git merge origin/{wish_branch}`, resolve the conflicts, commit, and report again:\n\
         switchyard group done --summary \"…\"\n",
        list.join("\n")
    )
}

/// What a planner is told when its plan was refused.
pub fn plan_refused(problems: &str) -> String {
    format!("Your plan was not accepted:\n{}\nFix it and run `switchyard wish plan --file …` again.\n", plain(problems))
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn briefs_are_typeable_whatever_the_repository_holds() {
        let hostile = "rm -rf /\x1b[201~\x03evil\r";
        for text in [
            engineer(hostile, hostile, "api", hostile, "group/w/api", &[("db".into(), Some(hostile.into()))]),
            planner(hostile, hostile),
            reviewer(hostile, hostile, "main", hostile, hostile),
            review_fix(hostile, "wish/w", hostile),
            conflict("wish/w", &[hostile.to_owned()]),
            task(hostile, hostile, "task/1a2b3c4d", 3),
            skill(hostile, hostile, hostile, hostile, "task/1a2b3c4d"),
            continuation(2, 3, Some(hostile)),
            answer(Some(hostile), hostile),
        ] {
            assert_eq!(crate::domain::typed::check(&text), Ok(()), "{text:?}");
            assert!(text.contains("rm -rf /"), "the text itself stays");
        }
    }

    #[test]
    fn a_long_diff_is_cut_and_the_reviewer_told_where_the_rest_is() {
        let patch = "é".repeat(DIFF_IN_BRIEF);
        let text = reviewer("t", "d", "main", "1 file", &patch);
        assert!(text.len() < patch.len() + 1_000);
        assert!(text.contains("git diff origin/main...HEAD"));
    }

    #[test]
    fn every_role_is_told_how_to_report() {
        for (role, command) in [
            (AgentRole::Planner, "switchyard wish plan"),
            (AgentRole::Engineer, "switchyard group done"),
            (AgentRole::Engineer, "switchyard group push"),
            (AgentRole::Reviewer, "switchyard review pass"),
            (AgentRole::Fix, "switchyard fix done"),
        ] {
            assert!(standing_instructions(role).contains(command), "{role:?}");
        }
        for command in ["switchyard task done", "switchyard task fail", "switchyard task ask"] {
            assert!(task_instructions().contains(command), "{command}");
        }
    }
}
