//! The greedy source (see [`super`] for the control rules).

use crate::node::{Datagram, Node, RouteId, Transmit};
use crate::wire::Header;
use braid_core::{Bandwidth, Duration, Instant};
use std::collections::BTreeMap;

/// Largest window of the greedy source.
pub const MAX_WINDOW_BYTES: u64 = 64 * 1024 * 1024;
/// Most packets whose fate the greedy source remembers.
pub const MAX_TRACKED_PACKETS: usize = 1 << 20;
/// Later acks needed to declare a packet lost.
pub const REORDER_THRESHOLD: u64 = 3;
const INITIAL_WINDOW_PACKETS: u64 = 10;
const MIN_WINDOW_PACKETS: u64 = 4;
const MIN_RTO: Duration = Duration::from_millis(200);
const MAX_BACKOFF: u64 = 8;
/// Losses halve the queue target down to this (or the configured target if smaller).
const MIN_QUEUE_TARGET: Duration = Duration::from_millis(5);

/// Settings of a [`GreedySource`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GreedyConfig {
    /// Wire size of each data packet.
    pub packet: u32,
    /// When to start sending.
    pub start: Instant,
    /// When to stop sending.
    pub stop: Instant,
    /// Standing queue the source aims for, as delay.
    pub queue_target: Duration,
    /// A fixed window in packets instead of the adaptive one.
    pub window: Option<u32>,
}

#[derive(Clone, Copy, Debug)]
struct Sent {
    sent_at: Instant,
    size: u32,
    delivered: u64,
    delivered_time: Instant,
    presumed_lost: bool,
}

/// A sender that always has data (see the [module docs](super)).
#[derive(Debug)]
pub struct GreedySource {
    route: RouteId,
    cfg: GreedyConfig,
    next_seq: u64,
    inflight: BTreeMap<u64, Sent>,
    /// Bytes in flight, not counting presumed-lost packets.
    inflight_bytes: u64,
    delivered: u64,
    delivered_time: Instant,
    min_rtt: Option<Duration>,
    srtt: Duration,
    rttvar: Duration,
    window: u64,
    target: Duration,
    last_progress: Instant,
    last_loss: Option<Instant>,
    backoff: u64,
    probing: bool,
    sent: u64,
    acked: u64,
    lost: u64,
    timeouts: u64,
}

impl GreedySource {
    /// A greedy source sending on `route`.
    pub fn new(route: RouteId, cfg: GreedyConfig) -> Self {
        let window = match cfg.window {
            Some(w) => w as u64 * cfg.packet as u64,
            None => INITIAL_WINDOW_PACKETS * cfg.packet as u64,
        };
        GreedySource {
            route,
            target: cfg.queue_target,
            next_seq: 0,
            inflight: BTreeMap::new(),
            inflight_bytes: 0,
            delivered: 0,
            delivered_time: cfg.start,
            min_rtt: None,
            srtt: Duration::ZERO,
            rttvar: Duration::ZERO,
            window: window.min(MAX_WINDOW_BYTES),
            last_progress: cfg.start,
            last_loss: None,
            backoff: 1,
            probing: false,
            sent: 0,
            acked: 0,
            lost: 0,
            timeouts: 0,
            cfg,
        }
    }

    /// The current window in bytes.
    pub fn window(&self) -> u64 {
        self.window
    }

    fn rto(&self) -> Duration {
        let base = if self.min_rtt.is_none() {
            MIN_RTO
        } else {
            (self.srtt + self.rttvar * 4).max(MIN_RTO)
        };
        base * self.backoff
    }

    fn min_window(&self) -> u64 {
        MIN_WINDOW_PACKETS * self.cfg.packet as u64
    }

    fn forget(&mut self, s: &Sent) {
        if !s.presumed_lost {
            self.inflight_bytes -= s.size as u64;
        }
    }

