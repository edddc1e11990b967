//! Relayed paths on the wire: the ROUTE frame that tells a relay where a
//! path goes next, and the HOP_REPORT frame in which a relay tells the
//! source what it measures on the hop it sends on (seed 000 §III: relays
//! "report their links' measurements").
//!
//! Main types: [`Route`], [`HopReport`] (their wire form is in
//! [`super::frame`]); both travel as session frames
//! ([`Frame::Route`](super::Frame::Route),
//! [`Frame::HopReport`](super::Frame::HopReport)) on the control stream.
//!
//! A relayed path `source → R1 → R2 → sink` is three connections. The
//! source's first message on its connection to R1 is `Route { index: 1,
//! hops: [R2, sink] }`; R1 connects to R2 and sends `Route { index: 2,
//! hops: [sink] }`; R2 connects to the sink and sends no route, so the
//! sink sees the source's PATH_HELLO first, as on a direct path. Every
//! relay then reports on the hop it sends on, tagged with its `index`.
//!
//! Invariants: at most [`MAX_ROUTE_HOPS`] addresses; decoding is strict and
//! bounded like every session frame (fuzzed through
//! `fuzz_targets/session_frame.rs`).

use crate::time::Duration;
use crate::units::Bandwidth;
use std::net::SocketAddr;

/// Most addresses in one route (relays after the first, plus the sink).
pub const MAX_ROUTE_HOPS: usize = 8;

/// Where a relayed path goes after the relay that reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The reading relay's place on the path (1 = the first relay).
    pub index: u8,
    /// The next hop first, the sink last; never empty.
    pub hops: Vec<SocketAddr>,
}

impl Route {
    /// What the next relay reads: one hop further. `None` when the next
    /// hop is the sink, which gets no route.
    pub fn next(&self) -> Option<Route> {
        (self.hops.len() > 1).then(|| Route {
            index: self.index.saturating_add(1),
            hops: self.hops[1..].to_vec(),
        })
    }
}

/// A relay's measurements of the hop it sends on, over its last interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HopReport {
    /// The reporting relay's place on the path (see [`Route::index`]).
    pub index: u8,
    /// Smoothed RTT of the hop.
    pub srtt: Duration,
    /// Share of the hop's packets lost in the interval, in [0, 1].
    pub loss: f64,
    /// Rate the hop delivered in the interval.
    pub delivered: Bandwidth,
    /// Bytes the relay holds for the path towards the hop.
    pub queued_bytes: u64,
}
