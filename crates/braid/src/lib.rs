//! braid: the library applications use.
//!
//! tokio drivers for the sans-IO state machines of `braid-core`, and the
//! `braid perf` measurement protocol ([`perf`]). The one
//! place that reads the wall clock is [`clock`].

pub mod clock;
pub mod emulate;
pub mod perf;
pub mod pipe;
pub mod relay;
pub mod rudp;
pub mod session;
