//! The session driver: one task that owns a sans-IO session, its
//! connections and its sockets, and moves datagrams, stream messages,
//! events and commands between them and the application's handles.
//!
//! Main type: [`Driver`] (a hand-written future spawned by
//! [`super::Session::connect`] or [`super::SessionListener::bind`]).
//!
//! Each time it runs it: takes commands; reads datagrams into the core;
//! runs due timers; feeds streams' queued messages into the core (source)
//! or the core's delivered messages to the application (sink); moves
//! events out; writes what the core has to send. A sink driver serves one
//! session after another on its socket: once a session is over and its
//! messages are taken, it starts a fresh sink state machine (a new
//! *generation*) for the next source.
//!
//! Invariants:
//! - The driver is the only owner of the core session and its sockets;
//!   handles reach it only through bounded channels.
//! - At most one message per stream waits in the driver (`stalled`), when
//!   the core refused it for a full window or byte bound; the stream's
//!   channel is not read until it has gone in.
//! - At most one received message waits in the driver while the sink
//!   application's channel is full; the core keeps the rest.
//! - Every poll that returns `Pending` has registered a waker with each
//!   source that can make progress (sockets, channels, timer), or has woken
//!   itself.

use super::msg::{Command, ConnectError, ConnectReply, Incoming, Message, StreamItem};
use super::{SessionError, RECV_QUEUE};
use crate::clock;
use crate::rudp::sockets::{Socket, SocketSet};
use crate::rudp::MAX_ROUNDS;
use braid_core::scheduler::UpcallAnswer;
use braid_core::session::{
    CloseCode, CloseReason, Event, Session as Core, SessionConfig as CoreConfig,
};
use braid_core::{Duration, Instant, StreamId};
use bytes::Bytes;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::{mpsc, oneshot, watch};

/// How long a closed session keeps answering (its CLOSE frames
/// retransmitted, the peer's acknowledgements taken) before the driver
/// lets it go.
const LINGER: Duration = Duration::from_secs(1);
/// How long a source that closed the session itself lingers at most for
/// the sink to show it heard the CLOSE (see
/// [`Core::is_close_heard`]): over a slow or congested path one second is
/// not enough, and a CLOSE lost with the process leaves the sink waiting
/// out its peer timeout with its streams unfinished.
const LINGER_FOR_CLOSE: Duration = Duration::from_secs(5);

struct OutStream {
    id: StreamId,
    items: mpsc::Receiver<StreamItem>,
    stalled: Option<Vec<u8>>,
    /// The handle asked to finish (or is gone): the core was told.
    finishing: bool,
    waiters: Vec<oneshot::Sender<Result<(), SessionError>>>,
}

/// A source waiting in `connect` for its first path.
struct Connecting {
    reply: ConnectReply,
    deadline: Instant,
}

/// The sink side's per-generation state.
pub(super) struct SinkState {
    config: CoreConfig,
    accept_tx: mpsc::Sender<Incoming>,
    /// The application's channels of this generation, until handed over.
    pending: Option<Incoming>,
    msgs: mpsc::Sender<Message>,
    stalled: Option<Message>,
    rx_stalled: Arc<AtomicBool>,
    events: mpsc::Sender<Event>,
    close_tx: watch::Sender<Option<CloseReason>>,
}

impl SinkState {
    pub(super) fn new(config: CoreConfig, accept_tx: mpsc::Sender<Incoming>) -> SinkState {
        let (incoming, msgs, events, rx_stalled, close_tx) = Incoming::channels(RECV_QUEUE);
        SinkState {
            config,
            accept_tx,
            pending: Some(incoming),
            msgs,
            stalled: None,
            rx_stalled,
            events,
            close_tx,
        }
    }
}

/// Source or sink specifics.
enum Side {
    Source {
        streams: Vec<OutStream>,
        connecting: Option<Connecting>,
        closing: Option<(oneshot::Sender<Result<(), SessionError>>, Instant)>,
        events: mpsc::Sender<Event>,
        close_tx: watch::Sender<Option<CloseReason>>,
    },
    Sink(Box<SinkState>),
}

/// The task that owns a session and its sockets.
pub(super) struct Driver {
    sockets: SocketSet,
    core: Core,
    side: Side,
    cmd_rx: mpsc::Receiver<Command>,
    cmd_open: bool,
    /// When the core session closed (it lingers, then the driver ends or
    /// starts the next generation).
    closed_at: Option<Instant>,
    events_dropped: u64,
}

