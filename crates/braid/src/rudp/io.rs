//! The driver's sockets: the [`AsyncUdpSocket`] trait (modelled on quinn's),
//! its kernel implementation [`UdpIo`] over quinn-udp, and the batching the
//! driver does on top of any of them.
//!
//! [`UdpIo`] uses segmentation offload on send (GSO: one `sendmsg` carries
//! up to [`MAX_GSO_BYTES`] of equal-sized datagrams to one destination) and
//! on receive (GRO, `recvmmsg`), where the kernel offers them; one datagram
//! per call elsewhere. [`super::mem`] has an in-memory implementation for
//! tests.
//!
//! Main types: [`AsyncUdpSocket`], [`RecvMeta`], [`UdpTransmit`],
//! [`UdpIo`], [`GsoBatch`] (datagrams collected for one send) and
//! [`RecvBuffers`] (the driver's receive buffers, split at each GRO
//! stride).
//!
//! Invariants: a batch holds datagrams for one destination, all of the
//! first one's size except possibly the last, which may be shorter (the
//! kernel's GSO rule); at most `max_gso_segments` of them and at most
//! [`MAX_GSO_BYTES`] in all. Receive buffers are fixed ([`RECV_IOVS`] of
//! [`RECV_IOV_BYTES`]); a GRO buffer is split at its stride.

use super::stats::TcpStats;
use std::fmt::Debug;
use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::task::{Context, Poll};
use tokio::io::unix::AsyncFd;

/// Largest GSO send (the kernel's limit is a 64 KiB IP datagram).
pub const MAX_GSO_BYTES: usize = 60_000;
/// Receive buffers per `recvmmsg`.
pub const RECV_IOVS: usize = 8;
/// Size of one receive buffer (a GRO buffer holds several datagrams).
pub const RECV_IOV_BYTES: usize = 64 << 10;

/// Where one receive buffer's datagrams came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvMeta {
    /// The sender's address.
    pub addr: SocketAddr,
    /// Bytes in the buffer.
    pub len: usize,
    /// Size of each datagram in the buffer (GRO); the last may be shorter.
    /// `len` when the buffer holds one datagram.
    pub stride: usize,
    /// The datagram's destination IP address, where the platform reports it.
    pub dst_ip: Option<IpAddr>,
}

impl Default for RecvMeta {
    fn default() -> Self {
        RecvMeta {
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            len: 0,
            stride: 0,
            dst_ip: None,
        }
    }
}

/// Datagrams for one send: to `destination`, every `segment_size` bytes of
/// `contents` one datagram (the last may be shorter), or all of it one
/// datagram when `segment_size` is `None`.
#[derive(Debug, Clone, Copy)]
pub struct UdpTransmit<'a> {
    /// Where to send them.
    pub destination: SocketAddr,
    /// The bytes.
    pub contents: &'a [u8],
    /// The size of each datagram when there are several.
    pub segment_size: Option<usize>,
    /// The source IP to send from, for a socket bound to the unspecified
    /// address (so a reply leaves from the address the peer wrote to);
    /// `None`: the kernel chooses.
    pub src_ip: Option<IpAddr>,
}

/// A UDP socket the driver can own: quinn's `AsyncUdpSocket`, reduced to
/// what the driver uses. The driver owns its sockets, so the methods take
/// `&mut self`.
pub trait AsyncUdpSocket: Send + Debug + 'static {
    /// Receives what is waiting into `bufs`, describing buffer `i` in
    /// `meta[i]`; returns how many buffers were filled (at least one on
    /// `Ready(Ok)`). `Pending` registers the waker.
    ///
    /// # Errors
    /// The socket's error (the driver counts it and goes on).
    fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>>;

    /// Sends one batch (at most [`AsyncUdpSocket::max_gso_segments`]
    /// datagrams). `Pending` registers the waker; the batch is then sent
    /// again on a later call.
    ///
    /// # Errors
    /// The socket's error: the datagrams are lost (the transport recovers).
    fn poll_send(&mut self, cx: &mut Context<'_>, t: &UdpTransmit<'_>) -> Poll<io::Result<()>>;

    /// The address the socket is bound to.
    ///
    /// # Errors
    /// The OS error.
    fn local_addr(&self) -> io::Result<SocketAddr>;

    /// Most datagrams one send may carry (1 without GSO).
    fn max_gso_segments(&self) -> usize;

    /// Whether this socket is the way to `remote` even though another
    /// socket has the same local address: true for a TCP socket's
    /// connected peers ([`super::tcp`]), which share their address with a
    /// UDP socket. A UDP socket never claims a peer (the default).
    fn serves(&self, remote: SocketAddr) -> bool {
        let _ = remote;
        false
    }

    /// Its datagrams-over-TCP counters (all zero for a UDP socket, the
    /// default).
    fn tcp_stats(&self) -> TcpStats {
        TcpStats::default()
    }
}

