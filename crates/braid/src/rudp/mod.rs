//! The tokio runtime of braid's adaptive reliable UDP transport (IQ-RUDP,
//! seed 002 §2; the protocol is `docs/PROTOCOL.md`, the state machines are
//! `braid_core::transport`).
//!
//! One driver task per UDP socket owns the sans-IO
//! [`braid_core::transport::Endpoint`] and every connection on it. The
//! application holds cheap handles that talk to the driver over bounded
//! tokio channels; nothing in the data path is shared behind a lock.
//!
//! | type | what it is |
//! | --- | --- |
//! | [`Endpoint`] | a bound UDP socket: [`Endpoint::connect`], [`Endpoint::accept`], [`Endpoint::stats`] |
//! | [`Connection`] | one connection: [`Connection::open_stream`], [`Connection::recv`], [`Connection::next_event`], [`Connection::stats`], [`Connection::finish`], [`Connection::close`] |
//! | [`SendStream`] | a stream of messages of one reliability class; [`SendStream::send`] awaits when the transport's send queue is full |
//! | [`EndpointConfig`] | transport settings plus the runtime's (server or not, handshake timeout, socket buffers) |
//! | [`DriverStats`] | the endpoint's counters: the core's drops (malformed, spoofed, replayed…) and the driver's I/O |
//! | [`RudpError`] | what can go wrong, one variant per cause |
//! | [`io`] | the [`AsyncUdpSocket`] trait and batched kernel UDP I/O ([`UdpIo`]: GSO/GRO over quinn-udp) |
//! | [`mem`] | in-memory sockets ([`mem::MemNet`]) to run drivers without the kernel |
//! | [`tcp`] | datagrams over TCP ([`tcp::TcpClient`], [`tcp::TcpServer`]) for paths where UDP is blocked |
//!
//! Inside: `msg` holds the handle ↔ driver messages, `connection` and
//! `endpoint` the handles, `driver` the task, `stats` its counters; each
//! imports `msg`, none imports the others in a circle.
//!
//! # Driving (see `driver.rs`)
//!
//! One driver task owns one or more sockets ([`Endpoint::bind`],
//! [`Endpoint::bind_many`], [`Endpoint::with_sockets`]). A datagram
//! received on a socket is handed to the core with the path it travelled
//! (the socket's local address and the sender), and each datagram the core
//! sends leaves through the socket bound to its path's local address.
//!
//! The driver is a hand-written future. Each time it runs it: takes
//! commands; reads datagrams (at most [`RECV_BATCH`] per round, the sockets
//! taking turns) into `handle_datagram`; runs due timers; moves events and received messages
//! to the connections' channels and queued messages from them into the
//! core; and writes everything `poll_transmit` yields (at most
//! [`SEND_BATCH`] per round). Time comes from [`crate::clock::now`] only.
//! Timers are tokio sleeps mapped from braid instants; a deadline closer
//! than [`SPIN_THRESHOLD`] (packet pacing at high rates, finer than the
//! tokio timer's millisecond) is met by yielding to the scheduler instead.
//!
//! I/O is batched through quinn-udp ([`io`]): consecutive datagrams to one
//! peer leave in one GSO send, and receives use GRO and `recvmmsg`, where
//! the kernel offers them. The socket buffers are enlarged to
//! [`EndpointConfig::socket_buffer`] so bursts are not dropped locally.
//!
//! # Authentication
//!
//! Set `EndpointConfig::transport.psk` (from [`crate::key::Key::read`]) on
//! both ends: a server then creates connections only for clients holding
//! the same key, and [`Endpoint::connect`] succeeds only against such a
//! server; a refusal fails at once with [`RudpError::ConnectFailed`], whose
//! text says which side's key was wrong or missing (docs/SECURITY.md).
//!
//! # Invariants
//! - Backpressure: a connection's queued messages move from its bounded
//!   channel ([`EndpointConfig::send_queue_messages`], default
//!   [`SEND_QUEUE_MESSAGES`]) into the core only while the core's send
//!   queue has room, so [`SendStream::send`] awaits when it is full. What a
//!   writer faster than the path can have queued is therefore the core's
//!   bound (`Config::send_queue_bytes`, or a few congestion windows with
//!   `Config::send_queue_cwnds`) plus that many messages.
//! - Received messages go to a bounded channel ([`RECV_QUEUE_MESSAGES`]);
//!   while it is full the driver leaves them in the core, whose
//!   flow-control credit then stops the peer.
//! - Events go to a bounded channel ([`EVENT_QUEUE`]); when the
//!   application does not read them, newer ones are dropped and counted.
//! - Per-message ordering of sends and [`Connection::finish`] is kept: both
//!   travel on the same channel.

mod connection;
mod driver;
mod endpoint;
pub mod io;
pub(crate) mod listen;
pub mod mem;
mod msg;
pub(crate) mod sockets;
mod stats;
pub mod tcp;

