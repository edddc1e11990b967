//! Running a session scenario and summarising it: per stream what was
//! asked, offered and delivered and whether the guarantee held; per path
//! what the scheduler promised and what crossed it (issue 10 §2; the
//! figures of seed 000 §VI's tables).
//!
//! Main types: [`SessionReport`], [`StreamReport`], [`PathReport`]; render
//! them with [`SessionReport::to_table`], [`SessionReport::to_json`],
//! [`SessionReport::to_csv`] and [`SessionReport::to_svg`].
//!
//! # What the figures mean
//! * Rates are over **1 s windows** of what the sink application received
//!   (by arrival time). Windows before the scenario's `warmup` and outside
//!   the stream's `[start, stop)` are left out; mean / p5 / p50 / p95 are
//!   over the windows that remain.
//! * **Windows met**: the share of the spec's windows of *offer* time in
//!   the same range (1 s for a rate spec, `t_w` for window and violation
//!   specs) that met the spec by braid's one definition
//!   ([`braid_core::session::meter`]): of what the source application
//!   generated in the window, what reached the sink application within
//!   the allowance (the deadline, else the window and at least 1 s) carries at least
//!   min(rate, offered) less one message, or min(x, offered) messages. A
//!   window whose allowance runs past the end of the run is left out. The
//!   guarantee **held** when that share is at least the spec's
//!   probability; for a violation bound, when the realised mean shortfall
//!   per window (E\[Z\]) is within the bound. The arrival-time percentiles
//!   above (the seed's figure: p5 as a share of the target) stay beside it.
//! * **Loss**: messages of unreliable and deadline streams that never
//!   arrived or arrived too late, from the sink session; reliable streams
//!   lose nothing by construction (and the sink app checks order).
//! * Per path, **promised** is the sum over streams of what the latest
//!   [`Event::StreamMapped`] of each stream promised on that path;
//!   **delivered** is what the path's first hop carried of the session's
//!   datagrams (headers included) after the warm-up.

use super::apps::{Metered, SinkApp, SinkStream, SourceApp, MAX_METERED};
use super::node::SessionNode;
use super::scenario::SessionScenario;
use super::setup::{build, SessionSim};
use crate::scenario::{ScenarioError, ScenarioErrorKind};
use crate::sim::Simulation;
use crate::stats::{mean, quantile};
use braid_core::scheduler::StreamSpec;
use braid_core::session::meter::WindowMeter;
use braid_core::session::{Delivery, Event, StreamStats};
use braid_core::{Bandwidth, Duration, Instant, StreamId};
use serde::Serialize;
use std::collections::BTreeMap;

