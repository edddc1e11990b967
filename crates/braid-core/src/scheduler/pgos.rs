//! PGOS dispatch (seed 000 §V-B.2b, Fig. 6, Table I): per-packet path and
//! stream choice on top of the resource mapping.
//!
//! [`Pgos`] owns the streams' queues, the path views and the current
//! [`Mapping`]. Each mapped part (stream i on path j at rate r_ij) has a
//! virtual clock: its k-th packet's deadline is `tag + s·8/r_ij`, the
//! VirtualClock form of the seed's `D[k] = t_w/x·(k−1)` that also works for
//! packets of varying size. Per path a min-heap of parts ordered by deadline,
//! ties to the higher window constraint x/y, is the seed's VS vector; per path
//! a virtual deadline advanced by `s·8/R_j` (R_j = mapped rate on j) is VP.
//!
//! Precedence when path j can send (Table I):
//! 1. **Scheduled on j**: the earliest part deadline on j, if it lies within
//!    one scheduling window `t_w` of now (a part may run at most one window
//!    ahead of its rate; beyond that its packets count as unscheduled).
//! 2. **Scheduled on another path that is behind**: the earliest deadline at
//!    the head of another path's VS that is already past (≤ now). Only late
//!    packets are taken — taking on-time ones would reorder a single-path
//!    stream for nothing. (Interpretation of the seed's 2.1/2.2.)
//! 3. **Unscheduled**: (a) the excess of a stream mapped on j that has run
//!    a window ahead of its rate (guaranteed streams have the higher window
//!    constraint, Table I 3.2; best effort has no deadline), without
//!    advancing its tag; (b) best-effort streams and guaranteed streams
//!    without a mapping (waiting for an upcall answer), by self-clocked
//!    fair-queueing finish tag with their weights; (c) so that no path
//!    idles, mapped streams' backlog on other paths, earliest deadline first.
//!
//! A stream restricted to some paths ([`Scheduler::handle_stream_paths`]) is
//! mapped over those paths only, and classes 2 and 3 skip it on any other
//! path: class 2 and 3c look only at the heads of the other paths' VS, so a
//! head the path may not take is passed over, not searched behind; class 3b
//! sets aside the SCFQ entries the path may not take and puts them back.
//! Class 1 and 3a serve parts mapped on the path, which the mapping placed
//! there only if the stream may use it. A stream with an empty set is not
//! put into any heap.
//!
//! A part's tag never lags `now` by more than one window, so a starved part
//! catches up by at most one window's worth. A transmit handed back through
//! `handle_blocked` rolls back the clocks it advanced. Blocked paths are
//! skipped in push mode with exponential back-off ([`PgosConfig::backoff_initial`] up to
//! [`PgosConfig::backoff_max`]).
//!
//! Cost per decision: O(L + log n) for L paths and n streams (heap pops and
//! pushes, plus a peek at each other path's heap head); stale heap entries are
//! dropped lazily and amortise to O(log n).

use super::mapping::{self, MapRequest, MapperConfig, Mapping, MappingHealth};
use super::path::PathView;
use super::queues::{StreamQueues, DEFAULT_MAX_BACKLOG};
use super::spec::StreamSpec;
use super::{Dispatch, PathId, RemapReason, SchedError, Scheduler, SchedulerEvent, StreamId};
use crate::time::{Duration, Instant};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// PGOS settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PgosConfig {
    /// Mapping rules and re-map hysteresis.
    pub mapper: MapperConfig,
    /// Scheduling window t_w: how far a part may run ahead of its rate.
    pub window: Duration,
    /// Bound on queued messages per stream.
    pub max_backlog: usize,
    /// First back-off after a path blocks.
    pub backoff_initial: Duration,
    /// Largest back-off.
    pub backoff_max: Duration,
    /// Bound on undelivered events (oldest dropped, counted in stats).
    pub max_events: usize,
}

