//! One RUDP connection: a coordinator over recovery, congestion control,
//! pacing, message streams, statistics, thresholds and coordination.
//!
//! Main types: [`Connection`], [`Event`], [`CloseReason`], [`Side`].
//!
//! Invariants:
//! - Only datagrams on the connection's path ([`FourTuple`]) whose destination id
//!   is this connection's are processed; anything malformed is counted and
//!   dropped before it changes state.
//! - Each packet number is processed at most once (duplicates and replays
//!   are counted and dropped).
//! - ACK-only and CLOSE packets are not in flight and never retransmitted;
//!   everything else that must arrive is recorded and re-queued on loss.
//! - Once `Closed`, the connection sends nothing and ignores input.

use super::ack::AckTracker;
use super::auth::{ClientHandshake, SessionKeys};
use super::congestion::{Cubic, FixedRate, NewReno, WindowController};
use super::coordination::{CoordContext, Coordinator, Readjust};
use super::fast::Fast;
use super::pacing::Pacer;
use super::recovery::{AckOutcome, Recovery};
use super::recv::{ReceivedMessage, RecvStreams};
use super::send::{SendError, SendOptions, SendRefused, SendStreams};
use super::stats::Stats;
use super::thresholds::{Condition, ThresholdError, ThresholdEvent, ThresholdId, Thresholds};
use super::{Config, CongestionController, CongestionKind, FourTuple};
use crate::estimate::{Closing, RateSample, RateSampler, SamplerStats};
use crate::time::{Duration, Instant};
use crate::units::Bandwidth;
use crate::wire::{
    AdaptFrame, ConnectionId, ErrorCode, Ratio, StreamId, TransportParams, MAX_STREAMS,
    MIN_DATAGRAM_SIZE,
};
use std::collections::VecDeque;
use std::net::SocketAddr;

mod input;
mod keep_alive;
mod output;
mod protect;

/// Most events queued for the application; older ones are dropped.
pub const MAX_EVENTS: usize = 1024;
/// Most ADAPT reports waiting to be sent to the peer.
pub const MAX_ADAPT_OUT: usize = 64;
/// The sender treats the network as congested (for discarding) when the
/// queue holds more than this many congestion windows.
pub const DISCARD_QUEUE_WINDOWS: u64 = 2;
/// Close and drain periods last this many probe timeouts.
pub const CLOSE_PTOS: u64 = 3;
/// Most HANDSHAKE packets a server connection sends (the first and its
/// resends) before the client confirms; after that it only waits out
/// [`Config::handshake_timeout`], so a silent client costs no more sends.
pub const MAX_HANDSHAKE_SENDS: u32 = 4;
/// Most finished rate samples waiting for [`Connection::poll_rate_sample`]
/// (6.4 s at the default 100 ms interval); older ones are dropped.
pub const RATE_SAMPLE_QUEUE: usize = 64;

/// Which end of the connection this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Sent the INITIAL.
    Client,
    /// Accepted it.
    Server,
}

/// Why a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CloseReason {
    /// This side closed or reset it with `code`.
    Local(ErrorCode),
    /// The peer closed it.
    Peer {
        /// The peer's code.
        code: ErrorCode,
        /// The peer's reason phrase (lossy UTF-8).
        reason: String,
    },
    /// Nothing was received for the idle timeout (or the handshake never
    /// completed within it).
    IdleTimeout,
    /// Server: the client never confirmed the handshake within
    /// [`Config::handshake_timeout`].
    HandshakeTimeout,
    /// The peer broke the protocol; this side closed with `code`.
    ProtocolViolation(ErrorCode),
}

/// Something the application should know.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// The handshake completed.
    Connected,
    /// A registered threshold condition was crossed or cleared.
    Threshold(ThresholdEvent),
    /// The peer reported an adaptation (or changed its loss tolerance).
    PeerAdapt(AdaptFrame),
    /// The connection is over.
    Closed(CloseReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Client: INITIAL sent, waiting for RETRY or HANDSHAKE.
    Initial,
    /// Server: HANDSHAKE sent, waiting for the client's first DATA packet.
    HandshakeSent,
    Established,
    /// We sent CLOSE; answer anything with CLOSE until the deadline.
    Closing,
    /// The peer sent CLOSE; stay quiet until the deadline.
    Draining,
    Closed,
}

