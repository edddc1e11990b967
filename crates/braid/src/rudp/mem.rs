//! In-memory sockets: an [`AsyncUdpSocket`] over tokio channels, so a
//! driver (or several) can be tested without the kernel.
//!
//! Main types: [`MemNet`] (a hub that delivers datagrams between the
//! sockets bound on it) and [`MemSocket`] (one bound address).
//!
//! Like UDP, delivery is best effort: a datagram to an address nobody has
//! bound, or to a socket whose queue ([`MEM_QUEUE_DATAGRAMS`]) is full, is
//! dropped and counted ([`MemNet::dropped`]). Datagrams between two sockets
//! arrive in the order they were sent. A socket unbinds itself when
//! dropped.

use super::io::{AsyncUdpSocket, RecvMeta, UdpTransmit};
use std::collections::HashMap;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Datagrams waiting in one in-memory socket before more are dropped.
pub const MEM_QUEUE_DATAGRAMS: usize = 4096;
/// Datagrams one in-memory send may carry (what GSO would allow).
pub const MEM_GSO_SEGMENTS: usize = 64;
/// First port handed out for a bind to port 0.
const FIRST_EPHEMERAL_PORT: u16 = 49_152;

/// A datagram in flight: sender and bytes.
type MemDatagram = (SocketAddr, Vec<u8>);

#[derive(Debug, Default)]
struct Hub {
    sockets: HashMap<SocketAddr, mpsc::Sender<MemDatagram>>,
    next_port: u16,
}

/// A network in memory: sockets bound on it reach each other by address.
/// Cheap to clone; clones are the same network.
#[derive(Debug, Clone, Default)]
pub struct MemNet {
    hub: Arc<Mutex<Hub>>,
    dropped: Arc<AtomicU64>,
}

impl MemNet {
    /// An empty network.
    pub fn new() -> MemNet {
        MemNet::default()
    }

    /// Binds a socket to `addr` (port 0: a free port is chosen).
    ///
    /// # Errors
    /// `AddrInUse` if a socket is bound there already.
    pub fn bind(&self, addr: SocketAddr) -> io::Result<MemSocket> {
        let mut hub = self.lock();
        let mut addr = addr;
        if addr.port() == 0 {
            loop {
                hub.next_port = hub.next_port.max(FIRST_EPHEMERAL_PORT);
                addr.set_port(hub.next_port);
                hub.next_port = hub.next_port.wrapping_add(1);
                if !hub.sockets.contains_key(&addr) {
                    break;
                }
            }
        }
        if hub.sockets.contains_key(&addr) {
            return Err(io::Error::new(io::ErrorKind::AddrInUse, addr.to_string()));
        }
        let (tx, rx) = mpsc::channel(MEM_QUEUE_DATAGRAMS);
        hub.sockets.insert(addr, tx);
        Ok(MemSocket {
            net: self.clone(),
            addr,
            rx,
        })
    }

    /// Datagrams dropped so far (no socket at the address, or its queue
    /// full).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Hub> {
        // A panic while holding the lock leaves the table consistent (every
        // operation on it is a single insert, remove or lookup).
        self.hub.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn deliver(&self, from: SocketAddr, to: SocketAddr, data: &[u8]) {
        let tx = self.lock().sockets.get(&to).cloned();
        let ok = tx.is_some_and(|tx| tx.try_send((from, data.to_vec())).is_ok());
        if !ok {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One address bound on a [`MemNet`].
#[derive(Debug)]
pub struct MemSocket {
    net: MemNet,
    addr: SocketAddr,
    rx: mpsc::Receiver<MemDatagram>,
}

impl Drop for MemSocket {
    fn drop(&mut self) {
        self.net.lock().sockets.remove(&self.addr);
    }
}

impl AsyncUdpSocket for MemSocket {
    fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let n = bufs.len().min(meta.len());
        let mut got = 0;
        while got < n {
            let next = if got == 0 {
                match self.rx.poll_recv(cx) {
                    Poll::Ready(Some(d)) => d,
                    // The hub holds a sender while the socket is bound.
                    Poll::Ready(None) | Poll::Pending => return Poll::Pending,
                }
            } else {
                match self.rx.try_recv() {
                    Ok(d) => d,
                    Err(_) => break,
                }
            };
            let (from, data) = next;
            let len = data.len().min(bufs[got].len());
            bufs[got][..len].copy_from_slice(&data[..len]);
            meta[got] = RecvMeta {
                addr: from,
                len,
                stride: len,
                dst_ip: Some(self.addr.ip()),
            };
            got += 1;
        }
        Poll::Ready(Ok(got))
    }

    fn poll_send(&mut self, _cx: &mut Context<'_>, t: &UdpTransmit<'_>) -> Poll<io::Result<()>> {
        let seg = t.segment_size.unwrap_or(t.contents.len()).max(1);
        for d in t.contents.chunks(seg) {
            self.net.deliver(self.addr, t.destination, d);
        }
        Poll::Ready(Ok(()))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.addr)
    }

    fn max_gso_segments(&self) -> usize {
        MEM_GSO_SEGMENTS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rudp::io::{poll_flush, GsoBatch, RecvBuffers};

    fn a(port: u16) -> SocketAddr {
        SocketAddr::from(([10, 0, 0, 1], port))
    }

    #[tokio::test]
    async fn datagrams_reach_the_bound_address_in_order() {
        let net = MemNet::new();
        let mut s = net.bind(a(1)).unwrap();
        let mut r = net.bind(a(0)).unwrap();
        let to = r.local_addr().unwrap();
        assert_ne!(to.port(), 0);
        assert!(net.bind(to).is_err(), "address in use");
        let mut b = GsoBatch::default();
        for i in 0..3u8 {
            assert!(b.push(to, &[i; 100], s.max_gso_segments()));
        }
        std::future::poll_fn(|cx| poll_flush(&mut s, cx, &mut b)).await;
        let mut bufs = RecvBuffers::default();
        let mut got = Vec::new();
        while got.len() < 3 {
            std::future::poll_fn(|cx| {
                bufs.poll_recv_from(&mut r, cx, |from, d| got.push((from, d.to_vec())))
            })
            .await
            .unwrap();
        }
        for (i, (from, d)) in got.iter().enumerate() {
            assert_eq!(*from, a(1));
            assert_eq!(d, &vec![i as u8; 100]);
        }
        assert_eq!(net.dropped(), 0);
    }

    #[tokio::test]
    async fn datagrams_to_nobody_are_dropped_and_counted() {
        let net = MemNet::new();
        let mut s = net.bind(a(1)).unwrap();
        let r = net.bind(a(2)).unwrap();
        drop(r);
        let t = UdpTransmit {
            destination: a(2),
            contents: &[0; 10],
            segment_size: None,
            src_ip: None,
        };
        std::future::poll_fn(|cx| s.poll_send(cx, &t))
            .await
            .unwrap();
        assert_eq!(net.dropped(), 1);
        assert!(net.bind(a(2)).is_ok(), "a dropped socket unbinds");
    }
}
