//! braid's adaptive reliable UDP transport (IQ-RUDP; seed 002 §2-3, seed
//! 001 §3.2), sans-IO.
//!
//! An [`Endpoint`] owns the connections of one UDP socket: it answers new
//! clients statelessly with a cookie ([`cookie`]) and creates a
//! [`Connection`] only when a client echoes a valid one. A `Connection` is a
//! coordinator over small parts, one concern each:
//!
//! | part | concern |
//! | --- | --- |
//! | [`recovery`] | packet numbers, SACK processing, RTT ([`rtt`]), loss detection, probe timeout |
//! | [`ack`] | which packets arrived, duplicates, when to acknowledge |
//! | [`congestion`] | the [`CongestionController`] trait: CUBIC (default), NewReno, fixed rate |
//! | [`pacing`] | spreading a window over the round trip |
//! | [`send`], [`recv`] | message streams: classes, fragmentation, deadlines, discarding, reassembly, flow control |
//! | [`stats`] | the [`Stats`] snapshot; per-interval [`RateSample`](crate::estimate::RateSample)s come from `Connection::poll_rate_sample` |
//! | [`thresholds`] | application-registered conditions and their events |
//! | [`coordination`] | seed 002 §3's re-adjustments after an application adaptation |
//!
//! # Driving
//!
//! Nothing here reads a clock or touches a socket. The driver (braid-sim or
//! the tokio runtime in crate `braid`) loops:
//!
//! 1. hand every received datagram to [`Endpoint::handle_datagram`] with
//!    the [`FourTuple`] it travelled (peer address, and the local address
//!    it arrived on when the driver knows it);
//! 2. send everything [`Endpoint::poll_transmit`] returns, on the
//!    [`Transmit::path`] it names;
//! 3. sleep until [`Endpoint::poll_timeout`] (or the next datagram) and call
//!    [`Endpoint::handle_timeout`] then;
//! 4. drain [`Connection::poll_event`] and [`Connection::recv`].
//!
//! Randomness (connection ids, the cookie secret, the seeds of the
//! handshake's ephemeral keys) comes in as a 32-byte secret at
//! [`Endpoint::new`]; everything is derived from it with a keyed hash.
//!
//! # Authentication
//!
//! With [`Config::psk`] set on both sides, the cookie handshake carries a
//! Noise `NNpsk0` handshake ([`auth`]): a server creates a connection only
//! for a client that proves it holds the same key, and a client counts its
//! connection established only once the server proved it too. A refused
//! client hears a stateless CLOSE with [`ErrorCode::AUTH_FAILED`].
//!
//! Every DATA packet of a keyed connection is then sealed with the keys the
//! handshake derived ([`protection`]): ChaCha20-Poly1305 over the frames
//! with the cleartext header as associated data, or, with
//! [`Config::protection`] set to [`Protection::IntegrityOnly`]
//! (`--no-encrypt`), a tag over header and frames in clear. A packet that
//! does not open is dropped and counted before it touches the connection
//! ([`Stats::decrypt_failed`], [`EndpointStats::decrypt_failed`]); an
//! authentic packet whose number was already received is a replay
//! ([`Stats::replayed`]).

pub mod ack;
pub mod auth;
pub mod congestion;
mod connection;
pub mod cookie;
pub mod coordination;
mod endpoint;
pub mod fast;
#[cfg(any(test, fuzzing, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod pacing;
pub mod protection;
pub mod recovery;
pub mod recv;
pub mod rtt;
pub mod send;
pub mod sent_log;
pub mod stats;
mod stream_table;
pub mod suite;
pub mod thresholds;
mod wakeups;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_auth;
#[cfg(test)]
mod tests_caps;
#[cfg(test)]
mod tests_protection;

pub use auth::Psk;
pub use congestion::CongestionController;
pub use connection::{
    CloseReason, Connection, Event, Side, MAX_HANDSHAKE_SENDS, RATE_SAMPLE_QUEUE,
};
pub use endpoint::{
    Batch, ConnectError, ConnectionHandle, Endpoint, EndpointStats, REASON_HANDSHAKE_EXPIRED,
    REASON_SERVER_FULL, REASON_SERVER_FULL_PREFIX, REASON_SERVER_FULL_SOURCE,
};
pub use protection::Protection;
pub use recv::ReceivedMessage;
pub use send::{SendError, SendOptions, SendRefused};
pub use stats::{ClassCounters, Stats};
pub use thresholds::{Condition, ThresholdEvent, ThresholdId};

