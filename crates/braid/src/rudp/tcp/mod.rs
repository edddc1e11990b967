//! Datagrams over TCP, for networks that block UDP: an [`AsyncUdpSocket`]
//! whose datagrams travel on TCP connections, so that an unchanged IQ-RUDP
//! connection (and the session above it) can run a path where only TCP
//! gets through.
//!
//! Main types: [`TcpClient`] (one connection to one peer: a source's path
//! `direct+tcp` or `via=R:P+tcp`) and [`TcpServer`] (a listener on the same
//! IP:port as a sink's or relay's UDP socket, accepting up to
//! [`MAX_TCP_PEERS`] connections; each is a peer named by its remote
//! address). Framing is in [`frame`]: a 2-byte length, then the datagram.
//!
//! # How it fits
//! Nothing above the socket changes: IQ-RUDP still numbers, acknowledges,
//! paces and recovers its packets, and the session's estimator is still
//! fed by what those acknowledgements say was delivered. TCP underneath
//! never loses a datagram it accepted, so IQ-RUDP sees loss only where
//! this module drops one: when a connection's user-space send buffer
//! ([`TCP_SEND_BUFFER`] bytes) is full, the datagram is **dropped and
//! counted** ([`TcpStats::dropped`]), never queued without bound. That is
//! what keeps the two congestion controls from fighting: when the path is
//! slower than IQ-RUDP's window, TCP's window fills, the kernel's unsent
//! bytes reach [`TCP_UNSENT_BYTES`] (`TCP_NOTSENT_LOWAT`: without it the
//! kernel's autotuned send buffer would hold megabytes, seconds of queue
//! that IQ-RUDP never sees as loss), then this buffer fills, and IQ-RUDP
//! sees the drops and backs off, so the queue in front of TCP stays a few
//! tens of kilobytes beyond TCP's own window.
//!
//! The cost is head-of-line blocking inside the path: one lost TCP segment
//! holds back every datagram behind it, of every stream mapped to the
//! path, until TCP retransmits it (an RTT or more); IQ-RUDP's own loss
//! recovery and per-message deadlines cannot help inside TCP. See
//! `docs/sessions.md`, "Paths over TCP".
//!
//! # Invariants
//! - A frame with a length outside `1..=MAX_FRAME` closes that connection
//!   and is counted ([`TcpStats::bad_frames`]); network input never panics.
//! - [`AsyncUdpSocket::serves`] is true exactly for the peers with a
//!   connection (the client: its one peer), so a driver's socket set
//!   that holds a UDP socket and a [`TcpServer`] on the same address sends
//!   each datagram the way its peer came in.
//!   Paths are named by address only, so at one sink a UDP peer and a TCP
//!   peer with the same IP:port (possible: the two port spaces are
//!   separate) would be one peer, sent to over TCP while its connection
//!   lasts; sources avoid giving their TCP sockets a UDP socket's address.
//! - Pending writes progress in `poll_recv` too: the drivers poll every
//!   socket's receive side each round, and a write that would block
//!   registers the waker there.
//! - A [`TcpClient`] whose connection fails or closes connects again from
//!   the same local address (at most once per [`TCP_RECONNECT_DELAY`]), so
//!   the peer sees the same remote address and the IQ-RUDP connection goes
//!   on.

pub mod frame;

