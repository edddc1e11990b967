//! The sink: receives a flow's data, acknowledges it if asked, and counts.
//!
//! Main types: [`Sink`], [`SinkStats`]. The sink detects loss from gaps in
//! sequence numbers (`highest + 1 − unique received`) and duplicates with a
//! sliding window of [`DUP_WINDOW`] sequence numbers; a packet older than the
//! window is counted as `late`. Per-packet delay and delivered bytes are
//! recorded by the simulator per route (see [`crate::sim::RouteStats`]), so
//! they are measured the same way for every kind of node. Pending acks are
//! bounded by [`MAX_PENDING_ACKS`].

use crate::node::{Datagram, Node, RouteId, Transmit};
use crate::wire::Header;
use braid_core::Instant;
use std::collections::VecDeque;

/// Sequence numbers remembered for duplicate detection.
pub const DUP_WINDOW: u64 = 1 << 16;
/// Most acks waiting to be sent.
pub const MAX_PENDING_ACKS: usize = 1 << 16;

/// What a sink saw.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SinkStats {
    /// Unique data packets.
    pub received: u64,
    /// Bytes of unique data packets (wire size).
    pub received_bytes: u64,
    /// Repeated data packets.
    pub duplicates: u64,
    /// Packets older than the duplicate window.
    pub late: u64,
    /// Datagrams without a valid header.
    pub malformed: u64,
    /// Acks sent.
    pub acks_sent: u64,
    /// Acks dropped because too many were pending.
    pub acks_dropped: u64,
    /// Highest sequence number seen, plus one (0: none yet).
    pub next_expected: u64,
}

impl SinkStats {
    /// Packets missing from the sequence (gaps below the highest seen).
    pub fn lost(&self) -> u64 {
        self.next_expected.saturating_sub(self.received + self.late)
    }
}

/// A receiver for built-in flows.
#[derive(Debug)]
pub struct Sink {
    ack_route: Option<RouteId>,
    ack_size: u32,
    pending: VecDeque<u64>,
    /// `seen[seq % DUP_WINDOW] == seq + 1` when `seq` was received.
    seen: Vec<u64>,
    stats: SinkStats,
}

impl Sink {
    /// A sink that acknowledges every data packet on `ack_route` (if any)
    /// with an ack of `ack_size` bytes on the wire.
    pub fn new(ack_route: Option<RouteId>, ack_size: u32) -> Self {
        Sink {
            ack_route,
            ack_size,
            pending: VecDeque::new(),
            seen: vec![0; DUP_WINDOW as usize],
            stats: SinkStats::default(),
        }
    }

    /// What the sink saw so far.
    pub fn stats(&self) -> &SinkStats {
        &self.stats
    }
}

impl Node for Sink {
    fn handle_datagram(&mut self, _now: Instant, _route: RouteId, datagram: Datagram) {
        let Some(Header::Data(seq)) = Header::decode(datagram.data()) else {
            self.stats.malformed += 1;
            return;
        };
        let s = &mut self.stats;
        if seq + DUP_WINDOW < s.next_expected {
            s.late += 1;
        } else {
            let slot = &mut self.seen[(seq % DUP_WINDOW) as usize];
            if *slot == seq + 1 {
                s.duplicates += 1;
                return;
            }
            *slot = seq + 1;
            s.received += 1;
            s.received_bytes += datagram.wire_len() as u64;
            s.next_expected = s.next_expected.max(seq + 1);
        }
        if self.ack_route.is_some() {
            if self.pending.len() < MAX_PENDING_ACKS {
                self.pending.push_back(seq);
            } else {
                s.acks_dropped += 1;
            }
        }
    }

    fn handle_timeout(&mut self, _now: Instant) {}

    fn poll_transmit(&mut self, _now: Instant) -> Option<Transmit> {
        let route = self.ack_route?;
        let seq = self.pending.pop_front()?;
        self.stats.acks_sent += 1;
        Some(Transmit {
            route,
            datagram: Datagram::sized(self.ack_size, Header::Ack(seq).encode()),
        })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = &self.stats;
        vec![
            ("received", s.received),
            ("lost_by_gaps", s.lost()),
            ("duplicates", s.duplicates),
            ("late", s.late),
            ("malformed", s.malformed),
            ("acks_sent", s.acks_sent),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(seq: u64) -> Datagram {
        Datagram::sized(1500, Header::Data(seq).encode())
    }

    #[test]
    fn counts_gaps_duplicates_and_acks() {
        let mut s = Sink::new(Some(RouteId(0)), 40);
        let t = Instant::ZERO;
        for seq in [0, 1, 3, 3, 5] {
            s.handle_datagram(t, RouteId(1), data(seq));
        }
        s.handle_datagram(t, RouteId(1), Datagram::from_bytes(vec![7]));
        assert_eq!(s.stats().received, 4);
        assert_eq!(s.stats().duplicates, 1);
        assert_eq!(s.stats().lost(), 2);
        assert_eq!(s.stats().malformed, 1);
        let acks: Vec<_> = std::iter::from_fn(|| s.poll_transmit(t)).collect();
        assert_eq!(acks.len(), 4);
        assert_eq!(acks[0].datagram.wire_len(), 40);
    }
}
