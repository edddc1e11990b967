//! Seed Tables II and III: SmartPointer streams over two paths.
//!
//! Paths (a 100 Mbit/s link minus replayed cross traffic, as the seed's
//! Emulab testbed with NLANR cross traffic):
//! * **A** — steadier, lower mean: cross traffic from the FCC broadband
//!   trace `fcc/fcc_trace_7289_http---www.yahoo.com.tsv` scaled to a
//!   58 Mbit/s mean (available in 1 s bins: mean ≈ 42, p5 ≈ 37, the same in
//!   every 300 s segment, so the past predicts the future); 20 ms one way.
//! * **B** — higher mean, much more variable: cross traffic from the Puffer
//!   wide-area TCP trace `puffer/puffer_211017_A.tsv` scaled to a 52 Mbit/s
//!   mean (available: mean ≈ 48, p5 ≈ 8–20 by segment); 30 ms one way.
//!
//! Streams, 25 frames/s: Atom 3.249 Mbit/s at 95 %, Bond1 22.148 Mbit/s at
//! 95 %, Bond2 best effort with a 70.34 Mbit/s source (the seed's targets).
//! Fair-queueing weights are the targets. Sources start at 300 s (the
//! monitor's 300-sample window of 1 s samples is full by then) and the run
//! is measured over the next `measure` seconds in 1 s bins.
//!
//! "95 Perct." is the throughput met 95 % of the time (the 5th percentile
//! of the 1 s samples), as in the seed. Jitter is the mean absolute
//! deviation of frame completion intervals from 40 ms.

use super::harness::{self, Algo, HarnessConfig, PathSpec, StreamDef, StreamResult, Summary};
use super::{cross_traffic_path, ExperimentError, RunSpan};
use crate::report::{LineChart, Series};
use braid_core::scheduler::{
    Msfq, OptSched, OptSchedConfig, PathId, Pgos, PgosConfig, StreamSpec, Wfq,
};
use braid_core::{Bandwidth, Duration, Instant};
use std::fmt::Write as _;
use std::path::Path;

/// Frames per second of every SmartPointer stream.
const FPS: u64 = 25;

/// A rendered table plus the target checks of issue 5.
#[derive(Debug, Clone, Default)]
pub struct TableReport {
    /// Our table beside the seed's, as text.
    pub text: String,
    /// (check, passed, detail).
    pub checks: Vec<(String, bool, String)>,
    /// (algorithm, stream, summary) for every row, for CSV/JSON and tests.
    pub rows: Vec<(String, String, Summary)>,
    /// (algorithm, stream, throughput per 1 s bin in Mbit/s).
    pub series: Vec<(String, String, Vec<f64>)>,
    /// The stream the plot shows, and its target (Mbit/s).
    pub plot: Option<(String, f64)>,
    /// Title of the plot.
    pub title: String,
    /// (stream, target in Mbit/s) as the rows were recorded.
    pub targets: Vec<(String, f64)>,
}

impl TableReport {
    /// An SVG line chart of the plotted stream's throughput under every
    /// algorithm, with its target dashed (the seed's Figs. 11, 14, 16).
    pub fn to_svg(&self) -> String {
        let mut series: Vec<Series> = Vec::new();
        let Some((stream, target)) = &self.plot else {
            return LineChart {
                title: self.title.clone(),
                x_label: "time (s)".into(),
                y_label: "Mbit/s".into(),
                series,
            }
            .render();
        };
        for (alg, s, v) in &self.series {
            if s == stream {
                series.push(Series {
                    name: format!("{s} {alg}"),
                    points: v.iter().enumerate().map(|(i, &y)| (i as f64, y)).collect(),
                    dashed: false,
                });
            }
        }
        let n = series.first().map_or(0, |s| s.points.len());
        series.push(Series {
            name: "target".into(),
            points: vec![(0.0, *target), (n.saturating_sub(1) as f64, *target)],
            dashed: true,
        });
        LineChart {
            title: self.title.clone(),
            x_label: "time since start (s)".into(),
            y_label: format!("{stream} throughput (Mbit/s)"),
            series,
        }
        .render()
    }

