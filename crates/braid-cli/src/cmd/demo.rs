//! `braid demo`: the system on a built-in default, needing no files
//! (issues 10 §3 and 28 §5; seed 000's setting: streams with guarantees
//! over several measured paths).
//!
//! Three streams — a critical one that needs 3 Mbit/s 95 % of the time, a
//! window-constrained one (8 of every 10 messages of 1000 B within each
//! 100 ms, 90 % of the time, each message useless after 200 ms) and
//! best-effort bulk — go over two simulated paths with different
//! capacities and RTTs, each behind a deep drop-tail buffer (250 ms, as in
//! many home routers and cellular links) and shared with cross traffic
//! whose rate is a seeded log-normal process (trace-like: it changes every
//! 100 ms with a 2 s correlation time). braid sees none of that: it learns
//! what each path can carry from what its connections deliver.
//!
//! The same session runs under PGOS and under MSFQ, side by side. The
//! scheduler's choice matters here for a reason a reader can follow: bulk
//! that takes whatever its congestion window allows (MSFQ, like the seed's
//! rule) fills the deep buffers, and the window stream's messages wait in
//! them past their deadline; under PGOS the bulk on paths that carry
//! guarantees yields (`SessionConfig::bulk_yield`), so the queue the
//! guarantees wait in stays near 30 ms while bulk still takes the capacity
//! they leave. For every guarantee missed the demo says why. Same seed,
//! same output; `--seed` or `BRAID_SIM_SEED` draws other cross traffic;
//! `--format json` prints one object with a `runs` array of
//! `braid sim session --format json` objects, one per scheduler.

use anyhow::Context;
use braid_core::session::SchedulerKind;
use braid_core::Duration;
use braid_sim::seed::{resolve_seed, SEED_ENV};
use braid_sim::session::render::{chart, held_word, unheld_reasons};
use braid_sim::session::report::run as run_session;
use braid_sim::session::{SessionReport, SessionScenario};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;

use super::sim_session::SessionFormat;

/// The built-in session (the format of `braid sim session`).
pub const DEMO_SESSION: &str = r#"
name = "demo"
seed = 1
duration = "30s"
warmup = "5s"

[[path]]
name = "short"
rate = "20mbit"
delay = "10ms"
queue = "250ms"
cross = { synthetic = { mean = "6mbit", cov = 0.5, corr_time = "2s", step = "100ms" }, packet = 1200 }

[[path]]
name = "long"
rate = "10mbit"
delay = "40ms"
queue = "250ms"
cross = { synthetic = { mean = "3mbit", cov = 0.5, corr_time = "2s", step = "100ms" }, packet = 1200 }

[[stream]]
name = "critical"
kind = "rate"
rate = "3mbit"
probability = 0.95
source = { kind = "cbr", rate = "3mbit", size = 1000 }

[[stream]]
name = "window"
kind = "window"
x = 8
y = 10
window = "100ms"
size = 1000
probability = 0.9
delivery = "deadline"
deadline = "200ms"
source = { kind = "cbr", rate = "800kbit", size = 1000 }

[[stream]]
name = "bulk"
kind = "best-effort"
source = { kind = "greedy", size = 1200 }
"#;

