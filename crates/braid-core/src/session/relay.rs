//! An overlay relay (seed 000 §III): a node in the middle of a path that
//! forwards a session's messages hop by hop, without reassembling streams.
//!
//! Each hop is its own IQ-RUDP connection with its own congestion control:
//! for every connection a previous hop opens to the relay (the *up*
//! connection), the relay opens one to the next hop (the *down*
//! connection) and forwards every message both ways, unchanged (the session
//! frames inside are opaque here), on the same transport stream and with
//! the same reliability class. Where the next hop is depends on the mode:
//!
//! * [`Relay::routed`] (the runtime's `braid relay`): the first message on
//!   an up connection must be a [`Frame::Route`]; the relay connects to the
//!   route's first address and passes the rest of the route on
//!   ([`Route::next`](super::route::Route::next)). Until then the relay holds the up connection and
//!   nothing else for it. A routed relay also reports, once per transport
//!   statistics interval, what it measures on each down connection
//!   ([`Frame::HopReport`], sent up towards the source), and ties the two
//!   connections' lives together: when one closes, or the down connection
//!   stops answering (data in flight and no acknowledgement for
//!   max(3 × SRTT, [`SILENCE_MIN`])), the other is closed with the reason,
//!   so the source learns of a failure beyond the first hop at once.
//!   Reports and these checks run at the relay's timers (the connections'
//!   statistics intervals, retransmission and drain timers), not per
//!   datagram.
//! * [`Relay::new`] (braid-sim's relay nodes): one fixed next hop for every
//!   up connection; no routes, reports or tied lives.
//!
//! Backpressure: a message the next connection cannot queue now waits as
//! the pair's one pending message, and the relay reads nothing more from
//! that side until it has gone; the previous hop's flow control then slows
//! the sender, so a slow hop shows up in the source's measurements of the
//! whole path. Memory per pair is bounded by its two connections' buffers
//! (each `Config::send_queue_bytes` queued plus the receive window) plus one
//! message per direction; at most [`MAX_RELAY_PAIRS`] pairs
//! (`Config::max_connections` bounds the connections too).
//!
//! Driving: as [`Endpoint`] — `handle_datagram`, `poll_transmit`,
//! `handle_timeout` at `poll_timeout`.

use super::frame::Frame;
use super::route::HopReport;
use super::CONTROL_STREAM;
use crate::id::StreamId;
use crate::time::{Duration, Instant};
use crate::transport::{
    Config, ConfigError, ConnectionHandle, Endpoint, ErrorCode, FourTuple, ReceivedMessage,
    Reliability, SendOptions, Transmit,
};
use crate::units::Bandwidth;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// Most forwarding pairs (previous-hop connections) a relay serves.
pub const MAX_RELAY_PAIRS: usize = 256;
/// Lower bound of the silence after which a routed relay gives up on a
/// next hop (with 3 × its SRTT), as a session's path liveness rule.
pub const SILENCE_MIN: Duration = Duration::from_millis(200);
/// How long a routed relay waits for its next hop's handshake.
pub const NEXT_HOP_TIMEOUT: Duration = Duration::from_secs(3);

/// Counters of a relay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayStats {
    /// Pairs set up.
    pub pairs: u64,
    /// Messages forwarded towards the next hop.
    pub forwarded_down: u64,
    /// Messages forwarded back towards the previous hop.
    pub forwarded_up: u64,
    /// Bytes forwarded towards the next hop.
    pub bytes_down: u64,
    /// Bytes forwarded back towards the previous hop.
    pub bytes_up: u64,
    /// Connections refused (pair bound reached, or no route).
    pub refused: u64,
    /// Messages dropped because the other side's connection was gone.
    pub dropped: u64,
    /// Hop reports sent towards sources.
    pub reports: u64,
    /// Pairs ended (either side closed).
    pub closed: u64,
}

/// One forwarding pair as the operator sees it (see [`Relay::pairs`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PairInfo {
    /// The previous hop.
    pub from: SocketAddr,
    /// The next hop, once known.
    pub to: Option<SocketAddr>,
    /// This relay's place on the path (routed mode).
    pub index: Option<u8>,
    /// Smoothed RTT of the next hop.
    pub srtt: Duration,
    /// Rate the next hop delivered in the last interval.
    pub delivered: Bandwidth,
    /// Loss ratio of the next hop in the last interval.
    pub loss: f64,
    /// Bytes held for the pair (both connections' queues and waiting messages).
    pub queued_bytes: u64,
    /// Bytes forwarded towards the next hop.
    pub bytes_down: u64,
    /// Bytes forwarded back.
    pub bytes_up: u64,
}

