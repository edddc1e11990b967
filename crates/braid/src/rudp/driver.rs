//! The driver: one task that owns the sans-IO endpoint, every connection
//! on it and the sockets they travel through, and moves bytes, commands,
//! messages and events between the sockets, the core and the
//! application's handles.
//!
//! Main types: [`Driver`] (a hand-written future, spawned by
//! [`super::Endpoint::bind`]); the messages it exchanges with the handles
//! are in [`super::msg`].
//!
//! Invariants:
//! - The driver is the only owner of the core endpoint and its sockets;
//!   handles reach it only through bounded channels.
//! - Sockets, batching and the timer are [`super::sockets::SocketSet`]'s
//!   (shared with the session and relay drivers), with its invariants.
//! - A message is taken from a connection's channel only when the core's
//!   send queue has room for it (the core's `send` would otherwise consume
//!   it and fail), so at most one message per connection waits in the
//!   driver (`stalled_tx`).
//! - At most one received message per connection waits in the driver
//!   (`stalled_rx`) while the application's channel is full; the core keeps
//!   the rest and its flow control stops the peer.
//! - Every poll that returns `Pending` has registered a waker with each
//!   source that can make progress (sockets, channels, timer), or has
//!   woken itself.
//! - The driver ends when no handle is left and every connection is gone.

use super::msg::{self, Command, DriverSide, HandleSide, Outgoing};
use super::sockets::{Socket, SocketSet};
use super::stats::{DriverStats, IoStats};
use super::{EndpointConfig, RudpError, MAX_ROUNDS};
use crate::clock;
use braid_core::transport::{
    CloseReason, Connection as CoreConnection, ConnectionHandle, Endpoint as CoreEndpoint,
    ErrorCode, Event, ReceivedMessage, SendError, SendOptions, SendRefused, StreamId,
};
use braid_core::Instant;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use tokio::sync::{mpsc, oneshot};

struct PendingConnect {
    conn: HandleSide,
    reply: oneshot::Sender<Result<HandleSide, RudpError>>,
    deadline: Instant,
}

struct Conn {
    side: DriverSide,
    /// False once every sending handle is gone.
    data_open: bool,
    stalled_tx: Option<(StreamId, Vec<u8>, SendOptions)>,
    stalled_rx: Option<ReceivedMessage>,
    connect: Option<PendingConnect>,
    finish_waiters: Vec<oneshot::Sender<CloseReason>>,
    closed: Option<CloseReason>,
}

impl Conn {
    fn new(side: DriverSide) -> Conn {
        Conn {
            side,
            data_open: true,
            stalled_tx: None,
            stalled_rx: None,
            connect: None,
            finish_waiters: Vec::new(),
            closed: None,
        }
    }
}

/// The task that owns an endpoint and its sockets.
pub(crate) struct Driver {
    sockets: SocketSet,
    core: CoreEndpoint,
    config: EndpointConfig,
    cmd_rx: mpsc::Receiver<Command>,
    cmd_open: bool,
    /// For the handles of connections the driver creates; weak so that the
    /// command channel closes when the application drops every handle.
    cmd_weak: mpsc::WeakSender<Command>,
    accept_tx: Option<mpsc::Sender<HandleSide>>,
    conns: HashMap<ConnectionHandle, Conn>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("connections", &self.conns.len())
            .field("sockets", &self.sockets)
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// A driver over `sockets` (at least one: the first is where paths
    /// without a local address leave).
    pub(crate) fn new(
        sockets: Vec<Socket>,
        core: CoreEndpoint,
        config: EndpointConfig,
        cmd_rx: mpsc::Receiver<Command>,
        cmd_weak: mpsc::WeakSender<Command>,
        accept_tx: Option<mpsc::Sender<HandleSide>>,
    ) -> Driver {
        Driver {
            sockets: SocketSet::new(sockets),
            core,
            config,
            cmd_rx,
            cmd_open: true,
            cmd_weak,
            accept_tx,
            conns: HashMap::new(),
        }
    }

    fn new_handle(&self, h: ConnectionHandle, remote: SocketAddr) -> Option<(HandleSide, Conn)> {
        let cmd = self.cmd_weak.upgrade()?;
        let (c, side) = msg::channels(
            h,
            remote,
            cmd,
            self.config.transport.max_message_size,
            self.config.send_queue_messages,
        );
        Some((c, Conn::new(side)))
    }