impl Default for PgosConfig {
    fn default() -> Self {
        PgosConfig {
            mapper: MapperConfig::default(),
            window: Duration::from_millis(100),
            max_backlog: DEFAULT_MAX_BACKLOG,
            backoff_initial: Duration::from_millis(1),
            backoff_max: Duration::from_secs(1),
            max_events: 1024,
        }
    }
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PgosStats {
    /// Decisions by class: scheduled, other path, unscheduled.
    pub decisions: [u64; 3],
    /// Re-maps run (including retries that changed nothing).
    pub remaps: u64,
    /// Streams whose mapping changed (a new layout, mapped after being
    /// unmapped, or unmapped with an upcall): what flapping would show.
    pub mapping_changes: u64,
    /// Upcalls emitted.
    pub upcalls: u64,
    /// Stale heap entries dropped.
    pub stale: u64,
    /// Events dropped because the queue was full.
    pub events_dropped: u64,
    /// Lowered specs restored to what the application asked for, once
    /// every guarantee mapped with them again.
    pub restored: u64,
}

/// Where a guaranteed stream stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Not (yet) mapped, no upcall outstanding.
    New,
    Mapped,
    /// Infeasible; upcall sent; runs best effort.
    AwaitingAnswer,
    /// The application accepted best effort.
    Accepted,
}

/// The application's answer to an upcall.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum UpcallAnswer {
    /// Try again with this (weaker) spec.
    Lower(StreamSpec),
    /// Keep running best effort; retried quietly on later re-maps.
    Accept,
    /// Close the stream.
    Close,
}

#[derive(Debug, Clone)]
struct PartState {
    path: usize,
    rate_bps: u64,
    /// Virtual finish time of the last packet, ns.
    tag: u64,
    /// Generation of this part's live heap entry (0 = none).
    heap_gen: u64,
}

#[derive(Debug, Clone)]
struct StreamState {
    status: Status,
    /// The spec the application asked for, while it runs a lowered one
    /// (an upcall answered [`UpcallAnswer::Lower`]): every re-map tries it
    /// again and restores it when every guarantee then maps.
    asked: Option<StreamSpec>,
    parts: Vec<PartState>,
    /// Window constraint scaled to u32 (higher first on ties).
    wc: u32,
    weight: u64,
    tag3: u128,
    heap3_gen: u64,
}

/// VS entry: (deadline ns, inverted window constraint, slot, part, gen).
type VsEntry = Reverse<(u64, u32, u32, u32, u64)>;
/// Unscheduled entry: (SCFQ finish tag, slot, gen).
type BeEntry = Reverse<(u128, u32, u64)>;

#[derive(Debug, Clone)]
struct PathState {
    id: PathId,
    view: PathView,
    vs: BinaryHeap<VsEntry>,
    /// VP virtual deadline, ns.
    vp_tag: u64,
    /// Mapped rate on the path (bit/s), or its mean if nothing is mapped.
    vp_rate: u64,
    blocked_until: Instant,
    backoff: Duration,
}

/// The PGOS scheduler (see the module docs). Implements [`Scheduler`].
///
/// # Example
/// ```
/// use braid_core::scheduler::*;
/// use braid_core::{Bandwidth, Duration, Instant};
///
/// let t = Instant::ZERO;
/// let mut s = Pgos::new(PgosConfig::default());
/// // A steady path (30 Mbit/s in 95 % of samples) and a jumpy one.
/// let steady = EmpiricalDistribution::from_mbps(&[29.0, 30.0, 31.0, 30.0, 30.0]);
/// let jumpy = EmpiricalDistribution::from_mbps(&[2.0, 60.0, 80.0, 5.0, 70.0]);
/// s.handle_path_update(PathId(0), PathView::new(steady, Duration::from_millis(20)), t);
/// s.handle_path_update(PathId(1), PathView::new(jumpy, Duration::from_millis(30)), t);
/// let atoms = StreamSpec::min_rate(Bandwidth::from_mbps(20), 0.95)?;
/// s.handle_stream_open(StreamId(1), atoms, t)?;
/// // The guarantee goes on the steady path, not the one with the higher mean.
/// assert_eq!(s.mapping().parts(StreamId(1)).unwrap()[0].path, PathId(0));
/// s.handle_enqueue(StreamId(1), 1400, t)?;
/// let tx = s.poll_dispatch_on(PathId(0), t).unwrap();
/// assert_eq!((tx.stream, tx.class), (StreamId(1), Class::Scheduled));
/// # Ok::<(), SchedError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Pgos {
    cfg: PgosConfig,
    queues: StreamQueues,
    streams: Vec<Option<StreamState>>,
    paths: Vec<PathState>,
    be: BinaryHeap<BeEntry>,
    /// SCFQ virtual time.
    vtime: u128,
    next_gen: u64,
    mapping: Mapping,
    last_remap: Option<Instant>,
    last_retry: Option<Instant>,
    events: VecDeque<SchedulerEvent>,
    stats: PgosStats,
    /// Part served by the decision in progress: (slot, part, tag before).
    undo_part: Option<(usize, usize, u64)>,
    /// How to undo the last decision if the driver hands it back.
    undo: Option<Undo>,
    /// Scratch for `poll_dispatch`'s path order, kept so a decision does not
    /// allocate.
    vp_order: Vec<(u64, usize)>,
    /// Scratch for class 3b: entries set aside because the path may not
    /// take their stream, put back after the decision.
    be_skipped: Vec<BeEntry>,
}