type Pending = (StreamId, Vec<u8>, SendOptions);

#[derive(Debug)]
struct Pair {
    up: ConnectionHandle,
    /// Known once routed (at once in fixed mode).
    down: Option<ConnectionHandle>,
    index: Option<u8>,
    /// A message waiting for the downstream connection.
    to_down: Option<Pending>,
    /// A message waiting for the upstream connection.
    to_up: Option<Pending>,
    delivered: Bandwidth,
    loss: f64,
    bytes_down: u64,
    bytes_up: u64,
    /// One side is gone; the pair goes once both are.
    ending: bool,
    /// When its next hop was dialled.
    routed_at: Option<Instant>,
}

impl Pair {
    fn new(up: ConnectionHandle, down: Option<ConnectionHandle>) -> Pair {
        Pair {
            up,
            down,
            index: None,
            to_down: None,
            to_up: None,
            delivered: Bandwidth::ZERO,
            loss: 0.0,
            bytes_down: 0,
            bytes_up: 0,
            ending: false,
            routed_at: None,
        }
    }
}

/// A relay (see the module docs).
#[derive(Debug)]
pub struct Relay {
    endpoint: Endpoint,
    /// `None`: routed mode.
    next_hop: Option<FourTuple>,
    send_queue_bytes: u64,
    pairs: BTreeMap<u64, Pair>,
    next_pair: u64,
    by_conn: BTreeMap<ConnectionHandle, u64>,
    stats: RelayStats,
    /// Reused list of pair ids for the walk over pairs.
    scratch: Vec<u64>,
    /// The addresses this relay is reached at: a route through one of
    /// them again is a loop.
    own: Vec<SocketAddr>,
}

impl Relay {
    /// A relay that forwards every connection from a previous hop over its
    /// own connection on `next_hop` (braid-sim's relays). `secret`: 32
    /// random bytes.
    ///
    /// # Errors
    /// An invalid transport configuration.
    pub fn new(config: Config, secret: [u8; 32], next_hop: FourTuple) -> Result<Self, ConfigError> {
        Self::build(config, secret, Some(next_hop))
    }

    /// A relay that learns each path's next hop from its ROUTE frame (see
    /// the module docs). `secret`: 32 random bytes.
    ///
    /// # Errors
    /// An invalid transport configuration.
    pub fn routed(config: Config, secret: [u8; 32]) -> Result<Self, ConfigError> {
        Self::build(config, secret, None)
    }

    /// The addresses this relay listens on (a wildcard address stands for
    /// loopback too): a ROUTE whose hops include one of them is a loop,
    /// and is refused.
    pub fn with_own_addrs(mut self, addrs: Vec<SocketAddr>) -> Self {
        self.own = addrs;
        self
    }

