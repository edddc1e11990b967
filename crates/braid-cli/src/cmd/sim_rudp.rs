//! `braid sim rudp --table N` and `braid sim rudp-reno`: seed 002's
//! Tables 3–8 (uncoordinated RUDP vs coordinated IQ-RUDP, beside the seed's
//! numbers) and issue 3's Reno-model goodput benchmark, in the simulator.
//! A thin layer over `braid_sim::rudp`.

use anyhow::Context;
use braid_core::transport::CongestionKind;
use braid_sim::rudp::experiments::reno_benchmark;
use braid_sim::rudp::tables::{table, Workload};
use braid_sim::seed::{resolve_seed, SEED_ENV};
use std::path::PathBuf;

/// Arguments of `braid sim rudp`.
#[derive(Debug, clap::Args)]
pub struct RudpArgs {
    /// Which seed 002 table (3-8); repeat for several; none = all.
    #[arg(long, value_name = "N")]
    pub table: Vec<u32>,
    /// Directory holding the shared data sets (traces/, video/).
    #[arg(long, value_name = "DIR", default_value = "../shared/data")]
    pub data: PathBuf,
    /// Seed (overrides BRAID_SIM_SEED; default 1).
    #[arg(long)]
    pub seed: Option<u64>,
    /// The small workload the tests use (a tenth of the data).
    #[arg(long)]
    pub small: bool,
    /// Edge-triggered callbacks (one per threshold crossing) instead of the
    /// seed's level-triggered ones (one per interval while it holds).
    #[arg(long)]
    pub edge: bool,
}

/// Arguments of `braid sim rudp-reno`.
#[derive(Debug, clap::Args)]
pub struct RenoArgs {
    /// Random loss on the bottleneck.
    #[arg(long, default_value_t = 0.01)]
    pub loss: f64,
    /// Seconds of transfer.
    #[arg(long, default_value_t = 60)]
    pub secs: u64,
    /// Seed (overrides BRAID_SIM_SEED; default 1).
    #[arg(long)]
    pub seed: Option<u64>,
}

fn seed(arg: Option<u64>) -> anyhow::Result<u64> {
    let env = std::env::var(SEED_ENV).ok();
    resolve_seed(arg, env.as_deref(), 1).map_err(anyhow::Error::msg)
}

/// Runs `braid sim rudp`.
pub fn run(args: RudpArgs) -> anyhow::Result<()> {
    let seed = seed(args.seed)?;
    let mut w = if args.small {
        Workload::SMALL
    } else {
        Workload::FULL
    };
    w.level_triggered = !args.edge;
    let tables = if args.table.is_empty() {
        vec![3, 4, 5, 6, 7, 8]
    } else {
        args.table
    };
    if let Some(bad) = tables.iter().find(|n| !(3..=8).contains(*n)) {
        anyhow::bail!("--table {bad}: seed 002 has Tables 3-8 to reproduce");
    }
    println!("seed {seed} (replay with --seed {seed} or {SEED_ENV}={seed})");
    for n in tables {
        let out = table(n, &args.data, seed, w)
            .with_context(|| format!("seed 002 Table {n} on {}", args.data.display()))?;
        println!("{}", out.text);
    }
    Ok(())
}

/// Runs `braid sim rudp-reno`.
pub fn run_reno(args: RenoArgs) -> anyhow::Result<()> {
    if !(args.loss > 0.0 && args.loss < 1.0) {
        anyhow::bail!("--loss must be between 0 and 1 (exclusive)");
    }
    let seed = seed(args.seed)?;
    println!(
        "20 Mbit/s bottleneck, 30 ms RTT, {:.2} % random loss, {} s, seed {seed}",
        args.loss * 100.0,
        args.secs
    );
    for (name, cc) in [
        ("NewReno", CongestionKind::NewReno),
        ("CUBIC", CongestionKind::Cubic),
        ("FAST", CongestionKind::Fast),
    ] {
        let r = reno_benchmark(seed, args.loss, args.secs, cc);
        println!(
            "  {name:<8} goodput {:.2} Mbit/s  (Mathis {:.2}, Padhye {:.2}; ratio to Mathis {:.2}) srtt {:.1} ms, intact {}",
            r.goodput_mbps,
            r.mathis_mbps,
            r.padhye_mbps,
            r.goodput_mbps / r.mathis_mbps,
            r.srtt_s * 1e3,
            r.intact
        );
    }
    Ok(())
}