pub use braid_core::transport::{
    AdaptReport, CloseReason, Condition, Config, CongestionKind, EndpointStats, ErrorCode, Event,
    Reliability, SendOptions, Stats, StreamId, ThresholdEvent, ThresholdId,
};
pub use connection::{Connection, Message, SendStream};
pub(crate) use endpoint::bind_udp;
pub use endpoint::Endpoint;
pub use io::{AsyncUdpSocket, UdpIo};
pub use stats::{DriverStats, IoStats, TcpStats};

use braid_core::Duration;
use std::net::SocketAddr;

/// Commands from handles to a driver waiting to be taken.
pub const COMMAND_QUEUE: usize = 256;
/// Messages a connection may have queued for the driver before `send`
/// awaits (on top of the core's `Config::send_queue_bytes`).
pub const SEND_QUEUE_MESSAGES: usize = 64;
/// Received messages waiting for the application per connection.
pub const RECV_QUEUE_MESSAGES: usize = 256;
/// Events waiting for the application per connection.
pub const EVENT_QUEUE: usize = 256;
/// Accepted connections waiting for [`Endpoint::accept`].
pub const ACCEPT_QUEUE: usize = 64;
/// Datagrams read per driver round before other work gets a turn.
pub const RECV_BATCH: usize = 256;
/// Sends (each a GSO batch of datagrams, or one) per driver round before
/// other work gets a turn.
pub const SEND_BATCH: usize = 16;
/// Rounds of work per wake-up before the driver yields to other tasks.
pub const MAX_ROUNDS: usize = 16;
/// Timer deadlines closer than this are met by yielding, not sleeping.
pub const SPIN_THRESHOLD: Duration = Duration::from_micros(250);
/// Capacity of the buffer a datagram waits in when it could not join the
/// GSO batch it was built in.
pub const RECV_BUFFER: usize = 2048;

/// Settings of an [`Endpoint`].
#[derive(Debug, Clone)]
pub struct EndpointConfig {
    /// The transport's settings (checked by `Config::validate`).
    pub transport: Config,
    /// Whether to accept incoming connections.
    pub server: bool,
    /// How long [`Endpoint::connect`] waits for the handshake.
    pub handshake_timeout: Duration,
    /// `SO_SNDBUF` and `SO_RCVBUF` requested for the socket (the kernel
    /// may cap it at `net.core.{w,r}mem_max`).
    pub socket_buffer: usize,
    /// Messages a connection may have queued for the driver before `send`
    /// awaits (default [`SEND_QUEUE_MESSAGES`]; at least 1). With large
    /// messages this adds to the core's send queue: keep it small, with
    /// `Config::send_queue_cwnds`, when a writer's latency matters.
    pub send_queue_messages: usize,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        EndpointConfig {
            transport: Config::default(),
            server: false,
            handshake_timeout: Duration::from_secs(5),
            socket_buffer: 4 << 20,
            send_queue_messages: SEND_QUEUE_MESSAGES,
        }
    }
}

impl EndpointConfig {
    /// Default settings for an endpoint that accepts connections.
    pub fn server() -> Self {
        EndpointConfig {
            server: true,
            ..EndpointConfig::default()
        }
    }
}

