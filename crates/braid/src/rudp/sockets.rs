//! The socket half of every braid driver task: a set of UDP sockets, the
//! batched receive and GSO send over them, and the timer that maps braid
//! instants onto tokio's. The transport's driver ([`super::driver`]), the
//! session's and the relay's all own one and differ only in the sans-IO
//! machine they feed.
//!
//! Main type: [`SocketSet`]. Invariants: a datagram received on socket `s`
//! travels the [`FourTuple`] (`s`'s local address, sender); a datagram to
//! send leaves on the socket whose local address is its path's `local`
//! (the first socket when unset or unknown) — of several with that
//! address (a UDP socket and a TCP listener on the same port), the one
//! that [serves](AsyncUdpSocket::serves) its destination, else the first;
//! one batch holds datagrams for
//! one socket and one destination; the datagram that did not fit the last
//! batch waits in `held` with its bytes in `scratch`.

use super::io::{poll_flush, AsyncUdpSocket, Flushed, GsoBatch, RecvBuffers};
use super::stats::IoStats;
use super::{RECV_BATCH, RECV_BUFFER, SEND_BATCH, SPIN_THRESHOLD};
use crate::clock;
use braid_core::transport::{FourTuple, Transmit};
use braid_core::Instant;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

/// One socket and the local address paths name it by.
#[derive(Debug)]
pub(crate) struct Socket {
    io: Box<dyn AsyncUdpSocket>,
    local: SocketAddr,
}

impl Socket {
    /// Wraps a socket.
    ///
    /// # Errors
    /// The socket's error reading its local address.
    pub(crate) fn new(io: Box<dyn AsyncUdpSocket>) -> std::io::Result<Socket> {
        let local = io.local_addr()?;
        Ok(Socket { io, local })
    }

    /// The address it is bound to.
    pub(crate) fn local(&self) -> SocketAddr {
        self.local
    }
}

/// A sans-IO state machine a driver feeds from its sockets: braid-core's
/// transport endpoint, session or relay.
pub(crate) trait Machine {
    /// A datagram arrived over `path`.
    fn handle_datagram(&mut self, now: Instant, path: FourTuple, data: &[u8]);
    /// The instant of `poll_timeout` has passed.
    fn handle_timeout(&mut self, now: Instant);
    /// The next datagram to send, appended to `buf` (which is left as it
    /// was when there is none).
    fn poll_transmit_append(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit>;
    /// When to call `handle_timeout` next.
    fn poll_timeout(&self) -> Option<Instant>;
}

macro_rules! machine {
    ($t:ty) => {
        impl Machine for $t {
            fn handle_datagram(&mut self, now: Instant, path: FourTuple, data: &[u8]) {
                <$t>::handle_datagram(self, now, path, data)
            }
            fn handle_timeout(&mut self, now: Instant) {
                <$t>::handle_timeout(self, now)
            }
            fn poll_transmit_append(
                &mut self,
                now: Instant,
                buf: &mut Vec<u8>,
            ) -> Option<Transmit> {
                <$t>::poll_transmit_append(self, now, buf)
            }
            fn poll_timeout(&self) -> Option<Instant> {
                <$t>::poll_timeout(self)
            }
        }
    };
}
machine!(braid_core::transport::Endpoint);
machine!(braid_core::session::Session);
machine!(braid_core::session::SinkHost);
machine!(braid_core::session::relay::Relay);

/// A driver's sockets, buffers and timer (see the module docs).
pub(crate) struct SocketSet {
    /// At least one; paths name them by local address.
    sockets: Vec<Socket>,
    /// Socket whose turn it is to be read first.
    recv_next: usize,
    rx: RecvBuffers,
    batch: GsoBatch,
    /// The socket `batch` leaves through.
    batch_socket: usize,
    /// The bytes of `held`: a datagram that could not join the batch it
    /// was built in.
    scratch: Vec<u8>,
    held: Option<Transmit>,
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// One instant on both time lines, to map braid deadlines to tokio's.
    tokio_base: tokio::time::Instant,
    braid_base: Instant,
    /// The instant the driver last spun at for a close deadline: it spins
    /// once per instant, then sleeps (see [`SocketSet::arm_timer`]).
    spun_at: Option<Instant>,
    /// Socket counters.
    pub io: IoStats,
}

impl std::fmt::Debug for SocketSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketSet")
            .field("sockets", &self.sockets)
            .field("io", &self.io)
            .finish_non_exhaustive()
    }
}

