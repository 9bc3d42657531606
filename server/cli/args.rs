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
    /// Wishes: a planner agent gives its draft's plan.
    #[command(subcommand)]
    Wish(WishCommand),
    /// A fix agent reports its fix.
    #[command(subcommand)]
    Fix(FixCommand),
    /// An agent reports on its standalone task.
    #[command(subcommand)]
    Task(TaskCommand),
}

#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// Your group is done: pushes this clone's HEAD to your branch, then reports (it needs new commits).
    Done {
        #[arg(long, default_value = "")]
        summary: String,
    },
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
    /// Gives your draft's plan from a YAML or JSON file: `groups: [{key, title, goal, depends_on, provider}]`.
    Plan {
        #[arg(long)]
        file: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum FixCommand {
    /// Your fix is done: pushes this clone's HEAD to your branch (the wish's), then reports.
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
