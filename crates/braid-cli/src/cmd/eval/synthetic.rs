//! `braid eval synthetic`: the predictor study on a simulated path, needing
//! no files (this was `braid demo` before the demo became the session).
//!
//! It simulates a wide-area path whose capacity is a seeded synthetic
//! log-normal process (`braid_sim::DEMO_SCENARIO`), drives a greedy flow over
//! it, and then runs the predictor study of seed 000 §VI-A on the throughput
//! braid measured for that flow in 100 ms samples: how far average predictors
//! miss the next second's rate, and how often the percentile predictor's
//! promise "at least b with probability P" is broken. The same seed gives
//! byte-identical output; `--seed` or `BRAID_SIM_SEED` draws another path.

use anyhow::Context;
use braid_core::estimate::{run_study, StudyConfig};
use braid_core::{Bandwidth, Duration};
use braid_sim::seed::{resolve_seed, SEED_ENV};
use braid_sim::{Report, Scenario, Simulation, DEMO_SCENARIO};
use std::path::PathBuf;

/// The sample interval the study uses (the seed measured every 0.1–1 s).
const SAMPLE: Duration = Duration::from_millis(100);
/// The study's window, in samples (the seed used N = 500 and 1000).
const WINDOW: usize = 500;
/// What is predicted: the mean rate over the next 1 s (10 samples).
const HORIZON: usize = 10;
/// The flow the demo scenario defines.
const FLOW: &str = "bulk";

/// Flags of `braid eval synthetic`.
#[derive(Debug, clap::Args)]
pub struct SyntheticArgs {
    /// Seed of the synthetic path (default: BRAID_SIM_SEED, else the
    /// scenario's fixed seed, so output is reproducible).
    #[arg(long)]
    pub seed: Option<u64>,
    /// How much virtual time to simulate (at least 52s: the study needs a
    /// 50 s window and a 1 s horizon).
    #[arg(long, default_value = "300s")]
    pub duration: Duration,
    /// Also write a plot of capacity and throughput to this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// Runs the study.
///
/// # Errors
///
/// A duration too short for the study, an unparsable `BRAID_SIM_SEED`, or an
/// unwritable SVG path.
pub fn run(args: SyntheticArgs) -> anyhow::Result<()> {
    let needed = SAMPLE * (WINDOW + HORIZON + 1) as u64;
    anyhow::ensure!(
        args.duration >= needed,
        "--duration {} is too short: the predictor study needs at least {needed}",
        args.duration
    );
    let scenario =
        Scenario::from_toml_str(DEMO_SCENARIO).context("built-in synthetic-path scenario")?;
    let env = std::env::var(SEED_ENV).ok();
    let seed =
        resolve_seed(args.seed, env.as_deref(), scenario.seed).map_err(anyhow::Error::msg)?;
    let mut scenario = scenario.with_seed(seed);
    // Flows that ran to the end of the built-in scenario run to the end of
    // the requested one.
    for flow in &mut scenario.flows {
        if flow.stop >= scenario.duration {
            flow.stop = args.duration;
        }
    }
    scenario.duration = args.duration;
    scenario.bin = SAMPLE;

    println!("braid eval synthetic: a greedy flow over a simulated wide-area path whose capacity");
    println!("varies (log-normal, mean 10 Mbit/s, CoV 0.4, correlation time 2 s), then");
    println!("seed 000's predictor study on the throughput measured every {SAMPLE}.");
    println!();
    let report = Report::from_run(&Simulation::new(&scenario)?.run());
    print!("{}", report.to_table());

    let flow = report
        .flow(FLOW)
        .with_context(|| format!("the demo scenario has no flow {FLOW:?}"))?;
    let series: Vec<Bandwidth> = flow
        .series_mbps
        .iter()
        .map(|&mbps| Bandwidth::from_mbps_f64(mbps))
        .collect();
    let config = StudyConfig {
        window: WINDOW,
        horizon: HORIZON,
        ..StudyConfig::default()
    };
    let study = run_study(&series, &config).context("predictor study")?;
    println!();
    println!(
        "Predictor study on flow {FLOW:?}: {} samples of {SAMPLE}, window {WINDOW} samples, {} predictions",
        study.samples, study.positions
    );
    println!();
    print!("{}", braid_sim::study::study_tables(&study, "1s"));

    if let Some(path) = args.svg {
        std::fs::write(&path, report.to_svg())
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
