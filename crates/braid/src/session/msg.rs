//! The messages between a session's handles and its driver task: the
//! commands, what a stream handle queues, a sink's received messages, and
//! the channel ends a sink session is handed over with.
//!
//! Main types: [`Command`], [`StreamItem`], [`Message`], [`Incoming`].
//! Every channel here is bounded (see the bounds in the
//! [module docs](super)).

use super::{SessionError, EVENT_QUEUE};
use braid_core::scheduler::UpcallAnswer;
use braid_core::session::{CloseReason, Event, SessionId, Snapshot, StreamConfig};
use braid_core::{Duration, StreamId};
use bytes::Bytes;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};

/// What a stream handle sends the driver.
#[derive(Debug)]
pub(super) enum StreamItem {
    /// One message.
    Data(Bytes),
    /// No more messages; answer once every message is through.
    Finish(oneshot::Sender<Result<(), SessionError>>),
}

/// Commands from handles.
#[derive(Debug)]
pub(super) enum Command {
    OpenStream {
        config: StreamConfig,
        reply: oneshot::Sender<Result<StreamId, SessionError>>,
        items: mpsc::Receiver<StreamItem>,
        /// Set when the sink refuses the stream (the handle reads why).
        refused: Arc<std::sync::OnceLock<String>>,
    },
    /// Sink: the application kept the stream whole.
    KeepStream {
        stream: StreamId,
        reply: oneshot::Sender<Result<(), SessionError>>,
    },
    /// Sink: the application cannot keep the stream.
    RefuseStream {
        stream: StreamId,
        reason: String,
        reply: oneshot::Sender<Result<(), SessionError>>,
    },
    Snapshot {
        reply: oneshot::Sender<Snapshot>,
    },
    AnswerUpcall {
        stream: StreamId,
        answer: UpcallAnswer,
        reply: oneshot::Sender<Result<(), SessionError>>,
    },
    /// Source: close once every stream is through (or `deadline` passes).
    Close {
        reply: oneshot::Sender<Result<(), SessionError>>,
        deadline: Duration,
    },
    /// A handle made room in a channel the driver had found full.
    Wake,
}

/// What a failed connect says of each path: its id and why its
/// connection closed, if it did (else it never answered).
pub(super) type PathFailures = Vec<(braid_core::PathId, Option<String>)>;

/// The answer to a source's `connect`.
pub(super) type ConnectReply = oneshot::Sender<Result<(), ConnectError>>;

/// Why a source's connect failed.
#[derive(Debug)]
pub(super) enum ConnectError {
    /// No path came up before the deadline.
    NoPath(PathFailures),
    /// The session closed first.
    Closed(CloseReason),
}

/// One message a sink received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its stream.
    pub stream: StreamId,
    /// Its number in the stream (0, 1, …).
    pub seq: u64,
    /// Its bytes.
    pub data: Bytes,
}

/// A session's channel ends before the driver hands them over.
#[derive(Debug)]
pub(super) struct Incoming {
    pub(super) id: SessionId,
    /// The IP address of the session's first path.
    pub(super) source: std::net::IpAddr,
    pub(super) msgs: mpsc::Receiver<Message>,
    pub(super) events: mpsc::Receiver<Event>,
    pub(super) rx_stalled: Arc<AtomicBool>,
    pub(super) close_rx: watch::Receiver<Option<CloseReason>>,
}

/// The driver's ends of one session's channels.
pub(super) type DriverEnds = (
    Incoming,
    mpsc::Sender<Message>,
    mpsc::Sender<Event>,
    Arc<AtomicBool>,
    watch::Sender<Option<CloseReason>>,
);

impl Incoming {
    /// A fresh set of channels holding at most `queue` messages.
    pub(super) fn channels(queue: usize) -> DriverEnds {
        let (msgs_tx, msgs) = mpsc::channel(queue);
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let (close_tx, close_rx) = watch::channel(None);
        let rx_stalled = Arc::new(AtomicBool::new(false));
        (
            Incoming {
                id: SessionId(0),
                source: std::net::IpAddr::from([0, 0, 0, 0]),
                msgs,
                events,
                rx_stalled: rx_stalled.clone(),
                close_rx,
            },
            msgs_tx,
            events_tx,
            rx_stalled,
            close_tx,
        )
    }
}

pub(super) fn gone(close_rx: &watch::Receiver<Option<CloseReason>>) -> SessionError {
    match close_rx.borrow().clone() {
        Some(r) => SessionError::Closed(r),
        None => SessionError::DriverGone,
    }
}
