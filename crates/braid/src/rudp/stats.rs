//! The driver's counters: what [`super::Endpoint::stats`] returns.
//!
//! Main types: [`DriverStats`] (a snapshot of an endpoint) and [`IoStats`]
//! (the driver's socket and channel counters).

use super::EndpointStats;

/// Counters of the driver's socket I/O.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IoStats {
    /// Datagrams read from the socket.
    pub datagrams_received: u64,
    /// Datagrams written to the socket.
    pub datagrams_sent: u64,
    /// Receive errors (ignored; e.g. ICMP errors reported by the kernel).
    pub recv_errors: u64,
    /// Send errors (the datagram is lost; the transport recovers).
    pub send_errors: u64,
    /// Events dropped because the application did not read them.
    pub events_dropped: u64,
    /// Messages the core refused after they were queued (e.g. larger than
    /// the peer's maximum message size).
    pub sends_refused: u64,
    /// Accepted connections closed because nobody took them.
    pub accept_refused: u64,
}

/// A snapshot of an endpoint: the core's datagram counters and the
/// driver's I/O counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriverStats {
    /// The core endpoint's counters (malformed, spoofed, replayed… drops).
    pub endpoint: EndpointStats,
    /// The driver's socket counters.
    pub io: IoStats,
    /// Connections held now.
    pub connections: usize,
}
