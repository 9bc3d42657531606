//! A provider's `sandbox`: how much of the machine its agents see. `none` runs the agent as the
//! server's user with everything that user can reach; `bwrap` (the built-in agent CLIs' default
//! where bubblewrap is installed) runs it under bubblewrap with a filesystem of its own: the
//! system read-only (`/usr`, `/etc`, …), its clone and its own directory (token, provider
//! configuration) writable, the tools on its `PATH`, the project's repository (its clone borrows
//! the objects) and the `switchyard` binary read-only, and an empty `/tmp` and home, in
//! namespaces of its own and with no capabilities. Other agents' clones and tokens, the data
//! directory and the tmux socket are not there. `network = "none"` also takes the network away
//! (a separate network namespace has a loopback of its own); the Switchyard API stays reachable
//! on its Unix socket, bound in alone ([`Visible::api_socket`]), where the node serves one. The
//! merge queue's gate runs in a sandbox of the same making ([`gate`]).

use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sandbox {
    #[default]
    None,
    Bwrap,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// The machine's network, as any process of the server's user has it.
    #[default]
    Host,
    /// No network at all (only a loopback of its own): the API only on its Unix socket.
    None,
}

/// The system, read-only in every sandbox (each only when it exists).
const SYSTEM: [&str; 8] = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/opt"];

/// What one agent's sandbox shows.
#[derive(Debug, Clone)]
pub struct Visible<'a> {
    /// Its clone (or the repository it works in): writable, and where it starts.
    pub workdir: &'a Path,
    /// Its own directory: its token and its provider's configuration, writable.
    pub own_dir: &'a Path,
    /// Shown read-only: the project's repository, the `switchyard` binary, the tools.
    pub read_only: Vec<PathBuf>,
    /// An empty, writable home (the agent's `HOME`), when there is one.
    pub home: Option<&'a Path>,
    /// The API's Unix socket, shown to an agent without a network so it still reaches the API
    /// (connecting needs write access to the socket file).
    pub api_socket: Option<&'a Path>,
}

impl Visible<'_> {
    /// The directories of a `PATH` value, to show read-only: a `node_modules/.bin` brings its
    /// `node_modules` (its entries are links into it).
    pub fn tools(path: &str) -> Vec<PathBuf> {
        std::env::split_paths(path)
            .filter(|dir| dir.is_absolute() && !SYSTEM.iter().any(|s| dir.starts_with(s)))
            .map(|dir| match (dir.file_name(), dir.parent()) {
                (Some(name), Some(parent)) if name == ".bin" => parent.to_path_buf(),
                _ => dir,
            })
            .collect()
    }
}

/// Whether bubblewrap is installed here: `bwrap` on Switchyard's own `PATH`. The built-in agent
/// CLIs run under it where it is; a node without it says so (its log, `/status`, the overview).
pub fn bubblewrap_installed() -> bool {
    crate::programs::on_own_path("bwrap").is_absolute()
}

/// `argv` as it runs under `sandbox`.
pub fn wrap(sandbox: Sandbox, network: Network, visible: &Visible, argv: Vec<String>) -> Vec<String> {
    match sandbox {
        Sandbox::None => argv,
        Sandbox::Bwrap => bwrap(network, visible, argv),
    }
}

fn bwrap(network: Network, visible: &Visible, argv: Vec<String>) -> Vec<String> {
    // Not `--new-session`: it takes the pane's terminal from the agent, so the terminal's Ctrl-C and
    // resizes reach bubblewrap instead (a Ctrl-C closed the pane); what it guards against, TIOCSTI,
    // can only type into the agent's own pane, which bwrap runs alone. Not `--die-with-parent`: a
    // closing pane hangs up bwrap first, and its death killed the agent before the agent's own
    // hang-up handler ran (Claude Code lost its session's transcript). The agent ends on the
    // hang-up itself.
    let mut args = confined(network);
    if let Some(home) = visible.home {
        args.extend(["--tmpfs".to_owned(), home.to_string_lossy().into_owned()]);
    }
    for path in &visible.read_only {
        bind(&mut args, "--ro-bind-try", path);
    }
    bind(&mut args, "--bind", visible.workdir);
    bind(&mut args, "--bind", visible.own_dir);
    if let Some(socket) = visible.api_socket {
        bind(&mut args, "--bind", socket);
    }
    args.extend(["--chdir".to_owned(), visible.workdir.to_string_lossy().into_owned(), "--".to_owned()]);
    args.extend(argv);
    args
}