    /// Record one run of `algo`: each stream's summary against
    /// `target(stream)` as a row, and its throughput as a series.
    pub(super) fn record(
        &mut self,
        algo: &str,
        streams: &[StreamDef],
        results: &[StreamResult],
        target: impl Fn(&StreamDef) -> Bandwidth,
    ) {
        for (s, r) in streams.iter().zip(results) {
            let sum = harness::summarize(r, target(s), s.period);
            if !self.targets.iter().any(|t| t.0 == s.name) {
                self.targets.push((s.name.clone(), target(s).mbps()));
            }
            self.rows.push((algo.to_string(), s.name.clone(), sum));
            self.series
                .push((algo.to_string(), s.name.clone(), r.throughput_mbps.clone()));
        }
    }

    /// The recorded summary of `stream` under `algo` (all zero if absent).
    pub(super) fn summary(&self, algo: &str, stream: &str) -> Summary {
        summary_of(&self.rows, algo, stream)
    }

    /// Append one `[ok]` or `[MISS]` line per check to `out`.
    pub(super) fn write_checks(&self, out: &mut String) {
        for (c, ok, d) in &self.checks {
            let _ = writeln!(out, "[{}] {c}: {d}", if *ok { "ok" } else { "MISS" });
        }
    }
}

/// The summary of `stream` under `algo` in `rows` (all zero if absent).
pub(super) fn summary_of(rows: &[(String, String, Summary)], algo: &str, stream: &str) -> Summary {
    rows.iter()
        .find(|r| r.0 == algo && r.1 == stream)
        .map(|r| r.2)
        .unwrap_or_default()
}

/// The seed's Table III: (stream, algorithm, p95, p99, mean, std, jitter ms).
const SEED_T3: [(&str, &str, f64, f64, f64, f64, f64); 12] = [
    ("Atom", "wfq", 0.846, 0.672, 1.5524, 0.3863, 5.0),
    ("Atom", "msfq", 2.789, 2.744, 3.2111, 0.3273, 2.0),
    ("Atom", "pgos", 3.236, 3.216, 3.2487, 0.0150, 1.4),
    ("Atom", "optsched", 3.240, 3.239, 3.2489, 0.0058, 1.2),
    ("Bond1", "wfq", 5.768, 4.569, 10.5843, 2.6348, 5.0),
    ("Bond1", "msfq", 19.248, 18.946, 22.1300, 2.2321, 2.0),
    ("Bond1", "pgos", 22.068, 21.959, 22.1476, 0.0790, 1.4),
    ("Bond1", "optsched", 22.138, 22.139, 22.1477, 0.0273, 1.3),
    ("Bond2", "wfq", 18.297, 14.486, 33.7021, 8.3949, 5.0),
    ("Bond2", "msfq", 52.446, 51.76, 59.0786, 8.0397, 2.0),
    ("Bond2", "pgos", 45.782, 45.038, 59.0588, 9.5765, 1.5),
    ("Bond2", "optsched", 45.757, 45.019, 59.0583, 9.5587, 1.5),
];

/// The seed's Table II: (row, p95, p99, jitter mean, jitter std, interval mean, std).
const SEED_T2: [(&str, f64, f64, f64, f64, f64, f64); 4] = [
    ("Atom-pathb", 2.4748, 1.927, 1.7, 6.1, 3.97, 9.9),
    ("Atom-patha", 3.2336, 3.2322, 0.82, 1.3, 3.99, 0.9),
    ("Bond1-pathb", 17.2284, 13.0244, 1.7, 6.1, 3.97, 9.9),
    ("Bond1-patha", 22.0442, 22.0303, 0.83, 1.3, 3.99, 0.9),
];

