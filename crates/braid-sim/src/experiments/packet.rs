//! The seed's experiments at packet level: the same paths and streams as
//! the fluid harness ([`super::harness`]), carried by a real session over
//! IQ-RUDP connections that compete with trace-driven cross traffic.
//!
//! Each path of the fluid model is "a link of capacity C minus replayed
//! cross traffic"; here it is that link for real: a `C` link with a
//! drop-tail queue, the path's one-way delay, and a
//! [`PacedSource`](crate::sources::PacedSource) that replays the cross
//! traffic's rate (`C − available`, changing at every trace step) through
//! the same queue. The session never sees a capacity: its path estimates
//! come from what its connections deliver ([`braid_core::session`]), one
//! sample per `cfg.sample`, in a window of `cfg.window_samples`.
//!
//! Differences from the fluid runs, by construction:
//! * the sources start at time zero (the session can only measure a path by
//!   using it), and the first `cfg.start` is warm-up, not measured;
//! * the bottleneck queue is Emulab's default, 50 packets ([`queue_bytes`]);
//! * the transport's congestion control shares the bottleneck queue with
//!   the cross traffic, so a path delivers what CUBIC wins, not exactly the
//!   available bandwidth, and headers and retransmissions take their share;
//! * frames are cut into messages of [`MESSAGE`] bytes; frame jitter is not
//!   measured (the sink records bytes per 1 s bin).

use super::harness::{PathSpec, StreamDef, StreamResult};
use super::setup::HarnessConfig;
use super::ExperimentError;
use crate::session::{
    build, CrossDef, HopDef, Infeasible, PathDef, SessionNode, SessionReport, SessionSim, SinkApp,
    SourceApp, SourceStream, ViolationPromise, Workload,
};
use braid_core::link::LinkConfig;
use braid_core::link::{Capacity, RateSchedule};
use braid_core::session::{Event, SchedulerKind, SessionConfig, StreamConfig};
use braid_core::{Bandwidth, Duration, Instant, PathId, StreamId};

/// Message size the frames are cut into.
pub const MESSAGE: u32 = 1200;
/// Packet size of the cross traffic on the wire.
pub const CROSS_PACKET: u32 = 1200;

/// Drop-tail queue of a path's bottleneck: Emulab's default of 50 packets
/// of 1500 bytes (the seed's testbed), but at least 2 ms at the link rate.
pub fn queue_bytes(link: Bandwidth) -> u64 {
    (50 * 1500).max(link.bytes_in(Duration::from_millis(2)))
}

/// The cross traffic of a fluid path on a `link`-rate link: `link − available`.
fn cross_of(p: &PathSpec, link: Bandwidth) -> Result<Capacity, ExperimentError> {
    match &p.capacity {
        Capacity::Schedule(s) => {
            let rates = s.rates().iter().map(|r| link.saturating_sub(*r)).collect();
            let s = RateSchedule::new(s.bin(), rates)
                .map_err(|e| ExperimentError::Capacity(e.to_string()))?;
            Ok(Capacity::Schedule(s))
        }
        Capacity::Constant(r) => Ok(Capacity::Constant(link.saturating_sub(*r))),
    }
}

/// Runs `streams` over `paths` (each a `link`-rate link minus its cross
/// traffic) with a session running `scheduler`; returns what each stream
/// got over `[cfg.start, cfg.end)` in `cfg.sample` bins.
///
/// # Errors
/// A cross-traffic schedule that cannot be built.
pub fn run(
    paths: &[PathSpec],
    link: Bandwidth,
    streams: &[StreamDef],
    scheduler: SchedulerKind,
    cfg: &HarnessConfig,
) -> Result<Vec<StreamResult>, ExperimentError> {
    run_pinned(paths, link, streams, scheduler, cfg, None)
}

/// [`run`] with every stream pinned to path `pin` (an index into `paths`)
/// when it is set: the session still opens every path and measures it.
///
/// # Errors
/// As [`run`].
pub fn run_pinned(
    paths: &[PathSpec],
    link: Bandwidth,
    streams: &[StreamDef],
    scheduler: SchedulerKind,
    cfg: &HarnessConfig,
    pin: Option<usize>,
) -> Result<Vec<StreamResult>, ExperimentError> {
    run_session(paths, link, streams, scheduler, cfg, pin, false).map(|r| r.0)
}

/// [`run`] under PGOS with upcalls answered by lowering the spec to the
/// best achievable (as `braid stream` does) and idle paths probed (the
/// runtime's default); also returns what each violation-bound stream was
/// promised, once per statistics interval.
///
/// # Errors
/// As [`run`].
pub fn run_lowering(
    paths: &[PathSpec],
    link: Bandwidth,
    streams: &[StreamDef],
    cfg: &HarnessConfig,
) -> Result<(Vec<StreamResult>, Vec<ViolationPromise>), ExperimentError> {
    run_session(
        paths,
        link,
        streams,
        SchedulerKind::default(),
        cfg,
        None,
        true,
    )
}