impl SocketSet {
    /// A set over `sockets` (at least one: the first is where paths
    /// without a local address leave). Must run inside a tokio runtime.
    pub(crate) fn new(sockets: Vec<Socket>) -> SocketSet {
        // A zero sleep's deadline is tokio's "now"; reading braid's clock
        // right after pairs the two time lines (to within microseconds)
        // without a second clock site.
        let sleep = Box::pin(tokio::time::sleep(std::time::Duration::ZERO));
        let tokio_base = sleep.deadline();
        let braid_base = clock::now();
        SocketSet {
            sockets,
            recv_next: 0,
            rx: RecvBuffers::default(),
            batch: GsoBatch::default(),
            batch_socket: 0,
            scratch: Vec::with_capacity(RECV_BUFFER),
            held: None,
            sleep,
            tokio_base,
            braid_base,
            spun_at: None,
            io: IoStats::default(),
        }
    }

    /// Whether a socket is bound to `local`.
    pub(crate) fn has_local(&self, local: SocketAddr) -> bool {
        self.sockets.iter().any(|s| s.local == local)
    }

    /// The socket a path leaves through: of those bound to its local
    /// address, the one that serves its destination, else the first such;
    /// the first socket when none is.
    fn socket_for(&self, path: &FourTuple) -> usize {
        // One socket (the common case) is the answer whatever the path:
        // no address comparisons for every datagram sent.
        if self.sockets.len() == 1 {
            return 0;
        }
        let Some(l) = path.local else {
            return 0;
        };
        let mut first = None;
        for (i, s) in self.sockets.iter().enumerate() {
            if s.local != l && !covers(s.local, l) {
                continue;
            }
            if s.io.serves(path.remote) {
                return i;
            }
            first = first.or(Some(i));
        }
        first.unwrap_or(0)
    }

    /// The source IP a datagram on `path` leaves from through socket `i`:
    /// the path's local IP when the socket is bound to the unspecified
    /// address (see `poll_recv`), else the kernel's choice.
    fn source_ip(&self, i: usize, path: &FourTuple) -> Option<std::net::IpAddr> {
        let bound = self.sockets[i].local;
        let l = path.local?;
        (bound.ip().is_unspecified() && !l.ip().is_unspecified() && covers(bound, l))
            .then_some(l.ip())
    }

    /// The socket counters, with the TCP sockets' added up.
    pub(crate) fn stats(&self) -> IoStats {
        let mut io = self.io;
        for s in &self.sockets {
            io.tcp += s.io.tcp_stats();
        }
        io
    }

    /// Reads up to [`RECV_BATCH`] datagrams, the sockets taking turns, and
    /// hands each to `deliver` with the time and its path; true if any
    /// arrived.
    pub(crate) fn poll_recv(
        &mut self,
        cx: &mut Context<'_>,
        mut deliver: impl FnMut(Instant, FourTuple, &[u8]),
    ) -> bool {
        let mut got = 0;
        let n = self.sockets.len();
        let mut idle = 0;
        while got < RECV_BATCH && idle < n {
            let i = self.recv_next % n;
            self.recv_next = (i + 1) % n;
            let now = clock::now();
            let io = &mut self.io;
            let sock = &mut self.sockets[i];
            let bound = sock.local;
            let r = self.rx.poll_recv_to(&mut *sock.io, cx, |remote, dst, d| {
                io.datagrams_received += 1;
                // On a socket bound to the unspecified address, the path's
                // local end is the address the peer wrote to, so replies
                // leave from it (a multi-homed host reached on one address
                // through another interface must not answer from a third).
                let local = match dst {
                    Some(ip) if bound.ip().is_unspecified() => SocketAddr::new(ip, bound.port()),
                    _ => bound,
                };
                deliver(
                    now,
                    FourTuple {
                        local: Some(local),
                        remote,
                    },
                    d,
                );
            });
            match r {
                Poll::Ready(Ok(k)) => {
                    got += k.max(1);
                    idle = 0;
                }
                Poll::Ready(Err(e)) => {
                    got += 1;
                    idle = 0;
                    self.io.recv_errors += 1;
                    tracing::debug!(error = %e, "udp receive error");
                }
                Poll::Pending => idle += 1,
            }
        }
        got > 0
    }