impl Driver {
    /// A source driver.
    pub(super) fn source(
        sockets: Vec<Socket>,
        core: Core,
        cmd_rx: mpsc::Receiver<Command>,
        events: mpsc::Sender<Event>,
        close_tx: watch::Sender<Option<CloseReason>>,
        connect: ConnectReply,
        connect_timeout: Duration,
    ) -> Driver {
        Driver {
            sockets: SocketSet::new(sockets),
            core,
            side: Side::Source {
                streams: Vec::new(),
                connecting: Some(Connecting {
                    reply: connect,
                    deadline: clock::now() + connect_timeout,
                }),
                closing: None,
                events,
                close_tx,
            },
            cmd_rx,
            cmd_open: true,
            closed_at: None,
            events_dropped: 0,
        }
    }

    /// A sink driver (serving one session after another).
    pub(super) fn sink(
        sockets: Vec<Socket>,
        core: Core,
        cmd_rx: mpsc::Receiver<Command>,
        state: SinkState,
    ) -> Driver {
        Driver {
            sockets: SocketSet::new(sockets),
            core,
            side: Side::Sink(Box::new(state)),
            cmd_rx,
            cmd_open: true,
            closed_at: None,
            events_dropped: 0,
        }
    }

    // ---- commands --------------------------------------------------------

    fn poll_commands(&mut self, cx: &mut Context<'_>) -> bool {
        let mut progress = false;
        while self.cmd_open {
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
            Command::OpenStream {
                config,
                reply,
                items,
            } => {
                let Side::Source { streams, .. } = &mut self.side else {
                    let _ = reply.send(Err(braid_core::session::SessionError::WrongRole(
                        "open_stream",
                        "sink",
                    )
                    .into()));
                    return;
                };
                match self.core.open_stream(now, config) {
                    Ok(id) => {
                        streams.push(OutStream {
                            id,
                            items,
                            stalled: None,
                            finishing: false,
                            waiters: Vec::new(),
                        });
                        let _ = reply.send(Ok(id));
                    }
                    Err(e) => {
                        let _ = reply.send(Err(e.into()));
                    }
                }
            }
            Command::Snapshot { reply } => {
                let _ = reply.send(self.core.snapshot(now));
            }
            Command::AnswerUpcall {
                stream,
                answer,
                reply,
            } => {
                let r = self.core.answer_upcall(stream, answer, now);
                if matches!(answer, UpcallAnswer::Close) {
                    self.drop_stream(stream);
                }
                let _ = reply.send(r.map_err(Into::into));
            }
            Command::Close { reply, deadline } => {
                if let Side::Source { closing, .. } = &mut self.side {
                    *closing = Some((reply, now + deadline));
                } else {
                    self.core.close(now, CloseCode::Application, "sink closed");
                    let _ = reply.send(Ok(()));
                }
            }
            Command::Wake => {}
        }
    }

    /// Forgets a stream the scheduler closed (its handle's sends now fail).
    fn drop_stream(&mut self, stream: StreamId) {
        if let Side::Source { streams, .. } = &mut self.side {
            streams.retain(|s| s.id != stream);
        }
    }

    // ---- streams (source) -------------------------------------------------

    /// Moves queued messages into the core while it takes them; answers
    /// finish waiters. True if anything moved.
    fn feed_streams(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let Side::Source { streams, .. } = &mut self.side else {
            return false;
        };
        let mut progress = false;
        for s in streams.iter_mut() {
            loop {
                if let Some(data) = s.stalled.take() {
                    match self.core.send(now, s.id, data) {
                        Ok(()) => progress = true,
                        Err(refused) => {
                            if is_full(&refused.error) {
                                s.stalled = Some(refused.into_data());
                                break;
                            }
                            // Closed or unknown: the message cannot go;
                            // the handle learns why from its next call.
                            tracing::debug!(stream = s.id.0, error = %refused.error, "session: message refused");
                            s.finishing = true;
                            break;
                        }
                    }
                }
                if s.finishing {
                    break;
                }
                match s.items.poll_recv(cx) {
                    Poll::Ready(Some(StreamItem::Data(b))) => {
                        progress = true;
                        s.stalled = Some(Vec::from(b));
                    }
                    Poll::Ready(Some(StreamItem::Finish(w))) => {
                        progress = true;
                        s.waiters.push(w);
                        s.finishing = true;
                        let _ = self.core.close_stream(now, s.id);
                    }
                    Poll::Ready(None) => {
                        // Every handle is gone: what was sent still goes.
                        progress = true;
                        s.finishing = true;
                        let _ = self.core.close_stream(now, s.id);
                    }
                    Poll::Pending => break,
                }
            }
        }
        let core = &self.core;
        streams.retain_mut(|s| {
            if s.finishing && s.stalled.is_none() && core.is_stream_finished(s.id) {
                for w in s.waiters.drain(..) {
                    let _ = w.send(Ok(()));
                }
                return false;
            }
            true
        });
        progress
    }

    // ---- messages (sink) --------------------------------------------------

