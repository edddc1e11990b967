//! Connection handles: what the application holds for one RUDP connection.
//!
//! Main types: [`Connection`] (receive, events, stats, thresholds, close)
//! and [`SendStream`] (send messages of one reliability class on one
//! stream). Both are handles: the state lives in the endpoint's driver task
//! and is reached over bounded channels (see the [module docs](super)).
//!
//! Invariants: messages sent through every [`SendStream`] of a connection
//! and [`Connection::finish`] share one channel, so a finish never
//! overtakes a message sent before it; stream ids are handed out once.

#[cfg(test)]
use super::msg::DriverSide;
use super::msg::{Command, HandleSide, Outgoing};
use super::{RudpError, SendOptions, Stats, StreamId};
use braid_core::transport::{
    AdaptReport, Condition, ConnectionHandle, ErrorCode, Event, ReceivedMessage, ThresholdId,
};
use braid_core::wire::{MAX_STREAMS, MAX_TTL_US};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// A message received on a connection: its stream, number, class and bytes.
pub type Message = ReceivedMessage;

/// The application's end of one connection.
///
/// Dropping it (and every [`SendStream`] opened on it) finishes the
/// connection gracefully: queued messages are still sent.
#[derive(Debug)]
pub struct Connection {
    pub(crate) handle: ConnectionHandle,
    pub(crate) remote: SocketAddr,
    pub(crate) cmd: mpsc::Sender<Command>,
    pub(crate) data: mpsc::Sender<Outgoing>,
    pub(crate) messages: mpsc::Receiver<Message>,
    pub(crate) events: mpsc::Receiver<Event>,
    /// Set by the driver when it holds a message because `messages` was
    /// full; the receiver clears it and wakes the driver.
    pub(crate) rx_stalled: Arc<AtomicBool>,
    pub(crate) next_stream: Arc<AtomicU32>,
    pub(crate) max_message_size: u64,
}

impl Connection {
    /// A handle and the driver's side of its channels.
    #[cfg(test)]
    pub(crate) fn new(
        handle: ConnectionHandle,
        remote: SocketAddr,
        cmd: mpsc::Sender<Command>,
        max_message_size: u64,
    ) -> (Connection, DriverSide) {
        let (h, d) = super::msg::channels(
            handle,
            remote,
            cmd,
            max_message_size,
            super::SEND_QUEUE_MESSAGES,
        );
        (Connection::from_parts(h), d)
    }

    /// The handle made of the channel ends the driver handed over.
    pub(crate) fn from_parts(p: HandleSide) -> Connection {
        Connection {
            handle: p.handle,
            remote: p.remote,
            cmd: p.cmd,
            data: p.data,
            messages: p.messages,
            events: p.events,
            rx_stalled: p.rx_stalled,
            next_stream: Arc::new(AtomicU32::new(0)),
            max_message_size: p.max_message_size,
        }
    }

    /// The peer's address.
    pub fn remote(&self) -> SocketAddr {
        self.remote
    }

    /// Opens the next stream; every message sent on it uses `opts`
    /// (reliability class and optional time to live).
    ///
    /// # Errors
    /// [`RudpError::TooManyStreams`] after `MAX_STREAMS` streams,
    /// [`RudpError::InvalidTtl`] for a time to live over an hour.
    pub fn open_stream(&self, opts: SendOptions) -> Result<SendStream, RudpError> {
        if !ttl_ok(&opts) {
            return Err(RudpError::InvalidTtl);
        }
        let id = self
            .next_stream
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < MAX_STREAMS).then_some(n + 1)
            })
            .map_err(|_| RudpError::TooManyStreams)?;
        Ok(SendStream {
            id: StreamId(id),
            opts,
            data: self.data.clone(),
            max_message_size: self.max_message_size,
        })
    }

    /// The next message received on any stream, in order per stream.
    /// `None` once the connection is closed and every message was taken.
    pub async fn recv(&mut self) -> Option<Message> {
        let m = self.messages.recv().await;
        if self.rx_stalled.swap(false, Ordering::AcqRel) {
            // The driver held a message back because the channel was full;
            // there is room now. A full command queue means the driver is
            // busy and will retry on its own.
            let _ = self.cmd.try_send(Command::Wake);
        }
        m
    }

    /// The next event (threshold crossings, peer adaptations, close).
    /// `None` once the connection is gone. Events the application does not
    /// read in time are dropped (counted in [`super::DriverStats`]).
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// An event if one is waiting.
    pub fn try_next_event(&mut self) -> Option<Event> {
        self.events.try_recv().ok()
    }

    async fn request<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Command,
    ) -> Result<T, RudpError> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(make(tx))
            .await
            .map_err(|_| RudpError::EndpointClosed)?;
        rx.await.map_err(|_| RudpError::EndpointClosed)
    }

    /// A snapshot of the connection's metrics.
    ///
    /// # Errors
    /// [`RudpError::ConnectionClosed`] once the connection is gone,
    /// [`RudpError::EndpointClosed`] if the driver stopped.
    pub async fn stats(&self) -> Result<Stats, RudpError> {
        let h = self.handle;
        self.request(|reply| Command::Stats { conn: h, reply })
            .await?
            .ok_or(RudpError::ConnectionClosed)
    }

    /// Registers a threshold condition; its crossings arrive as
    /// [`Event::Threshold`] through [`Connection::next_event`].
    ///
    /// # Errors
    /// [`RudpError::Threshold`] for an invalid condition or too many,
    /// [`RudpError::ConnectionClosed`].
    pub async fn add_threshold(&self, condition: Condition) -> Result<ThresholdId, RudpError> {
        let h = self.handle;
        let r = self
            .request(|reply| Command::AddThreshold {
                conn: h,
                condition,
                reply,
            })
            .await?
            .ok_or(RudpError::ConnectionClosed)?;
        Ok(r?)
    }

    /// Reports an adaptation the application made (seed 002 §2.3.2); the
    /// transport re-adjusts and tells the peer.
    ///
    /// # Errors
    /// [`RudpError::EndpointClosed`] if the driver stopped.
    pub async fn report_adaptation(&self, report: AdaptReport) -> Result<(), RudpError> {
        self.cmd
            .send(Command::Report {
                conn: self.handle,
                report,
            })
            .await
            .map_err(|_| RudpError::EndpointClosed)
    }

    /// Finishes gracefully: every message sent before is delivered (reliable
    /// ones acknowledged), then the connection closes. Returns why it closed
    /// (`Local(NO_ERROR)` when all went well).
    ///
    /// # Errors
    /// [`RudpError::ConnectionClosed`] if it was already gone.
    pub async fn finish(&self) -> Result<super::CloseReason, RudpError> {
        let (tx, rx) = oneshot::channel();
        self.data
            .send(Outgoing::Finish(tx))
            .await
            .map_err(|_| RudpError::ConnectionClosed)?;
        rx.await.map_err(|_| RudpError::ConnectionClosed)
    }

    /// Closes at once with `code`, abandoning queued data. Returns once the
    /// driver has the command; the CLOSE leaves on its next turn, so a
    /// program about to end its runtime should first wait for
    /// [`Connection::recv`] to return `None` (the driver let the
    /// connection go), as `braid perf`'s client does.
    ///
    /// # Errors
    /// [`RudpError::EndpointClosed`] if the driver stopped.
    pub async fn close(&self, code: ErrorCode, reason: &[u8]) -> Result<(), RudpError> {
        self.cmd
            .send(Command::Close {
                conn: self.handle,
                code,
                reason: reason.to_vec(),
            })
            .await
            .map_err(|_| RudpError::EndpointClosed)
    }
}