use super::io::{AsyncUdpSocket, RecvMeta, UdpTransmit};
use super::stats::TcpStats;
use crate::clock;
use braid_core::{Duration, Instant};
use frame::{FrameReader, FrameWriter};
use std::future::Future;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Unwritten bytes one connection may hold in user space (on top of the
/// kernel's socket buffer) before datagrams to it are dropped.
pub const TCP_SEND_BUFFER: usize = 64 << 10;
/// Unsent bytes the kernel may hold per connection
/// (`TCP_NOTSENT_LOWAT`): beyond what TCP has in flight, the queue stays in
/// [`TCP_SEND_BUFFER`], where it is bounded and drops.
pub const TCP_UNSENT_BYTES: u32 = 16 << 10;
/// Connections a [`TcpServer`] holds at once.
pub const MAX_TCP_PEERS: usize = 256;
/// A connection that has received nothing for this long may be closed to
/// make room for a new one when a [`TcpServer`] is full.
pub const TCP_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Least time between two connection attempts of a [`TcpClient`].
pub const TCP_RECONNECT_DELAY: Duration = Duration::from_millis(500);
/// Datagrams one send may carry (the batch is split into frames).
const TCP_SEGMENTS: usize = 64;

/// One TCP connection carrying framed datagrams.
#[derive(Debug)]
struct Peer {
    addr: SocketAddr,
    stream: TcpStream,
    rx: FrameReader,
    tx: FrameWriter,
    last_rx: Instant,
}

/// Why a connection is over.
enum Ended {
    Closed,
    BadFrame,
}

impl Peer {
    fn new(addr: SocketAddr, stream: TcpStream, tx: FrameWriter) -> Peer {
        // Datagrams must not wait for Nagle; best effort.
        let _ = stream.set_nodelay(true);
        crate::pipe::net::set_notsent_lowat(&stream, TCP_UNSENT_BYTES);
        Peer {
            addr,
            stream,
            rx: FrameReader::default(),
            tx,
            last_rx: clock::now(),
        }
    }

    /// Moves complete frames into `bufs[*got..]` until they are full or
    /// the stream would block (waker registered).
    fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        local: SocketAddr,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
        got: &mut usize,
    ) -> Result<(), Ended> {
        loop {
            while *got < bufs.len().min(meta.len()) {
                match self.rx.next_frame() {
                    Ok(Some(f)) => {
                        let len = f.len().min(bufs[*got].len());
                        bufs[*got][..len].copy_from_slice(&f[..len]);
                        meta[*got] = RecvMeta {
                            addr: self.addr,
                            len,
                            stride: len,
                            dst_ip: Some(local.ip()),
                        };
                        *got += 1;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(peer = %self.addr, error = %e, "tcp datagrams: closing");
                        return Err(Ended::BadFrame);
                    }
                }
            }
            if *got >= bufs.len().min(meta.len()) {
                return Ok(());
            }
            let mut rb = ReadBuf::new(self.rx.spare());
            match Pin::new(&mut self.stream).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => {
                    let n = rb.filled().len();
                    if n == 0 {
                        return Err(Ended::Closed);
                    }
                    self.rx.filled(n);
                    self.last_rx = clock::now();
                }
                Poll::Ready(Err(e)) => {
                    tracing::debug!(peer = %self.addr, error = %e, "tcp datagrams: read error");
                    return Err(Ended::Closed);
                }
                Poll::Pending => return Ok(()),
            }
        }
    }

    /// Writes pending frames until done or the stream would block (waker
    /// registered).
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Result<(), Ended> {
        while !self.tx.pending().is_empty() {
            match Pin::new(&mut self.stream).poll_write(cx, self.tx.pending()) {
                Poll::Ready(Ok(0)) => return Err(Ended::Closed),
                Poll::Ready(Ok(n)) => self.tx.advance(n),
                Poll::Ready(Err(e)) => {
                    tracing::debug!(peer = %self.addr, error = %e, "tcp datagrams: write error");
                    return Err(Ended::Closed);
                }
                Poll::Pending => return Ok(()),
            }
        }
        Ok(())
    }
}

/// Splits a batch into its datagrams.
fn datagrams<'a>(t: &'a UdpTransmit<'a>) -> impl Iterator<Item = &'a [u8]> {
    let seg = t.segment_size.unwrap_or(t.contents.len()).max(1);
    t.contents.chunks(seg)
}

type Connect = Pin<Box<dyn Future<Output = io::Result<TcpStream>> + Send>>;

enum ClientState {
    Connecting(Connect),
    Up(Box<Peer>),
    /// No connection since this time.
    Down(Instant),
}

/// Datagrams to one peer over one TCP connection (see the module docs).
pub struct TcpClient {
    local: SocketAddr,
    peer: SocketAddr,
    state: ClientState,
    /// Frames queued while connecting (moved into the peer once up).
    queued: FrameWriter,
    stats: TcpStats,
}

