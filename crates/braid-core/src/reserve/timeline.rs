//! The slot table: one resource's timeline of reserved rate (seed 004 §3,
//! "a slot table … to keep track of reservations").
//!
//! A [`SlotTable`] holds, for each reservation, a [`Footprint`]: a few
//! disjoint [`Piece`]s (a half-open [`Interval`] and a rate). The timeline
//! itself is a multiset of rate deltas (`+rate` at a piece's start, `-rate`
//! at its end), summed per instant, so two equal reservations starting at
//! one instant count twice. Admission is "the peak of what overlaps, plus
//! the request, is at most the reservable capacity".
//!
//! Invariant: every footprint in the table fits, i.e. the per-instant sum
//! of all footprints never exceeds the capacity. [`SlotTable::admit`] is the
//! only way in and keeps it.

use std::collections::BTreeMap;

use crate::id::ReservationId;
use crate::time::Instant;
use crate::units::Bandwidth;

/// A half-open interval of time, `[start, end)`, never empty (also when
/// deserialized: an empty one is refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "RawInterval")]
pub struct Interval {
    start: Instant,
    end: Instant,
}

/// An interval as it arrives, before the non-empty check.
#[derive(serde::Deserialize)]
struct RawInterval {
    start: Instant,
    end: Instant,
}

impl TryFrom<RawInterval> for Interval {
    type Error = &'static str;
    fn try_from(raw: RawInterval) -> Result<Self, Self::Error> {
        Interval::new(raw.start, raw.end).ok_or("an interval's end must be after its start")
    }
}

impl Interval {
    /// `[start, end)`, or `None` when `end <= start` (an empty interval
    /// reserves nothing and is refused).
    pub fn new(start: Instant, end: Instant) -> Option<Interval> {
        (end > start).then_some(Interval { start, end })
    }

    /// The first instant inside the interval.
    pub fn start(self) -> Instant {
        self.start
    }

    /// The first instant after the interval.
    pub fn end(self) -> Instant {
        self.end
    }

    /// Whether `t` is inside (`start <= t < end`).
    pub fn contains(self, t: Instant) -> bool {
        self.start <= t && t < self.end
    }

    /// Whether the two intervals share an instant.
    pub fn overlaps(self, other: Interval) -> bool {
        self.start < other.end && other.start < self.end
    }
}

/// A constant rate over an interval: one step of a footprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Piece {
    /// When the rate applies.
    pub interval: Interval,
    /// The rate reserved during the interval.
    pub rate: Bandwidth,
}

/// Most pieces in one footprint: the pointwise maximum of two single-piece
/// versions (the one in force and a held modification) has at most three.
pub const MAX_PIECES: usize = 3;

/// What one reservation occupies on a timeline: up to [`MAX_PIECES`]
/// disjoint pieces.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Footprint {
    pieces: Vec<Piece>,
}

impl Footprint {
    /// One rate over one interval.
    pub fn single(interval: Interval, rate: Bandwidth) -> Footprint {
        Footprint {
            pieces: vec![Piece { interval, rate }],
        }
    }

    /// The pointwise maximum of `a` and `b`: what a reservation must be able
    /// to use while a modification of it is held (either may end up in force).
    pub fn max_of(a: Piece, b: Piece) -> Footprint {
        let mut cuts = [
            a.interval.start,
            a.interval.end,
            b.interval.start,
            b.interval.end,
        ];
        cuts.sort_unstable();
        let mut pieces: Vec<Piece> = Vec::with_capacity(MAX_PIECES);
        for w in cuts.windows(2) {
            let Some(interval) = Interval::new(w[0], w[1]) else {
                continue;
            };
            let at = |p: Piece| {
                if p.interval.contains(interval.start) {
                    p.rate
                } else {
                    Bandwidth::ZERO
                }
            };
            let rate = at(a).max(at(b));
            if rate == Bandwidth::ZERO {
                continue;
            }
            match pieces.last_mut() {
                Some(last) if last.rate == rate && last.interval.end == interval.start => {
                    last.interval.end = interval.end;
                }
                _ => pieces.push(Piece { interval, rate }),
            }
        }
        Footprint { pieces }
    }

    /// The pieces, in time order.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// The rate reserved at `t`.
    pub fn rate_at(&self, t: Instant) -> Bandwidth {
        self.pieces
            .iter()
            .find(|p| p.interval.contains(t))
            .map_or(Bandwidth::ZERO, |p| p.rate)
    }
}

