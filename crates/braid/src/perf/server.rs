//! The perf server: RUDP (on UDP) and TCP listening on one port, each test
//! served in its own task.
//!
//! Main types: [`PerfServer`] and [`TestDone`] (what one test ended with).

use super::{rudp, tcp, PerfError, Served};
use crate::rudp::{Endpoint, EndpointConfig};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Tests that ended and whose result the serving loop has not seen yet.
const DONE_QUEUE: usize = 4;

/// What one test ended with.
#[derive(Debug)]
pub struct TestDone {
    /// `"rudp"` or `"tcp"`.
    pub transport: &'static str,
    /// The client.
    pub remote: SocketAddr,
    /// What the server measured, or why the test failed.
    pub result: Result<Served, PerfError>,
}

/// RUDP and TCP listening on one address.
#[derive(Debug)]
pub struct PerfServer {
    rudp: Endpoint,
    tcp: TcpListener,
    addr: SocketAddr,
    tcp_addr: SocketAddr,
}

/// Where a keyed server takes TCP tests, which are not authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpTests {
    /// On the listening address, like RUDP.
    Listen,
    /// On the loopback address of the listening port only (so a key
    /// keeps strangers out of every test).
    LoopbackOnly,
}

/// The loopback address of `addr`'s family, on its port.
fn loopback_of(addr: SocketAddr) -> SocketAddr {
    let ip = match addr {
        SocketAddr::V4(_) => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        SocketAddr::V6(_) => std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
    };
    SocketAddr::new(ip, addr.port())
}

impl PerfServer {
    /// Listens on `addr` (UDP for RUDP and TCP). Must be called from within
    /// a tokio runtime.
    ///
    /// # Errors
    /// [`PerfError`] if either cannot be bound.
    pub async fn bind(addr: SocketAddr) -> Result<PerfServer, PerfError> {
        PerfServer::bind_keyed(addr, None, Default::default()).await
    }

    /// Like [`PerfServer::bind`], with RUDP clients required to hold `key`
    /// (none: only clients without a key) and to protect their packets as
    /// `protection` says. TCP tests are not authenticated (the pipe's TCP
    /// authentication is issue 13's).
    ///
    /// # Errors
    /// [`PerfError`] if either cannot be bound.
    pub async fn bind_keyed(
        addr: SocketAddr,
        key: Option<braid_core::transport::Psk>,
        protection: braid_core::transport::Protection,
    ) -> Result<PerfServer, PerfError> {
        PerfServer::bind_with(addr, key, protection, TcpTests::Listen).await
    }

    /// Like [`PerfServer::bind_keyed`], with TCP tests where `tcp` says.
    ///
    /// # Errors
    /// [`PerfError`] if either cannot be bound.
    pub async fn bind_with(
        addr: SocketAddr,
        key: Option<braid_core::transport::Psk>,
        protection: braid_core::transport::Protection,
        tcp: TcpTests,
    ) -> Result<PerfServer, PerfError> {
        let mut config = EndpointConfig::server();
        config.transport.psk = key;
        config.transport.protection = protection;
        let rudp = Endpoint::bind(addr, config)
            .map_err(PerfError::rudp(format!("listening for RUDP on {addr}")))?;
        let addr = rudp.local_addr();
        let tcp_addr = match tcp {
            TcpTests::Listen => addr,
            TcpTests::LoopbackOnly => loopback_of(addr),
        };
        let tcp = TcpListener::bind(tcp_addr)
            .await
            .map_err(PerfError::io(format!("listening for TCP on {tcp_addr}")))?;
        Ok(PerfServer {
            rudp,
            tcp,
            addr,
            tcp_addr,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address it takes TCP tests on.
    pub fn tcp_addr(&self) -> SocketAddr {
        self.tcp_addr
    }

    /// Serves tests, each in its own task, calling `done` as each ends;
    /// with `once`, returns after the first test ended.
    ///
    /// # Errors
    /// [`PerfError`] if accepting fails.
    pub async fn run(
        mut self,
        once: bool,
        done: Arc<dyn Fn(TestDone) + Send + Sync>,
    ) -> Result<(), PerfError> {
        let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<()>(DONE_QUEUE);
        loop {
            tokio::select! {
                c = self.rudp.accept() => {
                    let c = c.map_err(PerfError::rudp("accepting RUDP"))?;
                    let (tx, done) = (done_tx.clone(), done.clone());
                    tokio::spawn(async move {
                        let remote = c.remote();
                        let result = rudp::serve(c).await;
                        done(TestDone { transport: "rudp", remote, result });
                        let _ = tx.send(()).await;
                    });
                }
                t = self.tcp.accept() => {
                    let (s, remote) = t.map_err(PerfError::io("accepting TCP"))?;
                    let (tx, done) = (done_tx.clone(), done.clone());
                    tokio::spawn(async move {
                        let result = tcp::serve(s).await;
                        done(TestDone { transport: "tcp", remote, result });
                        let _ = tx.send(()).await;
                    });
                }
                _ = done_rx.recv(), if once => return Ok(()),
            }
        }
    }
}
