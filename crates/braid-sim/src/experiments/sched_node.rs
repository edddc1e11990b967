//! The sending side of the multipath experiments, as one simulator node:
//! frame sources, the scheduler under test, the path monitor and
//! OptSched's capacity oracle.
//!
//! Main type: [`SchedulerNode`]. It owns the [`Algo`] and is the only code
//! that calls into the [`Scheduler`] trait (see `Algo`'s methods), so that a
//! change to that trait touches one place.
//!
//! # Driving contract
//! A [`Node`]: the simulator calls [`Node::handle_timeout`] at the instant
//! [`Node::poll_timeout`] named and then drains [`Node::poll_transmit`]. The
//! node has four kinds of timers, run at equal instants in this order
//! (which is part of the experiments' output, so it is fixed): *path free*
//! (path j's link has finished the packet it was given; ask the scheduler
//! for the next one for path j), *frame* (stream i's source emits a frame
//! and wakes idle paths; woken paths run before the next stream's frame),
//! *monitor* (every `sample`, push each path's mean available bandwidth over
//! the last sample into its [`SlidingWindow`] and hand the scheduler a fresh
//! [`PathView`]), *OptSched window* (hand OptSched the true capacity of the
//! coming window and last window's dispatched rates). Nothing runs at or
//! after the run's end.
//!
//! # Pacing
//! Path j is a simulator link whose rate is the path's available bandwidth.
//! The node gives the link a packet only when the previous one has finished
//! serialising, which it knows by asking the same [`Capacity::finish_time`]
//! the link uses; so the link never queues and the scheduler decides each
//! packet as late as possible, at the instant the path can take it.
//!
//! # Invariants
//! Every dispatched datagram carries a [`FrameTag`]: the stream, the frame
//! and whether it is the frame's last packet. Schedulers serve each stream
//! in FIFO order, so the node labels dispatches from a per-stream queue of
//! tags, bounded like the scheduler's own backlog (frames that would exceed
//! [`HarnessConfig::max_backlog`] are dropped at the source and counted).

use super::setup::{Algo, HarnessConfig, PathSpec, StreamDef, PACKET};
use super::stream_sink::FrameTag;
use crate::node::{Datagram, Node, RouteId, Transmit};
use braid_core::estimate::SlidingWindow;
use braid_core::link::Capacity;
use braid_core::scheduler::{
    PathId, PathView, SchedError, Scheduler, SchedulerEvent, StreamId, StreamSpec, UpcallAnswer,
};
use braid_core::{Bandwidth, Duration, Instant};
use std::collections::VecDeque;

/// Smallest backlog bound of a stream, in packets.
pub const MIN_BACKLOG_PACKETS: u64 = 64;

/// A timer of the node. The derived order is the order in which timers due
/// at the same instant run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Due {
    /// Path j's link can take a packet.
    PathFree(usize),
    /// Stream i emits its next frame.
    Frame(usize),
    /// Monitor tick.
    Monitor,
    /// OptSched window start.
    OptWindow,
}

/// One path as the node sees it.
#[derive(Debug)]
struct PathState {
    capacity: Capacity,
    rtt: Duration,
    route: RouteId,
    window: SlidingWindow,
    /// When the path's link can take a packet, if the node wants to be told
    /// (`None`: idle with nothing to send, or busy forever).
    free_at: Option<Instant>,
    /// Idle: nothing was available when the link last became free.
    idle: bool,
}

/// One stream's source.
#[derive(Debug)]
struct Source {
    def: StreamDef,
    next_frame: Instant,
    frame_no: u64,
    /// Tags of the packets the scheduler holds for this stream, in order.
    tags: VecDeque<FrameTag>,
    /// Bytes dispatched in the current OptSched window.
    window_bytes: u64,
    frames_dropped: u64,
}

impl Algo {
    fn sched(&mut self) -> &mut dyn Scheduler {
        match self {
            Algo::Online(s) => s.as_mut(),
            Algo::Pgos(s) => s.as_mut(),
            Algo::Opt(s) => s.as_mut(),
        }
    }

    /// Drains events; answers upcalls (PGOS). Returns the upcalls seen.
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
                // The stream is open (the upcall names it), so an error here
                // can only be a stale answer, which is harmless to ignore.
                let _ = p.handle_upcall_answer(stream, answer, now);
            }
            while p.poll_event().is_some() {}
        }
        n
    }
}

