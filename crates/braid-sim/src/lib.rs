//! braid-sim: a deterministic discrete-event network simulator.
//!
//! Being built; see issue 2 §4.
#![forbid(unsafe_code)]
