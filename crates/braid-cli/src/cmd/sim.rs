//! `braid sim …`: run simulator scenarios (issue 2 §4). A thin layer over
//! `braid_sim`: load the scenario, pick the seed (`--seed`, then
//! `BRAID_SIM_SEED`, then the file), run, print, write CSV/SVG.

use anyhow::Context;
use braid_sim::seed::{resolve_seed, SEED_ENV};
use braid_sim::{Report, Scenario, Simulation};
use std::path::PathBuf;

/// Output format of `braid sim run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Human-readable tables.
    Table,
    /// JSON (summary; series go to --csv).
    Json,
}

/// Simulator subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum SimCommand {
    /// Run a scenario file and print per-flow throughput, delay and loss.
    Run {
        /// The scenario (TOML); see scenarios/ for examples.
        file: PathBuf,
        /// Write per-bin time series (flows.csv, links.csv) into this directory.
        #[arg(long, value_name = "DIR")]
        csv: Option<PathBuf>,
        /// Write a throughput/capacity plot to this SVG file.
        #[arg(long, value_name = "FILE")]
        svg: Option<PathBuf>,
        /// Seed (overrides BRAID_SIM_SEED and the scenario's seed).
        #[arg(long)]
        seed: Option<u64>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
    },
    /// Run a session scenario: streams with specs over measured paths
    /// (relays, cross traffic, cuts) at packet level; per stream target,
    /// delivered p5/p50/p95, windows meeting the spec; per path promised vs
    /// delivered.
    Session(crate::cmd::sim_session::SessionArgs),
    /// Seed Table II: Atom and Bond1 on path A vs path B (real traces).
    Table2(crate::cmd::sim_tables::TableArgs),
    /// Seed Table III: WFQ vs MSFQ vs PGOS vs OptSched (real traces).
    Table3(crate::cmd::sim_tables::TableArgs),
    /// Seed Table IV: GridFTP blocked/partitioned layouts vs PGOS (real traces).
    Table4(crate::cmd::sim_tables::TableArgs),
    /// Seed Table V: layered video, MSFQ vs PGOS (real frame traces).
    Table5(crate::cmd::sim_tables::TableArgs),
    /// Violation-bound streams: Lemma 2's E[Z] vs realised misses (real traces).
    Violation(crate::cmd::sim_tables::TableArgs),
    /// Seed 002 Tables 3-8: uncoordinated RUDP vs coordinated IQ-RUDP.
    Rudp(crate::cmd::sim_rudp::RudpArgs),
    /// RUDP goodput vs the Reno model (20 Mbit/s, 30 ms RTT, random loss).
    RudpReno(crate::cmd::sim_rudp::RenoArgs),
}

/// Runs a simulator subcommand.
pub fn run(cmd: SimCommand) -> anyhow::Result<()> {
    match cmd {
        SimCommand::Run {
            file,
            csv,
            svg,
            seed,
            format,
        } => {
            let scenario = Scenario::from_path(&file)?;
            let env = std::env::var(SEED_ENV).ok();
            let seed =
                resolve_seed(seed, env.as_deref(), scenario.seed).map_err(anyhow::Error::msg)?;
            let scenario = scenario.with_seed(seed);
            let report = Report::from_run(&Simulation::new(&scenario)?.run());
            match format {
                Format::Table => print!("{}", report.to_table()),
                Format::Json => println!("{}", report.to_json()),
            }
            if let Some(dir) = csv {
                let files = report
                    .write_csv(&dir)
                    .with_context(|| format!("writing CSV into {}", dir.display()))?;
                for f in files {
                    eprintln!("wrote {}", f.display());
                }
            }
            if let Some(path) = svg {
                std::fs::write(&path, report.to_svg())
                    .with_context(|| format!("writing {}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
            Ok(())
        }
        SimCommand::Table2(args) => {
            crate::cmd::sim_tables::run(crate::cmd::sim_tables::Table::Two, args)
        }
        SimCommand::Table3(args) => {
            crate::cmd::sim_tables::run(crate::cmd::sim_tables::Table::Three, args)
        }
        SimCommand::Table4(args) => {
            crate::cmd::sim_tables::run(crate::cmd::sim_tables::Table::Four, args)
        }
        SimCommand::Table5(args) => {
            crate::cmd::sim_tables::run(crate::cmd::sim_tables::Table::Five, args)
        }
        SimCommand::Violation(args) => {
            crate::cmd::sim_tables::run(crate::cmd::sim_tables::Table::Violation, args)
        }
        SimCommand::Session(args) => crate::cmd::sim_session::run(args),
        SimCommand::Rudp(args) => crate::cmd::sim_rudp::run(args),
        SimCommand::RudpReno(args) => crate::cmd::sim_rudp::run_reno(args),
    }
}
