//! The endpoint handle: binds a UDP socket, spawns its driver, and opens
//! and accepts connections.
//!
//! Main types: [`Endpoint`], [`DriverStats`], [`IoStats`].
//!
//! Invariant: exactly one driver task per socket; the handle only holds
//! channel ends, so dropping it never blocks, and the driver stops once the
//! handle and every connection handle are gone and every connection closed.

use super::connection::Connection;
use super::driver::{Command, Driver};
use super::io::UdpIo;
use super::{os_secret, EndpointConfig, EndpointStats, RudpError, ACCEPT_QUEUE, COMMAND_QUEUE};
use braid_core::transport::Endpoint as CoreEndpoint;
use socket2::{Domain, Protocol, Socket, Type};
use std::net::SocketAddr;
use tokio::sync::{mpsc, oneshot};

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

/// A UDP socket running braid RUDP. See the [module docs](super).
#[derive(Debug)]
pub struct Endpoint {
    cmd: mpsc::Sender<Command>,
    accept_rx: Option<mpsc::Receiver<Connection>>,
    local_addr: SocketAddr,
}

impl Endpoint {
    /// Binds a UDP socket to `addr` and starts its driver task. Must be
    /// called from within a tokio runtime.
    ///
    /// # Errors
    /// [`RudpError::Config`] for invalid settings, [`RudpError::Bind`] if
    /// the socket cannot be bound, [`RudpError::Random`] if the OS RNG
    /// fails, [`RudpError::NoRuntime`] outside a runtime.
    pub fn bind(addr: SocketAddr, config: EndpointConfig) -> Result<Endpoint, RudpError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| RudpError::NoRuntime)?;
        let core = CoreEndpoint::new(config.transport.clone(), os_secret()?, config.server)?;
        let bind_err = |source| RudpError::Bind { addr, source };
        let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
            .map_err(bind_err)?;
        // Best effort: the kernel caps these at net.core.{w,r}mem_max.
        let _ = sock.set_send_buffer_size(config.socket_buffer);
        let _ = sock.set_recv_buffer_size(config.socket_buffer);
        sock.set_nonblocking(true).map_err(bind_err)?;
        sock.bind(&addr.into()).map_err(bind_err)?;
        let std_sock: std::net::UdpSocket = sock.into();
        let udp = {
            let _guard = runtime.enter();
            UdpIo::new(std_sock).map_err(bind_err)?
        };
        let local_addr = udp.local_addr().map_err(bind_err)?;
        let (cmd, cmd_rx) = mpsc::channel(COMMAND_QUEUE);
        let (accept_tx, accept_rx) = if config.server {
            let (t, r) = mpsc::channel(ACCEPT_QUEUE);
            (Some(t), Some(r))
        } else {
            (None, None)
        };
        let driver = Driver::new(udp, core, config, cmd_rx, cmd.downgrade(), accept_tx);
        runtime.spawn(driver);
        tracing::debug!(%local_addr, "rudp endpoint bound");
        Ok(Endpoint {
            cmd,
            accept_rx,
            local_addr,
        })
    }

    /// The socket's local address (with the port the OS chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Opens a connection to `remote` and waits for the handshake.
    ///
    /// # Errors
    /// [`RudpError::ConnectTimeout`] if no server answers within
    /// `EndpointConfig::handshake_timeout`, [`RudpError::ConnectFailed`] if
    /// the server closes it, [`RudpError::TooManyConnections`],
    /// [`RudpError::EndpointClosed`].
    pub async fn connect(&self, remote: SocketAddr) -> Result<Connection, RudpError> {
        let (reply, rx) = oneshot::channel();
        self.cmd
            .send(Command::Connect { remote, reply })
            .await
            .map_err(|_| RudpError::EndpointClosed)?;
        rx.await.map_err(|_| RudpError::EndpointClosed)?
    }

    /// The next connection a client opened to this endpoint.
    ///
    /// # Errors
    /// [`RudpError::NotServer`] if the endpoint does not accept,
    /// [`RudpError::EndpointClosed`] if the driver stopped.
    pub async fn accept(&mut self) -> Result<Connection, RudpError> {
        let rx = self.accept_rx.as_mut().ok_or(RudpError::NotServer)?;
        rx.recv().await.ok_or(RudpError::EndpointClosed)
    }

    /// The endpoint's counters.
    ///
    /// # Errors
    /// [`RudpError::EndpointClosed`] if the driver stopped.
    pub async fn stats(&self) -> Result<DriverStats, RudpError> {
        let (reply, rx) = oneshot::channel();
        self.cmd
            .send(Command::EndpointStats { reply })
            .await
            .map_err(|_| RudpError::EndpointClosed)?;
        rx.await.map_err(|_| RudpError::EndpointClosed)
    }
}
