//! IQ-RUDP in the simulator (issue 3, "Reproduce the seed's comparisons in
//! simulation"; seed 002 §3).
//!
//! braid-core's sans-IO transport runs here unchanged: [`RudpNode`] wraps
//! an [`braid_core::transport::Endpoint`] as a simulator
//! [`crate::Node`] with an address of its own and a table of its peers'
//! addresses and routes, with an application model ([`App`]) inside.
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`node`] | [`RudpNode`], the [`App`] trait, peers: address ↔ routes |
//! | [`app`] | [`app::BulkSender`] (verifiable reliable bytes, optional unreliable side traffic with deadlines), [`app::Receiver`] (checks order, duplicates, deadlines, bodies; logs deliveries) |
//! | [`frames`] | [`frames::FrameApp`]: the seed's adaptive applications — frames at a fixed rate or as fast as allowed, tagged messages, marking (§3.3) or resolution (§3.4–3.5) adaptation on loss thresholds, coordinated or not |
//! | [`experiments`] | the network of §3.1 (20 Mbit/s, 30 ms RTT, CBR and trace-driven cross traffic), Tables 3–8 beside the seed's numbers, and the Reno-model benchmark |
//!
//! Everything is deterministic: the only randomness is ChaCha8 seeded from
//! the run's seed (link impairments, the application's marking coin, the
//! endpoint secrets).

pub mod app;
pub mod experiments;
pub mod frames;
pub mod node;
pub mod tables;

pub use node::{App, RudpNode};

use crate::node::{LinkId, NodeId, RouteId};
use crate::sim::{FlowInfo, Simulation};
use braid_core::link::LinkConfig;
use braid_core::transport::{Config, ConfigError};
use braid_core::Instant;
use std::net::SocketAddr;

/// A sender and a receiver joined by two routes in a simulation.
#[derive(Debug)]
pub struct Pair {
    /// The sending (client) node.
    pub sender: NodeId,
    /// The receiving (server) node.
    pub receiver: NodeId,
    /// Sender → receiver.
    pub forward: RouteId,
    /// Receiver → sender.
    pub back: RouteId,
}

pub use crate::seed::secret;

/// Adds a client node running `send` and a server node running `recv`,
/// joined by routes over `forward` and `back` (link ids already in `sim`),
/// and declares the forward route as flow `name`.
///
/// # Errors
/// [`ConfigError`] for an invalid transport configuration.
#[allow(clippy::too_many_arguments)]
pub fn add_pair<S: App, R: App>(
    sim: &mut Simulation,
    name: &str,
    forward: Vec<LinkId>,
    back: Vec<LinkId>,
    send_cfg: Config,
    recv_cfg: Config,
    send: S,
    recv: R,
) -> Result<Pair, ConfigError> {
    let seed = sim.seed();
    let fwd = sim.add_route(format!("{name}:fwd"), forward);
    let bck = sim.add_route(format!("{name}:back"), back);
    let (sender_addr, receiver_addr) = pair_addrs(fwd);
    let mut server = RudpNode::server(
        receiver_addr,
        recv_cfg,
        secret(seed, &format!("rudp:{name}:server")),
        recv,
    )?;
    server.add_peer(sender_addr, fwd, bck);
    let client = RudpNode::client(
        sender_addr,
        send_cfg,
        secret(seed, &format!("rudp:{name}:client")),
        receiver_addr,
        bck,
        fwd,
        send,
    )?;
    let sender = sim.add_node(format!("{name}:sender"), Box::new(client));
    let receiver = sim.add_node(format!("{name}:receiver"), Box::new(server));
    sim.bind_route(fwd, receiver);
    sim.bind_route(bck, sender);
    sim.add_flow(FlowInfo {
        name: name.to_string(),
        kind: "rudp".into(),
        routes: vec![fwd],
        start: Instant::ZERO,
        stop: sim.end(),
    });
    Ok(Pair {
        sender,
        receiver,
        forward: fwd,
        back: bck,
    })
}

/// The addresses of a pair's sender and receiver: two hosts of their own
/// in 10.0.0.0/8, numbered by the pair's forward route (route ids are unique
/// in a simulation, so two pairs never share an address).
fn pair_addrs(forward: RouteId) -> (SocketAddr, SocketAddr) {
    let host = |n: u32| SocketAddr::from(([10, (n >> 16) as u8, (n >> 8) as u8, n as u8], 4433));
    let n = forward.0.wrapping_mul(2);
    (host(n.wrapping_add(1)), host(n.wrapping_add(2)))
}

/// Adds `links` to `sim` and returns their ids.
pub fn add_links(sim: &mut Simulation, links: Vec<LinkConfig>) -> Vec<LinkId> {
    links.into_iter().map(|l| sim.add_link(l)).collect()
}