/// Sends messages of one class on one stream of a connection. Cheap to
/// clone; clones share the stream (and its message numbering).
#[derive(Debug, Clone)]
pub struct SendStream {
    id: StreamId,
    opts: SendOptions,
    data: mpsc::Sender<Outgoing>,
    max_message_size: u64,
}

impl SendStream {
    /// The stream's id.
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// The options every message on this stream is sent with.
    pub fn options(&self) -> SendOptions {
        self.opts
    }

    fn check(&self, data: &[u8]) -> Result<(), RudpError> {
        let size = data.len() as u64;
        if size > self.max_message_size {
            return Err(RudpError::MessageTooLarge {
                size,
                max: self.max_message_size,
            });
        }
        Ok(())
    }

    /// Queues a message; awaits while the connection's send queue is full
    /// (backpressure).
    ///
    /// # Errors
    /// [`RudpError::MessageTooLarge`] above the maximum message size,
    /// [`RudpError::ConnectionClosed`] once the connection is gone.
    pub async fn send(&self, data: Vec<u8>) -> Result<(), RudpError> {
        self.check(&data)?;
        self.data
            .send(Outgoing::Message {
                stream: self.id,
                data,
                opts: self.opts,
            })
            .await
            .map_err(|_| RudpError::ConnectionClosed)
    }

    /// Queues a message if there is room now; `Ok(false)` if the queue is
    /// full (the message is dropped).
    ///
    /// # Errors
    /// As [`SendStream::send`].
    pub fn try_send(&self, data: Vec<u8>) -> Result<bool, RudpError> {
        self.check(&data)?;
        match self.data.try_send(Outgoing::Message {
            stream: self.id,
            data,
            opts: self.opts,
        }) {
            Ok(()) => Ok(true),
            Err(mpsc::error::TrySendError::Full(_)) => Ok(false),
            Err(mpsc::error::TrySendError::Closed(_)) => Err(RudpError::ConnectionClosed),
        }
    }
}

/// Checks a time to live against the protocol's bound.
pub(crate) fn ttl_ok(opts: &SendOptions) -> bool {
    opts.ttl.is_none_or(|t| t.as_micros() <= MAX_TTL_US)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> (Connection, DriverSide, mpsc::Receiver<Command>) {
        let (cmd, cmd_rx) = mpsc::channel(4);
        let addr: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let (c, d) = Connection::new(ConnectionHandle(0), addr, cmd, 100);
        (c, d, cmd_rx)
    }

    #[test]
    fn stream_ids_are_unique_and_bounded() {
        let (c, _d, _r) = conn();
        let a = c.open_stream(SendOptions::RELIABLE).unwrap();
        let b = c.open_stream(SendOptions::UNRELIABLE).unwrap();
        assert_ne!(a.id(), b.id());
        c.next_stream.store(MAX_STREAMS, Ordering::Relaxed);
        assert!(matches!(
            c.open_stream(SendOptions::RELIABLE),
            Err(RudpError::TooManyStreams)
        ));
    }

    #[test]
    fn oversized_message_is_refused_before_queueing() {
        let (c, _d, _r) = conn();
        let s = c.open_stream(SendOptions::RELIABLE).unwrap();
        assert!(matches!(
            s.try_send(vec![0; 101]),
            Err(RudpError::MessageTooLarge {
                size: 101,
                max: 100
            })
        ));
        assert!(s.try_send(vec![0; 100]).unwrap());
    }

    #[test]
    fn ttl_bound() {
        let mut o = SendOptions::RELIABLE;
        assert!(ttl_ok(&o));
        o.ttl = Some(braid_core::Duration::from_secs(7200));
        assert!(!ttl_ok(&o));
    }
}
