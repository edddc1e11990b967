//! `braid`: the command-line tool. A thin layer over the libraries:
//! main → args (clap) → validated config → `cmd::*`. User errors are one
//! clear line on stderr and a non-zero exit code.

mod args;
mod cmd;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    init_tracing(cli.verbose);
    match cmd::run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // `{:#}` prints the whole context chain on one line:
            // "reading trace foo.tsv: line 3: ..."
            eprintln!("braid: error: {err:#}");
            ExitCode::FAILURE
        }
    }
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
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}
