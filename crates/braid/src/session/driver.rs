//! The source's driver: one task that owns a sans-IO source session, its
//! connections and its sockets, and moves datagrams, stream messages,
//! events and commands between them and the application's handles (the
//! sink's is [`super::sink_driver`]).
//!
//! Main type: [`Driver`] (a hand-written future spawned by
//! [`super::Session::connect`]).
//!
//! Each time it runs it: takes commands; reads datagrams into the core;
//! runs due timers; feeds streams' queued messages into the core; moves
//! events out; writes what the core has to send.
//!
//! Invariants:
//! - The driver is the only owner of the core session and its sockets;
//!   handles reach it only through bounded channels.
//! - At most one message per stream waits in the driver (`stalled`), when
//!   the core refused it for a full window or byte bound; the stream's
//!   channel is not read until it has gone in.
//! - Every poll that returns `Pending` has registered a waker with each
//!   source that can make progress (sockets, channels, timer), or has woken
//!   itself.

use super::msg::{Command, ConnectError, ConnectReply, StreamItem};
use super::SessionError;
use crate::clock;
use crate::rudp::sockets::{Socket, SocketSet};
use crate::rudp::MAX_ROUNDS;
use braid_core::scheduler::UpcallAnswer;
use braid_core::session::{CloseCode, CloseReason, Event, Session as Core};
use braid_core::{Duration, Instant, StreamId};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use tokio::sync::{mpsc, oneshot, watch};

/// How long a closed session keeps answering (its CLOSE frames
/// retransmitted, the peer's acknowledgements taken) before the driver
/// ends.
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
    /// Set when the sink refused the stream (the handle reads why).
    refused: Arc<OnceLock<String>>,
}

/// A source waiting in `connect` for its first path.
struct Connecting {
    reply: ConnectReply,
    deadline: Instant,
}

/// The source's streams, connect and close waiters, and event channels.
struct Side {
    streams: Vec<OutStream>,
    connecting: Option<Connecting>,
    closing: Option<(oneshot::Sender<Result<(), SessionError>>, Instant)>,
    events: mpsc::Sender<Event>,
    close_tx: watch::Sender<Option<CloseReason>>,
}

/// The task that owns a session and its sockets.
pub(super) struct Driver {
    sockets: SocketSet,
    core: Core,
    side: Side,
    cmd_rx: mpsc::Receiver<Command>,
    cmd_open: bool,
    /// When the core session closed (it lingers, then the driver ends).
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
            side: Side {
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
                refused,
            } => match self.core.open_stream(now, config) {
                Ok(id) => {
                    self.side.streams.push(OutStream {
                        id,
                        items,
                        stalled: None,
                        finishing: false,
                        waiters: Vec::new(),
                        refused,
                    });
                    let _ = reply.send(Ok(id));
                }
                Err(e) => {
                    let _ = reply.send(Err(e.into()));
                }
            },
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
                self.side.closing = Some((reply, now + deadline));
            }
            Command::KeepStream { reply, .. } | Command::RefuseStream { reply, .. } => {
                let _ = reply.send(Err(braid_core::session::SessionError::WrongRole(
                    "keep_stream / refuse_stream",
                    "source",
                )
                .into()));
            }
            Command::Wake => {}
        }
    }

    /// Forgets a stream the scheduler closed (its handle's sends now fail).
    fn drop_stream(&mut self, stream: StreamId) {
        self.side.streams.retain(|s| s.id != stream);
    }

    // ---- streams -----------------------------------------------------------

    /// Moves queued messages into the core while it takes them; answers
    /// finish waiters. True if anything moved.
    fn feed_streams(&mut self, cx: &mut Context<'_>, now: Instant) -> bool {
        let streams = &mut self.side.streams;
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
            if let Some(reason) = core.stream_refused(s.id) {
                // Dropping the stream closes its channel: the handle's
                // next call reads why.
                let _ = s.refused.set(reason.to_string());
                for w in s.waiters.drain(..) {
                    let e = braid_core::session::SessionError::StreamRefused {
                        stream: s.id,
                        reason: reason.to_string(),
                    };
                    let _ = w.send(Err(e.into()));
                }
                progress = true;
                return false;
            }
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

    // ---- events ------------------------------------------------------------

    fn move_events(&mut self, now: Instant) -> bool {
        let mut progress = false;
        let mut some_down = false;
        while let Some(e) = self.core.poll_event() {
            progress = true;
            some_down |= matches!(e, Event::PathDown { .. });
            if let Event::Closed(r) = &e {
                let _ = self.side.close_tx.send(Some(r.clone()));
            }
            if self.side.events.try_send(e).is_err() {
                self.events_dropped += 1;
            }
        }
        {
            let connecting = &mut self.side.connecting;
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

    // ---- closing -------------------------------------------------------------

    /// Closes once every stream is through or the close deadline passed;
    /// notes when the core closed (the driver ends [`LINGER`] later).
    fn check_close(&mut self, now: Instant) -> bool {
        let Side {
            closing, streams, ..
        } = &mut self.side;
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
        if self.core.is_closed() {
            self.closed_at.get_or_insert(now);
            // A close is answered once the sink heard it (or the wait for
            // that is over): an application that ends its runtime as soon
            // as `close` returns, as `braid stream` does, must not take an
            // unsent CLOSE with it. Asked for after that, at once.
            let settled = self.close_settled(now);
            let Side {
                closing, streams, ..
            } = &mut self.side;
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
        false
    }

    fn done(&self) -> bool {
        let now = clock::now();
        let lingered = self.closed_at.is_some_and(|at| now >= at + LINGER);
        lingered && self.close_settled(now)
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
        // LINGER only while it is ahead: past it, a close still waiting to
        // be heard would arm a timer in the past and spin until
        // LINGER_FOR_CLOSE.
        let now = clock::now();
        take(self.closed_at.map(|a| a + LINGER).filter(|t| *t > now));
        if self.waits_for_close_heard() {
            take(self.closed_at.map(|a| a + LINGER_FOR_CLOSE));
        }
        take(self.side.connecting.as_ref().map(|c| c.deadline));
        // Once closed, a close waits only for the sink to hear it.
        if !self.core.is_closed() {
            take(self.side.closing.as_ref().map(|c| c.1));
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

impl Future for Driver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        for round in 0..MAX_ROUNDS {
            let mut progress = this.poll_commands(cx);
            progress |= this.sockets.poll_input(cx, &mut this.core);
            let now = clock::now();
            progress |= this.feed_streams(cx, now);
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
