//! The driver's counters: what [`super::Endpoint::stats`] returns.
//!
//! Main types: [`DriverStats`] (a snapshot of an endpoint) and [`IoStats`]
//! (the driver's socket and channel counters, with [`TcpStats`] for
//! datagrams over TCP).

use super::EndpointStats;

/// Counters of the driver's socket I/O.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IoStats {
    /// Datagrams read from the socket.
    pub datagrams_received: u64,
    /// Datagrams written to the socket.
    pub datagrams_sent: u64,
    /// Send calls made, failed ones included (one GSO send carries
    /// several datagrams).
    pub sends: u64,
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
    /// Datagrams over TCP (paths that run over TCP; all zero otherwise).
    pub tcp: TcpStats,
}

/// Counters of datagrams over TCP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TcpStats {
    /// Connections made or accepted.
    pub connections: u64,
    /// Datagrams dropped: the connection's send buffer was full, or there
    /// was no connection to the destination.
    pub dropped: u64,
    /// Connections closed for a frame with a bad length.
    pub bad_frames: u64,
    /// Connections refused because the server held [`MAX_TCP_PEERS`](super::tcp::MAX_TCP_PEERS).
    pub refused: u64,
    /// Connections that ended (closed by the peer, or an error).
    pub closed: u64,
}

impl std::ops::AddAssign for TcpStats {
    fn add_assign(&mut self, o: TcpStats) {
        self.connections += o.connections;
        self.dropped += o.dropped;
        self.bad_frames += o.bad_frames;
        self.refused += o.refused;
        self.closed += o.closed;
    }
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
