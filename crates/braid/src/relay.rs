//! Overlay relays on real sockets (seed 000 §III): `braid relay`.
//!
//! A [`Relay`] binds one UDP port (and a TCP listener on the same port,
//! for sources whose first hop runs over TCP: [`crate::rudp::tcp`]) and
//! runs braid-core's routed relay
//! ([`braid_core::session::relay::Relay::routed`]) in one driver task:
//! every path a source routes through it is a pair of IQ-RUDP connections
//! (previous hop, next hop), each with its own congestion control; the
//! relay forwards messages without reassembling streams, holds bounded
//! memory per pair, reports each next hop's measurements to the source, and
//! serves many sessions at once. The application (or `braid relay`) holds
//! a handle that asks the driver for snapshots over a bounded channel.
//!
//! Main types: [`Relay`], [`RelayConfig`], [`RelaySnapshot`] (and its
//! [`RelayRecord`]), [`RelayError`].
//!
//! Memory: per pair, at most two connections' queues
//! (`Config::send_queue_bytes` each, plus their receive windows) and one
//! waiting message per direction; at most
//! [`MAX_RELAY_PAIRS`](braid_core::session::relay::MAX_RELAY_PAIRS) pairs.
//! Sources that reach it over TCP add, per connection, a read buffer of
//! [`READ_BUFFER`](crate::rudp::tcp::frame::READ_BUFFER) and a send buffer
//! of [`TCP_SEND_BUFFER`](crate::rudp::tcp::TCP_SEND_BUFFER) bytes, for at
//! most [`MAX_TCP_PEERS`](crate::rudp::tcp::MAX_TCP_PEERS) connections.

use crate::rudp::listen::{bind_listener, ListenError};
use crate::rudp::sockets::SocketSet;
use crate::rudp::{os_secret, IoStats, RudpError, MAX_ROUNDS};
use braid_core::session::record::RECORD_VERSION;
use braid_core::session::relay::{PairInfo, Relay as Core, RelayStats};
use braid_core::transport::{Config, EndpointStats};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::{mpsc, oneshot};

/// INITIALs a relay sends to a next hop that has not answered.
pub const RELAY_UNANSWERED_INITIALS: u32 = 2;
/// Commands waiting for a relay's driver.
const COMMAND_QUEUE: usize = 16;

/// Settings of a [`Relay`].
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// Settings of every hop's connection (both directions).
    pub transport: Config,
    /// `SO_SNDBUF` / `SO_RCVBUF` requested for the socket.
    pub socket_buffer: usize,
    /// Also accept first hops over TCP (`via=R:P+tcp`) on the same IP and
    /// port (default true); next hops are always UDP.
    pub accept_tcp: bool,
}

impl Default for RelayConfig {
    fn default() -> Self {
        RelayConfig {
            transport: Config::default(),
            socket_buffer: 4 << 20,
            accept_tcp: true,
        }
    }
}

/// What a relay is doing now.
#[derive(Debug, Clone, PartialEq)]
pub struct RelaySnapshot {
    /// Forwarding counters.
    pub stats: RelayStats,
    /// Its transport endpoint's counters (handshakes refused, bad packets …).
    pub endpoint: EndpointStats,
    /// Its socket's counters.
    pub io: IoStats,
    /// Every forwarding pair.
    pub pairs: Vec<PairInfo>,
}

/// A [`RelaySnapshot`] as a record: plain numbers and strings, `serde`
/// both ways, with braid-core's [`RECORD_VERSION`] (`braid relay
/// --format json` prints one per period).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RelayRecord {
    /// [`RECORD_VERSION`].
    pub version: u32,
    /// Seconds since the process's clock origin.
    pub t: f64,
    /// Pairs set up in all.
    pub pairs_total: u64,
    /// Bytes forwarded towards next hops.
    pub bytes_down: u64,
    /// Bytes forwarded back.
    pub bytes_up: u64,
    /// Connections refused.
    pub refused: u64,
    /// Messages dropped (the other side gone).
    pub dropped: u64,
    /// Handshakes refused for a wrong or missing key (no state kept).
    pub auth_failed: u64,
    /// Each forwarding pair now.
    pub pairs: Vec<RelayPairRecord>,
}

/// One forwarding pair in a [`RelayRecord`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RelayPairRecord {
    /// Previous hop.
    pub from: String,
    /// Next hop, once known.
    pub to: Option<String>,
    /// Place on the path.
    pub index: Option<u8>,
    /// Next hop's smoothed RTT, seconds.
    pub rtt_s: f64,
    /// Next hop's loss ratio.
    pub loss: f64,
    /// Next hop's delivered rate, bit/s.
    pub delivered_bps: u64,
    /// Bytes held for the pair.
    pub queued_bytes: u64,
}