    /// Why `route` may not be taken from here, if it may not: a next hop
    /// that is no single host (unspecified, broadcast, multicast, port 0),
    /// or a route that comes back to this relay or visits a hop twice.
    fn refuse_route(&self, route: &super::route::Route) -> Option<String> {
        let next = route.hops[0];
        let ip = next.ip();
        let broadcast = matches!(ip, std::net::IpAddr::V4(v4) if v4.is_broadcast());
        if ip.is_unspecified() || ip.is_multicast() || broadcast || next.port() == 0 {
            return Some(format!("relay refuses next hop {next}: not a single host"));
        }
        let mine = |h: &SocketAddr| {
            self.own.iter().any(|o| {
                o == h
                    || (o.port() == h.port()
                        && o.ip().is_unspecified()
                        && (h.ip().is_loopback() || h.ip().is_unspecified()))
            })
        };
        if let Some(h) = route.hops.iter().find(|h| mine(h)) {
            return Some(format!("relay refuses a route that loops back to it ({h})"));
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(h) = route.hops.iter().find(|h| !seen.insert(**h)) {
            return Some(format!("relay refuses a route that visits {h} twice"));
        }
        None
    }

    fn build(
        config: Config,
        secret: [u8; 32],
        next_hop: Option<FourTuple>,
    ) -> Result<Self, ConfigError> {
        let send_queue_bytes = config.send_queue_bytes;
        Ok(Relay {
            endpoint: Endpoint::new(config, secret, true)?,
            next_hop,
            send_queue_bytes,
            pairs: BTreeMap::new(),
            next_pair: 0,
            by_conn: BTreeMap::new(),
            stats: RelayStats::default(),
            scratch: Vec::new(),
            own: Vec::new(),
        })
    }

    /// Counters.
    pub fn stats(&self) -> RelayStats {
        self.stats
    }

    /// The transport endpoint's counters (handshakes refused, datagrams
    /// dropped …).
    pub fn endpoint_stats(&self) -> crate::transport::EndpointStats {
        self.endpoint.stats()
    }

    /// Every pair now.
    pub fn pairs(&self) -> Vec<PairInfo> {
        self.pairs
            .values()
            .filter_map(|p| {
                let up = self.endpoint.connection(p.up)?;
                let down = p.down.and_then(|h| self.endpoint.connection(h));
                let waiting = |m: &Option<Pending>| m.as_ref().map_or(0, |m| m.1.len() as u64);
                Some(PairInfo {
                    from: up.remote(),
                    to: down.map(|c| c.remote()),
                    index: p.index,
                    srtt: down.map_or(Duration::ZERO, |c| c.stats().srtt),
                    delivered: p.delivered,
                    loss: p.loss,
                    queued_bytes: up.queued_bytes()
                        + down.map_or(0, |c| c.queued_bytes())
                        + waiting(&p.to_down)
                        + waiting(&p.to_up),
                    bytes_down: p.bytes_down,
                    bytes_up: p.bytes_up,
                })
            })
            .collect()
    }

    /// A datagram arrived over `path`.
    pub fn handle_datagram(&mut self, now: Instant, path: FourTuple, data: &[u8]) {
        self.endpoint.handle_datagram(now, path, data);
        self.forward(now, false);
    }

    /// The instant of [`Relay::poll_timeout`] has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        self.forward(now, true);
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        buf.clear();
        self.poll_transmit_append(now, buf)
    }

    /// As [`Relay::poll_transmit`], but appends the datagram after what
    /// `buf` holds (see [`Endpoint::poll_transmit_append`]).
    pub fn poll_transmit_append(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.forward(now, false);
        self.endpoint.poll_transmit_append(now, buf)
    }

