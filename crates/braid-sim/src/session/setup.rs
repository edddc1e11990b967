//! Building a session simulation: a source and a sink joined by N paths,
//! each a chain of hops (a forward and a return link) with a relay node
//! between consecutive hops, plus cross traffic that competes on any hop.
//!
//! Main types: [`SessionSim`] (the description), [`PathDef`], [`HopDef`],
//! [`CrossDef`], [`Built`] (the simulation and where its nodes are).
//!
//! Addresses: the source's end of path i is `10.1.i.1`, the sink is
//! `10.2.0.1`, the relay after hop k of path i is `10.3.i.(k+1)`; every
//! port is 4433. Stream i of [`SessionSim::streams`] is opened i-th and so
//! gets `StreamId(i + 1)`.

use super::apps::{Infeasible, SinkApp, SourceApp, SourceStream};
use super::node::{Peer, Peers, RelayNode, SessionNode};
use crate::node::{NodeId, RouteId};
use crate::seed::secret;
use crate::sim::{FlowInfo, Simulation};
use crate::sink::Sink;
use crate::sources::PacedSource;
use braid_core::link::Capacity;
use braid_core::link::LinkConfig;
use braid_core::session::relay::Relay;
use braid_core::session::{Session, SessionConfig, SessionId};
use braid_core::transport::{ConfigError, FourTuple};
use braid_core::{Duration, Instant, PathId, StreamId};
use std::net::SocketAddr;

/// One hop of a path.
#[derive(Debug, Clone)]
pub struct HopDef {
    /// Towards the sink.
    pub forward: LinkConfig,
    /// Back towards the source.
    pub back: LinkConfig,
}

/// One path: hops in order from the source; a relay sits between hops.
#[derive(Debug, Clone)]
pub struct PathDef {
    /// Name for reports.
    pub name: String,
    /// Its hops (at least one).
    pub hops: Vec<HopDef>,
}

/// Cross traffic on one hop's forward link: packets at a rate that follows
/// `rate` (a trace, changing at every step), to a sink of its own.
#[derive(Debug, Clone)]
pub struct CrossDef {
    /// Name for reports.
    pub name: String,
    /// Index of the path.
    pub path: usize,
    /// Index of the hop on it.
    pub hop: usize,
    /// Its rate over time.
    pub rate: Capacity,
    /// Packet size on the wire.
    pub packet: u32,
}

/// A session scenario, ready to build.
#[derive(Debug, Clone)]
pub struct SessionSim {
    /// Name for reports.
    pub name: String,
    /// Seed (transport secrets, link impairments).
    pub seed: u64,
    /// Length of the run.
    pub duration: Duration,
    /// Report bin.
    pub bin: Duration,
    /// The paths.
    pub paths: Vec<PathDef>,
    /// The streams.
    pub streams: Vec<SourceStream>,
    /// Cross traffic.
    pub cross: Vec<CrossDef>,
    /// Session settings of both ends.
    pub config: SessionConfig,
    /// How the source answers upcalls (`None`: it does not).
    pub on_infeasible: Option<Infeasible>,
}

/// A built session simulation.
#[derive(Debug)]
pub struct Built {
    /// The simulation, not yet run.
    pub sim: Simulation,
    /// The source node (`SessionNode<SourceApp>`).
    pub source: NodeId,
    /// The sink node (`SessionNode<SinkApp>`).
    pub sink: NodeId,
    /// Relay nodes per path.
    pub relays: Vec<Vec<NodeId>>,
    /// Forward link ids per path and hop (for link statistics).
    pub forward_links: Vec<Vec<crate::node::LinkId>>,
}

fn host(a: u8, b: u8, c: u8) -> SocketAddr {
    SocketAddr::from(([10, a, b, c], 4433))
}

/// Address of node `k` (0 = source, hops = sink) of path `i`.
fn node_addr(i: usize, k: usize, hops: usize) -> SocketAddr {
    if k == 0 {
        host(1, i as u8, 1)
    } else if k == hops {
        host(2, 0, 1)
    } else {
        host(3, i as u8, k as u8)
    }
}

