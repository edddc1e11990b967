//! PGOS per-packet dispatch (seed 000 §V-B.2b, Table I): the decision for
//! one path, over the heaps that [`Pgos`] keeps.
//!
//! [`Pgos::decide`] walks Table I's precedence classes (see the [`super`]
//! module docs for the rules and why): 1 scheduled on this path, 2 late on
//! another path, 3a the excess of a stream mapped here, 3b best-effort and
//! unmapped streams by SCFQ tag, 3c other paths' backlog. `activate` puts a
//! backlogged stream into the heaps; `clean_vs` drops stale heap entries
//! lazily. No decision puts a stream on a path outside its set
//! ([`Scheduler::handle_stream_paths`](super::Scheduler::handle_stream_paths)).

use super::{ns_for, Pgos, Status, SCFQ_SCALE};
use crate::scheduler::{Class, Dispatch, PathId, StreamId};
use crate::time::Instant;
use std::cmp::Reverse;

impl Pgos {
    /// Pull mode: the decision for `path` (classes 1 and 2 only when
    /// `scheduled_only`), with its undo record and the path's VP tag.
    pub(super) fn dispatch_on(
        &mut self,
        path: PathId,
        now: Instant,
        scheduled_only: bool,
    ) -> Option<Dispatch> {
        let j = self.path_index(path)?;
        self.paths[j].backoff = self.cfg.backoff_initial;
        self.paths[j].blocked_until = Instant::ZERO;
        let t = self.decide(j, now, scheduled_only)?;
        self.record_undo(t, j);
        let p = &mut self.paths[j];
        p.vp_tag = p.vp_tag.max(now.as_nanos()) + ns_for(t.bytes, p.vp_rate);
        Some(t)
    }

    /// Put a backlogged stream's parts (or its best-effort entry) into the heaps.
    pub(super) fn activate(&mut self, slot: usize, now: Instant) {
        let Some(head) = self.queues.head(slot) else {
            return;
        };
        if self.queues.get(slot).is_some_and(|s| s.unmappable()) {
            return;
        }
        let Some(st) = self.streams.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        let floor = now.as_nanos().saturating_sub(self.cfg.window.as_nanos());
        if st.status == Status::Mapped {
            for (k, part) in st.parts.iter_mut().enumerate() {
                if part.heap_gen != 0 {
                    continue;
                }
                part.tag = part.tag.max(floor);
                let gen = self.next_gen;
                self.next_gen += 1;
                part.heap_gen = gen;
                let key = part.tag.saturating_add(ns_for(head, part.rate_bps));
                self.paths[part.path].vs.push(Reverse((
                    key,
                    u32::MAX - st.wc,
                    slot as u32,
                    k as u32,
                    gen,
                )));
            }
        } else if st.heap3_gen == 0 {
            let gen = self.next_gen;
            self.next_gen += 1;
            st.heap3_gen = gen;
            let start = st.tag3.max(self.vtime);
            let key = start + u128::from(head) * SCFQ_SCALE / u128::from(st.weight);
            self.be.push(Reverse((key, slot as u32, gen)));
        }
    }

    /// Drop stale entries at the top of path `j`'s VS; return the live head.
    fn clean_vs(&mut self, j: usize) -> Option<(u64, usize, usize)> {
        while let Some(&Reverse((key, _, slot, part, gen))) = self.paths[j].vs.peek() {
            let (slot, part) = (slot as usize, part as usize);
            let live = self
                .streams
                .get(slot)
                .and_then(Option::as_ref)
                .and_then(|s| s.parts.get(part))
                .is_some_and(|p| p.heap_gen == gen);
            if live && self.queues.head(slot).is_some() {
                return Some((key, slot, part));
            }
            self.paths[j].vs.pop();
            self.stats.stale += 1;
            if live {
                // Live entry but the queue drained: the part leaves the heap.
                if let Some(Some(s)) = self.streams.get_mut(slot) {
                    s.parts[part].heap_gen = 0;
                }
            }
        }
        None
    }

    /// Serve the head of (slot, part) as a scheduled packet; re-insert the part.
    fn serve_part(
        &mut self,
        j_from: usize,
        slot: usize,
        part: usize,
        now: Instant,
    ) -> (StreamId, u32) {
        self.paths[j_from].vs.pop();
        // `clean_vs` returned this (slot, part) as live, so both exist.
        let (id, bytes) = self.queues.pop(slot).unwrap_or((StreamId(0), 0));
        let floor = now.as_nanos().saturating_sub(self.cfg.window.as_nanos());
        if let Some(Some(st)) = self.streams.get_mut(slot) {
            let p = &mut st.parts[part];
            self.undo_part = Some((slot, part, p.tag));
            p.tag = p.tag.max(floor).saturating_add(ns_for(bytes, p.rate_bps));
            p.heap_gen = 0;
        }
        self.activate(slot, now);
        (id, bytes)
    }