/// The sending side of an experiment (see the module docs).
#[derive(Debug)]
pub struct SchedulerNode {
    algo: Algo,
    paths: Vec<PathState>,
    sources: Vec<Source>,
    sample: Duration,
    max_backlog: Duration,
    opt_window: Duration,
    start: Instant,
    end: Instant,
    next_monitor: Instant,
    next_opt: Option<Instant>,
    upcalls: u64,
    /// Dispatches made in the current `handle_timeout`, at most one per
    /// path-free timer run (so bounded by the paths times the timers run in
    /// one instant).
    outbox: VecDeque<Transmit>,
}

impl SchedulerNode {
    /// A node that sends `streams` over `paths` (path j on `routes[j]`)
    /// with `algo`. The monitor is primed with the span before
    /// `cfg.start`, one sample per `cfg.sample`; the streams are opened and
    /// the scheduler sees the paths at `cfg.start`.
    ///
    /// # Errors
    /// A stream the scheduler refuses to open (an invalid spec).
    pub fn new(
        paths: &[PathSpec],
        routes: &[RouteId],
        streams: &[StreamDef],
        mut algo: Algo,
        cfg: &HarnessConfig,
    ) -> Result<Self, SchedError> {
        let now0 = cfg.start;
        let mut states = Vec::with_capacity(paths.len());
        for (j, (p, &route)) in paths.iter().zip(routes).enumerate() {
            let mut window = SlidingWindow::new(cfg.window_samples);
            let mut t = Instant::ZERO;
            while t + cfg.sample <= cfg.start {
                window.push(p.capacity.mean_rate(t, t + cfg.sample));
                t += cfg.sample;
            }
            let view = PathView::new(window.clone(), p.delay * 2);
            algo.sched().handle_path_update(path_id(j), view, now0);
            states.push(PathState {
                capacity: p.capacity.clone(),
                rtt: p.delay * 2,
                route,
                window,
                free_at: None,
                idle: true,
            });
        }
        let mut sources = Vec::with_capacity(streams.len());
        for (i, s) in streams.iter().enumerate() {
            algo.sched()
                .handle_stream_open(stream_id(i), s.spec, now0)?;
            sources.push(Source {
                def: s.clone(),
                next_frame: now0,
                frame_no: 0,
                tags: VecDeque::new(),
                window_bytes: 0,
                frames_dropped: 0,
            });
        }
        let upcalls = algo.drain_events(now0);
        let next_opt = matches!(algo, Algo::Opt(_)).then_some(now0);
        Ok(SchedulerNode {
            algo,
            paths: states,
            sources,
            sample: cfg.sample,
            max_backlog: cfg.max_backlog,
            opt_window: cfg.opt_window,
            start: cfg.start,
            end: cfg.end,
            next_monitor: now0 + cfg.sample,
            next_opt,
            upcalls,
            outbox: VecDeque::new(),
        })
    }

    /// Upcalls the scheduler made so far.
    pub fn upcalls(&self) -> u64 {
        self.upcalls
    }

    /// Frames stream `i` dropped at the source so far (0 for an unknown
    /// stream).
    pub fn frames_dropped(&self, i: usize) -> u64 {
        self.sources.get(i).map_or(0, |s| s.frames_dropped)
    }

    /// The earliest timer, in run order.
    fn next_due(&self) -> Option<(Instant, Due)> {
        let paths = self
            .paths
            .iter()
            .enumerate()
            .filter_map(|(j, p)| p.free_at.map(|t| (t, Due::PathFree(j))));
        let frames = self
            .sources
            .iter()
            .enumerate()
            .map(|(i, s)| (s.next_frame, Due::Frame(i)));
        let opt = self.next_opt.map(|t| (t, Due::OptWindow));
        paths
            .chain(frames)
            .chain(std::iter::once((self.next_monitor, Due::Monitor)))
            .chain(opt)
            .min()
            .filter(|&(t, _)| t < self.end)
    }

