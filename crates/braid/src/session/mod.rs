//! Sessions on real sockets (seed 000 §III–V): an application's streams,
//! each with its guarantee, carried over several measured paths — direct,
//! through relays, or from chosen local interfaces — to a sink on another
//! host.
//!
//! The state machines are `braid_core::session`'s; this module runs them.
//! One driver task per source session owns the sans-IO
//! [`braid_core::session::Session`], its IQ-RUDP connections and its UDP
//! sockets, and one per listener owns a [`braid_core::session::SinkHost`]
//! with all its sessions (batched GSO/GRO I/O, shared with [`crate::rudp`]); the
//! application holds handles that talk to it over bounded channels. No lock
//! sits in the data path.
//!
//! | type | side | what it is |
//! | --- | --- | --- |
//! | [`Session`] | source | [`Session::connect`], [`Session::open_stream`], [`Session::next_event`], [`Session::snapshot`], [`Session::answer_upcall`], [`Session::close`] |
//! | [`Stream`] | source | one stream: [`Stream::send`] awaits under backpressure; [`Stream::finish`] |
//! | [`SessionListener`] | sink | a bound port: [`SessionListener::accept`] yields one [`IncomingSession`] per source, several at once ([`ListenerConfig::max_sessions`]) |
//! | [`IncomingSession`] | sink | [`IncomingSession::recv`] yields each stream's messages; events; snapshot |
//! | [`feed`] | source | where a stream's bytes come from (a file, stdin, `cbr:RATE`, `trace:FILE`) and the loop that feeds a [`Stream`] |
//! | [`PathConfig`] | source | `direct`, `via=HOST:PORT[,…]`, `bind=ADDR`, `tcp` (see [`path`]) |
//! | [`SessionConfig`], [`ListenerConfig`] | both | settings |
//! | [`SessionError`] | both | what can go wrong |
//!
//! A path may run its first hop over one TCP connection where UDP is
//! blocked (`direct+tcp`, `via=R:P+tcp`; [`crate::rudp::tcp`]): sinks and
//! relays listen on TCP at their UDP address. It costs head-of-line
//! blocking inside that path (docs/sessions.md, "Paths over TCP").
//!
//! # Example
//! A sink and a source on loopback, one guaranteed stream:
//! ```
//! use braid::session::{ListenerConfig, PathConfig, Session, SessionConfig, SessionListener};
//! use braid_core::scheduler::StreamSpec;
//! use braid_core::session::StreamConfig;
//! use braid_core::units::Bandwidth;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut listener = SessionListener::bind("127.0.0.1:0".parse()?, ListenerConfig::default())?;
//! let sink_addr = listener.local_addr();
//! let sink = tokio::spawn(async move {
//!     let mut incoming = listener.accept().await?;
//!     let mut got = Vec::new();
//!     while let Some(m) = incoming.recv().await {
//!         got.extend_from_slice(&m.data);
//!     }
//!     Ok::<_, braid::session::SessionError>(got)
//! });
//!
//! let config = SessionConfig {
//!     paths: vec![PathConfig::direct()],
//!     ..SessionConfig::default()
//! };
//! let session = Session::connect(sink_addr, config).await?;
//! let spec = StreamSpec::min_rate(Bandwidth::from_kbps(500), 0.95)?;
//! let mut atoms = session.open_stream(StreamConfig::new(spec).with_name("atoms")).await?;
//! for i in 0..100u8 {
//!     atoms.send(vec![i; 1000].into()).await?;
//! }
//! atoms.finish().await?;
//! session.close().await?;
//! assert_eq!(sink.await??.len(), 100 * 1000);
//! # Ok(())
//! # }
//! ```
//!
//! # Invariants
//! - Backpressure: a stream's messages wait in its bounded channel
//!   ([`STREAM_QUEUE`]) until the core session takes them, which it does
//!   only within the stream's window and the session's byte bound; so
//!   [`Stream::send`] awaits while the paths are full.
//! - A sink's received messages wait in a bounded channel
//!   ([`RECV_QUEUE`]); while it is full the core keeps them, its
//!   acknowledgements stop, and the source's windows close.
//! - Events go to a bounded channel ([`EVENT_QUEUE`]); when the
//!   application does not read them, newer ones are dropped and counted.
//! - A session whose every path has been down for
//!   [`SessionConfig::peer_timeout`] ends with
//!   [`CloseReason::PeerLost`]: a dead peer is noticed in seconds, not at
//!   the transport's idle timeout.

mod driver;
pub mod feed;
mod msg;
pub mod path;
mod sink;
mod sink_driver;
mod source;
pub mod store;