pub use crate::wire::{
    AdaptAction, AdaptCond, AdaptFrame as AdaptReport, AdaptWhen, ErrorCode, Ratio, Reliability,
    StreamId,
};

use crate::time::Duration;
use crate::units::Bandwidth;
use crate::wire::{MAX_DATAGRAM_SIZE, MAX_IDLE_TIMEOUT_MS, MAX_MESSAGE_SIZE, MIN_DATAGRAM_SIZE};
use std::net::SocketAddr;

/// The path a datagram travels: the peer's address and, when the driver
/// knows it, the local address it arrived on or must leave from (quinn-proto
/// calls this a four-tuple).
///
/// A driver with one socket may leave `local` at `None`; a driver with
/// several sockets fills it from each datagram's destination address and
/// sends every [`Transmit`] from the socket bound to its `local`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FourTuple {
    /// The local address, if known.
    pub local: Option<SocketAddr>,
    /// The peer's address.
    pub remote: SocketAddr,
}

impl FourTuple {
    /// A path to or from `remote` whose local address is not known.
    pub const fn from_remote(remote: SocketAddr) -> Self {
        FourTuple {
            local: None,
            remote,
        }
    }

    /// A path between `local` and `remote`.
    pub const fn new(local: SocketAddr, remote: SocketAddr) -> Self {
        FourTuple {
            local: Some(local),
            remote,
        }
    }

    /// Whether a datagram that travelled `other` belongs on this path: the
    /// same peer, and the same local address where both are known.
    pub fn admits(&self, other: &FourTuple) -> bool {
        self.remote == other.remote
            && match (self.local, other.local) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

/// A datagram to send: its bytes are in the buffer given to `poll_transmit`
/// (all of it), or the last `size` bytes of the one given to
/// `poll_transmit_append`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// The path to send it on: to `path.remote`, from the socket bound to
    /// `path.local` when that is known.
    pub path: FourTuple,
    /// How many bytes it is.
    pub size: usize,
}

/// Which congestion controller a connection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CongestionKind {
    /// Slow start and AIMD (TCP-friendly like the seed's LDA).
    NewReno,
    /// CUBIC (RFC 9438), the default.
    Cubic,
    /// FAST (delay-based: keeps a few packets queued at the bottleneck
    /// instead of filling it), for paths that carry guarantees
    /// ([`fast`]).
    Fast,
    /// A fixed rate, for reserved capacity.
    Fixed(Bandwidth),
}

/// Smallest send-queue bound when it follows the congestion window
/// ([`Config::send_queue_cwnds`]).
pub const SEND_QUEUE_FLOOR: u64 = 64 << 10;

/// Default [`Config::max_connections_per_source`]: connections a server
/// holds for one source IP address, so that one party cannot take every
/// slot of [`Config::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS_PER_SOURCE: usize = 64;

