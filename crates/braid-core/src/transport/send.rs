//! The send side of message streams: queues, fragmentation, per-class
//! handling, retransmission of reliable fragments, deadlines, discarding,
//! and flow-control credit.
//!
//! Main types: [`SendStreams`], [`SendOptions`], [`DiscardPolicy`].
//!
//! Invariants:
//! - Messages of a stream are first sent in message-number order; a
//!   fragment of a reliable message is in flight at most once (a lost one is
//!   queued for retransmission, never duplicated).
//! - Queued bytes never exceed the configured bound; `send` refuses more.
//! - A reliable message that will never be completed (its deadline passed)
//!   gets a MESSAGE_SKIP, sent reliably, so the receiver stops waiting.
//! - Deadlines are held against the one-way transit the sender cannot see:
//!   a fragment sent at `now` carries `ttl = deadline − now − transit`,
//!   where `transit` is the connection's conservative estimate
//!   ([`RttEstimator::transit_bound`]), so arrival + ttl ≤ deadline while
//!   the estimate holds. A message with `deadline − now ≤ transit` could
//!   not arrive in time: it is expired at the sender, never sent with a
//!   zero TTL.
//! - Non-reliable messages are dropped before sending only while the
//!   fraction of non-reliable messages lost or dropped stays within the
//!   receiver's loss tolerance (seed 002 §2.1, §3.3).
//!
//! [`RttEstimator::transit_bound`]: super::rtt::RttEstimator::transit_bound

use super::recovery::{SentFrame, SentFrames};
use super::stats::ClassCounters;
use super::stream_table::StreamTable;
use crate::time::{Duration, Instant};
use crate::wire::{Frame, PacketBuilder, Reliability, StreamFrame, StreamId, MAX_TTL_US};
use std::collections::{BTreeSet, VecDeque};

/// Most MESSAGE_SKIP frames waiting to be (re)sent.
pub const MAX_PENDING_SKIPS: usize = 4096;
/// Smallest fragment worth starting in a packet (avoids 1-byte fragments).
pub const MIN_FRAGMENT: usize = 64;
/// A packet with less room than this left takes no further fragment: it is
/// full (the rest would be mostly frame header).
pub const PACKET_FULL_BELOW: usize = MIN_FRAGMENT + 32;

/// How a message is to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendOptions {
    /// Its reliability class.
    pub reliability: Reliability,
    /// Time to live from now: the message's deadline. The sender drops it
    /// once it could no longer reach the receiver by then (see
    /// [`SendStreams::set_transit`]); the receiver skips it if it is not
    /// delivered by then. At most one hour.
    pub ttl: Option<Duration>,
    /// The stream's priority from this message on: when the congestion
    /// window or the pacer limits what goes out, streams of a higher
    /// priority fill each packet first (new data and retransmissions);
    /// streams of equal priority share round robin. Sender-local: nothing
    /// of it goes on the wire. Default 0.
    pub priority: u8,
}

impl SendOptions {
    /// Reliable, no deadline.
    pub const RELIABLE: SendOptions = SendOptions {
        reliability: Reliability::Reliable,
        ttl: None,
        priority: 0,
    };
    /// Unreliable, no deadline.
    pub const UNRELIABLE: SendOptions = SendOptions {
        reliability: Reliability::Unreliable,
        ttl: None,
        priority: 0,
    };
    /// Discardable, no deadline.
    pub const DISCARDABLE: SendOptions = SendOptions {
        reliability: Reliability::Discardable,
        ttl: None,
        priority: 0,
    };
}

/// Whether discardable messages may be dropped before sending right now.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiscardPolicy {
    /// The network cannot carry the queue (loss or queueing says so).
    pub congested: bool,
    /// The application's marking change (ADAPT_MARK) asked for unmarked
    /// messages to be discarded before they are sent (seed 002 §3.3).
    pub discard_unmarked: bool,
    /// The receiver's loss tolerance, as a fraction.
    pub tolerance: f64,
}

#[derive(Debug)]
struct SendMessage {
    number: u64,
    data: Vec<u8>,
    reliability: Reliability,
    deadline: Option<Instant>,
    depends_back: Option<u64>,
    /// Next offset to send for the first time.
    sent_offset: u64,
    /// Every byte has been sent at least once.
    first_done: bool,
    acked_bytes: u64,
    retransmit: VecDeque<(u64, u64)>,
}

impl SendMessage {
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    /// True if a fragment sent now could not reach the receiver before
    /// the deadline (see [`wire_ttl_us`]).
    fn expired(&self, now: Instant, transit: Duration) -> bool {
        self.deadline.is_some_and(|d| now + transit >= d)
    }
}

#[derive(Debug, Default)]
struct SendStream {
    next_number: u64,
    last_reliable: Option<u64>,
    /// Messages not yet fully sent once, in number order; only the front
    /// one may be partly sent.
    unsent: VecDeque<SendMessage>,
    /// Reliable messages fully sent once and not yet fully acknowledged,
    /// in number order (all numbers below those in `unsent`).
    sent: VecDeque<SendMessage>,
    /// Numbers of messages with fragments waiting for retransmission.
    rtx: BTreeSet<u64>,
    /// The priority of the last message queued ([`SendOptions::priority`]).
    priority: u8,
}

