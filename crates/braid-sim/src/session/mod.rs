//! Sessions at packet level: braid-core's [`Session`](braid_core::session::Session)
//! and [`Relay`](braid_core::session::relay::Relay) as simulator nodes, over
//! paths of real links with trace-driven cross traffic (seed 000 §III–VI).
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`node`] | [`SessionNode`], [`RelayNode`], the address/route table [`Peers`] |
//! | [`apps`] | source workloads (constant rate, greedy, video frames) and the checking sink |
//! | [`setup`] | building a simulation from paths, hops, relays, streams and cross traffic |
//!
//! The session learns what each path can carry only by measuring what its
//! connections deliver: link capacities and cross traffic are never shown
//! to it.

pub mod apps;
pub mod node;
pub mod setup;

pub use apps::{payload, SinkApp, SourceApp, SourceStream, StreamDigest, Workload};
pub use node::{Peer, Peers, RelayNode, SessionApp, SessionNode};
pub use setup::{build, Built, CrossDef, HopDef, PathDef, SessionSim};
