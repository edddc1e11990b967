//! Sessions at packet level: braid-core's [`Session`](braid_core::session::Session)
//! and [`Relay`](braid_core::session::relay::Relay) as simulator nodes, over
//! paths of real links with trace-driven cross traffic (seed 000 §III–VI).
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`node`] | [`SessionNode`], [`RelayNode`], the address/route table [`Peers`] |
//! | [`demo`] | `braid demo`'s built-in session, run under PGOS and MSFQ, and its table |
//! | [`apps`] | source workloads (constant rate, greedy, video frames) and the checking sink |
//! | [`setup`] | building a simulation from paths, hops, relays, streams and cross traffic |
//! | [`scenario`] | session scenarios in TOML (`braid sim session FILE`) |
//! | [`frames`] | video frame-size traces (MMGC, ASU) for frame sources |
//! | [`report`] | running a session and summarising it per stream and per path |
//! | [`render`] | the summary as a table, CSV and SVG |
//!
//! The session learns what each path can carry only by measuring what its
//! connections deliver: link capacities and cross traffic are never shown
//! to it.

pub mod apps;
pub mod demo;
pub mod frames;
pub mod node;
mod raw;
pub mod render;
pub mod report;
pub mod scenario;
mod scenario_streams;
pub mod setup;

pub use apps::{
    payload, payload_matches, Infeasible, SinkApp, SourceApp, SourceStream, StreamDigest,
    ViolationPromise, Workload,
};
pub use node::{Peer, Peers, RelayNode, SessionApp, SessionNode};
pub use report::{PathReport, SessionReport, StreamReport, UnmetReport};
pub use scenario::SessionScenario;
pub use setup::{build, Built, CrossDef, HopDef, PathDef, SessionSim};