/// Datagrams collected for one (GSO) send.
#[derive(Debug, Default)]
pub struct GsoBatch {
    buf: Vec<u8>,
    /// Bytes of `buf` the batch's datagrams fill (a datagram appended
    /// through [`GsoBatch::buffer`] lies beyond until it is pushed).
    used: usize,
    dest: Option<SocketAddr>,
    src: Option<IpAddr>,
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
        self.push_from(None, dest, data, max_segments)
    }

    /// As [`GsoBatch::push`], sending from `src` (see
    /// [`UdpTransmit::src_ip`]); a batch has one source.
    pub fn push_from(
        &mut self,
        src: Option<IpAddr>,
        dest: SocketAddr,
        data: &[u8],
        max_segments: usize,
    ) -> bool {
        if !self.may_join(src, dest, data.len(), max_segments) {
            return false;
        }
        self.buffer().extend_from_slice(data);
        self.take_appended(src, dest);
        true
    }

    /// The buffer to append the next datagram to, in place, before
    /// [`GsoBatch::push_appended`] decides whether it joins: the batch's
    /// own bytes, emptied first when the batch is.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        // Bytes appended but not pushed are not the batch's.
        self.buf.truncate(self.used);
        &mut self.buf
    }

    /// Takes the datagram appended to [`GsoBatch::buffer`] since the last
    /// push if it may join the batch (the rules of [`GsoBatch::push_from`]);
    /// else moves its bytes into `spill` (see [`GsoBatch::spill_appended`])
    /// and returns false. The common case copies nothing.
    pub fn push_appended(
        &mut self,
        src: Option<IpAddr>,
        dest: SocketAddr,
        max_segments: usize,
        spill: &mut Vec<u8>,
    ) -> bool {
        let len = self.buf.len().saturating_sub(self.used);
        if !self.may_join(src, dest, len, max_segments) {
            self.spill_appended(spill);
            return false;
        }
        self.take_appended(src, dest);
        true
    }

    /// Moves the bytes appended to [`GsoBatch::buffer`] since the last push
    /// into `spill` (cleared first), leaving the batch as it was.
    pub fn spill_appended(&mut self, spill: &mut Vec<u8>) {
        spill.clear();
        spill.extend_from_slice(self.buf.get(self.used..).unwrap_or(&[]));
        self.buf.truncate(self.used);
    }

    /// Whether another datagram might join (false when full or closed by
    /// a shorter one), so a sender need not build one only to move it
    /// aside.
    pub fn accepts_more(&self, max_segments: usize) -> bool {
        self.count == 0
            || (!self.closed
                && self.count < max_segments
                && self.used + self.segment <= MAX_GSO_BYTES)
    }

    /// The GSO rules: whether a datagram of `len` bytes from `src` to
    /// `dest` may join (anything starts an empty batch).
    fn may_join(&self, src: Option<IpAddr>, dest: SocketAddr, len: usize, max: usize) -> bool {
        self.count == 0
            || !(self.closed
                || self.dest != Some(dest)
                || self.src != src
                || len > self.segment
                || len == 0
                || self.count >= max
                || self.used + len > MAX_GSO_BYTES)
    }

    /// Counts the bytes beyond `used` as the batch's next datagram.
    fn take_appended(&mut self, src: Option<IpAddr>, dest: SocketAddr) {
        let len = self.buf.len() - self.used;
        self.used = self.buf.len();
        if self.count == 0 {
            self.dest = Some(dest);
            self.src = src;
            self.segment = len;
            self.closed = len == 0;
        } else {
            self.closed = len < self.segment;
        }
        self.count += 1;
    }

    /// The batch as one send, if it holds anything.
    pub fn as_transmit(&self) -> Option<UdpTransmit<'_>> {
        let destination = self.dest?;
        Some(UdpTransmit {
            destination,
            contents: self.buf.get(..self.used).unwrap_or(&[]),
            segment_size: (self.count > 1).then_some(self.segment),
            src_ip: self.src,
        })
    }

    /// Empties the batch.
    pub fn clear(&mut self) {
        self.count = 0;
        self.used = 0;
        self.dest = None;
        self.closed = false;
    }
}

