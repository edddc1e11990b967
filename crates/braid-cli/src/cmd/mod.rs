//! One module per subcommand.

pub mod demo;
pub mod eval;
pub mod perf;
pub mod recv;
pub mod send;
pub mod sim;
pub mod sim_rudp;
pub mod sim_tables;

use crate::args::Command;

/// Runs one subcommand.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Demo(args) => demo::run(args),
        Command::Sim(cmd) => sim::run(cmd),
        Command::Eval(cmd) => eval::run(cmd),
        Command::Send(args) => send::run(args),
        Command::Recv(args) => recv::run(args),
        Command::Perf(cmd) => perf::run(cmd),
    }
}
