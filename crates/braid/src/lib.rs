//! braid: the library applications use.
//!
//! tokio drivers for the sans-IO state machines of `braid-core`: the
//! IQ-RUDP transport ([`rudp`]), multipath sessions with guarantees per
//! stream ([`session`]) and the overlay relays they may run through
//! ([`relay`]); the multipath TCP pipe ([`pipe`]), the link emulator
//! ([`emulate`]), the `braid perf` measurement protocol ([`perf`]) and key
//! files for the authenticated handshake ([`key`]). The one place that
//! reads the wall clock is [`clock`].

pub mod clock;
pub mod emulate;
pub mod key;
pub mod local_addrs;
pub mod perf;
pub mod pipe;
pub mod relay;
pub mod resolve;
pub mod rudp;
pub mod session;
mod tcp_info;
