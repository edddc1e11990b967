//! OptSched (seed 000 §VI-B): the near-optimal *offline* reference. It is
//! told each path's capacity for the coming window (an oracle, so simulation
//! only) and each guaranteed stream's receiving rate in the last window.
//!
//! Per window it sends each guaranteed stream at `target + δ`, where the
//! seed's feedback rule sets δ from the last window's receiving rate ρ:
//! `δ = 2·|target − ρ|` when ρ < target, `δ = −½·(ρ − target)` when
//! ρ > target + β, and δ = 0 inside the band \[target, target + β\] (the
//! seed says β "stabilises the loop"; it does not say what δ is inside the
//! band — zero is the reading that makes β a dead band). The window's bytes
//! go on the path with the most known spare capacity if one holds them, else
//! split across paths by spare capacity. Best-effort streams share what is
//! left by weighted fair queueing; guaranteed streams' excess comes last.
//!
//! A stream restricted to some paths ([`Scheduler::handle_stream_paths`])
//! gets its window's budget on those paths only, and neither its budget nor
//! its excess nor its best-effort share goes out on any other.
//!
//! Drive it like any [`Scheduler`], plus [`OptSched::handle_window`] at the
//! start of every window.

use super::path::PathView;
use super::simple::FairQueue;
use super::spec::StreamSpec;
use super::{Class, Dispatch, PathId, SchedError, Scheduler, StreamId};
use crate::time::{Duration, Instant};
use crate::units::Bandwidth;

/// OptSched settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OptSchedConfig {
    /// Scheduling window (the feedback period).
    pub window: Duration,
    /// Dead band β above the target, as a fraction of the target.
    pub beta: f64,
}

impl Default for OptSchedConfig {
    fn default() -> Self {
        OptSchedConfig {
            window: Duration::from_secs(1),
            beta: 0.001,
        }
    }
}

#[derive(Debug, Clone, Default)]
struct Guaranteed {
    target_bps: f64,
    probability: f64,
    delta_bps: f64,
    /// Bytes still to send this window, per path index.
    budget: Vec<u64>,
}

/// The offline reference scheduler (see the module docs).
#[derive(Debug, Clone)]
pub struct OptSched {
    cfg: OptSchedConfig,
    fq: FairQueue,
    streams: Vec<Option<Guaranteed>>,
}

impl OptSched {
    /// An OptSched with no paths and no streams.
    pub fn new(cfg: OptSchedConfig) -> Self {
        let mut fq = FairQueue::new();
        fq.best_effort_only = true;
        OptSched {
            cfg,
            fq,
            streams: Vec::new(),
        }
    }

    /// The current δ of `stream` in bit/s (for reports and tests).
    pub fn delta(&self, stream: StreamId) -> Option<f64> {
        let slot = self.fq.queues.slot_of(stream).ok()?;
        self.streams.get(slot)?.as_ref().map(|g| g.delta_bps)
    }

