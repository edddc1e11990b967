//! The source's handles: [`Session`] (connect, open streams, events,
//! snapshots, upcall answers, close) and [`Stream`] (send, finish).
//!
//! Both only hold channel ends to the session's driver task (see the
//! [module docs](super)); dropping a [`Stream`] finishes it (what was sent
//! still goes), dropping the [`Session`] closes it once every stream is
//! through.

use super::driver::Driver;
use super::msg::{gone, Command, ConnectError, StreamItem};
use super::path::{PathConfig, Route};
use super::{bind_all, SessionConfig, SessionError, COMMAND_QUEUE, EVENT_QUEUE, STREAM_QUEUE};
use crate::clock;
use crate::rudp::os_secret;
use crate::rudp::sockets::Socket;
use crate::rudp::tcp::TcpClient;
use crate::rudp::AsyncUdpSocket;
use braid_core::scheduler::UpcallAnswer;
use braid_core::session::{CloseReason, Event, Session as Core, SessionId, Snapshot, StreamConfig};
use braid_core::transport::FourTuple;
use braid_core::{Duration, PathId, StreamId};
use bytes::Bytes;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use tokio::sync::{mpsc, oneshot, watch};

/// How long [`Session::close`] waits for the streams to get through.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(600);

/// The source end of a session (see the [module docs](super)).
#[derive(Debug)]
pub struct Session {
    id: SessionId,
    cmd: mpsc::Sender<Command>,
    events: mpsc::Receiver<Event>,
    close_rx: watch::Receiver<Option<CloseReason>>,
    paths: Vec<PathConfig>,
    sink: SocketAddr,
}

/// One stream of a source session.
#[derive(Debug)]
pub struct Stream {
    id: StreamId,
    tx: mpsc::Sender<StreamItem>,
    close_rx: watch::Receiver<Option<CloseReason>>,
    /// Set by the driver when the sink refused the stream.
    refused: Arc<OnceLock<String>>,
}

/// A path's addresses once its relays are resolved.
struct Resolved {
    bind: Option<SocketAddr>,
    /// Its first hop runs over TCP.
    tcp: bool,
    first_hop: SocketAddr,
    /// After the first hop: further relays, then the sink; empty if direct.
    route: Vec<SocketAddr>,
}

