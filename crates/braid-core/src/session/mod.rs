//! Sessions: an application's streams carried over several measured paths
//! (seed 000 §III–V), sans-IO.
//!
//! A [`Session`] is one end of a multipath session. The **source** opens
//! streams, each with a [`StreamConfig`] (what the scheduler must guarantee,
//! how messages are delivered, which paths it may use), and sends messages
//! on them; the **sink** hands them to its application. Between them run
//! several paths, one IQ-RUDP [`Connection`] each, all in the session's own
//! transport [`Endpoint`]. Data flows one way through a source:
//!
//! ```text
//! application → source stage → scheduler → connections → datagrams
//! ```
//!
//! and one way through a sink: datagrams → connections → per-stream
//! reassembly → application. Measurements flow back: each connection's
//! delivered bytes per interval feed that path's estimator
//! ([`crate::estimate::PathEstimate`], app-limited intervals kept out), and
//! the estimates feed the [`Scheduler`](crate::scheduler::Scheduler) (PGOS by default, every baseline
//! selectable with [`SchedulerKind`]), whose mapping changes and upcalls
//! reach the application as [`Event`]s.
//!
//! | file | concern |
//! | --- | --- |
//! | `config` | [`SessionConfig`], [`SchedulerKind`] |
//! | [`stream`] | [`StreamConfig`]: spec, delivery, RTT / loss bounds, pinning, copies, window |
//! | [`frame`] | the session frames inside connection messages (docs/PROTOCOL.md) |
//! | `path` | one path: its connection, estimator, RTT and loss history, liveness |
//! | `liveness` | paths going down and up, reconnects, a lost peer |
//! | `source` | the source side: stream queues, dispatch, session acks, failover |
//! | `sink` | the sink side: reassembly, duplicates, deadlines, acks, statistics |
//! | `host` | [`SinkHost`]: many sink sessions on one endpoint, each connection placed by its PATH_HELLO |
//! | [`bulk_yield`] | best effort that yields to guarantees: a delay-based window for unscheduled traffic |
//! | [`meter`] | [`meter::WindowMeter`], [`meter::RollingMeter`]: when a window meets its spec, the one definition of every report |
//! | [`probe`] | [`probe::ProbeConfig`]: padding that measures paths the application leaves idle |
//! | [`quota`] | [`quota::Quota`], [`quota::SourceQuota`]: how much a session or a source may give a sink |
//! | [`route`] | [`route::Route`] and [`route::HopReport`]: where a relayed path goes, what its relays measure |
//! | [`relay`] | [`relay::Relay`]: forwards a path's messages hop by hop, each hop its own connection |
//! | [`event`] | [`Event`]s and [`StreamStats`] |
//! | [`snapshot`] | [`Snapshot`]: every path and stream now, as plain data |
//! | [`spec_str`] | spec strings: `rate=3.2mbit@0.95,copies=2` ⇄ [`StreamConfig`] |
//! | [`error`] | [`SessionError`], [`SendRefused`], [`CloseReason`] |
//!
//! # Driving
//! Like [`crate::transport::Endpoint`], whose contract it extends: hand
//! every datagram to [`Session::handle_datagram`] with its [`FourTuple`],
//! send what [`Session::poll_transmit`] returns until `None`, call
//! [`Session::handle_timeout`] once [`Session::poll_timeout`] passes, and
//! drain [`Session::poll_event`] (and, on a sink, [`Session::recv`]). A
//! source adds its paths with [`Session::add_path`] and sends with
//! [`Session::send`]; both sides take every call's `now`.
//!
//! # Invariants
//! * Reliable streams: every message is delivered exactly once and in
//!   order, across paths and path failures. The source keeps each message
//!   until the sink's ACK says its application consumed it; when a path
//!   goes down its unacknowledged messages go back to the head of their
//!   streams and out on the remaining paths; the sink drops what it has
//!   already seen.
//! * Unreliable and deadline streams: at most once, as they arrive; a
//!   deadline message is never handed over after its deadline.
//! * Bounded: a stream's `window` bounds its messages in flight at the
//!   source and in reassembly at the sink, [`SessionConfig::max_bytes`]
//!   bounds the bytes a source holds, [`MAX_SESSION_EVENTS`] the events.
//!   At a bound [`Session::send`] refuses and hands the message back.
//! * Nothing the peer sends can panic the session: a frame that does not
//!   decode, or breaks a window, closes it with a [`CloseReason`].
//!
//! The source stage ([`SourceStage`]) sits between the application and the
//! scheduler; the services of seed 001 will plug in there. It passes every
//! message through today.