impl RelayRecord {
    /// The record of `snap`, taken `t` seconds after the clock's origin.
    pub fn new(snap: &RelaySnapshot, t: f64) -> RelayRecord {
        let s = &snap.stats;
        RelayRecord {
            version: RECORD_VERSION,
            t,
            pairs_total: s.pairs,
            bytes_down: s.bytes_down,
            bytes_up: s.bytes_up,
            refused: s.refused,
            dropped: s.dropped,
            auth_failed: snap.endpoint.auth_failed,
            pairs: snap
                .pairs
                .iter()
                .map(|p| RelayPairRecord {
                    from: p.from.to_string(),
                    to: p.to.map(|a| a.to_string()),
                    index: p.index,
                    rtt_s: p.srtt.as_secs_f64(),
                    loss: p.loss,
                    delivered_bps: p.delivered.bps(),
                    queued_bytes: p.queued_bytes,
                })
                .collect(),
        }
    }
}

/// What can go wrong with a relay.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// The socket could not be bound, or randomness was unavailable.
    #[error(transparent)]
    Rudp(#[from] RudpError),
    /// The transport settings are invalid.
    #[error(transparent)]
    Config(#[from] braid_core::transport::ConfigError),
    /// The relay cannot listen on TCP at its UDP socket's address.
    #[error("cannot listen on TCP {addr}: {source} (set accept_tcp to false to relay UDP only)")]
    TcpListen {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The relay's driver has stopped.
    #[error("the relay's driver has stopped")]
    DriverGone,
    /// No tokio runtime is running.
    #[error("no tokio runtime: start relays from within one")]
    NoRuntime,
}

enum Command {
    Snapshot(oneshot::Sender<RelaySnapshot>),
}

/// A running relay (see the module docs). Dropping the handle stops it.
#[derive(Debug)]
pub struct Relay {
    cmd: mpsc::Sender<Command>,
    local: SocketAddr,
}

impl Relay {
    /// Binds `addr` (UDP, and with [`RelayConfig::accept_tcp`] a TCP
    /// listener on the same IP and port) and starts relaying. Must be
    /// called from within a tokio runtime.
    ///
    /// # Errors
    /// The socket cannot be bound ([`RelayError::TcpListen`] when only the
    /// TCP port is taken); invalid settings; no runtime.
    pub fn bind(addr: SocketAddr, config: RelayConfig) -> Result<Relay, RelayError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| RelayError::NoRuntime)?;
        let _guard = runtime.enter();
        let (sockets, local) = bind_listener(addr, config.socket_buffer, config.accept_tcp)
            .map_err(|e| match e {
                ListenError::Udp(e) => RelayError::from(e),
                ListenError::Tcp { addr, source } => RelayError::TcpListen { addr, source },
            })?;
        let mut transport = config.transport;
        // Towards a next hop that never answered, no more than the two
        // INITIALs a source's own handshake takes (issue 29 §2).
        transport.max_unanswered_initials = Some(RELAY_UNANSWERED_INITIALS);
        let own = crate::local_addrs::own_addrs(local);
        let core = Core::routed(transport, os_secret()?)?.with_own_addrs(own);
        let (cmd, cmd_rx) = mpsc::channel(COMMAND_QUEUE);
        runtime.spawn(Driver {
            sockets: SocketSet::new(sockets),
            core,
            cmd_rx,
        });
        tracing::info!(%local, "relay listening");
        Ok(Relay { cmd, local })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// What the relay is doing now.
    ///
    /// # Errors
    /// [`RelayError::DriverGone`] if its driver stopped.
    pub async fn snapshot(&self) -> Result<RelaySnapshot, RelayError> {
        let (reply, rx) = oneshot::channel();
        self.cmd
            .send(Command::Snapshot(reply))
            .await
            .map_err(|_| RelayError::DriverGone)?;
        rx.await.map_err(|_| RelayError::DriverGone)
    }
}

/// The relay's task: its socket, the routed relay, and the handle's
/// commands. It ends when the handle is dropped.
struct Driver {
    sockets: SocketSet,
    core: Core,
    cmd_rx: mpsc::Receiver<Command>,
}

impl Future for Driver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        for round in 0..MAX_ROUNDS {
            let mut progress = false;
            loop {
                match this.cmd_rx.poll_recv(cx) {
                    Poll::Ready(Some(Command::Snapshot(reply))) => {
                        progress = true;
                        let _ = reply.send(RelaySnapshot {
                            stats: this.core.stats(),
                            endpoint: this.core.endpoint_stats(),
                            io: this.sockets.stats(),
                            pairs: this.core.pairs(),
                        });
                    }
                    Poll::Ready(None) => return Poll::Ready(()),
                    Poll::Pending => break,
                }
            }
            progress |= this.sockets.poll_input(cx, &mut this.core);
            progress |= this.sockets.poll_output(cx, &mut this.core);
            if !progress {
                break;
            }
            if round + 1 == MAX_ROUNDS {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        }
        let deadline = this.core.poll_timeout();
        this.sockets.arm_timer(cx, deadline);
        Poll::Pending
    }
}