/// One stream's figures (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StreamReport {
    /// Name.
    pub name: String,
    /// `rate`, `window`, `violation` or `best-effort`.
    pub kind: String,
    /// The spec in words (`3 Mbit/s @ 0.95`, `8/10 per 100ms @ 0.9`, …).
    pub spec: String,
    /// `reliable`, `unreliable` or `deadline <ttl>`.
    pub delivery: String,
    /// The rate the spec asks for (Mbit/s); none for best effort.
    pub target_mbps: Option<f64>,
    /// The rate the source offers (Mbit/s); none for a greedy source.
    pub offered_mbps: Option<f64>,
    /// The spec's probability, where it has one.
    pub probability: Option<f64>,
    /// Mean delivered rate over the measured 1 s windows.
    pub mean_mbps: f64,
    /// 5th percentile of the windows.
    pub p5_mbps: f64,
    /// Median.
    pub p50_mbps: f64,
    /// 95th percentile.
    pub p95_mbps: f64,
    /// Windows measured.
    pub windows: usize,
    /// The windows of offer time judged for `windows_met` (those whose
    /// allowance ended within the run; none for best effort).
    pub windows_judged: Option<usize>,
    /// Share of windows that met the spec (none for best effort).
    pub windows_met: Option<f64>,
    /// Violation bounds: the mean messages short per window, E\[Z\] as
    /// realised.
    pub expected_misses: Option<f64>,
    /// Whether `windows_met` ≥ the probability (none without one).
    pub guarantee_held: Option<bool>,
    /// Messages the session accepted from the source.
    pub sent: u64,
    /// Messages the sink application received.
    pub delivered: u64,
    /// Messages the source model dropped because the session refused them
    /// for longer than its backlog allows.
    pub dropped_at_source: u64,
    /// Messages lost or too late (sink session).
    pub lost: u64,
    /// `lost / (delivered + lost)`.
    pub loss_ratio: f64,
    /// Median one-way message delay (ms), whole run.
    pub delay_p50_ms: f64,
    /// 95th percentile of one-way message delay (ms), whole run.
    pub delay_p95_ms: f64,
    /// 99th percentile of one-way message delay (ms), whole run.
    pub delay_p99_ms: f64,
    /// With a delay bound in the spec (`delay<=D@P`): the share of
    /// delivered messages whose one-way delay was at most D, whole run.
    /// `guarantee_held` needs it at P as well.
    pub delay_bound_met: Option<f64>,
    /// Redundant copies the sink session dropped.
    pub duplicates: u64,
    /// Messages the application got twice, out of order or after their
    /// deadline (must be zero).
    pub errors: u64,
    /// Guarantee-unmet upcalls the source raised for the stream.
    pub upcalls: u64,
    /// The last upcall: what the scheduler said it could carry instead.
    pub unmet: Option<UnmetReport>,
    /// What the stream's latest mapping promised, summed over its paths
    /// (Mbit/s); none when the scheduler never mapped it (MSFQ, WFQ,
    /// round-robin and min-RTT promise nothing).
    pub promised_mbps: Option<f64>,
    /// When the scheduler first mapped it onto a path (s); none when it
    /// never did.
    pub mapped_at_s: Option<f64>,
    /// Delivered Mbit/s per 1 s window over the whole run (for plots).
    #[serde(skip)]
    pub series_mbps: Vec<f64>,
}

/// What the last guarantee-unmet upcall of a stream said it could carry
/// (seed 000 §V's upcall, `Event::GuaranteeUnmet`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnmetReport {
    /// When it was raised (s).
    pub at_s: f64,
    /// Largest rate mappable at the spec's probability (Mbit/s).
    pub best_mbps: f64,
    /// Largest probability at which the spec's rate is mappable.
    pub best_probability: Option<f64>,
    /// Smallest E\[Z\] achievable (violation bounds).
    pub best_expected_misses: Option<f64>,
}

/// One path's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathReport {
    /// Name.
    pub name: String,
    /// Hops (relays + 1).
    pub hops: usize,
    /// Sum of the latest promises on it (Mbit/s).
    pub promised_mbps: f64,
    /// Session bytes its first hop carried per second after the warm-up (Mbit/s).
    pub delivered_mbps: f64,
    /// Times the source saw it go down.
    pub down: u64,
    /// When the source named it unmeasured (`Event::PathUnmeasured`: no
    /// usable samples within the warm-up limit), if it did (s).
    pub unmeasured_at_s: Option<f64>,
    /// Capacity dips the source detected on it (`Event::PathDip`).
    pub dips: u64,
    /// The first dip: from its first short interval to its detection (ms).
    pub dip_detected_after_ms: Option<f64>,
    /// Packets the sink's connection on it left unacknowledged because a
    /// reliable message found no room in its receive buffers (they came
    /// again; `transport::Stats::refused_packets`).
    pub refused_packets: u64,
}

/// A session run, summarised (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionReport {
    /// Scenario name.
    pub scenario: String,
    /// Scheduler.
    pub scheduler: String,
    /// Seed.
    pub seed: u64,
    /// Simulated seconds.
    pub duration_s: f64,
    /// Seconds left out at the start.
    pub warmup_s: f64,
    /// Per stream, in scenario order.
    pub streams: Vec<StreamReport>,
    /// Per path, in scenario order.
    pub paths: Vec<PathReport>,
    /// Events the simulator processed.
    pub sim_events: u64,
}

/// Rounds to 4 decimals for display and JSON.
fn r4(x: f64) -> f64 {
    if x.is_finite() {
        (x * 1e4).round() / 1e4
    } else {
        0.0
    }
}