pub mod bulk_yield;
#[cfg(test)]
mod calibration_tests;
mod config;
pub mod dip;
pub mod error;
pub mod event;
pub mod frame;
#[cfg(any(test, fuzzing, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod host;
mod liveness;
pub mod meter;
mod path;
pub mod probe;
pub mod quota;
#[cfg(test)]
mod quota_tests;
pub mod record;
pub mod relay;
pub mod route;
#[cfg(test)]
mod scenario_tests;
mod sink;
pub mod snapshot;
mod source;
pub mod source_spec;
pub mod spec_str;
pub mod stream;
#[cfg(test)]
mod test_net;
#[cfg(test)]
mod verdict_tests;

use config::Sched;
pub use config::{SchedulerKind, SessionConfig, UnknownScheduler};
pub use error::{CloseCode, CloseReason, SendRefusal, SendRefused, SessionError};
pub use event::{Event, PathPromise, StreamStats, MAX_SESSION_EVENTS};
pub use frame::{Frame, FrameError, SessionId, SESSION_VERSION};
pub use host::{SinkHost, DEFAULT_MAX_SESSIONS, MAX_SOURCES};
pub use path::PathInfo;
pub use sink::Delivered;
pub use snapshot::{HopSnapshot, PathSnapshot, Snapshot, StreamSnapshot};
pub use source::DISPATCH_SLACK;
pub use spec_str::{split_spec, SpecStrError};
pub use stream::{
    stream_name, Delivery, PathBound, StreamConfig, StreamConfigError, MAX_STREAM_NAME,
};

use crate::estimate::PathEstimate;
use crate::id::{PathId, StreamId};
use crate::scheduler::{SchedulerEvent, UpcallAnswer};
use crate::time::{Duration, Instant};
use crate::transport::{
    ConfigError, Connection, ConnectionHandle, Endpoint, FourTuple, SendOptions, Transmit,
};
use path::PathState;
use sink::InStream;
use source::OutStream;
use std::collections::{BTreeMap, VecDeque};

/// Words for why a path's connection closed.
fn describe_close(r: &crate::transport::CloseReason) -> String {
    use crate::transport::CloseReason as C;
    match r {
        C::Local(code) => format!("closed here ({code:?})"),
        C::Peer { reason, .. } if !reason.is_empty() => format!("the peer closed it: {reason}"),
        C::Peer { code, .. } => format!("the peer closed it ({code:?})"),
        C::IdleTimeout => "no answer (idle timeout)".to_string(),
        C::HandshakeTimeout => "the client never confirmed the handshake".to_string(),
        C::ProtocolViolation(code) => format!("the peer broke the protocol ({code:?})"),
    }
}

/// A connection closed this way after the session closed means the peer
/// heard the session's CLOSE: the graceful finish waits for every reliable
/// message to be acknowledged, and a peer closes only once it has read.
fn closes_heard(r: &crate::transport::CloseReason) -> bool {
    use crate::transport::CloseReason as C;
    matches!(r, C::Local(code) if *code == crate::transport::ErrorCode::NO_ERROR)
        || matches!(r, C::Peer { .. })
}

/// The transport stream that carries session control frames; stream `s`
/// of the session travels on transport stream `s` (so ids start at 1).
pub const CONTROL_STREAM: StreamId = StreamId(0);
/// How control frames go: reliable, at the data streams' default priority
/// (putting them ahead was tried while chasing a flaky failover test, whose
/// cause turned out to be `close` returning before the CLOSE left; nothing
/// else needs it yet).
pub(crate) const CONTROL: SendOptions = SendOptions::RELIABLE;
/// Most paths in one session.
pub const MAX_PATHS: usize = 64;

/// Which end a session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Opens paths and streams, sends.
    Source,
    /// Accepts paths, delivers.
    Sink,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Source => "source",
            Role::Sink => "sink",
        }
    }
}

/// Session-wide counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStats {
    /// Messages the application sent (source) or received (sink).
    pub messages: u64,
    /// Payload bytes likewise.
    pub bytes: u64,
    /// Reliable messages re-sent on another path after a failure.
    pub resent: u64,
    /// Redundant copies sent (source) or dropped as duplicates (sink).
    pub copies: u64,
    /// Messages whose deadline passed before they could be sent or handed over.
    pub expired: u64,
    /// Path-down events.
    pub paths_down: u64,
    /// Events dropped because the application did not drain them.
    pub events_dropped: u64,
    /// Connections that were not (yet) a path: no PATH_HELLO, another session.
    pub stray_connections: u64,
    /// Padding bytes sent to probe app-limited paths (source).
    pub probe_bytes: u64,
}