impl std::fmt::Debug for TcpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpClient")
            .field("local", &self.local)
            .field("peer", &self.peer)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl TcpClient {
    /// Binds a TCP socket to `local` (port 0: the OS picks one) and starts
    /// connecting to `peer`; datagrams sent meanwhile wait (within
    /// [`TCP_SEND_BUFFER`]). Must be called within a tokio runtime.
    ///
    /// # Errors
    /// The OS error of creating or binding the socket.
    pub fn connect(local: SocketAddr, peer: SocketAddr) -> io::Result<TcpClient> {
        let (socket, local) = bind_client(local)?;
        Ok(TcpClient {
            local,
            peer,
            state: ClientState::Connecting(Box::pin(socket.connect(peer))),
            queued: FrameWriter::new(TCP_SEND_BUFFER),
            stats: TcpStats::default(),
        })
    }

    /// The peer.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Advances the connection: finishes connecting, reconnects after a
    /// failure, writes what is pending. True if it is up.
    fn poll_progress(&mut self, cx: &mut Context<'_>) -> bool {
        if let ClientState::Down(since) = self.state {
            let now = clock::now();
            if now < since + TCP_RECONNECT_DELAY {
                return false;
            }
            match bind_client(self.local) {
                Ok((s, _)) => self.state = ClientState::Connecting(Box::pin(s.connect(self.peer))),
                Err(e) => {
                    tracing::debug!(peer = %self.peer, error = %e, "tcp datagrams: cannot rebind");
                    self.state = ClientState::Down(now);
                    return false;
                }
            }
        }
        if let ClientState::Connecting(c) = &mut self.state {
            match c.as_mut().poll(cx) {
                Poll::Pending => return false,
                Poll::Ready(Err(e)) => {
                    tracing::debug!(peer = %self.peer, error = %e, "tcp datagrams: connect failed");
                    self.state = ClientState::Down(clock::now());
                    return false;
                }
                Poll::Ready(Ok(stream)) => {
                    self.stats.connections += 1;
                    let tx = std::mem::replace(&mut self.queued, FrameWriter::new(TCP_SEND_BUFFER));
                    self.state = ClientState::Up(Box::new(Peer::new(self.peer, stream, tx)));
                }
            }
        }
        let ClientState::Up(p) = &mut self.state else {
            return false;
        };
        if p.poll_write(cx).is_err() {
            self.down();
            return false;
        }
        true
    }

    fn down(&mut self) {
        self.stats.closed += 1;
        self.state = ClientState::Down(clock::now());
    }
}

/// A TCP socket bound to `local` (reusable, so a reconnection can take
/// the same address again) and the address it got.
fn bind_client(local: SocketAddr) -> io::Result<(TcpSocket, SocketAddr)> {
    let s = if local.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    s.set_reuseaddr(true)?;
    s.bind(local)?;
    let local = s.local_addr()?;
    Ok((s, local))
}

impl AsyncUdpSocket for TcpClient {
    fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        if !self.poll_progress(cx) {
            return Poll::Pending;
        }
        let ClientState::Up(p) = &mut self.state else {
            return Poll::Pending;
        };
        let mut got = 0;
        match p.poll_read(cx, self.local, bufs, meta, &mut got) {
            Ok(()) => {}
            Err(e) => {
                if matches!(e, Ended::BadFrame) {
                    self.stats.bad_frames += 1;
                }
                self.down();
                if got == 0 {
                    // Reconnecting needs a wake-up after the delay; the
                    // transport's retransmissions (poll_send) bring it.
                    return Poll::Pending;
                }
            }
        }
        if got == 0 {
            Poll::Pending
        } else {
            Poll::Ready(Ok(got))
        }
    }

    fn poll_send(&mut self, cx: &mut Context<'_>, t: &UdpTransmit<'_>) -> Poll<io::Result<()>> {
        let up = self.poll_progress(cx);
        let w = match &mut self.state {
            ClientState::Up(p) => &mut p.tx,
            ClientState::Connecting(_) => &mut self.queued,
            ClientState::Down(_) => {
                self.stats.dropped += datagrams(t).count() as u64;
                return Poll::Ready(Ok(()));
            }
        };
        for d in datagrams(t) {
            if t.destination != self.peer || !w.push(d) {
                self.stats.dropped += 1;
            }
        }
        if up {
            self.poll_progress(cx);
        }
        Poll::Ready(Ok(()))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    fn max_gso_segments(&self) -> usize {
        TCP_SEGMENTS
    }

    fn serves(&self, remote: SocketAddr) -> bool {
        remote == self.peer
    }

    fn tcp_stats(&self) -> TcpStats {
        self.stats
    }
}

/// Datagrams from and to many peers, each over the TCP connection it made
/// to this listener (see the module docs).
#[derive(Debug)]
pub struct TcpServer {
    listener: TcpListener,
    local: SocketAddr,
    peers: Vec<Peer>,
    /// The peer whose turn it is to be read first.
    next: usize,
    stats: TcpStats,
}

impl TcpServer {
    /// Listens on `addr` (normally the address of a UDP socket already
    /// bound, so that both share IP and port). Must be called within a
    /// tokio runtime.
    ///
    /// # Errors
    /// The OS error of binding or listening (e.g. the TCP port is taken).
    pub fn bind(addr: SocketAddr) -> io::Result<TcpServer> {
        let s = if addr.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        s.set_reuseaddr(true)?;
        s.bind(addr)?;
        let listener = s.listen(1024)?;
        let local = listener.local_addr()?;
        Ok(TcpServer {
            listener,
            local,
            peers: Vec::new(),
            next: 0,
            stats: TcpStats::default(),
        })
    }

