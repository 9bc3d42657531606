//! The operator's commands for the common reads and acts, over the same REST API as everyone:
//! `switchyard agents`, `attach NAME`, `wish new|show|ls`, `tasks`. They find the server and
//! the token as `msg` does ([`super::client::Credentials`]); `--json` prints what the API
//! answered, one object a line, for scripts.

use std::os::unix::process::CommandExt;

use serde_json::{json, Value};

use super::args::{Command, WishCommand};
use super::mail::Api;
use crate::config::GlobalArgs;

/// Any of the operator's commands.
pub enum OperatorCommand {
    Agents { project: Option<String>, state: Option<String>, json: bool },
    Attach { agent: String },
    Tasks { project: Option<String>, status: Option<String>, json: bool },
    Wish(WishCommand),
}

impl OperatorCommand {
    /// The operator command `command` is, or `command` back (`wish plan` is an agent's report).
    pub fn of(command: Command) -> Result<OperatorCommand, Command> {
        match command {
            Command::Agents { project, state, json } => Ok(OperatorCommand::Agents { project, state, json }),
            Command::Attach { agent } => Ok(OperatorCommand::Attach { agent }),
            Command::Tasks { project, status, json } => Ok(OperatorCommand::Tasks { project, status, json }),
            Command::Wish(WishCommand::Plan { file }) => Err(Command::Wish(WishCommand::Plan { file })),
            Command::Wish(wish) => Ok(OperatorCommand::Wish(wish)),
            other => Err(other),
        }
    }
}

pub fn run(command: OperatorCommand, global: &GlobalArgs) -> Result<(), String> {
    let api = Api::new(global.listen)?;
    match command {
        OperatorCommand::Agents { project, state, json } => {
            let agents = api.all(&with_query("/agents", &[("project", project), ("state", state)]))?;
            print_rows(&agents, json, &["NAME", "STATE", "PROVIDER", "LAST ACTIVITY", "TASK"], |a| {
                vec![
                    text(&a["name"]),
                    text(&a["state"]),
                    text(&a["provider"]),
                    ago(&a["last_activity"]),
                    line(&a["task"]),
                ]
            });
        }
        OperatorCommand::Tasks { project, status, json } => {
            let tasks = api.all(&with_query("/tasks", &[("project", project), ("status", status)]))?;
            print_rows(&tasks, json, &["ID", "STATUS", "ASSIGNEE", "TITLE"], |t| {
                vec![text(&t["id"]), text(&t["status"]), text(&t["assignee"]), line(&t["title"])]
            });
        }
        OperatorCommand::Attach { agent } => attach(&api, global, &agent)?,
        OperatorCommand::Wish(WishCommand::New { text, project, slug }) => {
            let text = super::mail::body_or_stdin(Some(text))?;
            let title = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("").to_owned();
            let slug = slug.unwrap_or_else(|| crate::domain::wish::slug_of(&title));
            let body = json!({"slug": slug, "project": project, "title": title, "description": text});
            let key = uuid::Uuid::new_v4().to_string();
            let made = api.call_with_key(reqwest::Method::POST, "/wishes", Some(body), Some(&key))?;
            say!("{} ({})", text_of(&made["slug"]), text_of(&made["status"]));
        }
        OperatorCommand::Wish(WishCommand::Show { slug, json }) => {
            let wish = api.get(&format!("/wishes/{}", path_segment(&slug)))?;
            if json {
                say!("{wish}");
            } else {
                print_wish(&wish);
            }
        }
        OperatorCommand::Wish(WishCommand::Ls { state, project, json }) => {
            let wishes = api.all(&with_query("/wishes", &[("project", project), ("status", state)]))?;
            print_rows(&wishes, json, &["SLUG", "STATUS", "PHASE", "OPEN", "TITLE"], |w| {
                vec![
                    text(&w["slug"]),
                    text(&w["status"]),
                    text(&w["phase"]),
                    text(&w["groups_open"]),
                    line(&w["title"]),
                ]
            });
        }
        OperatorCommand::Wish(WishCommand::Plan { .. }) => unreachable!("`wish plan` is a report (see `of`)"),
    }
    Ok(())
}