    // ---- commands --------------------------------------------------------

    fn poll_commands(&mut self, cx: &mut Context<'_>) -> bool {
        let mut progress = false;
        for _ in 0..super::COMMAND_QUEUE {
            if !self.cmd_open {
                break;
            }
            match self.cmd_rx.poll_recv(cx) {
                Poll::Ready(Some(c)) => {
                    progress = true;
                    self.on_command(c);
                }
                Poll::Ready(None) => self.cmd_open = false,
                Poll::Pending => break,
            }
        }
        progress
    }

    fn on_command(&mut self, c: Command) {
        let now = clock::now();
        match c {
            Command::Connect { path, reply } => {
                let remote = path.remote;
                if let Some(local) = path.local {
                    if !self.sockets.has_local(local) {
                        let _ = reply.send(Err(RudpError::UnknownLocalAddress(local)));
                        return;
                    }
                }
                let h = match self.core.connect_on(now, path) {
                    Ok(h) => h,
                    Err(_) => {
                        let _ = reply.send(Err(RudpError::TooManyConnections));
                        return;
                    }
                };
                let Some((conn, mut st)) = self.new_handle(h, remote) else {
                    self.core.remove(h);
                    return;
                };
                st.connect = Some(PendingConnect {
                    conn,
                    reply,
                    deadline: now + self.config.handshake_timeout,
                });
                self.conns.insert(h, st);
            }
            Command::Stats { conn, reply } => {
                let _ = reply.send(self.core.connection(conn).map(|c| c.stats()));
            }
            Command::EndpointStats { reply } => {
                let _ = reply.send(DriverStats {
                    endpoint: self.core.stats(),
                    io: self.sockets.stats(),
                    connections: self.core.connection_count(),
                });
            }
            Command::AddThreshold {
                conn,
                condition,
                reply,
            } => {
                let r = self
                    .core
                    .connection_mut(conn)
                    .map(|c| c.add_threshold(condition));
                let _ = reply.send(r);
            }
            Command::Report { conn, report } => {
                if let Some(c) = self.core.connection_mut(conn) {
                    c.report_adaptation(report);
                }
            }
            Command::Close { conn, code, reason } => {
                if let Some(c) = self.core.connection_mut(conn) {
                    c.close(now, code, &reason);
                }
            }
            Command::Wake => {}
        }
    }

    // ---- socket ------------------------------------------------------------

    /// Reads datagrams into the core and runs its due timers; true if any
    /// datagram arrived.
    fn poll_recv(&mut self, cx: &mut Context<'_>) -> bool {
        self.sockets.poll_input(cx, &mut self.core)
    }

