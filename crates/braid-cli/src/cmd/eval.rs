//! `braid eval …`. Being built; see issue 2 §3.

/// Evaluation subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum EvalCommand {
    /// The predictor study of seed 000 §VI-A on real traces.
    Predictors {
        /// One trace file.
        #[arg(long)]
        trace: Option<std::path::PathBuf>,
    },
}

/// Runs an evaluation subcommand.
pub fn run(_cmd: EvalCommand) -> anyhow::Result<()> {
    anyhow::bail!("braid eval is not built yet")
}
