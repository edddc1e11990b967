//! `braid eval …`: evaluations that reproduce the seed papers' studies.
//!
//! * `braid eval predictors` — seed 000 §VI-A (Fig. 7): average predictors
//!   (MA, EWMA, SMA) judged by mean relative error, the percentile predictor
//!   judged by how often its promise is broken, on real bandwidth traces.
//!   The study on files is [`braid_sim::study`]; this module parses
//!   flags and prints its tables or JSON.
//! * `braid eval synthetic` — the same study on the throughput a greedy
//!   flow measures over a simulated synthetic path (no files needed).

mod predictors;
mod synthetic;

pub use predictors::PredictorsArgs;
pub use synthetic::SyntheticArgs;

/// Evaluation subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum EvalCommand {
    /// The predictor study of seed 000 §VI-A (Fig. 7) on real traces: mean
    /// relative error of MA/EWMA/SMA, violation rate of the percentile
    /// predictor's promise at each probability, and the seed's own test.
    Predictors(PredictorsArgs),
    /// The same study on a simulated path whose capacity is a seeded
    /// log-normal process (needs no files): a greedy flow measures it every
    /// 100 ms, then the predictors are judged on what it measured.
    Synthetic(SyntheticArgs),
}

/// Runs an evaluation subcommand.
///
/// # Errors
///
/// A missing or unreadable trace, a malformed trace (naming the file and
/// line), inconsistent flags, or a trace too short for the window.
pub fn run(cmd: EvalCommand) -> anyhow::Result<()> {
    match cmd {
        EvalCommand::Predictors(args) => predictors::run(args),
        EvalCommand::Synthetic(args) => synthetic::run(args),
    }
}