    /// Writes what the core has to send; true if anything was written.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> bool {
        self.sockets.poll_output(cx, &mut self.core)
    }

    // ---- timers ------------------------------------------------------------

    /// Handshakes that did not complete in time (the core's own timers
    /// ran with the input, in `poll_recv`).
    fn run_timers(&mut self) {
        let now = clock::now();
        let expired: Vec<ConnectionHandle> = self
            .conns
            .iter()
            .filter(|(_, c)| c.connect.as_ref().is_some_and(|p| p.deadline <= now))
            .map(|(h, _)| *h)
            .collect();
        for h in expired {
            self.core.remove(h);
            if let Some(p) = self.conns.remove(&h).and_then(|c| c.connect) {
                let remote = p.conn.remote;
                let _ = p.reply.send(Err(RudpError::ConnectTimeout {
                    remote,
                    after: self.config.handshake_timeout,
                }));
            }
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let hs = self
            .conns
            .values()
            .filter_map(|c| c.connect.as_ref().map(|p| p.deadline))
            .min();
        match (self.core.poll_timeout(), hs) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    // ---- connections ---------------------------------------------------

    fn accept_new(&mut self) {
        while let Some(h) = self.core.accept() {
            let remote = self
                .core
                .connection(h)
                .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |c| c.remote());
            let Some((conn, st)) = self.new_handle(h, remote) else {
                self.refuse(h);
                continue;
            };
            let Some(tx) = &self.accept_tx else {
                self.refuse(h);
                continue;
            };
            match tx.try_send(conn) {
                Ok(()) => {
                    self.conns.insert(h, st);
                }
                Err(_) => {
                    // Nobody accepts (queue full or endpoint handle gone).
                    self.sockets.io.accept_refused += 1;
                    self.refuse(h);
                }
            }
        }
    }

    fn refuse(&mut self, h: ConnectionHandle) {
        if let Some(c) = self.core.connection_mut(h) {
            c.close(clock::now(), ErrorCode::SERVER_BUSY, b"not accepting");
        }
        // Keep the closing connection in the core (it answers with CLOSE)
        // under a driver entry with no handles; `service` removes it once
        // closed.
        self.conns.insert(h, Conn::new(DriverSide::detached()));
    }

    /// Moves events, received messages and queued sends between the core
    /// and the handles, then forgets the connections that are gone. True
    /// if anything moved. A connection is taken mutably only when
    /// something moves (taking it makes the core look at it again: a
    /// thousand idle connections would cost a walk on every datagram).
    fn service(&mut self, cx: &mut Context<'_>) -> bool {
        self.accept_new();
        let now = clock::now();
        let mut progress = false;
        let mut gone = Vec::new();
        for (&h, st) in self.conns.iter_mut() {
            let Some(c) = self.core.connection(h) else {
                gone.push(h);
                continue;
            };
            if c.has_news() || st.stalled_rx.is_some() {
                if let Some(c) = self.core.connection_mut(h) {
                    progress |= deliver_events(st, c, &mut self.sockets.io);
                    progress |= deliver_messages(st, c, now);
                }
            }
            progress |= take_sends(st, &mut self.core, h, cx, now, &mut self.sockets.io);
            let closed = self.core.connection(h).is_none_or(|c| c.is_closed());
            if closed && st.stalled_rx.is_none() {
                gone.push(h);
            }
        }
        for h in gone {
            self.forget(h);
        }
        progress
    }

    /// Removes a closed connection and answers whoever still waits on it.
    fn forget(&mut self, h: ConnectionHandle) {
        self.core.remove(h);
        let Some(st) = self.conns.remove(&h) else {
            return;
        };
        let reason = st.closed.unwrap_or(CloseReason::IdleTimeout);
        for w in st.finish_waiters {
            let _ = w.send(reason.clone());
        }
        if let Some(p) = st.connect {
            let remote = p.conn.remote;
            let _ = p
                .reply
                .send(Err(RudpError::ConnectFailed { remote, reason }));
        }
    }

    fn done(&self) -> bool {
        !self.cmd_open && self.conns.is_empty() && self.core.connection_count() == 0
    }
}

impl Future for Driver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        for round in 0..MAX_ROUNDS {
            let mut progress = this.poll_commands(cx);
            progress |= this.poll_recv(cx);
            this.run_timers();
            progress |= this.service(cx);
            progress |= this.poll_send(cx);
            if this.done() {
                return Poll::Ready(());
            }
            if !progress {
                break;
            }
            if round + 1 == MAX_ROUNDS {
                // Still busy: let other tasks run, then continue.
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        }
        let deadline = this.next_deadline();
        this.sockets.arm_timer(cx, deadline);
        Poll::Pending
    }
}

/// Passes a connection's events to its handle, answering a pending
/// connect on `Connected` or `Closed`; true if any moved.
fn deliver_events(st: &mut Conn, c: &mut CoreConnection, io: &mut IoStats) -> bool {
    let mut progress = false;
    while let Some(ev) = c.poll_event() {
        progress = true;
        match &ev {
            Event::Connected => {
                if let Some(p) = st.connect.take() {
                    let _ = p.reply.send(Ok(p.conn));
                }
            }
            Event::Closed(r) => {
                st.closed = Some(r.clone());
                for w in st.finish_waiters.drain(..) {
                    let _ = w.send(r.clone());
                }
                if let Some(p) = st.connect.take() {
                    let remote = p.conn.remote;
                    let _ = p.reply.send(Err(RudpError::ConnectFailed {
                        remote,
                        reason: r.clone(),
                    }));
                }
            }
            _ => {}
        }
        if st.side.events.try_send(ev).is_err() {
            io.events_dropped += 1;
        }
    }
    progress
}

