//! Rendering a [`SessionReport`]: a text table, CSV (one row per stream)
//! and an SVG plot of per-stream delivered rate over time. JSON is
//! [`SessionReport::to_json`].

use super::report::{SessionReport, StreamReport};
use crate::report::table::grid;
use crate::report::{LineChart, Series};
use std::fmt::Write;

fn opt(x: Option<f64>, digits: usize) -> String {
    x.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// `yes` / `NO` / `-`.
pub fn held_word(h: Option<bool>) -> &'static str {
    match h {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "-",
    }
}

/// One line per guarantee that did not hold, saying why: what the
/// scheduler's upcall said it could carry instead, or, with no upcall,
/// that the paths delivered less than their estimate promised.
pub fn unheld_reasons(streams: &[StreamReport]) -> Vec<String> {
    let mut out = Vec::new();
    for s in streams.iter().filter(|s| s.guarantee_held == Some(false)) {
        let met = s.windows_met.unwrap_or(0.0) * 100.0;
        let need = s.probability.unwrap_or(0.0) * 100.0;
        let head = format!(
            "{}: not held ({met:.1} % of windows met, {need:.1} % needed)",
            s.name
        );
        let why = match &s.unmet {
            Some(u) => {
                let mut best = if u.best_mbps > 0.0 {
                    format!("{:.2} Mbit/s at the spec's probability", u.best_mbps)
                } else {
                    "nothing at the spec's probability".into()
                };
                if let Some(p) = u.best_probability.filter(|&p| p > 0.0) {
                    let _ = write!(best, ", or its rate at probability {p:.2}");
                }
                if let Some(z) = u.best_expected_misses {
                    let _ = write!(best, ", or E[Z] = {z:.2}");
                }
                format!(
                    "the paths cannot carry it: the scheduler's upcall ({} at {:.1} s) said the best it can map is {best}",
                    s.upcalls, u.at_s
                )
            }
            None => {
                let how = format!(
                    "delay p95 {:.0} ms, {:.1} % lost",
                    s.delay_p95_ms,
                    s.loss_ratio * 100.0
                );
                match s.promised_mbps {
                    Some(p) if p > 0.0 => format!(
                        "{p:.2} Mbit/s was promised on its paths and they delivered less ({how})"
                    ),
                    _ => format!("the scheduler promised nothing for it, it only shares ({how})"),
                }
            }
        };
        out.push(format!("{head}: {why}"));
    }
    out
}