    /// Start a window: `capacity` is each path's capacity for it (the
    /// oracle), `received` the receiving rate of guaranteed streams in the
    /// window that just ended (absent on the first window).
    pub fn handle_window(
        &mut self,
        _now: Instant,
        capacity: &[(PathId, Bandwidth)],
        received: &[(StreamId, Bandwidth)],
    ) {
        let n_paths = self.fq.paths.list.len();
        let tw = self.cfg.window.as_secs_f64();
        let mut spare: Vec<f64> = (0..n_paths)
            .map(|j| {
                let id = self.fq.paths.list[j].id;
                capacity
                    .iter()
                    .find(|c| c.0 == id)
                    .map_or(0.0, |c| c.1.bps() as f64 * tw / 8.0)
            })
            .collect();
        // Feedback.
        for &(id, rate) in received {
            let Ok(slot) = self.fq.queues.slot_of(id) else {
                continue;
            };
            if let Some(Some(g)) = self.streams.get_mut(slot) {
                let rho = rate.bps() as f64;
                g.delta_bps = if rho < g.target_bps {
                    2.0 * (g.target_bps - rho)
                } else if rho > g.target_bps * (1.0 + self.cfg.beta) {
                    -0.5 * (rho - g.target_bps)
                } else {
                    0.0
                };
            }
        }
        // Allocation, strictest stream first.
        let mut order: Vec<usize> = (0..self.streams.len())
            .filter(|&i| self.streams[i].is_some())
            .collect();
        order.sort_by(|&a, &b| {
            let pa = self.streams[a].as_ref().map_or(0.0, |g| g.probability);
            let pb = self.streams[b].as_ref().map_or(0.0, |g| g.probability);
            pb.total_cmp(&pa).then(a.cmp(&b))
        });
        for i in order {
            let usable: Vec<bool> = (0..n_paths)
                .map(|j| self.fq.queues.allows(i, self.fq.paths.list[j].id))
                .collect();
            let Some(g) = self.streams[i].as_mut() else {
                continue;
            };
            g.budget = vec![0; n_paths];
            let want = ((g.target_bps + g.delta_bps).max(0.0) * tw / 8.0).ceil();
            let best = (0..n_paths)
                .filter(|&j| usable[j])
                .max_by(|&a, &b| spare[a].total_cmp(&spare[b]).then(b.cmp(&a)));
            if let Some(j) = best.filter(|&j| spare[j] >= want) {
                g.budget[j] = want as u64;
                spare[j] -= want;
                continue;
            }
            let total: f64 = (0..n_paths).filter(|&j| usable[j]).map(|j| spare[j]).sum();
            if total <= 0.0 || want <= 0.0 {
                continue;
            }
            for (j, (budget, room)) in g.budget.iter_mut().zip(spare.iter_mut()).enumerate() {
                if !usable[j] {
                    continue;
                }
                let take = (want * *room / total).min(*room).floor();
                *budget = take as u64;
                *room -= take;
            }
        }
    }

    fn decide(&mut self, j: usize, now: Instant) -> Option<Dispatch> {
        let _ = now;
        let path = self.fq.paths.list[j].id;
        // Guaranteed streams with budget on this path, strictest first.
        let mut pick: Option<(f64, usize)> = None;
        for (slot, g) in self.streams.iter().enumerate() {
            let Some(g) = g else { continue };
            if g.budget.get(j).copied().unwrap_or(0) == 0
                || self.fq.queues.head(slot).is_none()
                || !self.fq.queues.allows(slot, path)
            {
                continue;
            }
            if pick.is_none_or(|p| g.probability > p.0) {
                pick = Some((g.probability, slot));
            }
        }
        if let Some((_, slot)) = pick {
            let (stream, bytes) = self.fq.queues.pop(slot)?;
            if let Some(Some(g)) = self.streams.get_mut(slot) {
                g.budget[j] = g.budget[j].saturating_sub(u64::from(bytes));
            }
            return Some(Dispatch {
                path,
                stream,
                bytes,
                class: Class::Scheduled,
            });
        }
        if let Some(t) = self.fq.next(path) {
            return Some(t);
        }
        // Guaranteed excess, so no path idles.
        let slot = (0..self.streams.len()).find(|&s| {
            self.streams[s].is_some()
                && self.fq.queues.head(s).is_some()
                && self.fq.queues.allows(s, path)
        })?;
        let (stream, bytes) = self.fq.queues.pop(slot)?;
        Some(Dispatch {
            path,
            stream,
            bytes,
            class: Class::Unscheduled,
        })
    }
}

