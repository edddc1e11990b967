//! The record of packets in flight, without an allocation per packet.
//!
//! Packet numbers are sent in increasing order, so the packets in flight
//! are a queue: [`SentLog`] keeps them in a `VecDeque` in number order and
//! finds one by binary search. A packet that leaves (acknowledged or lost)
//! leaves a hole, and holes at the front are popped, so the queue spans the
//! oldest packet still in flight to the newest. Loss detection removes
//! every packet older than the largest acknowledged one within 9/8 of an
//! RTT, so the span is what is in flight plus about one RTT of packets.
//!
//! Once the queue has grown to the connection's peak, recording, finding
//! and removing a packet allocate nothing (a B-tree allocated a node every
//! few packets). A packet's frames are a [`SentFrames`], inline up to two.
//!
//! Main types: [`SentLog`], [`SentPacket`], [`SentFrame`]. Invariants: the numbers in `q` strictly
//! increase; the front entry, if any, is live; `live`, `bytes_in_flight`
//! and `eliciting` are the count, the in-flight bytes and the
//! ack-eliciting count of the live entries.

use crate::time::Instant;
use crate::wire::{AdaptFrame, Reliability, StreamId};
use smallvec::SmallVec;
use std::collections::VecDeque;

/// What a sent packet carried, to act on its acknowledgement or loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SentFrame {
    /// A message fragment.
    Stream {
        /// Stream.
        stream: StreamId,
        /// Message number.
        message: u64,
        /// Fragment offset.
        offset: u64,
        /// Fragment length.
        len: u64,
        /// The message's class.
        reliability: Reliability,
    },
    /// A MESSAGE_SKIP.
    Skip {
        /// Stream.
        stream: StreamId,
        /// Message number.
        message: u64,
        /// The message's length.
        len: u64,
        /// The message's dependency (see the STREAM frame).
        depends_back: Option<u64>,
    },
    /// A MAX_DATA (resent with the current limit if lost).
    MaxData,
    /// An ADAPT report (resent if lost).
    Adapt(AdaptFrame),
    /// The server's HANDSHAKE (resent if lost).
    Handshake,
    /// A PING or other frame that needs nothing on loss.
    Other,
}

/// What one packet carried: a bulk packet carries one fragment, or two
/// where a message ends, so two fit without a heap allocation.
pub type SentFrames = SmallVec<[SentFrame; 2]>;

/// A packet in flight.
#[derive(Debug, Clone)]
pub struct SentPacket {
    /// When it was sent.
    pub time_sent: Instant,
    /// Its size in bytes (the whole UDP payload).
    pub size: u64,
    /// Whether it elicits an ACK (counts toward the PTO).
    pub ack_eliciting: bool,
    /// Whether it counts toward bytes in flight (everything but ACK-only).
    pub in_flight: bool,
    /// Whether the sender was application-limited when it was sent.
    pub app_limited: bool,
    /// Bytes delivered (acknowledged) on the connection when it was sent,
    /// for delivery-rate samples.
    pub delivered: u64,
    /// When `delivered` was last increased before it was sent.
    pub delivered_time: Instant,
    /// Its frames.
    pub frames: SentFrames,
}

/// Packets in flight by number.
#[derive(Debug, Default)]
pub struct SentLog {
    q: VecDeque<(u64, Option<SentPacket>)>,
    live: usize,
    bytes_in_flight: u64,
    eliciting: usize,
}

impl SentLog {
    /// Packets in flight.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True if no packet is in flight.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The sizes of the packets that count toward bytes in flight.
    pub fn bytes_in_flight(&self) -> u64 {
        self.bytes_in_flight
    }

    /// Ack-eliciting packets in flight.
    pub fn eliciting(&self) -> usize {
        self.eliciting
    }

    fn count(&mut self, p: &SentPacket, add: bool) {
        let size = if p.in_flight { p.size } else { 0 };
        let el = usize::from(p.ack_eliciting);
        if add {
            self.live += 1;
            self.bytes_in_flight += size;
            self.eliciting += el;
        } else {
            self.live -= 1;
            self.bytes_in_flight -= size;
            self.eliciting -= el;
        }
    }

