//! `braid demo`: the system on a built-in default, needing no files. The
//! session, its runs and its table are [`braid_sim::session::demo`]; this
//! is flags and output. Same seed, same output; `--seed` or
//! `BRAID_SIM_SEED` draws other cross traffic; `--format json` prints one
//! object with a `runs` array of `braid sim session --format json`
//! objects, one per scheduler.

use anyhow::Context;
use braid_core::Duration;
use braid_sim::seed::{resolve_seed, SEED_ENV};
use braid_sim::session::demo::{demo_scenario, demo_table, run_demo, DemoSettings, DEMO_SESSION};
use braid_sim::session::render::chart;
use braid_sim::session::{SessionReport, SessionScenario};
use std::io::Write as _;
use std::path::PathBuf;

use super::sim_session::SessionFormat;

/// Flags of `braid demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Seed of the cross traffic (default: BRAID_SIM_SEED, else 1, so the
    /// output is reproducible).
    #[arg(long)]
    pub seed: Option<u64>,
    /// How much virtual time to simulate (10s to 600s).
    #[arg(long, default_value = "30s")]
    pub duration: Duration,
    /// Also write a plot of per-stream delivered rate over time (both
    /// schedulers) to this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Best effort's queueing-delay target on paths that carry guarantees
    /// (default 30ms), or `off` for the seed's rule: what PGOS holds
    /// without bulk that yields.
    #[arg(long, value_name = "DELAY|off", value_parser = super::sim_session::parse_bulk_yield)]
    pub bulk_yield: Option<super::sim_session::BulkYield>,
    /// Step size of the promises' correction from the guarantees'
    /// outcomes (default 0.05), or `off`.
    #[arg(long, value_name = "GAMMA|off", value_parser = super::sim_session::parse_calibration)]
    pub calibration: Option<super::sim_session::Calibration>,
    /// Output format: text tables, or one JSON object with a `runs` array
    /// (one `braid sim session --format json` object per scheduler).
    #[arg(long, value_enum, default_value_t = SessionFormat::Text)]
    pub format: SessionFormat,
}

/// `braid demo --format json`: every run, PGOS first.
#[derive(serde::Serialize)]
struct DemoJson<'a> {
    runs: &'a [SessionReport],
}

/// Runs the demo.
///
/// # Errors
/// A duration outside 10–600 s, an unparsable `BRAID_SIM_SEED`, or an
/// unwritable SVG path.
pub fn run(args: DemoArgs) -> anyhow::Result<()> {
    let builtin = SessionScenario::from_toml_str(DEMO_SESSION).context("built-in demo session")?;
    let env = std::env::var(SEED_ENV).ok();
    let seed = resolve_seed(args.seed, env.as_deref(), builtin.seed).map_err(anyhow::Error::msg)?;
    let scenario = demo_scenario(&DemoSettings {
        seed: Some(seed),
        duration: args.duration,
        bulk_yield: args.bulk_yield.map(|y| y.0),
        calibration: args.calibration.map(|g| g.0),
    })
    .map_err(|e| anyhow::anyhow!("--{}", e.message))?;
    let reports = run_demo(&scenario)?;
    // A closed pipe (`| head`) is not an error worth a panic.
    let mut out = std::io::stdout().lock();
    let text = match args.format {
        SessionFormat::Text => demo_table(&scenario, &reports),
        // Plain data of numbers, strings and options: serialisation cannot fail.
        SessionFormat::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&DemoJson { runs: &reports })
                .context("writing the demo as JSON")?
        ),
    };
    match out.write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        other => other.context("writing the demo table")?,
    }
    if let Some(path) = args.svg {
        let runs: Vec<&SessionReport> = reports.iter().collect();
        let c = chart("braid demo: delivered per stream, PGOS vs MSFQ", &runs);
        std::fs::write(&path, c.render()).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