impl SendStream {
    /// Finds a message: `(in_unsent, index)`.
    fn find(&self, number: u64) -> Option<(bool, usize)> {
        // A stream of reliable messages has consecutive numbers in `sent`:
        // the offset from the oldest is the index (no search).
        if let Some(first) = self.sent.front() {
            if let Some(i) = number.checked_sub(first.number) {
                let i = usize::try_from(i).unwrap_or(usize::MAX);
                if self.sent.get(i).is_some_and(|m| m.number == number) {
                    return Some((false, i));
                }
            }
        }
        if let Ok(i) = self.sent.binary_search_by_key(&number, |m| m.number) {
            return Some((false, i));
        }
        self.unsent
            .binary_search_by_key(&number, |m| m.number)
            .ok()
            .map(|i| (true, i))
    }

    fn get_mut(&mut self, at: (bool, usize)) -> &mut SendMessage {
        // Invariant: `at` comes from `find` with no change in between.
        let q = if at.0 {
            &mut self.unsent
        } else {
            &mut self.sent
        };
        &mut q[at.1]
    }

    fn remove(&mut self, number: u64) -> Option<SendMessage> {
        let (unsent, i) = self.find(number)?;
        self.rtx.remove(&number);
        if unsent {
            self.unsent.remove(i)
        } else {
            self.sent.remove(i)
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Skip {
    stream: StreamId,
    message: u64,
    len: u64,
    reliability: Reliability,
    depends_back: Option<u64>,
}

/// Why a message was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The message is larger than the negotiated maximum message size.
    #[error("message of {size} bytes exceeds the maximum message size of {max} bytes")]
    MessageTooLarge {
        /// The message's size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The send queue is full; try again after `poll_transmit` drains it.
    #[error("send queue full")]
    Blocked,
    /// The stream id is out of range.
    #[error("stream id out of range")]
    InvalidStream,
    /// The time to live exceeds one hour.
    #[error("time to live too long")]
    InvalidTtl,
    /// The connection is not open for sending.
    #[error("connection not open")]
    NotOpen,
}

/// A message the transport refused, handed back with the reason.
///
/// [`Connection::send`](super::Connection::send) and [`SendStreams::push`]
/// return it so that a caller can keep the message (retry it later, queue it
/// elsewhere, send it on another path) instead of losing it: `data` is the
/// message exactly as it was given.
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct SendRefused {
    /// Why the message was refused.
    pub error: SendError,
    /// The message, byte-identical to what was passed in.
    pub data: Vec<u8>,
}

impl SendRefused {
    /// The refused message.
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }
}

/// Shows the message's length, not its bytes (it can be megabytes).
impl core::fmt::Debug for SendRefused {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SendRefused")
            .field("error", &self.error)
            .field("data_len", &self.data.len())
            .finish()
    }
}

impl From<SendRefused> for SendError {
    fn from(r: SendRefused) -> Self {
        r.error
    }
}

/// All send streams of a connection.
#[derive(Debug)]
pub struct SendStreams {
    streams: StreamTable<SendStream>,
    queued_bytes: u64,
    max_queued_bytes: u64,
    /// Round-robin position: the stream after which to look first.
    cursor: Option<StreamId>,
    /// The streams with data (and their priorities) in the order `write`
    /// visits them: a buffer kept between packets, so that writing one
    /// allocates nothing.
    order: Vec<(u8, StreamId)>,
    skips: VecDeque<Skip>,
    /// Message deadlines: (deadline, stream, number); may hold entries of
    /// messages already gone, which `expire` discards.
    deadlines: BTreeSet<(Instant, StreamId, u64)>,
    /// Conservative one-way transit of a packet sent now (see
    /// [`SendStreams::set_transit`]).
    transit: Duration,
    /// A message expired whose deadline had not yet passed: only the
    /// transit estimate ruled it out (see [`SendStreams::take_expired_early`]).
    expired_early: bool,
    /// Cumulative reliable bytes charged against the peer's credit.
    reliable_charged: u64,
    /// Peer's flow-control limit.
    max_data: u64,
    /// Non-reliable messages resolved (sent or dropped) and how many of
    /// them were dropped before sending or lost in the network.
    nr_total: u64,
    nr_lost: u64,
    counters: [ClassCounters; 3],
    retransmitted_bytes: u64,
}

fn class_index(r: Reliability) -> usize {
    match r {
        Reliability::Reliable => 0,
        Reliability::Unreliable => 1,
        Reliability::Discardable => 2,
    }
}

impl SendStreams {
    /// Send streams holding at most `max_queued_bytes` of unsent or unacked
    /// data, with the peer's initial credit `max_data`.
    pub fn new(max_queued_bytes: u64, max_data: u64) -> Self {
        SendStreams {
            streams: StreamTable::new(),
            queued_bytes: 0,
            max_queued_bytes,
            cursor: None,
            order: Vec::new(),
            skips: VecDeque::new(),
            deadlines: BTreeSet::new(),
            transit: Duration::ZERO,
            expired_early: false,
            reliable_charged: 0,
            max_data,
            nr_total: 0,
            nr_lost: 0,
            counters: Default::default(),
            retransmitted_bytes: 0,
        }
    }