    /// Hands delivered messages to the sink application while its channel
    /// has room. True if any moved.
    fn deliver(&mut self, now: Instant) -> bool {
        let Side::Sink(st) = &mut self.side else {
            return false;
        };
        let mut progress = false;
        loop {
            let m = match st.stalled.take() {
                Some(m) => m,
                None => match self.core.recv(now) {
                    Some(d) => Message {
                        stream: d.stream,
                        seq: d.seq,
                        data: Bytes::from(d.data),
                    },
                    None => return progress,
                },
            };
            match st.msgs.try_send(m) {
                Ok(()) => progress = true,
                Err(mpsc::error::TrySendError::Full(m)) => {
                    st.stalled = Some(m);
                    st.rx_stalled.store(true, Ordering::Release);
                    return progress;
                }
                Err(mpsc::error::TrySendError::Closed(_)) => {
                    // The application dropped the session.
                    self.core.close(
                        now,
                        CloseCode::Application,
                        "the sink application went away",
                    );
                    return true;
                }
            }
        }
    }

    // ---- events ------------------------------------------------------------

    fn move_events(&mut self, now: Instant) -> bool {
        let mut progress = false;
        let mut some_down = false;
        while let Some(e) = self.core.poll_event() {
            progress = true;
            some_down |= matches!(e, Event::PathDown { .. });
            match &self.side {
                Side::Source {
                    events, close_tx, ..
                } => {
                    if let Event::Closed(r) = &e {
                        let _ = close_tx.send(Some(r.clone()));
                    }
                    if events.try_send(e).is_err() {
                        self.events_dropped += 1;
                    }
                }
                Side::Sink(st) => {
                    if let Event::Closed(r) = &e {
                        let _ = st.close_tx.send(Some(r.clone()));
                    }
                    let up = matches!(e, Event::PathUp { .. });
                    if st.events.try_send(e).is_err() {
                        self.events_dropped += 1;
                    }
                    if up {
                        self.hand_over();
                    }
                }
            }
        }
        if let Side::Source { connecting, .. } = &mut self.side {
            let up = self.core.paths().iter().any(|p| p.up);
            if up || self.core.is_closed() {
                if let Some(c) = connecting.take() {
                    let r = match self.core.close_reason() {
                        Some(r) if !up => Err(ConnectError::Closed(r.clone())),
                        _ => Ok(()),
                    };
                    let _ = c.reply.send(r);
                }
            } else if connecting.is_some() {
                let late = connecting.as_ref().is_some_and(|c| now >= c.deadline);
                if !some_down && !late {
                    return progress;
                }
                let why: Vec<_> = self
                    .core
                    .snapshot(now)
                    .paths
                    .into_iter()
                    .map(|p| (p.id, p.error))
                    .collect();
                // Every path refused (closed with a reason), or time is up.
                let refused = some_down && why.iter().all(|(_, e)| e.is_some());
                if refused || late {
                    if let Some(c) = connecting.take() {
                        let _ = c.reply.send(Err(ConnectError::NoPath(why)));
                    }
                } else {
                    return progress;
                }
                self.core
                    .close(now, CloseCode::Application, "no path came up");
            }
        }
        progress
    }

    /// Sink: the session's first path is up; give the application its handle.
    fn hand_over(&mut self) {
        let Side::Sink(st) = &mut self.side else {
            return;
        };
        if let Some(mut inc) = st.pending.take() {
            inc.id = self.core.id();
            if let Err(e) = st.accept_tx.try_send(inc) {
                // Nobody accepts (queue full or listener gone): refuse.
                let inc = match e {
                    mpsc::error::TrySendError::Full(i) | mpsc::error::TrySendError::Closed(i) => i,
                };
                drop(inc);
                self.core.close(
                    clock::now(),
                    CloseCode::Application,
                    "the sink is not accepting sessions",
                );
            }
        }
    }

    // ---- closing -------------------------------------------------------------

