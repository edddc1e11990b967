//! The sink's driver: one task that owns a [`SinkHost`] (every session of
//! a listener, on one endpoint) and its sockets, and moves datagrams,
//! received messages, events and commands between them and the
//! application's [`super::IncomingSession`] handles.
//!
//! Main type: [`SinkDriver`] (a hand-written future spawned by
//! [`super::SessionListener::bind`]).
//!
//! Each time it runs it: takes commands (each names its session); reads
//! datagrams into the host; hands each new session to the listener's
//! accept queue; moves each session's delivered messages and events to
//! its channels; ends the sessions that are over; writes what the host has
//! to send.
//!
//! Invariants:
//! - The driver is the only owner of the host and its sockets; handles
//!   reach it only through bounded channels.
//! - At most one received message per session waits in the driver while
//!   that session's channel is full; the core keeps the rest, so one slow
//!   application stalls only its own session.
//! - A closed session keeps answering for [`LINGER`] (its CLOSE frames
//!   retransmitted, the peer's acknowledgements taken) while the next
//!   sources are served; then it and its connections are removed.
//! - Every poll that returns `Pending` has registered a waker with each
//!   source that can make progress (sockets, channels, timer), or has woken
//!   itself.

use super::msg::{Command, Incoming, Message};
use super::{EVENT_QUEUE, RECV_QUEUE};
use crate::clock;
use crate::rudp::sockets::{Socket, SocketSet};
use crate::rudp::MAX_ROUNDS;
use braid_core::session::{CloseCode, CloseReason, Event, SessionId, SinkHost};
use braid_core::{Duration, Instant};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::{mpsc, watch};

/// How long a closed session keeps answering before it is removed.
const LINGER: Duration = Duration::from_secs(1);

/// A command from a session's handle.
pub(super) type SinkCommand = (SessionId, Command);

/// The driver's ends of one session's channels.
struct Channels {
    msgs: mpsc::Sender<Message>,
    stalled: Option<Message>,
    /// Events held back behind a `StreamClosed` until the application has
    /// taken every message before it (at most [`EVENT_QUEUE`]).
    held: std::collections::VecDeque<Event>,
    rx_stalled: Arc<AtomicBool>,
    events: mpsc::Sender<Event>,
    close_tx: watch::Sender<Option<CloseReason>>,
    closed_at: Option<Instant>,
}

/// The task that owns a listener's sessions and its sockets.
pub(super) struct SinkDriver {
    sockets: SocketSet,
    host: SinkHost,
    cmd_rx: mpsc::Receiver<SinkCommand>,
    accept_tx: mpsc::Sender<Incoming>,
    sessions: BTreeMap<SessionId, Channels>,
    events_dropped: u64,
}

impl SinkDriver {
    pub(super) fn new(
        sockets: Vec<Socket>,
        host: SinkHost,
        cmd_rx: mpsc::Receiver<SinkCommand>,
        accept_tx: mpsc::Sender<Incoming>,
    ) -> SinkDriver {
        SinkDriver {
            sockets: SocketSet::new(sockets),
            host,
            cmd_rx,
            accept_tx,
            sessions: BTreeMap::new(),
            events_dropped: 0,
        }
    }

    fn poll_commands(&mut self, cx: &mut Context<'_>) -> bool {
        let mut progress = false;
        while let Poll::Ready(Some((id, c))) = self.cmd_rx.poll_recv(cx) {
            progress = true;
            self.on_command(id, c);
        }
        progress
    }

    fn on_command(&mut self, id: SessionId, c: Command) {
        let now = clock::now();
        match c {
            Command::Snapshot { reply } => {
                if let Some(s) = self.host.with_session(id, |s| s.snapshot(now)) {
                    let _ = reply.send(s);
                }
            }
            Command::Close { reply, .. } => {
                self.host.with_session(id, |s| {
                    s.close(now, CloseCode::Application, "sink closed");
                });
                let _ = reply.send(Ok(()));
            }
            Command::KeepStream { stream, reply } => {
                let r = self.host.with_session(id, |s| s.keep_stream(now, stream));
                let _ = reply.send(session_result(r));
            }
            Command::RefuseStream {
                stream,
                reason,
                reply,
            } => {
                let r = self
                    .host
                    .with_session(id, |s| s.refuse_stream(now, stream, &reason));
                let _ = reply.send(session_result(r));
            }
            // Source commands never come from a sink's handles; dropping
            // the reply tells the caller the driver cannot do it.
            Command::OpenStream { .. } | Command::AnswerUpcall { .. } | Command::Wake => {}
        }
    }