/// Why a footprint did not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("only {free} free of {capacity} during the request, {requested} asked")]
pub struct Overbooked {
    /// The rate asked for at the tightest point.
    pub requested: Bandwidth,
    /// What was free at the tightest point of the refused piece.
    pub free: Bandwidth,
    /// The reservable capacity of the resource.
    pub capacity: Bandwidth,
}

/// One resource's timeline of reservations (see the module doc).
///
/// Driving: [`SlotTable::admit`] a footprint (new or replacing the same
/// id's), [`SlotTable::remove`] it when the reservation ends; ask
/// [`SlotTable::peak`], [`SlotTable::max_free`] and
/// [`SlotTable::earliest_fit`] for enquiries. Time is passed in.
#[derive(Debug, Clone)]
pub struct SlotTable {
    capacity: Bandwidth,
    /// Sum of the rate deltas at each instant (bits/s); zero sums removed.
    deltas: BTreeMap<Instant, i128>,
    footprints: BTreeMap<ReservationId, Footprint>,
}

impl SlotTable {
    /// An empty timeline with `capacity` reservable.
    pub fn new(capacity: Bandwidth) -> SlotTable {
        SlotTable {
            capacity,
            deltas: BTreeMap::new(),
            footprints: BTreeMap::new(),
        }
    }

    /// The reservable capacity.
    pub fn capacity(&self) -> Bandwidth {
        self.capacity
    }

    /// Changes the reservable capacity, refused (nothing changed) when
    /// what is reserved at some instant would not fit the new one.
    ///
    /// # Errors
    /// [`Overbooked`] with the highest rate reserved as `requested`.
    pub fn set_capacity(&mut self, capacity: Bandwidth) -> Result<(), Overbooked> {
        let mut level: i128 = 0;
        let mut peak: i128 = 0;
        for d in self.deltas.values() {
            level += d;
            peak = peak.max(level);
        }
        let peak = to_bandwidth(peak);
        if peak > capacity {
            return Err(Overbooked {
                requested: peak,
                free: capacity,
                capacity,
            });
        }
        self.capacity = capacity;
        Ok(())
    }

    /// How many reservations occupy the timeline.
    pub fn len(&self) -> usize {
        self.footprints.len()
    }

    /// Whether no reservation occupies the timeline.
    pub fn is_empty(&self) -> bool {
        self.footprints.is_empty()
    }

    /// The footprint `id` occupies, if any.
    pub fn footprint(&self, id: ReservationId) -> Option<&Footprint> {
        self.footprints.get(&id)
    }

    /// The total rate reserved at instant `t`.
    pub fn usage_at(&self, t: Instant) -> Bandwidth {
        let sum: i128 = self.deltas.range(..=t).map(|(_, d)| d).sum();
        to_bandwidth(sum)
    }

    /// The highest total rate reserved at any instant of `interval`.
    pub fn peak(&self, interval: Interval) -> Bandwidth {
        let mut level: i128 = self.deltas.range(..=interval.start).map(|(_, d)| d).sum();
        let mut peak = level;
        for (_, d) in self
            .deltas
            .range(interval.start..interval.end)
            .skip_while(|(t, _)| **t == interval.start)
        {
            level += d;
            peak = peak.max(level);
        }
        to_bandwidth(peak)
    }

    /// The largest rate that could still be reserved over the whole of
    /// `interval`.
    pub fn max_free(&self, interval: Interval) -> Bandwidth {
        self.capacity.saturating_sub(self.peak(interval))
    }

    /// The earliest interval of length `length` starting at or after
    /// `not_before` over which `rate` fits, or `None` when `rate` exceeds the
    /// capacity (beyond the last reservation everything is free, so any rate
    /// within the capacity fits somewhere).
    pub fn earliest_fit(
        &self,
        rate: Bandwidth,
        length: crate::time::Duration,
        not_before: Instant,
    ) -> Option<Interval> {
        if rate > self.capacity || length.is_zero() {
            return None;
        }
        // A fit can only begin at `not_before` or where the level drops.
        let candidates = core::iter::once(not_before).chain(
            self.deltas
                .range(not_before..)
                .filter(|(t, d)| **t > not_before && **d < 0)
                .map(|(t, _)| *t),
        );
        for start in candidates {
            let interval = Interval::new(start, start + length)?;
            if self.peak(interval).saturating_add(rate) <= self.capacity {
                return Some(interval);
            }
        }
        None
    }

