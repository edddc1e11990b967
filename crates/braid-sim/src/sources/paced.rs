//! The paced source: constant bit rate or trace replay (see [`super`]).

use crate::node::{Datagram, Node, RouteId, Transmit};
use crate::wire::Header;
use braid_core::link::Capacity;
use braid_core::Instant;

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
    use braid_core::{Bandwidth, Duration};

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
