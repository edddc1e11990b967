//! Reports: what a run measured, as a table, JSON, CSV or SVG.
//!
//! Main types: [`Report`] (the whole run), [`FlowReport`], [`LinkReport`],
//! [`NodeReport`]. Throughput percentiles are over whole 1 s windows
//! (aligned to whole seconds of virtual time) inside a flow's active span;
//! delay is one-way, from hand-off to the first link until delivery; loss is
//! `lost / (lost + delivered)` over packets whose fate is known (packets
//! still in flight at the end count as neither). Invariant: rendering is a
//! pure function of the report, so same scenario and seed give
//! byte-identical output (no maps with random order, no clocks).

mod csv;
mod svg;
pub mod table;

pub use svg::{LineChart, Series};

use crate::sim::{SimStats, Simulation};
use crate::stats::{mean, quantile, DelayHistogram};
use braid_core::link::LinkStats;
use braid_core::{Duration, Instant};
use serde::Serialize;

/// Rounds for display and JSON (4 decimals), so reports stay readable.
fn r4(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1e4).round() / 1e4
    } else {
        0.0
    }
}

/// Rounds a fraction to 6 decimals.
fn r6(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1e6).round() / 1e6
    } else {
        0.0
    }
}

/// Throughput summary over 1 s windows, Mbit/s.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Throughput {
    /// Mean of the windows (or of the whole span if shorter than one window).
    pub mean: f64,
    /// 5th percentile.
    pub p5: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// Number of whole 1 s windows.
    pub windows: usize,
}

/// One-way delay summary, milliseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Delay {
    /// Mean.
    pub mean: f64,
    /// 95th percentile (1/128 resolution).
    pub p95: f64,
    /// Maximum.
    pub max: f64,
}

/// One flow's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowReport {
    /// Name.
    pub name: String,
    /// Kind label.
    pub kind: String,
    /// Links of the data route(s), `a>b`, routes separated by `|`.
    pub route: String,
    /// Start, seconds.
    pub start_s: f64,
    /// Stop, seconds.
    pub stop_s: f64,
    /// Throughput over 1 s windows.
    pub throughput_mbps: Throughput,
    /// One-way delay.
    pub delay_ms: Delay,
    /// Loss fraction.
    pub loss: f64,
    /// Datagrams sent.
    pub sent_packets: u64,
    /// Datagrams delivered.
    pub delivered_packets: u64,
    /// Datagrams dropped (queue or random).
    pub lost_packets: u64,
    /// Duplicate copies delivered.
    pub duplicates: u64,
    /// Throughput per report bin, Mbit/s.
    #[serde(skip)]
    pub series_mbps: Vec<f64>,
    /// Mean delay per report bin, ms (`None`: nothing delivered).
    #[serde(skip)]
    pub series_delay_ms: Vec<Option<f64>>,
    /// Lost packets per report bin.
    #[serde(skip)]
    pub series_lost: Vec<u64>,
}

/// One link's results.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkReport {
    /// Name.
    pub name: String,
    /// Mean capacity over the run, Mbit/s.
    pub capacity_mbps: f64,
    /// Mean delivered (serialized) rate over the run, Mbit/s.
    pub delivered_mbps: f64,
    /// delivered / capacity (0 when capacity is 0).
    pub utilization: f64,
    /// Counters.
    pub stats: LinkStats,
    /// Capacity per report bin, Mbit/s.
    #[serde(skip)]
    pub series_capacity_mbps: Vec<f64>,
    /// Delivered rate per report bin, Mbit/s.
    #[serde(skip)]
    pub series_delivered_mbps: Vec<f64>,
    /// Largest waiting queue per report bin, bytes.
    #[serde(skip)]
    pub series_queue_bytes: Vec<u64>,
    /// Drops per report bin.
    #[serde(skip)]
    pub series_drops: Vec<u64>,
}

/// One named counter of a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Counter {
    /// Name.
    pub name: String,
    /// Value.
    pub value: u64,
}

/// One node's counters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeReport {
    /// Name.
    pub name: String,
    /// Counters, in the node's order.
    pub counters: Vec<Counter>,
}

