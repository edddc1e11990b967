//! The pipe's errors: one typed variant per cause, so callers and tests can
//! tell them apart without reading messages.
//!
//! The messages a user sees (through `braid send` / `braid recv`) are the
//! `Display` texts here and of [`ProtocolViolation`] (in `frame`, beside
//! the decoders that produce it).

use super::frame::{self, ProtocolViolation, StopReason};
use super::MAX_CONNECTIONS;

/// What can go wrong in a pipe transfer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipeError {
    /// A setting is out of range.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Could not listen.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The peer does not speak this protocol or broke it.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtocolViolation),
    /// Authentication failed, or a code pairing.
    #[error(transparent)]
    Secure(#[from] super::secure::SecureError),
    /// Reading the input failed.
    #[error("reading input: {0}")]
    Input(std::io::Error),
    /// Writing the output failed.
    #[error("writing output failed after {bytes} bytes (all verified): {source}")]
    Output {
        /// Bytes written before the failure.
        bytes: u64,
        /// The OS error.
        source: std::io::Error,
    },
    /// A block failed its checksum at the receiver.
    #[error(
        "block {seq} failed its checksum (connection {conn}); stopped after {bytes} bytes, all verified"
    )]
    Corrupt {
        /// The block.
        seq: u64,
        /// The connection it came on.
        conn: usize,
        /// Bytes written before.
        bytes: u64,
    },
    /// The end-to-end length or digest did not match.
    #[error(
        "end-to-end check failed: sender sent {sent} bytes, {written} written; digests {}",
        if *.digests_match { "match" } else { "differ" }
    )]
    Digest {
        /// Bytes the sender says it sent.
        sent: u64,
        /// Bytes written here.
        written: u64,
        /// True if the BLAKE3 digests agree (then the lengths differ).
        digests_match: bool,
    },
    /// The receiver stopped the transfer.
    #[error("receiver stopped: {reason}; it wrote {bytes} bytes, all verified")]
    ReceiverStopped {
        /// Why.
        reason: StopReason,
        /// Bytes it wrote.
        bytes: u64,
    },
    /// The receiver reported the end before this side reached the end of
    /// its input (a forged or confused peer): nothing is confirmed.
    #[error(
        "the receiver reported the end after {bytes} bytes before the input ended; the transfer is not confirmed"
    )]
    EarlyDone {
        /// Bytes the receiver claimed.
        bytes: u64,
    },
    /// The receiver's count or digest differs from this side's.
    #[error(
        "the receiver confirmed {confirmed} bytes but {sent} were sent; digests {}; the transfer is not confirmed",
        if *.digests_match { "match" } else { "differ" }
    )]
    DoneMismatch {
        /// Bytes this side sent.
        sent: u64,
        /// Bytes the receiver confirmed.
        confirmed: u64,
        /// True if the digest prefixes agree.
        digests_match: bool,
    },
    /// Resume: the receiver's verified prefix is not this input's.
    #[error(
        "cannot resume: the receiver holds {bytes} bytes that differ from this input's first {bytes} (or the input is shorter); not the same file?"
    )]
    ResumeMismatch {
        /// The receiver's prefix length.
        bytes: u64,
    },
    /// Only one side was started with `--resume`.
    #[error("{0}")]
    ResumeOneSided(&'static str),
    /// Every connection failed and reconnecting did not help.
    #[error(
        "lost the receiver: all {conns} connections failed ({last_error}); {acked_bytes} bytes were acknowledged"
    )]
    LostReceiver {
        /// Connections tried.
        conns: usize,
        /// Bytes the receiver acknowledged.
        acked_bytes: u64,
        /// The last error seen.
        last_error: String,
    },
    /// The sender went away before the end of the stream.
    #[error("lost the sender: no connection for {secs} s; {bytes} bytes written, all verified")]
    LostSender {
        /// Seconds waited.
        secs: u64,
        /// Bytes written.
        bytes: u64,
    },
    /// The sender's connections are open but nothing arrived on any of
    /// them (not even a keepalive) for the idle limit: the path is down.
    #[error(
        "lost the sender: nothing arrived for {secs} s (the path may be down); {bytes} bytes written, all verified"
    )]
    SilentSender {
        /// Seconds waited.
        secs: u64,
        /// Bytes written.
        bytes: u64,
    },
    /// The sender gave up (its input failed).
    #[error("the sender aborted the transfer; {bytes} bytes written, all verified")]
    SenderAborted {
        /// Bytes written.
        bytes: u64,
    },
    /// The runtime could not be started.
    #[error("cannot start the runtime: {0}")]
    Runtime(std::io::Error),
}

/// A setting that is out of range (checked before anything is opened).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The sender was given no receiver address.
    #[error("no receiver address given")]
    NoReceiverAddress,
    /// The receiver was given no address to listen on.
    #[error("no listening address given")]
    NoListenAddress,
    /// The connection count is 0 or above [`MAX_CONNECTIONS`].
    #[error("connections must be 1..={MAX_CONNECTIONS}")]
    Connections,
    /// The block size is below 4 KiB or above [`frame::MAX_BLOCK_LEN`].
    #[error("block size must be 4 KiB..={} MiB", frame::MAX_BLOCK_LEN >> 20)]
    BlockSize,
    /// The rate cap is below one byte per second.
    #[error("--rate must be at least 8bit (one byte per second)")]
    Rate,
    /// `paced_connections` is zero or more than the connections.
    #[error("the paced connections must be between 1 and the number of connections")]
    PacedConnections,
    /// `--resume` with the partitioned layout (its blocks are fixed from
    /// the whole size up front).
    #[error("--resume does not work with --layout partitioned")]
    ResumePartitioned,
    /// The fixed socket buffer is out of range.
    #[error(
        "socket buffer must be {} KiB..={} MiB",
        super::net::MIN_SOCKBUF >> 10,
        super::net::MAX_SOCKBUF >> 20
    )]
    SockBuf,
    /// The partitioned layout needs the input size up front.
    #[error("--layout partitioned needs a file whose size is known and fits in the window")]
    PartitionedNeedsSize,
}
