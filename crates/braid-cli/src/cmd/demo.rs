//! `braid demo`: the built-in default job. Being built; see issue 2.

/// Flags of `braid demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Seed for the synthetic path (default: fixed, so output is reproducible).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Runs the demo.
pub fn run(_args: DemoArgs) -> anyhow::Result<()> {
    anyhow::bail!("braid demo is not built yet")
}