impl Session {
    /// Opens a session to the sink at `sink` over `config.paths` (one
    /// `direct` path if none) and waits until the first path is up. Must be
    /// called from within a tokio runtime.
    ///
    /// # Errors
    /// [`SessionError::Resolve`] for a relay name that does not resolve,
    /// [`SessionError::Rudp`] when a socket cannot be bound (e.g. a `bind=`
    /// address this host does not have), [`SessionError::NoPath`] when no
    /// path comes up within `connect_timeout` (with what became of each),
    /// [`SessionError::Closed`] if the sink refused the session.
    pub async fn connect(sink: SocketAddr, config: SessionConfig) -> Result<Session, SessionError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| SessionError::NoRuntime)?;
        let paths = if config.paths.is_empty() {
            vec![PathConfig::direct()]
        } else {
            config.paths.clone()
        };
        let mut resolved = Vec::with_capacity(paths.len());
        for p in &paths {
            resolved.push(resolve(p, sink).await?);
        }
        // Socket 0 (unbound) carries every path without `bind=`.
        let unspecified = match sink.ip() {
            IpAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
            IpAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
        };
        let mut addrs = vec![unspecified];
        for r in &resolved {
            if let (Some(b), false) = (r.bind, r.tcp) {
                if !addrs.contains(&b) {
                    addrs.push(b);
                }
            }
        }
        let mut sockets = {
            // Sockets register with the runtime's reactor.
            let _guard = runtime.enter();
            bind_all(&addrs, config.socket_buffer)?
        };
        let locals: Vec<SocketAddr> = sockets.iter().map(|s| s.local()).collect();
        // One TCP socket per TCP path, named by its own local address.
        let mut tcp_locals = Vec::with_capacity(resolved.len());
        for r in &resolved {
            if !r.tcp {
                tcp_locals.push(None);
                continue;
            }
            let from = r.bind.unwrap_or(match r.first_hop.ip() {
                IpAddr::V4(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
                IpAddr::V6(_) => SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)),
            });
            let _guard = runtime.enter();
            let s = tcp_socket(from, r.first_hop, &locals)?;
            tcp_locals.push(Some(s.local()));
            sockets.push(s);
        }
        let mut core_config = config.core.clone();
        core_config.peer_timeout = Some(config.peer_timeout);
        let secret = os_secret()?;
        let id = SessionId(u64::from_le_bytes(os_secret()?[..8].try_into().unwrap_or([1; 8])) | 1);
        let now = clock::now();
        let mut core = Core::source(id, core_config, secret, now)?;
        for (i, r) in resolved.iter().enumerate() {
            let local = tcp_locals[i].or_else(|| {
                r.bind
                    .and_then(|b| addrs.iter().position(|a| *a == b))
                    .map(|k| locals[k])
            });
            let path = FourTuple {
                local,
                remote: r.first_hop,
            };
            // Path ids are positions, within MAX_PATHS (checked by the core).
            let pid = PathId(i as u32);
            if r.route.is_empty() {
                core.add_path(now, pid, path)?;
            } else {
                core.add_relayed_path(now, pid, path, r.route.clone())?;
            }
        }
        let (cmd, cmd_rx) = mpsc::channel(COMMAND_QUEUE);
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let (close_tx, close_rx) = watch::channel(None);
        let (reply, connected) = oneshot::channel();
        let driver = Driver::source(
            sockets,
            core,
            cmd_rx,
            events_tx,
            close_tx,
            reply,
            config.connect_timeout,
        );
        runtime.spawn(driver);
        tracing::debug!(session = id.0, %sink, paths = paths.len(), "session connecting");
        match connected.await {
            Ok(Ok(())) => Ok(Session {
                id,
                cmd,
                events,
                close_rx,
                paths,
                sink,
            }),
            Ok(Err(ConnectError::Closed(r))) => Err(SessionError::Closed(r)),
            Ok(Err(ConnectError::NoPath(why))) => Err(SessionError::NoPath {
                sink,
                after: config.connect_timeout,
                details: why
                    .iter()
                    .map(|(pid, e)| {
                        let name = path_name(&paths, *pid);
                        match e {
                            Some(e) => format!("{name}: {e}"),
                            None => format!(
                                "{name}: no answer within {} (is a braid sink or relay listening there?)",
                                config.connect_timeout
                            ),
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("; "),
            }),
            Err(_) => Err(SessionError::DriverGone),
        }
    }

    /// The session's id.
    pub fn id(&self) -> SessionId {
        self.id
    }

    /// The sink's address.
    pub fn sink(&self) -> SocketAddr {
        self.sink
    }

    /// The paths, by path id (id `i` is `paths()[i]`).
    pub fn paths(&self) -> &[PathConfig] {
        &self.paths
    }

    /// A path's name: its `name=`, else `p<ID>`.
    pub fn path_name(&self, id: PathId) -> String {
        path_name(&self.paths, id)
    }

    /// Opens a stream; data may be sent at once and flows once the sink
    /// has accepted the stream.
    ///
    /// # Errors
    /// An invalid config or no stream id left
    /// ([`SessionError::Core`]); the session is over.
    pub async fn open_stream(&self, config: StreamConfig) -> Result<Stream, SessionError> {
        let (tx, items) = mpsc::channel(STREAM_QUEUE);
        let (reply, rx) = oneshot::channel();
        let refused = Arc::new(OnceLock::new());
        self.command(Command::OpenStream {
            config,
            reply,
            items,
            refused: refused.clone(),
        })
        .await?;
        let id = rx.await.map_err(|_| self.gone())??;
        Ok(Stream {
            id,
            tx,
            close_rx: self.close_rx.clone(),
            refused,
        })
    }

    /// The next event (path up or down, mapping, upcall, statistics,
    /// close); `None` once the session is over and every event was read.
    pub async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// Every path and stream now.
    ///
    /// # Errors
    /// The session's driver has stopped.
    pub async fn snapshot(&self) -> Result<Snapshot, SessionError> {
        let (reply, rx) = oneshot::channel();
        self.command(Command::Snapshot { reply }).await?;
        rx.await.map_err(|_| self.gone())
    }

    /// Answers a [`Event::GuaranteeUnmet`]: lower the spec, accept best
    /// effort, or close the stream.
    ///
    /// # Errors
    /// An unknown stream or an invalid lowered spec; the session is over.
    pub async fn answer_upcall(
        &self,
        stream: StreamId,
        answer: UpcallAnswer,
    ) -> Result<(), SessionError> {
        let (reply, rx) = oneshot::channel();
        self.command(Command::AnswerUpcall {
            stream,
            answer,
            reply,
        })
        .await?;
        rx.await.map_err(|_| self.gone())?
    }

    /// Why the session is over, once it is.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.close_rx.borrow().clone()
    }

    /// Closes the session once every stream is through (reliable ones
    /// consumed by the sink application), waiting at most
    /// [`CLOSE_TIMEOUT`]; then returns once the sink has heard the close
    /// (acknowledged the CLOSE frame), or after at most 5 s more if it does
    /// not, so that ending the runtime when this returns loses nothing.
    ///
    /// # Errors
    /// [`SessionError::Closed`] if it ended otherwise (the peer closed it,
    /// every path died, or the timeout passed first).
    pub async fn close(self) -> Result<(), SessionError> {
        self.close_within(CLOSE_TIMEOUT).await
    }

    /// As [`Session::close`], waiting at most `limit`.
    ///
    /// # Errors
    /// As [`Session::close`].
    pub async fn close_within(self, limit: Duration) -> Result<(), SessionError> {
        let (reply, rx) = oneshot::channel();
        self.command(Command::Close {
            reply,
            deadline: limit,
        })
        .await?;
        rx.await.map_err(|_| self.gone())?
    }

    async fn command(&self, c: Command) -> Result<(), SessionError> {
        self.cmd.send(c).await.map_err(|_| self.gone())
    }

    fn gone(&self) -> SessionError {
        gone(&self.close_rx)
    }
}

