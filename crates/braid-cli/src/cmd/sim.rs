//! `braid sim …`. Being built; see issue 2 §4.

/// Simulator subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum SimCommand {
    /// Run a scenario file.
    Run {
        /// The scenario (TOML).
        file: std::path::PathBuf,
    },
}

/// Runs a simulator subcommand.
pub fn run(_cmd: SimCommand) -> anyhow::Result<()> {
    anyhow::bail!("braid sim is not built yet")
}
