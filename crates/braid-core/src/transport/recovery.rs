//! Loss recovery: packet numbers, the record of packets in flight, SACK
//! processing, RTT sampling, packet- and time-threshold loss detection and
//! the probe timeout (RFC 9002 §6, with RFC 6298 RTT estimation).
//!
//! Main types: [`Recovery`], [`SentPacket`], [`SentFrame`], [`AckOutcome`].
//! Nothing here allocates per packet once a connection has reached its
//! peak (the packets in flight are a [`SentLog`]; a packet's frames are
//! inline up to two; an [`AckOutcome`] is reused through
//! [`Recovery::on_ack_into`]).
//!
//! Invariants:
//! - Packet numbers are sent in increasing order and never reused; a
//!   retransmission goes in a new packet.
//! - Every sent packet is in `sent` until it is acknowledged or declared
//!   lost, and then never again: each piece of data is in flight at most
//!   once, so acknowledgements are counted exactly once.
//! - `bytes_in_flight` is the sum of the sizes of in-flight packets in `sent`.
//! - `sent` holds at most [`MAX_SENT_PACKETS`]; the connection stops sending
//!   new packets when it is full.

use super::rtt::RttEstimator;
use super::sent_log::SentLog;
pub use super::sent_log::{SentFrame, SentFrames, SentPacket};
use crate::time::{Duration, Instant};
use crate::wire::AckFrame;

/// A packet is lost once this many later packets are acknowledged.
pub const PACKET_THRESHOLD: u64 = 3;
/// A packet is lost once it is older than this fraction (9/8) of the RTT
/// and a later packet is acknowledged; numerator and denominator.
pub const TIME_THRESHOLD: (u64, u64) = (9, 8);
/// Most packets remembered as in flight.
pub const MAX_SENT_PACKETS: usize = 16_384;
/// Most probe-timeout backoffs (2^10 × PTO).
pub const MAX_PTO_BACKOFF: u32 = 10;
/// Losses spanning this many (un-backed-off) probe timeouts, with nothing
/// acknowledged in between, are persistent congestion (RFC 9002 §7.6).
pub const PERSISTENT_CONGESTION_THRESHOLD: u64 = 3;

/// The result of processing an ACK or a loss timer.
#[derive(Debug, Default)]
pub struct AckOutcome {
    /// Packets newly acknowledged, in packet-number order.
    pub acked: Vec<(u64, SentPacket)>,
    /// Packets newly declared lost, in packet-number order.
    pub lost: Vec<(u64, SentPacket)>,
    /// Whether the ACK gave an RTT sample.
    pub rtt_sampled: bool,
}

impl AckOutcome {
    /// Empties it for reuse, keeping its buffers.
    pub fn clear(&mut self) {
        self.acked.clear();
        self.lost.clear();
        self.rtt_sampled = false;
    }
}

/// Why an ACK was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecoveryError {
    /// The peer acknowledged a packet number that was never sent.
    #[error("ack of unsent packet {0}")]
    AckOfUnsent(u64),
}

/// Sent-packet bookkeeping, RTT and loss detection for one connection.
#[derive(Debug)]
pub struct Recovery {
    sent: SentLog,
    next_pn: u64,
    largest_acked: Option<u64>,
    loss_time: Option<Instant>,
    pto_count: u32,
    last_eliciting_sent: Option<Instant>,
    /// The most recent ACK (its ranges tell what arrived between losses).
    last_ack: Option<AckFrame>,
    /// Persistent congestion was found and not yet taken.
    persistent: bool,
    /// When an ACK last newly acknowledged a packet.
    last_ack_at: Option<Instant>,
    rtt: RttEstimator,
    max_ack_delay: Duration,
}