    /// Puts `footprint` on the timeline for `id`, replacing `id`'s previous
    /// footprint, if it fits beside everything else; otherwise leaves the
    /// table as it was.
    ///
    /// # Errors
    /// [`Overbooked`] naming the tightest point of the first piece that does
    /// not fit.
    pub fn admit(&mut self, id: ReservationId, footprint: Footprint) -> Result<(), Overbooked> {
        let old = self.remove(id);
        for piece in footprint.pieces() {
            let peak = self.peak(piece.interval);
            if peak.saturating_add(piece.rate) > self.capacity {
                if let Some(old) = old {
                    self.insert(id, old);
                }
                return Err(Overbooked {
                    requested: piece.rate,
                    free: self.capacity.saturating_sub(peak),
                    capacity: self.capacity,
                });
            }
        }
        self.insert(id, footprint);
        Ok(())
    }

    /// Takes `id`'s footprint off the timeline, returning it.
    pub fn remove(&mut self, id: ReservationId) -> Option<Footprint> {
        let old = self.footprints.remove(&id)?;
        for p in old.pieces() {
            self.add_delta(p.interval.start, -i128::from(p.rate.bps()));
            self.add_delta(p.interval.end, i128::from(p.rate.bps()));
        }
        Some(old)
    }

    fn insert(&mut self, id: ReservationId, footprint: Footprint) {
        for p in footprint.pieces() {
            self.add_delta(p.interval.start, i128::from(p.rate.bps()));
            self.add_delta(p.interval.end, -i128::from(p.rate.bps()));
        }
        self.footprints.insert(id, footprint);
    }

    fn add_delta(&mut self, t: Instant, d: i128) {
        let e = self.deltas.entry(t).or_insert(0);
        *e += d;
        if *e == 0 {
            self.deltas.remove(&t);
        }
    }
}

