//! `switchyard group|review|wish|fix|task …`: an agent reports on its own work from its pane
//! (`POST /agents/{me}/report`). `group done`, `fix done` and a dispatched task's `task done`
//! (and `group push`, which reports nothing) first send the clone's HEAD to the agent's branch in the project's repository, through the
//! API (`PUT /agents/{me}/branch`, a git bundle), so the report and the commits it speaks of
//! arrive together.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use super::args::{FixCommand, GroupCommand, ReviewCommand, TaskCommand, WishCommand};
use super::mail::{Api, Refusal};

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
            send_branch(&api, &me)?;
            json!({"kind": "group_done", "summary": summary})
        }
        ReportCommand::Group(GroupCommand::Push) => {
            // Nothing is reported: the group goes on, its branch now holding the work so far.
            send_branch(&api, &me)?;
            say!("sent your work so far to your branch");
            return Ok(());
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
            send_branch(&api, &me)?;
            json!({"kind": "fix_done", "summary": summary})
        }
        ReportCommand::Task(TaskCommand::Done { result }) => {
            send_task_branch(&api, &me)?;
            json!({"kind": "task_done", "result": result})
        }
        ReportCommand::Task(TaskCommand::Fail { reason }) => json!({"kind": "task_fail", "reason": reason}),
        ReportCommand::Task(TaskCommand::Ask { question }) => json!({"kind": "task_ask", "question": question}),
    };
    // One key for every try: a report that reached the server before it died is answered, not
    // applied again, when it is sent once more after the restart.
    let key = uuid::Uuid::new_v4().to_string();
    let outcome = api.post_persistently(&format!("/agents/{me}/report"), body, &key)?;
    say!("{}", outcome["detail"].as_str().unwrap_or("recorded"));
    Ok(())
}

/// A dispatched task's agent works on `task/<id>`: its commits go with its done report.
fn send_task_branch(api: &Api, me: &str) -> Result<(), String> {
    let agent = api.get_persistently(&format!("/agents/{me}"))?;
    match agent["branch"].as_str() {
        Some(branch) if branch.starts_with("task/") => send_branch(api, me),
        _ => Ok(()),
    }
}

fn read(file: &Path) -> Result<String, String> {
    std::fs::read_to_string(file).map_err(|e| format!("reading {}: {e}", file.display()))
}

/// Sends HEAD to the agent's branch in the project's repository through the API, as a git
/// bundle: no agent writes the repository itself (inside a sandbox it is read-only), and the
/// server decides how the branch may move (`PUT /agents/{me}/branch`). First only what `origin`
/// lacks; the whole history when the repository no longer has what that builds on.
fn send_branch(api: &Api, me: &str) -> Result<(), String> {
    let path = format!("/agents/{me}/branch");
    let failed = |refusal: Refusal| format!("sending the branch failed: {}", refusal.message);
    // HEAD already in `origin`: the commit alone, on parents the repository has.
    let thin = match bundle(&["HEAD", "--not", "--remotes=origin"])? {
        Some(thin) => thin,
        None => bundle(&["-1", "HEAD"])?.ok_or("the clone has no commit to send")?,
    };
    match api.put_bytes(&path, thin) {
        Ok(_) => return Ok(()),
        Err(refusal) if refusal.status == Some(reqwest::StatusCode::UNPROCESSABLE_ENTITY) => {}
        Err(refusal) => return Err(failed(refusal)),
    }
    let full = bundle(&["HEAD"])?.ok_or("the clone has no commit to send")?;
    api.put_bytes(&path, full).map(drop).map_err(failed)
}

/// `git bundle create - ARGS` in the clone: the bundle, or `None` when it would be empty.
fn bundle(args: &[&str]) -> Result<Option<Vec<u8>>, String> {
    let output = Command::new("git")
        .args(["bundle", "create", "--quiet", "-"])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| format!("running git: {e}"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.success() {
        true => Ok(Some(output.stdout)),
        false if stderr.contains("empty bundle") => Ok(None),
        false => Err(format!("git bundle create failed: {}", stderr.trim())),
    }
}
