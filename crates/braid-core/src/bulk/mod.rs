//! Bulk transfer over many connections: the pure decision logic of the
//! multipath pipe (seed 003, "weighted buffers over parallel TCP
//! connections"; `braid send` / `braid recv`).
//!
//! A bulk sender cuts a byte stream into numbered blocks and spreads them
//! over N connections; the receiver puts them back in order within a
//! bounded window. This module decides, and never moves a byte: the tokio
//! driver in `braid::pipe` and the simulator's bulk nodes in `braid-sim`
//! hand it events and the time, and do what it says.
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`sched`] | the sender's block scheduler: adaptive, weighted, round-robin |
//! | [`weighted`] | the seed's weighted-buffer controller with its PI loop (§2–§3.2) |
//! | [`reorder`] | the receiver's bounded reorder window |
//!
//! Invariants: sans-IO — time comes in as [`crate::Instant`], nothing here
//! reads a clock, opens a socket or spawns a thread; the sender reads block
//! `seq` only while `seq < written + window`, and the receiver holds at most
//! `window` blocks and `window_bytes` bytes, so both sides' memory is
//! bounded by what the receiver granted.

pub mod reorder;
pub mod sched;
pub mod weighted;

pub use reorder::{BlockLen, Payload, Reorder, Verdict};
pub use sched::{BlockScheduler, BlockSend, ConnCounters, Layout, Mode};
pub use weighted::Weighted;