/// The driver's receive buffers: [`RECV_IOVS`] of [`RECV_IOV_BYTES`] and
/// their metadata.
#[derive(Debug)]
pub struct RecvBuffers {
    rx: Vec<Vec<u8>>,
    meta: Vec<RecvMeta>,
}

impl Default for RecvBuffers {
    fn default() -> Self {
        RecvBuffers {
            rx: vec![vec![0; RECV_IOV_BYTES]; RECV_IOVS],
            meta: vec![RecvMeta::default(); RECV_IOVS],
        }
    }
}

impl RecvBuffers {
    /// Receives what `socket` has waiting (one call) and hands each
    /// datagram, GRO buffers split at their stride, to `f` with its sender;
    /// returns how many. `Pending` registers the waker.
    ///
    /// # Errors
    /// The socket's error.
    pub fn poll_recv_from(
        &mut self,
        socket: &mut dyn AsyncUdpSocket,
        cx: &mut Context<'_>,
        mut f: impl FnMut(SocketAddr, &[u8]),
    ) -> Poll<io::Result<usize>> {
        self.poll_recv_to(socket, cx, |from, _, d| f(from, d))
    }

    /// As [`RecvBuffers::poll_recv_from`], also handing over each
    /// datagram's destination IP where the platform reports it.
    ///
    /// # Errors
    /// The socket's error.
    pub fn poll_recv_to(
        &mut self,
        socket: &mut dyn AsyncUdpSocket,
        cx: &mut Context<'_>,
        mut f: impl FnMut(SocketAddr, Option<IpAddr>, &[u8]),
    ) -> Poll<io::Result<usize>> {
        let n = {
            // On the stack: nothing is allocated per receive call.
            let mut rx = self.rx.iter_mut();
            let mut iovs: [IoSliceMut<'_>; RECV_IOVS] = std::array::from_fn(|_| {
                // `rx` holds exactly RECV_IOVS buffers (`Default`).
                IoSliceMut::new(rx.next().map_or(&mut [][..], |b| &mut b[..]))
            });
            match socket.poll_recv(cx, &mut iovs, &mut self.meta) {
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        };
        let mut count = 0;
        for (m, buf) in self.meta.iter().zip(self.rx.iter()).take(n) {
            let data = &buf[..m.len.min(buf.len())];
            let stride = if m.stride == 0 {
                data.len().max(1)
            } else {
                m.stride
            };
            for d in data.chunks(stride) {
                f(m.addr, m.dst_ip, d);
                count += 1;
            }
        }
        Poll::Ready(Ok(count))
    }
}

/// Sends `batch` on `socket`; on `Ready` the batch is empty again.
pub fn poll_flush(
    socket: &mut dyn AsyncUdpSocket,
    cx: &mut Context<'_>,
    batch: &mut GsoBatch,
) -> Poll<Flushed> {
    let n = batch.len();
    let Some(t) = batch.as_transmit() else {
        batch.clear();
        return Poll::Ready(Flushed::Sent(0));
    };
    let r = match socket.poll_send(cx, &t) {
        Poll::Pending => return Poll::Pending,
        Poll::Ready(r) => r,
    };
    batch.clear();
    Poll::Ready(match r {
        Ok(()) => Flushed::Sent(n),
        Err(e) => {
            tracing::debug!(error = %e, "udp send error");
            Flushed::Failed(n)
        }
    })
}

