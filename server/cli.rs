//! What each subcommand does. `main` parses the command line and hands over to `run`.

/// `println!` for the commands that print for a person or a pipe: a reader that closed stdout
/// (`switchyard agents --json | head -1`) ends the command quietly with exit 0, where `println!`
/// would panic ("failed printing to stdout: Broken pipe"). Only for commands with nothing to
/// clean up (the API's clients); the `token` commands, which have a database to close, print with
/// [`print_lines`] and go on.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::cli::say_or_exit(format_args!($($arg)*))
    };
}

pub mod args;
pub mod client;
pub mod hook;
pub mod mail;
pub mod operator;
pub mod report;

use tokio_util::sync::CancellationToken;

use crate::auth::Scope;
use crate::cli::args::{Command, TokenCommand};
use crate::config::Settings;
use crate::db::{self, tokens, Database};
use crate::feed::EventFeed;
use crate::{app, Application, Role};

pub async fn run(command: Command, settings: Settings) -> anyhow::Result<()> {
    match command {
        Command::Serve => serve(settings, Role::Serve).await,
        Command::Worker => serve(settings, Role::Worker).await,
        Command::Migrate => {
            with_database(&settings, |db| async move {
                db::migrate(&db).await?;
                println!("migrations applied");
                Ok(())
            })
            .await
        }
        Command::Token(command) => with_database(&settings, |db| token(db, command)).await,
        // `main` runs it before anything else; here only for completeness.
        Command::Hook => {
            tokio::task::spawn_blocking(hook::run).await?;
            Ok(())
        }
        // Clients of the API: `main` runs them before anything else, like `hook`.
        Command::Msg(command) => {
            let listen = settings.listen;
            tokio::task::spawn_blocking(move || mail::msg(command, listen)).await?.map_err(anyhow::Error::msg)
        }
        Command::Chat(command) => {
            let listen = settings.listen;
            tokio::task::spawn_blocking(move || mail::chat(command, listen)).await?.map_err(anyhow::Error::msg)
        }
        command => match report::ReportCommand::of(command) {
            Ok(report) => {
                let listen = settings.listen;
                tokio::task::spawn_blocking(move || report::run(report, listen)).await?.map_err(anyhow::Error::msg)
            }
            // The operator's commands need the global arguments, which `main` has: it runs them.
            Err(other) => anyhow::bail!("`{other:?}` is run by `main`, not here"),
        },
    }
}

async fn serve(settings: Settings, role: Role) -> anyhow::Result<()> {
    let app = Application::build(&settings, role).await?;
    if let Some(addr) = app.api_addr() {
        tracing::info!(%addr, "API and dashboard listening");
        if let Some(first) = app::tokens::create_first_admin(app.pool(), app.feed()).await? {
            // Printed, never logged: the terminal is the one place these secrets appear.
            let secret = first.secret;
            println!("\nFirst start: an admin token was created. It is shown only this once:\n\n    {secret}\n");
            println!(
                "Dashboard login (a one-time link, valid {} h; afterwards paste the token above into the login form):\n\n    http://{addr}/login?code={}\n",
                crate::db::sessions::LOGIN_CODE_HOURS,
                first.login_code
            );
        }
    }
    tracing::info!(addr = %app.status_addr(), "status endpoint listening");
    let shutdown = CancellationToken::new();
    crate::cancel_on_signals(shutdown.clone());
    app.run_until(shutdown).await
}

/// Runs a one-shot command against the database (migrated first), then closes it.
async fn with_database<F, Fut>(settings: &Settings, work: F) -> anyhow::Result<()>
where
    F: FnOnce(sqlx::PgPool) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let (database, _claim) = Database::open_for_command(settings.database()).await?;
    let result = async {
        db::migrate(&database.pool).await?;
        work(database.pool.clone()).await
    }
    .await;
    database.close().await;
    result
}

async fn token(pool: sqlx::PgPool, command: TokenCommand) -> anyhow::Result<()> {
    // Running servers hear of the token's event from this command's own notification.
    let feed = EventFeed::default();
    let mut tx = pool.begin().await?;
    // What was committed is announced (flushed below) even when writing the output failed.
    let printed = match command {
        TokenCommand::Create { name, scope } => {
            let created = app::tokens::create(&mut tx, &name, scope).await.map_err(|e| match e {
                app::Error::Invalid(errors) => {
                    let said: Vec<String> = errors.iter().map(|e| format!("--{} {}", e.field, e.message)).collect();
                    anyhow::anyhow!(said.join("; "))
                }
                app::Error::Conflict { .. } => anyhow::anyhow!("a live token named `{}` exists", name.trim()),
                other => other.into(),
            })?;
            feed.commit(tx).await?;
            let token = created.token;
            eprintln!(
                "created token `{}` ({}, scope {}); it is shown only this once:",
                token.name,
                token.id,
                scope_name(scope)
            );
            // A reader that closed stdout ends the output, not the command.
            print_lines([created.secret])
        }
        TokenCommand::List => {
            let header = format!("{:<36}  {:<24}  {:<6}  {:<20}  state", "id", "name", "scope", "created");
            let rows = tokens::list(&mut tx).await?.into_iter().map(|t| {
                let state = if t.revoked_at.is_some() { "revoked" } else { "live" };
                let created = t.created_at.format("%Y-%m-%d %H:%M:%S");
                format!("{:<36}  {:<24}  {:<6}  {:<20}  {state}", t.id, t.name, t.scope.as_str(), created.to_string())
            });
            // A reader that stops early (`| head`) is no error: the database is closed as usual.
            print_lines(std::iter::once(header).chain(rows))
        }
        TokenCommand::Revoke { token } => {
            let revoked = app::tokens::revoke(&mut tx, &token).await?;
            feed.commit(tx).await?;
            print_lines([format!("revoked token `{}` ({})", revoked.name, revoked.id)])
        }
    };
    feed.flush(pool).await;
    printed.map_err(anyhow::Error::msg)?;
    Ok(())
}

fn scope_name(scope: Scope) -> &'static str {
    scope.as_str()
}

/// Writes one line to stdout; a closed stdout ends the process quietly, exit 0 (see `say!`).
pub fn say_or_exit(line: std::fmt::Arguments) {
    match print_lines([line]) {
        Ok(Printed::All) => {}
        Ok(Printed::Closed) => std::process::exit(0),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

/// Whether the reader took every line.
#[derive(Debug, PartialEq, Eq)]
pub enum Printed {
    All,
    /// The reader closed stdout (`| head`): the output ends there, and is no error.
    Closed,
}

/// Writes lines to stdout, stopping quietly when the reader closed it; any other failure to
/// write is an error.
pub fn print_lines<T: std::fmt::Display>(lines: impl IntoIterator<Item = T>) -> Result<Printed, String> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let written = lines.into_iter().try_for_each(|line| writeln!(out, "{line}")).and_then(|()| out.flush());
    match written {
        Ok(()) => Ok(Printed::All),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Printed::Closed),
        Err(e) => Err(format!("writing to stdout: {e}")),
    }
}
