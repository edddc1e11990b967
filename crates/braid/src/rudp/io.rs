//! Batched UDP I/O for the driver, over quinn-udp: segmentation offload on
//! send (GSO: one `sendmsg` carries up to [`MAX_GSO_BYTES`] of equal-sized
//! datagrams to one destination) and on receive (GRO, `recvmmsg`), where
//! the kernel offers them; one datagram per call elsewhere.
//!
//! Main types: [`UdpIo`] (the socket and its offload state) and
//! [`GsoBatch`] (datagrams collected for one send).
//!
//! Invariants: a batch holds datagrams for one destination, all of the
//! first one's size except possibly the last, which may be shorter (the
//! kernel's GSO rule); at most `max_gso_segments` of them and at most
//! [`MAX_GSO_BYTES`] in all. Receive buffers are fixed ([`RECV_IOVS`] of
//! [`RECV_IOV_BYTES`]); a GRO buffer is split at its stride.

use quinn_udp::{RecvMeta, Transmit, UdpSocketState};
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::task::{Context, Poll};
use tokio::io::Interest;
use tokio::net::UdpSocket;

/// Largest GSO send (the kernel's limit is a 64 KiB IP datagram).
pub const MAX_GSO_BYTES: usize = 60_000;
/// Receive buffers per `recvmmsg`.
pub const RECV_IOVS: usize = 8;
/// Size of one receive buffer (a GRO buffer holds several datagrams).
pub const RECV_IOV_BYTES: usize = 64 << 10;

/// Datagrams collected for one (GSO) send.
#[derive(Debug, Default)]
pub struct GsoBatch {
    buf: Vec<u8>,
    dest: Option<SocketAddr>,
    segment: usize,
    count: usize,
    closed: bool,
}

impl GsoBatch {
    /// True if nothing is collected.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Datagrams collected.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Adds a datagram if it may join the batch under the GSO rules (and
    /// `max_segments`); false if it must start the next batch.
    pub fn push(&mut self, dest: SocketAddr, data: &[u8], max_segments: usize) -> bool {
        if self.count == 0 {
            self.buf.clear();
            self.buf.extend_from_slice(data);
            self.dest = Some(dest);
            self.segment = data.len();
            self.count = 1;
            self.closed = data.is_empty();
            return true;
        }
        if self.closed
            || self.dest != Some(dest)
            || data.len() > self.segment
            || data.is_empty()
            || self.count >= max_segments
            || self.buf.len() + data.len() > MAX_GSO_BYTES
        {
            return false;
        }
        self.buf.extend_from_slice(data);
        self.count += 1;
        self.closed = data.len() < self.segment;
        true
    }

    fn clear(&mut self) {
        self.count = 0;
        self.dest = None;
        self.closed = false;
    }
}

/// The driver's socket with its offload state and buffers.
#[derive(Debug)]
pub struct UdpIo {
    socket: UdpSocket,
    state: UdpSocketState,
    rx: Vec<Vec<u8>>,
    meta: Vec<RecvMeta>,
}

/// What a flush did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flushed {
    /// Sent (this many datagrams).
    Sent(usize),
    /// The kernel refused it (this many datagrams lost; the transport
    /// recovers as from any loss).
    Failed(usize),
}

impl UdpIo {
    /// Wraps a bound, non-blocking socket (inside a tokio runtime).
    ///
    /// # Errors
    /// The OS error of configuring the socket or registering it.
    pub fn new(socket: std::net::UdpSocket) -> io::Result<UdpIo> {
        let state = UdpSocketState::new((&socket).into())?;
        let socket = UdpSocket::from_std(socket)?;
        Ok(UdpIo {
            socket,
            state,
            rx: vec![vec![0; RECV_IOV_BYTES]; RECV_IOVS],
            meta: vec![RecvMeta::default(); RECV_IOVS],
        })
    }

    /// The local address.
    ///
    /// # Errors
    /// The OS error.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Most datagrams one send may carry (1 without GSO).
    pub fn max_segments(&self) -> usize {
        self.state.max_gso_segments().max(1)
    }

