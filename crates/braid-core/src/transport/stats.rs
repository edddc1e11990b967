//! Metrics a connection exposes (seed 002 §2.1 "exposes certain network
//! performance metrics"; seed 001 §3.2): the [`Stats`] snapshot, per-class
//! [`ClassCounters`], and the [`IntervalMeter`] that turns acks and losses
//! into per-interval loss ratio and delivery rate samples.
//!
//! Invariant: an [`IntervalSample`] covers exactly one interval of the
//! configured length; intervals with nothing acked or lost report a loss
//! ratio of zero and are marked application-limited if the sender had
//! nothing to send.

use crate::time::{Duration, Instant};
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
    /// Per-class counters: reliable, unreliable, discardable.
    pub classes: [ClassCounters; 3],
}

/// One interval's loss ratio and delivery rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalSample {
    /// Lost over (acked + lost) packets; 0 when neither.
    pub loss_ratio: f64,
    /// Acked bytes over the interval's length.
    pub delivery_rate: Bandwidth,
    /// Whether the sender was application-limited at some point.
    pub app_limited: bool,
    /// Packets acknowledged or declared lost in the interval (the loss
    /// ratio's sample size).
    pub packets: u64,
    /// When the interval ended.
    pub end: Instant,
}

/// Accumulates acks and losses into [`IntervalSample`]s.
#[derive(Debug, Clone)]
pub struct IntervalMeter {
    interval: Duration,
    start: Option<Instant>,
    acked_pkts: u64,
    lost_pkts: u64,
    acked_bytes: u64,
    app_limited: bool,
    last: Option<IntervalSample>,
}

impl IntervalMeter {
    /// A meter with intervals of `interval` (at least 1 ms).
    pub fn new(interval: Duration) -> Self {
        IntervalMeter {
            interval: interval.max(Duration::from_millis(1)),
            start: None,
            acked_pkts: 0,
            lost_pkts: 0,
            acked_bytes: 0,
            app_limited: false,
            last: None,
        }
    }

    /// Starts the first interval at `now` if not yet started.
    pub fn start(&mut self, now: Instant) {
        self.start.get_or_insert(now);
    }

    /// A packet of `bytes` was acknowledged.
    pub fn on_ack(&mut self, bytes: u64) {
        self.acked_pkts += 1;
        self.acked_bytes += bytes;
    }

    /// `n` packets were declared lost.
    pub fn on_loss(&mut self, n: u64) {
        self.lost_pkts += n;
    }

    /// The sender had room to send but nothing to send.
    pub fn mark_app_limited(&mut self) {
        self.app_limited = true;
    }

    /// When the current interval ends.
    pub fn deadline(&self) -> Option<Instant> {
        self.start.map(|s| s + self.interval)
    }

    /// Closes the interval if `now` is past its end; returns its sample.
    /// Intervals skipped entirely (no call during them) are folded into
    /// the one closed.
    pub fn roll(&mut self, now: Instant) -> Option<IntervalSample> {
        let start = self.start?;
        if now < start + self.interval {
            return None;
        }
        let elapsed = now - start;
        let n = elapsed
            .checked_div_duration(self.interval)
            .unwrap_or(1)
            .max(1);
        let span = self.interval * n;
        let total = self.acked_pkts + self.lost_pkts;
        let sample = IntervalSample {
            loss_ratio: if total == 0 {
                0.0
            } else {
                self.lost_pkts as f64 / total as f64
            },
            delivery_rate: Bandwidth::from_delivery(self.acked_bytes, span),
            app_limited: self.app_limited,
            packets: total,
            end: start + span,
        };
        self.start = Some(start + span);
        self.acked_pkts = 0;
        self.lost_pkts = 0;
        self.acked_bytes = 0;
        self.app_limited = false;
        self.last = Some(sample);
        Some(sample)
    }

    /// The last complete interval's sample.
    pub fn last(&self) -> Option<IntervalSample> {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_loss_and_rate_per_interval() {
        let mut m = IntervalMeter::new(Duration::from_millis(100));
        let t0 = Instant::ZERO;
        m.start(t0);
        for _ in 0..9 {
            m.on_ack(1250);
        }
        m.on_loss(1);
        assert!(m.roll(t0 + Duration::from_millis(99)).is_none());
        let s = m.roll(t0 + Duration::from_millis(100)).unwrap();
        assert!((s.loss_ratio - 0.1).abs() < 1e-9);
        // 11 250 bytes in 100 ms = 900 kbit/s
        assert_eq!(s.delivery_rate, Bandwidth::from_kbps(900));
        assert!(!s.app_limited);
        m.mark_app_limited();
        let s = m.roll(t0 + Duration::from_millis(350)).unwrap();
        assert!(s.app_limited);
        assert_eq!(s.loss_ratio, 0.0);
        assert_eq!(s.end, t0 + Duration::from_millis(300));
    }
}
