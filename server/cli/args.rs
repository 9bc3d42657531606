//! The command line: the subcommands and their arguments. The settings every subcommand shares
//! (flags and environment) are [`crate::config::GlobalArgs`].

use clap::{Parser, Subcommand};

use crate::config::GlobalArgs;

#[derive(Debug, Parser)]
#[command(name = "switchyard", version, about = "Control plane for fleets of AI coding agents in tmux")]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands that call the API (or run as a hook): of the settings they use `--listen`
/// only, and `attach` also the data directory and tmux socket, so their `--help` hides the rest.
const CLIENTS: &[(&str, &[&str])] = &[
    ("hook", &[]),
    ("msg", &["listen"]),
    ("chat", &["listen"]),
    ("group", &["listen"]),
    ("review", &["listen"]),
    ("wish", &["listen"]),
    ("fix", &["listen"]),
    ("task", &["listen"]),
    ("agents", &["listen"]),
    ("tasks", &["listen"]),
    ("attach", &["listen", "data_dir", "tmux_socket"]),
];

impl Cli {
    /// The command line as clap builds it, with three changes to `--help`: an environment
    /// variable's value is never printed (`[env: X=]` for unset ones was noise, and values may be
    /// secret); `switchyard --help` lists the commands, not the settings; and each command's help
    /// lists the settings it uses (a client its few, `serve` all). The settings stay accepted
    /// everywhere (they are global): each command gets its own copies, shown or hidden, which clap
    /// keeps instead of propagating the top level's hidden ones.
    pub fn command_line() -> clap::Command {
        let command = <Cli as clap::CommandFactory>::command().mut_args(|arg| {
            if arg.is_global_set() {
                arg.hide_env_values(true)
            } else {
                arg
            }
        });
        let settings: Vec<clap::Arg> = command.get_arguments().filter(|a| a.is_global_set()).cloned().collect();
        let names: Vec<String> = command.get_subcommands().map(|c| c.get_name().to_owned()).collect();
        let command = names.iter().fold(command, |command, name| {
            let used = CLIENTS.iter().find(|(client, _)| client == name).map(|(_, used)| *used);
            let copies = settings.iter().map(|a| {
                let shown = used.is_none_or(|used| used.contains(&a.get_id().as_str()));
                a.clone().hide(!shown)
            });
            command.mut_subcommand(name, |sub| sub.args(copies))
        });
        command.mut_args(|arg| if arg.is_global_set() { arg.hide(true) } else { arg })
    }