    /// Collects datagrams from `next` into the next (GSO) batch: one
    /// socket, one destination. `next` appends each datagram to the
    /// batch's own buffer, so a datagram is copied only when it cannot
    /// join and must wait in `held` (its bytes in `scratch`) for the next
    /// batch.
    ///
    /// The clock is read once per batch, and again only when the machine
    /// has nothing to send at the time it was given (reading it for every
    /// datagram was 3 % of a sender's CPU). The second read matters: the
    /// pacer refills from the time, and with the time frozen for the whole
    /// batch every GSO send stopped at its burst of ten datagrams (tried
    /// 2026-11-28: two `sendmsg` per 16 KiB message instead of one).
    fn fill_batch(&mut self, next: &mut impl FnMut(Instant, &mut Vec<u8>) -> Option<Transmit>) {
        if let Some(t) = self.held.take() {
            // Only an empty batch is left to wait behind a held datagram.
            let socket = self.socket_for(&t.path);
            let src = self.source_ip(socket, &t.path);
            let size = t.size.min(self.scratch.len());
            self.batch_socket = socket;
            let max = self.sockets[socket].io.max_gso_segments();
            self.batch
                .push_from(src, t.path.remote, &self.scratch[..size], max);
        }
        let mut now = clock::now();
        let mut fresh = true;
        loop {
            let max = self.sockets[self.batch_socket].io.max_gso_segments();
            if !self.batch.accepts_more(max) {
                // Full, or closed by a shorter datagram: send it first.
                return;
            }
            let t = match next(now, self.batch.buffer()) {
                Some(t) => t,
                None if fresh => return,
                None => {
                    now = clock::now();
                    fresh = true;
                    continue;
                }
            };
            fresh = false;
            let socket = self.socket_for(&t.path);
            if self.batch.is_empty() {
                self.batch_socket = socket;
            }
            let max = self.sockets[self.batch_socket].io.max_gso_segments();
            let src = self.source_ip(socket, &t.path);
            if socket != self.batch_socket {
                // Another socket (the batch is not empty): it waits.
                self.batch.spill_appended(&mut self.scratch);
                self.held = Some(t);
                return;
            }
            if !self
                .batch
                .push_appended(src, t.path.remote, max, &mut self.scratch)
            {
                // Starts the next batch; its bytes are in `scratch`.
                self.held = Some(t);
                return;
            }
        }
    }

