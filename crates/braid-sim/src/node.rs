//! The sans-IO node contract: how the simulator drives a state machine.
//!
//! A [`Node`] is anything that exchanges datagrams over the simulated
//! network: a built-in traffic source or sink, an IQ-RUDP `Connection`
//! endpoint, a PGOS scheduler, an overlay relay. It never sees links or the
//! event queue; like `quinn_proto::Connection` it is handed the time and the
//! bytes and hands back what to send and when to wake up.
//!
//! Main types: [`Node`], [`Datagram`], [`Transmit`], and the ids [`NodeId`],
//! [`RouteId`], [`LinkId`].
//!
//! # Driving contract
//! After every call to `handle_datagram` or `handle_timeout` (and once at
//! time zero, and after a caller touched the node through
//! [`crate::Simulation::node_mut`]) the simulator drains
//! [`Node::poll_transmit`] until it returns `None` (at most
//! [`MAX_TRANSMITS_PER_POLL`] datagrams per round; the rest are drained in
//! another round at the same instant), then asks [`Node::poll_timeout`] and
//! calls `handle_timeout` once that instant is reached. A timeout in the
//! past fires at the current time. Invariant: the simulator never calls a
//! node with a time earlier than a time it has already passed.

use braid_core::Instant;
use std::any::Any;

/// Index of a node in a [`crate::Simulation`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct NodeId(pub u32);

/// Index of a route (a chain of links ending at one node).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct RouteId(pub u32);

/// Index of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct LinkId(pub u32);

/// Upper bound on datagrams taken from one node in one drain round, so that
/// a node that never stops transmitting cannot stall virtual time.
pub const MAX_TRANSMITS_PER_POLL: usize = 65_536;

/// One datagram on the simulated wire.
///
/// `wire_len` is what links queue and serialize; `data` is what the
/// receiver gets. `data` may be shorter than `wire_len`: built-in sources
/// carry only a small header ("size-only" payload) so that a simulated
/// 1500-byte packet does not cost a 1500-byte allocation. Real protocol
/// nodes use [`Datagram::from_bytes`], where both agree. A model whose
/// packets can be smaller than any header uses [`Datagram::with_meta`],
/// where `data` is bookkeeping that the wire size does not include.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Bytes on the wire (headers included); at least `data.len()` unless
    /// built by [`Datagram::with_meta`].
    wire_len: u32,
    /// The contents delivered to the receiving node.
    data: Vec<u8>,
}

impl Datagram {
    /// A datagram whose wire size is exactly its contents.
    pub fn from_bytes(data: Vec<u8>) -> Self {
        let wire_len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        Datagram { wire_len, data }
    }

    /// A datagram of `wire_len` bytes on the wire that carries only `header`
    /// (which may be empty). If `header` is longer than `wire_len`, the wire
    /// size grows to fit it.
    pub fn sized(wire_len: u32, header: Vec<u8>) -> Self {
        let len = u32::try_from(header.len()).unwrap_or(u32::MAX);
        Datagram {
            wire_len: wire_len.max(len),
            data: header,
        }
    }

    /// A datagram of exactly `wire_len` bytes on the wire that carries
    /// `meta`, simulation bookkeeping (e.g. which frame a packet belongs to)
    /// that is not counted on the wire, even when it is longer than
    /// `wire_len`. For fluid models whose packets may be a few bytes.
    pub fn with_meta(wire_len: u32, meta: Vec<u8>) -> Self {
        Datagram {
            wire_len,
            data: meta,
        }
    }

    /// Bytes on the wire.
    pub fn wire_len(&self) -> u32 {
        self.wire_len
    }

    /// The carried contents.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// Takes the carried contents.
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }
}

/// A datagram a node wants sent, and the route to send it on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The route: a chain of links ending at the receiving node.
    pub route: RouteId,
    /// What to send.
    pub datagram: Datagram,
}

/// A state machine that the simulator drives (see the module docs for the
/// driving contract).
///
/// Implementations must be deterministic functions of their inputs (and of
/// a seed they were constructed with): no clock reads, no thread RNGs.
/// Any `'static` type gets [`AsAny`] for free, which lets a caller get its
/// concrete node back with [`crate::Simulation::node`].
pub trait Node: AsAny {
    /// A datagram arrived at `now` over `route` (the route it was sent on,
    /// which identifies the path and the sender).
    fn handle_datagram(&mut self, now: Instant, route: RouteId, datagram: Datagram);

    /// The instant last returned by [`Node::poll_timeout`] has been reached.
    fn handle_timeout(&mut self, now: Instant);

    /// The next datagram to send now, if any.
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit>;

    /// When this node next wants [`Node::handle_timeout`]; `None` for never.
    fn poll_timeout(&self) -> Option<Instant>;

    /// Named counters for the report (e.g. `("acks", 812)`), in a fixed
    /// order. The default is none.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// Downcasting support for nodes (implemented for every `'static` type).
pub trait AsAny {
    /// `self` as [`Any`].
    fn as_any(&self) -> &dyn Any;
    /// `self` as mutable [`Any`].
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
