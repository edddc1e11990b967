//! The multipath streaming harness behind the seed's Tables II–V: what an
//! experiment is made of, how it runs on [`Simulation`], and how a stream's
//! result is summarised.
//!
//! Model (the abstraction of seed 000 §V-A, Fig. 5): one sender, L paths.
//! Path j is a simulator link whose rate is the path's *available*
//! bandwidth `b^j(t)` (a [`Capacity`](braid_core::link::Capacity), e.g. 100 Mbit/s minus replayed cross
//! traffic) and whose delay is the path's propagation delay. When path j's
//! link can take a packet the sender asks the scheduler for one packet for
//! it; the packet occupies the link until [`Capacity::finish_time`](braid_core::link::Capacity::finish_time) and
//! reaches the receiver one delay later. So each path delivers exactly its
//! available bandwidth whenever there is something to send, with no
//! transport dynamics: the comparison isolates the schedulers.
//!
//! Sources emit frames at a fixed rate (SmartPointer: 25 frames/s), each
//! cut into packets of at most [`PACKET`] bytes; a frame that would push the
//! stream's backlog over [`HarnessConfig::max_backlog`] is dropped at the
//! source (counted). A monitor pushes each path's mean available bandwidth
//! over every `sample` interval into a sliding window and hands the
//! scheduler a fresh path view (PGOS maps on it; the baselines use mean and
//! RTT). OptSched gets, at each window start, the true capacity of the
//! coming window and last window's dispatched rates. All of that is the
//! sender node, [`SchedulerNode`]; the receiver is a [`StreamSink`].
//!
//! Output per stream ([`StreamResult`]): throughput per `sample` bin at the
//! receiver over the measured span, and frame completion times (for
//! jitter); [`summarize`] turns it into the tables' figures.
//! Deterministic: no randomness at all beyond the inputs.

use super::sched_node::SchedulerNode;
pub use super::setup::{Algo, HarnessConfig, PathSpec, StreamDef, PACKET};
use super::stream_sink::StreamSink;
use crate::node::RouteId;
use crate::sim::Simulation;
use braid_core::link::LinkConfig;
use braid_core::scheduler::{SchedError, StreamSpec};
use braid_core::session::meter::WindowMeter;
use braid_core::session::Delivery;
use braid_core::{Bandwidth, Duration, Instant};

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
    /// Share of the spec's windows of offer time in the measured span that
    /// met it by braid's one definition ([`windows_met`]); `None` for best
    /// effort.
    pub windows_met: Option<f64>,
    /// A violation-bound stream's mean misses per window by the same
    /// definition (what the window needed less what came in time), from
    /// packet-level runs; `None` otherwise.
    pub expected_misses: Option<f64>,
    /// How many windows those two figures judged (from the start of the
    /// measured span; fewer than its length when the run's records were
    /// cut, see `SessionReport`); `None` where there are none.
    pub windows_judged: Option<usize>,
}

/// Run `streams` over `paths` with `algo` on the simulator: a
/// [`SchedulerNode`] sends over one link per path (rate: the path's
/// available bandwidth; delay: the path delay) to a [`StreamSink`]. The
/// simulation runs until every packet dispatched before `cfg.end` has
/// arrived.
///
/// # Errors
/// A stream the scheduler refuses to open (an invalid spec).
pub fn run(
    paths: &[PathSpec],
    streams: &[StreamDef],
    algo: Algo,
    cfg: &HarnessConfig,
) -> Result<Vec<StreamResult>, SchedError> {
    // No timer runs after `cfg.end`, so the run ends by itself once the
    // last packet has arrived; the horizon only has to be later than that.
    let mut sim = Simulation::empty("harness", 0, Duration::MAX, cfg.sample);
    let sink = sim.add_node(
        "sink",
        Box::new(StreamSink::new(
            streams.len(),
            cfg.start,
            cfg.end,
            cfg.sample,
        )),
    );
    let routes: Vec<RouteId> = paths
        .iter()
        .map(|p| {
            let link = sim.add_link(LinkConfig::new(p.name.clone(), p.capacity.clone(), p.delay));
            let route = sim.add_route(p.name.clone(), vec![link]);
            sim.bind_route(route, sink);
            route
        })
        .collect();
    let node = SchedulerNode::new(paths, &routes, streams, algo, cfg)?;
    let sender = sim.add_node("scheduler", Box::new(node));
    sim.run_until(Instant::MAX);
    let (Some(tx), Some(rx)) = (
        sim.node::<SchedulerNode>(sender),
        sim.node::<StreamSink>(sink),
    ) else {
        unreachable!("the harness added both nodes with these types");
    };
    Ok(streams
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let frame_done = rx.frame_done(i);
            StreamResult {
                throughput_mbps: rx.throughput_mbps(i),
                windows_met: fluid_windows_met(s, &frame_done, cfg),
                expected_misses: None,
                windows_judged: None,
                frame_done,
                frames_dropped: tx.frames_dropped(i),
                upcalls: tx.upcalls(),
            }
        })
        .collect())
}

/// [`windows_met`] of a fluid run's stream: its frames offered every
/// period from `cfg.start` (in packets, the messages the harness sends),
/// each delivered whole when its last packet arrived. A frame dropped at
/// the source was offered and never delivered.
fn fluid_windows_met(
    s: &StreamDef,
    frame_done: &[(u64, Instant)],
    cfg: &HarnessConfig,
) -> Option<f64> {
    if s.frames.is_empty() || s.period.is_zero() {
        return None;
    }
    let size = |f: u64| u64::from(s.frames[(f % s.frames.len() as u64) as usize]);
    let offered_at = |f: u64| cfg.start + s.period * f;
    let offers = (0u64..)
        .map(|f| (f, offered_at(f)))
        .take_while(|&(_, at)| at < cfg.end)
        .flat_map(|(f, at)| {
            let (whole, rest) = (size(f) / u64::from(PACKET), size(f) % u64::from(PACKET));
            std::iter::repeat_n(u64::from(PACKET), whole as usize)
                .chain((rest > 0).then_some(rest))
                .map(move |b| (at, b))
        });
    let deliveries = frame_done
        .iter()
        .map(|&(f, done)| (offered_at(f), done, size(f)));
    windows_met(&s.spec, offers, deliveries, cfg.start, cfg.end)
}