impl Scheduler for OptSched {
    fn name(&self) -> &'static str {
        "optsched"
    }
    fn handle_path_update(&mut self, path: PathId, view: PathView, _now: Instant) {
        if self.fq.paths.update(path, view) {
            for g in self.streams.iter_mut().flatten() {
                g.budget.push(0);
            }
        }
    }
    fn handle_path_remove(&mut self, path: PathId, _now: Instant) -> Result<(), SchedError> {
        let j = self.fq.paths.remove(path)?;
        // The path's budget is lost; the next window allocates over the rest.
        for g in self.streams.iter_mut().flatten() {
            g.budget.remove(j);
        }
        Ok(())
    }
    fn handle_stream_open(
        &mut self,
        stream: StreamId,
        spec: StreamSpec,
        _now: Instant,
    ) -> Result<(), SchedError> {
        self.fq.open(stream, spec)?;
        let slot = self.fq.queues.slot_of(stream)?;
        self.streams.resize(self.fq.queues.capacity(), None);
        self.streams[slot] = spec.is_guaranteed().then(|| Guaranteed {
            target_bps: spec.required_rate().map_or(0.0, |r| r.bps() as f64),
            probability: spec.probability().unwrap_or(0.5),
            delta_bps: 0.0,
            budget: vec![0; self.fq.paths.list.len()],
        });
        Ok(())
    }
    fn handle_stream_paths(
        &mut self,
        stream: StreamId,
        paths: Option<Vec<PathId>>,
        _now: Instant,
    ) -> Result<(), SchedError> {
        self.fq.set_paths(stream, paths)?;
        // Budget on a path the stream may no longer use is lost; the next
        // window allocates over its set.
        let slot = self.fq.queues.slot_of(stream)?;
        let ids: Vec<PathId> = self.fq.paths.list.iter().map(|p| p.id).collect();
        if let Some(Some(g)) = self.streams.get_mut(slot) {
            for (b, &id) in g.budget.iter_mut().zip(&ids) {
                if !self.fq.queues.allows(slot, id) {
                    *b = 0;
                }
            }
        }
        Ok(())
    }
    fn handle_stream_close(&mut self, stream: StreamId, _now: Instant) -> Result<(), SchedError> {
        let slot = self.fq.queues.close(stream)?;
        self.streams[slot] = None;
        Ok(())
    }
    fn handle_enqueue(
        &mut self,
        stream: StreamId,
        bytes: u32,
        _now: Instant,
    ) -> Result<(), SchedError> {
        self.fq.enqueue(stream, bytes)
    }
    fn poll_dispatch_on(&mut self, path: PathId, now: Instant) -> Option<Dispatch> {
        let j = self.fq.paths.unblock(path)?;
        self.decide(j, now)
    }
    fn poll_dispatch(&mut self, now: Instant) -> Option<Dispatch> {
        let ready: Vec<usize> = self.fq.paths.ready(now).collect();
        ready.into_iter().find_map(|j| self.decide(j, now))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::path::EmpiricalDistribution;

    #[test]
    fn feedback_rule() {
        let mut s = OptSched::new(OptSchedConfig::default());
        let t = Instant::ZERO;
        let v = PathView::new(EmpiricalDistribution::from_mbps(&[10.0]), Duration::ZERO);
        s.handle_path_update(PathId(1), v, t);
        let spec = StreamSpec::min_rate(Bandwidth::from_mbps(4), 0.95).unwrap();
        s.handle_stream_open(StreamId(1), spec, t).unwrap();
        let cap = [(PathId(1), Bandwidth::from_mbps(10))];
        // Under target by 0.5 Mbit/s → δ = +1 Mbit/s.
        s.handle_window(t, &cap, &[(StreamId(1), Bandwidth::from_bps(3_500_000))]);
        assert_eq!(s.delta(StreamId(1)), Some(1_000_000.0));
        // Over target + β by 1 Mbit/s → δ = −0.5 Mbit/s.
        s.handle_window(t, &cap, &[(StreamId(1), Bandwidth::from_mbps(5))]);
        assert_eq!(s.delta(StreamId(1)), Some(-500_000.0));
        // Inside the dead band → 0.
        s.handle_window(t, &cap, &[(StreamId(1), Bandwidth::from_bps(4_002_000))]);
        assert_eq!(s.delta(StreamId(1)), Some(0.0));
        // Budget: 4 Mbit/s for 1 s = 500 000 bytes, then best effort.
        s.handle_stream_open(StreamId(2), StreamSpec::best_effort(1).unwrap(), t)
            .unwrap();
        for _ in 0..600 {
            s.handle_enqueue(StreamId(1), 1000, t).unwrap();
            s.handle_enqueue(StreamId(2), 1000, t).unwrap();
        }
        let first: Vec<StreamId> = (0..501)
            .filter_map(|_| s.poll_dispatch_on(PathId(1), t))
            .map(|x| x.stream)
            .collect();
        assert!(first[..500].iter().all(|&x| x == StreamId(1)));
        assert_eq!(first[500], StreamId(2));
    }
}