/// The per-stream table rows (header first), as [`SessionReport::to_table`]
/// prints them.
fn stream_rows(streams: &[StreamReport]) -> Vec<Vec<String>> {
    let mut rows = vec![[
        "stream",
        "spec",
        "delivery",
        "target",
        "offered",
        "mean",
        "p5",
        "p50",
        "p95",
        "met",
        "held",
        "loss %",
        "delay p95 ms",
        "dups",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect::<Vec<_>>()];
    for s in streams {
        rows.push(vec![
            s.name.clone(),
            format!("{} {}", s.kind, s.spec),
            s.delivery.clone(),
            opt(s.target_mbps, 2),
            opt(s.offered_mbps, 2),
            format!("{:.2}", s.mean_mbps),
            format!("{:.2}", s.p5_mbps),
            format!("{:.2}", s.p50_mbps),
            format!("{:.2}", s.p95_mbps),
            s.windows_met
                .map_or_else(|| "-".into(), |m| format!("{:.1}%", m * 100.0)),
            held_word(s.guarantee_held).into(),
            format!("{:.2}", s.loss_ratio * 100.0),
            format!("{:.1}", s.delay_p95_ms),
            s.duplicates.to_string(),
        ]);
    }
    rows
}

impl SessionReport {
    /// The report as text: a header, the streams table (rates in Mbit/s)
    /// and the paths table.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "session {}: scheduler {}, {} s simulated, seed {}",
            self.scenario, self.scheduler, self.duration_s, self.seed
        );
        let _ = writeln!(
            out,
            "rates in Mbit/s over 1 s windows after a {} s warm-up; met = share of windows meeting the spec",
            self.warmup_s
        );
        out.push('\n');
        out.push_str(&grid(&stream_rows(&self.streams), 3));
        let errors: u64 = self.streams.iter().map(|s| s.errors).sum();
        let upcalls: u64 = self.streams.iter().map(|s| s.upcalls).sum();
        let _ = writeln!(
            out,
            "upcalls (guarantee cannot be met): {upcalls}; delivery errors (twice, out of order, late): {errors}"
        );
        for line in unheld_reasons(&self.streams) {
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
        let mut rows = vec![vec![
            "path".to_string(),
            "hops".into(),
            "promised".into(),
            "delivered".into(),
            "down".into(),
        ]];
        for p in &self.paths {
            rows.push(vec![
                p.name.clone(),
                p.hops.to_string(),
                format!("{:.2}", p.promised_mbps),
                format!("{:.2}", p.delivered_mbps),
                p.down.to_string(),
            ]);
        }
        out.push_str(&grid(&rows, 3));
        out
    }

    /// One CSV row per stream, with a header; the columns are the JSON
    /// field names of [`StreamReport`] (empty cells for none).
    pub fn to_csv(&self) -> String {
        let mut out = String::from(
            "scenario,scheduler,seed,stream,kind,spec,delivery,target_mbps,offered_mbps,probability,mean_mbps,p5_mbps,p50_mbps,p95_mbps,windows,windows_met,guarantee_held,sent,delivered,dropped_at_source,lost,loss_ratio,delay_p95_ms,duplicates,errors,upcalls,windows_judged,delay_p50_ms,delay_p99_ms\n",
        );
        let o = |x: Option<f64>| x.map_or_else(String::new, |v| v.to_string());
        let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
        for s in &self.streams {
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                q(&self.scenario),
                self.scheduler,
                self.seed,
                q(&s.name),
                s.kind,
                q(&s.spec),
                q(&s.delivery),
                o(s.target_mbps),
                o(s.offered_mbps),
                o(s.probability),
                s.mean_mbps,
                s.p5_mbps,
                s.p50_mbps,
                s.p95_mbps,
                s.windows,
                o(s.windows_met),
                s.guarantee_held.map_or_else(String::new, |h| h.to_string()),
                s.sent,
                s.delivered,
                s.dropped_at_source,
                s.lost,
                s.loss_ratio,
                s.delay_p95_ms,
                s.duplicates,
                s.errors,
                s.upcalls,
                s.windows_judged.map_or_else(String::new, |n| n.to_string()),
                s.delay_p50_ms,
                s.delay_p99_ms,
            );
        }
        out
    }

    /// The chart [`SessionReport::to_svg`] draws: delivered Mbit/s per
    /// 1 s window of each stream, its target dashed.
    pub fn chart(&self) -> LineChart {
        chart(&format!("{} ({})", self.scenario, self.scheduler), &[self])
    }

    /// An SVG plot of [`SessionReport::chart`].
    pub fn to_svg(&self) -> String {
        self.chart().render()
    }
}

/// One chart of several runs of a session (each stream's delivered rate
/// per 1 s window, labelled `<stream> (<scheduler>)` when there is more
/// than one run; targets dashed, once).
pub fn chart(title: &str, runs: &[&SessionReport]) -> LineChart {
    let mut series = Vec::new();
    let many = runs.len() > 1;
    for r in runs {
        for s in &r.streams {
            series.push(Series {
                name: if many {
                    format!("{} ({})", s.name, r.scheduler)
                } else {
                    s.name.clone()
                },
                points: s
                    .series_mbps
                    .iter()
                    .enumerate()
                    .map(|(i, &m)| (i as f64 + 1.0, m))
                    .collect(),
                dashed: false,
            });
        }
    }
    if let Some(r) = runs.first() {
        for s in &r.streams {
            if let Some(t) = s.target_mbps {
                series.push(Series {
                    name: format!("{} target", s.name),
                    points: vec![(0.0, t), (r.duration_s, t)],
                    dashed: true,
                });
            }
        }
    }
    LineChart {
        title: title.to_string(),
        x_label: "time (s)".into(),
        y_label: "delivered (Mbit/s, 1 s windows)".into(),
        series,
    }
}