/// The application → scheduler stage of a source, where seed 001's
/// services plug in (filters that shrink data at the source). Empty today:
/// it passes every message through unchanged.
#[derive(Debug, Default, Clone, Copy)]
pub struct SourceStage;

impl SourceStage {
    /// Runs the stage on one message of `stream`.
    pub fn process(&mut self, _stream: StreamId, data: Vec<u8>) -> Vec<u8> {
        data
    }
}

/// One end of a multipath session (see the module docs for the driving
/// contract).
#[derive(Debug)]
pub struct Session {
    role: Role,
    id: SessionId,
    config: SessionConfig,
    endpoint: Endpoint,
    paths: BTreeMap<PathId, PathState>,
    /// Connections that are a path.
    conns: BTreeMap<ConnectionHandle, PathId>,
    /// Sink: accepted connections that have not said PATH_HELLO yet.
    pending: Vec<ConnectionHandle>,
    sched: Sched,
    stage: SourceStage,
    out: BTreeMap<StreamId, OutStream>,
    inc: BTreeMap<StreamId, InStream>,
    /// Sink: streams that have ended (at most `MAX_STREAMS` ids).
    finished: std::collections::BTreeSet<StreamId>,
    ready: VecDeque<Delivered>,
    next_stream: u32,
    /// Bytes of messages held: by a source, queued or unacknowledged; by a
    /// sink, in reassembly or not yet taken by the application.
    held: u64,
    events: VecDeque<Event>,
    /// Upcalls held back while paths warm up (stream ids).
    held_upcalls: Vec<StreamId>,
    warmed_up: bool,
    closed: Option<CloseReason>,
    next_stats: Instant,
    next_ack: Option<Instant>,
    stats: SessionStats,
    /// Reused buffers for the per-datagram walks over paths and connections.
    scratch_paths: Vec<PathId>,
    scratch_conns: Vec<ConnectionHandle>,
    /// A path has been up at least once.
    ever_up: bool,
    /// Every path has been down since then.
    all_down_since: Option<Instant>,
    /// Every stream this side has known (for [`Session::snapshot`]).
    ledger: BTreeMap<StreamId, snapshot::StreamLedger>,
    /// Source: streams that have ended and how many messages each sent;
    /// their STREAM_CLOSE is told again on every path that comes up (at
    /// most `MAX_STREAMS` ids).
    ended_out: BTreeMap<StreamId, u64>,
    /// After this side closed: the peer has shown it heard (a connection
    /// finished with everything acknowledged, or the peer closed one).
    close_heard: bool,
    /// Sink: alone on its endpoint, or one of a [`SinkHost`]'s sessions.
    hosting: host::Hosting,
    /// Sink in a host's lobby: connections whose PATH_HELLO named a
    /// session, for the host to place.
    foreign: Vec<host::Greeting>,
    /// Sink: each stream's STREAM_VERDICT, told again on every path that
    /// greets later (at most `MAX_STREAMS`).
    verdicts: BTreeMap<StreamId, Vec<u8>>,
    /// Sink: what this session has taken ([`quota`]).
    usage: quota::Usage,
    /// Sink in a host: its source's quota and what the source's other
    /// sessions have taken (set by the host before every call).
    source_share: Option<(quota::Quota, quota::Usage)>,
}

impl Session {
    /// A source of session `id` (pick it at random; it names the session on
    /// every path). `secret`: 32 random bytes for the transport endpoint.
    ///
    /// # Errors
    /// An invalid transport configuration.
    pub fn source(
        id: SessionId,
        config: SessionConfig,
        secret: [u8; 32],
        now: Instant,
    ) -> Result<Self, ConfigError> {
        Self::new(Role::Source, id, config, secret, now)
    }

    /// A sink: it accepts the paths of the first session that greets it.
    ///
    /// # Errors
    /// An invalid transport configuration.
    pub fn sink(
        config: SessionConfig,
        secret: [u8; 32],
        now: Instant,
    ) -> Result<Self, ConfigError> {
        Self::new(Role::Sink, SessionId(0), config, secret, now)
    }