/// Default [`Config::handshake_timeout`]: how long a server connection
/// waits for the client's first packet after its HANDSHAKE.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Connection and endpoint settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Largest UDP payload to send (1200..=1472).
    pub max_datagram_size: usize,
    /// Largest message this endpoint accepts (and advertises).
    pub max_message_size: u64,
    /// Reliable bytes the peer may have outstanding (flow-control window);
    /// at least `max_message_size`.
    pub recv_window: u64,
    /// Bound on buffered non-reliable bytes on receive.
    pub max_unreliable_buffer: u64,
    /// Bound on queued (unsent or unacknowledged) bytes on send.
    pub send_queue_bytes: u64,
    /// When positive, the send queue also holds at most this many
    /// congestion windows (but at least [`SEND_QUEUE_FLOOR`] bytes), like
    /// TCP's send-buffer autotuning: a writer faster than the path then
    /// waits with about one round trip of data queued behind what is in
    /// flight, instead of `send_queue_bytes` worth (seconds on a slow
    /// wide-area path). 0 (the default) bounds by `send_queue_bytes` only.
    pub send_queue_cwnds: u64,
    /// Fraction of non-reliable messages this endpoint accepts to lose as a
    /// receiver (seed 002 §2.1); the peer's sender discards within it.
    pub loss_tolerance: Ratio,
    /// Close after this long without receiving anything (0 = never).
    pub idle_timeout: Duration,
    /// Send a PING after this long without sending anything ack-eliciting.
    /// While the connection stays idle the interval backs off (doubling up
    /// to a third of the idle timeout), and a server pings only when its
    /// client has stopped (`transport::connection::keep_alive`).
    pub keep_alive: Option<Duration>,
    /// Longest this endpoint delays an ACK.
    pub max_ack_delay: Duration,
    /// RTT assumed before the first sample.
    pub initial_rtt: Duration,
    /// Length of the interval for loss ratio and delivery rate (and for
    /// threshold evaluation).
    pub stats_interval: Duration,
    /// The congestion controller.
    pub congestion: CongestionKind,
    /// Whether to pace packets.
    pub pacing: bool,
    /// Whether application adaptation reports re-adjust the transport
    /// (IQ-RUDP); `false` is the seed's uncoordinated RUDP baseline.
    pub coordination: bool,
    /// Most connections an endpoint holds; a server refuses a new client
    /// beyond it with a stateless "server full" CLOSE
    /// ([`ErrorCode::SERVER_BUSY`](crate::wire::ErrorCode::SERVER_BUSY)).
    pub max_connections: usize,
    /// Most connections a server holds for one source IP address; beyond
    /// it a new client from that address is refused like above.
    pub max_connections_per_source: usize,
    /// How long a server connection waits, after sending its HANDSHAKE,
    /// for the client's first packet (which confirms the handshake); it
    /// then closes silently and frees its slot. It resends the HANDSHAKE
    /// at most [`MAX_HANDSHAKE_SENDS`] times in all.
    pub handshake_timeout: Duration,
    /// The pre-shared key both ends must hold (see [`auth`]); `None` (the
    /// default) runs the unauthenticated version-2 handshake, which only a
    /// peer without a key accepts.
    pub psk: Option<Psk>,
    /// How a keyed connection protects its packets (both ends must agree;
    /// see [`protection`]): encrypted and authenticated (the default), or
    /// authenticated only. Ignored without a key.
    pub protection: Protection,
    /// A client sends at most this many INITIALs to a peer that has not
    /// answered yet (no RETRY): an address that is not a braid server gets
    /// no more than a handshake's bytes. `None` (the default): until the
    /// connect gives up. A relay sets it, so it cannot be made to send a
    /// third party more than the source sent it.
    pub max_unanswered_initials: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_datagram_size: 1400,
            max_message_size: 1 << 20,
            recv_window: 8 << 20,
            max_unreliable_buffer: 4 << 20,
            send_queue_bytes: 16 << 20,
            send_queue_cwnds: 0,
            loss_tolerance: Ratio::ZERO,
            idle_timeout: Duration::from_secs(30),
            keep_alive: Some(Duration::from_secs(10)),
            max_ack_delay: Duration::from_millis(25),
            initial_rtt: Duration::from_millis(100),
            stats_interval: Duration::from_millis(100),
            congestion: CongestionKind::Cubic,
            pacing: true,
            coordination: true,
            max_connections: 1024,
            max_connections_per_source: DEFAULT_MAX_CONNECTIONS_PER_SOURCE,
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            psk: None,
            protection: Protection::Encrypt,
            max_unanswered_initials: None,
        }
    }
}

/// A setting out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Which setting and why.
    #[error("invalid transport setting {0}")]
    Invalid(&'static str),
}

impl Config {
    /// Checks every setting against the protocol's bounds.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the first bad setting.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |s| Err(ConfigError::Invalid(s));
        if !(MIN_DATAGRAM_SIZE..=MAX_DATAGRAM_SIZE).contains(&self.max_datagram_size) {
            return bad("max_datagram_size: must be 1200..=1472");
        }
        if self.max_message_size > MAX_MESSAGE_SIZE {
            return bad("max_message_size: at most 64 MiB");
        }
        if self.recv_window < self.max_message_size {
            return bad("recv_window: must be at least max_message_size");
        }
        if self.idle_timeout.as_millis() > MAX_IDLE_TIMEOUT_MS {
            return bad("idle_timeout: at most 10 minutes");
        }
        if self.max_ack_delay.as_millis() > crate::wire::MAX_ACK_DELAY_MS {
            return bad("max_ack_delay: at most 1 s");
        }
        if self.initial_rtt.is_zero() || self.stats_interval.is_zero() {
            return bad("initial_rtt and stats_interval must be positive");
        }
        if self.max_connections == 0 {
            return bad("max_connections: at least 1");
        }
        if self.max_connections_per_source == 0 {
            return bad("max_connections_per_source: at least 1");
        }
        if self.handshake_timeout.is_zero() {
            return bad("handshake_timeout must be positive");
        }
        Ok(())
    }
}