    fn on_path_free(&mut self, j: usize, now: Instant) {
        let path = &mut self.paths[j];
        path.free_at = None;
        let Some(tx) = self.algo.sched().poll_dispatch_on(path_id(j), now) else {
            path.idle = true;
            return;
        };
        let Some(done) = path.capacity.finish_time(now, u64::from(tx.bytes)) else {
            path.idle = true;
            return;
        };
        path.free_at = Some(done);
        let route = path.route;
        let src = &mut self.sources[tx.stream.0 as usize];
        src.window_bytes += u64::from(tx.bytes);
        // Never empty: the scheduler only dispatches what was enqueued, and
        // every enqueued packet pushed a tag. An untagged packet is counted
        // as throughput but completes no frame.
        let tag = src.tags.pop_front().unwrap_or(FrameTag {
            stream: tx.stream.0,
            frame: u64::MAX,
            last: false,
        });
        self.outbox.push_back(Transmit {
            route,
            datagram: Datagram::with_meta(tx.bytes, tag.encode()),
        });
    }

    fn on_frame(&mut self, i: usize, now: Instant) {
        let src = &mut self.sources[i];
        let f = src.frame_no;
        src.frame_no += 1;
        let size = src.def.frames[(f % src.def.frames.len() as u64) as usize];
        let npk = size.div_ceil(PACKET);
        let bound = (src.def.target.bytes_in(self.max_backlog) / u64::from(PACKET))
            .max(MIN_BACKLOG_PACKETS);
        let sched = self.algo.sched();
        let backlog = sched.backlog(stream_id(i)) as u64;
        if backlog + u64::from(npk) > bound || npk == 0 {
            src.frames_dropped += 1;
        } else {
            let before = src.tags.len();
            let mut left = size;
            while left > 0 {
                let b = left.min(PACKET);
                left -= b;
                // Bounded above, so the queue accepts it.
                if sched.handle_enqueue(stream_id(i), b, now).is_ok() {
                    src.tags.push_back(FrameTag {
                        stream: i as u32,
                        frame: f,
                        last: false,
                    });
                }
            }
            if src.tags.len() > before {
                if let Some(t) = src.tags.back_mut() {
                    t.last = true;
                }
            }
        }
        src.next_frame = now + src.def.period;
        for p in &mut self.paths {
            if p.idle {
                p.idle = false;
                p.free_at = Some(now);
            }
        }
    }

    fn on_monitor(&mut self, now: Instant) {
        for (j, p) in self.paths.iter_mut().enumerate() {
            p.window.push(p.capacity.mean_rate(now - self.sample, now));
            let view = PathView::new(p.window.clone(), p.rtt);
            self.algo.sched().handle_path_update(path_id(j), view, now);
        }
        self.upcalls += self.algo.drain_events(now);
        self.next_monitor = now + self.sample;
    }

    fn on_opt_window(&mut self, now: Instant) {
        if let Algo::Opt(o) = &mut self.algo {
            let cap: Vec<(PathId, Bandwidth)> = self
                .paths
                .iter()
                .enumerate()
                .map(|(j, p)| (path_id(j), p.capacity.mean_rate(now, now + self.opt_window)))
                .collect();
            let recv: Vec<(StreamId, Bandwidth)> = if now > self.start {
                self.sources
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        (
                            stream_id(i),
                            Bandwidth::from_delivery(s.window_bytes, self.opt_window),
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            };
            o.handle_window(now, &cap, &recv);
        }
        self.sources.iter_mut().for_each(|s| s.window_bytes = 0);
        self.next_opt = Some(now + self.opt_window);
    }
}

impl Node for SchedulerNode {
    fn handle_datagram(&mut self, _now: Instant, _route: RouteId, _datagram: Datagram) {
        // Nothing flows back to the sender in this model.
    }

    fn handle_timeout(&mut self, now: Instant) {
        while let Some((t, due)) = self.next_due() {
            if t > now {
                break;
            }
            match due {
                Due::PathFree(j) => self.on_path_free(j, t),
                Due::Frame(i) => self.on_frame(i, t),
                Due::Monitor => self.on_monitor(t),
                Due::OptWindow => self.on_opt_window(t),
            }
        }
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<Transmit> {
        self.outbox.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next_due().map(|(t, _)| t)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("upcalls", self.upcalls),
            (
                "frames_dropped",
                self.sources.iter().map(|s| s.frames_dropped).sum(),
            ),
        ]
    }
}

fn path_id(j: usize) -> PathId {
    PathId(j as u32)
}

fn stream_id(i: usize) -> StreamId {
    StreamId(i as u32)
}
