//! braid-core: the sans-IO heart of braid.
//!
//! Everything here is a plain data structure that is handed the time and the
//! bytes and hands back what to do. There are no sockets, threads, clock
//! reads or random-number generators constructed here; the simulator
//! (`braid-sim`) and the tokio runtime (`braid`) drive the same code.
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`id`] | [`StreamId`], [`PathId`], [`ReservationId`] and the one stream bound [`id::MAX_STREAMS`] |
//! | [`time`] | [`Instant`] and [`Duration`] in nanoseconds; time is always passed in |
//! | [`units`] | [`Bandwidth`] and [`ByteSize`], with parsing of `10mbit`, `12MB/s`, `64KiB` |
//! | [`trace`] | parsers for bandwidth traces (mahimahi, `time<TAB>Mbit/s`, 5G CSV) |
//! | [`estimate`] | rate samplers, sliding-window distributions, predictors (seed 000 §IV) |
//! | [`scheduler`] | stream specs, path views, PGOS mapping and dispatch, baselines (seed 000 §V) |
//! | [`session`] | an application's streams over several measured paths: frames, reassembly, failover, events (seed 000) |
//! | [`wire`] | packet views and encoders; strict, bounded decoding |
//! | [`transport`] | the adaptive reliable UDP connection (seeds 001, 002) |
//! | [`bulk`] | the multipath pipe's block scheduler, weighted buffers and reorder window (seed 003) |
//! | [`link`] | one link model (rate or trace, delay, loss, drop-tail queue) driven by braid-sim and `braid emulate` |
//! | [`reserve`] | the reservation book: slot tables, NSI-style state machines, classes, co-reservation, policy (seed 004) |
#![forbid(unsafe_code)]

pub mod bulk;
pub mod estimate;
pub mod id;
pub mod link;
pub mod reserve;
pub mod scheduler;
pub mod session;
pub mod time;
pub mod trace;
pub mod transport;
pub mod units;
pub mod wire;

pub use id::{PathId, ReservationId, StreamId};
pub use time::{Duration, Instant};
pub use units::{Bandwidth, ByteSize};