impl Recovery {
    /// Recovery state assuming `initial_rtt` until the first sample, with
    /// the peer's advertised `max_ack_delay`.
    pub fn new(initial_rtt: Duration, max_ack_delay: Duration) -> Self {
        Recovery {
            sent: SentLog::default(),
            next_pn: 0,
            largest_acked: None,
            loss_time: None,
            pto_count: 0,
            last_eliciting_sent: None,
            last_ack: None,
            persistent: false,
            last_ack_at: None,
            rtt: RttEstimator::new(initial_rtt),
            max_ack_delay,
        }
    }

    /// Sets the peer's maximum ack delay (learned in the handshake).
    pub fn set_max_ack_delay(&mut self, d: Duration) {
        self.max_ack_delay = d;
    }

    /// The RTT estimator.
    pub fn rtt(&self) -> &RttEstimator {
        &self.rtt
    }

    /// The number the next packet will carry.
    pub fn next_pn(&self) -> u64 {
        self.next_pn
    }

    /// Bytes in flight.
    pub fn bytes_in_flight(&self) -> u64 {
        self.sent.bytes_in_flight()
    }

    /// Packets in flight.
    pub fn packets_in_flight(&self) -> usize {
        self.sent.len()
    }

    /// True if no more packets can be recorded.
    pub fn is_full(&self) -> bool {
        self.sent.len() >= MAX_SENT_PACKETS
    }

    /// True if any ack-eliciting packet is unacknowledged.
    pub fn has_eliciting_in_flight(&self) -> bool {
        self.sent.eliciting() > 0
    }

    /// When an ACK last newly acknowledged a packet (`None` before the
    /// first; an ACK of nothing new does not count).
    pub fn last_ack_at(&self) -> Option<Instant> {
        self.last_ack_at
    }

    /// Send time of the oldest ack-eliciting packet still unacknowledged;
    /// `None` when none is in flight. Packets are sent in number order, so this is
    /// the first ack-eliciting packet of `sent` (usually its first entry).
    pub fn oldest_unacked_sent_at(&self) -> Option<Instant> {
        if self.sent.eliciting() == 0 {
            return None;
        }
        self.sent
            .iter()
            .map(|(_, p)| p)
            .find(|p| p.ack_eliciting)
            .map(|p| p.time_sent)
    }

    /// Takes the next packet number for a packet that needs no
    /// acknowledgement and is not in flight (ACK-only, CLOSE, INITIAL).
    pub fn on_sent_unrecorded(&mut self) -> u64 {
        let pn = self.next_pn;
        self.next_pn += 1;
        pn
    }

    /// Records packet `next_pn()` as sent and advances the number.
    pub fn on_sent(&mut self, pn: u64, packet: SentPacket) {
        debug_assert_eq!(pn, self.next_pn);
        self.next_pn = pn + 1;
        if packet.ack_eliciting {
            self.last_eliciting_sent = Some(packet.time_sent);
        }
        self.sent.insert(pn, packet);
    }

    /// Processes an ACK received at `now`.
    ///
    /// # Errors
    /// [`RecoveryError::AckOfUnsent`] if it acknowledges a number not yet
    /// sent (a protocol violation).
    pub fn on_ack(&mut self, now: Instant, ack: &AckFrame) -> Result<AckOutcome, RecoveryError> {
        let mut out = AckOutcome::default();
        self.on_ack_into(now, ack, &mut out)?;
        Ok(out)
    }

