//! An overlay relay (seed 000 §III): a node in the middle of a path that
//! forwards a session's messages hop by hop, without reassembling streams.
//!
//! Each hop is its own IQ-RUDP connection with its own congestion control:
//! for every connection a previous hop opens to the relay, the relay opens
//! one to its next hop ([`Relay::new`]'s `next_hop`) and forwards every
//! message both ways, unchanged (the session frames inside are opaque here),
//! on the same transport stream and with the same reliability class.
//!
//! Backpressure: a message the next connection cannot queue now waits as
//! the pair's one pending message, and the relay reads nothing more from
//! that side until it has gone; the previous hop's flow control then slows
//! the sender, so a slow hop shows up in the source's measurements of the
//! whole path. Memory is bounded by the connections' own buffers plus one
//! message per direction per pair, and at most [`MAX_RELAY_PAIRS`] pairs.
//!
//! Driving: as [`Endpoint`] — `handle_datagram`, `poll_transmit`,
//! `handle_timeout` at `poll_timeout`.

use crate::time::Instant;
use crate::transport::{
    Config, ConfigError, ConnectionHandle, Endpoint, FourTuple, ReceivedMessage, Reliability,
    SendOptions, Transmit,
};
use std::collections::BTreeMap;

/// Most forwarding pairs (previous-hop connections) a relay serves.
pub const MAX_RELAY_PAIRS: usize = 256;

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
    /// Connections refused (pair bound reached).
    pub refused: u64,
    /// Messages dropped because the other side's connection was gone.
    pub dropped: u64,
}

#[derive(Debug)]
struct Pair {
    up: ConnectionHandle,
    down: ConnectionHandle,
    /// A message waiting for the downstream connection.
    to_down: Option<(crate::id::StreamId, Vec<u8>, SendOptions)>,
    /// A message waiting for the upstream connection.
    to_up: Option<(crate::id::StreamId, Vec<u8>, SendOptions)>,
}

/// A relay (see the module docs).
#[derive(Debug)]
pub struct Relay {
    endpoint: Endpoint,
    next_hop: FourTuple,
    send_queue_bytes: u64,
    pairs: Vec<Pair>,
    by_conn: BTreeMap<ConnectionHandle, usize>,
    stats: RelayStats,
}

impl Relay {
    /// A relay that accepts connections from previous hops and forwards
    /// each over its own connection on `next_hop`. `secret`: 32 random bytes.
    ///
    /// # Errors
    /// An invalid transport configuration.
    pub fn new(config: Config, secret: [u8; 32], next_hop: FourTuple) -> Result<Self, ConfigError> {
        let send_queue_bytes = config.send_queue_bytes;
        Ok(Relay {
            endpoint: Endpoint::new(config, secret, true)?,
            next_hop,
            send_queue_bytes,
            pairs: Vec::new(),
            by_conn: BTreeMap::new(),
            stats: RelayStats::default(),
        })
    }

    /// Counters.
    pub fn stats(&self) -> RelayStats {
        self.stats
    }

    /// A datagram arrived over `path`.
    pub fn handle_datagram(&mut self, now: Instant, path: FourTuple, data: &[u8]) {
        self.endpoint.handle_datagram(now, path, data);
        self.forward(now);
    }

    /// The instant of [`Relay::poll_timeout`] has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        self.forward(now);
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.forward(now);
        self.endpoint.poll_transmit(now, buf)
    }

    /// When to call [`Relay::handle_timeout`].
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.endpoint.poll_timeout()
    }

    fn forward(&mut self, now: Instant) {
        while let Some(up) = self.endpoint.accept() {
            if self.pairs.len() >= MAX_RELAY_PAIRS {
                self.stats.refused += 1;
                if let Some(c) = self.endpoint.connection_mut(up) {
                    c.close(now, crate::transport::ErrorCode(0), b"relay full");
                }
                continue;
            }
            let Ok(down) = self.endpoint.connect_on(now, self.next_hop) else {
                self.stats.refused += 1;
                continue;
            };
            let i = self.pairs.len();
            self.pairs.push(Pair {
                up,
                down,
                to_down: None,
                to_up: None,
            });
            self.by_conn.insert(up, i);
            self.by_conn.insert(down, i);
            self.stats.pairs += 1;
        }
        for i in 0..self.pairs.len() {
            self.pump_pair(now, i, true);
            self.pump_pair(now, i, false);
        }
    }

    /// Moves messages from one side of pair `i` to the other (`down`:
    /// upstream → downstream).
    fn pump_pair(&mut self, now: Instant, i: usize, down: bool) {
        let Some(p) = self.pairs.get_mut(i) else {
            return;
        };
        let (from, to) = if down { (p.up, p.down) } else { (p.down, p.up) };
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
            } else {
                self.stats.forwarded_up += 1;
            }
        }
    }
}

fn options_of(m: ReceivedMessage) -> (crate::id::StreamId, Vec<u8>, SendOptions) {
    let opts = match m.reliability {
        Reliability::Reliable => SendOptions::RELIABLE,
        Reliability::Discardable => SendOptions::DISCARDABLE,
        _ => SendOptions::UNRELIABLE,
    };
    (m.stream, m.data, opts)
}
