//! Built-in traffic sources: greedy (window-limited with acks), paced
//! constant-bit-rate, and paced trace replay (cross traffic).
//!
//! Main types: [`GreedySource`] with [`GreedyConfig`], [`PacedSource`].
//!
//! # Greedy source
//! Always has data. It keeps the bottleneck busy without overflowing its
//! queue by sizing its window from what the path delivers, in the style of
//! BBR, using acks from the [`crate::Sink`]:
//! - *startup*: the window grows by each acked packet (doubling per round
//!   trip) until the round-trip time exceeds `min_rtt + queue_target`, or a
//!   loss is seen;
//! - *steady*: `window = max(4 packets, rate × (min_rtt + queue_target))`,
//!   where `rate` is the latest delivery-rate sample (bytes acked between a
//!   packet's send and its ack over that span). At the fixed point the link
//!   runs at capacity with a standing queue of about `capacity ×
//!   queue_target`; when capacity rises the window grows by a factor
//!   `(min_rtt + queue_target) / min_rtt` per round trip.
//! - a packet is declared lost when an ack for a packet [`REORDER_THRESHOLD`]
//!   or more sequence numbers later arrives; losses halve `queue_target`
//!   (at most once per round trip, not below 1 ms; it returns to the
//!   configured value after a loss-free second). No ack for
//!   `max(200 ms, 4 × min_rtt)` declares everything in flight lost and
//!   restarts from the initial window.
//! - With `window` set, the window is fixed instead.
//!
//! There are no retransmissions: the sink's sequence gaps are the loss.
//! In-flight records are bounded by [`MAX_WINDOW_BYTES`].
//!
//! # Paced source
//! Sends `packet`-byte datagrams spaced by their serialization time at a
//! rate that is constant (CBR) or follows a looping rate schedule from a
//! trace (time zero of the schedule is the flow's start). A zero rate pauses
//! sending until the rate returns (see [`crate::capacity`]).

use crate::capacity::Capacity;
use crate::node::{Datagram, Node, RouteId, Transmit};
use crate::wire::Header;
use braid_core::{Bandwidth, Duration, Instant};
use std::collections::BTreeMap;

/// Largest window of the greedy source.
pub const MAX_WINDOW_BYTES: u64 = 64 * 1024 * 1024;
/// Later acks needed to declare a packet lost.
pub const REORDER_THRESHOLD: u64 = 3;
const INITIAL_WINDOW_PACKETS: u64 = 10;
const MIN_WINDOW_PACKETS: u64 = 4;
const MIN_RTO: Duration = Duration::from_millis(200);

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
}