fn run_session(
    paths: &[PathSpec],
    link: Bandwidth,
    streams: &[StreamDef],
    scheduler: SchedulerKind,
    cfg: &HarnessConfig,
    pin: Option<usize>,
    like_the_runtime: bool,
) -> Result<(Vec<StreamResult>, Vec<ViolationPromise>), ExperimentError> {
    // As `braid stream` runs a session: upcalls answered by lowering, and
    // idle paths probed (a stream alone that does not fill its paths
    // measures them no other way). The seed's tables run without either.
    let on_infeasible = like_the_runtime.then_some(Infeasible::Lower);
    let mut pdefs = Vec::new();
    let mut cross = Vec::new();
    for (i, p) in paths.iter().enumerate() {
        let mut fwd = LinkConfig::new(format!("{}:fwd", p.name), Capacity::Constant(link), p.delay);
        fwd.queue_bytes = cfg
            .queue
            .map_or_else(|| queue_bytes(link), |q| link.bytes_in(q));
        let back = LinkConfig::new(
            format!("{}:back", p.name),
            Capacity::Constant(link),
            p.delay,
        );
        pdefs.push(PathDef {
            name: p.name.clone(),
            hops: vec![HopDef { forward: fwd, back }],
        });
        cross.push(CrossDef {
            name: format!("{}:cross", p.name),
            path: i,
            hop: 0,
            rate: cross_of(p, link)?,
            packet: CROSS_PACKET,
        });
    }
    let end = cfg.end;
    let sources = streams
        .iter()
        .map(|s| {
            let per_msg = u64::from(MESSAGE) * 8;
            let backlog = s.target.bps() as f64 * cfg.max_backlog.as_secs_f64();
            let window = ((backlog / per_msg as f64).ceil() as u32).clamp(64, 65_536);
            SourceStream {
                name: s.name.clone(),
                config: match pin {
                    Some(j) => StreamConfig::new(s.spec)
                        .with_window(window)
                        .pinned_to(vec![PathId(j as u32)]),
                    None => StreamConfig::new(s.spec).with_window(window),
                },
                workload: Workload::Frames {
                    frames: s.frames.clone(),
                    period: s.period,
                    size: MESSAGE,
                },
                start: Instant::ZERO,
                stop: end,
            }
        })
        .collect();
    let mut config = SessionConfig {
        scheduler,
        estimate_window: cfg.window_samples,
        bulk_yield: cfg.bulk_yield,
        ..SessionConfig::default()
    };
    config.transport.stats_interval = cfg.sample;
    if like_the_runtime {
        config.probe = Some(braid_core::session::probe::ProbeConfig::default());
    }
    config.transport.send_queue_bytes = 64 << 20;
    config.transport.recv_window = 64 << 20;
    let def = SessionSim {
        name: "packet".into(),
        seed: 1,
        duration: end.since_origin(),
        bin: cfg.sample,
        paths: pdefs,
        streams: sources,
        cross,
        config,
        on_infeasible,
    };
    let built = build(&def).map_err(|e| ExperimentError::Capacity(e.to_string()))?;
    let (src, snk) = (built.source, built.sink);
    let sim = built.sim.run();
    let (Some(tx), Some(rx)) = (
        sim.node::<SessionNode<SourceApp>>(src),
        sim.node::<SessionNode<SinkApp>>(snk),
    ) else {
        unreachable!("build adds the source and the sink with these types");
    };
    let upcalls = tx
        .app()
        .events()
        .iter()
        .filter(|(_, e)| matches!(e, Event::GuaranteeUnmet { .. }))
        .count() as u64;
    let sent = tx.app().sent();
    // Windows met by the one definition, as `braid sim session` reports them.
    let report = SessionReport::from_run(&sim, &def, cfg.start.since_origin());
    let promises = tx.app().violation_promises().to_vec();
    let first = (cfg.start.since_origin().as_nanos() / cfg.sample.as_nanos().max(1)) as usize;
    let last = (cfg.end.since_origin().as_nanos() / cfg.sample.as_nanos().max(1)) as usize;
    let results = (0..streams.len())
        .map(|i| {
            let bins = rx
                .app()
                .streams()
                .get(&StreamId(i as u32 + 1))
                .map(|s| s.bins.clone())
                .unwrap_or_default();
            let secs = cfg.sample.as_secs_f64();
            let throughput_mbps = (first..last)
                .map(|b| bins.get(b).copied().unwrap_or(0) as f64 * 8.0 / secs / 1e6)
                .collect();
            StreamResult {
                throughput_mbps,
                frame_done: Vec::new(),
                frames_dropped: sent.get(i).map_or(0, |s| s.3),
                upcalls,
                windows_met: report.streams.get(i).and_then(|s| s.windows_met),
                expected_misses: report.streams.get(i).and_then(|s| s.expected_misses),
                windows_judged: report.streams.get(i).and_then(|s| s.windows_judged),
            }
        })
        .collect();
    Ok((results, promises))
}