/// What every sandbox starts with: namespaces of its own, the network or not, the system
/// read-only and an empty `/tmp`. Later mounts go on top of earlier ones: the empty places first,
/// then what is shown in them.
fn confined(network: Network) -> Vec<String> {
    // No capabilities (as root, bubblewrap keeps the caller's: the agent could remount what it is
    // shown read-only, make device nodes, move refs in the project's repository), in a user
    // namespace of its own.
    let mut args: Vec<String> = [
        "bwrap",
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
    ]
    .map(String::from)
    .to_vec();
    if network == Network::None {
        args.push("--unshare-net".into());
    }
    for dir in SYSTEM {
        bind(&mut args, "--ro-bind-try", Path::new(dir));
    }
    args.extend(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"].map(String::from));
    args
}

/// `argv`, a merge gate (code from an agent's branch), under bubblewrap: the scratch clone at
/// `scratch` writable but its `.git` read-only (what the server's git reads there next), `read_only`
/// shown (the project's repository, whose objects the clone borrows, and the tools), an empty
/// `/tmp` and `home`, no capability at all and a session of its own (no terminal to type into).
/// Nothing of the data directory but the scratch clone, so no agent's token.
pub fn gate(
    network: Network,
    scratch: &Path,
    read_only: &[PathBuf],
    home: Option<&Path>,
    argv: Vec<String>,
) -> Vec<String> {
    let mut args = confined(network);
    args.extend(["--die-with-parent", "--new-session"].map(String::from));
    if let Some(home) = home {
        args.extend(["--tmpfs".to_owned(), home.to_string_lossy().into_owned()]);
    }
    for path in read_only {
        bind(&mut args, "--ro-bind-try", path);
    }
    bind(&mut args, "--bind", scratch);
    bind(&mut args, "--ro-bind-try", &scratch.join(".git"));
    args.extend(["--chdir".to_owned(), scratch.to_string_lossy().into_owned(), "--".to_owned()]);
    args.extend(argv);
    args
}

/// `HOW PATH PATH`: `path` shown at the same place inside.
fn bind(args: &mut Vec<String>, how: &str, path: &Path) {
    let path = path.to_string_lossy().into_owned();
    args.extend([how.to_owned(), path.clone(), path]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visible() -> Visible<'static> {
        Visible {
            workdir: Path::new("/data/clones/fox"),
            own_dir: Path::new("/data/agents/fox"),
            read_only: vec![PathBuf::from("/srv/repo")],
            home: Some(Path::new("/home/sy")),
            api_socket: None,
        }
    }

    fn after<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
        args.windows(2).filter(|w| w[0] == flag).map(|w| w[1].as_str()).collect()
    }

    #[test]
    fn no_sandbox_leaves_the_command_alone() {
        let argv = vec!["claude".to_owned()];
        assert_eq!(wrap(Sandbox::None, Network::None, &visible(), argv.clone()), argv);
    }

    #[test]
    fn bwrap_shows_the_clone_and_own_directory_writable_and_the_rest_read_only() {
        let args = wrap(Sandbox::Bwrap, Network::Host, &visible(), vec!["claude".into(), "--x".into()]);
        assert_eq!(args[0], "bwrap");
        assert_eq!(after(&args, "--bind"), ["/data/clones/fox", "/data/agents/fox"]);
        assert!(after(&args, "--ro-bind-try").contains(&"/srv/repo"));
        assert!(after(&args, "--ro-bind-try").contains(&"/usr"));
        assert_eq!(after(&args, "--tmpfs"), ["/tmp", "/home/sy"]);
        assert_eq!(after(&args, "--chdir"), ["/data/clones/fox"]);
        assert!(!args.contains(&"--unshare-net".to_owned()));
        assert_eq!(after(&args, "--cap-drop"), ["ALL"], "no capabilities, whoever runs it");
        assert!(args.contains(&"--unshare-user".to_owned()));
        assert_eq!(&args[args.len() - 3..], ["--", "claude", "--x"]);
        // The home's tmpfs comes before what is bound inside it.
        let home = args.iter().position(|a| a == "/home/sy").expect("home");
        let clone = args.iter().position(|a| a == "/data/clones/fox").expect("clone");
        assert!(home < clone);
    }

    #[test]
    fn a_gate_writes_its_scratch_clone_but_not_its_git_directory_and_keeps_no_capability() {
        let read_only = [PathBuf::from("/srv/repo.git")];
        let scratch = Path::new("/data/merge-queue/shop/main");
        let args = gate(Network::None, scratch, &read_only, Some(Path::new("/home/sy")), vec!["sh".into()]);
        assert_eq!(after(&args, "--bind"), ["/data/merge-queue/shop/main"]);
        let shown = after(&args, "--ro-bind-try");
        assert!(shown.contains(&"/srv/repo.git") && shown.contains(&"/usr"), "{shown:?}");
        assert_eq!(shown.last(), Some(&"/data/merge-queue/shop/main/.git"), "read-only over the writable clone");
        assert_eq!(after(&args, "--cap-drop"), ["ALL"]);
        assert_eq!(after(&args, "--tmpfs"), ["/tmp", "/home/sy"]);
        assert!(args.contains(&"--unshare-net".to_owned()) && args.contains(&"--die-with-parent".to_owned()));
        assert!(args.contains(&"--unshare-pid".to_owned()) && args.contains(&"--new-session".to_owned()));
        assert_eq!(&args[args.len() - 2..], ["--", "sh"]);
    }

    #[test]
    fn network_none_unshares_the_network() {
        let args = wrap(Sandbox::Bwrap, Network::None, &visible(), vec!["sh".into()]);
        assert!(args.contains(&"--unshare-net".to_owned()));
    }

    #[test]
    fn tools_are_the_path_outside_the_system_and_node_bins_bring_their_modules() {
        let tools = Visible::tools("/usr/bin:/opt/x/bin:/work/clis/node_modules/.bin:relative:/root/.cargo/bin");
        assert_eq!(tools, [PathBuf::from("/work/clis/node_modules"), PathBuf::from("/root/.cargo/bin")]);
    }
}
