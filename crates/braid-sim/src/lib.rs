//! braid-sim: a deterministic discrete-event network simulator.
//!
//! braid's state machines (transport connections, schedulers, relays) are
//! sans-IO; this crate gives them a network made of links with constant,
//! trace-driven or synthetic capacity, propagation delay, bounded drop-tail
//! queues and seeded loss, duplication and reordering, all on virtual time.
//! Same scenario and seed ⇒ byte-identical report.
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`node`] | the [`Node`] trait (`handle_datagram`, `handle_timeout`, `poll_transmit`, `poll_timeout`), [`Datagram`], [`Transmit`] |
//! | [`sim`] | [`Simulation`]: links, routes, nodes, the event loop |
//! | [`bulk`] | bulk-transfer nodes: seed 003's block scheduler and reorder window over simulated connections |
//! | [`session`] | sessions at packet level: session and relay nodes, workloads, paths with cross traffic |
//! | `link` | the simulator's driver of the link model in [`braid_core::link`] (queue, serialization, impairments, capacity) |
//! | [`event`] | the (time, sequence) event queue |
//! | [`scenario`] | TOML scenarios ([`Scenario`]) and their errors |
//! | [`sources`], [`sink`] | built-in greedy, CBR and trace sources, and the sink |
//! | [`report`] | [`Report`]: tables, JSON, CSV, SVG |
//! | [`trace_file`] | loading trace files into capacity schedules |
//! | [`seed`] | seeds and per-element random streams; `BRAID_SIM_SEED` |
//!
//! # Example
//! ```
//! use braid_sim::{Report, Scenario, Simulation};
//! let scenario = Scenario::from_toml_str(r#"
//!     duration = "5s"
//!     nodes = ["a", "b"]
//!     [[link]]
//!     name = "fwd"
//!     from = "a"
//!     to = "b"
//!     rate = "10mbit"
//!     delay = "20ms"
//!     [[link]]
//!     name = "back"
//!     from = "b"
//!     to = "a"
//!     rate = "10mbit"
//!     delay = "20ms"
//!     [[flow]]
//!     name = "bulk"
//!     kind = "greedy"
//!     from = "a"
//!     to = "b"
//! "#).unwrap();
//! let report = Report::from_run(&Simulation::new(&scenario).unwrap().run());
//! assert!(report.flow("bulk").unwrap().throughput_mbps.mean > 9.0);
//! ```
#![forbid(unsafe_code)]

mod build;
pub mod bulk;
pub mod event;
pub mod experiments;
pub(crate) mod link;
pub mod node;
pub mod report;
pub mod rudp;
pub mod scenario;
pub mod seed;
pub mod session;
pub mod sim;
pub mod sink;
pub mod sources;
pub mod stats;
pub mod study;
pub mod trace_file;
pub mod wire;

pub use braid_core::link::{Capacity, LinkConfig, LinkStats, RateSchedule, SyntheticSpec};
pub use node::{Datagram, LinkId, Node, NodeId, RouteId, Transmit};
pub use report::Report;
pub use scenario::{Scenario, ScenarioError, ScenarioErrorKind};
pub use sim::{FlowInfo, Simulation};
pub use sink::Sink;
pub use sources::{GreedyConfig, GreedySource, PacedSource};

/// A built-in scenario that needs no files: one path whose capacity is a
/// seeded synthetic log-normal process (mean 10 Mbit/s, CoV 0.4,
/// correlation time 2 s), a greedy flow over it, for 120 s. Used by
/// `braid demo` and the README's quick start.
pub const DEMO_SCENARIO: &str = r#"name = "demo: greedy flow over a synthetic variable-rate path"
seed = 1
duration = "120s"
nodes = ["sender", "receiver"]

[[link]]
name = "path"
from = "sender"
to = "receiver"
synthetic = { mean = "10mbit", cov = 0.4, corr_time = "2s", step = "100ms" }
delay = "20ms"
queue = "150ms"

[[link]]
name = "return"
from = "receiver"
to = "sender"
rate = "10mbit"
delay = "20ms"

[[flow]]
name = "bulk"
kind = "greedy"
from = "sender"
to = "receiver"
"#;
