//! braid-core: the sans-IO heart of braid.
//!
//! Everything here is a plain data structure that is handed the time and the
//! bytes and hands back what to do. There are no sockets, threads, clock
//! reads or random-number generators constructed here; the simulator
//! (`braid-sim`) and the tokio runtime (`braid`) drive the same code.
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`time`] | [`Instant`] and [`Duration`] in nanoseconds; time is always passed in |
//! | [`units`] | [`Bandwidth`] and byte counts, with parsing of `10mbit`, `12MB/s` |
//! | [`trace`] | parsers for bandwidth traces (mahimahi, `time<TAB>Mbit/s`, 5G CSV) |
//! | [`estimate`] | rate samplers, sliding-window distributions, predictors (seed 000 §IV) |
#![forbid(unsafe_code)]

pub mod estimate;
pub mod time;
pub mod trace;
pub mod units;

pub use time::{Duration, Instant};
pub use units::Bandwidth;