pub(super) fn paths(data: &Path) -> Result<Vec<PathSpec>, ExperimentError> {
    two_paths(data, Bandwidth::from_mbps(58), Bandwidth::from_mbps(52))
}

/// The cross-traffic traces of paths A and B, relative to the data
/// directory (an absolute path replaces it).
pub const TRACE_A: &str = "traces/fcc/fcc_trace_7289_http---www.yahoo.com.tsv";
/// See [`TRACE_A`].
pub const TRACE_B: &str = "traces/puffer/puffer_211017_A.tsv";

/// Which traces drive the cross traffic of paths A and B (`None`: the
/// defaults [`TRACE_A`] / [`TRACE_B`]); any trace format braid reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CrossTraces {
    /// Path A's cross traffic.
    pub a: Option<std::path::PathBuf>,
    /// Path B's cross traffic.
    pub b: Option<std::path::PathBuf>,
}

/// Paths A and B of the module docs on a 100 Mbit/s link, their cross
/// traffic scaled to `cross_a` and `cross_b` mean.
pub(super) fn two_paths(
    data: &Path,
    cross_a: Bandwidth,
    cross_b: Bandwidth,
) -> Result<Vec<PathSpec>, ExperimentError> {
    two_paths_with(data, &CrossTraces::default(), cross_a, cross_b)
}

/// [`two_paths`] with the cross traffic from `traces`.
pub(super) fn two_paths_with(
    data: &Path,
    traces: &CrossTraces,
    cross_a: Bandwidth,
    cross_b: Bandwidth,
) -> Result<Vec<PathSpec>, ExperimentError> {
    let link = Bandwidth::from_mbps(100);
    let a = traces
        .a
        .as_ref()
        .map_or(TRACE_A.to_string(), |p| p.display().to_string());
    let b = traces
        .b
        .as_ref()
        .map_or(TRACE_B.to_string(), |p| p.display().to_string());
    Ok(vec![
        cross_traffic_path("A", data, &a, link, cross_a, Duration::from_millis(20))?,
        cross_traffic_path("B", data, &b, link, cross_b, Duration::from_millis(30))?,
    ])
}

/// The target of the stream called `name`, in Mbit/s (0 if there is none).
pub(super) fn target_mbps(streams: &[StreamDef], name: &str) -> f64 {
    streams
        .iter()
        .find(|s| s.name == name)
        .map_or(0.0, |s| s.target.mbps())
}

fn stream(name: &str, mbps: f64, spec: StreamSpec) -> StreamDef {
    let target = Bandwidth::from_mbps_f64(mbps);
    let frame = (target.bps() / 8 / FPS) as u32;
    StreamDef {
        name: name.to_string(),
        spec,
        frames: vec![frame],
        period: Duration::from_millis(1000 / FPS),
        target,
    }
}

pub(super) fn smartpointer(with_bond2: bool) -> Result<Vec<StreamDef>, ExperimentError> {
    let atom = Bandwidth::from_mbps_f64(3.249);
    let bond1 = Bandwidth::from_mbps_f64(22.148);
    let mut v = vec![
        stream(
            "Atom",
            3.249,
            StreamSpec::min_rate(atom, 0.95).map_err(sched)?,
        ),
        stream(
            "Bond1",
            22.148,
            StreamSpec::min_rate(bond1, 0.95).map_err(sched)?,
        ),
    ];
    if with_bond2 {
        v.push(stream(
            "Bond2",
            70.34,
            StreamSpec::best_effort(70_340_000).map_err(sched)?,
        ));
    }
    Ok(v)
}

pub(super) fn sched(e: braid_core::scheduler::SpecError) -> ExperimentError {
    ExperimentError::Sched(e.into())
}

