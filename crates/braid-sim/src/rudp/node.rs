//! [`RudpNode`]: a braid-core transport [`Endpoint`] as a simulator
//! [`Node`], with an application model ([`App`]) inside.
//!
//! # Addressing
//! The transport speaks `SocketAddr`s, the simulator speaks routes. A
//! datagram that arrives over route `r` came from the peer whose synthetic
//! address is [`route_addr`]`(r)`; the node remembers, per peer, the route
//! that leads back to it ([`RudpNode::add_peer`]). So for two nodes A and B
//! joined by routes `ab` (A→B) and `ba` (B→A), A knows B as
//! `route_addr(ba)` and sends to it on `ab`, and vice versa.
//!
//! # Driving
//! Every call from the simulator first hands the input to the endpoint,
//! then lets the application run ([`App::drive`]) on the node's one
//! connection: it drains events and received messages and queues new
//! messages. `poll_transmit` drives the application before asking the
//! endpoint for the next datagram, so a sender refills its queue as the
//! window opens. `poll_timeout` is the earlier of the endpoint's timer and
//! the application's own ([`App::next_wakeup`], e.g. the next video frame).
//!
//! Invariants: a transmit to an address with no known route is dropped and
//! counted (`unroutable`); the node never reads a clock or an unseeded RNG.

use crate::node::{Datagram, Node, RouteId, Transmit};
use braid_core::transport::{Config, ConfigError, Connection, ConnectionHandle, Endpoint};
use braid_core::Instant;
use std::net::SocketAddr;

/// An application model running on one end of an RUDP connection.
pub trait App: 'static {
    /// Runs the application at `now`: drain `conn`'s events and messages,
    /// queue new messages, report adaptations.
    fn drive(&mut self, now: Instant, conn: &mut Connection);

    /// When the application next wants to run on its own (a frame timer);
    /// `None` if only network input wakes it.
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }

    /// Counters for the simulator's report.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// The synthetic address of whoever sends over `route`.
pub fn route_addr(route: RouteId) -> SocketAddr {
    let r = route.0;
    SocketAddr::from((
        [10, (r >> 16) as u8, (r >> 8) as u8, r as u8],
        4433 + (r >> 24) as u16,
    ))
}

/// A transport endpoint with one application, driven by the simulator.
pub struct RudpNode<A: App> {
    endpoint: Endpoint,
    /// (peer address, route towards the peer).
    peers: Vec<(SocketAddr, RouteId)>,
    conn: Option<ConnectionHandle>,
    app: A,
    buf: Vec<u8>,
    unroutable: u64,
}

impl<A: App> std::fmt::Debug for RudpNode<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RudpNode")
            .field("peers", &self.peers)
            .field("conn", &self.conn)
            .finish()
    }
}

impl<A: App> RudpNode<A> {
    /// A server node: it accepts the first connection that arrives.
    ///
    /// # Errors
    /// [`ConfigError`] for an invalid transport configuration.
    pub fn server(config: Config, secret: [u8; 32], app: A) -> Result<Self, ConfigError> {
        Ok(RudpNode {
            endpoint: Endpoint::new(config, secret, true)?,
            peers: Vec::new(),
            conn: None,
            app,
            buf: Vec::with_capacity(2048),
            unroutable: 0,
        })
    }

    /// A client node that connects at time zero to the peer that sends on
    /// `from_peer` and is reached over `to_peer`.
    ///
    /// # Errors
    /// [`ConfigError`] for an invalid transport configuration.
    pub fn client(
        config: Config,
        secret: [u8; 32],
        from_peer: RouteId,
        to_peer: RouteId,
        app: A,
    ) -> Result<Self, ConfigError> {
        let mut n = RudpNode {
            endpoint: Endpoint::new(config, secret, false)?,
            peers: Vec::new(),
            conn: None,
            app,
            buf: Vec::with_capacity(2048),
            unroutable: 0,
        };
        let addr = n.add_peer(from_peer, to_peer);
        // One connection on a fresh endpoint: `max_connections` ≥ 1 is
        // checked by `Config::validate`, so this cannot fail.
        n.conn = n.endpoint.connect(Instant::ZERO, addr).ok();
        Ok(n)
    }

    /// Declares a peer: it sends to us over `from_peer` (which gives its
    /// address, returned) and we reach it over `to_peer`.
    pub fn add_peer(&mut self, from_peer: RouteId, to_peer: RouteId) -> SocketAddr {
        let addr = route_addr(from_peer);
        self.peers.retain(|p| p.0 != addr);
        self.peers.push((addr, to_peer));
        addr
    }

    /// The application model.
    pub fn app(&self) -> &A {
        &self.app
    }

    /// The application model, mutably.
    pub fn app_mut(&mut self) -> &mut A {
        &mut self.app
    }

    /// The node's connection, once it exists.
    pub fn connection(&self) -> Option<&Connection> {
        self.endpoint.connection(self.conn?)
    }

    /// The endpoint (for its datagram counters).
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Transmits dropped for want of a route.
    pub fn unroutable(&self) -> u64 {
        self.unroutable
    }

    fn drive(&mut self, now: Instant) {
        if self.conn.is_none() {
            self.conn = self.endpoint.accept();
        }
        let Some(h) = self.conn else { return };
        if let Some(c) = self.endpoint.connection_mut(h) {
            self.app.drive(now, c);
        }
    }
}

impl<A: App> Node for RudpNode<A> {
    fn handle_datagram(&mut self, now: Instant, route: RouteId, datagram: Datagram) {
        self.endpoint
            .handle_datagram(now, route_addr(route), datagram.data());
        self.drive(now);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        self.drive(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        loop {
            self.drive(now);
            let t = self.endpoint.poll_transmit(now, &mut self.buf)?;
            let Some(&(_, route)) = self.peers.iter().find(|p| p.0 == t.destination) else {
                self.unroutable += 1;
                continue;
            };
            let size = t.size.min(self.buf.len());
            return Some(Transmit {
                route,
                datagram: Datagram::from_bytes(self.buf[..size].to_vec()),
            });
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match (self.endpoint.poll_timeout(), self.app.next_wakeup()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let mut v = self.app.counters();
        if let Some(c) = self.connection() {
            let s = c.stats();
            v.push(("rudp_packets_sent", s.packets_sent));
            v.push(("rudp_packets_lost", s.packets_lost));
            v.push(("rudp_retransmitted_bytes", s.retransmitted_bytes));
        }
        v.push(("unroutable", self.unroutable));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_addresses_are_distinct() {
        let a = route_addr(RouteId(1));
        let b = route_addr(RouteId(2));
        let c = route_addr(RouteId(1 << 24 | 1));
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a, route_addr(RouteId(1)));
    }
}