/// What can go wrong with the RUDP runtime.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RudpError {
    /// A transport setting is out of range.
    #[error(transparent)]
    Config(#[from] braid_core::transport::ConfigError),
    /// The socket could not be created or bound.
    #[error("cannot bind UDP socket to {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The operating system's random number generator failed.
    #[error("cannot read OS randomness for the endpoint secret: {0}")]
    Random(String),
    /// No handshake completed within the handshake timeout.
    #[error("no answer from {remote} within {after} (is a braid RUDP server listening there?)")]
    ConnectTimeout {
        /// Where we tried to connect.
        remote: SocketAddr,
        /// The timeout.
        after: Duration,
    },
    /// The connection closed before the handshake completed. With
    /// [`ErrorCode::AUTH_FAILED`] the text says which side's key was
    /// missing or wrong.
    #[error("{}", connect_failure(remote, reason))]
    ConnectFailed {
        /// Where we tried to connect.
        remote: SocketAddr,
        /// Why it closed.
        reason: CloseReason,
    },
    /// The endpoint has as many connections as it may hold.
    #[error("too many connections on this endpoint")]
    TooManyConnections,
    /// The endpoint does not accept connections (`server` is false).
    #[error("this endpoint does not accept connections")]
    NotServer,
    /// The endpoint's driver has stopped (socket error or every handle
    /// dropped).
    #[error("the endpoint's driver has stopped")]
    EndpointClosed,
    /// The connection is closed.
    #[error("connection closed")]
    ConnectionClosed,
    /// The message is larger than the maximum message size.
    #[error("message of {size} bytes exceeds the maximum message size of {max} bytes")]
    MessageTooLarge {
        /// The message's size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// A time to live over the protocol's bound of one hour.
    #[error("time to live longer than one hour")]
    InvalidTtl,
    /// No tokio runtime is running (bind inside one).
    #[error("no tokio runtime: bind the endpoint from within one")]
    NoRuntime,
    /// No socket of the endpoint is bound to this local address.
    #[error("no socket of this endpoint is bound to {0}")]
    UnknownLocalAddress(SocketAddr),
    /// An endpoint needs at least one socket.
    #[error("an endpoint needs at least one socket")]
    NoSocket,
    /// Every stream id is in use.
    #[error("no stream id left on this connection")]
    TooManyStreams,
    /// The core refused a threshold condition.
    #[error(transparent)]
    Threshold(#[from] braid_core::transport::thresholds::ThresholdError),
}

/// The one-line text of [`RudpError::ConnectFailed`]: for an
/// authentication failure, what the user should check.
fn connect_failure(remote: &SocketAddr, reason: &CloseReason) -> String {
    use braid_core::transport::auth::{
        REASON_KEY_REQUIRED, REASON_MODE_MISMATCH_PREFIX, REASON_NO_KEY,
    };
    match reason {
        CloseReason::Peer { code, reason } if *code == ErrorCode::AUTH_FAILED => {
            match reason.as_str() {
                REASON_KEY_REQUIRED => format!(
                    "the peer at {remote} requires a key and we gave none (give --key FILE with the peer's key)"
                ),
                REASON_NO_KEY => format!(
                    "the peer at {remote} has no key but we gave one (start the peer with the same --key, or drop ours)"
                ),
                r if r.starts_with(REASON_MODE_MISMATCH_PREFIX) => format!(
                    "the peer at {remote} refused us: {r} (give both sides --no-encrypt, or neither)"
                ),
                _ => format!("the peer at {remote} refused our key (wrong --key, or none given)"),
            }
        }
        CloseReason::Peer { code, reason } if *code == ErrorCode::SERVER_BUSY => {
            // The server's phrase starts with "server full" when it is one
            // of its connection caps; say so either way.
            let detail = reason
                .strip_prefix(braid_core::transport::REASON_SERVER_FULL_PREFIX)
                .map_or(reason.as_str(), |r| r.trim_start_matches(':').trim_start());
            format!("server full: the server at {remote} refused a new connection ({detail})")
        }
        CloseReason::Local(code) if *code == ErrorCode::AUTH_FAILED => format!(
            "the peer at {remote} did not prove it holds our key (it has another key, or none): refused it"
        ),
        other => format!("connection to {remote} failed: {other:?}"),
    }
}

/// 32 bytes from the operating system's random number generator (the
/// endpoint secret that keys cookies and connection ids).
pub(crate) fn os_secret() -> Result<[u8; 32], RudpError> {
    use rand::TryRngCore;
    let mut secret = [0u8; 32];
    rand::rngs::OsRng
        .try_fill_bytes(&mut secret)
        .map_err(|e| RudpError::Random(e.to_string()))?;
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_failures_read_as_what_to_check() {
        use braid_core::transport::auth;
        let remote: SocketAddr = "10.0.0.1:7401".parse().unwrap();
        let peer = |r: &str| RudpError::ConnectFailed {
            remote,
            reason: CloseReason::Peer {
                code: ErrorCode::AUTH_FAILED,
                reason: r.into(),
            },
        };
        let wrong = peer(auth::REASON_KEY_MISMATCH).to_string();
        assert_eq!(
            wrong,
            "the peer at 10.0.0.1:7401 refused our key (wrong --key, or none given)"
        );
        assert!(peer(auth::REASON_KEY_REQUIRED)
            .to_string()
            .contains("requires a key"));
        assert!(peer(auth::REASON_NO_KEY).to_string().contains("has no key"));
        let mode =
            peer("encryption mode mismatch: the client has --no-encrypt but the server encrypts")
                .to_string();
        assert!(
            mode.contains("--no-encrypt") && mode.contains("both sides"),
            "{mode}"
        );
        let local = RudpError::ConnectFailed {
            remote,
            reason: CloseReason::Local(ErrorCode::AUTH_FAILED),
        };
        assert!(local.to_string().contains("did not prove it holds our key"));
    }

    #[test]
    fn a_full_server_reads_as_server_full() {
        use braid_core::transport::{REASON_SERVER_FULL, REASON_SERVER_FULL_SOURCE};
        let remote: SocketAddr = "10.0.0.1:7401".parse().unwrap();
        let full = |r: &str| {
            RudpError::ConnectFailed {
                remote,
                reason: CloseReason::Peer {
                    code: ErrorCode::SERVER_BUSY,
                    reason: r.into(),
                },
            }
            .to_string()
        };
        let total = full(REASON_SERVER_FULL);
        assert_eq!(
            total,
            "server full: the server at 10.0.0.1:7401 refused a new connection (no room for another connection)"
        );
        let source = full(REASON_SERVER_FULL_SOURCE);
        assert!(
            source.starts_with("server full:") && source.contains("from this address"),
            "{source}"
        );
        assert!(!total.contains("listening"), "not mistaken for no server");
    }

    #[test]
    fn secrets_differ() {
        let a = os_secret().unwrap();
        let b = os_secret().unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn default_config_is_valid() {
        EndpointConfig::default().transport.validate().unwrap();
        assert!(EndpointConfig::server().server);
    }
}