pub(super) fn config(span: RunSpan) -> HarnessConfig {
    let warmup = span.warmup_s.max(1);
    HarnessConfig {
        start: Instant::ZERO + Duration::from_secs(warmup),
        end: Instant::ZERO + Duration::from_secs(warmup + span.measure_s),
        sample: Duration::from_secs(1),
        window_samples: 300,
        max_backlog: Duration::from_secs(2),
        opt_window: Duration::from_secs(1),
        bulk_yield: braid_core::session::SessionConfig::default().bulk_yield,
        queue: None,
    }
}

/// Available bandwidth of each path in 1 s bins: before the start (what the
/// monitor's window holds) and over the measured span.
pub(super) fn path_stats(paths: &[PathSpec], cfg: &HarnessConfig) -> String {
    let mut out = String::new();
    for p in paths {
        let series = |from: Instant, to: Instant| {
            let mut v = Vec::new();
            let mut t = from;
            while t + cfg.sample <= to {
                v.push(p.capacity.mean_rate(t, t + cfg.sample).mbps());
                t += cfg.sample;
            }
            v
        };
        let stats = |v: &[f64]| {
            let r = harness::StreamResult {
                throughput_mbps: v.to_vec(),
                ..Default::default()
            };
            harness::summarize(&r, Bandwidth::ZERO, cfg.sample)
        };
        let before = stats(&series(Instant::ZERO, cfg.start));
        let during = stats(&series(cfg.start, cfg.end));
        let _ = writeln!(
            out,
            "path {}: available mean {:.1} sd {:.1} p95-guarantee {:.1} Mbit/s in the window; {:.1} / {:.1} / {:.1} while measured",
            p.name, before.mean, before.std, before.p95, during.mean, during.std, during.p95
        );
    }
    out
}

pub(super) fn pct(x: f64, of: f64) -> f64 {
    if of == 0.0 {
        0.0
    } else {
        100.0 * x / of
    }
}