    fn update_rtt(&mut self, rtt: Duration) {
        if self.min_rtt.is_none() {
            self.srtt = rtt;
            self.rttvar = rtt / 2;
        } else {
            let diff = if rtt > self.srtt {
                rtt - self.srtt
            } else {
                self.srtt - rtt
            };
            self.rttvar = (self.rttvar * 3 + diff) / 4;
            self.srtt = (self.srtt * 7 + rtt) / 8;
        }
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |m| m.min(rtt)));
    }

    fn on_ack(&mut self, now: Instant, seq: u64) {
        let Some(s) = self.inflight.remove(&seq) else {
            return; // declared lost by later acks, or a duplicate
        };
        self.forget(&s);
        self.acked += 1;
        self.delivered += s.size as u64;
        self.delivered_time = now;
        self.last_progress = now;
        self.backoff = 1;
        self.probing = false;
        let rtt = now - s.sent_at;
        self.update_rtt(rtt);
        let min_rtt = self.min_rtt.unwrap_or(rtt);

        // Loss detection by later acks.
        let mut lost_now = 0;
        while let Some((&first, _)) = self.inflight.first_key_value() {
            if first + REORDER_THRESHOLD > seq {
                break;
            }
            if let Some(l) = self.inflight.remove(&first) {
                self.forget(&l);
                if !l.presumed_lost {
                    lost_now += 1;
                }
            }
        }
        self.lost += lost_now;
        if lost_now > 0 {
            if self.last_loss.is_none_or(|t| now - t > min_rtt) {
                self.target = (self.target / 2).max(MIN_QUEUE_TARGET.min(self.cfg.queue_target));
                self.last_loss = Some(now);
            }
        } else if self
            .last_loss
            .is_some_and(|t| now - t > Duration::from_secs(1))
        {
            self.target = self.cfg.queue_target;
            self.last_loss = None;
        }

        if self.cfg.window.is_some() {
            return;
        }
        let queueing = rtt - min_rtt;
        if queueing < self.target {
            // Below the target: grow, fastest (doubling per round trip) when
            // the queue is empty, not at all at the target.
            let room = (self.target - queueing).as_nanos() as u128;
            let grow = (s.size as u128 * room / self.target.as_nanos().max(1) as u128) as u64;
            self.window = (self.window + grow).min(MAX_WINDOW_BYTES);
            return;
        }
        let interval = now - s.delivered_time;
        if interval.is_zero() {
            return;
        }
        let rate = Bandwidth::from_delivery(self.delivered - s.delivered, interval);
        let w = rate.bytes_in(min_rtt + self.target);
        self.window = w.clamp(self.min_window(), MAX_WINDOW_BYTES);
    }
}

impl Node for GreedySource {
    fn handle_datagram(&mut self, now: Instant, _route: RouteId, datagram: Datagram) {
        if let Some(Header::Ack(seq)) = Header::decode(datagram.data()) {
            self.on_ack(now, seq);
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if self.inflight_bytes > 0 && now >= self.last_progress + self.rto() {
            self.timeouts += 1;
            for s in self.inflight.values_mut() {
                s.presumed_lost = true;
            }
            self.inflight_bytes = 0;
            self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
            self.probing = true;
            self.last_progress = now;
        }
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if now < self.cfg.start || now >= self.cfg.stop {
            return None;
        }
        let size = self.cfg.packet as u64;
        let window = if self.probing {
            size
        } else {
            self.window.max(size)
        };
        if self.inflight_bytes + size > window {
            return None;
        }
        if self.inflight_bytes == 0 {
            // Nothing (live) in flight: the timeout counts from here, and
            // rate samples start here rather than across an idle period.
            self.last_progress = now;
            if self.inflight.is_empty() {
                self.delivered_time = now;
            }
        }
        if self.inflight.len() >= MAX_TRACKED_PACKETS {
            if let Some((_, old)) = self.inflight.pop_first() {
                self.forget(&old);
            }
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.sent += 1;
        self.inflight.insert(
            seq,
            Sent {
                sent_at: now,
                size: self.cfg.packet,
                delivered: self.delivered,
                delivered_time: self.delivered_time,
                presumed_lost: false,
            },
        );
        self.inflight_bytes += size;
        Some(Transmit {
            route: self.route,
            datagram: Datagram::sized(self.cfg.packet, Header::Data(seq).encode()),
        })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if self.inflight_bytes == 0 {
            // Nothing to time out; wake at the start if not there yet.
            return (self.next_seq == 0).then_some(self.cfg.start);
        }
        Some(self.last_progress + self.rto())
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("sent", self.sent),
            ("acked", self.acked),
            ("declared_lost", self.lost),
            ("timeouts", self.timeouts),
            ("window_bytes", self.window),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(seq: u64) -> Datagram {
        Datagram::sized(40, Header::Ack(seq).encode())
    }

    #[test]
    fn window_limits_then_acks_release() {
        let cfg = GreedyConfig {
            packet: 1000,
            start: Instant::ZERO,
            stop: Instant::MAX,
            queue_target: Duration::from_millis(20),
            window: Some(3),
        };
        let mut g = GreedySource::new(RouteId(0), cfg);
        let t = Instant::ZERO;
        assert_eq!(std::iter::from_fn(|| g.poll_transmit(t)).count(), 3);
        let t1 = t + Duration::from_millis(50);
        g.handle_datagram(t1, RouteId(1), ack(0));
        assert_eq!(std::iter::from_fn(|| g.poll_transmit(t1)).count(), 1);
        // Acks for 2 and 3 declare 0..=0 and then packet 1 lost? No: 1 is
        // lost only once an ack 3 or more later arrives.
        g.handle_datagram(t1, RouteId(1), ack(3));
        assert_eq!(g.lost, 0);
        g.handle_timeout(t1 + Duration::from_secs(10));
        assert_eq!(g.timeouts, 1);
        // After a timeout only one probe goes out.
        let t2 = t1 + Duration::from_secs(10);
        assert_eq!(std::iter::from_fn(|| g.poll_transmit(t2)).count(), 1);
        // A late ack of a presumed-lost packet still counts as delivered.
        g.handle_datagram(t2, RouteId(1), ack(1));
        assert_eq!(g.acked, 3);
        assert!(!g.probing);
    }
}
