//! Binding a listener: a UDP socket and, optionally, a TCP listener on the
//! same IP address and port (paths over TCP arrive there), as the session
//! sink and the relay do. With port 0 the OS chooses the UDP port, which
//! may already be taken for TCP; then the pair is bound again, at most
//! [`PORT_ZERO_TRIES`] times.

use super::sockets::Socket;
use super::tcp::TcpServer;
use super::{bind_udp, RudpError};
use std::net::SocketAddr;

/// How often a listener bound to port 0 chooses again when the UDP port
/// the OS gave it is taken for TCP.
pub(crate) const PORT_ZERO_TRIES: u32 = 16;

/// Why a listener could not be bound.
#[derive(Debug)]
pub(crate) enum ListenError {
    /// The UDP socket.
    Udp(RudpError),
    /// The TCP listener on the UDP socket's address.
    Tcp {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Binds UDP `addr` (socket buffers of `socket_buffer` bytes) and, with
/// `tcp`, a TCP listener on the address it got; returns the sockets (UDP
/// first) and that address.
pub(crate) fn bind_listener(
    addr: SocketAddr,
    socket_buffer: usize,
    tcp: bool,
) -> Result<(Vec<Socket>, SocketAddr), ListenError> {
    let mut tries = 0;
    loop {
        let io = bind_udp(addr, socket_buffer).map_err(ListenError::Udp)?;
        let udp = Socket::new(Box::new(io))
            .map_err(|source| ListenError::Udp(RudpError::Bind { addr, source }))?;
        let local = udp.local();
        if !tcp {
            return Ok((vec![udp], local));
        }
        match TcpServer::bind(local).and_then(|t| Socket::new(Box::new(t))) {
            Ok(listener) => return Ok((vec![udp, listener], local)),
            // Port 0: the UDP port the OS chose is taken for TCP; choose again.
            Err(e)
                if addr.port() == 0
                    && tries < PORT_ZERO_TRIES
                    && e.kind() == std::io::ErrorKind::AddrInUse =>
            {
                tries += 1;
            }
            Err(source) => {
                return Err(ListenError::Tcp {
                    addr: local,
                    source,
                })
            }
        }
    }
}
