//! Simulator nodes for sessions: [`SessionNode`] (a source or a sink with
//! its application model inside) and [`RelayNode`] (a relay hop).
//!
//! # Addressing
//! The simulator speaks routes; sessions speak addresses. Every node keeps
//! a [`Peers`] table: for each neighbour, our local address towards it, its
//! address, the route its datagrams arrive on and the route that reaches
//! it. A source has one local address per path, so each path is its own
//! [`FourTuple`]. A datagram over a route no peer sends on, or a transmit
//! to an address with no route, is dropped and counted (`unroutable`).

use crate::node::{Datagram, Node, RouteId, Transmit};
use braid_core::session::relay::Relay;
use braid_core::session::Session;
use braid_core::transport::FourTuple;
use braid_core::Instant;
use std::net::SocketAddr;

/// An application model running on a session.
pub trait SessionApp: 'static {
    /// Runs at `now`: drain events and messages, send.
    fn drive(&mut self, now: Instant, session: &mut Session);
    /// When the application next wants to run on its own.
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }
}

/// One neighbour of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Our address towards it.
    pub local: SocketAddr,
    /// Its address.
    pub remote: SocketAddr,
    /// The route its datagrams arrive on.
    pub from: RouteId,
    /// The route that reaches it.
    pub to: RouteId,
}

/// A node's neighbours (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Peers {
    peers: Vec<Peer>,
    unroutable: u64,
}

impl Peers {
    /// Adds a neighbour.
    pub fn add(&mut self, p: Peer) {
        self.peers.push(p);
    }

    /// The path a datagram over `route` travelled.
    pub fn path_from(&mut self, route: RouteId) -> Option<FourTuple> {
        match self.peers.iter().find(|p| p.from == route) {
            Some(p) => Some(FourTuple::new(p.local, p.remote)),
            None => {
                self.unroutable += 1;
                None
            }
        }
    }

    /// The route for a datagram on `path`.
    pub fn route_to(&mut self, path: FourTuple) -> Option<RouteId> {
        let r = self
            .peers
            .iter()
            .find(|p| p.remote == path.remote && path.local.is_none_or(|l| l == p.local))
            .map(|p| p.to);
        if r.is_none() {
            self.unroutable += 1;
        }
        r
    }

    /// Datagrams and transmits dropped for want of a route.
    pub fn unroutable(&self) -> u64 {
        self.unroutable
    }
}

/// A session (source or sink) and its application, as a simulator node.
pub struct SessionNode<A: SessionApp> {
    session: Session,
    app: A,
    peers: Peers,
    buf: Vec<u8>,
}

impl<A: SessionApp> std::fmt::Debug for SessionNode<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionNode")
            .field("role", &self.session.role())
            .field("peers", &self.peers)
            .finish()
    }
}

impl<A: SessionApp> SessionNode<A> {
    /// A node running `session` with `app`, reaching its neighbours through `peers`.
    pub fn new(session: Session, app: A, peers: Peers) -> Self {
        SessionNode {
            session,
            app,
            peers,
            buf: Vec::with_capacity(2048),
        }
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The session, mutably (the simulator re-polls the node afterwards).
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// The application model.
    pub fn app(&self) -> &A {
        &self.app
    }

    /// The application model, mutably.
    pub fn app_mut(&mut self) -> &mut A {
        &mut self.app
    }
}

impl<A: SessionApp> Node for SessionNode<A> {
    fn handle_datagram(&mut self, now: Instant, route: RouteId, datagram: Datagram) {
        if let Some(path) = self.peers.path_from(route) {
            self.session.handle_datagram(now, path, datagram.data());
        }
        self.app.drive(now, &mut self.session);
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.session.handle_timeout(now);
        self.app.drive(now, &mut self.session);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        loop {
            self.app.drive(now, &mut self.session);
            let t = self.session.poll_transmit(now, &mut self.buf)?;
            let Some(route) = self.peers.route_to(t.path) else {
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
        match (self.session.poll_timeout(), self.app.next_wakeup()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.session.stats();
        vec![
            ("messages", s.messages),
            ("resent", s.resent),
            ("copies", s.copies),
            ("expired", s.expired),
            ("paths_down", s.paths_down),
            ("unroutable", self.peers.unroutable()),
        ]
    }
}

/// A relay hop as a simulator node.
#[derive(Debug)]
pub struct RelayNode {
    relay: Relay,
    peers: Peers,
    buf: Vec<u8>,
}

impl RelayNode {
    /// A node running `relay`, reaching its neighbours through `peers`.
    pub fn new(relay: Relay, peers: Peers) -> Self {
        RelayNode {
            relay,
            peers,
            buf: Vec::with_capacity(2048),
        }
    }

    /// The relay.
    pub fn relay(&self) -> &Relay {
        &self.relay
    }
}

impl Node for RelayNode {
    fn handle_datagram(&mut self, now: Instant, route: RouteId, datagram: Datagram) {
        if let Some(path) = self.peers.path_from(route) {
            self.relay.handle_datagram(now, path, datagram.data());
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.relay.handle_timeout(now);
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        loop {
            let t = self.relay.poll_transmit(now, &mut self.buf)?;
            let Some(route) = self.peers.route_to(t.path) else {
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
        self.relay.poll_timeout()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let s = self.relay.stats();
        vec![
            ("relay_pairs", s.pairs),
            ("relay_forwarded_down", s.forwarded_down),
            ("relay_forwarded_up", s.forwarded_up),
            ("relay_dropped", s.dropped),
            ("unroutable", self.peers.unroutable()),
        ]
    }
}
