//! Baseline schedulers behind the [`Scheduler`] trait (seed 000 §VI):
//!
//! * [`Wfq`] — weighted fair queueing (self-clocked, SCFQ) on one path, the
//!   seed's single-path baseline. Weights: a guaranteed stream's required
//!   rate, a best-effort stream's weight ([`StreamSpec::fair_weight`]).
//! * [`Msfq`] — multi-server fair queueing (Blanquer and Ozden, SIGCOMM 2001):
//!   one fair queue whose packets are taken by whichever path is free, in
//!   finish-tag order.
//! * [`RoundRobin`] — GridFTP layouts: *blocked* (message k goes to path
//!   k mod L) and *partitioned* (contiguous runs of `chunk` messages per
//!   path); each path sends only what was dealt to it, in arrival order.
//! * [`MinRtt`] — MPTCP's default: one FIFO across streams; in push mode the
//!   lowest-RTT unblocked path sends next.
//!
//! Path restrictions ([`Scheduler::handle_stream_paths`]): a fair queue
//! sets aside the heap entries a path may not take and puts them back; the
//! round-robin layouts deal a message only to a path its stream may use
//! (the next one in turn), re-deal what a new restriction rules out, and
//! hold what has no usable path until one joins or the set changes; min-RTT
//! sends the first queued message the path may take, and in push mode the
//! head message on the lowest-RTT path its stream may use.
//!
//! Invariants: queues bounded as in every scheduler; no decision names a
//! path outside its stream's set; no clock reads.

use super::path::PathView;
use super::queues::{StreamQueues, DEFAULT_MAX_BACKLOG};
use super::spec::StreamSpec;
use super::{Class, Dispatch, PathId, SchedError, Scheduler, StreamId};
use crate::time::{Duration, Instant};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

const BACKOFF_INITIAL: Duration = Duration::from_millis(1);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
const SCALE: u128 = 1 << 40;

/// One path a baseline knows, with its push-mode back-off.
#[derive(Debug, Clone)]
pub(super) struct PathEntry {
    /// The driver's name for the path.
    pub(super) id: PathId,
    /// Its latest estimate.
    pub(super) view: PathView,
    /// Not offered in push mode before this time (`ZERO`: not backing off).
    pub(super) blocked_until: Instant,
    /// Back-off the next block will apply (doubles up to [`BACKOFF_MAX`]).
    pub(super) backoff: Duration,
}

/// Paths with push-mode back-off, shared by the baselines.
#[derive(Debug, Clone, Default)]
pub(super) struct Paths {
    pub(super) list: Vec<PathEntry>,
}

impl Paths {
    pub(super) fn update(&mut self, path: PathId, view: PathView) -> bool {
        if let Some(p) = self.list.iter_mut().find(|p| p.id == path) {
            p.view = view;
            p.backoff = BACKOFF_INITIAL;
            false
        } else {
            self.list.push(PathEntry {
                id: path,
                view,
                blocked_until: Instant::ZERO,
                backoff: BACKOFF_INITIAL,
            });
            true
        }
    }
    /// Forget `path`; returns the index it had.
    ///
    /// # Errors
    /// [`SchedError::UnknownPath`] if it is not known.
    pub(super) fn remove(&mut self, path: PathId) -> Result<usize, SchedError> {
        let j = self.index(path).ok_or(SchedError::UnknownPath(path))?;
        self.list.remove(j);
        Ok(j)
    }
    pub(super) fn index(&self, path: PathId) -> Option<usize> {
        self.list.iter().position(|p| p.id == path)
    }
    pub(super) fn block(&mut self, path: PathId, now: Instant) {
        if let Some(p) = self.list.iter_mut().find(|p| p.id == path) {
            p.blocked_until = now + p.backoff;
            p.backoff = (p.backoff * 2).min(BACKOFF_MAX);
        }
    }
    pub(super) fn ready(&self, now: Instant) -> impl Iterator<Item = usize> + '_ {
        self.list
            .iter()
            .enumerate()
            .filter(move |(_, p)| p.blocked_until <= now)
            .map(|(j, _)| j)
    }
    /// A poll on `path` clears its back-off; returns its index.
    pub(super) fn unblock(&mut self, path: PathId) -> Option<usize> {
        let j = self.index(path)?;
        self.list[j].blocked_until = Instant::ZERO;
        self.list[j].backoff = BACKOFF_INITIAL;
        Some(j)
    }
    pub(super) fn timeout(&self) -> Option<Instant> {
        self.list
            .iter()
            .map(|p| p.blocked_until)
            .filter(|&t| t > Instant::ZERO)
            .min()
    }
    /// Blocks that have run out are over (their back-off stays): the
    /// timeout names only what is ahead (see `Scheduler::handle_timeout`).
    pub(super) fn expire(&mut self, now: Instant) {
        for p in &mut self.list {
            if p.blocked_until > Instant::ZERO && p.blocked_until <= now {
                p.blocked_until = Instant::ZERO;
            }
        }
    }
}