    /// Writes what `next` (the machine's `poll_transmit_append`: it
    /// appends each datagram to the buffer it is given) yields, at most
    /// [`SEND_BATCH`] sends per call; true if anything was written.
    pub(crate) fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        mut next: impl FnMut(Instant, &mut Vec<u8>) -> Option<Transmit>,
    ) -> bool {
        let mut progress = false;
        let mut sends = 0;
        loop {
            if self.batch.is_empty() {
                if sends >= SEND_BATCH {
                    return true;
                }
                self.fill_batch(&mut next);
                if self.batch.is_empty() {
                    return progress;
                }
            }
            let sock = &mut self.sockets[self.batch_socket];
            match poll_flush(&mut *sock.io, cx, &mut self.batch) {
                Poll::Ready(Flushed::Sent(n)) => {
                    self.io.datagrams_sent += n as u64;
                    self.io.sends += 1;
                }
                Poll::Ready(Flushed::Failed(n)) => {
                    self.io.send_errors += n as u64;
                    self.io.sends += 1;
                }
                Poll::Pending => return progress,
            }
            progress = true;
            sends += 1;
        }
    }

    /// Input for `m`: the datagrams waiting on the sockets, then its due
    /// timers. True if any datagram arrived.
    pub(crate) fn poll_input(&mut self, cx: &mut Context<'_>, m: &mut impl Machine) -> bool {
        let got = self.poll_recv(cx, |now, path, d| m.handle_datagram(now, path, d));
        let now = clock::now();
        if m.poll_timeout().is_some_and(|t| t <= now) {
            m.handle_timeout(now);
        }
        got
    }

    /// Output of `m`: writes what it has to send; true if anything was
    /// written.
    pub(crate) fn poll_output(&mut self, cx: &mut Context<'_>, m: &mut impl Machine) -> bool {
        self.poll_send(cx, |now, buf| m.poll_transmit_append(now, buf))
    }

    /// `t` on tokio's time line.
    fn tokio_time(&self, t: Instant) -> tokio::time::Instant {
        self.tokio_base + std::time::Duration::from(t.saturating_duration_since(self.braid_base))
    }

    /// Arms the timer for `deadline`, or wakes at once for one that is
    /// due or close (once per instant).
    ///
    /// A close deadline (within [`SPIN_THRESHOLD`], finer than tokio's
    /// millisecond timer) is met by yielding and looking again. That needs
    /// the clock to move between two looks, which a real clock always does;
    /// a paused test clock moves only when every task sleeps. So the
    /// driver spins at most once per instant, for a deadline due or close:
    /// a second look at the same instant sleeps until the deadline (or a
    /// nanosecond past now), and a paused clock then advances to it.
    pub(crate) fn arm_timer(&mut self, cx: &mut Context<'_>, deadline: Option<Instant>) {
        let Some(t) = deadline else {
            return;
        };
        let now = clock::now();
        if t <= now + SPIN_THRESHOLD && self.spun_at != Some(now) {
            self.spun_at = Some(now);
            cx.waker().wake_by_ref();
            return;
        }
        let mut when = self.tokio_time(t);
        if self.spun_at == Some(now) {
            // A second look at one instant: time has not moved. Sleep, at
            // least a moment past tokio's now even for a deadline already
            // due (which the machine did not take), so the clock moves:
            // braid's line may also sit at its origin while tokio's moves
            // (see `clock::tokio_now`). A real clock never comes here
            // twice at one nanosecond, so the hot path reads no second
            // clock.
            when = when.max(clock::tokio_now() + std::time::Duration::from_micros(1));
        }
        if self.sleep.deadline() != when {
            self.sleep.as_mut().reset(when);
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            cx.waker().wake_by_ref();
        }
    }
}

/// Whether a socket bound to `bound` receives for local address `l`: the
/// same port on the unspecified address of the same family.
fn covers(bound: SocketAddr, l: SocketAddr) -> bool {
    bound.ip().is_unspecified() && bound.port() == l.port() && bound.is_ipv4() == l.is_ipv4()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rudp::mem::MemNet;

    /// A pacer in miniature lets ten datagrams go per instant it is shown:
    /// the batch must read the clock again when it stalls, not stop at ten
    /// (as it did with the time frozen per batch) — nor read it per
    /// datagram.
    #[tokio::test]
    async fn a_stalled_batch_goes_on_when_the_time_moves() {
        let net = MemNet::new();
        let any: SocketAddr = "10.0.0.1:0".parse().unwrap();
        let tx = net.bind(any).unwrap();
        let rx = net.bind(any).unwrap();
        let to = rx.local_addr().unwrap();
        let mut set = SocketSet::new(vec![Socket::new(Box::new(tx)).unwrap()]);
        let (mut last, mut left, mut total, mut instants) = (None, 0, 0, 0);
        let mut next = |now: Instant, buf: &mut Vec<u8>| {
            if last != Some(now) {
                last = Some(now);
                left = 10;
                instants += 1;
            }
            if left == 0 || total == 60 {
                return None;
            }
            left -= 1;
            total += 1;
            buf.extend_from_slice(&[7; 1000]);
            Some(Transmit {
                path: FourTuple {
                    local: None,
                    remote: to,
                },
                size: 1000,
            })
        };
        let sent = std::future::poll_fn(|cx| Poll::Ready(set.poll_send(cx, &mut next))).await;
        assert!(sent);
        // 60 datagrams of 1000 bytes fill one batch to the byte.
        const { assert!(60 * 1000 == super::super::io::MAX_GSO_BYTES) };
        const { assert!(crate::rudp::mem::MEM_GSO_SEGMENTS >= 60) };
        assert_eq!(total, 60);
        assert_eq!(
            (set.io.datagrams_sent, set.io.sends),
            (60, 1),
            "60 datagrams of 1000 bytes are one GSO send"
        );
        // Six instants fill it; full, it goes out without asking for more;
        // a seventh starts (and ends) the next batch.
        assert_eq!(
            instants, 7,
            "the clock read once per stall, not per datagram"
        );
    }
}