/// The schedulers compared.
const SCHEDULERS: [&str; 2] = ["pgos", "msfq"];

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
    anyhow::ensure!(
        (Duration::from_secs(10)..=Duration::from_secs(600)).contains(&args.duration),
        "--duration {} is outside 10s..600s",
        args.duration
    );
    let scenario = SessionScenario::from_toml_str(DEMO_SESSION).context("built-in demo session")?;
    let env = std::env::var(SEED_ENV).ok();
    let seed =
        resolve_seed(args.seed, env.as_deref(), scenario.seed).map_err(anyhow::Error::msg)?;
    let mut scenario = scenario.with_seed(seed);
    if let Some(super::sim_session::BulkYield(y)) = args.bulk_yield {
        scenario = scenario.with_bulk_yield(y);
    }
    if let Some(super::sim_session::Calibration(g)) = args.calibration {
        scenario = scenario.with_calibration(g);
    }
    for s in &mut scenario.streams {
        s.stop = braid_core::Instant::ZERO + args.duration;
    }
    scenario.duration = args.duration;
    scenario.warmup = scenario
        .warmup
        .min(Duration::from_nanos(args.duration.as_nanos() / 4));

    // The two runs are independent simulations: one thread each.
    let reports: Vec<SessionReport> = std::thread::scope(|scope| {
        let handles: Vec<_> = SCHEDULERS
            .iter()
            .map(|name| {
                let s = scenario.clone();
                scope.spawn(move || {
                    let kind: SchedulerKind = name.parse().map_err(anyhow::Error::new)?;
                    run_session(&s.with_scheduler(kind)).map_err(anyhow::Error::new)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a demo run panicked"))?
            })
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    // A closed pipe (`| head`) is not an error worth a panic.
    let mut out = std::io::stdout().lock();
    let text = match args.format {
        SessionFormat::Text => render(&scenario, &reports),
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

fn cell(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:.2}"))
}

/// The demo's text: what runs, then per stream both schedulers' figures,
/// then per path what each promised and delivered.
fn render(scenario: &SessionScenario, reports: &[SessionReport]) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "braid demo: three streams over two simulated paths, {} s, seed {} (replay with BRAID_SIM_SEED={})",
        scenario.duration.as_secs_f64(),
        scenario.seed,
        scenario.seed
    );
    let _ = writeln!(
        o,
        "  paths: short 20 Mbit/s, 10 ms one way; long 10 Mbit/s, 40 ms one way; each behind a deep"
    );
    let _ = writeln!(
        o,
        "  250 ms drop-tail buffer and shared with cross traffic at a seeded log-normal rate (mean 6"
    );
    let _ = writeln!(
        o,
        "  and 3 Mbit/s, CoV 0.5, new rate every 100 ms). braid measures the paths only through what"
    );
    let _ = writeln!(
        o,
        "  its own connections deliver. Under MSFQ bulk fills the buffers and what has a deadline"
    );
    let _ = writeln!(
        o,
        "  waits in them; under PGOS bulk yields where guarantees are carried (queueing held near 30 ms)."
    );
    let _ = writeln!(
        o,
        "  Mbit/s over 1 s windows after a {} s warm-up; met = share of the spec's windows whose offered",
        scenario.warmup.as_secs_f64()
    );
    let _ = writeln!(
        o,
        "  messages arrived in time (docs/sessions.md, \"When a window meets its spec\"); delay = p95 one way."
    );
    o.push('\n');
    let mut head = vec!["stream".to_string(), "spec".into(), "target".into()];
    for r in reports {
        let n = r.scheduler.to_uppercase();
        head.extend([
            format!("{n} mean"),
            "p5".into(),
            "met".into(),
            "delay".into(),
            "held".into(),
        ]);
    }
    let mut rows = vec![head];
    if let Some(first) = reports.first() {
        for (i, s) in first.streams.iter().enumerate() {
            let mut row = vec![
                s.name.clone(),
                format!("{} {}", s.kind, s.spec),
                cell(s.target_mbps),
            ];
            for r in reports {
                let x = &r.streams[i];
                row.extend([
                    format!("{:.2}", x.mean_mbps),
                    format!("{:.2}", x.p5_mbps),
                    x.windows_met
                        .map_or_else(|| "-".into(), |m| format!("{:.1}%", m * 100.0)),
                    format!("{:.0}ms", x.delay_p95_ms),
                    held_word(x.guarantee_held).into(),
                ]);
            }
            rows.push(row);
        }
    }
    o.push_str(&grid(&rows));
    o.push('\n');
    let mut rows = vec![vec!["path".to_string()]];
    for r in reports {
        let n = r.scheduler.to_uppercase();
        rows[0].extend([format!("{n} promised"), "delivered".into()]);
    }
    if let Some(first) = reports.first() {
        for (i, p) in first.paths.iter().enumerate() {
            let mut row = vec![p.name.clone()];
            for r in reports {
                row.extend([
                    format!("{:.2}", r.paths[i].promised_mbps),
                    format!("{:.2}", r.paths[i].delivered_mbps),
                ]);
            }
            rows.push(row);
        }
    }
    o.push_str(&grid(&rows));
    let errors: u64 = reports
        .iter()
        .flat_map(|r| &r.streams)
        .map(|s| s.errors)
        .sum();
    let _ = writeln!(
        o,
        "\ndelivery errors (twice, out of order, after the deadline): {errors}; MSFQ promises nothing (it only shares)"
    );
    for r in reports {
        for line in unheld_reasons(&r.streams) {
            let _ = writeln!(o, "{}: {line}", r.scheduler.to_uppercase());
        }
    }
    let _ = writeln!(
        o,
        "run one yourself: braid sim session scenarios/session_cut.toml --scheduler msfq"
    );
    o
}

/// Left-aligned first two columns, right-aligned rest, two spaces between.
fn grid(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            if c < 2 {
                let _ = write!(line, "{cell:<w$}", w = widths[c]);
            } else {
                let _ = write!(line, "{cell:>w$}", w = widths[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