/// Passes received messages to the handle while its channel has room; the
/// first that does not fit waits in `stalled_rx`. True if any moved.
fn deliver_messages(st: &mut Conn, c: &mut CoreConnection, now: Instant) -> bool {
    let mut progress = false;
    loop {
        let m = match st.stalled_rx.take() {
            Some(m) => m,
            None => match c.recv(now) {
                Some(m) => m,
                None => break,
            },
        };
        match st.side.messages.try_send(m) {
            Ok(()) => progress = true,
            Err(mpsc::error::TrySendError::Full(m)) => {
                st.side.rx_stalled.store(true, Ordering::Release);
                // Retry once: the receiver may have made room before it
                // could see the flag.
                match st.side.messages.try_send(m) {
                    Ok(()) => progress = true,
                    Err(mpsc::error::TrySendError::Full(m)) => {
                        st.stalled_rx = Some(m);
                        break;
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => {}
                }
            }
            // The application dropped its receiving end.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
    progress
}

/// Moves queued messages (and finish requests) from the handle into the
/// core while its send queue has room; true if any moved.
fn take_sends(
    st: &mut Conn,
    core: &mut CoreEndpoint,
    h: ConnectionHandle,
    cx: &mut Context<'_>,
    now: Instant,
    io: &mut IoStats,
) -> bool {
    let mut progress = false;
    loop {
        if let Some((stream, data, opts)) = st.stalled_tx.take() {
            let Some(c) = core.connection_mut(h) else {
                break;
            };
            match c.send(now, stream, data, opts) {
                Ok(_) => progress = true,
                // The queue is full: the core hands the message back; it
                // waits here until `poll_transmit` drains the queue.
                Err(SendRefused {
                    error: SendError::Blocked,
                    data,
                }) => {
                    st.stalled_tx = Some((stream, data, opts));
                    break;
                }
                Err(e) => {
                    progress = true;
                    io.sends_refused += 1;
                    tracing::debug!(error = %e, "message refused by the transport");
                }
            }
        }
        if !st.data_open || core.connection(h).is_none_or(|c| c.is_closed()) {
            break;
        }
        match st.side.data.poll_recv(cx) {
            Poll::Ready(Some(Outgoing::Message { stream, data, opts })) => {
                st.stalled_tx = Some((stream, data, opts));
            }
            Poll::Ready(Some(Outgoing::Finish(w))) => {
                progress = true;
                match &st.closed {
                    Some(r) => {
                        let _ = w.send(r.clone());
                    }
                    None => {
                        st.finish_waiters.push(w);
                        if let Some(c) = core.connection_mut(h) {
                            c.finish(now);
                        }
                    }
                }
            }
            Poll::Ready(None) => {
                progress = true;
                st.data_open = false;
                if let Some(c) = core.connection_mut(h) {
                    c.finish(now);
                }
            }
            Poll::Pending => break,
        }
    }
    progress
}

#[cfg(test)]
mod tests {
    use super::*;
    use braid_core::transport::Config;

    /// `take_sends` keeps a message the core refuses as `Blocked` and
    /// retries it later: the core must hand it back intact, and refuse it
    /// only when the queue is full (`queued + len > max`, never when empty).
    #[test]
    fn a_blocked_message_comes_back_intact() {
        let config = Config {
            send_queue_bytes: 10_000,
            ..Config::default()
        };
        let max = config.send_queue_bytes;
        let mut ep = CoreEndpoint::new(config, [7; 32], false).unwrap();
        let now = Instant::ZERO;
        let h = ep.connect(now, "127.0.0.1:9".parse().unwrap()).unwrap();
        let c = ep.connection_mut(h).unwrap();
        for (k, len) in [6_000usize, 3_000, 2_000, 1_000, 0, 20_000]
            .into_iter()
            .enumerate()
        {
            let queued = c.queued_bytes();
            let room = queued == 0 || queued + len as u64 <= max;
            let m = vec![k as u8; len];
            match c.send(now, StreamId(0), m.clone(), SendOptions::RELIABLE) {
                Ok(_) => assert!(room, "len {len}"),
                Err(r) => {
                    assert!(!room, "len {len}");
                    assert_eq!(r.error, SendError::Blocked);
                    assert_eq!(r.into_data(), m, "handed back intact");
                }
            }
        }
        // A message larger than the whole queue still goes into an empty one.
        let h = ep.connect(now, "127.0.0.1:9".parse().unwrap()).unwrap();
        let c = ep.connection_mut(h).unwrap();
        assert!(c
            .send(now, StreamId(0), vec![0; 20_000], SendOptions::RELIABLE)
            .is_ok());
    }
}