/// Everything a run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// Seed of the run.
    pub seed: u64,
    /// How to replay it.
    pub replay: String,
    /// Virtual time simulated, seconds.
    pub duration_s: f64,
    /// Report bin width, seconds.
    pub bin_s: f64,
    /// Flows.
    pub flows: Vec<FlowReport>,
    /// Links.
    pub links: Vec<LinkReport>,
    /// Nodes.
    pub nodes: Vec<NodeReport>,
    /// Simulator counters.
    pub sim: SimStats,
}

impl Report {
    /// The report of what `sim` has measured so far (call it after
    /// [`Simulation::run`], or between [`Simulation::run_until`] steps).
    pub fn from_run(sim: &Simulation) -> Report {
        build(sim)
    }

    /// The flow called `name`.
    pub fn flow(&self, name: &str) -> Option<&FlowReport> {
        self.flows.iter().find(|f| f.name == name)
    }

    /// The link called `name`.
    pub fn link(&self, name: &str) -> Option<&LinkReport> {
        self.links.iter().find(|l| l.name == name)
    }

    /// Number of report bins.
    pub fn bins(&self) -> usize {
        (self.duration_s / self.bin_s).ceil() as usize
    }

    /// Human-readable tables.
    pub fn to_table(&self) -> String {
        table::render(self)
    }

    /// Pretty JSON (series are in the CSV, not here).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Per-bin flow series as CSV: `time_s,flow,throughput_mbps,delay_mean_ms,lost_packets`.
    pub fn flows_csv(&self) -> String {
        csv::flows(self)
    }

    /// Per-bin link series as CSV:
    /// `time_s,link,capacity_mbps,delivered_mbps,queue_max_bytes,drops`.
    pub fn links_csv(&self) -> String {
        csv::links(self)
    }

    /// Writes `flows.csv` and `links.csv` into `dir` (created if missing)
    /// and returns their paths.
    ///
    /// # Errors
    /// The directory or a file cannot be written.
    pub fn write_csv(&self, dir: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
        std::fs::create_dir_all(dir)?;
        let flows = dir.join("flows.csv");
        let links = dir.join("links.csv");
        std::fs::write(&flows, self.flows_csv())?;
        std::fs::write(&links, self.links_csv())?;
        Ok(vec![flows, links])
    }

    /// An SVG line chart: each flow's throughput and each link's capacity
    /// (dashed) over time, averaged over 1 s (or per bin for runs under 10 s).
    pub fn to_svg(&self) -> String {
        svg::report_chart(self).render()
    }
}

fn mbps(bytes: u64, over: Duration) -> f64 {
    if over.is_zero() {
        return 0.0;
    }
    bytes as f64 * 8.0 / over.as_secs_f64() / 1e6
}