/// A stream slot's fair-queueing state.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct FairTag {
    /// Finish tag of its last message.
    finish: u128,
    /// Whether its head message is in the heap.
    in_heap: bool,
}

/// A fair-queue heap entry: (finish tag, slot, generation).
type FqEntry = Reverse<(u128, u32, u32)>;

/// Self-clocked fair queueing core shared by [`Wfq`] and [`Msfq`].
#[derive(Debug, Clone)]
pub(super) struct FairQueue {
    pub(super) queues: StreamQueues,
    pub(super) paths: Paths,
    heap: BinaryHeap<FqEntry>,
    /// Scratch: entries set aside because the path may not take their
    /// stream, put back after each decision.
    skipped: Vec<FqEntry>,
    /// Per slot: its finish tag and whether it is in the heap.
    tags: Vec<FairTag>,
    vtime: u128,
    /// Only best-effort streams enter the fair queue (OptSched).
    pub(super) best_effort_only: bool,
}

impl FairQueue {
    pub(super) fn new() -> Self {
        FairQueue {
            queues: StreamQueues::new(DEFAULT_MAX_BACKLOG),
            paths: Paths::default(),
            heap: BinaryHeap::new(),
            skipped: Vec::new(),
            tags: Vec::new(),
            vtime: 0,
            best_effort_only: false,
        }
    }

    pub(super) fn activate(&mut self, slot: usize) {
        let (Some(head), Some(s)) = (self.queues.head(slot), self.queues.get(slot)) else {
            return;
        };
        if (self.best_effort_only && s.spec.is_guaranteed()) || s.unmappable() {
            return;
        }
        let w = u128::from(s.spec.fair_weight().max(1));
        let t = &mut self.tags[slot];
        if t.in_heap {
            return;
        }
        t.in_heap = true;
        let key = t.finish.max(self.vtime) + u128::from(head) * SCALE / w;
        self.heap
            .push(Reverse((key, slot as u32, self.queues.gen(slot))));
    }

    /// The next message `path` may take, by finish tag.
    pub(super) fn next(&mut self, path: PathId) -> Option<Dispatch> {
        let t = self.pop_for(path);
        if !self.skipped.is_empty() {
            self.heap.extend(self.skipped.drain(..));
        }
        t
    }

    /// Pop entries until one `path` may take; entries of streams that may
    /// not use it go to `skipped` (dropped for an empty set).
    fn pop_for(&mut self, path: PathId) -> Option<Dispatch> {
        while let Some(Reverse((key, slot, gen))) = self.heap.pop() {
            let slot = slot as usize;
            let Some(s) = self.queues.get(slot) else {
                continue;
            };
            if self.queues.gen(slot) != gen {
                continue;
            }
            if !s.allows(path) {
                if s.unmappable() {
                    // Leaves the heap until its set changes.
                    self.tags[slot].in_heap = false;
                } else {
                    self.skipped.push(Reverse((key, slot as u32, gen)));
                }
                continue;
            }
            self.tags[slot].in_heap = false;
            let Some((stream, bytes)) = self.queues.pop(slot) else {
                continue;
            };
            self.vtime = self.vtime.max(key);
            self.tags[slot].finish = key;
            self.activate(slot);
            return Some(Dispatch {
                path,
                stream,
                bytes,
                class: Class::Unscheduled,
            });
        }
        None
    }

