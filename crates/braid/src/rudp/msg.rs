//! The messages between the application's handles and the driver task, and
//! the channel ends each side keeps for one connection.
//!
//! Main types: [`Command`] (handle → driver requests), [`Outgoing`] (a
//! connection's queued messages and finish marker), [`HandleSide`] and
//! [`DriverSide`] (the two ends of one connection's channels, made together
//! by [`channels`]).
//!
//! This module sits below `connection`, `endpoint` and `driver`: each of
//! them imports it and none of them imports another through it, so the
//! rudp modules do not import each other in a circle. Every channel is
//! bounded ([`super::COMMAND_QUEUE`], [`super::SEND_QUEUE_MESSAGES`],
//! [`super::RECV_QUEUE_MESSAGES`], [`super::EVENT_QUEUE`]).

use super::stats::DriverStats;
use super::RudpError;
use braid_core::transport::thresholds::ThresholdError;
use braid_core::transport::{
    AdaptReport, CloseReason, Condition, ConnectionHandle, ErrorCode, Event, FourTuple,
    ReceivedMessage, SendOptions, Stats, StreamId, ThresholdId,
};
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// A request from a handle.
#[derive(Debug)]
pub(crate) enum Command {
    /// Open a connection on `path` (from the socket bound to `path.local`,
    /// or the first socket when it is `None`).
    Connect {
        path: FourTuple,
        reply: oneshot::Sender<Result<HandleSide, RudpError>>,
    },
    Stats {
        conn: ConnectionHandle,
        reply: oneshot::Sender<Option<Stats>>,
    },
    EndpointStats {
        reply: oneshot::Sender<DriverStats>,
    },
    AddThreshold {
        conn: ConnectionHandle,
        condition: Condition,
        reply: oneshot::Sender<Option<Result<ThresholdId, ThresholdError>>>,
    },
    Report {
        conn: ConnectionHandle,
        report: AdaptReport,
    },
    Close {
        conn: ConnectionHandle,
        code: ErrorCode,
        reason: Vec<u8>,
    },
    /// Nothing to do but run (the application made room somewhere).
    Wake,
}

/// What a connection's handles queue for sending, in order.
#[derive(Debug)]
pub(crate) enum Outgoing {
    Message {
        stream: StreamId,
        data: Vec<u8>,
        opts: SendOptions,
    },
    /// Finish gracefully after everything before; reply when closed.
    Finish(oneshot::Sender<CloseReason>),
}

/// The channel ends a connection handle is made of.
#[derive(Debug)]
pub(crate) struct HandleSide {
    pub handle: ConnectionHandle,
    pub remote: SocketAddr,
    pub cmd: mpsc::Sender<Command>,
    pub data: mpsc::Sender<Outgoing>,
    pub messages: mpsc::Receiver<ReceivedMessage>,
    pub events: mpsc::Receiver<Event>,
    /// Set by the driver when it holds a message because `messages` was
    /// full; the receiver clears it and wakes the driver.
    pub rx_stalled: Arc<AtomicBool>,
    pub max_message_size: u64,
}

/// The channel ends the driver keeps for one connection.
#[derive(Debug)]
pub(crate) struct DriverSide {
    pub data: mpsc::Receiver<Outgoing>,
    pub messages: mpsc::Sender<ReceivedMessage>,
    pub events: mpsc::Sender<Event>,
    pub rx_stalled: Arc<AtomicBool>,
}

impl DriverSide {
    /// Channel ends whose handle side is already gone (a connection the
    /// driver refused but keeps until its CLOSE has been sent).
    pub(crate) fn detached() -> DriverSide {
        let (_, data) = mpsc::channel(1);
        let (messages, _) = mpsc::channel(1);
        let (events, _) = mpsc::channel(1);
        DriverSide {
            data,
            messages,
            events,
            rx_stalled: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// The channels of one connection: the handle's ends and the driver's.
pub(crate) fn channels(
    handle: ConnectionHandle,
    remote: SocketAddr,
    cmd: mpsc::Sender<Command>,
    max_message_size: u64,
    send_queue_messages: usize,
) -> (HandleSide, DriverSide) {
    let (data_tx, data_rx) = mpsc::channel(send_queue_messages.max(1));
    let (msg_tx, msg_rx) = mpsc::channel(super::RECV_QUEUE_MESSAGES);
    let (ev_tx, ev_rx) = mpsc::channel(super::EVENT_QUEUE);
    let flag = Arc::new(AtomicBool::new(false));
    let handle_side = HandleSide {
        handle,
        remote,
        cmd,
        data: data_tx,
        messages: msg_rx,
        events: ev_rx,
        rx_stalled: flag.clone(),
        max_message_size,
    };
    let driver_side = DriverSide {
        data: data_rx,
        messages: msg_tx,
        events: ev_tx,
        rx_stalled: flag,
    };
    (handle_side, driver_side)
}