impl Stream {
    /// The stream's id.
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// Sends one message; awaits while the stream's window, the session's
    /// byte bound and this stream's queue are full.
    ///
    /// # Errors
    /// The session is over, or the stream was closed (an upcall answered
    /// with close).
    pub async fn send(&mut self, data: Bytes) -> Result<(), SessionError> {
        self.tx
            .send(StreamItem::Data(data))
            .await
            .map_err(|_| self.gone())
    }

    /// Ends the stream and waits until every message is through (reliable
    /// streams: consumed by the sink application) and the sink has said
    /// it kept the stream.
    ///
    /// # Errors
    /// As [`Stream::send`]; the sink refused the stream
    /// (`braid_core::session::SessionError::StreamRefused`, with its
    /// reason).
    pub async fn finish(self) -> Result<(), SessionError> {
        let (w, rx) = oneshot::channel();
        self.tx
            .send(StreamItem::Finish(w))
            .await
            .map_err(|_| self.gone())?;
        rx.await.map_err(|_| self.gone())?
    }

    /// Why the stream can take nothing more: refused by the sink, the
    /// session over, or the stream closed.
    fn gone(&self) -> SessionError {
        match self.refused.get() {
            Some(reason) => braid_core::session::SessionError::StreamRefused {
                stream: self.id,
                reason: reason.clone(),
            }
            .into(),
            None => stream_gone(&self.close_rx, self.id),
        }
    }
}

/// Resolves a path's relays (DNS names allowed) and lays out its route.
async fn resolve(p: &PathConfig, sink: SocketAddr) -> Result<Resolved, SessionError> {
    match &p.route {
        Route::Direct => Ok(Resolved {
            bind: p.bind,
            tcp: p.tcp,
            first_hop: sink,
            route: Vec::new(),
        }),
        Route::Via(hops) => {
            let mut addrs = Vec::with_capacity(hops.len() + 1);
            for h in hops {
                // The sink's family first, so one socket carries the path.
                let a = crate::resolve::host_port_async(h, Some(sink))
                    .await
                    .map_err(|e| SessionError::Resolve {
                        path: p.to_string(),
                        host: h.clone(),
                        why: e.to_string(),
                    })?;
                addrs.push(a);
            }
            addrs.push(sink);
            let first_hop = addrs.remove(0);
            Ok(Resolved {
                bind: p.bind,
                tcp: p.tcp,
                first_hop,
                route: addrs,
            })
        }
    }
}

/// Tries to bind a TCP socket this many times for a local address no UDP
/// socket of the session has.
const TCP_BIND_TRIES: usize = 8;

/// A TCP socket from `from` to `peer` (connecting in the background) whose
/// local address is none of `udp_locals`, so paths name it unambiguously.
fn tcp_socket(
    from: SocketAddr,
    peer: SocketAddr,
    udp_locals: &[SocketAddr],
) -> Result<Socket, SessionError> {
    let err = |source| SessionError::TcpBind { addr: from, source };
    // Sockets that got a UDP socket's address, held so the OS hands out
    // another.
    let mut held = Vec::new();
    for _ in 0..TCP_BIND_TRIES {
        let c = TcpClient::connect(from, peer).map_err(err)?;
        if !udp_locals.contains(&c.local_addr().map_err(err)?) {
            return Socket::new(Box::new(c)).map_err(err);
        }
        // Same port number as a UDP socket of ours: try another
        // (a fixed port cannot change, so give up at once).
        if from.port() != 0 {
            break;
        }
        held.push(c);
    }
    drop(held);
    Err(err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        "its address is one of the session's UDP sockets",
    )))
}

fn path_name(paths: &[PathConfig], id: PathId) -> String {
    paths
        .get(id.0 as usize)
        .and_then(|p| p.name.clone())
        .unwrap_or_else(|| format!("p{}", id.0))
}

fn stream_gone(close_rx: &watch::Receiver<Option<CloseReason>>, id: StreamId) -> SessionError {
    match close_rx.borrow().clone() {
        Some(r) => SessionError::Closed(r),
        None => braid_core::session::SessionError::UnknownStream(id).into(),
    }
}