    pub(super) fn open(&mut self, stream: StreamId, spec: StreamSpec) -> Result<(), SchedError> {
        let slot = self.queues.open(stream, spec)?;
        self.tags.resize(self.queues.capacity(), FairTag::default());
        self.tags[slot] = FairTag {
            finish: self.vtime,
            in_heap: false,
        };
        Ok(())
    }

    /// Restrict `stream` to `paths` (see [`Scheduler::handle_stream_paths`]).
    pub(super) fn set_paths(
        &mut self,
        stream: StreamId,
        paths: Option<Vec<PathId>>,
    ) -> Result<(), SchedError> {
        let (slot, changed) = self.queues.set_paths(stream, paths)?;
        if changed {
            // It may have left the heap with an empty set.
            self.activate(slot);
        }
        Ok(())
    }

    pub(super) fn enqueue(&mut self, stream: StreamId, bytes: u32) -> Result<(), SchedError> {
        let (slot, _) = self.queues.push(stream, bytes)?;
        self.activate(slot);
        Ok(())
    }

    pub(super) fn unsend(&mut self, t: Dispatch, now: Instant) {
        if let Ok(slot) = self.queues.slot_of(t.stream) {
            self.queues.push_front(slot, t.bytes);
            self.activate(slot);
        }
        self.paths.block(t.path, now);
    }
}

macro_rules! fair_scheduler {
    ($ty:ident, $name:literal, |$s:ident, $path:ident| $allowed:expr) => {
        impl Scheduler for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn handle_path_update(&mut self, path: PathId, view: PathView, _now: Instant) {
                self.fq.paths.update(path, view);
            }
            fn handle_path_remove(
                &mut self,
                path: PathId,
                _now: Instant,
            ) -> Result<(), SchedError> {
                self.fq.paths.remove(path).map(|_| ())
            }
            fn handle_stream_open(
                &mut self,
                stream: StreamId,
                spec: StreamSpec,
                _now: Instant,
            ) -> Result<(), SchedError> {
                self.fq.open(stream, spec)
            }
            fn handle_stream_paths(
                &mut self,
                stream: StreamId,
                paths: Option<Vec<PathId>>,
                _now: Instant,
            ) -> Result<(), SchedError> {
                self.fq.set_paths(stream, paths)
            }
            fn handle_stream_close(
                &mut self,
                stream: StreamId,
                _now: Instant,
            ) -> Result<(), SchedError> {
                self.fq.queues.close(stream).map(|_| ())
            }
            fn handle_enqueue(
                &mut self,
                stream: StreamId,
                bytes: u32,
                _now: Instant,
            ) -> Result<(), SchedError> {
                self.fq.enqueue(stream, bytes)
            }
            fn poll_dispatch_on(&mut self, $path: PathId, _now: Instant) -> Option<Dispatch> {
                let $s = &*self;
                if !$allowed {
                    return None;
                }
                self.fq.paths.unblock($path)?;
                self.fq.next($path)
            }
            fn poll_dispatch(&mut self, now: Instant) -> Option<Dispatch> {
                // By index, so that a decision does not allocate.
                for j in 0..self.fq.paths.list.len() {
                    let p = &self.fq.paths.list[j];
                    if p.blocked_until > now {
                        continue;
                    }
                    let $path = p.id;
                    let $s = &*self;
                    if $allowed {
                        // Another path may take what this one may not.
                        if let Some(t) = self.fq.next($path) {
                            return Some(t);
                        }
                    }
                }
                None
            }
            fn handle_blocked(&mut self, t: Dispatch, now: Instant) {
                self.fq.unsend(t, now);
            }
            fn poll_timeout(&self) -> Option<Instant> {
                self.fq.paths.timeout()
            }
            fn handle_timeout(&mut self, now: Instant) {
                self.fq.paths.expire(now);
            }
            fn backlog(&self, stream: StreamId) -> usize {
                self.fq.queues.backlog(stream)
            }
        }
    };
}

/// Weighted fair queueing on one path (see the module docs).
#[derive(Debug, Clone)]
pub struct Wfq {
    fq: FairQueue,
    path: Option<PathId>,
}

