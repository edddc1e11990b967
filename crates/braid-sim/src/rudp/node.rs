//! [`RudpNode`]: a braid-core transport [`Endpoint`] as a simulator
//! [`Node`], with an application model ([`App`]) inside.
//!
//! # Addressing
//! Every node has its own address, given at construction
//! ([`RudpNode::addr`]); the simulator speaks routes. The node keeps a
//! table of peers ([`RudpNode::add_peer`]): each peer's address, the route
//! its datagrams arrive on, and the route that leads to it. A datagram over
//! route `r` travelled the [`FourTuple`] (our address, the address of the
//! peer that sends on `r`); a transmit goes out on the route towards its
//! path's remote address. [`super::add_pair`] gives the two ends of a pair
//! addresses of their own.
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
//! Invariants: a transmit to an address with no known route, or a datagram
//! over a route no peer sends on, is dropped and counted (`unroutable`);
//! the node never reads a clock or an unseeded RNG.

use crate::node::{Datagram, Node, RouteId, Transmit};
use braid_core::transport::{
    Config, ConfigError, Connection, ConnectionHandle, Endpoint, FourTuple,
};
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

/// A peer of a node: its address and the routes to and from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Peer {
    addr: SocketAddr,
    /// The route the peer's datagrams arrive on.
    from: RouteId,
    /// The route that leads to the peer.
    to: RouteId,
}

/// A transport endpoint with one application, driven by the simulator.
pub struct RudpNode<A: App> {
    endpoint: Endpoint,
    addr: SocketAddr,
    peers: Vec<Peer>,
    conn: Option<ConnectionHandle>,
    app: A,
    buf: Vec<u8>,
    unroutable: u64,
}

impl<A: App> std::fmt::Debug for RudpNode<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RudpNode")
            .field("addr", &self.addr)
            .field("peers", &self.peers)
            .field("conn", &self.conn)
            .finish()
    }
}

impl<A: App> RudpNode<A> {
    /// A server node at `addr`: it accepts the first connection that
    /// arrives (from a peer declared with [`RudpNode::add_peer`]).
    ///
    /// # Errors
    /// [`ConfigError`] for an invalid transport configuration.
    pub fn server(
        addr: SocketAddr,
        config: Config,
        secret: [u8; 32],
        app: A,
    ) -> Result<Self, ConfigError> {
        Ok(RudpNode {
            endpoint: Endpoint::new(config, secret, true)?,
            addr,
            peers: Vec::new(),
            conn: None,
            app,
            buf: Vec::with_capacity(2048),
            unroutable: 0,
        })
    }

    /// A client node at `addr` that connects at time zero to the peer at
    /// `peer`, which sends on `from_peer` and is reached over `to_peer`.
    ///
    /// # Errors
    /// [`ConfigError`] for an invalid transport configuration.
    pub fn client(
        addr: SocketAddr,
        config: Config,
        secret: [u8; 32],
        peer: SocketAddr,
        from_peer: RouteId,
        to_peer: RouteId,
        app: A,
    ) -> Result<Self, ConfigError> {
        let mut n = RudpNode {
            endpoint: Endpoint::new(config, secret, false)?,
            addr,
            peers: Vec::new(),
            conn: None,
            app,
            buf: Vec::with_capacity(2048),
            unroutable: 0,
        };
        n.add_peer(peer, from_peer, to_peer);
        // One connection on a fresh endpoint: `max_connections` ≥ 1 is
        // checked by `Config::validate`, so this cannot fail.
        n.conn = n
            .endpoint
            .connect_on(Instant::ZERO, FourTuple::new(addr, peer))
            .ok();
        Ok(n)
    }

    /// Declares the peer at `peer`: it sends to us over `from_peer` and we
    /// reach it over `to_peer`. Replaces an earlier declaration of the same
    /// address or the same incoming route.
    pub fn add_peer(&mut self, peer: SocketAddr, from_peer: RouteId, to_peer: RouteId) {
        self.peers.retain(|p| p.addr != peer && p.from != from_peer);
        self.peers.push(Peer {
            addr: peer,
            from: from_peer,
            to: to_peer,
        });
    }

    /// The node's own address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
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

    /// Transmits dropped for want of a route, and datagrams dropped
    /// because no peer sends on the route they came over.
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
        match self.peers.iter().find(|p| p.from == route) {
            Some(p) => {
                let path = FourTuple::new(self.addr, p.addr);
                self.endpoint.handle_datagram(now, path, datagram.data());
            }
            None => self.unroutable += 1,
        }
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
            let Some(route) = self
                .peers
                .iter()
                .find(|p| p.addr == t.path.remote)
                .map(|p| p.to)
            else {
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

    struct Idle;
    impl App for Idle {
        fn drive(&mut self, _: Instant, _: &mut Connection) {}
    }

    fn addr(n: u8) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, n], 4433))
    }

    #[test]
    fn datagrams_from_an_unknown_route_are_dropped_and_counted() {
        let mut n = RudpNode::server(addr(2), Config::default(), [1; 32], Idle).unwrap();
        n.add_peer(addr(1), RouteId(1), RouteId(2));
        n.handle_datagram(
            Instant::ZERO,
            RouteId(9),
            Datagram::from_bytes(vec![0; 1200]),
        );
        assert_eq!(n.unroutable(), 1);
        n.handle_datagram(
            Instant::ZERO,
            RouteId(1),
            Datagram::from_bytes(vec![0; 1200]),
        );
        assert_eq!(n.unroutable(), 1, "a known route reaches the endpoint");
        assert_eq!(n.endpoint().stats().received, 1);
    }

    #[test]
    fn a_client_connects_from_its_own_address_to_its_peer() {
        let mut n = RudpNode::client(
            addr(1),
            Config::default(),
            [1; 32],
            addr(2),
            RouteId(2),
            RouteId(1),
            Idle,
        )
        .unwrap();
        let path = n.connection().unwrap().path();
        assert_eq!(path, FourTuple::new(addr(1), addr(2)));
        let t = n.poll_transmit(Instant::ZERO).expect("the INITIAL");
        assert_eq!(t.route, RouteId(1));
    }
}