    /// Changes the bound on queued bytes (messages already queued stay).
    pub fn set_max_queued_bytes(&mut self, max: u64) {
        self.max_queued_bytes = max;
    }

    /// Queues a message; returns its number within the stream.
    ///
    /// # Errors
    /// [`SendError::Blocked`] when the queue is full,
    /// [`SendError::InvalidTtl`] for a TTL over an hour, each with the
    /// message handed back in a [`SendRefused`]. Size and stream checks are
    /// the caller's.
    pub fn push(
        &mut self,
        now: Instant,
        stream: StreamId,
        data: Vec<u8>,
        opts: SendOptions,
    ) -> Result<u64, SendRefused> {
        let len = data.len() as u64;
        if self.queued_bytes + len > self.max_queued_bytes && self.queued_bytes > 0 {
            return Err(SendRefused {
                error: SendError::Blocked,
                data,
            });
        }
        if opts.ttl.is_some_and(|t| t.as_micros() > MAX_TTL_US) {
            return Err(SendRefused {
                error: SendError::InvalidTtl,
                data,
            });
        }
        let s = self.streams.get_or_default(stream);
        s.priority = opts.priority;
        let number = s.next_number;
        s.next_number += 1;
        let depends_back = s.last_reliable.map(|r| number - r);
        if opts.reliability == Reliability::Reliable {
            s.last_reliable = Some(number);
        }
        let deadline = opts.ttl.map(|t| now + t);
        if let Some(d) = deadline {
            self.deadlines.insert((d, stream, number));
        }
        s.unsent.push_back(SendMessage {
            number,
            data,
            reliability: opts.reliability,
            deadline,
            depends_back,
            sent_offset: 0,
            first_done: false,
            acked_bytes: 0,
            retransmit: VecDeque::new(),
        });
        self.queued_bytes += len;
        Ok(number)
    }

    /// Sets the one-way transit the sender assumes for a packet sent now;
    /// the connection passes [`RttEstimator::transit_bound`] whenever its
    /// RTT estimate changes (and the initial RTT before any sample).
    ///
    /// Deadlines are then held against it: every fragment carries
    /// `ttl = deadline − now − transit`, and a message with `deadline − now
    /// ≤ transit` is expired (dropped; a reliable one skipped) instead of
    /// sent. Zero (the default) trusts the receiver's clock to start at the
    /// sender's, i.e. ignores the transit.
    ///
    /// [`RttEstimator::transit_bound`]: super::rtt::RttEstimator::transit_bound
    pub fn set_transit(&mut self, transit: Duration) {
        self.transit = transit;
    }

    /// Raises the peer's flow-control limit (never lowers it).
    pub fn on_max_data(&mut self, limit: u64) {
        self.max_data = self.max_data.max(limit);
    }

    /// Bytes queued (unsent, or reliable and unacknowledged).
    pub fn queued_bytes(&self) -> u64 {
        self.queued_bytes
    }

    /// True if something could be written now (new data, retransmissions
    /// or skips), ignoring congestion control and flow control.
    pub fn has_sendable(&self) -> bool {
        !self.skips.is_empty()
            || self
                .streams
                .values()
                .any(|s| !s.unsent.is_empty() || !s.rtx.is_empty())
    }

    /// True if no data is queued or awaiting acknowledgement.
    pub fn is_idle(&self) -> bool {
        self.skips.is_empty()
            && self
                .streams
                .values()
                .all(|s| s.unsent.is_empty() && s.sent.is_empty())
    }

    /// Per-class counters (reliable, unreliable, discardable).
    pub fn counters(&self) -> &[ClassCounters; 3] {
        &self.counters
    }

    /// Bytes of reliable data sent again after a loss.
    pub fn retransmitted_bytes(&self) -> u64 {
        self.retransmitted_bytes
    }

    /// True if dropping one more non-reliable message keeps the lost
    /// fraction within `tolerance`.
    fn tolerates(&self, tolerance: f64) -> bool {
        (self.nr_lost + 1) as f64 <= tolerance * (self.nr_total + 1) as f64
    }