/// Builds the report of a simulation.
fn build(sim: &Simulation) -> Report {
    let bin = sim.bin;
    let end = sim.end;
    let nbins = end.as_nanos().div_ceil(bin.as_nanos()) as usize;
    let per_sec = (Duration::from_secs(1).as_nanos() / bin.as_nanos()).max(1) as usize;

    let mut flows = Vec::new();
    for f in &sim.flows {
        let routes: Vec<_> = f
            .routes
            .iter()
            .filter_map(|r| sim.routes.get(r.0 as usize))
            .collect();
        let bytes_at = |i: usize| {
            routes
                .iter()
                .map(|r| r.stats.delivered_series.get(i))
                .sum::<u64>()
        };
        let series_mbps: Vec<f64> = (0..nbins).map(|i| r4(mbps(bytes_at(i), bin))).collect();
        let series_delay_ms = (0..nbins)
            .map(|i| {
                let n: u64 = routes
                    .iter()
                    .map(|r| r.stats.delivered_count_series.get(i))
                    .sum();
                let s: u64 = routes.iter().map(|r| r.stats.delay_sum_series.get(i)).sum();
                (n > 0).then(|| r4(s as f64 / n as f64 / 1e6))
            })
            .collect();
        let series_lost = (0..nbins)
            .map(|i| routes.iter().map(|r| r.stats.lost_series.get(i)).sum())
            .collect();
        // Whole seconds inside [start, min(stop, end)).
        let stop = f.stop.min(end);
        let first = f.start.as_nanos().div_ceil(1_000_000_000);
        let last = stop.as_nanos() / 1_000_000_000;
        let windows: Vec<f64> = (first..last)
            .map(|s| {
                let b0 = s as usize * per_sec;
                let bytes: u64 = (b0..b0 + per_sec).map(bytes_at).sum();
                mbps(bytes, Duration::from_secs(1))
            })
            .collect();
        let delivered_bytes: u64 = routes.iter().map(|r| r.stats.delivered_bytes).sum();
        let tp_mean = if windows.is_empty() {
            mbps(delivered_bytes, stop - f.start)
        } else {
            mean(&windows)
        };
        let mut hist = DelayHistogram::new();
        let mut sent = 0;
        let mut delivered = 0;
        let mut lost = 0;
        let mut dups = 0;
        for r in &routes {
            hist_merge(&mut hist, &r.stats.delay);
            sent += r.stats.sent_packets;
            delivered += r.stats.delivered_packets;
            lost += r.stats.queue_drops + r.stats.random_losses;
            dups += r.stats.duplicates;
        }
        let route = routes
            .iter()
            .map(|r| {
                r.links
                    .iter()
                    .map(|l| sim.links[l.0 as usize].cfg().name.as_str())
                    .collect::<Vec<_>>()
                    .join(">")
            })
            .collect::<Vec<_>>()
            .join("|");
        flows.push(FlowReport {
            name: f.name.clone(),
            kind: f.kind.clone(),
            route,
            start_s: r4(f.start.as_secs_f64()),
            stop_s: r4(stop.as_secs_f64()),
            throughput_mbps: Throughput {
                mean: r4(tp_mean),
                p5: r4(quantile(&windows, 0.05)),
                p50: r4(quantile(&windows, 0.5)),
                p95: r4(quantile(&windows, 0.95)),
                windows: windows.len(),
            },
            delay_ms: Delay {
                mean: r4(hist.mean().as_nanos() as f64 / 1e6),
                p95: r4(hist.quantile(0.95).as_nanos() as f64 / 1e6),
                max: r4(hist.max().as_nanos() as f64 / 1e6),
            },
            loss: if lost + delivered == 0 {
                0.0
            } else {
                r6(lost as f64 / (lost + delivered) as f64)
            },
            sent_packets: sent,
            delivered_packets: delivered,
            lost_packets: lost,
            duplicates: dups,
            series_mbps,
            series_delay_ms,
            series_lost,
        });
    }

    let run = end - Instant::ZERO;
    let links = sim
        .links
        .iter()
        .map(|l| {
            let cap = l.cfg().capacity.mean_rate(Instant::ZERO, end).mbps();
            let delivered = mbps(l.stats().sent_bytes, run);
            let bin_edge =
                |i: usize| Instant::from_nanos((i as u64 * bin.as_nanos()).min(end.as_nanos()));
            LinkReport {
                name: l.cfg().name.clone(),
                capacity_mbps: r4(cap),
                delivered_mbps: r4(delivered),
                utilization: if cap > 0.0 { r4(delivered / cap) } else { 0.0 },
                stats: l.stats().clone(),
                series_capacity_mbps: (0..nbins)
                    .map(|i| {
                        r4(l.cfg()
                            .capacity
                            .mean_rate(bin_edge(i), bin_edge(i + 1))
                            .mbps())
                    })
                    .collect(),
                series_delivered_mbps: (0..nbins)
                    .map(|i| r4(mbps(l.sent_series.get(i), bin_edge(i + 1) - bin_edge(i))))
                    .collect(),
                series_queue_bytes: (0..nbins).map(|i| l.queue_series.get(i)).collect(),
                series_drops: (0..nbins).map(|i| l.drop_series.get(i)).collect(),
            }
        })
        .collect();

    let nodes = sim
        .nodes
        .iter()
        .map(|n| NodeReport {
            name: n.name.clone(),
            counters: n
                .node
                .counters()
                .into_iter()
                .map(|(name, value)| Counter {
                    name: name.to_string(),
                    value,
                })
                .collect(),
        })
        .collect();

    Report {
        scenario: sim.name.clone(),
        seed: sim.seed,
        replay: format!("{}={}", crate::seed::SEED_ENV, sim.seed),
        duration_s: r4(run.as_secs_f64()),
        bin_s: bin.as_secs_f64(),
        flows,
        links,
        nodes,
        sim: sim.stats.clone(),
    }
}

fn hist_merge(into: &mut DelayHistogram, from: &DelayHistogram) {
    into.merge(from);
}