    /// The decision for path `j` (Table I); with `guarantees_only`, no
    /// best-effort traffic: classes 1 and 2, then the excess of a stream
    /// running a spec lowered after an upcall (what the paths could not
    /// promise it), which a path's bulk yield does not hold (issue 28:
    /// such a guarantee was starved with the bulk). A fully mapped
    /// stream's excess and unmapped streams wait with the bulk.
    pub(super) fn decide(
        &mut self,
        j: usize,
        now: Instant,
        guarantees_only: bool,
    ) -> Option<Dispatch> {
        self.undo_part = None;
        let horizon = now.as_nanos().saturating_add(self.cfg.window.as_nanos());
        let path = self.paths[j].id;
        // 1. Scheduled on this path.
        if let Some((key, slot, part)) = self.clean_vs(j) {
            if key <= horizon {
                let (stream, bytes) = self.serve_part(j, slot, part, now);
                self.stats.decisions[0] += 1;
                return Some(Dispatch {
                    path,
                    stream,
                    bytes,
                    class: Class::Scheduled,
                });
            }
        }
        // 2. Scheduled on another path, already late there.
        let mut best: Option<(u64, usize, usize, usize)> = None;
        for k in 0..self.paths.len() {
            if k == j {
                continue;
            }
            if let Some((key, slot, part)) = self.clean_vs(k) {
                if key <= now.as_nanos()
                    && best.is_none_or(|b| key < b.0)
                    && self.queues.allows(slot, path)
                {
                    best = Some((key, k, slot, part));
                }
            }
        }
        if let Some((_, k, slot, part)) = best {
            let (stream, bytes) = self.serve_part(k, slot, part, now);
            self.stats.decisions[1] += 1;
            return Some(Dispatch {
                path,
                stream,
                bytes,
                class: Class::OtherPath,
            });
        }
        // 3a. Unscheduled, beyond its mapped rate: a stream mapped on this
        // path that has run a window ahead (Table I 3.2: guaranteed streams
        // have the higher window constraint). Its tag is not advanced, so
        // its guaranteed share is not borrowed from.
        // Under `guarantees_only`, only a stream running a lowered spec
        // (its excess is what the paths could not promise it); a fully
        // mapped stream's excess waits with the bulk.
        if let Some((_, slot, _)) = self
            .clean_vs(j)
            .filter(|&(_, slot, _)| !guarantees_only || self.is_lowered(slot))
        {
            if let Some((stream, bytes)) = self.queues.pop(slot) {
                self.stats.decisions[2] += 1;
                return Some(Dispatch {
                    path,
                    stream,
                    bytes,
                    class: Class::Unscheduled,
                });
            }
        }
        // 3b. Unscheduled: best-effort and unmapped streams by SCFQ tag.
        // Not under `guarantees_only`: letting unmapped guarantees through
        // there cost Table III's Bond1 0.6 points of p95 at packet level
        // and the cellular runs nothing (docs/BENCHMARKS.md).
        if guarantees_only {
            return None;
        }
        if let Some(t) = self.decide_best_effort(path, now) {
            return Some(t);
        }
        // 3c. Mapped streams' backlog on other paths, earliest deadline
        // first, so that no path idles.
        let mut best: Option<(u64, usize)> = None;
        for k in 0..self.paths.len() {
            if let Some((key, slot, _)) = self.clean_vs(k) {
                if best.is_none_or(|b| key < b.0) && self.queues.allows(slot, path) {
                    best = Some((key, slot));
                }
            }
        }
        let (_, slot) = best?;
        let (stream, bytes) = self.queues.pop(slot)?;
        self.stats.decisions[2] += 1;
        Some(Dispatch {
            path,
            stream,
            bytes,
            class: Class::Unscheduled,
        })
    }

    /// The stream in `slot` runs a spec lowered after an upcall.
    fn is_lowered(&self, slot: usize) -> bool {
        self.streams
            .get(slot)
            .and_then(Option::as_ref)
            .is_some_and(|s| s.asked.is_some())
    }

    /// Class 3b for `path`: the best-effort (or unmapped) stream with the
    /// smallest SCFQ finish tag that may use `path`. Entries of streams the
    /// path may not take are set aside and put back.
    fn decide_best_effort(&mut self, path: PathId, now: Instant) -> Option<Dispatch> {
        let t = self.pop_best_effort(path, now);
        if !self.be_skipped.is_empty() {
            self.be.extend(self.be_skipped.drain(..));
        }
        t
    }

    fn pop_best_effort(&mut self, path: PathId, now: Instant) -> Option<Dispatch> {
        while let Some(Reverse((key, slot, gen))) = self.be.pop() {
            let slot = slot as usize;
            let live = self
                .streams
                .get(slot)
                .and_then(Option::as_ref)
                .is_some_and(|s| s.heap3_gen == gen && s.status != Status::Mapped);
            if !live {
                self.stats.stale += 1;
                continue;
            }
            if let Some(s) = self.queues.get(slot).filter(|s| !s.allows(path)) {
                if s.unmappable() {
                    // Leaves the heap; `handle_stream_paths` puts it back.
                    if let Some(Some(st)) = self.streams.get_mut(slot) {
                        st.heap3_gen = 0;
                    }
                } else {
                    self.be_skipped.push(Reverse((key, slot as u32, gen)));
                }
                continue;
            }
            let Some((stream, bytes)) = self.queues.pop(slot) else {
                if let Some(Some(s)) = self.streams.get_mut(slot) {
                    s.heap3_gen = 0;
                }
                continue;
            };
            self.vtime = self.vtime.max(key);
            if let Some(Some(s)) = self.streams.get_mut(slot) {
                s.tag3 = key;
                s.heap3_gen = 0;
            }
            self.activate(slot, now);
            self.stats.decisions[2] += 1;
            return Some(Dispatch {
                path,
                stream,
                bytes,
                class: Class::Unscheduled,
            });
        }
        None
    }
}