impl Wfq {
    /// WFQ on `path`; `None` uses the first path the driver reports.
    pub fn new(path: Option<PathId>) -> Self {
        Wfq {
            fq: FairQueue::new(),
            path,
        }
    }

    fn on(&self, path: PathId) -> bool {
        self.path
            .or_else(|| self.fq.paths.list.first().map(|p| p.id))
            == Some(path)
    }
}

fair_scheduler!(Wfq, "wfq", |s, path| s.on(path));

/// Multi-server fair queueing over every path (see the module docs).
#[derive(Debug, Clone)]
pub struct Msfq {
    fq: FairQueue,
}

impl Msfq {
    /// An MSFQ scheduler with no paths.
    pub fn new() -> Self {
        Msfq {
            fq: FairQueue::new(),
        }
    }
}

impl Default for Msfq {
    fn default() -> Self {
        Self::new()
    }
}

fair_scheduler!(Msfq, "msfq", |s, path| {
    let _ = (s, path);
    true
});

/// A message queued in a FIFO baseline ([`RoundRobin`], [`MinRtt`]) as
/// (slot, generation), so that what a closed stream left behind is skipped.
type Entry = (u32, u32);

/// Queue a message on `stream`; returns its FIFO entry.
fn push(queues: &mut StreamQueues, stream: StreamId, bytes: u32) -> Result<Entry, SchedError> {
    let (slot, _) = queues.push(stream, bytes)?;
    Ok((slot as u32, queues.gen(slot)))
}

/// Put back a message the driver could not send, at the head of its
/// stream's queue and of `fifo`.
fn requeue(queues: &mut StreamQueues, fifo: &mut VecDeque<Entry>, slot: usize, bytes: u32) {
    queues.push_front(slot, bytes);
    fifo.push_front((slot as u32, queues.gen(slot)));
}

/// Send on `path` the first live message of `fifo` whose stream may use
/// it (`pick` chooses the path per stream slot; `None`: not this one).
/// Entries passed over keep their places.
fn pop_first(
    queues: &mut StreamQueues,
    fifo: &mut VecDeque<Entry>,
    mut pick: impl FnMut(&StreamQueues, usize) -> Option<PathId>,
) -> Option<Dispatch> {
    let mut i = 0;
    while let Some(&(slot, gen)) = fifo.get(i) {
        if !queues.is_live(slot as usize, gen) {
            fifo.remove(i);
            continue;
        }
        let Some(path) = pick(queues, slot as usize) else {
            i += 1;
            continue;
        };
        fifo.remove(i);
        if let Some((stream, bytes)) = queues.pop(slot as usize) {
            return Some(Dispatch {
                path,
                stream,
                bytes,
                class: Class::Unscheduled,
            });
        }
    }
    None
}

/// GridFTP layouts: blocked (`chunk` = 1) and partitioned (`chunk` > 1).
#[derive(Debug, Clone)]
pub struct RoundRobin {
    queues: StreamQueues,
    paths: Paths,
    chunk: u64,
    dealt: u64,
    /// Per path: (slot, gen) of dealt messages in arrival order.
    fifo: Vec<VecDeque<Entry>>,
    /// Messages queued before any path was known.
    undealt: VecDeque<Entry>,
}

impl RoundRobin {
    /// Blocked layout: message k on path k mod L.
    pub fn blocked() -> Self {
        Self::partitioned(1)
    }

    /// Partitioned layout: runs of `chunk` consecutive messages per path.
    pub fn partitioned(chunk: u32) -> Self {
        RoundRobin {
            queues: StreamQueues::new(DEFAULT_MAX_BACKLOG),
            paths: Paths::default(),
            chunk: u64::from(chunk.max(1)),
            dealt: 0,
            fifo: Vec::new(),
            undealt: VecDeque::new(),
        }
    }

    /// Deal `entry` to the path whose turn it is, or the next one in turn
    /// its stream may use; hold it back if there is none.
    fn deal(&mut self, entry: Entry) {
        let n = self.paths.list.len();
        let turn = (self.dealt / self.chunk) % (n.max(1) as u64);
        let slot = entry.0 as usize;
        let usable = (0..n)
            .map(|k| (turn as usize + k) % n)
            .find(|&j| self.queues.allows(slot, self.paths.list[j].id));
        let Some(j) = usable else {
            self.undealt.push_back(entry);
            return;
        };
        self.dealt += 1;
        self.fifo[j].push_back(entry);
    }