/// Seed Table III (see the module docs), over `span`.
///
/// # Errors
/// Missing or unreadable traces.
pub fn table3(data: &Path, span: RunSpan) -> Result<TableReport, ExperimentError> {
    let paths = paths(data)?;
    let streams = smartpointer(true)?;
    let cfg = config(span);
    let algos: Vec<(&str, Algo)> = vec![
        // One path: B, the higher-mean path a mean-based choice would take.
        ("wfq", Algo::Online(Box::new(Wfq::new(Some(PathId(1)))))),
        ("msfq", Algo::Online(Box::new(Msfq::new()))),
        (
            "pgos",
            Algo::Pgos(Box::new(Pgos::new(PgosConfig::default()))),
        ),
        (
            "optsched",
            Algo::Opt(Box::new(OptSched::new(OptSchedConfig::default()))),
        ),
    ];
    let mut rep = TableReport::default();
    let mut notes = String::new();
    for (name, algo) in algos {
        let res = harness::run(&paths, &streams, algo, &cfg)?;
        let dropped: Vec<String> = streams
            .iter()
            .zip(&res)
            .map(|(s, r)| format!("{} {}", s.name, r.frames_dropped))
            .collect();
        let _ = writeln!(
            notes,
            "{name}: upcalls {}, frames dropped at the source: {}",
            res.first().map_or(0, |r| r.upcalls),
            dropped.join(", ")
        );
        rep.record(name, &streams, &res, |s| s.target);
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "Table III — SmartPointer over two paths ({} s measured after {} s, 1 s bins; ours | seed)",
        span.measure_s, span.warmup_s
    );
    t.push_str(&path_stats(&paths, &cfg));
    let _ = writeln!(
        t,
        "{:<16} {:>8} {:>8} {:>8} {:>7} {:>7} {:>6} | {:>7} {:>7} {:>8} {:>7} {:>6}",
        "stream/algo",
        "95%",
        "99%",
        "mean",
        "std",
        "target",
        "jit",
        "95%",
        "99%",
        "mean",
        "std",
        "jit"
    );
    for (sname, alg, s95, s99, smean, sstd, sjit) in SEED_T3 {
        let Some((_, _, ours)) = rep.rows.iter().find(|r| r.0 == alg && r.1 == sname) else {
            continue;
        };
        let target = target_mbps(&streams, sname);
        let _ = writeln!(
            t,
            "{:<16} {:>8.3} {:>8.3} {:>8.4} {:>7.4} {:>7.3} {:>6.1} | {:>7.3} {:>7.3} {:>8.4} {:>7.4} {:>6.1}",
            format!("{sname}/{alg}"),
            ours.p95,
            ours.p99,
            ours.mean,
            ours.std,
            target,
            ours.jitter_ms,
            s95,
            s99,
            smean,
            sstd,
            sjit
        );
    }
    for (s, target) in [("Atom", 3.249), ("Bond1", 22.148)] {
        let p = rep.summary("pgos", s);
        let f = rep.summary("msfq", s);
        let o = rep.summary("optsched", s);
        rep.checks.push((
            format!("{s}: PGOS 95th percentile ≥ 99.5 % of target"),
            pct(p.p95, target) >= 99.5,
            format!("{:.2} % (seed 99.6 %)", pct(p.p95, target)),
        ));
        rep.checks.push((
            format!("{s}: PGOS std ≤ 1/10 of MSFQ's"),
            p.std <= f.std / 10.0,
            format!(
                "{:.4} vs {:.4} ({:.1}×)",
                p.std,
                f.std,
                f.std / p.std.max(1e-9)
            ),
        ));
        rep.checks.push((
            format!("{s}: PGOS within 1 % of OptSched at the 95th percentile"),
            p.p95 >= o.p95 * 0.99,
            format!("{:.3} vs {:.3}", p.p95, o.p95),
        ));
    }
    let (pb, fb) = (rep.summary("pgos", "Bond2"), rep.summary("msfq", "Bond2"));
    rep.checks.push((
        "Bond2: PGOS mean within 5 % of MSFQ's".into(),
        (pb.mean - fb.mean).abs() <= 0.05 * fb.mean,
        format!("{:.2} vs {:.2} Mbit/s", pb.mean, fb.mean),
    ));
    let total = |alg: &str| -> f64 {
        ["Atom", "Bond1", "Bond2"]
            .iter()
            .map(|s| rep.summary(alg, s).mean)
            .sum()
    };
    let _ = writeln!(
        t,
        "all streams together (mean Mbit/s): wfq {:.2}, msfq {:.2}, pgos {:.2}, optsched {:.2}",
        total("wfq"),
        total("msfq"),
        total("pgos"),
        total("optsched")
    );
    t.push_str(&notes);
    rep.write_checks(&mut t);
    rep.text = t;
    rep.plot = Some(("Bond1".into(), 22.148));
    rep.title = "Table III: Bond1 (22.148 Mbit/s at 95 %) under WFQ, MSFQ, PGOS, OptSched".into();
    Ok(rep)
}