/// Builds the simulation.
///
/// # Errors
/// An invalid transport configuration in `def.config`.
pub fn build(def: &SessionSim) -> Result<Built, ConfigError> {
    let mut sim = Simulation::empty(def.name.clone(), def.seed, def.duration, def.bin);
    let mut source_peers = Peers::default();
    let mut sink_peers = Peers::default();
    let mut relay_defs: Vec<Vec<(Peers, FourTuple, SocketAddr)>> = Vec::new();
    let mut binds: Vec<(RouteId, (usize, usize))> = Vec::new();
    let mut forward_links = Vec::new();
    let mut fwd_routes_first: Vec<RouteId> = Vec::new();
    let mut cross_links = Vec::new();
    for (i, p) in def.paths.iter().enumerate() {
        let n = p.hops.len();
        let mut relays: Vec<(Peers, FourTuple, SocketAddr)> = (1..n)
            .map(|k| {
                let me = node_addr(i, k, n);
                (
                    Peers::default(),
                    FourTuple::new(me, node_addr(i, k + 1, n)),
                    me,
                )
            })
            .collect();
        let mut links = Vec::new();
        for (k, h) in p.hops.iter().enumerate() {
            let f = sim.add_link(h.forward.clone());
            let b = sim.add_link(h.back.clone());
            links.push(f);
            let fwd = sim.add_route(format!("{}:hop{k}:fwd", p.name), vec![f]);
            let back = sim.add_route(format!("{}:hop{k}:back", p.name), vec![b]);
            if k == 0 {
                fwd_routes_first.push(fwd);
            }
            let (a, z) = (node_addr(i, k, n), node_addr(i, k + 1, n));
            let up = Peer {
                local: a,
                remote: z,
                from: back,
                to: fwd,
            };
            let down = Peer {
                local: z,
                remote: a,
                from: fwd,
                to: back,
            };
            if k == 0 {
                source_peers.add(up);
            } else {
                relays[k - 1].0.add(up);
            }
            if k + 1 == n {
                sink_peers.add(down);
            } else {
                relays[k].0.add(down);
            }
            // (path, node index along it) that receives each route.
            binds.push((fwd, (i, k + 1)));
            binds.push((back, (i, k)));
        }
        for c in def.cross.iter().filter(|c| c.path == i) {
            if let Some(&l) = links.get(c.hop) {
                cross_links.push((c.clone(), l));
            }
        }
        forward_links.push(links);
        relay_defs.push(relays);
    }
    let seed = def.seed;
    let mut source = Session::source(
        SessionId(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
        def.config.clone(),
        secret(seed, "session:source"),
        Instant::ZERO,
    )?;
    for (i, p) in def.paths.iter().enumerate() {
        let n = p.hops.len();
        let addr = FourTuple::new(node_addr(i, 0, n), node_addr(i, 1, n));
        // Fresh ids on a fresh session, within MAX_PATHS.
        source
            .add_path(Instant::ZERO, PathId(i as u32), addr)
            .map_err(|_| ConfigError::Invalid("paths: a session has at most 64"))?;
    }
    let sink = Session::sink(
        def.config.clone(),
        secret(seed, "session:sink"),
        Instant::ZERO,
    )?;
    let mut sink_app = SinkApp::new(def.bin);
    for (k, s) in def.streams.iter().enumerate() {
        sink_app.expect(StreamId(k as u32 + 1), s.config.delivery);
        if super::apps::is_metered(&s.config) {
            sink_app.meter(StreamId(k as u32 + 1));
        }
    }
    let src = sim.add_node(
        "source",
        Box::new(SessionNode::new(
            source,
            SourceApp::new(def.streams.clone()).with_on_infeasible(def.on_infeasible),
            source_peers,
        )),
    );
    let snk = sim.add_node(
        "sink",
        Box::new(SessionNode::new(sink, sink_app, sink_peers)),
    );
    let mut relays = Vec::new();
    for (i, rs) in relay_defs.into_iter().enumerate() {
        let mut ids = Vec::new();
        for (k, (peers, next, _me)) in rs.into_iter().enumerate() {
            let relay = Relay::new(
                def.config.transport.clone(),
                secret(seed, &format!("session:relay:{i}:{k}")),
                next,
            )?;
            ids.push(sim.add_node(
                format!("{}:relay{}", def.paths[i].name, k + 1),
                Box::new(RelayNode::new(relay, peers)),
            ));
        }
        relays.push(ids);
    }
    for (route, (i, k)) in binds {
        let n = def.paths[i].hops.len();
        let node = if k == 0 {
            src
        } else if k == n {
            snk
        } else {
            relays[i][k - 1]
        };
        sim.bind_route(route, node);
    }
    for (c, link) in cross_links {
        let route = sim.add_route(format!("{}:cross", c.name), vec![link]);
        let end = Instant::ZERO + def.duration;
        let from = sim.add_node(
            format!("{}:src", c.name),
            Box::new(PacedSource::new(
                route,
                c.packet,
                c.rate,
                Instant::ZERO,
                end,
            )),
        );
        let to = sim.add_node(format!("{}:sink", c.name), Box::new(Sink::new(None, 0)));
        let _ = from;
        sim.bind_route(route, to);
        sim.add_flow(FlowInfo {
            name: c.name.clone(),
            kind: "cross".into(),
            routes: vec![route],
            start: Instant::ZERO,
            stop: end,
        });
    }
    sim.add_flow(FlowInfo {
        name: "session".into(),
        kind: "session".into(),
        routes: fwd_routes_first,
        start: Instant::ZERO,
        stop: Instant::ZERO + def.duration,
    });
    Ok(Built {
        sim,
        source: src,
        sink: snk,
        relays,
        forward_links,
    })
}