    /// Deal again everything held back (a path joined, a set changed).
    fn deal_undealt(&mut self) {
        let pending: Vec<_> = self.undealt.drain(..).collect();
        for e in pending {
            self.deal(e);
        }
    }

    fn take(&mut self, j: usize) -> Option<Dispatch> {
        let path = self.paths.list[j].id;
        // A message dealt here before its stream's set changed (or handed
        // back after) is dealt again, not sent.
        let mut redeal = Vec::new();
        let mut sent = None;
        while let Some((slot, gen)) = self.fifo[j].pop_front() {
            if !self.queues.is_live(slot as usize, gen) {
                continue;
            }
            if !self.queues.allows(slot as usize, path) {
                redeal.push((slot, gen));
                continue;
            }
            if let Some((stream, bytes)) = self.queues.pop(slot as usize) {
                sent = Some(Dispatch {
                    path,
                    stream,
                    bytes,
                    class: Class::Unscheduled,
                });
                break;
            }
        }
        for e in redeal {
            self.deal(e);
        }
        sent
    }
}

impl Scheduler for RoundRobin {
    fn name(&self) -> &'static str {
        if self.chunk == 1 {
            "blocked"
        } else {
            "partitioned"
        }
    }
    fn handle_path_update(&mut self, path: PathId, view: PathView, _now: Instant) {
        if self.paths.update(path, view) {
            self.fifo.push(VecDeque::new());
            self.deal_undealt();
        }
    }
    fn handle_path_remove(&mut self, path: PathId, _now: Instant) -> Result<(), SchedError> {
        let j = self.paths.remove(path)?;
        // What was dealt to the path is dealt again over the others, in order.
        let orphaned = self.fifo.remove(j);
        for e in orphaned {
            self.deal(e);
        }
        Ok(())
    }
    fn handle_stream_open(
        &mut self,
        stream: StreamId,
        spec: StreamSpec,
        _now: Instant,
    ) -> Result<(), SchedError> {
        self.queues.open(stream, spec).map(|_| ())
    }
    fn handle_stream_paths(
        &mut self,
        stream: StreamId,
        paths: Option<Vec<PathId>>,
        _now: Instant,
    ) -> Result<(), SchedError> {
        let (slot, changed) = self.queues.set_paths(stream, paths)?;
        if !changed {
            return Ok(());
        }
        // Take back what was dealt to paths the stream may no longer use,
        // in arrival order per path, and deal it again with what was held.
        let mut redeal = Vec::new();
        for j in 0..self.fifo.len() {
            let path = self.paths.list[j].id;
            if self.queues.allows(slot, path) {
                continue;
            }
            self.fifo[j].retain(|&e| {
                let ours = e.0 as usize == slot;
                if ours {
                    redeal.push(e);
                }
                !ours
            });
        }
        self.deal_undealt();
        for e in redeal {
            self.deal(e);
        }
        Ok(())
    }
    fn handle_stream_close(&mut self, stream: StreamId, _now: Instant) -> Result<(), SchedError> {
        self.queues.close(stream).map(|_| ())
    }
    fn handle_enqueue(
        &mut self,
        stream: StreamId,
        bytes: u32,
        _now: Instant,
    ) -> Result<(), SchedError> {
        let e = push(&mut self.queues, stream, bytes)?;
        self.deal(e);
        Ok(())
    }
    fn poll_dispatch_on(&mut self, path: PathId, _now: Instant) -> Option<Dispatch> {
        let j = self.paths.unblock(path)?;
        self.take(j)
    }
    fn poll_dispatch(&mut self, now: Instant) -> Option<Dispatch> {
        let ready: Vec<usize> = self.paths.ready(now).collect();
        ready.into_iter().find_map(|j| self.take(j))
    }
    fn handle_blocked(&mut self, t: Dispatch, now: Instant) {
        if let Ok(slot) = self.queues.slot_of(t.stream) {
            if let Some(j) = self.paths.index(t.path) {
                requeue(&mut self.queues, &mut self.fifo[j], slot, t.bytes);
            } else {
                // Its path was removed meanwhile: deal the message again.
                self.queues.push_front(slot, t.bytes);
                self.deal((slot as u32, self.queues.gen(slot)));
            }
        }
        self.paths.block(t.path, now);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.paths.timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.paths.expire(now);
    }
    fn backlog(&self, stream: StreamId) -> usize {
        self.queues.backlog(stream)
    }
}