/// Seed Table II: Atom and Bond1 together on path A only vs path B only.
///
/// # Errors
/// Missing or unreadable traces.
pub fn table2(data: &Path, span: RunSpan) -> Result<TableReport, ExperimentError> {
    let paths = paths(data)?;
    let streams = smartpointer(false)?;
    let cfg = config(span);
    let mut rep = TableReport::default();
    for (label, j) in [("patha", 0u32), ("pathb", 1u32)] {
        let algo = Algo::Online(Box::new(Wfq::new(Some(PathId(j)))));
        let res = harness::run(&paths, &streams, algo, &cfg)?;
        rep.record(label, &streams, &res, |s| s.target);
    }
    let mut t = String::new();
    let _ = writeln!(
        t,
        "Table II — Atom + Bond1 on one path ({} s measured after {} s; ours | seed)",
        span.measure_s, span.warmup_s
    );
    let _ = writeln!(
        t,
        "{:<13} {:>8} {:>8} {:>6} {:>6} {:>6} {:>6} {:>6} | {:>8} {:>8} {:>5} {:>5} {:>5} {:>5}",
        "row",
        "95%",
        "99%",
        "jit",
        "jsd",
        "int",
        "isd",
        "met%",
        "95%",
        "99%",
        "jit",
        "jsd",
        "int",
        "isd"
    );
    for (row, s95, s99, sj, sjs, si, sis) in SEED_T2 {
        let (sname, label) = row.split_once('-').unwrap_or((row, ""));
        let Some((_, _, o)) = rep.rows.iter().find(|r| r.0 == label && r.1 == sname) else {
            continue;
        };
        let _ = writeln!(
            t,
            "{:<13} {:>8.4} {:>8.4} {:>6.2} {:>6.2} {:>6.2} {:>6.2} {:>6.1} | {:>8.4} {:>8.4} {:>5.2} {:>5.1} {:>5.2} {:>5.1}",
            row,
            o.p95,
            o.p99,
            o.jitter_ms,
            o.jitter_std_ms,
            o.interval_ms,
            o.interval_std_ms,
            100.0 * o.met,
            s95,
            s99,
            sj,
            sjs,
            si,
            sis
        );
    }
    let _ = writeln!(
        t,
        "(interval = frame inter-completion time; the seed's 4 ms interval is per message, ours per 40 ms frame)"
    );
    rep.text = t;
    rep.plot = Some(("Bond1".into(), 22.148));
    rep.title = "Table II: Bond1 on path A vs path B".into();
    Ok(rep)
}

/// The shared data sets for the table tests (`BRAID_DATA`, else
/// `../shared/data` beside the workspace), or `None` with a printed reason
/// when one of the directories in `need` is not there.
#[cfg(test)]
pub(super) fn test_data(need: &[&str]) -> Option<std::path::PathBuf> {
    let d = std::path::PathBuf::from(
        std::env::var("BRAID_DATA").unwrap_or_else(|_| "../../../shared/data".into()),
    );
    if let Some(missing) = need.iter().find(|n| !d.join(n).exists()) {
        eprintln!(
            "skipping: {missing}/ not found in {} (set BRAID_DATA)",
            d.display()
        );
        return None;
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table3_is_deterministic_and_pgos_protects_critical_streams() {
        let Some(d) = test_data(&["traces"]) else {
            return;
        };
        let a = table3(
            &d,
            RunSpan {
                warmup_s: 300,
                measure_s: 60,
            },
        )
        .unwrap();
        let b = table3(
            &d,
            RunSpan {
                warmup_s: 300,
                measure_s: 60,
            },
        )
        .unwrap();
        assert_eq!(a.text, b.text);
        let get = |alg: &str, s: &str| a.rows.iter().find(|r| r.0 == alg && r.1 == s).unwrap().2;
        assert!(get("pgos", "Atom").p95 > get("msfq", "Atom").p95);
        assert!(get("pgos", "Bond1").p95 > get("msfq", "Bond1").p95);
    }
}

/// Full runs that print the tables: `cargo test -p braid-sim --release
/// experiments -- --ignored --nocapture`.
#[cfg(test)]
mod print {
    use super::*;

    #[test]
    #[ignore = "slow: full table runs; prints the tables"]
    fn print_tables() {
        let Some(d) = test_data(&["traces"]) else {
            return;
        };
        let secs = RunSpan {
            warmup_s: 300,
            measure_s: std::env::var("BRAID_MEASURE_S")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(900),
        };
        println!("{}", table2(&d, secs).unwrap().text);
        println!("{}", table3(&d, secs).unwrap().text);
        println!("{}", super::super::table4(&d, secs).unwrap().text);
        println!("{}", super::super::table5(&d, secs).unwrap().text);
        println!("{}", super::super::violation(&d, secs).unwrap().text);
    }
}
