//! Pipe streaming: an ordered, verified byte stream over many TCP
//! connections and paths (seed 003; `braid send` / `braid recv`).
//!
//! The sender cuts its input into numbered blocks, each with a CRC-32, and
//! spreads them over N connections (connection `i` goes to address
//! `i mod A`, so several addresses are several paths). The receiver puts
//! blocks back in order within a bounded reorder window, verifies each block
//! before it writes it, acknowledges blocks, and at the end checks a BLAKE3
//! digest of the whole stream.
//!
//! | module | what it is for |
//! | --- | --- |
//! | [`frame`] | wire format: hello, data/END/ABORT frames, control frames |
//! | [`sched`], [`weighted`], [`reorder`] | re-exports of [`braid_core::bulk`]: the sans-IO scheduler, weighted buffers and reorder window |
//! | [`sender`], [`receiver`] | thread drivers over blocking sockets |
//! | [`net`] | socket set-up (TCP or MPTCP, buffers, timeouts) |
//! | [`stats`] | reports and progress snapshots |
//!
//! Invariants: nothing from the network can make either side panic or
//! allocate without a bound (block length ≤ [`frame::MAX_BLOCK_LEN`] and the
//! hello's limit, at most [`MAX_CONNECTIONS`] connections, window ≤
//! [`MAX_WINDOW_BLOCKS`]); a receiver allocates per-peer state only after a
//! hello with the right magic, version and session; no byte is written before
//! its block's checksum has been verified. The drivers use one lock per side
//! over the scheduler state, taken once per block event (never per byte).
//! The precise rules are in `docs/pipe.md`.

pub mod frame;
pub mod net;
pub mod receiver;
pub mod sender;
pub mod stats;

pub use braid_core::bulk::{reorder, sched, weighted};

pub use receiver::{Receiver, RecvConfig};
pub use sched::{Layout, Mode};
pub use sender::{send, SendConfig};
pub use stats::{Progress, RecvReport, SendReport};

/// Most connections one session may use.
pub const MAX_CONNECTIONS: usize = 64;
/// Largest reorder window in blocks.
pub const MAX_WINDOW_BLOCKS: u64 = 65_536;
/// Default block size (256 KiB).
pub const DEFAULT_BLOCK: u32 = 256 << 10;
/// Default reorder window in bytes (64 MiB).
pub const DEFAULT_WINDOW_BYTES: u64 = 64 << 20;

/// What can go wrong in a pipe transfer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PipeError {
    /// A setting is out of range.
    #[error("{0}")]
    Config(String),
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
    Protocol(String),
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
    /// The end-to-end digest or length did not match.
    #[error("end-to-end check failed: {0}")]
    Digest(String),
    /// The receiver stopped the transfer.
    #[error("receiver stopped: {reason}; it wrote {bytes} bytes, all verified")]
    ReceiverStopped {
        /// Why.
        reason: frame::StopReason,
        /// Bytes it wrote.
        bytes: u64,
    },
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
    /// The sender gave up (its input failed).
    #[error("the sender aborted the transfer; {bytes} bytes written, all verified")]
    SenderAborted {
        /// Bytes written.
        bytes: u64,
    },
}