/// Replaces this process with tmux showing the agent's pane, when the agent runs on this node
/// (the node whose id is in the data directory); else says where it runs.
fn attach(api: &Api, global: &GlobalArgs, name: &str) -> Result<(), String> {
    let settings = global.validate().map_err(|e| e.to_string())?;
    let agent = api.get(&format!("/agents/{}", path_segment(name)))?;
    let node_file = settings.data_dir.join("node_id");
    let here = std::fs::read_to_string(&node_file).ok().map(|id| id.trim().to_owned());
    match (agent["node_id"].as_str(), here.as_deref()) {
        (None, _) => return Err(format!("agent `{name}` is not on any node yet (it is {})", text_of(&agent["state"]))),
        (Some(node), Some(here)) if node == here => {}
        (Some(node), Some(here)) => {
            return Err(format!(
                "agent `{name}` runs on node `{node}`, not on this one (`{here}`): run `switchyard attach {name}` there"
            ))
        }
        (Some(node), None) => {
            return Err(format!(
            "agent `{name}` runs on node `{node}`; no node has run from {} (set SWITCHYARD_DATA_DIR to that node's)",
            settings.data_dir.display()
        ))
        }
    }
    let pane = agent["tmux_pane"]
        .as_str()
        .ok_or_else(|| format!("agent `{name}` has no pane (it is {})", text_of(&agent["state"])))?;
    let tmux_env = std::env::var("TMUX").ok();
    let error = crate::tmux::attach_command(&settings.worker.tmux_socket, pane, tmux_env.as_deref()).exec();
    Err(format!("running tmux: {error}"))
}

fn print_wish(wish: &Value) {
    say!("{} · {} · {}", text_of(&wish["slug"]), text_of(&wish["status"]), text_of(&wish["title"]));
    for (label, field) in [("phase", "phase"), ("branch", "branch"), ("assignee", "assignee")] {
        if !wish[field].is_null() {
            say!("{label}: {}", text_of(&wish[field]));
        }
    }
    let groups = wish["groups"].as_array().cloned().unwrap_or_default();
    if groups.is_empty() {
        say!("no plan yet");
    }
    for group in groups {
        let after: Vec<String> = group["depends_on"].as_array().into_iter().flatten().map(text_of).collect();
        let after = if after.is_empty() { String::new() } else { format!(" (after {})", after.join(", ")) };
        say!("  {} [{}] {}{after}", text_of(&group["key"]), text_of(&group["status"]), text_of(&group["title"]));
    }
}

/// A table with a header, or each row as a JSON line.
fn print_rows(rows: &[Value], json: bool, header: &[&str], cells: impl Fn(&Value) -> Vec<String>) {
    if json {
        rows.iter().for_each(|row| say!("{row}"));
        return;
    }
    let table: Vec<Vec<String>> = rows.iter().map(cells).collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| table.iter().map(|r| r[i].chars().count()).chain([header[i].len()]).max().unwrap_or(0))
        .collect();
    let print = |row: Vec<String>| {
        let last = row.len() - 1;
        let padded: Vec<String> = row
            .into_iter()
            .enumerate()
            .map(|(i, c)| if i == last { c } else { format!("{c:<w$}", w = widths[i]) })
            .collect();
        say!("{}", padded.join("  "));
    };
    print(header.iter().map(|h| (*h).to_owned()).collect());
    table.into_iter().for_each(print);
}

/// A JSON value as a cell: strings as they are, null as `-`.
/// A timestamp as how long ago it was ("3 min ago"); `-` when there is none.
fn ago(value: &Value) -> String {
    let at = value.as_str().and_then(|v| chrono::DateTime::parse_from_rfc3339(v).ok());
    at.map_or_else(|| text(value), |at| crate::domain::when::ago(at.to_utc(), chrono::Utc::now()))
}

fn text(value: &Value) -> String {
    match value {
        Value::Null => "-".to_owned(),
        other => text_of(other),
    }
}

fn text_of(value: &Value) -> String {
    value.as_str().map(str::to_owned).unwrap_or_else(|| value.to_string())
}

/// A text's first line, cut to fit a table.
fn line(value: &Value) -> String {
    let first = text(value).lines().next().unwrap_or("").to_owned();
    match first.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &first[..cut]),
        None => first,
    }
}

fn with_query(path: &str, params: &[(&str, Option<String>)]) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    for (name, value) in params {
        if let Some(value) = value {
            query.append_pair(name, value);
        }
    }
    match query.finish() {
        q if q.is_empty() => path.to_owned(),
        q => format!("{path}?{q}"),
    }
}

/// A name as one path segment: anything but a slug's characters is escaped.
fn path_segment(name: &str) -> String {
    form_urlencoded::byte_serialize(name.as_bytes()).collect()
}
