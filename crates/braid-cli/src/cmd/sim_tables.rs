//! `braid sim table2|table3|table4|table5`: regenerate seed 000's Tables II–V in the
//! simulator on real traces, printing our numbers beside the seed's. A thin
//! layer over `braid_sim::experiments`.

use anyhow::Context;
use braid_sim::experiments::{table2, table3, table4, table5, violation, RunSpan, TableReport};
use std::io::Write as _;
use std::path::PathBuf;

/// Arguments shared by the table commands.
#[derive(Debug, clap::Args)]
pub struct TableArgs {
    /// Directory holding the shared data sets (traces/, video/).
    #[arg(long, value_name = "DIR", default_value = "../shared/data")]
    pub data: PathBuf,
    /// Seconds measured after the warm-up.
    #[arg(long, value_name = "SECS", default_value_t = 900)]
    pub measure: u64,
    /// Seconds of monitor warm-up before the sources start (the window is
    /// 300 one-second samples; a later start replays a later trace segment).
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub warmup: u64,
    /// Write a throughput plot (the seed's Figs. 11/14/16 style) to this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Exit with an error if any of issue 5's targets is missed.
    #[arg(long)]
    pub strict: bool,
}

/// Which table.
#[derive(Debug, Clone, Copy)]
pub enum Table {
    /// Seed Table II.
    Two,
    /// Seed Table III.
    Three,
    /// Seed Table IV.
    Four,
    /// Seed Table V.
    Five,
    /// Violation-bound run (Lemma 2 predicted vs realised misses).
    Violation,
}

/// Runs one table.
pub fn run(table: Table, args: TableArgs) -> anyhow::Result<()> {
    let span = RunSpan {
        warmup_s: args.warmup,
        measure_s: args.measure,
    };
    let report: TableReport = match table {
        Table::Two => table2(&args.data, span),
        Table::Three => table3(&args.data, span),
        Table::Four => table4(&args.data, span),
        Table::Five => table5(&args.data, span),
        Table::Violation => violation(&args.data, span),
    }
    .with_context(|| format!("running the experiment on {}", args.data.display()))?;
    // A closed pipe (`| head`) is not an error worth a panic.
    let mut out = std::io::stdout().lock();
    let written = write!(out, "{}", report.text).and_then(|()| {
        writeln!(
            out,
            "(deterministic: the runs take no random input; same traces, same table)"
        )
    });
    match written {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
        other => other.context("writing the table")?,
    }
    if let Some(path) = &args.svg {
        std::fs::write(path, report.to_svg())
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    let missed = report.checks.iter().filter(|c| !c.1).count();
    if args.strict && missed > 0 {
        anyhow::bail!("{missed} target(s) missed");
    }
    Ok(())
}