    /// When to call [`Relay::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.endpoint.poll_timeout()
    }

    /// Accepts, routes and pumps every pair; with `watch` (at timers only,
    /// not per datagram) also reports on and ends pairs.
    fn forward(&mut self, now: Instant, watch: bool) {
        while let Some(up) = self.endpoint.accept() {
            if self.pairs.len() >= MAX_RELAY_PAIRS {
                self.stats.refused += 1;
                if let Some(c) = self.endpoint.connection_mut(up) {
                    c.close(now, ErrorCode::SERVER_BUSY, b"relay full");
                }
                continue;
            }
            let down = match self.next_hop {
                Some(next) => match self.endpoint.connect_on(now, next) {
                    Ok(h) => Some(h),
                    Err(_) => {
                        self.stats.refused += 1;
                        continue;
                    }
                },
                None => None,
            };
            let id = self.next_pair;
            self.next_pair += 1;
            self.pairs.insert(id, Pair::new(up, down));
            self.by_conn.insert(up, id);
            if let Some(d) = down {
                self.by_conn.insert(d, id);
            }
            self.stats.pairs += 1;
        }
        // A reused buffer: this runs for every datagram.
        let mut ids = std::mem::take(&mut self.scratch);
        ids.clear();
        ids.extend(self.pairs.keys().copied());
        for &id in &ids {
            if self.next_hop.is_none() {
                self.route_pair(now, id);
                if watch {
                    self.watch_pair(now, id);
                }
            }
            self.pump_pair(now, id, true);
            self.pump_pair(now, id, false);
        }
        self.scratch = ids;
    }

    /// Routed mode: takes a new pair's ROUTE and opens its next hop.
    fn route_pair(&mut self, now: Instant, id: u64) {
        let Some(p) = self.pairs.get(&id) else {
            return;
        };
        if p.down.is_some() || p.ending {
            return;
        }
        let up = p.up;
        let Some(m) = self.endpoint.connection_mut(up).and_then(|c| c.recv(now)) else {
            return;
        };
        let route = match Frame::decode(&m.data) {
            Ok(Frame::Route(r)) if m.stream == CONTROL_STREAM => r,
            _ => {
                self.stats.refused += 1;
                self.end_pair(
                    now,
                    id,
                    "this is a braid relay: a path through it starts with a ROUTE frame",
                );
                return;
            }
        };
        if let Some(why) = self.refuse_route(&route) {
            tracing::debug!(%why, "relay: route refused");
            self.stats.refused += 1;
            self.end_pair(now, id, &why);
            return;
        }
        let next = FourTuple {
            local: None,
            remote: route.hops[0],
        };
        let down = match self.endpoint.connect_on(now, next) {
            Ok(h) => h,
            Err(_) => {
                self.stats.refused += 1;
                self.end_pair(now, id, "relay full");
                return;
            }
        };
        if let Some(r) = route.next() {
            if let Some(c) = self.endpoint.connection_mut(down) {
                // A fresh connection takes a small message.
                let _ = c.send(
                    now,
                    CONTROL_STREAM,
                    Frame::Route(r).to_vec(),
                    SendOptions::RELIABLE,
                );
            }
        }
        tracing::debug!(index = route.index, next = %route.hops[0], "relay: path routed");
        self.by_conn.insert(down, id);
        if let Some(p) = self.pairs.get_mut(&id) {
            p.down = Some(down);
            p.index = Some(route.index);
            p.routed_at = Some(now);
        }
    }

    /// Routed mode: reports on the next hop, and ends the pair when a side
    /// is gone or the next hop has gone silent.
    fn watch_pair(&mut self, now: Instant, id: u64) {
        let Some(p) = self.pairs.get(&id) else {
            return;
        };
        let (up, down, index, routed_at) = (p.up, p.down, p.index, p.routed_at);
        let up_open = self.endpoint.connection(up).is_some_and(|c| !c.is_closed());
        let Some(down) = down else {
            if !up_open {
                self.remove_pair(id);
            }
            return;
        };
        let mut report = None;
        let mut why: Option<String> = None;
        match self.endpoint.connection_mut(down) {
            Some(c) if !c.is_closed() && !c.is_established() => {
                if routed_at.is_some_and(|t| now.saturating_duration_since(t) > NEXT_HOP_TIMEOUT) {
                    why = Some(format!(
                        "next hop {} did not answer within {NEXT_HOP_TIMEOUT}",
                        c.remote()
                    ));
                }
            }
            Some(c) if !c.is_closed() => {
                let mut last = None;
                while let Some(s) = c.poll_rate_sample() {
                    last = Some(s);
                }
                let st = c.stats();
                if let Some(s) = last {
                    report = Some(HopReport {
                        index: index.unwrap_or(1),
                        srtt: st.srtt,
                        loss: s.loss_ratio(),
                        delivered: s.rate,
                        queued_bytes: c.queued_bytes(),
                    });
                }
                let since = c
                    .oldest_unacked_sent_at()
                    .map(|o| c.last_ack_at().map_or(o, |a| a.max(o)));
                let limit = st.srtt.saturating_mul(3).max(SILENCE_MIN);
                if since.is_some_and(|s| now.saturating_duration_since(s) > limit) {
                    why = Some(format!("next hop {} stopped answering", c.remote()));
                }
            }
            Some(c) => why = Some(format!("next hop {} closed", c.remote())),
            None => why = Some("next hop gone".to_string()),
        }
        if let Some(r) = report {
            if let Some(p) = self.pairs.get_mut(&id) {
                p.delivered = r.delivered;
                p.loss = r.loss;
            }
            if let Some(c) = self.endpoint.connection_mut(up) {
                // Best effort: a report lost or refused is replaced next interval.
                if c.send(
                    now,
                    CONTROL_STREAM,
                    Frame::HopReport(r).to_vec(),
                    SendOptions::UNRELIABLE,
                )
                .is_ok()
                {
                    self.stats.reports += 1;
                }
            }
        }
        if !up_open {
            why = Some("previous hop closed".to_string());
        }
        if let Some(why) = why {
            self.end_pair(now, id, &why);
        }
    }

    /// Closes both sides of pair `id` with `why`, and forgets it once
    /// both are closed.
    fn end_pair(&mut self, now: Instant, id: u64, why: &str) {
        let Some(p) = self.pairs.get_mut(&id) else {
            return;
        };
        if !p.ending {
            p.ending = true;
            self.stats.closed += 1;
            tracing::debug!(reason = why, "relay: pair ended");
        }
        let (up, down) = (p.up, p.down);
        for h in [Some(up), down].into_iter().flatten() {
            if let Some(c) = self.endpoint.connection_mut(h) {
                c.close(now, ErrorCode::NO_ERROR, why.as_bytes());
            }
        }
        let closed = |e: &Endpoint, h: Option<ConnectionHandle>| {
            h.is_none_or(|h| e.connection(h).is_none_or(|c| c.is_closed()))
        };
        if closed(&self.endpoint, Some(up)) && closed(&self.endpoint, down) {
            self.remove_pair(id);
        }
    }

    fn remove_pair(&mut self, id: u64) {
        let Some(p) = self.pairs.remove(&id) else {
            return;
        };
        for h in [Some(p.up), p.down].into_iter().flatten() {
            self.by_conn.remove(&h);
            // Removing a closing connection forgets it; its CLOSE was
            // sent (or the peer is gone).
            if self.endpoint.connection(h).is_none_or(|c| c.is_closed()) {
                self.endpoint.remove(h);
            }
        }
    }

    /// Moves messages from one side of pair `id` to the other (`down`:
    /// upstream → downstream).
    fn pump_pair(&mut self, now: Instant, id: u64, down: bool) {
        let Some(p) = self.pairs.get_mut(&id) else {
            return;
        };
        let Some(d) = p.down else {
            return;
        };
        let (from, to) = if down { (p.up, d) } else { (d, p.up) };
        let slot = if down { &mut p.to_down } else { &mut p.to_up };
        loop {
            let next = match slot.take() {
                Some(m) => Some(m),
                None => self
                    .endpoint
                    .connection_mut(from)
                    .and_then(|c| c.recv(now))
                    .map(options_of),
            };
            let Some((stream, data, opts)) = next else {
                return;
            };
            let Some(c) = self.endpoint.connection_mut(to) else {
                self.stats.dropped += 1;
                continue;
            };
            if c.is_closed() {
                self.stats.dropped += 1;
                continue;
            }
            if c.queued_bytes() + data.len() as u64 > self.send_queue_bytes {
                *slot = Some((stream, data, opts));
                return;
            }
            let len = data.len() as u64;
            if c.send(now, stream, data, opts).is_err() {
                self.stats.dropped += 1;
                continue;
            }
            if down {
                self.stats.forwarded_down += 1;
                self.stats.bytes_down += len;
                p.bytes_down += len;
            } else {
                self.stats.forwarded_up += 1;
                self.stats.bytes_up += len;
                p.bytes_up += len;
            }
        }
    }
}

