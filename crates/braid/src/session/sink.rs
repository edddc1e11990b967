//! The sink's handles: [`SessionListener`] (a bound port that serves
//! several sessions at once) and [`IncomingSession`] (one source's
//! session: its messages, events and snapshots).
//!
//! The listener's driver task runs braid-core's [`SinkHost`]: every
//! session on one endpoint, each path placed in its session by its
//! PATH_HELLO. When a source's first path is up the application gets an
//! [`IncomingSession`]; up to [`ListenerConfig::max_sessions`] run at
//! once, and a source beyond that is told "sink busy". A session is over
//! when the source closed it or every path has been down for
//! [`ListenerConfig::peer_timeout`]; the next source never waits for it.

use super::msg::{gone, Command, Incoming, Message};
use super::sink_driver::{SinkCommand, SinkDriver};
use super::{SessionError, COMMAND_QUEUE, PEER_TIMEOUT};
use crate::clock;
use crate::rudp::listen::{bind_listener, ListenError};
use crate::rudp::os_secret;
use braid_core::session::quota::{Quota, SourceQuota};
use braid_core::session::{
    CloseReason, Event, SessionConfig as CoreConfig, SessionId, SinkHost, Snapshot,
    DEFAULT_MAX_SESSIONS,
};
use braid_core::{Duration, StreamId};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};

/// Settings of a [`SessionListener`].
#[derive(Debug, Clone)]
pub struct ListenerConfig {
    /// The sink's settings (braid-core's; its `peer_timeout` is overridden
    /// by [`ListenerConfig::peer_timeout`]). Its `max_bytes` must be at
    /// least the sources'; its `quota` bounds each session (default
    /// [`DEFAULT_SESSION_QUOTA`]).
    pub core: CoreConfig,
    /// End a session once every path has been down this long.
    pub peer_timeout: Duration,
    /// `SO_SNDBUF` / `SO_RCVBUF` requested for the socket.
    pub socket_buffer: usize,
    /// Also accept paths over TCP (`direct+tcp`) on the same IP and port
    /// (default true).
    pub accept_tcp: bool,
    /// Sessions served at once (default [`DEFAULT_MAX_SESSIONS`]); a source
    /// beyond them is refused with "sink busy".
    pub max_sessions: usize,
    /// New sessions waiting for [`SessionListener::accept`]; a session
    /// that finds the queue full is closed ("the sink is not accepting
    /// sessions").
    pub accept_queue: usize,
    /// Bounds on each source over all its sessions (default
    /// [`DEFAULT_SOURCE_QUOTA`]; braid-core's `quota` module says what
    /// counts).
    pub source_quota: SourceQuota,
}

/// Default of [`ListenerConfig::core`]'s quota: at most 256 streams per
/// session, bytes unbounded.
pub const DEFAULT_SESSION_QUOTA: Quota = Quota {
    streams: Some(256),
    bytes: None,
};

/// Default of [`ListenerConfig::source_quota`]: at most 8 sessions of one
/// source at once, streams and bytes unbounded.
pub const DEFAULT_SOURCE_QUOTA: SourceQuota = SourceQuota {
    sessions: Some(8),
    total: Quota::UNLIMITED,
};

impl Default for ListenerConfig {
    fn default() -> Self {
        ListenerConfig {
            core: CoreConfig {
                quota: DEFAULT_SESSION_QUOTA,
                ..CoreConfig::default()
            },
            peer_timeout: PEER_TIMEOUT,
            socket_buffer: 4 << 20,
            accept_tcp: true,
            max_sessions: DEFAULT_MAX_SESSIONS,
            accept_queue: DEFAULT_MAX_SESSIONS,
            source_quota: DEFAULT_SOURCE_QUOTA,
        }
    }
}

/// A port that accepts sessions (see the module docs).
#[derive(Debug)]
pub struct SessionListener {
    cmd: mpsc::Sender<SinkCommand>,
    accept_rx: mpsc::Receiver<Incoming>,
    local: SocketAddr,
}

/// What [`IncomingSession::next_item`] yields.
#[derive(Debug)]
pub enum SinkItem {
    /// A message of a stream.
    Message(Message),
    /// An event of the session.
    Event(Event),
}

/// One source's session at the sink.
#[derive(Debug)]
pub struct IncomingSession {
    id: SessionId,
    source: std::net::IpAddr,
    cmd: mpsc::Sender<SinkCommand>,
    msgs: mpsc::Receiver<Message>,
    events: mpsc::Receiver<Event>,
    /// `next_item` saw each channel end.
    msgs_done: bool,
    events_done: bool,
    rx_stalled: Arc<AtomicBool>,
    close_rx: watch::Receiver<Option<CloseReason>>,
}

