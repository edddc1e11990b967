//! `braid sim session FILE.toml`: run a session scenario (issue 10 §2) —
//! streams with specs over measured paths at packet level — and print per
//! stream and per path what was asked, promised and delivered. A thin
//! layer over `braid_sim::session`.

use anyhow::Context;
use braid_core::session::SchedulerKind;
use braid_sim::seed::{resolve_seed, SEED_ENV};
use braid_sim::session::report::run as run_session;
use braid_sim::session::SessionScenario;
use std::io::Write as _;
use std::path::PathBuf;

/// Output format of `braid sim session`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SessionFormat {
    /// Human-readable tables.
    #[value(alias = "table")]
    Text,
    /// One JSON object with `streams` and `paths` arrays.
    Json,
}

/// Flags of `braid sim session`.
#[derive(Debug, clap::Args)]
pub struct SessionArgs {
    /// The session scenario (TOML); see scenarios/README.md.
    pub file: PathBuf,
    /// Scheduler (overrides the scenario's): pgos, msfq, wfq, rr or minrtt.
    #[arg(long, value_parser = parse_scheduler)]
    pub scheduler: Option<SchedulerKind>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = SessionFormat::Text)]
    pub format: SessionFormat,
    /// Write one CSV row per stream to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write a plot of per-stream delivered rate over time to this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Seed (overrides BRAID_SIM_SEED and the scenario's seed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Best effort's queueing-delay target on paths that carry guarantees
    /// (overrides the scenario's `bulk_yield`): a delay such as 30ms (the default), or
    /// `off` for the seed's rule (best effort takes what the congestion
    /// window allows).
    #[arg(long, value_name = "DELAY|off", value_parser = parse_bulk_yield)]
    pub bulk_yield: Option<BulkYield>,
    /// Step size of the promises' correction from the outcomes of the
    /// guarantees (overrides the scenario's `calibration`): a number in
    /// (0, 1] such as 0.05 (the default), or `off` to promise from the
    /// estimate alone.
    #[arg(long, value_name = "GAMMA|off", value_parser = parse_calibration)]
    pub calibration: Option<Calibration>,
}

/// A `--bulk-yield` value: a target delay, or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkYield(pub Option<braid_core::Duration>);

/// Parses `--bulk-yield`: `off` or a delay from 1ms to 10s
/// ([`braid_core::session::bulk_yield::parse_target`], as the scenario key).
pub fn parse_bulk_yield(s: &str) -> Result<BulkYield, String> {
    braid_core::session::bulk_yield::parse_target(s).map(BulkYield)
}

/// A `--calibration` value: a step size, or off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration(pub Option<f64>);

/// Parses `--calibration`: `off` or a step size in (0, 1]
/// ([`braid_core::estimate::parse_gamma`], as the scenario key).
pub fn parse_calibration(s: &str) -> Result<Calibration, String> {
    braid_core::estimate::parse_gamma(s).map(Calibration)
}

/// Parses a scheduler name for clap.
pub fn parse_scheduler(s: &str) -> Result<SchedulerKind, String> {
    s.parse::<SchedulerKind>().map_err(|e| e.to_string())
}

/// Runs `braid sim session`.
///
/// # Errors
/// A scenario that does not load (one line naming the file and line), an
/// unparsable `BRAID_SIM_SEED`, or an output file that cannot be written.
pub fn run(args: SessionArgs) -> anyhow::Result<()> {
    let mut scenario = SessionScenario::from_path(&args.file)?;
    for w in &scenario.warnings {
        eprintln!("braid: warning: {w}");
    }
    let env = std::env::var(SEED_ENV).ok();
    let seed =
        resolve_seed(args.seed, env.as_deref(), scenario.seed).map_err(anyhow::Error::msg)?;
    scenario = scenario.with_seed(seed);
    if let Some(s) = args.scheduler {
        scenario = scenario.with_scheduler(s);
    }
    if let Some(BulkYield(y)) = args.bulk_yield {
        scenario = scenario.with_bulk_yield(y);
    }
    if let Some(Calibration(g)) = args.calibration {
        scenario = scenario.with_calibration(g);
    }
    let report = run_session(&scenario)?;
    let text = match args.format {
        SessionFormat::Text => report.to_table(),
        SessionFormat::Json => format!("{}\n", report.to_json()),
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        other => other.context("writing the report")?,
    }
    if let Some(path) = &args.csv {
        std::fs::write(path, report.to_csv())
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, report.to_svg())
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