fn mbit(b: Bandwidth) -> f64 {
    r4(b.bps() as f64 / 1e6)
}

/// Builds, runs and summarises `scenario`.
///
/// # Errors
/// A synthetic capacity that cannot be drawn, or a transport configuration
/// the session refuses (named as a scenario error).
pub fn run(scenario: &SessionScenario) -> Result<SessionReport, ScenarioError> {
    let def = scenario.sim()?;
    let built = build(&def).map_err(|e| ScenarioError {
        file: scenario.file.clone(),
        line: None,
        kind: ScenarioErrorKind::Value,
        message: e.to_string(),
    })?;
    let sim = built.sim.run();
    Ok(SessionReport::from_run(&sim, &def, scenario.warmup))
}

fn spec_words(spec: &StreamSpec) -> (&'static str, String, Option<f64>) {
    match *spec {
        StreamSpec::MinRate { rate, probability } => {
            ("rate", format!("{rate} @ {probability}"), Some(probability))
        }
        StreamSpec::Window {
            x,
            y,
            window,
            message_size,
            probability,
        } => (
            "window",
            format!("{x}/{y} x {message_size} B per {window} @ {probability}"),
            Some(probability),
        ),
        StreamSpec::ViolationBound {
            x,
            window,
            message_size,
            max_expected_misses,
        } => (
            "violation",
            format!("{x} x {message_size} B per {window}, E[Z] <= {max_expected_misses}"),
            None,
        ),
        StreamSpec::BestEffort { weight } => ("best-effort", format!("weight {weight}"), None),
        _ => ("other", format!("{spec:?}"), None),
    }
}

fn delivery_words(d: Delivery) -> String {
    match d {
        Delivery::Reliable => "reliable".into(),
        Delivery::Unreliable => "unreliable".into(),
        Delivery::Deadline { ttl } => format!("deadline {ttl}"),
        _ => format!("{d:?}"),
    }
}

/// A metered stream's windows ([`WindowMeter::for_spec`], from time
/// zero): what its source model generated, and what of it reached the sink
/// application when; with the offer time up to which the records are
/// whole (`None`: all of the run). The apps keep at most
/// [`MAX_METERED`] records of each kind, so a long, fast stream's later
/// windows would look empty (offered nothing, so met); they are left out.
/// `None` for best effort.
fn meter(
    config: &braid_core::session::StreamConfig,
    source: Option<&Metered>,
    sink: &SinkStream,
) -> Option<(WindowMeter, Option<Instant>)> {
    let mut meter = WindowMeter::for_spec(&config.spec, config.delivery, Instant::ZERO)?;
    let Some(m) = source else {
        return Some((meter, None));
    };
    let arrivals = sink.arrivals.as_deref().unwrap_or(&[]);
    let whole_until = whole_until(m, arrivals, MAX_METERED, meter.allowance());
    for &(at, bytes) in &m.offers {
        meter.offer(at, u64::from(bytes));
    }
    for &(seq, at, bytes) in sink.arrivals.iter().flatten() {
        if let Some(&generated) = usize::try_from(seq)
            .ok()
            .and_then(|i| m.generated_at.get(i))
        {
            meter.deliver(generated, at, u64::from(bytes));
        }
    }
    Some((meter, whole_until))
}

/// The offer time up to which a stream's records, each kept up to `cap`
/// entries, are whole: the earliest of the last offer, the last send (both
/// lists in offer order) and, for the arrivals (in arrival order, so a
/// reordered or resent message may come after the cut), the last
/// recorded arrival less the `allowance` (every message that counts for a
/// window before that arrived before the cut). `None` when none is full.
fn whole_until(
    m: &Metered,
    arrivals: &[(u64, Instant, u32)],
    cap: usize,
    allowance: Duration,
) -> Option<Instant> {
    let full = |n: usize| n >= cap;
    [
        full(m.offers.len()).then(|| m.offers.last().map(|o| o.0)),
        full(m.generated_at.len()).then(|| m.generated_at.last().copied()),
        full(arrivals.len()).then(|| {
            arrivals
                .last()
                .map(|&(_, at, _)| Instant::ZERO + at.since_origin().saturating_sub(allowance))
        }),
    ]
    .into_iter()
    .flatten()
    .map(|t| t.unwrap_or(Instant::ZERO))
    .min()
}