impl SessionListener {
    /// Binds a UDP socket to `addr` (and, with
    /// [`ListenerConfig::accept_tcp`], a TCP listener on the same IP and
    /// port) and starts accepting sessions. Must be called from within a
    /// tokio runtime.
    ///
    /// # Errors
    /// The socket cannot be bound ([`SessionError::TcpListen`] when only
    /// the TCP port is taken); invalid settings; no runtime.
    pub fn bind(addr: SocketAddr, config: ListenerConfig) -> Result<SessionListener, SessionError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| SessionError::NoRuntime)?;
        let _guard = runtime.enter();
        let (sockets, local) = bind_listener(addr, config.socket_buffer, config.accept_tcp)
            .map_err(|e| match e {
                ListenError::Udp(e) => SessionError::from(e),
                ListenError::Tcp { addr, source } => SessionError::TcpListen { addr, source },
            })?;
        let mut core_config = config.core.clone();
        core_config.peer_timeout = Some(config.peer_timeout);
        let mut host = SinkHost::new(core_config, os_secret()?, clock::now(), config.max_sessions)?;
        host.set_source_quota(config.source_quota);
        let (cmd, cmd_rx) = mpsc::channel(COMMAND_QUEUE);
        let (accept_tx, accept_rx) = mpsc::channel(config.accept_queue.max(1));
        runtime.spawn(SinkDriver::new(sockets, host, cmd_rx, accept_tx));
        tracing::debug!(%local, "session listener bound");
        Ok(SessionListener {
            cmd,
            accept_rx,
            local,
        })
    }

    /// The bound address (with the port the OS chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The next session: returns once a source's first path is up.
    ///
    /// # Errors
    /// [`SessionError::DriverGone`] if the listener's driver stopped.
    pub async fn accept(&mut self) -> Result<IncomingSession, SessionError> {
        let i = self
            .accept_rx
            .recv()
            .await
            .ok_or(SessionError::DriverGone)?;
        Ok(IncomingSession {
            id: i.id,
            source: i.source,
            cmd: self.cmd.clone(),
            msgs: i.msgs,
            events: i.events,
            msgs_done: false,
            events_done: false,
            rx_stalled: i.rx_stalled,
            close_rx: i.close_rx,
        })
    }
}

impl IncomingSession {
    /// The session's id.
    pub fn id(&self) -> SessionId {
        self.id
    }

    /// The source: the IP address the session's first path came from
    /// (behind a relay, the relay's). Quotas per source count by it.
    pub fn source(&self) -> std::net::IpAddr {
        self.source
    }

    /// The next message of any stream (each stream's in its order);
    /// `None` once the session is over and every message was taken.
    pub async fn recv(&mut self) -> Option<Message> {
        let m = self.msgs.recv().await;
        if self.rx_stalled.swap(false, Ordering::AcqRel) {
            // The driver holds a message for lack of room: there is room now.
            let _ = self.cmd.try_send((self.id, Command::Wake));
        }
        m
    }

    /// The next event (a stream opened or closed, path up or down,
    /// statistics, close); `None` once the session is over.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// The next message or event, whichever comes first (messages first
    /// when both wait); `None` once the session is over and both are
    /// drained. A stream's `Event::StreamClosed` comes after its last
    /// message.
    pub async fn next_item(&mut self) -> Option<SinkItem> {
        loop {
            if self.msgs_done && self.events_done {
                return None;
            }
            tokio::select! {
                biased;
                m = self.msgs.recv(), if !self.msgs_done => match m {
                    Some(m) => {
                        if self.rx_stalled.swap(false, Ordering::AcqRel) {
                            let _ = self.cmd.try_send((self.id, Command::Wake));
                        }
                        return Some(SinkItem::Message(m));
                    }
                    None => self.msgs_done = true,
                },
                e = self.events.recv(), if !self.events_done => match e {
                    Some(e) => return Some(SinkItem::Event(e)),
                    None => self.events_done = true,
                },
            }
        }
    }

    /// Every path and stream now.
    ///
    /// # Errors
    /// The listener's driver has stopped.
    pub async fn snapshot(&self) -> Result<Snapshot, SessionError> {
        let (reply, rx) = oneshot::channel();
        self.cmd
            .send((self.id, Command::Snapshot { reply }))
            .await
            .map_err(|_| gone(&self.close_rx))?;
        rx.await.map_err(|_| gone(&self.close_rx))
    }

    /// Says the application kept `stream` whole (wrote it out, synced
    /// it): only now does the source hear it was delivered. For listeners
    /// with `core.confirm_streams`, once the stream has ended
    /// (`Event::StreamClosed`, which arrives after the stream's last
    /// message).
    ///
    /// # Errors
    /// The stream has not ended or has its verdict
    /// (`braid_core::session::SessionError::NotEnded`); the session is
    /// gone.
    pub async fn keep_stream(&self, stream: StreamId) -> Result<(), SessionError> {
        let (reply, rx) = oneshot::channel();
        self.command(Command::KeepStream { stream, reply }).await?;
        rx.await.map_err(|_| gone(&self.close_rx))?
    }

    /// Says the application cannot keep `stream` (`reason`: its file
    /// exists, the disk is full …): the source's stream ends with that
    /// error and nothing of it counts as delivered; its messages still
    /// here are dropped.
    ///
    /// # Errors
    /// The stream was never opened or already has its verdict; the
    /// session is gone.
    pub async fn refuse_stream(&self, stream: StreamId, reason: &str) -> Result<(), SessionError> {
        let (reply, rx) = oneshot::channel();
        let reason = reason.to_string();
        self.command(Command::RefuseStream {
            stream,
            reason,
            reply,
        })
        .await?;
        rx.await.map_err(|_| gone(&self.close_rx))?
    }

    async fn command(&self, c: Command) -> Result<(), SessionError> {
        self.cmd
            .send((self.id, c))
            .await
            .map_err(|_| gone(&self.close_rx))
    }

    /// Why the session is over, once it is.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.close_rx.borrow().clone()
    }
}
