//! The multipath streaming harness behind the seed's Tables II–V.
//!
//! Model (the abstraction of seed 000 §V-A, Fig. 5): one sender, L paths.
//! Path j is a server whose rate is the path's *available* bandwidth
//! `b^j(t)` (a [`Capacity`], e.g. 100 Mbit/s minus replayed cross traffic),
//! plus a constant propagation delay. When path j is free the harness asks
//! the scheduler for one packet for it ([`Scheduler::poll_transmit_on`]);
//! the packet occupies the path until [`Capacity::finish_time`] and reaches
//! the receiver one delay later. So each path delivers exactly its available
//! bandwidth whenever there is something to send, with no transport
//! dynamics: the comparison isolates the schedulers.
//!
//! Sources emit frames at a fixed rate (SmartPointer: 25 frames/s), each
//! cut into packets of at most [`PACKET`] bytes; a frame that would push the
//! stream's backlog over [`HarnessConfig::max_backlog`] is dropped at the
//! source (counted). A monitor pushes each path's mean available bandwidth
//! over every `sample` interval into a [`SlidingWindow`] and hands the
//! scheduler a fresh [`PathView`] (PGOS maps on it; the baselines use mean
//! and RTT). OptSched gets, at each window start, the true capacity of the
//! coming window and last window's receiving rates.
//!
//! Output per stream: throughput per `sample` bin at the receiver over the
//! measured span, and frame completion times (for jitter). Deterministic:
//! no randomness at all beyond the inputs.

use crate::capacity::Capacity;
use braid_core::estimate::SlidingWindow;
use braid_core::scheduler::{
    OptSched, PathId, PathView, Pgos, SchedError, Scheduler, SchedulerEvent, StreamId, StreamSpec,
    UpcallAnswer,
};
use braid_core::{Bandwidth, Duration, Instant};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Largest packet in bytes.
pub const PACKET: u32 = 1500;

/// One path of the experiment.
#[derive(Debug, Clone)]
pub struct PathSpec {
    /// Name for reports.
    pub name: String,
    /// Available bandwidth over time.
    pub capacity: Capacity,
    /// One-way propagation delay.
    pub delay: Duration,
}

/// One stream of the experiment.
#[derive(Debug, Clone)]
pub struct StreamDef {
    /// Name for reports.
    pub name: String,
    /// What the stream asks of the scheduler.
    pub spec: StreamSpec,
    /// Source frame sizes in bytes, one per frame period, looped.
    pub frames: Vec<u32>,
    /// Frame period (40 ms at 25 frames/s).
    pub period: Duration,
    /// The rate the source offers, for reports ("target").
    pub target: Bandwidth,
}

/// Harness settings.
#[derive(Debug, Clone)]
pub struct HarnessConfig {
    /// Sources start at this time (the monitor runs from zero, so the
    /// scheduler's window is already full).
    pub start: Instant,
    /// End of the run; throughput is measured over `[start, end)`.
    pub end: Instant,
    /// Measurement bin and monitor sample interval.
    pub sample: Duration,
    /// Samples in each path's sliding window.
    pub window_samples: usize,
    /// A stream's backlog bound, as a duration of its own target rate.
    pub max_backlog: Duration,
    /// OptSched's window (capacity oracle and feedback period).
    pub opt_window: Duration,
}

/// What one stream got.
#[derive(Debug, Clone, Default)]
pub struct StreamResult {
    /// Throughput per bin (Mbit/s) over the measured span.
    pub throughput_mbps: Vec<f64>,
    /// Receiver completion time of every fully delivered frame, in order of
    /// frame number.
    pub frame_done: Vec<(u64, Instant)>,
    /// Frames dropped at the source (backlog bound).
    pub frames_dropped: u64,
    /// Upcalls the scheduler made during the run (same for every stream).
    pub upcalls: u64,
}

/// A scheduler under test: the trait object, plus OptSched's oracle hook
/// and PGOS's upcall answers.
#[derive(Debug)]
pub enum Algo {
    /// Any online scheduler.
    Online(Box<dyn Scheduler>),
    /// PGOS; the harness answers upcalls as an application would: keep the
    /// rate at the best probability achievable if that is at least 0.5,
    /// else accept best effort.
    Pgos(Box<Pgos>),
    /// OptSched, which also needs the capacity oracle.
    Opt(Box<OptSched>),
}

impl Algo {
    fn sched(&mut self) -> &mut dyn Scheduler {
        match self {
            Algo::Online(s) => s.as_mut(),
            Algo::Pgos(s) => s.as_mut(),
            Algo::Opt(s) => s.as_mut(),
        }
    }

