//! The receive side of packet numbers: which packets arrived, duplicate
//! detection, and when to send an ACK.
//!
//! Main type: [`AckTracker`]. Invariants: at most [`MAX_TRACKED_RANGES`]
//! disjoint ranges are kept (the oldest are forgotten; a packet older than
//! everything remembered is treated as a duplicate and dropped, which is
//! safe because its sender retransmits what matters under a new number).

use crate::time::{Duration, Instant};
use crate::wire::{AckFrame, AckRange};

/// Most packet-number ranges remembered for duplicate detection and ACKs.
pub const MAX_TRACKED_RANGES: usize = 64;
/// Ack-eliciting packets received before an ACK is sent at once.
pub const ACK_ELICITING_THRESHOLD: u32 = 2;

/// Received packet numbers and the ACK timer.
#[derive(Debug, Clone)]
pub struct AckTracker {
    /// Disjoint ranges, largest first.
    ranges: Vec<AckRange>,
    /// Everything below this is forgotten (counts as already received).
    floor: u64,
    largest_time: Option<Instant>,
    unacked_eliciting: u32,
    ack_deadline: Option<Instant>,
    immediate: bool,
    ack_pending: bool,
}

impl Default for AckTracker {
    fn default() -> Self {
        AckTracker {
            ranges: Vec::with_capacity(MAX_TRACKED_RANGES + 1),
            floor: 0,
            largest_time: None,
            unacked_eliciting: 0,
            ack_deadline: None,
            immediate: false,
            ack_pending: false,
        }
    }
}

impl AckTracker {
    /// True if `pn` was received before (or is too old to tell).
    pub fn is_duplicate(&self, pn: u64) -> bool {
        pn < self.floor || self.ranges.iter().any(|r| r.start <= pn && pn <= r.end)
    }

    /// The largest packet number received.
    pub fn largest(&self) -> Option<u64> {
        self.ranges.first().map(|r| r.end)
    }

    /// Records a new (non-duplicate) packet. `eliciting` says whether it
    /// obliges an ACK; `max_ack_delay` bounds how long the ACK may wait.
    pub fn on_packet(&mut self, now: Instant, pn: u64, eliciting: bool, max_ack_delay: Duration) {
        let out_of_order = self.largest().is_some_and(|l| pn < l || pn > l + 1);
        self.insert(pn);
        if self.largest() == Some(pn) {
            self.largest_time = Some(now);
        }
        if !eliciting {
            return;
        }
        self.ack_pending = true;
        self.unacked_eliciting += 1;
        if out_of_order || self.unacked_eliciting >= ACK_ELICITING_THRESHOLD {
            self.immediate = true;
        }
        if self.ack_deadline.is_none() {
            self.ack_deadline = Some(now + max_ack_delay);
        }
    }

    fn insert(&mut self, pn: u64) {
        // Find the first range whose start <= pn + 1 (ranges are descending).
        let mut i = 0;
        while i < self.ranges.len() && self.ranges[i].start > pn.saturating_add(1) {
            i += 1;
        }
        if i < self.ranges.len() && self.ranges[i].end.saturating_add(1) >= pn {
            let r = &mut self.ranges[i];
            r.start = r.start.min(pn);
            r.end = r.end.max(pn);
            // Growing downwards may have made it touch the next (smaller)
            // range; growing upwards cannot touch the previous one, whose
            // start is above pn + 1.
            if i + 1 < self.ranges.len() && self.ranges[i + 1].end + 1 >= self.ranges[i].start {
                let lower = self.ranges.remove(i + 1);
                self.ranges[i].start = self.ranges[i].start.min(lower.start);
            }
        } else {
            self.ranges.insert(i, AckRange { start: pn, end: pn });
        }
        if self.ranges.len() > MAX_TRACKED_RANGES {
            if let Some(old) = self.ranges.pop() {
                self.floor = self.floor.max(old.end + 1);
            }
        }
    }

    /// When an ACK must be sent by, if one is owed.
    pub fn deadline(&self) -> Option<Instant> {
        if self.immediate {
            return self.largest_time.or(self.ack_deadline);
        }
        self.ack_deadline
    }

    /// True if an ACK should go out now (threshold, reordering or timer).
    pub fn should_send(&self, now: Instant) -> bool {
        self.ack_pending && (self.immediate || self.ack_deadline.is_some_and(|d| now >= d))
    }

    /// True if anything is unacknowledged (an ACK may ride along).
    pub fn has_pending(&self) -> bool {
        self.ack_pending
    }

    /// Builds the ACK frame for `now` and resets the timer.
    pub fn build(&mut self, now: Instant) -> Option<AckFrame> {
        if self.ranges.is_empty() {
            return None;
        }
        let delay = self
            .largest_time
            .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
        self.ack_pending = false;
        self.immediate = false;
        self.unacked_eliciting = 0;
        self.ack_deadline = None;
        // Invariant: `ranges` is non-empty, sorted, disjoint and non-adjacent
        // (maintained by `insert`), which is all `AckFrame::new` checks.
        AckFrame::new(delay.as_micros(), &self.ranges).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_ranges_and_detects_duplicates() {
        let mut t = AckTracker::default();
        let now = Instant::ZERO;
        for pn in [0, 1, 2, 5, 6, 4] {
            assert!(!t.is_duplicate(pn));
            t.on_packet(now, pn, true, Duration::from_millis(25));
        }
        assert!(t.is_duplicate(5));
        assert!(!t.is_duplicate(3));
        let a = t.build(now).unwrap();
        assert_eq!(
            a.ranges(),
            &[AckRange { start: 4, end: 6 }, AckRange { start: 0, end: 2 }]
        );
        t.on_packet(now, 3, true, Duration::from_millis(25));
        assert_eq!(
            t.build(now).unwrap().ranges(),
            &[AckRange { start: 0, end: 6 }]
        );
    }

    #[test]
    fn bounds_ranges_and_forgets_the_oldest() {
        let mut t = AckTracker::default();
        for i in 0..(MAX_TRACKED_RANGES as u64 + 10) {
            t.on_packet(Instant::ZERO, i * 2, false, Duration::ZERO);
        }
        assert!(t.ranges.len() <= MAX_TRACKED_RANGES);
        assert!(t.is_duplicate(1), "below the floor counts as seen");
    }

    #[test]
    fn acks_after_two_eliciting_or_the_delay() {
        let mut t = AckTracker::default();
        let d = Duration::from_millis(25);
        t.on_packet(Instant::ZERO, 0, true, d);
        assert!(!t.should_send(Instant::ZERO));
        assert!(t.should_send(Instant::ZERO + d));
        t.on_packet(Instant::ZERO, 1, true, d);
        assert!(t.should_send(Instant::ZERO));
        t.build(Instant::ZERO);
        assert!(!t.should_send(Instant::ZERO + d));
        // Non-eliciting packets never start the timer.
        t.on_packet(Instant::ZERO, 2, false, d);
        assert_eq!(t.deadline(), None);
    }
}