/// Share of `spec`'s windows of offer time within `[start, end)` that met
/// it by braid's one definition ([`braid_core::session::meter`]: what was
/// offered in the window and reached the sink within the allowance
/// carries min(rate, offered) less one message, or min(x, offered)
/// messages), for a reliable stream; a window whose allowance runs past
/// `end` is left out. `offers` are (time, bytes) per message; `deliveries`
/// (offered at, arrived at, bytes). `None` for a spec without windows
/// (best effort).
pub fn windows_met(
    spec: &StreamSpec,
    offers: impl IntoIterator<Item = (Instant, u64)>,
    deliveries: impl IntoIterator<Item = (Instant, Instant, u64)>,
    start: Instant,
    end: Instant,
) -> Option<f64> {
    let mut m = WindowMeter::for_spec(spec, Delivery::Reliable, Instant::ZERO)?;
    for (at, bytes) in offers {
        m.offer(at, bytes);
    }
    for (offered, arrived, bytes) in deliveries {
        m.deliver(offered, arrived, bytes);
    }
    let len = m.len().as_nanos().max(1);
    let first = start.since_origin().as_nanos().div_ceil(len) as usize;
    let last = (end.since_origin().as_nanos() / len) as usize;
    let judged: Vec<bool> = (first..last)
        .filter(|&k| m.decided(k, end))
        .map(|k| m.window(k).met)
        .collect();
    // No window judged: nothing to say (not "none met").
    (!judged.is_empty())
        .then(|| judged.iter().filter(|&&met| met).count() as f64 / judged.len() as f64)
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
    /// Fraction of bins with at least the target (the seed's kind of
    /// figure: arrival-time bins).
    pub met: f64,
    /// Share of windows that met the spec by braid's one definition
    /// ([`windows_met`]); `None` for best effort.
    pub windows_met: Option<f64>,
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
        windows_met: r.windows_met,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_core::link::Capacity;
    use braid_core::scheduler::{Msfq, StreamSpec};

    /// 10 s measured after 2 s, 1 s bins.
    fn ten_seconds() -> HarnessConfig {
        HarnessConfig {
            start: Instant::ZERO + Duration::from_secs(2),
            end: Instant::ZERO + Duration::from_secs(12),
            sample: Duration::from_secs(1),
            window_samples: 2,
            max_backlog: Duration::from_secs(2),
            opt_window: Duration::from_secs(1),
            bulk_yield: None,
            queue: None,
        }
    }

    /// One 10 Mbit/s path, one 1 Mbit/s stream of 5000-byte frames: every
    /// bin gets exactly the offered rate and every frame completes one
    /// period after the previous one (4 ms serialisation + 10 ms delay).
    #[test]
    fn a_path_with_room_delivers_the_source_exactly() {
        let paths = [PathSpec {
            name: "a".into(),
            capacity: Capacity::Constant(Bandwidth::from_mbps(10)),
            delay: Duration::from_millis(10),
        }];
        let period = Duration::from_millis(40);
        let streams = [StreamDef {
            name: "s".into(),
            spec: StreamSpec::best_effort(1_000_000).unwrap(),
            frames: vec![5_000],
            period,
            target: Bandwidth::from_mbps(1),
        }];
        let cfg = ten_seconds();
        let r = run(&paths, &streams, Algo::Online(Box::new(Msfq::new())), &cfg).unwrap();
        assert_eq!(r[0].throughput_mbps, vec![1.0; 10]);
        assert_eq!(r[0].frames_dropped, 0);
        assert_eq!(r[0].frame_done.len(), 250);
        let first = cfg.start + Duration::from_millis(14);
        assert_eq!(r[0].frame_done[0], (0, first));
        let s = summarize(&r[0], streams[0].target, period);
        assert_eq!((s.jitter_ms, s.interval_ms, s.met), (0.0, 40.0, 1.0));
        // Best effort has no windows to meet.
        assert_eq!(s.windows_met, None);
    }

    /// The tables' `windows_met` is the session meter's verdict on what
    /// was offered: a 1 Mbit/s guarantee on a 10 Mbit/s path meets every
    /// window, on a 0.5 Mbit/s path none (its frames wait, then are
    /// dropped at the source, and both count against it).
    #[test]
    fn windows_met_judges_what_the_source_offered() {
        let run_on = |mbps: f64| {
            let paths = [PathSpec {
                name: "a".into(),
                capacity: Capacity::Constant(Bandwidth::from_bps((mbps * 1e6) as u64)),
                delay: Duration::from_millis(10),
            }];
            let streams = [StreamDef {
                name: "s".into(),
                spec: StreamSpec::min_rate(Bandwidth::from_mbps(1), 0.95).unwrap(),
                frames: vec![5_000],
                period: Duration::from_millis(40),
                target: Bandwidth::from_mbps(1),
            }];
            let cfg = ten_seconds();
            let r = run(&paths, &streams, Algo::Online(Box::new(Msfq::new())), &cfg).unwrap();
            r[0].windows_met
        };
        assert_eq!(run_on(10.0), Some(1.0));
        assert_eq!(run_on(0.5), Some(0.0));
    }
}