impl SessionReport {
    /// Summarises a finished run of `def` (built with [`build`]), leaving
    /// out 1 s windows that start before `warmup`.
    pub fn from_run(sim: &Simulation, def: &SessionSim, warmup: Duration) -> SessionReport {
        let source = sim
            .node_id("source")
            .and_then(|id| sim.node::<SessionNode<SourceApp>>(id));
        let sink = sim
            .node_id("sink")
            .and_then(|id| sim.node::<SessionNode<SinkApp>>(id));
        let secs = |d: Duration| d.as_secs_f64();
        let end_s = secs(def.duration);
        // Latest promise per stream and path; events per stream and path.
        let mut promised: BTreeMap<StreamId, Vec<(usize, Bandwidth)>> = BTreeMap::new();
        let mut upcalls: BTreeMap<StreamId, u64> = BTreeMap::new();
        let mut unmet: BTreeMap<StreamId, UnmetReport> = BTreeMap::new();
        let mut down = vec![0u64; def.paths.len()];
        let mut unmeasured = vec![None; def.paths.len()];
        let mut dips = vec![(0u64, None); def.paths.len()];
        let mut mapped_at: BTreeMap<StreamId, f64> = BTreeMap::new();
        let sent = source.map(|s| s.app().sent()).unwrap_or_default();
        for (at, e) in source.map(|s| s.app().events()).unwrap_or_default() {
            match e {
                Event::StreamMapped { stream, paths } => {
                    if !paths.is_empty() {
                        mapped_at
                            .entry(*stream)
                            .or_insert(r4(at.since_origin().as_secs_f64()));
                    }
                    promised.insert(
                        *stream,
                        paths.iter().map(|p| (p.path.0 as usize, p.rate)).collect(),
                    );
                }
                Event::GuaranteeUnmet { stream, best, .. } => {
                    *upcalls.entry(*stream).or_default() += 1;
                    unmet.insert(
                        *stream,
                        UnmetReport {
                            at_s: r4(at.since_origin().as_secs_f64()),
                            best_mbps: mbit(best.rate),
                            best_probability: best.probability.map(r4),
                            best_expected_misses: best.expected_misses.map(r4),
                        },
                    );
                }
                Event::PathDip {
                    path,
                    detected_after,
                    ..
                } => {
                    if let Some((n, first)) = dips.get_mut(path.0 as usize) {
                        *n += 1;
                        first.get_or_insert(r4(detected_after.as_secs_f64() * 1e3));
                    }
                }
                Event::PathUnmeasured { path, .. } => {
                    if let Some(u) = unmeasured.get_mut(path.0 as usize) {
                        *u = Some(r4(at.since_origin().as_secs_f64()));
                    }
                }
                Event::PathDown { path, .. } => {
                    if let Some(d) = down.get_mut(path.0 as usize) {
                        *d += 1;
                    }
                }
                _ => {}
            }
        }
        let mut last_stats: BTreeMap<StreamId, StreamStats> = BTreeMap::new();
        for (_, e) in sink.map(|s| s.app().events()).unwrap_or_default() {
            if let Event::Stats { stream, stats } = e {
                last_stats.insert(*stream, *stats);
            }
        }
        let empty = BTreeMap::new();
        let got = sink.map(|s| s.app().streams()).unwrap_or(&empty);
        let metered = source.map(|s| s.app().metered()).unwrap_or_default();
        let mut streams = Vec::with_capacity(def.streams.len());
        for (k, s) in def.streams.iter().enumerate() {
            let id = StreamId(k as u32 + 1);
            let rec = got.get(&id).cloned().unwrap_or_default();
            let series: Vec<f64> = (0..end_s.ceil() as usize)
                .map(|i| rec.bins.get(i).copied().unwrap_or(0) as f64 * 8.0 / 1e6)
                .collect();
            let from = secs(warmup)
                .max(s.start.since_origin().as_secs_f64())
                .ceil() as usize;
            let to = (s.stop.since_origin().as_secs_f64().min(end_s).floor() as usize).max(from);
            let mut measured: Vec<f64> = series.get(from..to).unwrap_or(&[]).to_vec();
            if measured.is_empty() {
                measured = series.clone();
            }
            let (kind, words, probability) = spec_words(&s.config.spec);
            let target = s.config.spec.required_rate();
            let judged =
                meter(&s.config, metered.get(k).copied().flatten(), &rec).map(|(m, whole)| {
                    let len = m.len().as_nanos().max(1);
                    let first = (from as u64 * 1_000_000_000).div_ceil(len) as usize;
                    let mut last = (to as u64 * 1_000_000_000 / len) as usize;
                    if let Some(w) = whole {
                        // Only the windows wholly before the records ran out.
                        last = last.min((w.since_origin().as_nanos() / len) as usize);
                    }
                    let end = Instant::ZERO + def.duration;
                    let mut ks: Vec<usize> = (first..last).filter(|&w| m.decided(w, end)).collect();
                    if ks.is_empty() {
                        ks = (first..last).collect();
                    }
                    ks.iter().map(|&w| m.window(w)).collect::<Vec<_>>()
                });
            let windows_judged = judged.as_ref().map(Vec::len);
            let windows_met = judged
                .as_ref()
                .map(|ws| ws.iter().filter(|w| w.met).count() as f64 / ws.len().max(1) as f64);
            let expected_misses = match (&s.config.spec, &judged) {
                (StreamSpec::ViolationBound { .. }, Some(ws)) => {
                    Some(ws.iter().map(|w| w.misses() as f64).sum::<f64>() / ws.len().max(1) as f64)
                }
                _ => None,
            };
            let stats = last_stats.get(&id).copied().unwrap_or_default();
            let (sent_n, dropped) = sent
                .get(k)
                .map(|(_, _, n, d, _)| (*n, *d))
                .unwrap_or_default();
            let mut delays = rec.delays_us.clone();
            delays.sort_unstable();
            let delay_ms = |pct: usize| {
                let us = delays
                    .get((delays.len() * pct).div_ceil(100).saturating_sub(1))
                    .copied()
                    .unwrap_or(0);
                r4(us as f64 / 1e3)
            };
            let delay_bound_met = s.config.delay.map(|b| {
                let max = b.max.as_micros();
                let within = delays.partition_point(|&d| d <= max);
                within as f64 / delays.len().max(1) as f64
            });
            let delay_held = match (s.config.delay, delay_bound_met) {
                (Some(b), Some(m)) => m + 1e-9 >= b.probability,
                _ => true,
            };
            streams.push(StreamReport {
                name: s.name.clone(),
                kind: kind.into(),
                spec: words,
                delivery: delivery_words(s.config.delivery),
                target_mbps: target.map(mbit),
                offered_mbps: s.workload.offered().map(mbit),
                probability,
                mean_mbps: r4(mean(&measured)),
                p5_mbps: r4(quantile(&measured, 0.05)),
                p50_mbps: r4(quantile(&measured, 0.5)),
                p95_mbps: r4(quantile(&measured, 0.95)),
                windows: measured.len(),
                windows_judged,
                windows_met: windows_met.map(r4),
                expected_misses: expected_misses.map(r4),
                guarantee_held: match (windows_met, probability, expected_misses, &s.config.spec) {
                    (Some(m), Some(p), _, _) => Some(m + 1e-9 >= p),
                    (
                        _,
                        _,
                        Some(z),
                        StreamSpec::ViolationBound {
                            max_expected_misses,
                            ..
                        },
                    ) => Some(z <= *max_expected_misses + 1e-9),
                    _ => None,
                }
                .map(|held| held && delay_held),
                sent: sent_n,
                delivered: rec.messages,
                dropped_at_source: dropped,
                lost: stats.lost,
                loss_ratio: r4(stats.lost as f64 / (rec.messages + stats.lost).max(1) as f64),
                delay_p50_ms: delay_ms(50),
                delay_p95_ms: delay_ms(95),
                delay_p99_ms: delay_ms(99),
                delay_bound_met: delay_bound_met.map(r4),
                duplicates: stats.duplicates,
                errors: rec.duplicates + rec.out_of_order + rec.late + rec.corrupt,
                upcalls: upcalls.get(&id).copied().unwrap_or(0),
                unmet: unmet.remove(&id),
                promised_mbps: promised
                    .get(&id)
                    .map(|v| r4(v.iter().map(|(_, r)| r.bps() as f64 / 1e6).sum::<f64>() + 0.0)),
                mapped_at_s: mapped_at.get(&id).copied(),
                series_mbps: series.iter().map(|&m| r4(m)).collect(),
            });
        }
        let mut paths = Vec::with_capacity(def.paths.len());
        for (i, p) in def.paths.iter().enumerate() {
            let promise: f64 = promised
                .values()
                .flat_map(|v| v.iter())
                .filter(|(path, _)| *path == i)
                .map(|(_, r)| r.bps() as f64 / 1e6)
                .sum::<f64>()
                + 0.0; // an empty sum is -0.0
            let delivered = sim
                .route_id(&format!("{}:hop0:fwd", p.name))
                .and_then(|r| sim.route_stats(r))
                .map_or(0.0, |st| {
                    let bin = st.delivered_series.bin().as_secs_f64().max(1e-9);
                    let from = (secs(warmup) / bin).ceil() as usize;
                    let to = (end_s / bin).floor() as usize;
                    let bytes: u64 = (from..to).map(|b| st.delivered_series.get(b)).sum();
                    bytes as f64 * 8.0 / 1e6 / ((to.saturating_sub(from)) as f64 * bin).max(1e-9)
                });
            paths.push(PathReport {
                name: p.name.clone(),
                hops: p.hops.len(),
                promised_mbps: r4(promise),
                delivered_mbps: r4(delivered),
                down: down[i],
                unmeasured_at_s: unmeasured[i],
                dips: dips[i].0,
                dip_detected_after_ms: dips[i].1,
                refused_packets: sink
                    .and_then(|n| n.session().connection(braid_core::PathId(i as u32)))
                    .map_or(0, |c| c.stats().refused_packets),
            });
        }
        SessionReport {
            scenario: def.name.clone(),
            scheduler: def.config.scheduler.name().to_string(),
            seed: def.seed,
            duration_s: r4(end_s),
            warmup_s: r4(secs(warmup)),
            streams,
            paths,
            sim_events: sim.stats().events,
        }
    }