    /// Drops every queued discardable message not yet started (ADAPT_MARK
    /// coordination: "unmarked queued messages are discarded before they
    /// are sent"), within the loss tolerance. Returns how many were dropped.
    pub fn discard_unmarked(&mut self, tolerance: f64) -> u64 {
        // Budget over everything resolved so far plus every non-reliable
        // message now queued: lost ≤ tolerance · total once all are sent.
        let queued_nr = self
            .streams
            .values()
            .flat_map(|s| s.unsent.iter())
            .filter(|m| m.reliability != Reliability::Reliable)
            .count() as u64;
        let budget = (tolerance * (self.nr_total + queued_nr) as f64).floor() as u64;
        let mut allowed = budget.saturating_sub(self.nr_lost);
        let mut dropped = 0;
        let ids: Vec<StreamId> = self.streams.keys().copied().collect();
        for sid in ids {
            let mut i = 0;
            while let Some(m) = self.streams.get(&sid).and_then(|s| s.unsent.get(i)) {
                let drop =
                    m.reliability == Reliability::Discardable && m.sent_offset == 0 && allowed > 0;
                if drop {
                    allowed -= 1;
                    // Invariant: the `while let` just found stream `sid`
                    // with an unsent message at index `i`.
                    let s = self.streams.get_mut(&sid).expect("stream looked up above");
                    let m = s.unsent.remove(i).expect("index in bounds");
                    s.rtx.remove(&m.number);
                    self.queued_bytes -= m.len();
                    self.nr_total += 1;
                    self.nr_lost += 1;
                    dropped += 1;
                } else {
                    i += 1;
                }
            }
        }
        self.counters[2].dropped_before_send += dropped;
        dropped
    }

    /// Expires messages that could no longer reach the receiver before
    /// their deadline (`deadline ≤ now + transit`): non-reliable ones are
    /// dropped, reliable ones dropped and skipped.
    pub fn expire(&mut self, now: Instant) {
        let horizon = now + self.transit;
        while let Some(&(d, sid, number)) = self.deadlines.first() {
            if d > horizon {
                break;
            }
            self.deadlines.pop_first();
            let Some(m) = self.streams.get_mut(&sid).and_then(|s| s.remove(number)) else {
                continue;
            };
            self.expired_early |= d > now;
            self.abandon(sid, m);
        }
    }

    fn abandon(&mut self, sid: StreamId, m: SendMessage) {
        self.queued_bytes -= m.len();
        self.counters[class_index(m.reliability)].expired += 1;
        if m.reliability == Reliability::Reliable {
            if self.skips.len() < MAX_PENDING_SKIPS {
                self.skips.push_back(Skip {
                    stream: sid,
                    message: m.number,
                    len: m.len(),
                    reliability: m.reliability,
                    depends_back: m.depends_back,
                });
            }
        } else {
            // Non-reliable messages leave the queue once fully sent, so
            // this one was not: it counts as dropped.
            self.nr_total += 1;
            self.nr_lost += 1;
        }
    }

    /// True (once) if a message expired only because of the transit
    /// estimate, its deadline not yet passed. The estimate comes from acks;
    /// if nothing is in flight to bring one, the connection sends a PING,
    /// or an inflated estimate (the initial RTT, a spike) would keep
    /// expiring every message with a short deadline and never be
    /// corrected.
    pub fn take_expired_early(&mut self) -> bool {
        std::mem::take(&mut self.expired_early)
    }

    /// When the earliest queued message expires at the sender: its
    /// deadline less the transit estimate.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.first().map(|e| e.0 - self.transit)
    }

    /// A fragment was acknowledged.
    pub fn on_acked(&mut self, stream: StreamId, message: u64, len: u64, class: Reliability) {
        if class != Reliability::Reliable {
            return;
        }
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        let Some(at) = s.find(message) else {
            return;
        };
        let m = s.get_mut(at);
        m.acked_bytes += len;
        if m.acked_bytes >= m.len() && m.first_done && m.retransmit.is_empty() {
            let n = m.len();
            s.remove(message);
            self.queued_bytes -= n;
        }
    }

    /// A fragment was declared lost: reliable ones are queued again (or
    /// skipped if expired); non-reliable ones count against the tolerance.
    pub fn on_lost(
        &mut self,
        now: Instant,
        stream: StreamId,
        message: u64,
        offset: u64,
        len: u64,
        class: Reliability,
    ) {
        if class != Reliability::Reliable {
            if offset == 0 {
                self.nr_lost += 1;
                self.counters[class_index(class)].lost += 1;
            }
            return;
        }
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        let Some(at) = s.find(message) else {
            return;
        };
        if s.get_mut(at).expired(now, self.transit) {
            if let Some(m) = s.remove(message) {
                self.abandon(stream, m);
            }
        } else {
            s.get_mut(at).retransmit.push_back((offset, len));
            s.rtx.insert(message);
        }
    }

    /// A MESSAGE_SKIP was lost: send it again (only reliable messages are
    /// skipped).
    pub fn on_skip_lost(
        &mut self,
        stream: StreamId,
        message: u64,
        len: u64,
        depends_back: Option<u64>,
    ) {
        if self.skips.len() < MAX_PENDING_SKIPS {
            self.skips.push_back(Skip {
                stream,
                message,
                len,
                reliability: Reliability::Reliable,
                depends_back,
            });
        }
    }