/// A level of the timeline as a rate; levels are sums of footprints and so
/// never negative or above `u64::MAX` bits/s in a table that keeps its
/// invariant, but clamp rather than trust that.
fn to_bandwidth(level: i128) -> Bandwidth {
    Bandwidth::from_bps(u64::try_from(level.max(0)).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    fn t(s: u64) -> Instant {
        Instant::from_nanos(s * 1_000_000_000)
    }
    fn iv(a: u64, b: u64) -> Interval {
        Interval::new(t(a), t(b)).expect("test intervals are non-empty")
    }
    fn mbit(m: u64) -> Bandwidth {
        Bandwidth::from_mbps(m)
    }

    #[test]
    fn capacity_shrinks_only_above_the_peak() {
        let mut table = SlotTable::new(mbit(100));
        table
            .admit(ReservationId(1), Footprint::single(iv(0, 10), mbit(30)))
            .unwrap();
        table
            .admit(ReservationId(2), Footprint::single(iv(5, 20), mbit(30)))
            .unwrap();
        let e = table.set_capacity(mbit(59)).unwrap_err();
        assert_eq!(e.requested, mbit(60));
        assert_eq!(table.capacity(), mbit(100), "unchanged when refused");
        table.set_capacity(mbit(60)).unwrap();
        assert_eq!(table.max_free(iv(0, 30)), Bandwidth::ZERO);
        table.set_capacity(mbit(200)).unwrap();
        assert_eq!(table.max_free(iv(0, 30)), mbit(140));
    }

    #[test]
    fn empty_interval_is_refused() {
        assert!(Interval::new(t(3), t(3)).is_none());
        assert!(Interval::new(t(4), t(3)).is_none());
        assert!(iv(1, 2).contains(t(1)));
        assert!(!iv(1, 2).contains(t(2)));
        assert!(!iv(1, 2).overlaps(iv(2, 3)));
    }

    #[test]
    fn an_empty_interval_does_not_deserialize() {
        let ok: Interval = serde_json::from_str(r#"{"start":1,"end":2}"#).unwrap();
        assert_eq!(
            ok,
            Interval::new(Instant::from_nanos(1), Instant::from_nanos(2)).unwrap()
        );
        assert!(serde_json::from_str::<Interval>(r#"{"start":2,"end":2}"#).is_err());
        assert!(serde_json::from_str::<Interval>(r#"{"start":3,"end":2}"#).is_err());
    }

    #[test]
    fn equal_reservations_at_one_instant_count_twice() {
        let mut s = SlotTable::new(mbit(100));
        s.admit(ReservationId(1), Footprint::single(iv(0, 10), mbit(40)))
            .unwrap();
        s.admit(ReservationId(2), Footprint::single(iv(0, 10), mbit(40)))
            .unwrap();
        assert_eq!(s.usage_at(t(0)), mbit(80));
        assert_eq!(s.peak(iv(0, 10)), mbit(80));
        let err = s
            .admit(ReservationId(3), Footprint::single(iv(0, 10), mbit(40)))
            .unwrap_err();
        assert_eq!(err.free, mbit(20));
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn half_open_intervals_touch_without_overlap() {
        let mut s = SlotTable::new(mbit(100));
        s.admit(ReservationId(1), Footprint::single(iv(0, 10), mbit(100)))
            .unwrap();
        s.admit(ReservationId(2), Footprint::single(iv(10, 20), mbit(100)))
            .unwrap();
        assert_eq!(s.peak(iv(5, 15)), mbit(100));
        assert_eq!(s.usage_at(t(20)), Bandwidth::ZERO);
    }

    #[test]
    fn peak_sees_inner_steps() {
        let mut s = SlotTable::new(mbit(100));
        s.admit(ReservationId(1), Footprint::single(iv(2, 4), mbit(30)))
            .unwrap();
        s.admit(ReservationId(2), Footprint::single(iv(3, 8), mbit(50)))
            .unwrap();
        assert_eq!(s.peak(iv(0, 10)), mbit(80));
        assert_eq!(s.peak(iv(4, 10)), mbit(50));
        assert_eq!(s.max_free(iv(0, 3)), mbit(70));
        assert_eq!(s.max_free(iv(8, 9)), mbit(100));
    }

    #[test]
    fn replacing_a_footprint_restores_it_on_refusal() {
        let mut s = SlotTable::new(mbit(100));
        s.admit(ReservationId(1), Footprint::single(iv(0, 10), mbit(60)))
            .unwrap();
        s.admit(ReservationId(2), Footprint::single(iv(0, 10), mbit(30)))
            .unwrap();
        // Growing 1 to 70 fits once its own 60 is not counted.
        s.admit(ReservationId(1), Footprint::single(iv(0, 10), mbit(70)))
            .unwrap();
        assert!(s
            .admit(ReservationId(1), Footprint::single(iv(0, 10), mbit(71)))
            .is_err());
        assert_eq!(s.peak(iv(0, 10)), mbit(100));
        assert_eq!(s.remove(ReservationId(1)).unwrap().rate_at(t(0)), mbit(70));
        assert_eq!(s.peak(iv(0, 10)), mbit(30));
    }

    #[test]
    fn max_of_two_versions() {
        let a = Piece {
            interval: iv(0, 10),
            rate: mbit(10),
        };
        let b = Piece {
            interval: iv(5, 20),
            rate: mbit(30),
        };
        let f = Footprint::max_of(a, b);
        assert_eq!(f.pieces().len(), 2);
        assert_eq!(f.rate_at(t(0)), mbit(10));
        assert_eq!(f.rate_at(t(5)), mbit(30));
        assert_eq!(f.rate_at(t(19)), mbit(30));
        assert_eq!(f.rate_at(t(20)), Bandwidth::ZERO);
        let c = Piece {
            interval: iv(0, 10),
            rate: mbit(10),
        };
        let d = Piece {
            interval: iv(0, 4),
            rate: mbit(5),
        };
        assert_eq!(
            Footprint::max_of(c, d),
            Footprint::single(iv(0, 10), mbit(10))
        );
        let e = Piece {
            interval: iv(0, 2),
            rate: mbit(5),
        };
        let g = Piece {
            interval: iv(4, 6),
            rate: mbit(5),
        };
        assert_eq!(Footprint::max_of(e, g).pieces().len(), 2);
    }

    #[test]
    fn earliest_fit_waits_for_a_drop() {
        let mut s = SlotTable::new(mbit(100));
        s.admit(ReservationId(1), Footprint::single(iv(0, 10), mbit(80)))
            .unwrap();
        s.admit(ReservationId(2), Footprint::single(iv(12, 20), mbit(50)))
            .unwrap();
        let len = Duration::from_secs(5);
        assert_eq!(s.earliest_fit(mbit(20), len, t(0)), Some(iv(0, 5)));
        // 60 fits neither under 1 nor across 2: only after 20.
        assert_eq!(s.earliest_fit(mbit(60), len, t(0)), Some(iv(20, 25)));
        // 40 fits at 10 for 5 s? No: 12..15 has 50 → 90. 40 + 50 = 90 ≤ 100: yes.
        assert_eq!(s.earliest_fit(mbit(40), len, t(3)), Some(iv(10, 15)));
        assert_eq!(s.earliest_fit(mbit(101), len, t(0)), None);
    }
}