/// One connection. Drive it through its [`Endpoint`](super::Endpoint), or
/// directly: [`Connection::handle_datagram`] for input,
/// [`Connection::handle_timeout`] when [`Connection::poll_timeout`] passes,
/// [`Connection::poll_transmit`] until `None` after either, and
/// [`Connection::poll_event`] / [`Connection::recv`] for the application.
#[derive(Debug)]
pub struct Connection {
    side: Side,
    state: State,
    /// The path the connection was set up on; its `local` is learned from
    /// the first datagram that names one.
    path: FourTuple,
    local_cid: ConnectionId,
    remote_cid: ConnectionId,
    config: Config,
    peer: Option<TransportParams>,
    cookie: Option<Vec<u8>>,
    initial_pending: bool,
    next_initial: Instant,
    initial_count: u32,
    handshake_pending: bool,
    /// Server: HANDSHAKE packets sent so far (at most
    /// [`MAX_HANDSHAKE_SENDS`]).
    handshake_sends: u32,
    /// Server: a client INITIAL arrived after the timer-driven HANDSHAKE
    /// sends ran out; one more HANDSHAKE answers it (one per INITIAL
    /// received, each padded to the minimum datagram size: no
    /// amplification).
    handshake_answer: bool,
    /// Server: when an unconfirmed handshake is given up
    /// ([`Config::handshake_timeout`] after the connection was created).
    handshake_deadline: Option<Instant>,
    /// Client with a key: the seed of its handshake's ephemeral key, until
    /// message 1 is written (when the cookie arrives).
    auth_seed: Option<[u8; 32]>,
    /// Client with a key: the handshake waiting for message 2.
    client_auth: Option<ClientHandshake>,
    /// The Noise message this side (re)sends in its INITIAL (client,
    /// message 1) or HANDSHAKE (server, message 2).
    auth_message: Option<Vec<u8>>,
    /// The keys the authenticated handshake derived: every DATA packet is
    /// sealed and opened with them ([`super::protection`]).
    pub(crate) keys: Option<SessionKeys>,
    recovery: Recovery,
    /// Reused for every ACK (see [`Recovery::on_ack_into`]).
    ack_outcome: AckOutcome,
    /// The packet being read carried reliable data with no room for it
    /// (see `Stats::refused_packets`): it is not acknowledged.
    no_room: bool,
    cc: Box<dyn CongestionController>,
    pacer: Pacer,
    ack: AckTracker,
    send: SendStreams,
    recv: RecvStreams,
    /// Per-interval delivery rate and loss ratio ([`Closing::OnTimeout`]:
    /// intervals close in `handle_timeout`).
    rate: RateSampler,
    thresholds: Thresholds,
    coord: Coordinator,
    events: VecDeque<Event>,
    adapt_out: VecDeque<AdaptFrame>,
    max_data_pending: bool,
    probe_pending: bool,
    ping_pending: bool,
    close_frame: Option<(ErrorCode, Vec<u8>)>,
    close_send: bool,
    close_deadline: Option<Instant>,
    finish_requested: bool,
    /// The application holds data back on purpose ([`Connection::set_holding`]).
    holding: bool,
    discard_unmarked: bool,
    peer_tolerance: Ratio,
    last_message_size: u64,
    last_received: Instant,
    last_eliciting_sent: Instant,
    keep_alive: Option<keep_alive::KeepAlive>,
    pacing_wait: Option<Instant>,
    idle_timeout: Duration,
    stats: Stats,
    /// Where its endpoint's wake-ups have it (the endpoint's alone).
    pub(in crate::transport) wake: crate::transport::wakeups::Slot,
}