/// State to roll back when the last transmit comes back through
/// [`Scheduler::handle_blocked`].
#[derive(Debug, Clone, Copy)]
struct Undo {
    stream: StreamId,
    path: usize,
    part: Option<(usize, usize, u64)>,
    vp_prev: u64,
}

const SCFQ_SCALE: u128 = 1 << 40;

fn ns_for(bytes: u32, rate_bps: u64) -> u64 {
    if rate_bps == 0 {
        return u64::MAX / 4;
    }
    let ns = (u128::from(bytes) * 8_000_000_000) / u128::from(rate_bps);
    u64::try_from(ns).unwrap_or(u64::MAX / 4)
}

impl Pgos {
    /// A scheduler with no paths and no streams.
    pub fn new(cfg: PgosConfig) -> Self {
        Pgos {
            queues: StreamQueues::new(cfg.max_backlog),
            cfg,
            streams: Vec::new(),
            paths: Vec::new(),
            be: BinaryHeap::new(),
            vtime: 0,
            next_gen: 1,
            mapping: Mapping::default(),
            last_remap: None,
            last_retry: None,
            events: VecDeque::new(),
            stats: PgosStats::default(),
            undo_part: None,
            undo: None,
            vp_order: Vec::new(),
            be_skipped: Vec::new(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> PgosStats {
        self.stats
    }

    /// The current mapping.
    pub fn mapping(&self) -> &Mapping {
        &self.mapping
    }

    /// The spec `stream` runs under now: the one it was opened with, or a
    /// lowered one after an upcall answered [`UpcallAnswer::Lower`].
    pub fn spec_of(&self, stream: StreamId) -> Option<StreamSpec> {
        let slot = self.queues.slot_of(stream).ok()?;
        self.queues.get(slot).map(|s| s.spec)
    }

    /// What the mapping of violation-bound `stream` promises on the current
    /// path views: Lemma 2's E\[Z\] per window (`None` for other specs and
    /// unmapped streams).
    pub fn expected_misses(&self, stream: StreamId) -> Option<f64> {
        mapping::expected_misses(&self.mapping, &self.requests(), &self.path_views(), stream)
    }

    /// Answer an upcall for `stream`.
    ///
    /// # Errors
    /// Unknown stream, or an invalid lowered spec.
    pub fn handle_upcall_answer(
        &mut self,
        stream: StreamId,
        answer: UpcallAnswer,
        now: Instant,
    ) -> Result<(), SchedError> {
        let slot = self.queues.slot_of(stream)?;
        match answer {
            UpcallAnswer::Close => self.handle_stream_close(stream, now),
            UpcallAnswer::Accept => {
                if let Some(Some(s)) = self.streams.get_mut(slot) {
                    s.status = Status::Accepted;
                }
                Ok(())
            }
            UpcallAnswer::Lower(spec) => {
                spec.validate()?;
                let current = self.queues.get(slot).map(|s| s.spec);
                if current == Some(spec) {
                    // The spec that could not be met, again: mapping it
                    // again would raise the same upcall. Run best effort
                    // (retried on later re-maps) as for Accept.
                    if let Some(Some(s)) = self.streams.get_mut(slot) {
                        s.status = Status::Accepted;
                    }
                    return Ok(());
                }
                let asked = self.streams[slot]
                    .as_ref()
                    .and_then(|st| st.asked)
                    .or(current);
                let new = self.respec(stream, spec)?;
                if let Some(st) = self.streams[new].as_mut() {
                    st.asked = asked.filter(|a| *a != spec);
                }
                self.remap(now, RemapReason::StreamsChanged);
                Ok(())
            }
        }
    }

    /// Maps `stream` again as if it had just opened: an upcall it raised
    /// comes again (with today's figures) if its spec still cannot be met.
    /// A session that held an upcall back during warm-up asks this way.
    ///
    /// # Errors
    /// Unknown stream.
    pub fn ask_again(&mut self, stream: StreamId, now: Instant) -> Result<(), SchedError> {
        let slot = self.queues.slot_of(stream)?;
        if let Some(Some(s)) = self.streams.get_mut(slot) {
            if s.status != Status::Mapped {
                s.status = Status::New;
            }
        }
        self.remap(now, RemapReason::StreamsChanged);
        Ok(())
    }

    /// Gives `stream` a new spec, keeping its queue and path restriction;
    /// returns its new slot (its state starts afresh).
    fn respec(&mut self, stream: StreamId, spec: StreamSpec) -> Result<usize, SchedError> {
        let slot = self.queues.slot_of(stream)?;
        // The queue and the path restriction outlive the spec change.
        let new = self.queues.respec(stream, spec)?;
        self.streams[slot] = None;
        self.streams.resize(self.queues.capacity(), None);
        self.streams[new] = Some(Self::fresh_state(&spec));
        Ok(new)
    }

    /// The mapping requests, with `specs` in place of the streams' own.
    fn requests_with(&self, specs: &[(StreamId, StreamSpec)]) -> Vec<MapRequest> {
        let mut requests = self.requests();
        for r in &mut requests {
            if let Some((_, a)) = specs.iter().find(|(id, _)| *id == r.id) {
                r.spec = *a;
            }
        }
        requests
    }

    /// Restores the asked specs of the lowered streams that map with them
    /// again, if no stream that maps today (or is restored) is pushed out;
    /// returns that mapping.
    fn try_restore(&mut self) -> Option<Mapping> {
        let asked: Vec<(StreamId, StreamSpec)> = self
            .queues
            .iter()
            .filter_map(|(i, s)| Some((s.id, self.streams[i].as_ref()?.asked?)))
            .collect();
        if asked.is_empty() {
            return None;
        }
        let views = self.path_views();
        let all_asked = mapping::map_streams(&self.requests_with(&asked), &views, &self.cfg.mapper);
        // Candidates: the lowered streams that map at their asked spec.
        let asked: Vec<(StreamId, StreamSpec)> = asked
            .into_iter()
            .filter(|(id, _)| all_asked.parts(*id).is_some())
            .collect();
        if asked.is_empty() {
            return None;
        }
        // Restore the candidates only (the rest keep their lowered specs),
        // and only if nothing that maps today is pushed out.
        let mapping = mapping::map_streams(&self.requests_with(&asked), &views, &self.cfg.mapper);
        drop(views);
        let displaced = self.queues.iter().any(|(i, s)| {
            let mapped_now = self.streams[i]
                .as_ref()
                .is_some_and(|st| st.status == Status::Mapped);
            let restored = asked.iter().any(|(id, _)| *id == s.id);
            (mapped_now || restored) && mapping.parts(s.id).is_none()
        });
        if displaced {
            return None;
        }
        for (id, spec) in asked {
            tracing::debug!(
                stream = id.0,
                ?spec,
                "pgos: the asked spec maps again; restored"
            );
            // The stream is open (it was just listed), so this cannot fail.
            let _ = self.respec(id, spec);
            self.stats.restored += 1;
        }
        Some(mapping)
    }

    fn fresh_state(spec: &StreamSpec) -> StreamState {
        StreamState {
            status: Status::New,
            asked: None,
            parts: Vec::new(),
            wc: (spec.window_constraint() * f64::from(u32::MAX >> 1)) as u32,
            weight: spec.fair_weight().max(1),
            tag3: 0,
            heap3_gen: 0,
        }
    }

    fn push_event(&mut self, e: SchedulerEvent) {
        if self.events.len() >= self.cfg.max_events.max(1) {
            self.events.pop_front();
            self.stats.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    fn requests(&self) -> Vec<MapRequest> {
        self.queues
            .iter()
            .filter(|(_, s)| s.spec.is_guaranteed())
            .map(|(i, s)| {
                let sticky = self.streams[i]
                    .as_ref()
                    .and_then(|st| match st.parts.as_slice() {
                        [one] => Some(self.paths[one.path].id),
                        _ => None,
                    });
                MapRequest {
                    id: s.id,
                    spec: s.spec,
                    sticky,
                    paths: s.paths.clone(),
                }
            })
            .collect()
    }

    fn path_views(&self) -> Vec<(PathId, &PathView)> {
        self.paths.iter().map(|p| (p.id, &p.view)).collect()
    }

    /// Recompute the mapping and rebuild the dispatch heaps.
    fn remap(&mut self, now: Instant, reason: RemapReason) {
        let mapping = match self.try_restore() {
            Some(m) => m,
            None => {
                let requests = self.requests();
                mapping::map_streams(&requests, &self.path_views(), &self.cfg.mapper)
            }
        };
        self.stats.remaps += 1;
        self.last_remap = Some(now);
        self.last_retry = Some(now);
        for p in &mut self.paths {
            p.vs.clear();
            p.vp_rate = mapping.load(p.id).bps();
            if p.vp_rate == 0 {
                p.vp_rate = p.view.mean().bps().max(1_000_000);
            }
        }
        self.be.clear();
        let no_paths = self.paths.is_empty();
        let slots: Vec<(usize, StreamId, StreamSpec)> =
            self.queues.iter().map(|(i, s)| (i, s.id, s.spec)).collect();
        let mut events = Vec::new();
        for (slot, id, spec) in slots {
            let Some(st) = self.streams[slot].as_mut() else {
                continue;
            };
            st.heap3_gen = 0;
            if !spec.is_guaranteed() {
                continue;
            }
            if let Some(parts) = mapping.parts(id) {
                let old: Vec<(PathId, u64)> = st
                    .parts
                    .iter()
                    .map(|p| (self.paths[p.path].id, p.rate_bps))
                    .collect();
                let new: Vec<(PathId, u64)> =
                    parts.iter().map(|p| (p.path, p.rate.bps())).collect();
                let new_parts: Vec<PartState> = parts
                    .iter()
                    .filter_map(|part| {
                        let j = self.paths.iter().position(|p| p.id == part.path)?;
                        let tag = st
                            .parts
                            .iter()
                            .find(|o| o.path == j)
                            .map_or(now.as_nanos(), |o| o.tag);
                        Some(PartState {
                            path: j,
                            rate_bps: part.rate.bps(),
                            tag,
                            heap_gen: 0,
                        })
                    })
                    .collect();
                st.parts = new_parts;
                if old != new || st.status != Status::Mapped {
                    self.stats.mapping_changes += 1;
                    events.push(SchedulerEvent::Mapped {
                        stream: id,
                        parts: parts.to_vec(),
                    });
                }
                st.status = Status::Mapped;
            } else {
                st.parts.clear();
                if no_paths {
                    // Every path is down: an outage, not a spec the paths
                    // cannot carry. No upcall; mapped again when a path
                    // is back.
                    if st.status == Status::Mapped {
                        st.status = Status::New;
                        self.stats.mapping_changes += 1;
                        events.push(SchedulerEvent::Mapped {
                            stream: id,
                            parts: Vec::new(),
                        });
                    }
                } else if let Some((_, best)) = mapping.infeasible.iter().find(|(s, _)| *s == id) {
                    if matches!(st.status, Status::New | Status::Mapped) {
                        st.status = Status::AwaitingAnswer;
                        self.stats.upcalls += 1;
                        tracing::debug!(stream = id.0, ?best, "pgos upcall: spec cannot be met");
                        self.stats.mapping_changes += 1;
                        events.push(SchedulerEvent::Upcall {
                            stream: id,
                            spec,
                            best: *best,
                        });
                    }
                }
            }
        }
        tracing::debug!(
            ?reason,
            ?now,
            paths = self.paths.len(),
            mapped = mapping.assigned.len(),
            infeasible = mapping.infeasible.len(),
            "pgos re-map"
        );
        self.mapping = mapping;
        self.push_event(SchedulerEvent::Remapped { reason, at: now });
        for e in events {
            self.push_event(e);
        }
        let backlogged: Vec<usize> = self
            .queues
            .iter()
            .filter(|(_, s)| !s.queue.is_empty())
            .map(|(i, _)| i)
            .collect();
        for slot in backlogged {
            self.activate(slot, now);
        }
    }

    fn record_undo(&mut self, t: Dispatch, j: usize) {
        self.undo = Some(Undo {
            stream: t.stream,
            path: j,
            part: self.undo_part.take(),
            vp_prev: self.paths[j].vp_tag,
        });
    }

    fn path_index(&self, path: PathId) -> Option<usize> {
        self.paths.iter().position(|p| p.id == path)
    }

    /// A guaranteed stream is not mapped, or runs a lowered spec: worth a
    /// retry.
    fn has_unmapped_guaranteed(&self) -> bool {
        let lowered = self.streams.iter().flatten().any(|s| s.asked.is_some());
        lowered
            || self.streams.iter().flatten().any(|s| {
                matches!(
                    s.status,
                    Status::AwaitingAnswer | Status::Accepted | Status::New
                )
            }) && self.queues.iter().any(|(_, s)| s.spec.is_guaranteed())
    }
}

impl Pgos {
    /// A capacity dip on `path` (the session's [`crate::session::dip`]):
    /// takes its `view` and re-maps now, without waiting for the
    /// minimum re-map interval.
    pub fn handle_path_dip(&mut self, path: PathId, view: PathView, now: Instant) {
        let Some(j) = self.path_index(path) else {
            return;
        };
        self.paths[j].view = view;
        self.remap(now, RemapReason::PathDegraded(path));
    }
}

impl Scheduler for Pgos {
    fn name(&self) -> &'static str {
        "pgos"
    }

    fn handle_path_update(&mut self, path: PathId, view: PathView, now: Instant) {
        if let Some(j) = self.path_index(path) {
            let p = &mut self.paths[j];
            p.view = view;
            p.backoff = self.cfg.backoff_initial;
            let since = |t: Option<Instant>| t.map_or(Duration::MAX, |t| now - t);
            if since(self.last_remap) < self.cfg.mapper.min_remap_interval {
                return;
            }
            let health = mapping::check_health(
                &self.mapping,
                &self.requests(),
                &self.path_views(),
                &self.cfg.mapper,
            );
            if let MappingHealth::Degraded { path } = health {
                self.remap(now, RemapReason::PathDegraded(path));
            } else if self.has_unmapped_guaranteed()
                && since(self.last_retry) >= self.cfg.mapper.retry_interval
            {
                self.remap(now, RemapReason::Retry);
            }
        } else {
            self.paths.push(PathState {
                id: path,
                view,
                vs: BinaryHeap::new(),
                vp_tag: now.as_nanos(),
                vp_rate: 1_000_000,
                blocked_until: Instant::ZERO,
                backoff: self.cfg.backoff_initial,
            });
            self.remap(now, RemapReason::PathsChanged);
        }
    }

    fn handle_path_remove(&mut self, path: PathId, now: Instant) -> Result<(), SchedError> {
        let j = self.path_index(path).ok_or(SchedError::UnknownPath(path))?;
        self.paths.remove(j);
        // Parts name paths by index: drop the parts on `j` and renumber the
        // rest, so that the re-map sees which streams lost a part.
        for st in self.streams.iter_mut().flatten() {
            st.parts.retain(|p| p.path != j);
            for p in &mut st.parts {
                if p.path > j {
                    p.path -= 1;
                }
            }
        }
        // The undo record names path and part indices that just moved; a
        // decision handed back now only returns its message to its queue.
        self.undo = None;
        self.remap(now, RemapReason::PathsChanged);
        Ok(())
    }

    fn handle_stream_open(
        &mut self,
        stream: StreamId,
        spec: StreamSpec,
        now: Instant,
    ) -> Result<(), SchedError> {
        let slot = self.queues.open(stream, spec)?;
        self.streams.resize(self.queues.capacity(), None);
        self.streams[slot] = Some(Self::fresh_state(&spec));
        if spec.is_guaranteed() {
            self.remap(now, RemapReason::StreamsChanged);
        }
        Ok(())
    }

    fn handle_stream_paths(
        &mut self,
        stream: StreamId,
        paths: Option<Vec<PathId>>,
        now: Instant,
    ) -> Result<(), SchedError> {
        let (slot, changed) = self.queues.set_paths(stream, paths)?;
        if !changed {
            return Ok(());
        }
        let guaranteed = self
            .queues
            .get(slot)
            .is_some_and(|s| s.spec.is_guaranteed());
        if guaranteed {
            self.remap(now, RemapReason::StreamsChanged);
        } else {
            // A best-effort stream is in no mapping; it may have left the
            // heap with an empty set.
            self.activate(slot, now);
        }
        Ok(())
    }

    fn handle_stream_close(&mut self, stream: StreamId, now: Instant) -> Result<(), SchedError> {
        let slot = self.queues.close(stream)?;
        let was_guaranteed = self.streams[slot]
            .as_ref()
            .is_some_and(|s| s.status == Status::Mapped);
        self.streams[slot] = None;
        if was_guaranteed || self.has_unmapped_guaranteed() {
            self.remap(now, RemapReason::StreamsChanged);
        }
        Ok(())
    }

    fn handle_enqueue(
        &mut self,
        stream: StreamId,
        bytes: u32,
        now: Instant,
    ) -> Result<(), SchedError> {
        let (slot, was_empty) = self.queues.push(stream, bytes)?;
        if was_empty {
            self.activate(slot, now);
        }
        Ok(())
    }

    fn poll_dispatch_on(&mut self, path: PathId, now: Instant) -> Option<Dispatch> {
        self.dispatch_on(path, now, false)
    }

    fn poll_dispatch_scheduled_on(&mut self, path: PathId, now: Instant) -> Option<Dispatch> {
        self.dispatch_on(path, now, true)
    }

    fn poll_dispatch(&mut self, now: Instant) -> Option<Dispatch> {
        // VP: visit unblocked paths in virtual-deadline order.
        let mut order = std::mem::take(&mut self.vp_order);
        order.clear();
        order.extend(
            self.paths
                .iter()
                .enumerate()
                .filter(|(_, p)| p.blocked_until <= now)
                .map(|(j, p)| (p.vp_tag, j)),
        );
        order.sort_unstable();
        let mut sent = None;
        for &(_, j) in &order {
            if let Some(t) = self.decide(j, now, false) {
                self.record_undo(t, j);
                let p = &mut self.paths[j];
                p.vp_tag = p.vp_tag.max(now.as_nanos()) + ns_for(t.bytes, p.vp_rate);
                sent = Some(t);
                break;
            }
        }
        self.vp_order = order;
        sent
    }

    fn handle_blocked(&mut self, t: Dispatch, now: Instant) {
        // Roll back the virtual clocks if this is the last decision.
        let undo = self.undo.take().filter(|u| {
            u.stream == t.stream && self.paths.get(u.path).is_some_and(|p| p.id == t.path)
        });
        if let Some(u) = undo {
            self.paths[u.path].vp_tag = u.vp_prev;
            if let Some((slot, part, tag)) = u.part {
                if let Some(p) = self.streams[slot]
                    .as_mut()
                    .and_then(|s| s.parts.get_mut(part))
                {
                    p.tag = tag;
                    // Its heap entry (if any) carries the advanced deadline.
                    p.heap_gen = 0;
                }
            }
        }
        if let Ok(slot) = self.queues.slot_of(t.stream) {
            self.queues.push_front(slot, t.bytes);
            self.activate(slot, now);
        }
        if let Some(j) = self.path_index(t.path) {
            let p = &mut self.paths[j];
            p.blocked_until = now + p.backoff;
            p.backoff = (p.backoff * 2).min(self.cfg.backoff_max);
        }
    }

    fn poll_event(&mut self) -> Option<SchedulerEvent> {
        self.events.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.paths
            .iter()
            .map(|p| p.blocked_until)
            .filter(|&t| t > Instant::ZERO)
            .min()
    }

    fn handle_timeout(&mut self, now: Instant) {
        // A block that has run out is over (its back-off stays, for the
        // next one): a driver that finds the path still full dispatches
        // nothing on it, and the block must not name a time that passed.
        for p in &mut self.paths {
            if p.blocked_until > Instant::ZERO && p.blocked_until <= now {
                p.blocked_until = Instant::ZERO;
            }
        }
    }

    fn backlog(&self, stream: StreamId) -> usize {
        self.queues.backlog(stream)
    }
}

#[path = "pgos_dispatch.rs"]
mod dispatch;

#[cfg(test)]
#[path = "pgos_tests.rs"]
mod tests;