/// A kernel UDP socket with its offload state (quinn-udp).
///
/// The socket is registered with tokio through [`AsyncFd`] rather than
/// `tokio::net::UdpSocket` so that a receive that came back short (fewer
/// datagrams than there were buffers: the queue was empty) can clear the
/// readiness itself. With `UdpSocket` only a failed `recvmmsg` (EAGAIN)
/// clears it, and a receiver that keeps up with its sender made that
/// useless call after every batch: 72 405 of 123 399 `recvmmsg` calls of
/// a `braid perf` server. The clear is safe against a datagram arriving
/// meanwhile: tokio clears only if no readiness event came since the one
/// the receive answered (its tick). Only where a short receive means an
/// empty queue (`DRAINED_WHEN_SHORT`).
#[derive(Debug)]
pub struct UdpIo {
    socket: AsyncFd<std::net::UdpSocket>,
    state: quinn_udp::UdpSocketState,
    /// quinn-udp's metadata, converted to [`RecvMeta`] after each receive.
    meta: Vec<quinn_udp::RecvMeta>,
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

/// Whether a receive that returned fewer datagrams than it could take
/// means the socket's queue was empty. On Linux a non-blocking `recvmmsg`
/// stops early only at EAGAIN or an error (and an error after some
/// datagrams is kept in `sk_err` without a wake-up only for errors braid
/// never asks for: its sockets are unconnected and set no `IP_RECVERR`).
/// Elsewhere quinn-udp may read one datagram per call whatever is queued,
/// and with edge-triggered readiness (kqueue's `EV_CLEAR`) clearing there
/// would strand the rest until the next datagram.
const DRAINED_WHEN_SHORT: bool = cfg!(any(target_os = "linux", target_os = "android"));

impl UdpIo {
    /// Wraps a bound socket (inside a tokio runtime); it is made
    /// non-blocking here.
    ///
    /// # Errors
    /// The OS error of configuring the socket or registering it.
    pub fn new(socket: std::net::UdpSocket) -> io::Result<UdpIo> {
        socket.set_nonblocking(true)?;
        let state = quinn_udp::UdpSocketState::new((&socket).into())?;
        // SAFETY: a `std::net::UdpSocket` owns its descriptor: it stays
        // open, the same socket, until the value is dropped, and the
        // `AsyncFd` owns the value from here on.
        let socket = unsafe { AsyncFd::register(socket) }.map_err(|e| e.into_parts().1)?;
        Ok(UdpIo {
            socket,
            state,
            meta: vec![quinn_udp::RecvMeta::default(); RECV_IOVS],
        })
    }
}

impl AsyncUdpSocket for UdpIo {
    fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let n = bufs.len().min(meta.len()).min(self.meta.len());
        loop {
            let mut ready = match self.socket.poll_read_ready(cx) {
                Poll::Ready(Ok(r)) => r,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            let (state, qmeta) = (&self.state, &mut self.meta[..n]);
            match ready.try_io(|fd| state.recv(fd.get_ref().into(), &mut bufs[..n], qmeta)) {
                Ok(Ok(got)) => {
                    if DRAINED_WHEN_SHORT && got < n.min(quinn_udp::BATCH_SIZE) {
                        // Drained: wait for the next datagram's event
                        // instead of asking again only to hear EAGAIN.
                        ready.clear_ready();
                    }
                    for (m, q) in meta.iter_mut().zip(self.meta.iter()).take(got) {
                        *m = RecvMeta {
                            addr: q.addr,
                            len: q.len,
                            stride: q.stride,
                            dst_ip: q.dst_ip,
                        };
                    }
                    return Poll::Ready(Ok(got));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // EAGAIN: the readiness is cleared; wait for the next event.
                Err(_would_block) => continue,
            }
        }
    }

    fn poll_send(&mut self, cx: &mut Context<'_>, t: &UdpTransmit<'_>) -> Poll<io::Result<()>> {
        let qt = quinn_udp::Transmit {
            destination: t.destination,
            ecn: None,
            contents: t.contents,
            segment_size: t.segment_size,
            src_ip: t.src_ip,
        };
        loop {
            let mut ready = match self.socket.poll_write_ready(cx) {
                Poll::Ready(Ok(r)) => r,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            let state = &self.state;
            match ready.try_io(|fd| state.try_send(fd.get_ref().into(), &qt)) {
                Ok(r) => return Poll::Ready(r),
                Err(_would_block) => continue,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.get_ref().local_addr()
    }

    fn max_gso_segments(&self) -> usize {
        self.state.max_gso_segments().max(1)
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

    /// `data` appended in place and pushed; the spilled bytes on refusal.
    fn append(b: &mut GsoBatch, to: SocketAddr, data: &[u8], max: usize) -> Result<(), Vec<u8>> {
        b.buffer().extend_from_slice(data);
        let mut spill = vec![9; 3];
        if b.push_appended(None, to, max, &mut spill) {
            Ok(())
        } else {
            Err(spill)
        }
    }

    #[test]
    fn appending_in_place_follows_the_same_rules_and_gives_the_bytes_back() {
        let mut b = GsoBatch::default();
        let steps: [(u16, u8, usize, bool); 6] = [
            (1, 1, 100, true),
            (1, 2, 100, true),
            (2, 3, 100, false),
            (1, 3, 101, false),
            (1, 4, 50, true),
            (1, 5, 100, false),
        ];
        let mut by_push = GsoBatch::default();
        for (port, byte, len, joins) in steps {
            let data = vec![byte; len];
            assert_eq!(by_push.push(a(port), &data, 64), joins);
            match append(&mut b, a(port), &data, 64) {
                Ok(()) => assert!(joins, "{port} {byte} {len}"),
                Err(spill) => {
                    assert!(!joins, "{port} {byte} {len}");
                    assert_eq!(spill, data, "the refused datagram's bytes, whole");
                }
            }
        }
        assert_eq!(b.len(), 3);
        let (t, u) = (b.as_transmit().unwrap(), by_push.as_transmit().unwrap());
        assert_eq!(t.contents, u.contents);
        assert_eq!(t.segment_size, Some(100));
        assert_eq!(t.contents.len(), 250);
        // Emptied, the next append starts a new batch from the front.
        b.clear();
        assert!(b.is_empty() && b.as_transmit().is_none());
        assert_eq!(append(&mut b, a(3), &[7; 20], 64), Ok(()));
        assert_eq!(b.as_transmit().unwrap().contents, &[7; 20]);
        assert_eq!(b.as_transmit().unwrap().destination, a(3));
        // Segment and byte limits.
        let mut b = GsoBatch::default();
        assert_eq!(append(&mut b, a(1), &[0; 1400], 2), Ok(()));
        assert_eq!(append(&mut b, a(1), &[0; 1400], 2), Ok(()));
        assert!(append(&mut b, a(1), &[0; 1400], 2).is_err());
        let mut b = GsoBatch::default();
        let mut n = 0;
        while append(&mut b, a(1), &[0; 1400], 1000).is_ok() {
            n += 1;
        }
        assert_eq!(n, MAX_GSO_BYTES / 1400);
        assert_eq!(b.as_transmit().unwrap().contents.len(), n * 1400);
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
        let mut bufs = RecvBuffers::default();
        let mut b = GsoBatch::default();
        let max = tx.max_gso_segments();
        for i in 0..5u8 {
            let d = [i; 1000];
            if !b.push(to, &d, max) {
                std::future::poll_fn(|cx| poll_flush(&mut tx, cx, &mut b)).await;
                assert!(b.push(to, &d, max));
            }
        }
        std::future::poll_fn(|cx| poll_flush(&mut tx, cx, &mut b)).await;
        let mut got = Vec::new();
        while got.len() < 5 {
            std::future::poll_fn(|cx| {
                bufs.poll_recv_from(&mut rx, cx, |_, d| got.push(d.to_vec()))
            })
            .await
            .unwrap();
        }
        for (i, d) in got.iter().enumerate() {
            assert_eq!(d, &vec![i as u8; 1000]);
        }
    }
}