    /// Drain events; answer upcalls (PGOS). Returns the upcalls seen.
    fn drain_events(&mut self, now: Instant) -> u64 {
        let mut upcalls = Vec::new();
        while let Some(e) = self.sched().poll_event() {
            if let SchedulerEvent::Upcall { stream, spec, best } = e {
                upcalls.push((stream, spec, best));
            }
        }
        let n = upcalls.len() as u64;
        if let Algo::Pgos(p) = self {
            for (stream, spec, best) in upcalls {
                let lowered = match (spec.required_rate(), best.probability) {
                    (Some(rate), Some(prob)) if prob >= 0.5 => {
                        StreamSpec::min_rate(rate, prob.min(0.999)).ok()
                    }
                    _ => None,
                };
                let answer = lowered.map_or(UpcallAnswer::Accept, UpcallAnswer::Lower);
                // The stream is open (the upcall names it).
                let _ = p.handle_upcall_answer(stream, answer, now);
            }
            while p.poll_event().is_some() {}
        }
        n
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// Path j is free.
    PathFree(usize),
    /// Stream i emits its next frame.
    Frame(usize),
    /// Monitor tick.
    Monitor,
    /// OptSched window start.
    OptWindow,
}

/// Per-packet metadata the harness keeps beside the scheduler's queue
/// (schedulers serve each stream in FIFO order).
#[derive(Debug, Clone, Copy)]
struct Pkt {
    frame: u64,
}

/// Run `streams` over `paths` with `algo`.
///
/// # Errors
/// A stream the scheduler refuses to open (an invalid spec).
pub fn run(
    paths: &[PathSpec],
    streams: &[StreamDef],
    mut algo: Algo,
    cfg: &HarnessConfig,
) -> Result<Vec<StreamResult>, SchedError> {
    let ids: Vec<PathId> = (0..paths.len()).map(|j| PathId(j as u32)).collect();
    let mut windows: Vec<SlidingWindow> = paths
        .iter()
        .map(|_| SlidingWindow::new(cfg.window_samples))
        .collect();
    let mut events: BinaryHeap<Reverse<(Instant, Ev)>> = BinaryHeap::new();
    let mut idle = vec![true; paths.len()];
    let mut meta: Vec<VecDeque<Pkt>> = vec![VecDeque::new(); streams.len()];
    let mut frame_no = vec![0u64; streams.len()];
    // Per stream: packets of each in-flight frame not yet delivered.
    let mut pending: Vec<std::collections::BTreeMap<u64, u32>> =
        vec![Default::default(); streams.len()];
    let span = cfg.end.saturating_duration_since(cfg.start);
    let bins = span.checked_div_duration(cfg.sample).unwrap_or(0) as usize;
    let mut delivered = vec![vec![0u64; bins]; streams.len()];
    let mut results: Vec<StreamResult> = vec![StreamResult::default(); streams.len()];
    let mut opt_recv = vec![0u64; streams.len()];

    // Prime the monitor with the span before `start`, one sample per bin.
    let mut t = Instant::ZERO;
    while t + cfg.sample <= cfg.start {
        for (j, p) in paths.iter().enumerate() {
            windows[j].push(p.capacity.mean_rate(t, t + cfg.sample));
        }
        t += cfg.sample;
    }
    let now0 = cfg.start;
    for (j, p) in paths.iter().enumerate() {
        let view = PathView::new(windows[j].clone(), p.delay * 2);
        algo.sched().handle_path_update(ids[j], view, now0);
    }
    for (i, s) in streams.iter().enumerate() {
        algo.sched()
            .handle_stream_open(StreamId(i as u32), s.spec, now0)?;
        events.push(Reverse((now0, Ev::Frame(i))));
    }
    let mut upcalls = algo.drain_events(now0);
    events.push(Reverse((now0 + cfg.sample, Ev::Monitor)));
    if matches!(algo, Algo::Opt(_)) {
        events.push(Reverse((now0, Ev::OptWindow)));
    }

    while let Some(Reverse((now, ev))) = events.pop() {
        if now >= cfg.end {
            break;
        }
        match ev {
            Ev::Frame(i) => {
                let s = &streams[i];
                let f = frame_no[i];
                frame_no[i] += 1;
                let size = s.frames[(f % s.frames.len() as u64) as usize];
                let npk = size.div_ceil(PACKET);
                let bound = (s.target.bytes_in(cfg.max_backlog) / u64::from(PACKET)).max(64);
                let backlog = algo.sched().backlog(StreamId(i as u32)) as u64;
                if backlog + u64::from(npk) > bound || npk == 0 {
                    results[i].frames_dropped += 1;
                } else {
                    let mut left = size;
                    while left > 0 {
                        let b = left.min(PACKET);
                        left -= b;
                        // Bounded above, so the queue accepts it.
                        if algo
                            .sched()
                            .handle_enqueue(StreamId(i as u32), b, now)
                            .is_ok()
                        {
                            meta[i].push_back(Pkt { frame: f });
                            *pending[i].entry(f).or_insert(0) += 1;
                        }
                    }
                }
                events.push(Reverse((now + s.period, Ev::Frame(i))));
                for (j, is_idle) in idle.iter_mut().enumerate() {
                    if *is_idle {
                        *is_idle = false;
                        events.push(Reverse((now, Ev::PathFree(j))));
                    }
                }
            }
            Ev::PathFree(j) => {
                let Some(tx) = algo.sched().poll_transmit_on(ids[j], now) else {
                    idle[j] = true;
                    continue;
                };
                let i = tx.stream.0 as usize;
                let Some(done) = paths[j].capacity.finish_time(now, u64::from(tx.bytes)) else {
                    idle[j] = true;
                    continue;
                };
                let arrive = done + paths[j].delay;
                if let Some(pkt) = meta[i].pop_front() {
                    if let Some(n) = pending[i].get_mut(&pkt.frame) {
                        *n -= 1;
                        if *n == 0 {
                            pending[i].remove(&pkt.frame);
                            results[i].frame_done.push((pkt.frame, arrive));
                        }
                    }
                }
                if arrive >= cfg.start && arrive < cfg.end {
                    let bin = ((arrive - cfg.start).as_nanos() / cfg.sample.as_nanos()) as usize;
                    if bin < bins {
                        delivered[i][bin] += u64::from(tx.bytes);
                    }
                }
                opt_recv[i] += u64::from(tx.bytes);
                events.push(Reverse((done, Ev::PathFree(j))));
            }
            Ev::Monitor => {
                for (j, p) in paths.iter().enumerate() {
                    windows[j].push(p.capacity.mean_rate(now - cfg.sample, now));
                    let view = PathView::new(windows[j].clone(), p.delay * 2);
                    algo.sched().handle_path_update(ids[j], view, now);
                }
                upcalls += algo.drain_events(now);
                events.push(Reverse((now + cfg.sample, Ev::Monitor)));
            }
            Ev::OptWindow => {
                if let Algo::Opt(o) = &mut algo {
                    let cap: Vec<(PathId, Bandwidth)> = paths
                        .iter()
                        .enumerate()
                        .map(|(j, p)| (ids[j], p.capacity.mean_rate(now, now + cfg.opt_window)))
                        .collect();
                    let recv: Vec<(StreamId, Bandwidth)> = if now > cfg.start {
                        opt_recv
                            .iter()
                            .enumerate()
                            .map(|(i, &b)| {
                                (
                                    StreamId(i as u32),
                                    Bandwidth::from_delivery(b, cfg.opt_window),
                                )
                            })
                            .collect()
                    } else {
                        Vec::new()
                    };
                    o.handle_window(now, &cap, &recv);
                }
                opt_recv.iter_mut().for_each(|b| *b = 0);
                events.push(Reverse((now + cfg.opt_window, Ev::OptWindow)));
            }
        }
    }
    for (i, r) in results.iter_mut().enumerate() {
        r.throughput_mbps = delivered[i]
            .iter()
            .map(|&b| Bandwidth::from_delivery(b, cfg.sample).mbps())
            .collect();
        r.frame_done.sort_by_key(|f| f.0);
        r.upcalls = upcalls;
    }
    Ok(results)
}

/// Summary statistics of one stream, as the seed's tables report them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Throughput met 95 % of the time (5th percentile), Mbit/s.
    pub p95: f64,
    /// Throughput met 99 % of the time (1st percentile), Mbit/s.
    pub p99: f64,
    /// Mean throughput, Mbit/s.
    pub mean: f64,
    /// Standard deviation of throughput, Mbit/s.
    pub std: f64,
    /// Frame jitter: mean |inter-completion time − frame period|, ms.
    pub jitter_ms: f64,
    /// Standard deviation of that deviation, ms.
    pub jitter_std_ms: f64,
    /// Mean frame inter-completion time, ms.
    pub interval_ms: f64,
    /// Standard deviation of the inter-completion time, ms.
    pub interval_std_ms: f64,
    /// Fraction of bins with at least the target.
    pub met: f64,
}

