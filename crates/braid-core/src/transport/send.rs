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
//! - Non-reliable messages are dropped before sending only while the
//!   fraction of non-reliable messages lost or dropped stays within the
//!   receiver's loss tolerance (seed 002 §2.1, §3.3).

use super::recovery::SentFrame;
use super::stats::ClassCounters;
use crate::time::{Duration, Instant};
use crate::wire::{Frame, PacketBuilder, Reliability, StreamFrame, StreamId, MAX_TTL_US};
use std::collections::{BTreeMap, VecDeque};

/// Most MESSAGE_SKIP frames waiting to be (re)sent.
pub const MAX_PENDING_SKIPS: usize = 4096;
/// Smallest fragment worth starting in a packet (avoids 1-byte fragments).
pub const MIN_FRAGMENT: usize = 64;

/// How a message is to be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendOptions {
    /// Its reliability class.
    pub reliability: Reliability,
    /// Time to live from now; after it the message is dropped (sender) and
    /// skipped (receiver). At most one hour.
    pub ttl: Option<Duration>,
}

impl SendOptions {
    /// Reliable, no deadline.
    pub const RELIABLE: SendOptions = SendOptions {
        reliability: Reliability::Reliable,
        ttl: None,
    };
    /// Unreliable, no deadline.
    pub const UNRELIABLE: SendOptions = SendOptions {
        reliability: Reliability::Unreliable,
        ttl: None,
    };
    /// Discardable, no deadline.
    pub const DISCARDABLE: SendOptions = SendOptions {
        reliability: Reliability::Discardable,
        ttl: None,
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
    fn expired(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| now >= d)
    }
}

#[derive(Debug, Default)]
struct SendStream {
    next_number: u64,
    last_reliable: Option<u64>,
    /// Messages not fully sent, and reliable ones not fully acknowledged.
    queue: VecDeque<SendMessage>,
}

impl SendStream {
    fn find(&mut self, number: u64) -> Option<usize> {
        self.queue.binary_search_by_key(&number, |m| m.number).ok()
    }
}

