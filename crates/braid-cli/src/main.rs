//! `braid`: the command-line tool. A thin layer over the libraries:
//! main → args (clap) → validated config → `cmd::*`. User errors are one
//! clear line on stderr and a non-zero exit code.

mod alloc_tuning;
mod args;
mod cmd;
mod pipe_buffer;
mod shutdown;

use clap::error::ErrorKind;
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    alloc_tuning::tune();
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return usage_error(err),
    };
    init_tracing(cli.verbose);
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => match shutdown::exit_code(&err) {
            // Stopped by a signal before its work was done (see `shutdown`).
            Some(code) => {
                eprintln!("braid: {}", one_line(&err));
                ExitCode::from(code)
            }
            None => {
                eprintln!("braid: error: {}", one_line(&err));
                ExitCode::FAILURE
            }
        },
    }
}

/// The whole context chain on one line ("reading trace foo.tsv: line 3:
/// …"), each cause once: many errors print their source in their own
/// message as well, which `{:#}` would repeat.
fn one_line(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// Runs one subcommand (the dispatch lives here, above `args` and `cmd`,
/// so neither of them imports the other's dispatch).
fn run(command: args::Command) -> anyhow::Result<()> {
    use args::Command;
    match command {
        Command::Demo(args) => cmd::demo::run(args),
        Command::Sim(c) => cmd::sim::run(c),
        Command::Eval(c) => cmd::eval::run(c),
        Command::Send(args) => cmd::send::run(*args),
        Command::Recv(args) => cmd::recv::run(args),
        Command::Perf(c) => cmd::perf::run(c),
        Command::Keygen(args) => cmd::keygen::run(args),
        Command::Emulate(args) => cmd::emulate::run(*args),
        Command::Stream(args) => cmd::stream::run(*args),
        Command::Serve(args) => cmd::serve::run(*args),
        Command::Relay(args) => cmd::relay::run(*args),
        Command::Broker(args) => cmd::broker::run(*args),
        Command::Reserve(args) => cmd::reserve::run(*args),
    }
}

/// Help and version go to stdout as clap prints them; a usage error becomes
/// one line on stderr (clap's multi-line text folded, the usage block left
/// out) and exit code 2, so scripts and logs see one clear line.
fn usage_error(err: clap::Error) -> ExitCode {
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = err.print();
        return if err.use_stderr() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    let text = err.to_string();
    let line = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:"))
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .collect::<Vec<_>>()
        .join(" ");
    let line = line.strip_prefix("error: ").unwrap_or(&line);
    eprintln!("braid: error: {line} (try --help)");
    ExitCode::from(2)
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("BRAID_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a person at a terminal, never in a log file.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .init();
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_cause_already_in_the_message_is_not_printed_again() {
        /// An error that prints its source in its own message too.
        #[derive(Debug)]
        struct Db(std::io::Error);
        impl std::fmt::Display for Db {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "database: {}", self.0)
            }
        }
        impl std::error::Error for Db {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let io = std::io::Error::other("expected 4 bytes, got 1");
        let e = anyhow::Error::from(Db(io)).context("starting the broker");
        assert_eq!(
            super::one_line(&e),
            "starting the broker: database: expected 4 bytes, got 1"
        );
        let plain = anyhow::anyhow!("no such file").context("reading x.tsv");
        assert_eq!(super::one_line(&plain), "reading x.tsv: no such file");
    }
}