/// The lower-order-statistic quantile (the value at rank ⌈q·n⌉).
fn lower_quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let k = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len());
    s[k - 1]
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64;
    (m, var.sqrt())
}

/// Summarise one stream's result against its target and frame period.
pub fn summarize(r: &StreamResult, target: Bandwidth, period: Duration) -> Summary {
    let (mean, std) = mean_std(&r.throughput_mbps);
    let mut gaps = Vec::new();
    for w in r.frame_done.windows(2) {
        // Consecutive frames only (a dropped frame breaks the chain).
        if w[1].0 == w[0].0 + 1 {
            gaps.push(w[1].1.saturating_duration_since(w[0].1).as_secs_f64() * 1e3);
        }
    }
    let p = period.as_secs_f64() * 1e3;
    let dev: Vec<f64> = gaps.iter().map(|g| (g - p).abs()).collect();
    let (jm, js) = mean_std(&dev);
    let (im, is) = mean_std(&gaps);
    let tgt = target.mbps();
    let met = if r.throughput_mbps.is_empty() {
        0.0
    } else {
        r.throughput_mbps
            .iter()
            .filter(|&&x| x >= tgt * 0.999)
            .count() as f64
            / r.throughput_mbps.len() as f64
    };
    Summary {
        p95: lower_quantile(&r.throughput_mbps, 0.05),
        p99: lower_quantile(&r.throughput_mbps, 0.01),
        mean,
        std,
        jitter_ms: jm,
        jitter_std_ms: js,
        interval_ms: im,
        interval_std_ms: is,
        met,
    }
}