/// MPTCP's default scheduler: one FIFO, lowest-RTT free path first.
#[derive(Debug, Clone)]
pub struct MinRtt {
    queues: StreamQueues,
    paths: Paths,
    fifo: VecDeque<Entry>,
}

impl MinRtt {
    /// A min-RTT scheduler with no paths.
    pub fn new() -> Self {
        MinRtt {
            queues: StreamQueues::new(DEFAULT_MAX_BACKLOG),
            paths: Paths::default(),
            fifo: VecDeque::new(),
        }
    }
}

impl Default for MinRtt {
    fn default() -> Self {
        Self::new()
    }
}

impl Scheduler for MinRtt {
    fn name(&self) -> &'static str {
        "minrtt"
    }
    fn handle_path_update(&mut self, path: PathId, view: PathView, _now: Instant) {
        self.paths.update(path, view);
    }
    fn handle_path_remove(&mut self, path: PathId, _now: Instant) -> Result<(), SchedError> {
        self.paths.remove(path).map(|_| ())
    }
    fn handle_stream_open(
        &mut self,
        stream: StreamId,
        spec: StreamSpec,
        _now: Instant,
    ) -> Result<(), SchedError> {
        self.queues.open(stream, spec).map(|_| ())
    }
    fn handle_stream_paths(
        &mut self,
        stream: StreamId,
        paths: Option<Vec<PathId>>,
        _now: Instant,
    ) -> Result<(), SchedError> {
        self.queues.set_paths(stream, paths).map(|_| ())
    }
    fn handle_stream_close(&mut self, stream: StreamId, _now: Instant) -> Result<(), SchedError> {
        self.queues.close(stream).map(|_| ())
    }
    fn handle_enqueue(
        &mut self,
        stream: StreamId,
        bytes: u32,
        _now: Instant,
    ) -> Result<(), SchedError> {
        let e = push(&mut self.queues, stream, bytes)?;
        self.fifo.push_back(e);
        Ok(())
    }
    fn poll_dispatch_on(&mut self, path: PathId, _now: Instant) -> Option<Dispatch> {
        self.paths.unblock(path)?;
        pop_first(&mut self.queues, &mut self.fifo, |q, slot| {
            q.allows(slot, path).then_some(path)
        })
    }
    fn poll_dispatch(&mut self, now: Instant) -> Option<Dispatch> {
        self.paths.ready(now).next()?;
        let paths = &self.paths;
        // The head message goes on the lowest-RTT ready path its stream
        // may use; a message with none waits in place.
        pop_first(&mut self.queues, &mut self.fifo, |q, slot| {
            let best = paths
                .ready(now)
                .filter(|&j| q.allows(slot, paths.list[j].id))
                .min_by_key(|&j| (paths.list[j].view.rtt, j))?;
            Some(paths.list[best].id)
        })
    }
    fn handle_blocked(&mut self, t: Dispatch, now: Instant) {
        if let Ok(slot) = self.queues.slot_of(t.stream) {
            requeue(&mut self.queues, &mut self.fifo, slot, t.bytes);
        }
        self.paths.block(t.path, now);
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.paths.timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.paths.expire(now);
    }
    fn backlog(&self, stream: StreamId) -> usize {
        self.queues.backlog(stream)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::path::EmpiricalDistribution;
    use crate::units::Bandwidth;

    fn view(mbps: f64, rtt_ms: u64) -> PathView {
        PathView::new(
            EmpiricalDistribution::from_mbps(&[mbps]),
            Duration::from_millis(rtt_ms),
        )
    }

    fn drain_on<S: Scheduler>(s: &mut S, path: PathId, n: usize) -> Vec<StreamId> {
        (0..n)
            .filter_map(|_| s.poll_dispatch_on(path, Instant::ZERO))
            .map(|t| t.stream)
            .collect()
    }

    #[test]
    fn wfq_shares_by_weight_on_one_path() {
        let mut s = Wfq::new(None);
        let t = Instant::ZERO;
        s.handle_path_update(PathId(1), view(10.0, 10), t);
        s.handle_path_update(PathId(2), view(10.0, 10), t);
        let a = StreamSpec::min_rate(Bandwidth::from_mbps(3), 0.9).unwrap();
        let b = StreamSpec::best_effort(1_000_000).unwrap();
        s.handle_stream_open(StreamId(1), a, t).unwrap();
        s.handle_stream_open(StreamId(2), b, t).unwrap();
        for _ in 0..400 {
            s.handle_enqueue(StreamId(1), 1000, t).unwrap();
            s.handle_enqueue(StreamId(2), 1000, t).unwrap();
        }
        assert!(s.poll_dispatch_on(PathId(2), t).is_none(), "one path only");
        let sent = drain_on(&mut s, PathId(1), 400);
        let a_share = sent.iter().filter(|&&x| x == StreamId(1)).count();
        assert_eq!(a_share, 300, "3:1 weights");
    }

    #[test]
    fn msfq_serves_on_any_path() {
        let mut s = Msfq::new();
        let t = Instant::ZERO;
        s.handle_path_update(PathId(1), view(10.0, 10), t);
        s.handle_path_update(PathId(2), view(10.0, 10), t);
        s.handle_stream_open(StreamId(1), StreamSpec::best_effort(1).unwrap(), t)
            .unwrap();
        s.handle_enqueue(StreamId(1), 100, t).unwrap();
        s.handle_enqueue(StreamId(1), 100, t).unwrap();
        assert_eq!(
            s.poll_dispatch_on(PathId(2), t).map(|x| x.path),
            Some(PathId(2))
        );
        assert_eq!(
            s.poll_dispatch_on(PathId(1), t).map(|x| x.path),
            Some(PathId(1))
        );
        assert!(s.poll_dispatch_on(PathId(1), t).is_none());
    }

    #[test]
    fn blocked_layout_deals_round_robin() {
        let mut s = RoundRobin::blocked();
        let t = Instant::ZERO;
        s.handle_path_update(PathId(1), view(10.0, 10), t);
        s.handle_path_update(PathId(2), view(10.0, 10), t);
        s.handle_stream_open(StreamId(1), StreamSpec::best_effort(1).unwrap(), t)
            .unwrap();
        for _ in 0..4 {
            s.handle_enqueue(StreamId(1), 100, t).unwrap();
        }
        assert_eq!(drain_on(&mut s, PathId(1), 10).len(), 2);
        assert_eq!(drain_on(&mut s, PathId(2), 10).len(), 2);
        let mut p = RoundRobin::partitioned(3);
        p.handle_path_update(PathId(1), view(10.0, 10), t);
        p.handle_path_update(PathId(2), view(10.0, 10), t);
        p.handle_stream_open(StreamId(1), StreamSpec::best_effort(1).unwrap(), t)
            .unwrap();
        for _ in 0..4 {
            p.handle_enqueue(StreamId(1), 100, t).unwrap();
        }
        assert_eq!(drain_on(&mut p, PathId(1), 10).len(), 3);
    }

    #[test]
    fn minrtt_prefers_low_rtt_and_backs_off() {
        let mut s = MinRtt::new();
        let t = Instant::ZERO;
        s.handle_path_update(PathId(1), view(10.0, 50), t);
        s.handle_path_update(PathId(2), view(10.0, 5), t);
        s.handle_stream_open(StreamId(1), StreamSpec::best_effort(1).unwrap(), t)
            .unwrap();
        s.handle_enqueue(StreamId(1), 100, t).unwrap();
        let x = s.poll_dispatch(t).unwrap();
        assert_eq!(x.path, PathId(2));
        s.handle_blocked(x, t);
        assert_eq!(s.backlog(StreamId(1)), 1);
        assert_eq!(s.poll_dispatch(t).map(|x| x.path), Some(PathId(1)));
        assert_eq!(s.poll_timeout(), Some(t + BACKOFF_INITIAL));
    }
}