    /// [`Recovery::on_ack`] into `out`, which is cleared first: a caller
    /// that keeps one `AckOutcome` allocates nothing per ACK.
    ///
    /// # Errors
    /// As [`Recovery::on_ack`]; `out` is then empty.
    pub fn on_ack_into(
        &mut self,
        now: Instant,
        ack: &AckFrame,
        out: &mut AckOutcome,
    ) -> Result<(), RecoveryError> {
        out.clear();
        let largest = ack.largest();
        if largest >= self.next_pn {
            return Err(RecoveryError::AckOfUnsent(largest));
        }
        for r in ack.ranges().iter().rev() {
            self.sent
                .remove_range(r.start, r.end, |pn, p| out.acked.push((pn, p)));
        }
        self.largest_acked = Some(self.largest_acked.map_or(largest, |l| l.max(largest)));
        if let Some((pn, p)) = out.acked.last() {
            if *pn == largest && p.ack_eliciting {
                let sample = now.saturating_duration_since(p.time_sent);
                let delay = Duration::from_micros(ack.ack_delay_us).min(self.max_ack_delay);
                self.rtt.update(sample, delay);
                out.rtt_sampled = true;
            }
        }
        if !out.acked.is_empty() {
            self.pto_count = 0;
            self.last_ack_at = Some(now);
        }
        self.last_ack = Some(*ack);
        self.detect_lost(now, &mut out.lost);
        Ok(())
    }

    /// Declares lost what the thresholds say is lost, and arms the
    /// time-threshold timer for the rest.
    fn detect_lost(&mut self, now: Instant, lost: &mut Vec<(u64, SentPacket)>) {
        self.loss_time = None;
        let Some(largest) = self.largest_acked else {
            return;
        };
        let rtt = self.rtt.latest().max(self.rtt.srtt());
        let delay = (rtt * TIME_THRESHOLD.0 / TIME_THRESHOLD.1).max(Duration::from_millis(1));
        let first_new = lost.len();
        let mut loss_time: Option<Instant> = None;
        self.sent.remove_where(
            largest,
            |pn, p| {
                let gone = p.time_sent + delay <= now || largest - pn >= PACKET_THRESHOLD;
                if !gone {
                    let t = p.time_sent + delay;
                    loss_time = Some(loss_time.map_or(t, |l| l.min(t)));
                }
                gone
            },
            |pn, p| lost.push((pn, p)),
        );
        self.loss_time = loss_time;
        if self.is_persistent(&lost[first_new..]) {
            self.persistent = true;
        }
    }

    /// RFC 9002 §7.6: two ack-eliciting packets lost more than
    /// [`PERSISTENT_CONGESTION_THRESHOLD`] probe timeouts apart with nothing
    /// acknowledged between them (per the latest ACK's ranges), once an RTT
    /// sample exists.
    fn is_persistent(&self, lost: &[(u64, SentPacket)]) -> bool {
        let Some(ack) = self.last_ack.as_ref() else {
            return false;
        };
        if !self.rtt.has_sample() {
            return false;
        }
        let period = self.rtt.pto_base(self.max_ack_delay) * PERSISTENT_CONGESTION_THRESHOLD;
        let acked_between =
            |a: u64, b: u64| ack.ranges().iter().any(|r| r.start <= b && r.end >= a);
        let el: Vec<&(u64, SentPacket)> = lost.iter().filter(|(_, p)| p.ack_eliciting).collect();
        let mut start = 0;
        for j in 0..el.len() {
            while start < j && acked_between(el[start].0, el[j].0) {
                start += 1;
            }
            if el[j]
                .1
                .time_sent
                .saturating_duration_since(el[start].1.time_sent)
                >= period
            {
                return true;
            }
        }
        false
    }

    /// True (once) if persistent congestion was found since the last call.
    pub fn take_persistent_congestion(&mut self) -> bool {
        std::mem::take(&mut self.persistent)
    }

    /// The next recovery deadline: the loss timer if armed, otherwise the
    /// probe timeout after the last ack-eliciting packet, if any is in
    /// flight (or `probe_without_flight` says a probe is wanted anyway, as
    /// when a client awaits the handshake).
    pub fn timeout(&self, probe_without_flight: bool) -> Option<Instant> {
        if let Some(t) = self.loss_time {
            return Some(t);
        }
        if !probe_without_flight && !self.has_eliciting_in_flight() {
            return None;
        }
        let last = self.last_eliciting_sent?;
        Some(last + self.pto())
    }