    fn new(
        role: Role,
        id: SessionId,
        config: SessionConfig,
        secret: [u8; 32],
        now: Instant,
    ) -> Result<Self, ConfigError> {
        if let Some(g) = config.calibration {
            if crate::estimate::PromiseScale::new(g).is_err() {
                return Err(ConfigError::Invalid("calibration: a step size in (0, 1]"));
            }
        }
        let endpoint = Endpoint::new(config.transport.clone(), secret, role == Role::Sink)?;
        Ok(Session {
            role,
            id,
            sched: config.scheduler.build(),
            stage: SourceStage,
            endpoint,
            paths: BTreeMap::new(),
            conns: BTreeMap::new(),
            pending: Vec::new(),
            out: BTreeMap::new(),
            inc: BTreeMap::new(),
            finished: Default::default(),
            ready: VecDeque::new(),
            next_stream: 1,
            held: 0,
            events: VecDeque::new(),
            held_upcalls: Vec::new(),
            warmed_up: false,
            closed: None,
            next_stats: now + config.stats_interval,
            next_ack: None,
            stats: SessionStats::default(),
            scratch_paths: Vec::new(),
            scratch_conns: Vec::new(),
            ledger: BTreeMap::new(),
            ended_out: BTreeMap::new(),
            close_heard: false,
            ever_up: false,
            all_down_since: None,
            hosting: host::Hosting::Alone,
            foreign: Vec::new(),
            verdicts: BTreeMap::new(),
            usage: quota::Usage::default(),
            source_share: None,
            config,
        })
    }

    /// Source or sink.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The session's id (a sink learns it from the first PATH_HELLO).
    pub fn id(&self) -> SessionId {
        self.id
    }

