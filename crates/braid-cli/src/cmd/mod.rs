//! One module per subcommand.

pub mod demo;
pub mod eval;
pub mod sim;

use crate::args::Command;

/// Runs one subcommand.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Demo(args) => demo::run(args),
        Command::Sim(cmd) => sim::run(cmd),
        Command::Eval(cmd) => eval::run(cmd),
    }
}