    /// Hands each session that came up to the application.
    fn accept(&mut self) -> bool {
        let mut progress = false;
        while let Some(id) = self.host.accept() {
            progress = true;
            let (mut incoming, msgs, events, rx_stalled, close_tx) = Incoming::channels(RECV_QUEUE);
            incoming.id = id;
            if let Some(source) = self.host.source_of(id) {
                incoming.source = source;
            }
            if self.accept_tx.try_send(incoming).is_err() {
                // Nobody accepts (queue full or listener gone): refuse.
                let now = clock::now();
                self.host.with_session(id, |s| {
                    s.close(
                        now,
                        CloseCode::Application,
                        "the sink is not accepting sessions",
                    );
                });
            }
            self.sessions.insert(
                id,
                Channels {
                    msgs,
                    stalled: None,
                    held: std::collections::VecDeque::new(),
                    rx_stalled,
                    events,
                    close_tx,
                    closed_at: None,
                },
            );
        }
        progress
    }

    /// Moves every session's delivered messages and events to its
    /// channels. True if anything moved.
    fn deliver(&mut self, now: Instant) -> bool {
        let mut progress = false;
        for (&id, ch) in &mut self.sessions {
            let dropped = &mut self.events_dropped;
            let moved = self.host.with_session(id, |s| {
                let mut moved = false;
                loop {
                    let m = match ch.stalled.take() {
                        Some(m) => m,
                        None => match s.recv(now) {
                            Some(d) => Message {
                                stream: d.stream,
                                seq: d.seq,
                                data: Bytes::from(d.data),
                            },
                            None => break,
                        },
                    };
                    match ch.msgs.try_send(m) {
                        Ok(()) => moved = true,
                        Err(mpsc::error::TrySendError::Full(m)) => {
                            ch.stalled = Some(m);
                            ch.rx_stalled.store(true, Ordering::Release);
                            break;
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => {
                            // The application dropped the session.
                            s.close(
                                now,
                                CloseCode::Application,
                                "the sink application went away",
                            );
                            moved = true;
                            break;
                        }
                    }
                }
                while let Some(e) = s.poll_event() {
                    moved = true;
                    if let Event::Closed(r) = &e {
                        let _ = ch.close_tx.send(Some(r.clone()));
                    }
                    if ch.held.len() >= EVENT_QUEUE {
                        *dropped += 1;
                    } else {
                        ch.held.push_back(e);
                    }
                }
                // A stream's end reaches the application after its last
                // message: an application that writes each message as it
                // takes it has written them all when it sees the end.
                let drained = ch.stalled.is_none() && ch.msgs.capacity() == ch.msgs.max_capacity();
                while let Some(e) = ch.held.front() {
                    if matches!(e, Event::StreamClosed { .. }) && !drained {
                        // The application's next take wakes the driver.
                        ch.rx_stalled.store(true, Ordering::Release);
                        break;
                    }
                    let e = ch.held.pop_front().expect("a front event");
                    if ch.events.try_send(e).is_err() {
                        *dropped += 1;
                    }
                }
                if s.is_closed() {
                    ch.closed_at.get_or_insert(now);
                }
                moved
            });
            progress |= moved.unwrap_or(false);
        }
        progress
    }

    /// Removes the sessions that have been closed for [`LINGER`] and whose
    /// last message went to the application.
    fn remove_over(&mut self, now: Instant) -> bool {
        let over: Vec<SessionId> = self
            .sessions
            .iter()
            .filter(|(_, ch)| {
                ch.stalled.is_none()
                    && ch.held.is_empty()
                    && ch.closed_at.is_some_and(|t| now >= t + LINGER)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in &over {
            self.sessions.remove(id);
            self.host.remove(*id);
            tracing::debug!(session = id.0, "session sink: session removed");
        }
        !over.is_empty()
    }

    /// The listener is gone and no session is in the application's hands.
    fn done(&self) -> bool {
        self.accept_tx.is_closed() && self.sessions.is_empty()
    }

    fn next_deadline(&self) -> Option<Instant> {
        // Only lingers still ahead: a session past it that waits for the
        // application to read would otherwise arm a timer in the past and
        // spin (the application's read wakes the driver).
        let now = clock::now();
        let linger = self
            .sessions
            .values()
            .filter_map(|ch| ch.closed_at.map(|t| t + LINGER))
            .filter(|t| *t > now);
        self.host.poll_timeout().into_iter().chain(linger).min()
    }
}

/// A session call's answer for a handle (`None`: the session is gone).
fn session_result(
    r: Option<Result<(), braid_core::session::SessionError>>,
) -> Result<(), super::SessionError> {
    match r {
        Some(r) => r.map_err(Into::into),
        None => Err(super::SessionError::DriverGone),
    }
}

impl Future for SinkDriver {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        for round in 0..MAX_ROUNDS {
            let mut progress = this.poll_commands(cx);
            progress |= this.sockets.poll_input(cx, &mut this.host);
            let now = clock::now();
            progress |= this.accept();
            progress |= this.deliver(now);
            progress |= this.remove_over(now);
            progress |= this.sockets.poll_output(cx, &mut this.host);
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
