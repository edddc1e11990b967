//! `braid demo`'s session: the system on a built-in default, needing no
//! files (seed 000's setting: streams with guarantees over several
//! measured paths), run under PGOS and MSFQ side by side.
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
//! The scheduler's choice matters here for a reason a reader can follow:
//! bulk that takes whatever its congestion window allows (MSFQ, like the
//! seed's rule) fills the deep buffers, and the window stream's messages
//! wait in them past their deadline; under PGOS the bulk on paths that
//! carry guarantees yields (`SessionConfig::bulk_yield`), so the queue the
//! guarantees wait in stays near 30 ms while bulk still takes the capacity
//! they leave. For every guarantee missed the table says why.
//!
//! Main items: [`DEMO_SESSION`], [`DemoSettings`] → [`demo_scenario`],
//! [`run_demo`] (one run per scheduler in [`DEMO_SCHEDULERS`], on a thread
//! each), [`demo_table`].
//!
//! ```
//! use braid_sim::session::demo::{demo_scenario, demo_table, run_demo, DemoSettings};
//! let scenario = demo_scenario(&DemoSettings {
//!     duration: braid_core::Duration::from_secs(10),
//!     ..DemoSettings::default()
//! })?;
//! let runs = run_demo(&scenario)?;
//! assert_eq!(runs.len(), 2);
//! assert!(demo_table(&scenario, &runs).contains("critical"));
//! # Ok::<(), braid_sim::ScenarioError>(())
//! ```

use super::render::{held_word, unheld_reasons};
use super::report::run as run_session;
use super::{SessionReport, SessionScenario};
use crate::report::table::grid;
use crate::scenario::{ScenarioError, ScenarioErrorKind};
use braid_core::session::SchedulerKind;
use braid_core::{Duration, Instant};
use std::fmt::Write as _;

/// The built-in session (a `braid sim session` scenario).
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
spec = "rate=3mbit@0.95"
source = "cbr:3mbit:1000B"

[[stream]]
name = "window"
spec = "window=8/10:100ms:1000B@0.9,deadline=200ms"
source = "cbr:800kbit:1000B"

[[stream]]
name = "bulk"
spec = "best-effort"
source = "greedy:1200B"
"#;

/// The schedulers compared, in the order of the runs.
pub const DEMO_SCHEDULERS: [&str; 2] = ["pgos", "msfq"];

/// The shortest and longest demo.
pub const DEMO_DURATIONS: std::ops::RangeInclusive<Duration> =
    Duration::from_secs(10)..=Duration::from_secs(600);

/// What a demo run may change. `Default` is the built-in demo.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoSettings {
    /// Seed of the cross traffic (`None`: the scenario's, 1).
    pub seed: Option<u64>,
    /// Virtual time simulated (within [`DEMO_DURATIONS`]).
    pub duration: Duration,
    /// Best effort's queueing-delay target (`Some(None)`: off, the seed's
    /// rule; `None`: the default).
    pub bulk_yield: Option<Option<Duration>>,
    /// The promises' correction step (`Some(None)`: off; `None`: the
    /// default).
    pub calibration: Option<Option<f64>>,
}

impl Default for DemoSettings {
    fn default() -> Self {
        DemoSettings {
            seed: None,
            duration: Duration::from_secs(30),
            bulk_yield: None,
            calibration: None,
        }
    }
}

/// The demo's scenario with `settings` applied: every stream runs to the
/// end, the warm-up is at most a quarter of the run.
///
/// # Errors
/// A duration outside [`DEMO_DURATIONS`].
pub fn demo_scenario(settings: &DemoSettings) -> Result<SessionScenario, ScenarioError> {
    let d = settings.duration;
    if !DEMO_DURATIONS.contains(&d) {
        return Err(ScenarioError {
            file: "<demo>".into(),
            line: None,
            kind: ScenarioErrorKind::Value,
            message: format!(
                "duration {d} is outside {}..{}",
                DEMO_DURATIONS.start(),
                DEMO_DURATIONS.end()
            ),
        });
    }
    let mut scenario = SessionScenario::from_toml_str(DEMO_SESSION)?;
    if let Some(seed) = settings.seed {
        scenario = scenario.with_seed(seed);
    }
    if let Some(y) = settings.bulk_yield {
        scenario = scenario.with_bulk_yield(y);
    }
    if let Some(g) = settings.calibration {
        scenario = scenario.with_calibration(g);
    }
    for s in &mut scenario.streams {
        s.stop = Instant::ZERO + d;
    }
    scenario.duration = d;
    scenario.warmup = scenario.warmup.min(Duration::from_nanos(d.as_nanos() / 4));
    Ok(scenario)
}

/// Runs `scenario` once per scheduler of [`DEMO_SCHEDULERS`], each on its
/// own thread (independent simulations), PGOS first.
///
/// # Errors
/// The first run's error, if one fails.
pub fn run_demo(scenario: &SessionScenario) -> Result<Vec<SessionReport>, ScenarioError> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = DEMO_SCHEDULERS
            .iter()
            .map(|name| {
                let s = scenario.clone();
                scope.spawn(move || {
                    let kind = name.parse::<SchedulerKind>().map_err(|e| ScenarioError {
                        file: "<demo>".into(),
                        line: None,
                        kind: ScenarioErrorKind::Value,
                        message: e.to_string(),
                    })?;
                    run_session(&s.with_scheduler(kind))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(r) => r,
                // A run that panicked is a bug; carry it on this thread.
                Err(p) => std::panic::resume_unwind(p),
            })
            .collect()
    })
}

fn cell(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:.2}"))
}

/// The demo's text: what runs, then per stream both schedulers' figures,
/// then per path what each promised and delivered.
pub fn demo_table(scenario: &SessionScenario, reports: &[SessionReport]) -> String {
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
    o.push_str(&grid(&rows, 2));
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
    o.push_str(&grid(&rows, 2));
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