#[derive(Debug, Clone, Copy)]
struct Skip {
    stream: StreamId,
    message: u64,
    len: u64,
    reliability: Reliability,
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

/// All send streams of a connection.
#[derive(Debug)]
pub struct SendStreams {
    streams: BTreeMap<StreamId, SendStream>,
    queued_bytes: u64,
    max_queued_bytes: u64,
    /// Round-robin position: the stream after which to look first.
    cursor: Option<StreamId>,
    skips: VecDeque<Skip>,
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
            streams: BTreeMap::new(),
            queued_bytes: 0,
            max_queued_bytes,
            cursor: None,
            skips: VecDeque::new(),
            reliable_charged: 0,
            max_data,
            nr_total: 0,
            nr_lost: 0,
            counters: Default::default(),
            retransmitted_bytes: 0,
        }
    }

    /// Queues a message; returns its number within the stream.
    ///
    /// # Errors
    /// [`SendError::Blocked`] when the queue is full,
    /// [`SendError::InvalidTtl`] for a TTL over an hour. Size and stream
    /// checks are the caller's.
    pub fn push(
        &mut self,
        now: Instant,
        stream: StreamId,
        data: Vec<u8>,
        opts: SendOptions,
    ) -> Result<u64, SendError> {
        let len = data.len() as u64;
        if self.queued_bytes + len > self.max_queued_bytes && self.queued_bytes > 0 {
            return Err(SendError::Blocked);
        }
        if opts.ttl.is_some_and(|t| t.as_micros() > MAX_TTL_US) {
            return Err(SendError::InvalidTtl);
        }
        let s = self.streams.entry(stream).or_default();
        let number = s.next_number;
        s.next_number += 1;
        let depends_back = s.last_reliable.map(|r| number - r);
        if opts.reliability == Reliability::Reliable {
            s.last_reliable = Some(number);
        }
        s.queue.push_back(SendMessage {
            number,
            data,
            reliability: opts.reliability,
            deadline: opts.ttl.map(|t| now + t),
            depends_back,
            sent_offset: 0,
            first_done: false,
            acked_bytes: 0,
            retransmit: VecDeque::new(),
        });
        self.queued_bytes += len;
        Ok(number)
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
    /// or skips), ignoring congestion control.
    pub fn has_sendable(&self) -> bool {
        !self.skips.is_empty()
            || self.streams.values().any(|s| {
                s.queue
                    .iter()
                    .any(|m| !m.retransmit.is_empty() || !m.first_done)
            })
    }

    /// True if no data is queued or awaiting acknowledgement.
    pub fn is_idle(&self) -> bool {
        self.skips.is_empty() && self.streams.values().all(|s| s.queue.is_empty())
    }

    /// Per-class counters (reliable, unreliable, discardable).
    pub fn counters(&self) -> &[ClassCounters; 3] {
        &self.counters
    }

    /// Bytes of reliable data sent again after a loss.
    pub fn retransmitted_bytes(&self) -> u64 {
        self.retransmitted_bytes
    }

    /// Drops every queued discardable message not yet started (ADAPT_MARK
    /// coordination: "unmarked queued messages are discarded before they
    /// are sent"), within the loss tolerance. Returns how many were dropped.
    pub fn discard_unmarked(&mut self, tolerance: f64) -> u64 {
        let mut dropped = 0;
        let (mut total, mut lost) = (self.nr_total, self.nr_lost);
        for s in self.streams.values_mut() {
            s.queue.retain(|m| {
                let drop = m.reliability == Reliability::Discardable
                    && m.sent_offset == 0
                    && (lost + 1) as f64 <= tolerance * (total + 1) as f64;
                if drop {
                    total += 1;
                    lost += 1;
                    dropped += 1;
                    self.queued_bytes -= m.len();
                }
                !drop
            });
        }
        self.nr_total = total;
        self.nr_lost = lost;
        self.counters[2].dropped_before_send += dropped;
        dropped
    }

    /// Expires queued messages whose deadline has passed: non-reliable ones
    /// are dropped, reliable ones dropped and skipped.
    pub fn expire(&mut self, now: Instant) {
        for (&sid, s) in self.streams.iter_mut() {
            let mut i = 0;
            while i < s.queue.len() {
                if s.queue[i].expired(now) {
                    // Invariant: i < len was just checked.
                    let m = s.queue.remove(i).expect("index in bounds");
                    Self::abandon(
                        sid,
                        m,
                        &mut self.queued_bytes,
                        &mut self.skips,
                        &mut self.counters,
                        &mut self.nr_total,
                        &mut self.nr_lost,
                    );
                } else {
                    i += 1;
                }
            }
        }
    }

    fn abandon(
        sid: StreamId,
        m: SendMessage,
        queued: &mut u64,
        skips: &mut VecDeque<Skip>,
        counters: &mut [ClassCounters; 3],
        nr_total: &mut u64,
        nr_lost: &mut u64,
    ) {
        *queued -= m.len() - m.acked_bytes.min(m.len());
        counters[class_index(m.reliability)].expired += 1;
        if m.reliability == Reliability::Reliable {
            if skips.len() < MAX_PENDING_SKIPS {
                skips.push_back(Skip {
                    stream: sid,
                    message: m.number,
                    len: m.len(),
                    reliability: m.reliability,
                });
            }
        } else {
            // Non-reliable messages leave the queue once fully sent, so
            // this one was not: it counts as dropped.
            *nr_total += 1;
            *nr_lost += 1;
        }
    }

    /// The earliest deadline among queued messages.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.streams
            .values()
            .flat_map(|s| s.queue.iter().filter_map(|m| m.deadline))
            .min()
    }

    /// A fragment was acknowledged.
    pub fn on_acked(&mut self, stream: StreamId, message: u64, len: u64, class: Reliability) {
        if class != Reliability::Reliable {
            return;
        }
        let Some(s) = self.streams.get_mut(&stream) else {
            return;
        };
        let Some(i) = s.find(message) else {
            return;
        };
        let m = &mut s.queue[i];
        m.acked_bytes += len;
        if m.acked_bytes >= m.len() && m.first_done && m.retransmit.is_empty() {
            self.queued_bytes -= m.len();
            s.queue.remove(i);
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
        let Some(i) = s.find(message) else {
            return;
        };
        if s.queue[i].expired(now) {
            // Invariant: `find` returned a valid index.
            let m = s.queue.remove(i).expect("index in bounds");
            Self::abandon(
                stream,
                m,
                &mut self.queued_bytes,
                &mut self.skips,
                &mut self.counters,
                &mut self.nr_total,
                &mut self.nr_lost,
            );
        } else {
            s.queue[i].retransmit.push_back((offset, len));
        }
    }

    /// A MESSAGE_SKIP was lost: send it again (only reliable messages are
    /// skipped).
    pub fn on_skip_lost(&mut self, stream: StreamId, message: u64, len: u64) {
        if self.skips.len() < MAX_PENDING_SKIPS {
            self.skips.push_back(Skip {
                stream,
                message,
                len,
                reliability: Reliability::Reliable,
            });
        }
    }

    fn may_discard(&self, m: &SendMessage, policy: &DiscardPolicy) -> bool {
        m.reliability == Reliability::Discardable
            && m.sent_offset == 0
            && (policy.congested || policy.discard_unmarked)
            && (self.nr_lost + 1) as f64 <= policy.tolerance * (self.nr_total + 1) as f64
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
        log: &mut Vec<SentFrame>,
        policy: &DiscardPolicy,
    ) -> Result<u64, crate::wire::WireError> {
        let mut written = 0;
        while let Some(sk) = self.skips.front().copied() {
            let f = Frame::MessageSkip {
                stream: sk.stream,
                message: sk.message,
                message_len: sk.len,
                reliability: sk.reliability,
            };
            if !b.push(&f)? {
                return Ok(written);
            }
            self.skips.pop_front();
            log.push(SentFrame::Skip {
                stream: sk.stream,
                message: sk.message,
                len: sk.len,
            });
        }
        self.expire(now);
        // Retransmissions first, then new data, round robin over streams.
        let ids: Vec<StreamId> = {
            let start = self.cursor;
            let mut v: Vec<StreamId> = self.streams.keys().copied().collect();
            if let Some(c) = start {
                let pos = v.partition_point(|id| *id <= c);
                v.rotate_left(pos);
            }
            v
        };
        for retransmit in [true, false] {
            loop {
                let mut progress = false;
                for &sid in &ids {
                    if b.remaining() < MIN_FRAGMENT + 32 {
                        return Ok(written);
                    }
                    let n = self.write_one(now, sid, b, log, policy, retransmit)?;
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

    /// Writes one fragment of stream `sid`; 0 if it had nothing to write.
    fn write_one(
        &mut self,
        now: Instant,
        sid: StreamId,
        b: &mut PacketBuilder<'_>,
        log: &mut Vec<SentFrame>,
        policy: &DiscardPolicy,
        retransmit: bool,
    ) -> Result<u64, crate::wire::WireError> {
        loop {
            let Some(s) = self.streams.get(&sid) else {
                return Ok(0);
            };
            // Pick the message and the (offset, len) to send.
            let pick = if retransmit {
                s.queue
                    .iter()
                    .position(|m| !m.retransmit.is_empty())
                    .map(|i| (i, true))
            } else {
                s.queue
                    .iter()
                    .position(|m| !m.first_done)
                    .map(|i| (i, false))
            };
            let Some((i, is_rtx)) = pick else {
                return Ok(0);
            };
            let m = &s.queue[i];
            if !is_rtx {
                // Drop before sending: discardable under congestion.
                if self.may_discard(m, policy) {
                    self.nr_total += 1;
                    self.nr_lost += 1;
                    self.counters[2].dropped_before_send += 1;
                    let s = self.streams.get_mut(&sid).expect("stream looked up above");
                    let m = s.queue.remove(i).expect("index in bounds");
                    self.queued_bytes -= m.len();
                    continue;
                }
                // Flow control: a reliable message is charged whole when
                // its first fragment goes out.
                if m.reliability == Reliability::Reliable
                    && m.sent_offset == 0
                    && self.reliable_charged + m.len() > self.max_data
                {
                    return Ok(0);
                }
            }
            let (offset, avail) = if is_rtx {
                // Invariant: `pick` chose a message with a retransmission.
                let (o, l) = *m.retransmit.front().expect("non-empty retransmit queue");
                (o, l)
            } else {
                (m.sent_offset, m.len() - m.sent_offset)
            };
            let ttl_us = m
                .deadline
                .map(|d| d.saturating_duration_since(now).as_micros().min(MAX_TTL_US));
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
            let overhead = frame.overhead(b.remaining());
            let room = b.remaining().saturating_sub(overhead);
            let take = (avail as usize).min(room);
            if take == 0 && avail > 0 {
                return Ok(0);
            }
            frame.data = &m.data[offset as usize..offset as usize + take];
            let class = m.reliability;
            let number = m.number;
            let first = offset == 0 && !is_rtx;
            let msg_len = m.len();
            if !b.push(&Frame::Stream(frame))? {
                return Ok(0);
            }
            log.push(SentFrame::Stream {
                stream: sid,
                message: number,
                offset,
                len: take as u64,
                reliability: class,
            });
            let s = self.streams.get_mut(&sid).expect("stream looked up above");
            let m = &mut s.queue[i];
            if is_rtx {
                self.retransmitted_bytes += take as u64;
                let front = m
                    .retransmit
                    .front_mut()
                    .expect("non-empty retransmit queue");
                if take as u64 >= front.1 {
                    m.retransmit.pop_front();
                } else {
                    front.0 += take as u64;
                    front.1 -= take as u64;
                }
            } else {
                if first && class == Reliability::Reliable {
                    self.reliable_charged += msg_len;
                }
                m.sent_offset += take as u64;
                if m.sent_offset >= m.len() {
                    m.first_done = true;
                    self.counters[class_index(class)].sent += 1;
                    if class != Reliability::Reliable {
                        self.nr_total += 1;
                        self.queued_bytes -= m.len();
                        s.queue.remove(i);
                    }
                }
            }
            return Ok(take.max(1) as u64);
        }
    }
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
        let mut log = Vec::new();
        s.write(now, &mut b, &mut log, policy).unwrap();
        b.finish();
        if !log.is_empty() {
            Packet::decode(&buf).unwrap();
        }
        log
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
            Err(SendError::Blocked)
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
                len: 10
            }]
        );
        assert_eq!(s.counters()[0].expired, 1);
        assert_eq!(s.counters()[1].expired, 1);
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