    /// Receives what is waiting (one `recvmmsg`) and hands each datagram
    /// to `f`; returns how many. `Pending` registers the waker.
    pub fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        mut f: impl FnMut(SocketAddr, &[u8]),
    ) -> Poll<io::Result<usize>> {
        loop {
            match self.socket.poll_recv_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
            let (socket, state, meta) = (&self.socket, &self.state, &mut self.meta);
            let mut iovs: Vec<IoSliceMut<'_>> =
                self.rx.iter_mut().map(|b| IoSliceMut::new(b)).collect();
            let r = socket.try_io(Interest::READABLE, || {
                state.recv(socket.into(), &mut iovs, meta)
            });
            match r {
                Ok(n) => {
                    let mut count = 0;
                    for (m, buf) in self.meta.iter().zip(self.rx.iter()).take(n) {
                        let data = &buf[..m.len.min(buf.len())];
                        let stride = if m.stride == 0 {
                            data.len().max(1)
                        } else {
                            m.stride
                        };
                        for d in data.chunks(stride) {
                            f(m.addr, d);
                            count += 1;
                        }
                    }
                    return Poll::Ready(Ok(count));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    /// Sends the batch; on `Ready` it is empty again.
    pub fn poll_flush(&mut self, cx: &mut Context<'_>, batch: &mut GsoBatch) -> Poll<Flushed> {
        let Some(destination) = batch.dest else {
            batch.clear();
            return Poll::Ready(Flushed::Sent(0));
        };
        let n = batch.count;
        let t = Transmit {
            destination,
            ecn: None,
            contents: &batch.buf,
            segment_size: (n > 1).then_some(batch.segment),
            src_ip: None,
        };
        loop {
            match self.socket.poll_send_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => {
                    tracing::debug!(error = %e, "udp socket error");
                    batch.clear();
                    return Poll::Ready(Flushed::Failed(n));
                }
                Poll::Pending => return Poll::Pending,
            }
            let (socket, state) = (&self.socket, &self.state);
            match socket.try_io(Interest::WRITABLE, || state.try_send(socket.into(), &t)) {
                Ok(()) => {
                    batch.clear();
                    return Poll::Ready(Flushed::Sent(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => {
                    tracing::debug!(error = %e, to = %destination, "udp send error");
                    batch.clear();
                    return Poll::Ready(Flushed::Failed(n));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn batch_follows_gso_rules() {
        let mut b = GsoBatch::default();
        assert!(b.push(a(1), &[1; 100], 64));
        assert!(b.push(a(1), &[2; 100], 64));
        assert!(!b.push(a(2), &[3; 100], 64), "other destination");
        assert!(!b.push(a(1), &[3; 101], 64), "larger than the segment");
        assert!(b.push(a(1), &[4; 50], 64), "a shorter last one");
        assert!(!b.push(a(1), &[5; 100], 64), "nothing after a short one");
        assert_eq!(b.len(), 3);
        assert_eq!(b.buf.len(), 250);
    }

    #[test]
    fn batch_respects_segment_and_byte_limits() {
        let mut b = GsoBatch::default();
        assert!(b.push(a(1), &[0; 1400], 2));
        assert!(b.push(a(1), &[0; 1400], 2));
        assert!(!b.push(a(1), &[0; 1400], 2));
        let mut b = GsoBatch::default();
        let mut n = 0;
        while b.push(a(1), &[0; 1400], 1000) {
            n += 1;
        }
        assert_eq!(n, MAX_GSO_BYTES / 1400);
    }

    #[tokio::test]
    async fn gso_datagrams_arrive_separately() {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_nonblocking(true).unwrap();
        let r = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        r.set_nonblocking(true).unwrap();
        let to = r.local_addr().unwrap();
        let mut tx = UdpIo::new(s).unwrap();
        let mut rx = UdpIo::new(r).unwrap();
        let mut b = GsoBatch::default();
        let max = tx.max_segments();
        for i in 0..5u8 {
            let d = [i; 1000];
            if !b.push(to, &d, max) {
                std::future::poll_fn(|cx| tx.poll_flush(cx, &mut b)).await;
                assert!(b.push(to, &d, max));
            }
        }
        std::future::poll_fn(|cx| tx.poll_flush(cx, &mut b)).await;
        let mut got = Vec::new();
        while got.len() < 5 {
            std::future::poll_fn(|cx| rx.poll_recv(cx, |_, d| got.push(d.to_vec())))
                .await
                .unwrap();
        }
        for (i, d) in got.iter().enumerate() {
            assert_eq!(d, &vec![i as u8; 1000]);
        }
    }
}