/// The transport parameters a connection with `config` advertises.
pub(crate) fn params_of(config: &Config) -> TransportParams {
    TransportParams {
        max_message_size: config.max_message_size,
        initial_max_data: config.recv_window,
        loss_tolerance: config.loss_tolerance,
        idle_timeout_ms: config.idle_timeout.as_millis(),
        max_ack_delay_ms: config.max_ack_delay.as_millis(),
        max_datagram_size: config.max_datagram_size as u64,
    }
}

impl Connection {
    fn new(
        side: Side,
        now: Instant,
        path: FourTuple,
        local_cid: ConnectionId,
        remote_cid: ConnectionId,
        config: Config,
    ) -> Self {
        let mss = config.max_datagram_size as u64;
        let cc: Box<dyn CongestionController> = match config.congestion {
            CongestionKind::Cubic => Box::new(WindowController::new(Cubic::new(), mss)),
            CongestionKind::Fast => Box::new(WindowController::new(Fast::new(), mss)),
            CongestionKind::Fixed(rate) => Box::new(FixedRate::new(rate, mss)),
            _ => Box::new(NewReno::new_reno(mss)),
        };
        // At least 1 ms, so the interval is never zero and `new` cannot fail.
        let interval = config.stats_interval.max(Duration::from_millis(1));
        let rate = match RateSampler::new(interval, now) {
            Ok(r) => r,
            Err(_) => unreachable!("the interval is at least 1 ms"),
        }
        .with_closing(Closing::OnTimeout)
        .with_queue_bound(RATE_SAMPLE_QUEUE);
        let recovery = Recovery::new(config.initial_rtt, Duration::ZERO);
        let mut send = SendStreams::new(config.send_queue_bytes, 0);
        // Deadlines hold against the initial RTT until the first sample.
        send.set_transit(recovery.rtt().transit_bound());
        Connection {
            side,
            state: State::Initial,
            path,
            local_cid,
            remote_cid,
            peer: None,
            cookie: None,
            initial_pending: false,
            next_initial: now,
            initial_count: 0,
            handshake_pending: false,
            handshake_sends: 0,
            handshake_answer: false,
            handshake_deadline: None,
            auth_seed: None,
            client_auth: None,
            auth_message: None,
            keys: None,
            recovery,
            ack_outcome: AckOutcome::default(),
            no_room: false,
            cc,
            pacer: Pacer::new(mss),
            ack: AckTracker::default(),
            send,
            recv: RecvStreams::new(
                config.max_message_size,
                config.recv_window,
                config.max_unreliable_buffer,
            ),
            rate,
            thresholds: Thresholds::default(),
            coord: Coordinator::new(config.coordination),
            events: VecDeque::new(),
            adapt_out: VecDeque::new(),
            max_data_pending: false,
            probe_pending: false,
            ping_pending: false,
            close_frame: None,
            close_send: false,
            close_deadline: None,
            finish_requested: false,
            holding: false,
            discard_unmarked: false,
            peer_tolerance: Ratio::ZERO,
            last_message_size: 0,
            last_received: now,
            last_eliciting_sent: now,
            keep_alive: config.keep_alive.map(keep_alive::KeepAlive::new),
            pacing_wait: None,
            idle_timeout: config.idle_timeout,
            wake: Default::default(),
            stats: Stats::default(),
            config,
        }
    }

    /// A client connection that will send its INITIAL on `path`.
    /// `initial_dst` is the random id the client shows the server first;
    /// `auth_seed` (with `config.psk`) seeds its handshake's ephemeral key.
    pub(crate) fn new_client(
        now: Instant,
        path: FourTuple,
        local_cid: ConnectionId,
        initial_dst: ConnectionId,
        config: Config,
        auth_seed: Option<[u8; 32]>,
    ) -> Self {
        let mut c = Connection::new(Side::Client, now, path, local_cid, initial_dst, config);
        c.initial_pending = true;
        c.auth_seed = auth_seed;
        c
    }