pub use braid_core::session::{
    CloseReason, Event, HopSnapshot, PathSnapshot, Snapshot, StreamConfig, StreamSnapshot,
};
pub use msg::Message;
pub use path::{PathConfig, PathSyntaxError, Route};
pub use sink::{
    IncomingSession, ListenerConfig, SessionListener, SinkItem, DEFAULT_SESSION_QUOTA,
    DEFAULT_SOURCE_QUOTA,
};
pub use source::{Session, Stream, CLOSE_TIMEOUT};

use crate::rudp::RudpError;
use braid_core::session::SessionConfig as CoreConfig;
use braid_core::Duration;
use std::net::SocketAddr;

/// Commands from handles to a session's driver waiting to be taken.
pub const COMMAND_QUEUE: usize = 64;
/// Messages a stream may have waiting for the driver before
/// [`Stream::send`] awaits (on top of the core's window and byte bound).
pub const STREAM_QUEUE: usize = 16;
/// Received messages waiting for the sink application.
pub const RECV_QUEUE: usize = 1024;
/// Events waiting for the application.
pub const EVENT_QUEUE: usize = 1024;
/// Default of [`SessionConfig::peer_timeout`].
pub const PEER_TIMEOUT: Duration = Duration::from_secs(3);

/// Settings of a source session.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The session's settings: scheduler, estimator window, transport,
    /// bounds (braid-core's; its `peer_timeout` is overridden by
    /// [`SessionConfig::peer_timeout`]).
    pub core: CoreConfig,
    /// The paths, in order (path ids 0, 1, …). Empty means one `direct`.
    pub paths: Vec<PathConfig>,
    /// How long [`Session::connect`] waits for the first path to come up.
    pub connect_timeout: Duration,
    /// End the session once every path has been down this long.
    pub peer_timeout: Duration,
    /// `SO_SNDBUF` / `SO_RCVBUF` requested for each socket.
    pub socket_buffer: usize,
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            core: CoreConfig {
                // Light streams leave paths app-limited: measure them anyway.
                probe: Some(braid_core::session::probe::ProbeConfig::default()),
                ..CoreConfig::default()
            },
            paths: Vec::new(),
            connect_timeout: Duration::from_secs(5),
            peer_timeout: PEER_TIMEOUT,
            socket_buffer: 4 << 20,
        }
    }
}

/// What can go wrong with a session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// A session setting or call was refused by the state machine.
    #[error(transparent)]
    Core(#[from] braid_core::session::SessionError),
    /// The transport settings are invalid.
    #[error(transparent)]
    Config(#[from] braid_core::transport::ConfigError),
    /// A socket could not be bound, or randomness was unavailable.
    #[error(transparent)]
    Rudp(#[from] RudpError),
    /// A TCP path's socket could not be bound.
    #[error("cannot bind a TCP socket to {addr}: {source}")]
    TcpBind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The listener cannot listen on TCP at its UDP socket's address.
    #[error("cannot listen on TCP {addr}: {source} (set accept_tcp to false to serve UDP only)")]
    TcpListen {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// A relay's `HOST:PORT` did not resolve.
    #[error("path {path}: cannot resolve relay {host}: {why}")]
    Resolve {
        /// The path.
        path: String,
        /// The relay.
        host: String,
        /// Why.
        why: String,
    },
    /// No path reached the sink: each was refused, or none answered
    /// within the connect timeout.
    #[error("no path reached the sink at {sink}: {details}")]
    NoPath {
        /// The sink.
        sink: SocketAddr,
        /// The timeout.
        after: Duration,
        /// What became of each path.
        details: String,
    },
    /// The session is over.
    #[error("session over: {0}")]
    Closed(CloseReason),
    /// The session's driver has stopped.
    #[error("the session's driver has stopped")]
    DriverGone,
    /// No tokio runtime is running.
    #[error("no tokio runtime: start sessions from within one")]
    NoRuntime,
}

/// Binds one UDP socket per address for a driver.
fn bind_all(
    addrs: &[SocketAddr],
    socket_buffer: usize,
) -> Result<Vec<crate::rudp::sockets::Socket>, SessionError> {
    let mut out = Vec::with_capacity(addrs.len());
    for &a in addrs {
        let io = crate::rudp::bind_udp(a, socket_buffer)?;
        let s = crate::rudp::sockets::Socket::new(Box::new(io))
            .map_err(|source| RudpError::Bind { addr: a, source })?;
        out.push(s);
    }
    Ok(out)
}