    /// The current probe timeout, with exponential backoff.
    pub fn pto(&self) -> Duration {
        self.rtt.pto_base(self.max_ack_delay) * (1u64 << self.pto_count.min(MAX_PTO_BACKOFF))
    }

    /// Handles the recovery timer. Returns newly lost packets (loss timer)
    /// or `true` in `.1` when a probe should be sent (PTO).
    pub fn on_timeout(&mut self, now: Instant) -> (Vec<(u64, SentPacket)>, bool) {
        let mut lost = Vec::new();
        if self.loss_time.is_some_and(|t| now >= t) {
            self.detect_lost(now, &mut lost);
            return (lost, false);
        }
        self.pto_count = (self.pto_count + 1).min(MAX_PTO_BACKOFF);
        (lost, true)
    }

    /// How many probe timeouts have fired in a row.
    pub fn pto_count(&self) -> u32 {
        self.pto_count
    }

    /// Forgets everything in flight (on close or reset) and returns it.
    pub fn drain(&mut self) -> Vec<(u64, SentPacket)> {
        self.loss_time = None;
        self.sent.drain()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::AckRange;

    fn pkt(t: Instant) -> SentPacket {
        SentPacket {
            time_sent: t,
            size: 1000,
            ack_eliciting: true,
            in_flight: true,
            app_limited: false,
            delivered: 0,
            delivered_time: t,
            frames: [SentFrame::Other].into_iter().collect(),
        }
    }

    fn ack(ranges: &[(u64, u64)]) -> AckFrame {
        let r: Vec<AckRange> = ranges
            .iter()
            .map(|&(start, end)| AckRange { start, end })
            .collect();
        AckFrame::new(0, &r).unwrap()
    }

    fn ms(v: u64) -> Instant {
        Instant::from_nanos(v * 1_000_000)
    }

    #[test]
    fn last_ack_and_oldest_in_flight() {
        let mut r = Recovery::new(Duration::from_millis(100), Duration::ZERO);
        assert_eq!((r.last_ack_at(), r.oldest_unacked_sent_at()), (None, None));
        // A packet that elicits no ACK is not what the oldest in flight means.
        let mut quiet = pkt(ms(1));
        quiet.ack_eliciting = false;
        r.on_sent(0, quiet);
        assert_eq!(r.oldest_unacked_sent_at(), None);
        r.on_sent(1, pkt(ms(2)));
        r.on_sent(2, pkt(ms(3)));
        assert_eq!(r.oldest_unacked_sent_at(), Some(ms(2)));
        r.on_ack(ms(20), &ack(&[(1, 1)])).unwrap();
        assert_eq!(r.last_ack_at(), Some(ms(20)));
        assert_eq!(r.oldest_unacked_sent_at(), Some(ms(3)));
        // An ACK of nothing new does not move `last_ack_at`.
        r.on_ack(ms(25), &ack(&[(1, 1)])).unwrap();
        assert_eq!(r.last_ack_at(), Some(ms(20)));
        r.on_ack(ms(30), &ack(&[(2, 2)])).unwrap();
        assert_eq!(r.last_ack_at(), Some(ms(30)));
        assert_eq!(r.oldest_unacked_sent_at(), None);
        // Declared lost counts as no longer in flight.
        r.on_sent(3, pkt(ms(40)));
        r.drain();
        assert_eq!(r.oldest_unacked_sent_at(), None);
    }

    #[test]
    fn packet_threshold_declares_loss() {
        let mut r = Recovery::new(Duration::from_millis(100), Duration::ZERO);
        for pn in 0..5 {
            r.on_sent(pn, pkt(ms(0)));
        }
        assert_eq!(r.bytes_in_flight(), 5000);
        let out = r.on_ack(ms(30), &ack(&[(1, 4)])).unwrap();
        assert_eq!(out.acked.len(), 4);
        assert_eq!(
            out.lost.iter().map(|(pn, _)| *pn).collect::<Vec<_>>(),
            vec![0]
        );
        assert_eq!(r.bytes_in_flight(), 0);
        assert_eq!(r.rtt().srtt(), Duration::from_millis(30));
    }

    #[test]
    fn time_threshold_arms_timer_then_declares_loss() {
        let mut r = Recovery::new(Duration::from_millis(100), Duration::ZERO);
        r.on_sent(0, pkt(ms(0)));
        r.on_sent(1, pkt(ms(1)));
        let out = r.on_ack(ms(31), &ack(&[(1, 1)])).unwrap();
        assert!(out.lost.is_empty());
        // rtt 30ms → loss delay 33.75ms after send of pn 0.
        let t = r.timeout(false).unwrap();
        assert_eq!(t, ms(0) + Duration::from_micros(33_750));
        let (lost, probe) = r.on_timeout(t);
        assert_eq!(lost.len(), 1);
        assert!(!probe);
    }

    #[test]
    fn pto_backs_off_and_resets_on_ack() {
        let mut r = Recovery::new(Duration::from_millis(100), Duration::from_millis(25));
        r.on_sent(0, pkt(ms(0)));
        let base = r.pto();
        assert_eq!(r.timeout(false), Some(ms(0) + base));
        let (_, probe) = r.on_timeout(ms(0) + base);
        assert!(probe);
        assert_eq!(r.pto(), base * 2);
        r.on_sent(1, pkt(ms(400)));
        r.on_ack(ms(450), &ack(&[(1, 1)])).unwrap();
        assert_eq!(r.pto_count(), 0);
    }

    #[test]
    fn long_unbroken_losses_are_persistent_congestion() {
        let mut r = Recovery::new(Duration::from_millis(100), Duration::ZERO);
        r.on_sent(0, pkt(ms(0)));
        r.on_ack(ms(10), &ack(&[(0, 0)])).unwrap(); // RTT sample 10 ms
        for pn in 1..=10 {
            r.on_sent(pn, pkt(ms(pn * 100)));
        }
        r.on_sent(11, pkt(ms(1100)));
        let out = r.on_ack(ms(1110), &ack(&[(11, 11), (0, 0)])).unwrap();
        assert_eq!(out.lost.len(), 10);
        assert!(r.take_persistent_congestion());
        assert!(!r.take_persistent_congestion(), "taken once");
        // Losses with an acknowledged packet between them are not.
        let mut r = Recovery::new(Duration::from_millis(100), Duration::ZERO);
        r.on_sent(0, pkt(ms(0)));
        r.on_ack(ms(10), &ack(&[(0, 0)])).unwrap();
        // RTT samples of 10 ms: period 3 · (10 + 4 · 3.75) ms = 75 ms. Losses
        // 1-5 and 7-10 each span less; together they span 90 ms, but 6
        // arrived in between.
        for pn in 1..=11 {
            r.on_sent(pn, pkt(ms(1000 + pn * 10)));
        }
        let out = r
            .on_ack(ms(1120), &ack(&[(11, 11), (6, 6), (0, 0)]))
            .unwrap();
        assert_eq!(out.lost.len(), 9);
        assert!(!r.take_persistent_congestion());
    }

    #[test]
    fn refuses_ack_of_unsent() {
        let mut r = Recovery::new(Duration::from_millis(100), Duration::ZERO);
        r.on_sent(0, pkt(ms(0)));
        assert_eq!(
            r.on_ack(ms(1), &ack(&[(0, 7)])).unwrap_err(),
            RecoveryError::AckOfUnsent(7)
        );
    }

    #[test]
    fn duplicate_acks_count_once() {
        let mut r = Recovery::new(Duration::from_millis(100), Duration::ZERO);
        r.on_sent(0, pkt(ms(0)));
        assert_eq!(r.on_ack(ms(5), &ack(&[(0, 0)])).unwrap().acked.len(), 1);
        assert_eq!(r.on_ack(ms(6), &ack(&[(0, 0)])).unwrap().acked.len(), 0);
    }
}
