//! `braid sim table2|table3|table4|table5`: regenerate seed 000's Tables II–V in the
//! simulator on real traces, printing our numbers beside the seed's. A thin
//! layer over `braid_sim::experiments`.

use anyhow::Context;
use braid_sim::experiments::{
    table2, table2_packet, table3, table3_packet, table4, table4_packet, table5, table5_packet,
    violation, violation_packet, CrossTraces, PacketOptions, RunSpan, TableReport,
};
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
    /// Run at packet level: real sessions over IQ-RUDP against trace-driven
    /// cross traffic, beside the fluid figures (table3 and table5: PGOS,
    /// MSFQ, WFQ, min-RTT; table4: GridFTP layouts and PGOS; table2: PGOS
    /// pinned to each path; violation: PGOS with the Lemma 2 bound).
    #[arg(long)]
    pub packet: bool,
    /// Cross-traffic trace of path A (any trace format braid reads).
    #[arg(long, value_name = "FILE")]
    pub cross_a: Option<PathBuf>,
    /// Cross-traffic trace of path B.
    #[arg(long, value_name = "FILE")]
    pub cross_b: Option<PathBuf>,
    /// Output format: a text table, or one JSON object with a `rows` array.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// With --packet: best effort's queueing-delay target on paths that
    /// carry guarantees (default 30ms), or `off` for the seed's rule.
    #[arg(long, value_name = "DELAY|off", value_parser = super::sim_session::parse_bulk_yield)]
    pub bulk_yield: Option<super::sim_session::BulkYield>,
    /// With --packet: the bottleneck's drop-tail queue as a time at the
    /// link rate (e.g. 100ms, 500ms; default the seed's 50 packets).
    #[arg(long, value_name = "DELAY")]
    pub queue: Option<braid_core::Duration>,
}

/// Output format of a table command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The table as text.
    Text,
    /// One JSON object.
    Json,
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
    let cross = CrossTraces {
        a: args.cross_a.clone(),
        b: args.cross_b.clone(),
    };
    for f in [&cross.a, &cross.b].into_iter().flatten() {
        if !f.exists() {
            anyhow::bail!("{}: no such trace file", f.display());
        }
    }
    let mut opts = PacketOptions {
        cross: cross.clone(),
        ..PacketOptions::default()
    };
    if let Some(super::sim_session::BulkYield(y)) = args.bulk_yield {
        opts.bulk_yield = y;
    }
    if let Some(q) = args.queue {
        anyhow::ensure!(
            (braid_core::Duration::from_millis(1)..=braid_core::Duration::from_secs(10))
                .contains(&q),
            "--queue {q} is outside 1ms..10s"
        );
        opts.queue = Some(q);
    }
    let report: TableReport = match (table, args.packet) {
        (Table::Two, true) => table2_packet(&args.data, span, &opts),
        (Table::Three, true) => table3_packet(&args.data, span, &opts),
        (Table::Four, true) => table4_packet(&args.data, span, &opts),
        (Table::Five, true) => table5_packet(&args.data, span, &opts),
        (Table::Violation, true) => violation_packet(&args.data, span, &opts),
        (Table::Two, false) => table2(&args.data, span),
        (Table::Three, false) => table3(&args.data, span),
        (Table::Four, false) => table4(&args.data, span),
        (Table::Five, false) => table5(&args.data, span),
        (Table::Violation, false) => violation(&args.data, span),
    }
    .with_context(|| format!("running the experiment on {}", args.data.display()))?;
    if args.format == Format::Json {
        let rows: Vec<serde_json::Value> = report
            .rows
            .iter()
            .map(|(alg, stream, s)| {
                let target = report_target(&report, stream);
                // Packet tables name rows "pgos/packet", "pgos/fluid".
                let (scheduler, level) = alg.split_once('/').unwrap_or((alg.as_str(), "fluid"));
                serde_json::json!({
                    "stream": stream,
                    "scheduler": scheduler,
                    "level": level,
                    "target_mbps": target,
                    "mean_mbps": s.mean,
                    "p95_mbps": s.p95,
                    "p99_mbps": s.p99,
                    "std_mbps": s.std,
                    "jitter_ms": s.jitter_ms,
                    "met": s.met,
                    "windows_met": s.windows_met,
                })
            })
            .collect();
        let checks: Vec<serde_json::Value> = report
            .checks
            .iter()
            .map(|(c, ok, d)| serde_json::json!({"check": c, "passed": ok, "detail": d}))
            .collect();
        let v = serde_json::json!({ "title": report.title, "rows": rows, "checks": checks });
        println!(
            "{}",
            serde_json::to_string_pretty(&v).context("encoding JSON")?
        );
        return finish(&args, &report);
    }
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
    finish(&args, &report)
}

fn report_target(report: &TableReport, stream: &str) -> Option<f64> {
    report.targets.iter().find(|t| t.0 == stream).map(|t| t.1)
}

fn finish(args: &TableArgs, report: &TableReport) -> anyhow::Result<()> {
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