    /// Source: closes once every stream is through or the close deadline
    /// passed. Both: notes when the core closed; after [`LINGER`] a source
    /// ends, a sink starts its next generation.
    fn check_close(&mut self, now: Instant) -> bool {
        if let Side::Source {
            closing, streams, ..
        } = &mut self.side
        {
            if let Some((_, deadline)) = closing {
                if self.core.is_closed() || streams.is_empty() && self.core.is_idle() {
                    self.core.close(now, CloseCode::Done, "done");
                } else if now >= *deadline {
                    self.core
                        .close(now, CloseCode::Application, "close timed out");
                }
            }
            if !self.cmd_open && streams.is_empty() && !self.core.is_closed() {
                // Every handle gone: close as soon as everything is through.
                if self.core.is_idle() {
                    self.core.close(now, CloseCode::Done, "done");
                }
            }
        }
        if self.core.is_closed() {
            self.closed_at.get_or_insert(now);
            // A close is answered once the sink heard it (or the wait for
            // that is over): an application that ends its runtime as soon
            // as `close` returns, as `braid stream` does, must not take an
            // unsent CLOSE with it. Asked for after that, at once.
            let settled = self.close_settled(now);
            if let Side::Source {
                closing, streams, ..
            } = &mut self.side
            {
                let reason = self.core.close_reason().cloned();
                let ok = matches!(
                    reason,
                    Some(CloseReason::Local {
                        code: CloseCode::Done,
                        ..
                    })
                );
                for s in streams.drain(..) {
                    for w in s.waiters {
                        let _ = w.send(Err(closed_err(reason.clone())));
                    }
                }
                if settled {
                    if let Some((reply, _)) = closing.take() {
                        let _ = reply.send(if ok { Ok(()) } else { Err(closed_err(reason)) });
                    }
                }
            }
        }
        let Some(at) = self.closed_at else {
            return false;
        };
        if now < at + LINGER {
            return false;
        }
        if let Side::Sink(st) = &mut self.side {
            if st.stalled.is_some() {
                return false;
            }
            // The next generation: a fresh sink for the next source.
            match Core::sink(st.config.clone(), fresh_secret(), now) {
                Ok(core) => {
                    let accept_tx = st.accept_tx.clone();
                    let config = st.config.clone();
                    self.core = core;
                    **st = SinkState::new(config, accept_tx);
                    self.closed_at = None;
                    return true;
                }
                Err(e) => {
                    tracing::error!(error = %e, "session sink: cannot start the next session");
                }
            }
        }
        false
    }

    fn done(&self) -> bool {
        let now = clock::now();
        let lingered = self.closed_at.is_some_and(|at| now >= at + LINGER);
        match &self.side {
            Side::Source { .. } => lingered && self.close_settled(now),
            // A sink ends once its listener is gone and no session is in
            // the application's hands (none handed over, or it is over).
            Side::Sink(st) => st.accept_tx.is_closed() && (st.pending.is_some() || lingered),
        }
    }

    /// A source that closed the session itself waits (within
    /// [`LINGER_FOR_CLOSE`]) until the sink heard it; one that lost its
    /// peer or was closed by it has nobody to wait for.
    fn waits_for_close_heard(&self) -> bool {
        matches!(self.core.close_reason(), Some(CloseReason::Local { .. }))
            && !self.core.is_close_heard()
    }

    /// A closed session has nothing more to wait for: the sink heard the
    /// close, or there was no one to hear it, or [`LINGER_FOR_CLOSE`]
    /// passed.
    fn close_settled(&self, now: Instant) -> bool {
        !self.waits_for_close_heard()
            || self
                .closed_at
                .is_some_and(|at| now >= at + LINGER_FOR_CLOSE)
    }

    fn next_deadline(&self) -> Option<Instant> {
        let mut t = self.core.poll_timeout();
        let mut take = |x: Option<Instant>| {
            t = match (t, x) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        };
        take(self.closed_at.map(|a| a + LINGER));
        if matches!(self.side, Side::Source { .. }) && self.waits_for_close_heard() {
            take(self.closed_at.map(|a| a + LINGER_FOR_CLOSE));
        }
        if let Side::Source {
            connecting,
            closing,
            ..
        } = &self.side
        {
            take(connecting.as_ref().map(|c| c.deadline));
            // Once closed, a close waits only for the sink to hear it.
            if !self.core.is_closed() {
                take(closing.as_ref().map(|c| c.1));
            }
        }
        t
    }
}

fn closed_err(r: Option<CloseReason>) -> SessionError {
    match r {
        Some(r) => SessionError::Closed(r),
        None => SessionError::DriverGone,
    }
}

/// Whether a refusal is a full window or byte bound (try again later).
fn is_full(e: &braid_core::session::SendRefusal) -> bool {
    use braid_core::session::SendRefusal as R;
    matches!(e, R::WindowFull { .. } | R::SessionFull { .. })
}

/// 32 bytes of OS randomness for a session's transport endpoint; all zero
/// only if the OS generator fails, which the first session's start has
/// already ruled out.
fn fresh_secret() -> [u8; 32] {
    crate::rudp::os_secret().unwrap_or_default()
}

impl Future for Driver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        for round in 0..MAX_ROUNDS {
            let mut progress = this.poll_commands(cx);
            progress |= this.sockets.poll_input(cx, &mut this.core);
            let now = clock::now();
            progress |= this.feed_streams(cx, now);
            progress |= this.deliver(now);
            progress |= this.move_events(now);
            progress |= this.check_close(now);
            progress |= this.sockets.poll_output(cx, &mut this.core);
            if this.done() {
                return Poll::Ready(());
            }
            if !progress {
                break;
            }
            if round + 1 == MAX_ROUNDS {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
        }
        let deadline = this.next_deadline();
        this.sockets.arm_timer(cx, deadline);
        Poll::Pending
    }
}