    /// Writes skips, retransmissions and new fragments into `b` while they
    /// fit, recording them in `log`. Returns bytes of stream data written.
    ///
    /// # Errors
    /// Only an encoding error, which the bounds checked at `push` rule out.
    pub fn write(
        &mut self,
        now: Instant,
        b: &mut PacketBuilder<'_>,
        log: &mut SentFrames,
        policy: &DiscardPolicy,
    ) -> Result<u64, crate::wire::WireError> {
        while let Some(sk) = self.skips.front().copied() {
            let f = Frame::MessageSkip {
                stream: sk.stream,
                message: sk.message,
                message_len: sk.len,
                reliability: sk.reliability,
                depends_back: sk.depends_back,
            };
            if !b.push(&f)? {
                return Ok(0);
            }
            self.skips.pop_front();
            log.push(SentFrame::Skip {
                stream: sk.stream,
                message: sk.message,
                len: sk.len,
                depends_back: sk.depends_back,
            });
        }
        self.expire(now);
        // Retransmissions first, then new data, round robin over streams
        // (the order in a buffer kept for the next packet).
        let mut ids = std::mem::take(&mut self.order);
        ids.clear();
        ids.extend(
            self.streams
                .iter()
                .filter(|(_, s)| !s.unsent.is_empty() || !s.rtx.is_empty())
                .map(|(id, s)| (s.priority, *id)),
        );
        if let Some(c) = self.cursor {
            let pos = ids.partition_point(|&(_, id)| id <= c);
            ids.rotate_left(pos);
        }
        // Higher priorities first; the sort is stable, so equal ones keep
        // their round-robin order.
        if ids.windows(2).any(|w| w[0].0 != w[1].0) {
            ids.sort_by_key(|&(p, _)| std::cmp::Reverse(p));
        }
        let mut r = Ok(0);
        let mut from = 0;
        while from < ids.len() {
            let p = ids[from].0;
            let to = from + ids[from..].partition_point(|&(q, _)| q == p);
            match self.write_in_order(now, b, log, policy, &ids[from..to]) {
                Ok(n) => r = r.map(|w| w + n),
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
            if b.remaining() < PACKET_FULL_BELOW {
                break;
            }
            from = to;
        }
        self.order = ids;
        r
    }

    /// [`SendStreams::write`]'s stream data: retransmissions, then new
    /// data, visiting the streams in `ids` round and round while they fill
    /// the packet.
    fn write_in_order(
        &mut self,
        now: Instant,
        b: &mut PacketBuilder<'_>,
        log: &mut SentFrames,
        policy: &DiscardPolicy,
        ids: &[(u8, StreamId)],
    ) -> Result<u64, crate::wire::WireError> {
        let mut written = 0;
        for retransmit in [true, false] {
            loop {
                let mut progress = false;
                for &(_, sid) in ids {
                    if b.remaining() < PACKET_FULL_BELOW {
                        return Ok(written);
                    }
                    let n = if retransmit {
                        self.write_rtx(now, sid, b, log)?
                    } else {
                        self.write_new(now, sid, b, log, policy)?
                    };
                    if n > 0 {
                        progress = true;
                        written += n;
                        if !retransmit {
                            self.cursor = Some(sid);
                        }
                    }
                }
                if !progress {
                    break;
                }
            }
        }
        Ok(written)
    }

    /// Writes one retransmitted fragment of stream `sid`; 0 if none.
    fn write_rtx(
        &mut self,
        now: Instant,
        sid: StreamId,
        b: &mut PacketBuilder<'_>,
        log: &mut SentFrames,
    ) -> Result<u64, crate::wire::WireError> {
        let Some(s) = self.streams.get_mut(&sid) else {
            return Ok(0);
        };
        let Some(&number) = s.rtx.first() else {
            return Ok(0);
        };
        let Some(at) = s.find(number) else {
            s.rtx.remove(&number);
            return Ok(0);
        };
        let m = s.get_mut(at);
        let Some(&(offset, avail)) = m.retransmit.front() else {
            s.rtx.remove(&number);
            return Ok(0);
        };
        // Recomputed at every send: a retransmission carries less time.
        let ttl_us = wire_ttl_us(m.deadline, now, self.transit);
        let Some(take) = write_fragment(b, sid, m, offset, avail, ttl_us, log)? else {
            return Ok(0);
        };
        self.retransmitted_bytes += take;
        // Invariant: `retransmit.front()` was `Some` above and nothing
        // popped it since.
        let front = m
            .retransmit
            .front_mut()
            .expect("non-empty retransmit queue");
        if take >= front.1 {
            m.retransmit.pop_front();
        } else {
            front.0 += take;
            front.1 -= take;
        }
        if m.retransmit.is_empty() {
            s.rtx.remove(&number);
        }
        Ok(take.max(1))
    }

    /// Writes one new fragment of stream `sid` (dropping discardable
    /// messages first if the policy says so); 0 if none.
    fn write_new(
        &mut self,
        now: Instant,
        sid: StreamId,
        b: &mut PacketBuilder<'_>,
        log: &mut SentFrames,
        policy: &DiscardPolicy,
    ) -> Result<u64, crate::wire::WireError> {
        loop {
            let tolerated = self.tolerates(policy.tolerance);
            let Some(s) = self.streams.get_mut(&sid) else {
                return Ok(0);
            };
            let Some(m) = s.unsent.front_mut() else {
                return Ok(0);
            };
            let discard = m.reliability == Reliability::Discardable
                && m.sent_offset == 0
                && (policy.congested || policy.discard_unmarked)
                && tolerated;
            if discard {
                // Invariant: `front_mut` returned this message above.
                let m = s.unsent.pop_front().expect("front exists");
                s.rtx.remove(&m.number);
                self.queued_bytes -= m.len();
                self.nr_total += 1;
                self.nr_lost += 1;
                self.counters[2].dropped_before_send += 1;
                continue;
            }
            let first = m.sent_offset == 0;
            // Flow control: a reliable message is charged whole when its
            // first fragment goes out.
            if m.reliability == Reliability::Reliable
                && first
                && self.reliable_charged + m.len() > self.max_data
            {
                return Ok(0);
            }
            let ttl_us = wire_ttl_us(m.deadline, now, self.transit);
            let (offset, avail) = (m.sent_offset, m.len() - m.sent_offset);
            let Some(take) = write_fragment(b, sid, m, offset, avail, ttl_us, log)? else {
                return Ok(0);
            };
            let class = m.reliability;
            if first && class == Reliability::Reliable {
                self.reliable_charged += m.len();
            }
            m.sent_offset += take;
            if m.sent_offset >= m.len() {
                m.first_done = true;
                self.counters[class_index(class)].sent += 1;
                // Invariant: `m` is the front message, borrowed above.
                let m = s.unsent.pop_front().expect("front exists");
                if class == Reliability::Reliable {
                    s.sent.push_back(m);
                } else {
                    self.nr_total += 1;
                    self.queued_bytes -= m.len();
                }
            }
            return Ok(take.max(1));
        }
    }
}

/// The time to live a fragment sent at `now` carries: what is left of the
/// deadline once the one-way `transit` is taken off, so that the receiver's
/// deadline (its arrival time + this) is no later than the sender's while
/// the transit estimate holds. [`SendStreams::expire`] runs before
/// anything is written and removes messages with nothing left, so only a
/// sub-microsecond remainder rounds to zero — which the receiver treats as
/// already expired (its deadline is the arrival), never as late.
fn wire_ttl_us(deadline: Option<Instant>, now: Instant, transit: Duration) -> Option<u64> {
    deadline.map(|d| {
        d.saturating_duration_since(now + transit)
            .as_micros()
            .min(MAX_TTL_US)
    })
}

/// Writes `[offset, offset + avail)` of `m` (as much as fits) as a STREAM
/// frame; returns the bytes written, or `None` if nothing fit.
fn write_fragment(
    b: &mut PacketBuilder<'_>,
    sid: StreamId,
    m: &SendMessage,
    offset: u64,
    avail: u64,
    ttl_us: Option<u64>,
    log: &mut SentFrames,
) -> Result<Option<u64>, crate::wire::WireError> {
    let mut frame = StreamFrame {
        stream: sid,
        message: m.number,
        message_len: m.len(),
        offset,
        reliability: m.reliability,
        depends_back: m.depends_back,
        ttl_us,
        data: &[],
    };
    let room = b.remaining().saturating_sub(frame.overhead(b.remaining()));
    let take = (avail as usize).min(room);
    if take == 0 && avail > 0 {
        return Ok(None);
    }
    frame.data = &m.data[offset as usize..offset as usize + take];
    if !b.push(&Frame::Stream(frame))? {
        return Ok(None);
    }
    log.push(SentFrame::Stream {
        stream: sid,
        message: m.number,
        offset,
        len: take as u64,
        reliability: m.reliability,
    });
    Ok(Some(take as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ConnectionId, Header, Packet, PacketType};

    fn header() -> Header {
        Header {
            ty: PacketType::Data,
            dst_cid: ConnectionId([0; 8]),
            src_cid: None,
            pn: 0,
        }
    }

    /// Writes one packet and returns its frames' logs and decoded stream
    /// frames as (message, offset, len).
    fn write(s: &mut SendStreams, now: Instant, policy: &DiscardPolicy) -> Vec<SentFrame> {
        let mut buf = Vec::new();
        let mut b = PacketBuilder::new(&mut buf, &header(), 1200).unwrap();
        let mut log = SentFrames::new();
        s.write(now, &mut b, &mut log, policy).unwrap();
        b.finish();
        if !log.is_empty() {
            Packet::decode(&buf).unwrap();
        }
        log.into_vec()
    }

    #[test]
    fn higher_priority_streams_fill_packets_first() {
        let mut s = SendStreams::new(1 << 20, 1 << 20);
        let t = Instant::ZERO;
        s.push(t, StreamId(1), vec![1; 5000], SendOptions::RELIABLE)
            .unwrap();
        let high = SendOptions {
            priority: 1,
            ..SendOptions::UNRELIABLE
        };
        s.push(t, StreamId(2), vec![2; 5000], high).unwrap();
        let streams = |p: &[SentFrame]| -> Vec<(StreamId, u64)> {
            p.iter()
                .filter_map(|f| match *f {
                    SentFrame::Stream { stream, len, .. } => Some((stream, len)),
                    _ => None,
                })
                .collect()
        };
        // Queued second, it goes first, whole, packet after packet.
        let mut high_sent = 0;
        while high_sent < 5000 {
            let p = streams(&write(&mut s, t, &DiscardPolicy::default()));
            assert!(!p.is_empty());
            for (stream, len) in p {
                if high_sent < 5000 {
                    assert_eq!(stream, StreamId(2), "a lower priority went first");
                }
                high_sent += if stream == StreamId(2) { len } else { 0 };
            }
        }
        // Then the lower priority has the packets.
        let p = streams(&write(&mut s, t, &DiscardPolicy::default()));
        assert!(!p.is_empty() && p.iter().all(|(st, _)| *st == StreamId(1)));
        // Its retransmissions too wait for the higher priority's new data.
        s.push(t, StreamId(2), vec![2; 100], high).unwrap();
        s.on_lost(t, StreamId(1), 0, 0, 1000, Reliability::Reliable);
        let p = streams(&write(&mut s, t, &DiscardPolicy::default()));
        assert_eq!(p.first(), Some(&(StreamId(2), 100)));
    }

    #[test]
    fn fragments_and_retransmits_reliable_messages() {
        let mut s = SendStreams::new(1 << 20, 1 << 20);
        let t = Instant::ZERO;
        s.push(t, StreamId(0), vec![7; 3000], SendOptions::RELIABLE)
            .unwrap();
        let p1 = write(&mut s, t, &DiscardPolicy::default());
        let p2 = write(&mut s, t, &DiscardPolicy::default());
        let p3 = write(&mut s, t, &DiscardPolicy::default());
        assert!(write(&mut s, t, &DiscardPolicy::default()).is_empty());
        let total: u64 = [&p1, &p2, &p3]
            .iter()
            .flat_map(|p| p.iter())
            .map(|f| match f {
                SentFrame::Stream { len, .. } => *len,
                _ => 0,
            })
            .sum();
        assert_eq!(total, 3000);
        // Lose the second packet's fragment: it is retransmitted.
        let SentFrame::Stream { offset, len, .. } = p2[0] else {
            panic!("stream frame expected")
        };
        s.on_lost(t, StreamId(0), 0, offset, len, Reliability::Reliable);
        let r = write(&mut s, t, &DiscardPolicy::default());
        assert_eq!(
            r[0],
            SentFrame::Stream {
                stream: StreamId(0),
                message: 0,
                offset,
                len,
                reliability: Reliability::Reliable
            }
        );
        assert_eq!(s.retransmitted_bytes(), len);
        for p in [&p1, &p3, &r] {
            for f in p.iter() {
                if let SentFrame::Stream { len, .. } = f {
                    s.on_acked(StreamId(0), 0, *len, Reliability::Reliable);
                }
            }
        }
        assert!(s.is_idle());
        assert_eq!(s.queued_bytes(), 0);
    }

    #[test]
    fn queue_is_bounded() {
        let mut s = SendStreams::new(1000, 1 << 20);
        s.push(
            Instant::ZERO,
            StreamId(0),
            vec![0; 800],
            SendOptions::RELIABLE,
        )
        .unwrap();
        assert_eq!(
            s.push(
                Instant::ZERO,
                StreamId(0),
                vec![0; 800],
                SendOptions::RELIABLE
            ),
            Err(SendRefused {
                error: SendError::Blocked,
                data: vec![0; 800]
            })
        );
    }

    #[test]
    fn flow_credit_blocks_new_reliable_messages() {
        let mut s = SendStreams::new(1 << 20, 100);
        let t = Instant::ZERO;
        s.push(t, StreamId(0), vec![0; 80], SendOptions::RELIABLE)
            .unwrap();
        s.push(t, StreamId(0), vec![0; 80], SendOptions::RELIABLE)
            .unwrap();
        let p = write(&mut s, t, &DiscardPolicy::default());
        assert_eq!(p.len(), 1, "second message waits for credit");
        s.on_max_data(200);
        assert_eq!(write(&mut s, t, &DiscardPolicy::default()).len(), 1);
    }

    #[test]
    fn expired_messages_are_dropped_and_reliable_ones_skipped() {
        let mut s = SendStreams::new(1 << 20, 1 << 20);
        let t = Instant::ZERO;
        let ttl = SendOptions {
            reliability: Reliability::Reliable,
            ttl: Some(Duration::from_millis(10)),
            priority: 0,
        };
        s.push(t, StreamId(0), vec![0; 10], ttl).unwrap();
        s.push(
            t,
            StreamId(0),
            vec![0; 10],
            SendOptions {
                reliability: Reliability::Unreliable,
                ..ttl
            },
        )
        .unwrap();
        let later = t + Duration::from_millis(10);
        let p = write(&mut s, later, &DiscardPolicy::default());
        assert_eq!(
            p,
            vec![] as Vec<SentFrame>,
            "nothing but the skip (written on the next call)"
        );
        let p = write(&mut s, later, &DiscardPolicy::default());
        assert_eq!(
            p,
            vec![SentFrame::Skip {
                stream: StreamId(0),
                message: 0,
                len: 10,
                depends_back: None
            }]
        );
        assert_eq!(s.counters()[0].expired, 1);
        assert_eq!(s.counters()[1].expired, 1);
    }

    /// The TTL of every STREAM frame in one written packet.
    fn written_ttls(s: &mut SendStreams, now: Instant) -> Vec<Option<u64>> {
        let mut buf = Vec::new();
        let mut b = PacketBuilder::new(&mut buf, &header(), 1200).unwrap();
        s.write(
            now,
            &mut b,
            &mut SentFrames::new(),
            &DiscardPolicy::default(),
        )
        .unwrap();
        b.finish();
        Packet::decode(&buf)
            .unwrap()
            .frames()
            .filter_map(|f| match f {
                Ok(Frame::Stream(f)) => Some(f.ttl_us),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn wire_ttl_takes_the_transit_off_the_deadline() {
        let mut s = SendStreams::new(1 << 20, 1 << 20);
        let t = Instant::ZERO;
        let opts = |reliability, ms| SendOptions {
            reliability,
            ttl: Some(Duration::from_millis(ms)),
            priority: 0,
        };
        s.set_transit(Duration::from_millis(20));
        assert_eq!(s.next_deadline(), None);
        // 50 ms to live, 20 ms in transit: 30 ms on the wire.
        s.push(
            t,
            StreamId(0),
            vec![0; 10],
            opts(Reliability::Unreliable, 50),
        )
        .unwrap();
        assert_eq!(s.next_deadline(), Some(t + Duration::from_millis(30)));
        // 15 ms to live cannot arrive in time: expired, never sent.
        s.push(
            t,
            StreamId(1),
            vec![0; 10],
            opts(Reliability::Unreliable, 15),
        )
        .unwrap();
        // A reliable message sent at 5 ms, lost, resent at 25 ms.
        s.push(t, StreamId(2), vec![0; 10], opts(Reliability::Reliable, 60))
            .unwrap();
        let now = t + Duration::from_millis(5);
        assert_eq!(written_ttls(&mut s, now), [Some(25_000), Some(35_000)]);
        assert_eq!(s.counters()[1].expired, 1);
        assert_eq!(s.counters()[1].sent, 1);
        let now = t + Duration::from_millis(25);
        s.on_lost(now, StreamId(2), 0, 0, 10, Reliability::Reliable);
        // The retransmission carries what is left now: 60 - 25 - 20.
        assert_eq!(written_ttls(&mut s, now), [Some(15_000)]);
        // Lost again at 40 ms: 60 - 40 ≤ 20, so it is skipped, not resent.
        let now = t + Duration::from_millis(40);
        s.on_lost(now, StreamId(2), 0, 0, 10, Reliability::Reliable);
        assert_eq!(s.counters()[0].expired, 1);
        assert_eq!(
            write(&mut s, now, &DiscardPolicy::default()),
            [SentFrame::Skip {
                stream: StreamId(2),
                message: 0,
                len: 10,
                depends_back: None
            }]
        );
    }

    #[test]
    fn without_a_transit_estimate_the_ttl_is_the_time_left() {
        let mut s = SendStreams::new(1 << 20, 1 << 20);
        let opts = SendOptions {
            reliability: Reliability::Unreliable,
            ttl: Some(Duration::from_millis(50)),
            priority: 0,
        };
        s.push(Instant::ZERO, StreamId(0), vec![0; 10], opts)
            .unwrap();
        let now = Instant::ZERO + Duration::from_millis(5);
        assert_eq!(written_ttls(&mut s, now), [Some(45_000)]);
    }

    #[test]
    fn discarding_respects_the_loss_tolerance() {
        let mut s = SendStreams::new(1 << 20, 1 << 20);
        let t = Instant::ZERO;
        for _ in 0..10 {
            s.push(t, StreamId(0), vec![0; 10], SendOptions::DISCARDABLE)
                .unwrap();
        }
        let policy = DiscardPolicy {
            congested: true,
            discard_unmarked: false,
            tolerance: 0.3,
        };
        write(&mut s, t, &policy);
        let c = s.counters()[2];
        assert_eq!(c.dropped_before_send + c.sent, 10);
        assert!(c.dropped_before_send >= 1);
        assert!(c.dropped_before_send as f64 <= 0.3 * 10.0 + 1.0, "{c:?}");
    }

    #[test]
    fn discard_unmarked_drops_only_discardable() {
        let mut s = SendStreams::new(1 << 20, 1 << 20);
        let t = Instant::ZERO;
        s.push(t, StreamId(0), vec![0; 10], SendOptions::RELIABLE)
            .unwrap();
        s.push(t, StreamId(0), vec![0; 10], SendOptions::DISCARDABLE)
            .unwrap();
        s.push(t, StreamId(1), vec![0; 10], SendOptions::UNRELIABLE)
            .unwrap();
        assert_eq!(s.discard_unmarked(1.0), 1);
        let p = write(&mut s, t, &DiscardPolicy::default());
        assert_eq!(p.len(), 2);
    }
}
