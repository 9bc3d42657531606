use std::process::ExitCode;

use switchyard::cli::args::{Cli, Command};
use switchyard::cli::operator::OperatorCommand;

fn main() -> ExitCode {
    // A hook must never fail Claude Code: run it before anything (settings, logging) that could.
    if std::env::args_os().nth(1).is_some_and(|arg| arg == "hook") {
        switchyard::cli::hook::run();
        return ExitCode::SUCCESS;
    }
    let cli = Cli::from_env();
    // Clients of the API need no settings, logging or database: run them as they are.
    let client = match cli.command {
        Command::Msg(command) => switchyard::cli::mail::msg(command, cli.global.listen),
        Command::Chat(command) => switchyard::cli::mail::chat(command, cli.global.listen),
        command => match OperatorCommand::of(command).map_err(switchyard::cli::report::ReportCommand::of) {
            Ok(operator) => switchyard::cli::operator::run(operator, &cli.global),
            Err(Ok(report)) => switchyard::cli::report::run(report, cli.global.listen),
            Err(Err(command)) => return serve(Cli { command, ..cli }),
        },
    };
    match client {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(cli: Cli) -> ExitCode {
    // Everything this process and what it starts (git making clones, tmux, agents' tools)
    // creates is its user's only: the data directory holds message bodies, clones, tokens and
    // API keys, and as root its parent is passable by every user (see `data_dir::ensure`). Set
    // here, before any thread exists: the umask is the whole process's.
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let settings = match cli.global.validate() {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    switchyard::telemetry::init(settings.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(switchyard::cli::run(cli.command, settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