    /// The scheduler's name.
    pub fn scheduler_name(&self) -> &'static str {
        self.sched.get_ref().name()
    }

    /// Counters.
    pub fn stats(&self) -> SessionStats {
        self.stats
    }

    /// Sink: the streams and bytes this session has given it, as its
    /// quotas count them ([`quota`]).
    pub fn usage(&self) -> quota::Usage {
        self.usage
    }

    /// Every path, in id order.
    pub fn paths(&self) -> Vec<PathInfo> {
        self.paths.values().map(PathState::info).collect()
    }

    /// The connection of `path`, if it has one (for its metrics).
    pub fn connection(&self, path: PathId) -> Option<&Connection> {
        let h = self.paths.get(&path)?.conn?;
        self.endpoint.connection(h)
    }

    /// Why the session is over, once it is.
    pub fn close_reason(&self) -> Option<&CloseReason> {
        self.closed.as_ref()
    }

    /// True once the session is over.
    pub fn is_closed(&self) -> bool {
        self.closed.is_some()
    }

    /// True once, after this side closed the session, the peer has shown
    /// that it heard: on some path every reliable message (the CLOSE frame
    /// last) was acknowledged, or the peer closed the connection itself.
    /// A driver lingers until then (within a bound) so that its CLOSE is
    /// not lost with its process.
    pub fn is_close_heard(&self) -> bool {
        self.closed.is_some() && self.close_heard
    }

    fn check_role(&self, role: Role, what: &'static str) -> Result<(), SessionError> {
        if let Some(r) = &self.closed {
            return Err(SessionError::Closed(r.clone()));
        }
        if self.role != role {
            return Err(SessionError::WrongRole(what, self.role.name()));
        }
        Ok(())
    }

    // ---- paths -----------------------------------------------------------

    /// Source: adds path `id` between `addr.local` and the sink at
    /// `addr.remote`, and starts its connection.
    ///
    /// # Errors
    /// Wrong role, a duplicate id, too many paths, or the endpoint refuses.
    pub fn add_path(
        &mut self,
        now: Instant,
        id: PathId,
        addr: FourTuple,
    ) -> Result<(), SessionError> {
        self.check_role(Role::Source, "add_path")?;
        if self.paths.contains_key(&id) {
            return Err(SessionError::DuplicatePath(id));
        }
        if self.paths.len() >= MAX_PATHS {
            return Err(SessionError::TooManyPaths(MAX_PATHS));
        }
        let p = self.new_path(id, addr, now);
        self.paths.insert(id, p);
        self.connect(now, id)?;
        Ok(())
    }

    /// Source: adds path `id` through relays. The connection goes from
    /// `first_hop.local` to the first relay at `first_hop.remote`; `route`
    /// lists the hops after it, the sink last (so a path through one relay
    /// has `route = [sink]`). The relays learn it from a
    /// [`Frame::Route`] and report each hop's measurements back.
    ///
    /// # Errors
    /// As [`Session::add_path`]; [`SessionError::Route`] for an empty route
    /// or one longer than [`route::MAX_ROUTE_HOPS`].
    pub fn add_relayed_path(
        &mut self,
        now: Instant,
        id: PathId,
        first_hop: FourTuple,
        route: Vec<std::net::SocketAddr>,
    ) -> Result<(), SessionError> {
        self.check_role(Role::Source, "add_relayed_path")?;
        if route.is_empty() || route.len() > route::MAX_ROUTE_HOPS {
            return Err(SessionError::Route(route.len()));
        }
        if self.paths.contains_key(&id) {
            return Err(SessionError::DuplicatePath(id));
        }
        if self.paths.len() >= MAX_PATHS {
            return Err(SessionError::TooManyPaths(MAX_PATHS));
        }
        let mut p = self.new_path(id, first_hop, now);
        p.route = route;
        self.paths.insert(id, p);
        self.connect(now, id)?;
        Ok(())
    }

    fn new_path(&self, id: PathId, addr: FourTuple, now: Instant) -> PathState {
        let interval = self.config.transport.stats_interval;
        // The transport validated stats_interval (non-zero) and the window
        // is at least 1, so the estimate cannot be refused.
        let scale = self.config.estimate_scale.as_nanos() / interval.as_nanos().max(1);
        let estimate = PathEstimate::new(interval, self.config.estimate_window.max(1), now)
            .expect("a valid interval and a non-empty window")
            .with_scale(usize::try_from(scale).unwrap_or(usize::MAX));
        let mut p = PathState::new(
            id,
            addr,
            estimate,
            self.config.estimate_window.max(1),
            self.config.transport.initial_rtt,
        );
        // Validated in `Session::new`.
        p.scale = self
            .config
            .calibration
            .and_then(|g| crate::estimate::PromiseScale::new(g).ok());
        p
    }

    fn connect(&mut self, now: Instant, id: PathId) -> Result<(), SessionError> {
        let Some(p) = self.paths.get_mut(&id) else {
            return Err(SessionError::UnknownPath(id));
        };
        let h = self.endpoint.connect_on(now, p.addr)?;
        p.conn = Some(h);
        p.reconnect_at = None;
        p.hops.clear();
        let route = (!p.route.is_empty()).then(|| {
            Frame::Route(route::Route {
                index: 1,
                hops: p.route.clone(),
            })
            .to_vec()
        });
        self.conns.insert(h, id);
        let hello = Frame::PathHello {
            session: self.id,
            path: id,
        }
        .to_vec();
        if let Some(c) = self.endpoint.connection_mut(h) {
            // A fresh connection with an empty queue takes small messages.
            if let Some(r) = route {
                let _ = c.send(now, CONTROL_STREAM, r, CONTROL);
            }
            let _ = c.send(now, CONTROL_STREAM, hello, CONTROL);
        }
        Ok(())
    }

    // ---- driving ---------------------------------------------------------

    /// A datagram arrived over `path` (see the module docs).
    pub fn handle_datagram(&mut self, now: Instant, path: FourTuple, data: &[u8]) {
        self.endpoint.handle_datagram(now, path, data);
        self.pump(now);
    }

    /// The instant of [`Session::poll_timeout`] has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
        if self.role == Role::Source {
            self.sched.get().handle_timeout(now);
        }
        self.pump(now);
    }

    /// The next datagram to send, written into `buf`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        buf.clear();
        self.poll_transmit_append(now, buf)
    }

    /// As [`Session::poll_transmit`], but appends the datagram after what
    /// `buf` holds (see [`Endpoint::poll_transmit_append`]).
    pub fn poll_transmit_append(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        // Input and timers ran the whole pump already; what sending changes
        // is room in the connections, so only dispatch runs here.
        if self.role == Role::Source {
            self.dispatch(now);
        }
        self.endpoint.poll_transmit_append(now, buf)
    }

    /// When to call [`Session::handle_timeout`] next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = self.endpoint.poll_timeout();
        let mut take = |x: Option<Instant>| {
            t = match (t, x) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        };
        if self.closed.is_none() {
            take(Some(self.next_stats));
            take(self.next_ack);
            take(self.sched.get_ref().poll_timeout());
            for p in self.paths.values() {
                take(p.reconnect_at);
                // Wake just after an up path would turn silent, so a dead
                // path is noticed on time, not at the next unrelated timer.
                if p.is_up() {
                    let c = p.conn.and_then(|h| self.endpoint.connection(h));
                    take(
                        c.and_then(|c| p.silent_after(c, self.config.down_min))
                            .map(|t| t + Duration::from_micros(1)),
                    );
                }
            }
        }
        t
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    fn push_event(&mut self, e: Event) {
        if self.events.len() >= MAX_SESSION_EVENTS {
            self.events.pop_front();
            self.stats.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    /// Answers a [`Event::GuaranteeUnmet`] (PGOS only; other schedulers
    /// never raise it).
    ///
    /// # Errors
    /// Unknown stream or an invalid lowered spec.
    pub fn answer_upcall(
        &mut self,
        stream: StreamId,
        answer: UpcallAnswer,
        now: Instant,
    ) -> Result<(), SessionError> {
        if let Sched::Pgos(p) = &mut self.sched {
            p.handle_upcall_answer(stream, answer, now)?;
        }
        self.drain_scheduler_events(now);
        Ok(())
    }

    /// Sends raw bytes as one message on `path` (fuzzing and tests only).
    #[cfg(any(test, fuzzing, feature = "fuzzing"))]
    #[doc(hidden)]
    pub fn inject_raw(
        &mut self,
        now: Instant,
        path: PathId,
        stream: StreamId,
        data: Vec<u8>,
        opts: SendOptions,
    ) {
        let Some(h) = self.paths.get(&path).and_then(|p| p.conn) else {
            return;
        };
        if let Some(c) = self.endpoint.connection_mut(h) {
            let _ = c.send(now, stream, data, opts);
        }
    }

    /// Closes the session: every path's connection is closed and the peer
    /// told why.
    pub fn close(&mut self, now: Instant, code: CloseCode, reason: &str) {
        if self.closed.is_some() {
            return;
        }
        let frame = Frame::Close {
            code: code.to_wire(),
            reason: reason.as_bytes(),
        }
        .to_vec();
        let handles: Vec<ConnectionHandle> = self.conns.keys().copied().collect();
        for h in handles {
            if let Some(c) = self.endpoint.connection_mut(h) {
                let _ = c.send(now, CONTROL_STREAM, frame.clone(), CONTROL);
                c.finish(now);
            }
        }
        let r = CloseReason::Local {
            code,
            reason: reason.to_string(),
        };
        tracing::debug!(session = self.id.0, %r, "session closed");
        self.closed = Some(r.clone());
        self.push_event(Event::Closed(r));
    }

    fn close_with(&mut self, now: Instant, r: CloseReason) {
        if let CloseReason::Local { code, reason } = r {
            self.close(now, code, &reason);
        } else if let CloseReason::PeerLost(after) = r {
            // Tell whatever may still hear, then end.
            self.close(now, CloseCode::Application, "peer lost");
            self.closed = Some(CloseReason::PeerLost(after));
            if let Some(Event::Closed(last)) = self.events.back_mut() {
                *last = CloseReason::PeerLost(after);
            }
        } else if self.closed.is_none() {
            self.closed = Some(r.clone());
            self.push_event(Event::Closed(r));
        }
    }

    /// Everything that follows input or time: connections' events,
    /// messages and samples; path liveness; the scheduler; acks; statistics.
    fn pump(&mut self, now: Instant) {
        if self.role == Role::Sink && self.hosting != host::Hosting::Member {
            while let Some(h) = self.endpoint.accept() {
                self.pending.push(h);
            }
        }
        self.drain_connections(now);
        if self.closed.is_some() {
            return;
        }
        self.check_paths(now);
        match self.role {
            Role::Source => {
                self.drain_scheduler_events(now);
                self.dispatch(now);
            }
            Role::Sink => self.flush_acks(now),
        }
        if now >= self.next_stats {
            self.emit_stats(now);
            self.next_stats = now + self.config.stats_interval;
        }
    }

    /// Drains every connection: events, messages, rate samples.
    fn drain_connections(&mut self, now: Instant) {
        // A reused buffer: this runs for every datagram.
        let mut handles = std::mem::take(&mut self.scratch_conns);
        handles.clear();
        handles.extend(
            self.conns
                .keys()
                .copied()
                .chain(self.pending.iter().copied()),
        );
        let mut dips = Vec::new();
        'conns: for &h in &handles {
            let quiet = |c: &Connection| !c.has_news() && !c.has_rate_sample();
            if self.endpoint.connection(h).is_some_and(quiet) {
                // Nothing to read, no event, no sample: not touched, so
                // the endpoint does not look at it again for this.
                continue;
            }
            loop {
                if self.foreign.iter().any(|g| g.connection == h) {
                    // Greeted for a session the host places: that session
                    // reads the rest (see `host`).
                    continue 'conns;
                }
                let Some(m) = self.endpoint.connection_mut(h).and_then(|c| c.recv(now)) else {
                    break;
                };
                if let Err(e) = self.handle_message(now, h, m.data) {
                    if !self.conns.contains_key(&h) {
                        // Not a path of the session (yet): only this
                        // connection goes, not the session.
                        self.refuse_connection(now, h, &e);
                        continue 'conns;
                    }
                    self.close_with(now, e);
                    return;
                }
            }
            let mut closed = None;
            let mut samples = Vec::new();
            if let Some(c) = self.endpoint.connection_mut(h) {
                while let Some(e) = c.poll_event() {
                    if let crate::transport::Event::Closed(r) = e {
                        if self.closed.is_some() && closes_heard(&r) && !self.close_heard {
                            tracing::debug!(session = self.id.0, path = ?self.conns.get(&h), reason = ?r, "session: the peer heard the close");
                        }
                        self.close_heard |= self.closed.is_some() && closes_heard(&r);
                        let words = self
                            .conns
                            .get(&h)
                            .and_then(|id| self.paths.get(id))
                            .map_or_else(|| describe_close(&r), |p| p.close_words(&r));
                        closed = Some(words);
                    }
                }
                // The RTT only with a sample: `stats` is not free, and
                // this runs for every connection on every pump.
                if let Some(first) = c.poll_rate_sample() {
                    let srtt = c.stats().srtt;
                    samples.push((first, srtt));
                    while let Some(s) = c.poll_rate_sample() {
                        samples.push((s, srtt));
                    }
                }
            } else {
                closed = Some("connection gone".to_string());
            }
            if let Some(&id) = self.conns.get(&h) {
                if let Some(p) = self.paths.get_mut(&id) {
                    for (s, srtt) in samples {
                        p.handle_sample(s, srtt);
                        if self.role == Role::Source && self.config.react_to_dips {
                            let promised = crate::units::Bandwidth::from_bps(p.promised_bps);
                            if let Some(ch) = p.dip.handle_sample(now, &s, promised) {
                                dips.push((id, ch));
                            }
                        }
                    }
                    if closed.is_some() {
                        p.last_error = closed.clone();
                    }
                }
                if closed.is_some() {
                    self.path_closed(now, h, id);
                }
            } else if closed.is_some() {
                self.pending.retain(|&x| x != h);
                self.endpoint.remove(h);
            }
        }
        self.scratch_conns = handles;
        for (path, change) in dips {
            self.handle_dip(now, path, change);
        }
    }

    /// Closes connection `h`, which is not a path, for breaking the
    /// protocol (e.g. a relay's ROUTE at a sink); the session goes on.
    fn refuse_connection(&mut self, now: Instant, h: ConnectionHandle, why: &CloseReason) {
        self.stats.stray_connections += 1;
        self.pending.retain(|&x| x != h);
        let reason = match why {
            CloseReason::Local { reason, .. } => reason.clone(),
            other => other.to_string(),
        };
        tracing::debug!(%reason, "session: connection refused");
        if let Some(c) = self.endpoint.connection_mut(h) {
            c.close(
                now,
                crate::transport::ErrorCode::PROTOCOL_VIOLATION,
                reason.as_bytes(),
            );
        }
    }

    /// One message from connection `h`.
    fn handle_message(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        mut data: Vec<u8>,
    ) -> Result<(), CloseReason> {
        let frame = Frame::decode(&data)?;
        if let (
            Frame::Data {
                stream,
                seq,
                sent_us,
                payload,
            },
            Role::Sink,
        ) = (&frame, self.role)
        {
            // The payload is the tail of the message: cut the header off in
            // place instead of copying the payload out.
            let (stream, seq, sent_us) = (*stream, *seq, *sent_us);
            let header = data.len() - payload.len();
            data.drain(..header);
            return self.sink_data(now, h, stream, seq, sent_us, data);
        }
        match frame {
            Frame::Close { code, reason } => {
                let r = CloseReason::Peer {
                    code: CloseCode::from_wire(code),
                    reason: String::from_utf8_lossy(reason).into_owned(),
                };
                self.closed = Some(r.clone());
                self.push_event(Event::Closed(r));
                Ok(())
            }
            Frame::HopReport(r) if self.role == Role::Source => {
                if let Some(p) = self.conns.get(&h).and_then(|id| self.paths.get_mut(id)) {
                    p.handle_hop_report(r, now);
                }
                Ok(())
            }
            Frame::PathStatus { path, up } => {
                // The sink's answer to PATH_HELLO: the path is bound there,
                // so data may flow on it.
                if self.role == Role::Source && up && self.conns.get(&h) == Some(&path) {
                    self.path_established(now, path);
                }
                Ok(())
            }
            f => match self.role {
                Role::Source => self.source_frame(now, f),
                Role::Sink => self.sink_frame(now, h, f),
            },
        }
    }

    fn drain_scheduler_events(&mut self, now: Instant) {
        let mut batch = Vec::new();
        while let Some(e) = self.sched.get().poll_event() {
            batch.push(e);
        }
        // Within one batch only a stream's last mapping or upcall is its
        // state (opening a stream and then narrowing its paths maps twice).
        let last_of = |i: usize, s: StreamId, batch: &[SchedulerEvent]| {
            !batch[i + 1..].iter().any(|e| {
                matches!(e, SchedulerEvent::Mapped { stream, .. }
                    | SchedulerEvent::Upcall { stream, .. } if *stream == s)
            })
        };
        for i in 0..batch.len() {
            let keep = match &batch[i] {
                SchedulerEvent::Mapped { stream, .. } | SchedulerEvent::Upcall { stream, .. } => {
                    last_of(i, *stream, &batch)
                }
                SchedulerEvent::Remapped { .. } => true,
            };
            if !keep {
                continue;
            }
            match batch[i].clone() {
                SchedulerEvent::Mapped { stream, parts } => {
                    self.held_upcalls.retain(|&s| s != stream);
                    let paths: Vec<PathPromise> =
                        parts.iter().map(PathPromise::from_part).collect();
                    if let Some(l) = self.ledger.get_mut(&stream) {
                        l.promises = paths.clone();
                        l.unmet = None;
                    }
                    self.refresh_promised();
                    self.push_event(Event::StreamMapped { stream, paths });
                }
                SchedulerEvent::Upcall { stream, spec, best } => {
                    if self.warmed_up {
                        if let Some(l) = self.ledger.get_mut(&stream) {
                            l.unmet = Some(best);
                        }
                        self.push_event(Event::GuaranteeUnmet { stream, spec, best });
                    } else if !self.held_upcalls.contains(&stream) {
                        self.held_upcalls.push(stream);
                    }
                }
                SchedulerEvent::Remapped { reason, at } => {
                    self.push_event(Event::Remapped { reason, at });
                }
            }
        }
        if !self.warmed_up {
            self.name_unmeasured_paths(now);
        }
        if !self.warmed_up && self.paths_warm() {
            self.warmed_up = true;
            // Ask again, now that every path has its samples: the upcall
            // comes back (with today's figures) only if it still holds.
            for s in std::mem::take(&mut self.held_upcalls) {
                if let Sched::Pgos(p) = &mut self.sched {
                    let _ = p.ask_again(s, now);
                }
            }
            if let Sched::Pgos(_) = self.sched {
                self.drain_scheduler_events(now);
            }
        }
    }

    /// Sums each path's promised rates from the streams' current mappings.
    pub(super) fn refresh_promised(&mut self) {
        for p in self.paths.values_mut() {
            p.promised_bps = 0;
        }
        for l in self.ledger.values().filter(|l| !l.finished) {
            for pr in &l.promises {
                if let Some(p) = self.paths.get_mut(&pr.path) {
                    p.promised_bps += pr.rate.bps();
                }
            }
        }
    }

    /// Every up path has `min_samples` usable samples, or has been named
    /// unmeasured; at least one path is measured.
    fn paths_warm(&self) -> bool {
        let mut measured = false;
        for p in self.paths.values().filter(|p| p.is_up()) {
            if p.usable_samples() >= self.config.min_samples as u64 {
                measured = true;
            } else if !p.unmeasured {
                return false;
            }
        }
        measured
    }

    /// Names every up path that has been up for `warmup_limit` without
    /// its `min_samples` ([`Event::PathUnmeasured`], once per path).
    fn name_unmeasured_paths(&mut self, now: Instant) {
        let (limit, min) = (self.config.warmup_limit, self.config.min_samples as u64);
        let mut named = Vec::new();
        for p in self
            .paths
            .values_mut()
            .filter(|p| p.is_up() && !p.unmeasured)
        {
            let late = p
                .established_at
                .is_some_and(|t| now.saturating_duration_since(t) >= limit);
            if late && p.usable_samples() < min {
                p.unmeasured = true;
                named.push((p.id, p.usable_samples()));
            }
        }
        for (path, samples) in named {
            tracing::debug!(
                path = path.0,
                samples,
                "session: path unmeasured after the warm-up limit"
            );
            self.push_event(Event::PathUnmeasured { path, samples });
        }
    }
}
