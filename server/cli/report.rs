//! `switchyard group|review|wish|fix|task …`: an agent reports on its own work from its pane
//! (`POST /agents/{me}/report`). `group done` and `fix done` first push the clone's HEAD to
//! the agent's branch in the project's repository (`origin`), so the report and the commits it
//! speaks of arrive together.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use super::args::{FixCommand, GroupCommand, ReviewCommand, TaskCommand, WishCommand};
use super::mail::Api;

/// Any of the report commands.
pub enum ReportCommand {
    Group(GroupCommand),
    Review(ReviewCommand),
    /// `wish plan --file FILE` (the other `wish` commands are the operator's).
    Plan(std::path::PathBuf),
    Fix(FixCommand),
    Task(TaskCommand),
}

impl ReportCommand {
    /// The report command `command` is, or `command` back.
    pub fn of(command: super::args::Command) -> Result<ReportCommand, super::args::Command> {
        use super::args::Command as C;
        match command {
            C::Group(c) => Ok(ReportCommand::Group(c)),
            C::Review(c) => Ok(ReportCommand::Review(c)),
            C::Wish(WishCommand::Plan { file }) => Ok(ReportCommand::Plan(file)),
            C::Fix(c) => Ok(ReportCommand::Fix(c)),
            C::Task(c) => Ok(ReportCommand::Task(c)),
            other => Err(other),
        }
    }
}

/// Runs the report command against the API at `SWITCHYARD_URL`, else the configured `listen`.
pub fn run(command: ReportCommand, listen: std::net::SocketAddr) -> Result<(), String> {
    let api = Api::new(listen)?;
    let me = api.credentials.agent.clone().ok_or("run this in an agent's pane (SWITCHYARD_AGENT is not set)")?;
    let body = match command {
        ReportCommand::Group(GroupCommand::Done { summary }) => {
            push(&api, &me, true)?;
            json!({"kind": "group_done", "summary": summary})
        }
        ReportCommand::Group(GroupCommand::Blocked { reason }) => json!({"kind": "group_blocked", "reason": reason}),
        ReportCommand::Review(ReviewCommand::Pass { notes }) => json!({"kind": "review_pass", "notes": notes}),
        ReportCommand::Review(ReviewCommand::Fail { notes_file, notes }) => {
            let notes = match (notes_file, notes) {
                (Some(file), _) => read(&file)?,
                (None, Some(notes)) => notes,
                (None, None) => return Err("give the review's notes with --notes-file FILE (or --notes TEXT)".into()),
            };
            json!({"kind": "review_fail", "notes": notes})
        }
        ReportCommand::Plan(file) => {
            let text = read(&file)?;
            // YAML is a superset of JSON: one parser reads both.
            let plan: Value = serde_norway::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            let groups = plan.get("groups").cloned().unwrap_or(plan);
            json!({"kind": "plan", "groups": groups})
        }
        ReportCommand::Fix(FixCommand::Done { summary }) => {
            push(&api, &me, false)?;
            json!({"kind": "fix_done", "summary": summary})
        }
        ReportCommand::Task(TaskCommand::Done { result }) => {
            push_task_branch(&api, &me)?;
            json!({"kind": "task_done", "result": result})
        }
        ReportCommand::Task(TaskCommand::Fail { reason }) => json!({"kind": "task_fail", "reason": reason}),
        ReportCommand::Task(TaskCommand::Ask { question }) => json!({"kind": "task_ask", "question": question}),
    };
    let outcome = api.post(&format!("/agents/{me}/report"), body)?;
    say!("{}", outcome["detail"].as_str().unwrap_or("recorded"));
    Ok(())
}

/// A dispatched task's agent works on `task/<id>`: its commits go with its done report.
fn push_task_branch(api: &Api, me: &str) -> Result<(), String> {
    let agent = api.get(&format!("/agents/{me}"))?;
    match agent["branch"].as_str() {
        Some(branch) if branch.starts_with("task/") => push(api, me, true),
        _ => Ok(()),
    }
}

fn read(file: &Path) -> Result<String, String> {
    std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))
}

/// Pushes HEAD to the agent's branch on `origin`: forced for a group's own branch (the agent may
/// have rewritten it), a fast-forward only for a wish's branch that others' work is on.
fn push(api: &Api, me: &str, force: bool) -> Result<(), String> {
    let agent = api.get(&format!("/agents/{me}"))?;
    let branch = agent["branch"].as_str().ok_or("this agent has no branch of its own to push")?;
    let refspec = format!("HEAD:refs/heads/{branch}");
    let mut args = vec!["push", "--quiet"];
    if force {
        args.push("--force");
    }
    args.extend(["origin", &refspec]);
    let output = Command::new("git")
        .args(&args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| format!("running git: {e}"))?;
    if !output.status.success() {
        return Err(format!("git push to `{branch}` failed: {}", String::from_utf8_lossy(&output.stderr).trim()));
    }
    Ok(())
}