    /// The stream called `name`.
    pub fn stream(&self, name: &str) -> Option<&StreamReport> {
        self.streams.iter().find(|s| s.name == name)
    }

    /// One JSON object: `scenario`, `scheduler`, `seed`, `duration_s`,
    /// `warmup_s`, `streams` and `paths` arrays (field names as on
    /// [`StreamReport`] and [`PathReport`]), `sim_events`.
    pub fn to_json(&self) -> String {
        // Plain data of numbers, strings and options: serialisation cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> Instant {
        Instant::ZERO + Duration::from_secs(s)
    }

    /// The records of a long, fast stream stop at the apps' cap; the
    /// windows after that would look empty (offered nothing, so met) and
    /// must not be judged.
    #[test]
    fn records_cut_at_their_cap_end_the_judged_windows() {
        let m = Metered {
            offers: (0..4).map(|s| (at(s), 1000)).collect(),
            generated_at: (0..4).map(at).collect(),
        };
        let arrivals: Vec<(u64, Instant, u32)> = (0..3).map(|q| (q, at(q + 2), 1000)).collect();
        let allowance = Duration::from_secs(1);
        // Nothing full: the records are whole.
        assert_eq!(whole_until(&m, &arrivals, 5, allowance), None);
        // The offers and sends fill at 4: whole until the last of them.
        assert_eq!(whole_until(&m, &arrivals, 4, allowance), Some(at(3)));
        // The arrivals fill at 3: whole until the last arrival (4 s) less
        // the allowance.
        assert_eq!(whole_until(&m, &arrivals, 3, allowance), Some(at(3)));
        let late: Vec<(u64, Instant, u32)> = (0..3).map(|q| (q, at(q + 1), 1000)).collect();
        assert_eq!(whole_until(&m, &late, 3, allowance), Some(at(2)));
    }
}