/// A sender that always has data (see the module docs).
#[derive(Debug)]
pub struct GreedySource {
    route: RouteId,
    cfg: GreedyConfig,
    next_seq: u64,
    inflight: BTreeMap<u64, Sent>,
    inflight_bytes: u64,
    delivered: u64,
    delivered_time: Instant,
    min_rtt: Option<Duration>,
    window: u64,
    startup: bool,
    target: Duration,
    last_progress: Instant,
    last_loss: Option<Instant>,
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
            window: window.min(MAX_WINDOW_BYTES),
            startup: true,
            last_progress: cfg.start,
            last_loss: None,
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
        self.min_rtt.map_or(MIN_RTO, |r| (r * 4).max(MIN_RTO))
    }

    fn min_window(&self) -> u64 {
        MIN_WINDOW_PACKETS * self.cfg.packet as u64
    }

    fn on_ack(&mut self, now: Instant, seq: u64) {
        let Some(s) = self.inflight.remove(&seq) else {
            return; // already declared lost, or a duplicate
        };
        self.acked += 1;
        self.inflight_bytes -= s.size as u64;
        self.delivered += s.size as u64;
        self.delivered_time = now;
        self.last_progress = now;
        let rtt = now - s.sent_at;
        let min_rtt = self.min_rtt.map_or(rtt, |m| m.min(rtt));
        self.min_rtt = Some(min_rtt);

        // Loss detection by later acks.
        let mut lost_now = 0;
        while let Some((&first, _)) = self.inflight.first_key_value() {
            if first + REORDER_THRESHOLD > seq {
                break;
            }
            if let Some(l) = self.inflight.remove(&first) {
                self.inflight_bytes -= l.size as u64;
                lost_now += 1;
            }
        }
        self.lost += lost_now;
        if lost_now > 0 {
            self.startup = false;
            if self.last_loss.is_none_or(|t| now - t > min_rtt) {
                self.target = (self.target / 2).max(Duration::from_millis(1));
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
        if self.startup {
            if rtt > min_rtt + self.target {
                self.startup = false;
            } else {
                self.window = (self.window + s.size as u64).min(MAX_WINDOW_BYTES);
                return;
            }
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
        if !self.inflight.is_empty() && now >= self.last_progress + self.rto() {
            self.timeouts += 1;
            self.lost += self.inflight.len() as u64;
            self.inflight.clear();
            self.inflight_bytes = 0;
            if self.cfg.window.is_none() {
                self.window = INITIAL_WINDOW_PACKETS * self.cfg.packet as u64;
                self.startup = true;
            }
            self.last_progress = now;
        }
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if now < self.cfg.start || now >= self.cfg.stop {
            return None;
        }
        let size = self.cfg.packet as u64;
        if self.inflight_bytes + size > self.window.max(size) {
            return None;
        }
        if self.inflight.is_empty() {
            // Nothing in flight: rate samples start from here, not from an
            // idle period (as BBR does).
            self.last_progress = now;
            self.delivered_time = now;
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
            },
        );
        self.inflight_bytes += size;
        Some(Transmit {
            route: self.route,
            datagram: Datagram::sized(self.cfg.packet, Header::Data(seq).encode()),
        })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if self.inflight.is_empty() {
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

/// A source that sends at a constant or trace-driven rate.
#[derive(Debug)]
pub struct PacedSource {
    route: RouteId,
    packet: u32,
    rate: Capacity,
    origin: Instant,
    stop: Instant,
    next_send: Instant,
    sent: u64,
}

impl PacedSource {
    /// Sends `packet`-byte datagrams on `route` at `rate` (whose time zero
    /// is `start`) from `start` until `stop`.
    pub fn new(route: RouteId, packet: u32, rate: Capacity, start: Instant, stop: Instant) -> Self {
        PacedSource {
            route,
            packet,
            rate,
            origin: start,
            stop,
            next_send: start,
            sent: 0,
        }
    }
}

impl Node for PacedSource {
    fn handle_datagram(&mut self, _now: Instant, _route: RouteId, _datagram: Datagram) {}

    fn handle_timeout(&mut self, _now: Instant) {}

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if now < self.next_send || self.next_send >= self.stop {
            return None;
        }
        let local = Instant::ZERO + (self.next_send - self.origin);
        self.next_send = match self.rate.finish_time(local, self.packet as u64) {
            Some(t) => self.origin + t.since_origin(),
            None => Instant::MAX,
        };
        let seq = self.sent;
        self.sent += 1;
        Some(Transmit {
            route: self.route,
            datagram: Datagram::sized(self.packet, Header::Data(seq).encode()),
        })
    }

    fn poll_timeout(&self) -> Option<Instant> {
        (self.next_send < self.stop).then_some(self.next_send)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("sent", self.sent)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbr_spacing() {
        let mut s = PacedSource::new(
            RouteId(0),
            1250,
            Capacity::Constant(Bandwidth::from_mbps(1)),
            Instant::from_nanos(5),
            Instant::from_nanos(5) + Duration::from_millis(35),
        );
        let mut times = Vec::new();
        while let Some(t) = s.poll_timeout() {
            if s.poll_transmit(t).is_some() {
                times.push(t.as_nanos());
            }
        }
        // 1250 bytes at 1 Mbit/s = 10 ms apart; 4 fit before the stop.
        assert_eq!(times, [5, 10_000_005, 20_000_005, 30_000_005]);
    }
}