    /// A server connection for a client whose cookie checked out (and,
    /// with a key, whose Noise message 1 verified: `message2` is the
    /// answer to send in the HANDSHAKE, `keys` what the handshake derived).
    #[allow(clippy::too_many_arguments)] // one call site, the endpoint
    pub(crate) fn new_server(
        now: Instant,
        path: FourTuple,
        local_cid: ConnectionId,
        client_cid: ConnectionId,
        client_params: TransportParams,
        config: Config,
        message2: Option<Vec<u8>>,
        keys: Option<SessionKeys>,
    ) -> Self {
        let mut c = Connection::new(Side::Server, now, path, local_cid, client_cid, config);
        c.apply_peer_params(client_params);
        c.state = State::HandshakeSent;
        c.handshake_pending = true;
        c.handshake_deadline = Some(now + c.config.handshake_timeout);
        c.auth_message = message2;
        c.keys = keys;
        c
    }

    fn params(&self) -> TransportParams {
        params_of(&self.config)
    }

    /// When the next keep-alive PING is due ([`keep_alive`]).
    fn keep_alive_at(&self) -> Option<Instant> {
        let k = self.keep_alive?;
        Some(k.deadline(
            self.side,
            self.last_eliciting_sent,
            self.last_received,
            self.idle_timeout,
        ))
    }

    fn apply_peer_params(&mut self, p: TransportParams) {
        self.peer = Some(p);
        self.send.on_max_data(p.initial_max_data);
        self.peer_tolerance = p.loss_tolerance;
        self.recovery
            .set_max_ack_delay(Duration::from_millis(p.max_ack_delay_ms));
        let theirs = Duration::from_millis(p.idle_timeout_ms);
        if !theirs.is_zero() && (self.idle_timeout.is_zero() || theirs < self.idle_timeout) {
            self.idle_timeout = theirs;
        }
    }

    fn mss(&self) -> usize {
        let theirs = self
            .peer
            .map_or(MIN_DATAGRAM_SIZE, |p| p.max_datagram_size as usize);
        self.config.max_datagram_size.min(theirs)
    }

    // ---- getters -------------------------------------------------------