    /// Connections held now.
    pub fn peers(&self) -> usize {
        self.peers.len()
    }

    /// Takes new connections while the listener has them.
    fn poll_accept(&mut self, cx: &mut Context<'_>) {
        while let Poll::Ready(r) = self.listener.poll_accept(cx) {
            let (stream, addr) = match r {
                Ok(x) => x,
                Err(e) => {
                    tracing::debug!(error = %e, "tcp datagrams: accept error");
                    continue;
                }
            };
            if let Some(i) = self.peers.iter().position(|p| p.addr == addr) {
                // The same peer again: its old connection is gone.
                self.peers.swap_remove(i);
                self.stats.closed += 1;
            }
            if self.peers.len() >= MAX_TCP_PEERS && !self.evict_idle() {
                self.stats.refused += 1;
                tracing::debug!(%addr, "tcp datagrams: too many connections, refused");
                continue;
            }
            self.stats.connections += 1;
            self.peers
                .push(Peer::new(addr, stream, FrameWriter::new(TCP_SEND_BUFFER)));
        }
    }

    /// Closes the connection idle longest if it is idle past
    /// [`TCP_IDLE_TIMEOUT`]; true if one was closed.
    fn evict_idle(&mut self) -> bool {
        let now = clock::now();
        let Some((i, p)) = self.peers.iter().enumerate().min_by_key(|(_, p)| p.last_rx) else {
            return false;
        };
        if now < p.last_rx + TCP_IDLE_TIMEOUT {
            return false;
        }
        self.peers.swap_remove(i);
        self.stats.closed += 1;
        true
    }

    /// Writes every connection's pending frames; drops the broken ones.
    fn poll_writes(&mut self, cx: &mut Context<'_>) {
        let stats = &mut self.stats;
        self.peers.retain_mut(|p| match p.poll_write(cx) {
            Ok(()) => true,
            Err(_) => {
                stats.closed += 1;
                false
            }
        });
    }
}