fn options_of(m: ReceivedMessage) -> Pending {
    let opts = match m.reliability {
        Reliability::Reliable => SendOptions::RELIABLE,
        Reliability::Discardable => SendOptions::DISCARDABLE,
        _ => SendOptions::UNRELIABLE,
    };
    (m.stream, m.data, opts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::route::Route;

    #[test]
    fn a_route_passes_on_one_hop_shorter() {
        let a: SocketAddr = "10.0.0.1:7000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:9000".parse().unwrap();
        let r = Route {
            index: 1,
            hops: vec![a, b],
        };
        assert_eq!(
            r.next(),
            Some(Route {
                index: 2,
                hops: vec![b]
            })
        );
        assert_eq!(r.next().unwrap().next(), None);
    }

    /// Issue 29 §2: next hops that are no single host, and routes that
    /// come back to this relay or visit a hop twice, are refused with a
    /// reason; an ordinary route is taken.
    #[test]
    fn next_hops_that_are_no_host_and_loops_are_refused() {
        let me: SocketAddr = "0.0.0.0:7000".parse().unwrap();
        let relay = Relay::routed(Config::default(), [3; 32])
            .unwrap()
            .with_own_addrs(vec![me]);
        let route = |hops: &[&str]| Route {
            index: 1,
            hops: hops.iter().map(|h| h.parse().unwrap()).collect(),
        };
        for (hops, why) in [
            (&["0.0.0.0:9000"][..], "not a single host"),
            (&["255.255.255.255:9000"], "not a single host"),
            (&["224.0.0.1:9000"], "not a single host"),
            (&["[ff02::1]:9000"], "not a single host"),
            (&["10.0.0.2:0"], "not a single host"),
            (&["127.0.0.1:7000", "10.0.0.9:9000"], "loops back"),
            (
                &["10.0.0.2:7001", "127.0.0.1:7000", "10.0.0.9:9000"],
                "loops back",
            ),
            (
                &[
                    "10.0.0.2:7001",
                    "10.0.0.3:7001",
                    "10.0.0.2:7001",
                    "10.0.0.9:9000",
                ],
                "twice",
            ),
        ] {
            let r = relay.refuse_route(&route(hops));
            assert!(
                r.as_deref().is_some_and(|r| r.contains(why)),
                "{hops:?}: {r:?}"
            );
        }
        assert_eq!(
            relay.refuse_route(&route(&["10.0.0.2:7001", "10.0.0.9:9000"])),
            None
        );
    }
}
