//! Metrics a connection exposes (seed 002 §2.1 "exposes certain network
//! performance metrics"; seed 001 §3.2): the [`Stats`] snapshot and
//! per-class [`ClassCounters`].
//!
//! The per-interval loss ratio and delivery rate come from the connection's
//! [`RateSampler`](crate::estimate::RateSampler), as
//! [`RateSample`](crate::estimate::RateSample)s: [`Stats`] shows the last
//! one, `Connection::poll_rate_sample` hands out every one.

use crate::time::Duration;
use crate::units::Bandwidth;

/// Message counters for one reliability class. Send-side fields are
/// counted by the sender, receive-side fields by the receiver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClassCounters {
    /// Messages whose every byte was sent at least once (sender).
    pub sent: u64,
    /// Messages whose first fragment was declared lost (sender; only for
    /// classes that are not retransmitted).
    pub lost: u64,
    /// Messages dropped before sending under congestion or after a
    /// marking change (sender; discardable only).
    pub dropped_before_send: u64,
    /// Messages dropped because their deadline passed (sender: before
    /// completing; receiver: before delivery).
    pub expired: u64,
    /// Messages delivered to the application (receiver).
    pub delivered: u64,
    /// Fragments of messages that arrived after later messages had been
    /// delivered, and were therefore dropped (receiver).
    pub late: u64,
    /// Messages dropped by the receiver: buffer full, too fragmented, or
    /// incomplete when a later message was delivered (receiver).
    pub dropped_on_receive: u64,
}

impl ClassCounters {
    /// Field-wise sum.
    pub fn merged(&self, o: &ClassCounters) -> ClassCounters {
        ClassCounters {
            sent: self.sent + o.sent,
            lost: self.lost + o.lost,
            dropped_before_send: self.dropped_before_send + o.dropped_before_send,
            expired: self.expired + o.expired,
            delivered: self.delivered + o.delivered,
            late: self.late + o.late,
            dropped_on_receive: self.dropped_on_receive + o.dropped_on_receive,
        }
    }
}

/// A snapshot of a connection's metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Smoothed round-trip time.
    pub srtt: Duration,
    /// Round-trip time variation.
    pub rttvar: Duration,
    /// Smallest RTT sample.
    pub min_rtt: Duration,
    /// Fraction of packets declared lost among those acked or lost during
    /// the last complete interval.
    pub loss_ratio: f64,
    /// Bytes acknowledged per second over the last complete interval.
    pub delivery_rate: Bandwidth,
    /// The sender ran out of data during that interval, so the delivery
    /// rate says less about the path than about the application.
    pub app_limited: bool,
    /// Congestion window in bytes.
    pub cwnd: u64,
    /// Pacing rate.
    pub pacing_rate: Bandwidth,
    /// Bytes in flight.
    pub bytes_in_flight: u64,
    /// Packets sent.
    pub packets_sent: u64,
    /// Packets received and accepted.
    pub packets_received: u64,
    /// Packets declared lost.
    pub packets_lost: u64,
    /// UDP payload bytes sent.
    pub bytes_sent: u64,
    /// UDP payload bytes received and accepted.
    pub bytes_received: u64,
    /// Reliable stream bytes sent again after a loss.
    pub retransmitted_bytes: u64,
    /// Datagrams dropped as malformed.
    pub malformed: u64,
    /// Packets dropped as duplicates (replays included).
    pub duplicates: u64,
    /// Datagrams dropped because they did not open under the connection's
    /// key (forged, altered, or unprotected on a keyed connection); they
    /// changed nothing else.
    pub decrypt_failed: u64,
    /// Authentic packets dropped because their number was already received
    /// or is older than the receive window (replays; also counted in
    /// `duplicates`). Only keyed connections count these.
    pub replayed: u64,
    /// Packets left unacknowledged because a reliable message they carried
    /// found no room in the receive buffers (more messages pending on its
    /// stream than [`MAX_PENDING_MESSAGES`](crate::transport::recv::MAX_PENDING_MESSAGES)
    /// allows): the sender's loss recovery sends them again once the
    /// stream has drained. Data is never dropped after its packet was
    /// acknowledged.
    pub refused_packets: u64,
    /// Packets that carried nothing but a PING (keep-alives, probes):
    /// what an idle connection costs ([`Config::keep_alive`](crate::transport::Config::keep_alive)).
    pub lone_pings: u64,
    /// Per-class counters: reliable, unreliable, discardable.
    pub classes: [ClassCounters; 3],
}
