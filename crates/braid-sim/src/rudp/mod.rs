//! IQ-RUDP in the simulator (issue 3, "Reproduce the seed's comparisons in
//! simulation"; seed 002 §3).
//!
//! braid-core's sans-IO transport runs here unchanged: [`RudpNode`] wraps
//! an [`braid_core::transport::Endpoint`] as a simulator
//! [`crate::Node`], mapping each route to a synthetic `SocketAddr`
//! ([`node::route_addr`]), with an application model ([`App`]) inside.
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`node`] | [`RudpNode`], the [`App`] trait, route ↔ address mapping |
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

pub use node::{route_addr, App, RudpNode};

use crate::link::LinkConfig;
use crate::node::{LinkId, NodeId, RouteId};
use crate::seed::rng_for;
use crate::sim::{FlowInfo, Simulation};
use braid_core::transport::{Config, ConfigError};
use braid_core::Instant;
use rand::RngCore;

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

/// A 32-byte endpoint secret drawn from the run's seed.
pub fn secret(seed: u64, label: &str) -> [u8; 32] {
    let mut s = [0u8; 32];
    rng_for(seed, label).fill_bytes(&mut s);
    s
}

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
    let mut server =
        RudpNode::server(recv_cfg, secret(seed, &format!("rudp:{name}:server")), recv)?;
    server.add_peer(fwd, bck);
    let client = RudpNode::client(
        send_cfg,
        secret(seed, &format!("rudp:{name}:client")),
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

/// Adds `links` to `sim` and returns their ids.
pub fn add_links(sim: &mut Simulation, links: Vec<LinkConfig>) -> Vec<LinkId> {
    links.into_iter().map(|l| sim.add_link(l)).collect()
}