    /// Client or server.
    pub fn side(&self) -> Side {
        self.side
    }
    /// The peer's address.
    pub fn remote(&self) -> SocketAddr {
        self.path.remote
    }
    /// The path the connection was set up on (its local address once
    /// known).
    pub fn path(&self) -> FourTuple {
        self.path
    }
    /// The id the peer addresses this connection by.
    pub fn local_cid(&self) -> ConnectionId {
        self.local_cid
    }
    /// True once the handshake has completed and until closing starts.
    pub fn is_established(&self) -> bool {
        self.state == State::Established
    }
    /// True once the connection is fully over.
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }
    /// True if the handshake authenticated the peer with the pre-shared
    /// key ([`Config::psk`]); false for an unauthenticated connection and
    /// before the handshake completes.
    pub fn is_authenticated(&self) -> bool {
        self.keys.is_some()
    }
    /// How this connection's packets are protected: `None` without a key
    /// or before the handshake derived one.
    pub fn protection(&self) -> Option<super::Protection> {
        self.keys.as_ref().map(|k| k.packet.mode())
    }
    /// True while the handshake is under way.
    pub fn is_handshaking(&self) -> bool {
        matches!(self.state, State::Initial | State::HandshakeSent)
    }

    /// The next finished measurement interval, oldest first: bytes
    /// acknowledged, packets acknowledged and lost, app-limited flag.
    ///
    /// Every interval closed by [`Connection::handle_timeout`] is queued here
    /// (at most [`RATE_SAMPLE_QUEUE`]; when full the oldest is dropped and
    /// counted in [`Connection::rate_sampler_stats`]). [`Connection::stats`]
    /// shows the last one whether or not it was polled. Feed them to a
    /// [`PathEstimate`](crate::estimate::PathEstimate) with
    /// [`handle_sample`](crate::estimate::PathEstimate::handle_sample).
    pub fn poll_rate_sample(&mut self) -> Option<RateSample> {
        self.rate.poll_sample()
    }

    /// Counters of the connection's rate sampler (samples made, dropped
    /// from the full queue).
    pub fn rate_sampler_stats(&self) -> SamplerStats {
        self.rate.stats()
    }

    /// A snapshot of the connection's metrics.
    pub fn stats(&self) -> Stats {
        let rtt = self.recovery.rtt();
        let mut s = self.stats;
        s.srtt = rtt.srtt();
        s.rttvar = rtt.rttvar();
        s.min_rtt = rtt.min();
        if let Some(last) = self.rate.last() {
            s.loss_ratio = last.loss_ratio();
            s.delivery_rate = last.rate;
            s.app_limited = last.app_limited;
        }
        s.cwnd = self.cc.window();
        s.pacing_rate = self.cc.pacing_rate(rtt);
        s.bytes_in_flight = self.recovery.bytes_in_flight();
        s.retransmitted_bytes = self.send.retransmitted_bytes();
        for i in 0..3 {
            s.classes[i] = self.send.counters()[i].merged(&self.recv.counters()[i]);
        }
        s
    }

    /// Says whether the application is holding data back on purpose — a
    /// pace or a delay-based window of its own (a session's yielding best
    /// effort) — rather than having none. While it holds, an open window
    /// with nothing queued does not make the measurement interval
    /// app-limited: what the connection delivers then is what the
    /// application's own limit lets the path carry, a sample worth keeping.
    pub fn set_holding(&mut self, holding: bool) {
        self.holding = holding;
    }

    /// The RTT estimator: smoothed, latest and smallest samples.
    pub fn rtt(&self) -> &super::rtt::RttEstimator {
        self.recovery.rtt()
    }

    /// The congestion window in bytes.
    pub fn window(&self) -> u64 {
        self.cc.window()
    }

    /// When an ACK last newly acknowledged something (`None` before the
    /// first). A path-failure detector compares it with
    /// [`Connection::oldest_unacked_sent_at`].
    pub fn last_ack_at(&self) -> Option<Instant> {
        self.recovery.last_ack_at()
    }

    /// When the oldest ack-eliciting packet still in flight was sent;
    /// `None` when nothing ack-eliciting is in flight.
    pub fn oldest_unacked_sent_at(&self) -> Option<Instant> {
        self.recovery.oldest_unacked_sent_at()
    }

    /// The conservative one-way transit the send side holds deadlines
    /// against (a message's TTL is its deadline minus now minus this):
    /// [`RttEstimator::transit_bound`](super::rtt::RttEstimator::transit_bound),
    /// the initial RTT before the first sample.
    pub fn transit_bound(&self) -> Duration {
        self.recovery.rtt().transit_bound()
    }

    /// Bytes queued for sending or awaiting acknowledgement (bounded by
    /// [`Connection::send_queue_limit`]; `send` returns `Blocked` beyond it).
    pub fn queued_bytes(&self) -> u64 {
        self.send.queued_bytes()
    }

    /// The current bound on [`Connection::queued_bytes`]:
    /// `Config::send_queue_bytes`, and when `Config::send_queue_cwnds` is a
    /// positive n, at most n congestion windows (at least
    /// [`SEND_QUEUE_FLOOR`]).
    /// Under the window-coupled bound `send` accepts a message while less
    /// than it is queued, so the queue may exceed it by one message (never
    /// `send_queue_bytes`).
    ///
    /// [`SEND_QUEUE_FLOOR`]: super::SEND_QUEUE_FLOOR
    pub fn send_queue_limit(&self) -> u64 {
        let fixed = self.config.send_queue_bytes;
        match self.config.send_queue_cwnds {
            0 => fixed,
            n => fixed.min(
                n.saturating_mul(self.cc.window())
                    .max(super::SEND_QUEUE_FLOOR),
            ),
        }
    }

    // ---- application commands -----------------------------------------

    /// Queues a message on `stream`; returns its number in the stream.
    ///
    /// # Errors
    /// A refused message comes back, byte-identical, in a [`SendRefused`]
    /// whose `error` says why: [`SendError::MessageTooLarge`] above the
    /// negotiated maximum, [`SendError::Blocked`] when the send queue is
    /// full (retry after `poll_transmit` drains it),
    /// [`SendError::InvalidStream`], [`SendError::InvalidTtl`],
    /// [`SendError::NotOpen`] once closing.
    pub fn send(
        &mut self,
        now: Instant,
        stream: StreamId,
        data: Vec<u8>,
        opts: SendOptions,
    ) -> Result<u64, SendRefused> {
        let refuse = |error, data| Err(SendRefused { error, data });
        if !matches!(
            self.state,
            State::Initial | State::HandshakeSent | State::Established
        ) || self.finish_requested
        {
            return refuse(SendError::NotOpen, data);
        }
        if stream.0 >= MAX_STREAMS {
            return refuse(SendError::InvalidStream, data);
        }
        let max = self
            .peer
            .map_or(self.config.max_message_size, |p| p.max_message_size);
        let size = data.len() as u64;
        if size > max {
            return refuse(SendError::MessageTooLarge { size, max }, data);
        }
        // With the window-coupled bound, a message goes in while less than
        // the bound is queued (as TCP accepts a write while its send buffer
        // has room): a message larger than the bound must not wait for the
        // queue to drain empty, which would idle the path before it.
        let queued = self.send.queued_bytes();
        if self.config.send_queue_cwnds > 0 && queued > 0 && queued >= self.send_queue_limit() {
            return refuse(SendError::Blocked, data);
        }
        let n = self.send.push(now, stream, data, opts)?;
        self.last_message_size = size;
        let ctx = self.coord_context();
        let r = self.coord.on_enqueue(stream, n, &ctx);
        self.readjust(r);
        Ok(n)
    }

    /// Takes the next message received, if any.
    pub fn recv(&mut self, now: Instant) -> Option<ReceivedMessage> {
        let m = self.recv.pop(now);
        if self.recv.max_data_update().is_some() {
            self.max_data_pending = true;
        }
        m
    }

    /// When the pacer lets the next datagram go, while it holds one back.
    #[cfg(test)]
    pub(crate) fn paced_until(&self) -> Option<Instant> {
        self.pacing_wait
    }

    /// True if [`Self::recv`] or [`Self::poll_event`] has something: an
    /// application that drains many connections skips the others without
    /// touching them (a connection taken mutably is one its endpoint
    /// looks at again).
    pub fn has_news(&self) -> bool {
        self.recv.has_ready() || !self.events.is_empty()
    }

    /// True if [`Self::poll_rate_sample`] has a sample.
    pub fn has_rate_sample(&self) -> bool {
        self.rate.has_sample()
    }

    /// Takes the next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Registers a threshold condition (evaluated every stats interval).
    ///
    /// # Errors
    /// [`ThresholdError`] if invalid or too many.
    pub fn add_threshold(&mut self, c: Condition) -> Result<ThresholdId, ThresholdError> {
        self.thresholds.add(c)
    }

    /// Registers a condition that also reports every stats interval while
    /// it holds (the seed's level-triggered callbacks).
    ///
    /// # Errors
    /// [`ThresholdError`] if invalid or too many.
    pub fn add_threshold_repeating(&mut self, c: Condition) -> Result<ThresholdId, ThresholdError> {
        self.thresholds.add_repeating(c)
    }

    /// Removes a threshold condition; false if unknown.
    pub fn remove_threshold(&mut self, id: ThresholdId) -> bool {
        self.thresholds.remove(id)
    }

    /// The application reports its own adaptation (seed 002 §2.3.2). The
    /// transport re-adjusts per [`super::coordination`] and tells the peer.
    pub fn report_adaptation(&mut self, report: AdaptFrame) {
        let ctx = self.coord_context();
        let r = self.coord.on_report(report, &ctx);
        self.readjust(r);
        if self.adapt_out.len() < MAX_ADAPT_OUT {
            self.adapt_out.push_back(report);
        }
    }

    fn coord_context(&self) -> CoordContext {
        CoordContext {
            error_ratio: self.rate.last().map_or(0.0, |s| s.loss_ratio()),
            message_size: self.last_message_size,
            segment_size: self.mss() as u64,
        }
    }

    fn readjust(&mut self, r: Readjust) {
        if let Some(f) = r.window_scale {
            self.cc.scale_window(f);
        }
        if let Some(on) = r.discard_unmarked {
            self.discard_unmarked = on;
            if on {
                self.send.discard_unmarked(self.peer_tolerance.as_f64());
            }
        }
    }

    /// Closes at once with `code`: queued data is abandoned and a CLOSE
    /// is sent.
    pub fn close(&mut self, now: Instant, code: ErrorCode, reason: &[u8]) {
        if matches!(self.state, State::Closing | State::Draining | State::Closed) {
            return;
        }
        let reason = reason[..reason.len().min(crate::wire::MAX_REASON_LEN)].to_vec();
        self.close_frame = Some((code, reason));
        self.close_send = true;
        self.recovery.drain();
        self.state = State::Closing;
        self.close_deadline = Some(now + self.recovery.pto() * CLOSE_PTOS);
        tracing::debug!(cid = ?self.local_cid, ?now, ?code, "local close: closing");
        self.push_event(Event::Closed(CloseReason::Local(code)));
    }

    /// Aborts the connection ([`ErrorCode::RESET`]), abandoning queued data.
    pub fn reset(&mut self, now: Instant) {
        self.close(now, ErrorCode::RESET, b"reset");
    }

    /// Closes gracefully: stops accepting messages, sends what is queued,
    /// waits for every reliable message to be acknowledged, then closes
    /// with [`ErrorCode::NO_ERROR`].
    pub fn finish(&mut self, now: Instant) {
        self.finish_requested = true;
        self.check_finish(now);
    }

    fn check_finish(&mut self, now: Instant) {
        if self.finish_requested && self.state == State::Established && self.send.is_idle() {
            self.close(now, ErrorCode::NO_ERROR, b"");
        }
    }

    fn push_event(&mut self, e: Event) {
        if self.events.len() >= MAX_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    fn fail(&mut self, now: Instant, code: ErrorCode) {
        self.close(now, code, b"protocol violation");
        // Replace the Local event pushed by `close`.
        if let Some(Event::Closed(r)) = self.events.back_mut() {
            *r = CloseReason::ProtocolViolation(code);
        }
    }

    // ---- timers -------------------------------------------------------

    /// True once a server connection still waiting for the client's
    /// confirmation has sent its HANDSHAKE [`MAX_HANDSHAKE_SENDS`] times.
    fn handshake_sends_exhausted(&self) -> bool {
        self.state == State::HandshakeSent && self.handshake_sends >= MAX_HANDSHAKE_SENDS
    }

    /// A client may send another INITIAL: the peer has answered (its
    /// RETRY), or fewer than `Config::max_unanswered_initials` went out.
    fn may_send_initial(&self) -> bool {
        self.cookie.is_some()
            || self
                .config
                .max_unanswered_initials
                .is_none_or(|m| self.initial_count < m)
    }

    /// When [`Connection::handle_timeout`] should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut at = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        match self.state {
            State::Closed => return None,
            State::Closing | State::Draining => {
                at(self.close_deadline);
                return t;
            }
            State::Initial if self.may_send_initial() => at(Some(self.next_initial)),
            State::Initial => {}
            State::HandshakeSent => at(self.handshake_deadline),
            _ => {}
        }
        if !self.idle_timeout.is_zero() {
            at(Some(self.last_received + self.idle_timeout));
        }
        if !self.handshake_sends_exhausted() {
            at(self.recovery.timeout(false));
        }
        if self.ack.has_pending() {
            at(self.ack.deadline());
        }
        if self.state == State::Established {
            // An idle connection (nothing in flight, nothing measured, the
            // last sample empty) needs no sampling timer: a thousand idle
            // connections would otherwise wake the endpoint 10,000 times
            // a second for samples that say nothing.
            if !(self.rate.is_quiet() && self.recovery.bytes_in_flight() == 0) {
                at(Some(self.rate.poll_timeout()));
            }
            at(self.send.next_deadline());
            at(self.recv.next_deadline());
            at(self.keep_alive_at());
            at(self.pacing_wait);
        }
        t
    }

    /// Handles every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self.state {
            State::Closed => return,
            State::Closing | State::Draining => {
                if self.close_deadline.is_some_and(|d| now >= d) {
                    tracing::debug!(cid = ?self.local_cid, ?now, "close period over: closed");
                    self.state = State::Closed;
                }
                return;
            }
            _ => {}
        }
        if self.state == State::HandshakeSent && self.handshake_deadline.is_some_and(|d| now >= d) {
            // The client never confirmed: close silently (its address was
            // only validated by the cookie) and free the slot.
            tracing::debug!(cid = ?self.local_cid, ?now, "handshake never confirmed: closed");
            self.state = State::Closed;
            self.recovery.drain();
            self.push_event(Event::Closed(CloseReason::HandshakeTimeout));
            return;
        }
        if !self.idle_timeout.is_zero() && now >= self.last_received + self.idle_timeout {
            tracing::debug!(cid = ?self.local_cid, ?now, "idle timeout: closed");
            self.state = State::Closed;
            self.recovery.drain();
            self.push_event(Event::Closed(CloseReason::IdleTimeout));
            return;
        }
        if self.state == State::Initial && now >= self.next_initial && self.may_send_initial() {
            self.initial_pending = true;
        }
        if self.recovery.timeout(false).is_some_and(|t| now >= t) {
            let (mut lost, probe) = self.recovery.on_timeout(now);
            tracing::debug!(cid = ?self.local_cid, ?now, lost = lost.len(), probe, "loss timer fired");
            self.on_lost(now, &mut lost);
            if probe {
                self.probe_pending = true;
                if self.state == State::HandshakeSent && !self.handshake_sends_exhausted() {
                    self.handshake_pending = true;
                }
            }
        }
        if self.pacing_wait.is_some_and(|t| now >= t) {
            self.pacing_wait = None;
        }
        if self.state != State::Established {
            return;
        }
        self.recv.expire(now);
        self.expire_send(now);
        let closed = self.rate.stats().samples;
        self.rate.handle_timeout(now);
        let sample = self
            .rate
            .last()
            .filter(|_| self.rate.stats().samples != closed);
        if let Some(sample) = sample {
            let srtt = self.recovery.rtt().srtt();
            let mut evs = Vec::new();
            self.thresholds.evaluate(&sample, srtt, |e| evs.push(e));
            for e in evs {
                tracing::debug!(cid = ?self.local_cid, ?now, id = e.id.0, crossed = e.crossed, loss_ratio = e.loss_ratio, "threshold event");
                self.push_event(Event::Threshold(e));
            }
        }
        if self.keep_alive_at().is_some_and(|t| now >= t) {
            self.ping_pending = true;
        }
        self.check_finish(now);
    }

    /// Expires queued messages that could no longer reach the peer in
    /// time. If one went only because of the transit estimate (its
    /// deadline not yet passed) and nothing in flight will bring an ack to
    /// correct that estimate, a PING is sent: otherwise an estimate that is
    /// too high (the initial RTT, a spike) would keep every message with a
    /// short deadline from being sent, for ever.
    fn expire_send(&mut self, now: Instant) {
        self.send.expire(now);
        if self.send.take_expired_early() && self.recovery.bytes_in_flight() == 0 {
            self.ping_pending = true;
        }
    }

    /// The peer's loss tolerance as last negotiated or updated.
    pub fn peer_loss_tolerance(&self) -> Ratio {
        self.peer_tolerance
    }

    /// A rough pacing rate (for drivers that want to size batches).
    pub fn pacing_rate(&self) -> Bandwidth {
        self.cc.pacing_rate(self.recovery.rtt())
    }
}