impl AsyncUdpSocket for TcpServer {
    fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        self.poll_accept(cx);
        self.poll_writes(cx);
        let n = self.peers.len();
        let mut got = 0;
        let mut ended = Vec::new();
        for k in 0..n {
            let i = (self.next + k) % n;
            match self.peers[i].poll_read(cx, self.local, bufs, meta, &mut got) {
                Ok(()) => {}
                Err(e) => {
                    if matches!(e, Ended::BadFrame) {
                        self.stats.bad_frames += 1;
                    }
                    ended.push(i);
                }
            }
            if got >= bufs.len().min(meta.len()) {
                // Full: this peer goes first next time.
                self.next = i;
                break;
            }
        }
        // Highest index first, so the others stay where they are.
        ended.sort_unstable_by(|a, b| b.cmp(a));
        for i in ended {
            self.peers.swap_remove(i);
            self.stats.closed += 1;
        }
        if got == 0 {
            Poll::Pending
        } else {
            Poll::Ready(Ok(got))
        }
    }

    fn poll_send(&mut self, cx: &mut Context<'_>, t: &UdpTransmit<'_>) -> Poll<io::Result<()>> {
        let Some(i) = self.peers.iter().position(|p| p.addr == t.destination) else {
            self.stats.dropped += datagrams(t).count() as u64;
            return Poll::Ready(Ok(()));
        };
        let p = &mut self.peers[i];
        for d in datagrams(t) {
            if !p.tx.push(d) {
                self.stats.dropped += 1;
            }
        }
        if p.poll_write(cx).is_err() {
            self.peers.swap_remove(i);
            self.stats.closed += 1;
        }
        Poll::Ready(Ok(()))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }

    fn max_gso_segments(&self) -> usize {
        TCP_SEGMENTS
    }

    fn serves(&self, remote: SocketAddr) -> bool {
        self.peers.iter().any(|p| p.addr == remote)
    }

    fn tcp_stats(&self) -> TcpStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rudp::io::RecvBuffers;
    use tokio::io::AsyncWriteExt;

    async fn send(s: &mut dyn AsyncUdpSocket, to: SocketAddr, d: &[u8]) {
        let t = UdpTransmit {
            destination: to,
            contents: d,
            segment_size: None,
            src_ip: None,
        };
        std::future::poll_fn(|cx| s.poll_send(cx, &t))
            .await
            .unwrap();
    }

    /// The next datagrams `s` receives (at least one), with their senders.
    async fn recv(s: &mut dyn AsyncUdpSocket) -> Vec<(SocketAddr, Vec<u8>)> {
        let mut bufs = RecvBuffers::default();
        let mut got = Vec::new();
        std::future::poll_fn(|cx| bufs.poll_recv_from(s, cx, |a, d| got.push((a, d.to_vec()))))
            .await
            .unwrap();
        got
    }

    async fn within<T>(f: impl Future<Output = T>) -> T {
        tokio::time::timeout(std::time::Duration::from_secs(10), f)
            .await
            .expect("within 10 s")
    }

    #[tokio::test]
    async fn datagrams_go_both_ways_and_each_peer_is_served() {
        let mut server = TcpServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let at = server.local_addr().unwrap();
        let mut client = TcpClient::connect("127.0.0.1:0".parse().unwrap(), at).unwrap();
        let me = client.local_addr().unwrap();
        assert!(client.serves(at) && !client.serves(me));
        // Sent while connecting: it waits, then goes.
        send(&mut client, at, &[1; 100]).await;
        send(&mut client, at, &[2; 1472]).await;
        let mut got = Vec::new();
        while got.len() < 2 {
            // The client's connection progresses in its receive half.
            let _ =
                tokio::time::timeout(std::time::Duration::from_millis(10), recv(&mut client)).await;
            if let Ok(d) =
                tokio::time::timeout(std::time::Duration::from_millis(10), recv(&mut server)).await
            {
                got.extend(d);
            }
        }
        assert_eq!(got, vec![(me, vec![1; 100]), (me, vec![2; 1472])]);
        assert!(server.serves(me), "the peer has a connection");
        send(&mut server, me, &[3; 500]).await;
        assert_eq!(within(recv(&mut client)).await, vec![(at, vec![3; 500])]);
        let other: SocketAddr = "127.0.0.1:9".parse().unwrap();
        send(&mut server, other, &[4; 10]).await;
        assert_eq!(server.tcp_stats().dropped, 1, "no connection to it");
        assert_eq!(server.tcp_stats().connections, 1);
    }

    #[tokio::test]
    async fn a_bad_length_closes_only_that_connection() {
        let mut server = TcpServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let at = server.local_addr().unwrap();
        let mut good = tokio::net::TcpStream::connect(at).await.unwrap();
        let mut bad = tokio::net::TcpStream::connect(at).await.unwrap();
        bad.write_all(&[0, 0]).await.unwrap();
        good.write_all(&[0, 3, 7, 8, 9]).await.unwrap();
        let got = within(async {
            loop {
                let d = recv(&mut server).await;
                if !d.is_empty() {
                    return d;
                }
            }
        })
        .await;
        assert_eq!(got, vec![(good.local_addr().unwrap(), vec![7, 8, 9])]);
        within(async {
            while server.tcp_stats().bad_frames == 0 {
                let _ =
                    tokio::time::timeout(std::time::Duration::from_millis(10), recv(&mut server))
                        .await;
            }
        })
        .await;
        assert_eq!(server.peers(), 1, "the good one stays");
        assert!(server.serves(good.local_addr().unwrap()));
        assert!(!server.serves(bad.local_addr().unwrap()));
    }

    #[tokio::test]
    async fn a_client_reconnects_from_the_same_address() {
        let mut server = TcpServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let at = server.local_addr().unwrap();
        let mut client = TcpClient::connect("127.0.0.1:0".parse().unwrap(), at).unwrap();
        let me = client.local_addr().unwrap();
        send(&mut client, at, &[1; 10]).await;
        within(async {
            loop {
                let _ =
                    tokio::time::timeout(std::time::Duration::from_millis(10), recv(&mut client))
                        .await;
                if let Ok(d) =
                    tokio::time::timeout(std::time::Duration::from_millis(10), recv(&mut server))
                        .await
                {
                    assert_eq!(d, vec![(me, vec![1; 10])]);
                    return;
                }
            }
        })
        .await;
        // The far end restarts: the old connection dies with it.
        drop(server);
        let mut server = TcpServer::bind(at).unwrap();
        let got = within(async {
            loop {
                send(&mut client, at, &[2; 10]).await;
                let _ =
                    tokio::time::timeout(std::time::Duration::from_millis(10), recv(&mut client))
                        .await;
                if let Ok(d) =
                    tokio::time::timeout(std::time::Duration::from_millis(50), recv(&mut server))
                        .await
                {
                    return d;
                }
            }
        })
        .await;
        assert_eq!(got[0], (me, vec![2; 10]), "same address, new connection");
        assert!(client.tcp_stats().connections >= 2);
    }
}