    /// Records `pn`, which must be above every number recorded before.
    pub fn insert(&mut self, pn: u64, p: SentPacket) {
        debug_assert!(self.q.back().is_none_or(|(last, _)| *last < pn));
        self.count(&p, true);
        self.q.push_back((pn, Some(p)));
    }

    /// Removes and returns packet `pn`, if it is in flight.
    pub fn remove(&mut self, pn: u64) -> Option<SentPacket> {
        let i = self.q.binary_search_by_key(&pn, |(n, _)| *n).ok()?;
        let p = self.q[i].1.take()?;
        self.count(&p, false);
        self.pop_holes();
        Some(p)
    }

    /// Removes the packets numbered `start..=end` and hands each, in
    /// number order, to `f`.
    pub fn remove_range(&mut self, start: u64, end: u64, mut f: impl FnMut(u64, SentPacket)) {
        let mut i = self.q.partition_point(|(n, _)| *n < start);
        while let Some((pn, slot)) = self.q.get_mut(i) {
            if *pn > end {
                break;
            }
            let pn = *pn;
            if let Some(p) = slot.take() {
                self.count(&p, false);
                f(pn, p);
            }
            i += 1;
        }
        self.pop_holes();
    }

    /// Removes, in number order, the packets below `below` that `lost`
    /// says are lost, handing each to `f`.
    pub fn remove_where(
        &mut self,
        below: u64,
        mut lost: impl FnMut(u64, &SentPacket) -> bool,
        mut f: impl FnMut(u64, SentPacket),
    ) {
        let mut i = 0;
        while let Some((pn, slot)) = self.q.get_mut(i) {
            if *pn >= below {
                break;
            }
            let pn = *pn;
            if let Some(p) = slot.take_if(|p| lost(pn, p)) {
                self.count(&p, false);
                f(pn, p);
            }
            i += 1;
        }
        self.pop_holes();
    }

    /// The packets in flight, in number order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &SentPacket)> {
        self.q
            .iter()
            .filter_map(|(pn, slot)| slot.as_ref().map(|p| (*pn, p)))
    }

    /// Removes every packet, in number order.
    pub fn drain(&mut self) -> Vec<(u64, SentPacket)> {
        self.live = 0;
        self.bytes_in_flight = 0;
        self.eliciting = 0;
        self.q
            .drain(..)
            .filter_map(|(pn, slot)| slot.map(|p| (pn, p)))
            .collect()
    }

    fn pop_holes(&mut self) {
        while self.q.front().is_some_and(|(_, slot)| slot.is_none()) {
            self.q.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(size: u64) -> SentPacket {
        SentPacket {
            time_sent: Instant::ZERO,
            size,
            ack_eliciting: true,
            in_flight: true,
            app_limited: false,
            delivered: 0,
            delivered_time: Instant::ZERO,
            frames: [SentFrame::Other].into_iter().collect(),
        }
    }

    #[test]
    fn removes_by_number_range_and_predicate_and_pops_holes() {
        let mut log = SentLog::default();
        for pn in [0, 1, 2, 5, 6, 9] {
            log.insert(pn, pkt(pn));
        }
        assert_eq!(
            (log.len(), log.bytes_in_flight(), log.eliciting()),
            (6, 23, 6)
        );
        assert!(log.remove(3).is_none());
        assert_eq!(log.remove(1).map(|p| p.size), Some(1));
        assert!(log.remove(1).is_none());
        let mut got = vec![];
        log.remove_range(2, 6, |pn, _| got.push(pn));
        assert_eq!(got, [2, 5, 6]);
        got.clear();
        log.remove_where(9, |pn, _| pn == 0, |pn, _| got.push(pn));
        assert_eq!(got, [0]);
        // Everything before 9 is gone: the holes were popped.
        assert_eq!(log.q.len(), 1);
        assert_eq!(log.iter().map(|(pn, _)| pn).collect::<Vec<_>>(), [9]);
        assert_eq!(
            (log.len(), log.bytes_in_flight(), log.eliciting()),
            (1, 9, 1)
        );
        assert_eq!(log.drain().len(), 1);
        assert!(log.is_empty());
        assert_eq!(log.bytes_in_flight(), 0);
    }
}
