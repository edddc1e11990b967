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
        let mut config = EndpointConfig::server();
        config.transport.psk = key;
        config.transport.protection = protection;
        let rudp = Endpoint::bind(addr, config)
            .map_err(PerfError::rudp(format!("listening for RUDP on {addr}")))?;
        let tcp = TcpListener::bind(addr)
            .await
            .map_err(PerfError::io(format!("listening for TCP on {addr}")))?;
        Ok(PerfServer { rudp, tcp, addr })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
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
