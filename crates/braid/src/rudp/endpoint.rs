//! The endpoint handle: binds one or more sockets, spawns their driver,
//! and opens and accepts connections.
//!
//! Main type: [`Endpoint`].
//!
//! Invariant: exactly one driver task per endpoint, owning all its sockets;
//! the handle only holds channel ends, so dropping it never blocks, and the
//! driver stops once the handle and every connection handle are gone and
//! every connection closed.

use super::connection::Connection;
use super::driver::Driver;
use super::io::{AsyncUdpSocket, UdpIo};
use super::msg::{Command, HandleSide};
use super::sockets::Socket as DriverSocket;
use super::stats::DriverStats;
use super::{os_secret, EndpointConfig, RudpError, ACCEPT_QUEUE, COMMAND_QUEUE};
use braid_core::transport::{Endpoint as CoreEndpoint, FourTuple};
use socket2::{Domain, Protocol, Socket, Type};
use std::net::SocketAddr;
use tokio::sync::{mpsc, oneshot};

/// A UDP socket running braid RUDP. See the [module docs](super).
#[derive(Debug)]
pub struct Endpoint {
    cmd: mpsc::Sender<Command>,
    accept_rx: Option<mpsc::Receiver<HandleSide>>,
    /// One per socket, the first first; never empty.
    local_addrs: Vec<SocketAddr>,
}

/// Binds a non-blocking UDP socket to `addr` with `socket_buffer` bytes of
/// send and receive buffer (the session and relay drivers bind theirs here
/// too).
pub(crate) fn bind_udp(addr: SocketAddr, socket_buffer: usize) -> Result<UdpIo, RudpError> {
    let bind_err = |source| RudpError::Bind { addr, source };
    let sock = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
        .map_err(bind_err)?;
    // Best effort: the kernel caps these at net.core.{w,r}mem_max.
    let _ = sock.set_send_buffer_size(socket_buffer);
    let _ = sock.set_recv_buffer_size(socket_buffer);
    sock.set_nonblocking(true).map_err(bind_err)?;
    sock.bind(&addr.into()).map_err(bind_err)?;
    UdpIo::new(sock.into()).map_err(bind_err)
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
        Endpoint::bind_many(&[addr], config)
    }

    /// Binds a UDP socket to each of `addrs` and starts one driver task
    /// that owns them all: connections accepted on a socket answer from
    /// it, and [`Endpoint::connect_from`] picks the socket to leave from
    /// (a session's paths may leave through different interfaces).
    /// [`Endpoint::connect`] uses the first.
    ///
    /// # Errors
    /// As [`Endpoint::bind`]; [`RudpError::NoSocket`] for no address.
    pub fn bind_many(addrs: &[SocketAddr], config: EndpointConfig) -> Result<Endpoint, RudpError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| RudpError::NoRuntime)?;
        let _guard = runtime.enter();
        let mut sockets: Vec<Box<dyn AsyncUdpSocket>> = Vec::with_capacity(addrs.len());
        for &addr in addrs {
            sockets.push(Box::new(bind_udp(addr, config.socket_buffer)?));
        }
        Endpoint::with_sockets(sockets, config)
    }

    /// Starts a driver task that owns `sockets` (any [`AsyncUdpSocket`],
    /// e.g. the in-memory ones of [`super::mem`]); the first is where
    /// [`Endpoint::connect`] leaves from. Must be called from within a
    /// tokio runtime.
    ///
    /// # Errors
    /// [`RudpError::NoSocket`] for an empty list, [`RudpError::Bind`] if a
    /// socket cannot tell its local address, and as [`Endpoint::bind`].
    pub fn with_sockets(
        sockets: Vec<Box<dyn AsyncUdpSocket>>,
        config: EndpointConfig,
    ) -> Result<Endpoint, RudpError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| RudpError::NoRuntime)?;
        if sockets.is_empty() {
            return Err(RudpError::NoSocket);
        }
        let core = CoreEndpoint::new(config.transport.clone(), os_secret()?, config.server)?;
        let mut owned = Vec::with_capacity(sockets.len());
        for io in sockets {
            let addr = io
                .local_addr()
                .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
            owned.push(DriverSocket::new(io).map_err(|source| RudpError::Bind { addr, source })?);
        }
        let local_addrs: Vec<SocketAddr> = owned.iter().map(DriverSocket::local).collect();
        let (cmd, cmd_rx) = mpsc::channel(COMMAND_QUEUE);
        let (accept_tx, accept_rx) = if config.server {
            let (t, r) = mpsc::channel(ACCEPT_QUEUE);
            (Some(t), Some(r))
        } else {
            (None, None)
        };
        let driver = Driver::new(owned, core, config, cmd_rx, cmd.downgrade(), accept_tx);
        runtime.spawn(driver);
        tracing::debug!(?local_addrs, "rudp endpoint bound");
        Ok(Endpoint {
            cmd,
            accept_rx,
            local_addrs,
        })
    }

    /// The first socket's local address (with the port the OS chose for
    /// port 0).
    pub fn local_addr(&self) -> SocketAddr {
        // Invariant: an endpoint has at least one socket (`with_sockets`
        // refuses none).
        self.local_addrs[0]
    }

    /// Every socket's local address, in the order they were given.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.local_addrs
    }

    /// Opens a connection to `remote` from the first socket and waits for
    /// the handshake.
    ///
    /// # Errors
    /// [`RudpError::ConnectTimeout`] if no server answers within
    /// `EndpointConfig::handshake_timeout`, [`RudpError::ConnectFailed`] if
    /// the server closes it, [`RudpError::TooManyConnections`],
    /// [`RudpError::EndpointClosed`].
    pub async fn connect(&self, remote: SocketAddr) -> Result<Connection, RudpError> {
        self.connect_on(FourTuple::from_remote(remote)).await
    }

    /// Opens a connection to `remote` from the socket bound to `local` (one
    /// of [`Endpoint::local_addrs`]) and waits for the handshake.
    ///
    /// # Errors
    /// [`RudpError::UnknownLocalAddress`] if no socket is bound to `local`;
    /// otherwise as [`Endpoint::connect`].
    pub async fn connect_from(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Result<Connection, RudpError> {
        self.connect_on(FourTuple::new(local, remote)).await
    }

    async fn connect_on(&self, path: FourTuple) -> Result<Connection, RudpError> {
        let (reply, rx) = oneshot::channel();
        self.cmd
            .send(Command::Connect { path, reply })
            .await
            .map_err(|_| RudpError::EndpointClosed)?;
        let parts = rx.await.map_err(|_| RudpError::EndpointClosed)??;
        Ok(Connection::from_parts(parts))
    }

    /// The next connection a client opened to this endpoint.
    ///
    /// # Errors
    /// [`RudpError::NotServer`] if the endpoint does not accept,
    /// [`RudpError::EndpointClosed`] if the driver stopped.
    pub async fn accept(&mut self) -> Result<Connection, RudpError> {
        let rx = self.accept_rx.as_mut().ok_or(RudpError::NotServer)?;
        let parts = rx.recv().await.ok_or(RudpError::EndpointClosed)?;
        Ok(Connection::from_parts(parts))
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