    /// Parses the process's arguments (exits with clap's message on an error, or after `--help`).
    pub fn from_env() -> Cli {
        let matches = Cli::command_line().get_matches();
        <Cli as clap::FromArgMatches>::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the API, the dashboard and the worker.
    Serve,
    /// Run the worker alone (one per machine that hosts agents).
    Worker,
    /// Apply database migrations and exit.
    Migrate,
    /// Manage API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Forward a Claude Code hook (its JSON on stdin) to Switchyard as the agent in
    /// SWITCHYARD_AGENT, with SWITCHYARD_URL and SWITCHYARD_TOKEN. Always exits 0.
    Hook,
    /// Send and read messages: as the agent in SWITCHYARD_AGENT (its token file), or as the
    /// operator with SWITCHYARD_TOKEN; the API at SWITCHYARD_URL.
    #[command(subcommand)]
    Msg(MsgCommand),
    /// Post to and read a team's chat (an agent's own team by default).
    #[command(subcommand)]
    Chat(ChatCommand),
    /// An engineer agent reports on its group.
    #[command(subcommand)]
    Group(GroupCommand),
    /// A reviewer agent gives its verdict on its wish.
    #[command(subcommand)]
    Review(ReviewCommand),
    /// Wishes: make, show and list them; a planner agent gives its draft's plan.
    #[command(subcommand)]
    Wish(WishCommand),
    /// List the agents: name, state, provider, task, last activity.
    Agents {
        /// Only this project's agents.
        #[arg(long)]
        project: Option<String>,
        /// Only agents in this state (`idle`, `working`, `permission`, …).
        #[arg(long)]
        state: Option<String>,
        /// Print the agents as JSON, one per line.
        #[arg(long)]
        json: bool,
    },
    /// Open an agent's tmux pane in this terminal to take over (the agent must run on this node).
    Attach {
        /// The agent's name.
        agent: String,
    },
    /// List the tasks: id, status, assignee, title.
    Tasks {
        /// Only this project's tasks.
        #[arg(long)]
        project: Option<String>,
        /// Only tasks in this status (`blocked`, `ready`, `in_progress`, …).
        #[arg(long)]
        status: Option<String>,
        /// Print the tasks as JSON, one per line.
        #[arg(long)]
        json: bool,
    },
    /// A fix agent reports its fix.
    #[command(subcommand)]
    Fix(FixCommand),
    /// An agent reports on its standalone task.
    #[command(subcommand)]
    Task(TaskCommand),
}

#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// Your group is done: sends this clone's HEAD to your branch (through the API), then reports (it needs new commits).
    Done {
        #[arg(long, default_value = "")]
        summary: String,
    },
    /// Sends your work so far (this clone's HEAD) to your branch without reporting: kept on the
    /// project's repository, where you — or an agent taking over if your machine is lost — go on from it.
    Push,
    /// You cannot do your group: a person takes over.
    Blocked {
        #[arg(long)]
        reason: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ReviewCommand {
    /// The wish's branch passes review.
    Pass {
        #[arg(long, default_value = "")]
        notes: String,
    },
    /// The wish's branch fails review; the notes (file:line references) go to a fix agent.
    Fail {
        /// A file holding the notes.
        #[arg(long, conflicts_with = "notes")]
        notes_file: Option<std::path::PathBuf>,
        #[arg(long)]
        notes: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum WishCommand {
    /// Make a draft wish from TEXT (its first line is the title); prints its slug.
    New {
        /// What you wish for; its first line is the title, all of it the description. `-`: read
        /// it from standard input.
        text: String,
        /// The project's slug.
        #[arg(long)]
        project: String,
        /// The wish's slug; default: made from the title.
        #[arg(long)]
        slug: Option<String>,
    },
    /// Show a wish: its state, phase, branch and groups.
    Show {
        slug: String,
        /// Print the wish as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List wishes, oldest first.
    Ls {
        /// Only wishes in this state (`draft`, `executing`, `merged`, …).
        #[arg(long)]
        state: Option<String>,
        /// Only this project's wishes.
        #[arg(long)]
        project: Option<String>,
        /// Print the wishes as JSON, one per line.
        #[arg(long)]
        json: bool,
    },
    /// Gives your draft's plan from a YAML or JSON file: `groups: [{key, title, goal, depends_on, provider}]`.
    Plan {
        #[arg(long)]
        file: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum FixCommand {
    /// Your fix is done: sends this clone's HEAD to your branch (the wish's), then reports.
    Done {
        #[arg(long, default_value = "")]
        summary: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Your task is done.
    Done {
        #[arg(long, default_value = "", alias = "summary")]
        result: String,
    },
    /// Your task failed.
    Fail {
        #[arg(long)]
        reason: String,
    },
    /// Ask a person; the task waits for the answer, which arrives as a message.
    Ask { question: String },
}

#[derive(Debug, Subcommand)]
pub enum MsgCommand {
    /// Send a message (BODY, or standard input when BODY is `-` or absent); prints its id.
    Send {
        /// An agent's name, or `operator`.
        #[arg(long)]
        to: String,
        body: Option<String>,
    },
    /// List messages to you (an agent's inbox, or the operator's), oldest first.
    Inbox {
        /// Only messages not yet marked read.
        #[arg(long)]
        unread: bool,
        /// Mark the listed messages read.
        #[arg(long)]
        mark_read: bool,
        /// Another agent's inbox (operator only).
        #[arg(long)]
        agent: Option<String>,
        /// Print the messages as JSON, one per line.
        #[arg(long)]
        json: bool,
    },
    /// Mark a message read.
    Read { id: uuid::Uuid },
}

#[derive(Debug, Subcommand)]
pub enum ChatCommand {
    /// Post BODY (or standard input when BODY is `-` or absent) to the team's chat.
    Post {
        body: Option<String>,
        /// The team; default: the agent's own team.
        #[arg(long)]
        team: Option<String>,
    },
    /// Print the team's chat, oldest first.
    Read {
        /// The team; default: the agent's own team.
        #[arg(long)]
        team: Option<String>,
        /// Print the posts as JSON, one per line.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token and print it (it is shown only this once).
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, value_enum, default_value_t = crate::auth::Scope::Read)]
        scope: crate::auth::Scope,
    },
    /// List tokens (never their secrets).
    List,
    /// Revoke a token by id or name.
    Revoke { token: String },
}
