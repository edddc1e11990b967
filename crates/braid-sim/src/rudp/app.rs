//! Application models for [`super::RudpNode`]: a bulk sender of verifiable
//! reliable data (with optional unreliable side traffic that has
//! deadlines), and a receiver that checks and logs what it gets.
//!
//! Main types: [`BulkSender`], [`SideTraffic`], [`Receiver`],
//! [`Delivery`], and the message layout ([`encode_message`],
//! [`MessageHeader`]).
//!
//! # Message layout
//! Every message starts with a [`HEADER_LEN`]-byte header — number, send
//! time, absolute deadline (0 = none), a tag flag — followed by a body that
//! is a pure function of `(seed, stream, number)` (ChaCha8 keystream), so
//! the receiver can regenerate and compare every byte without the sender
//! keeping anything.
//!
//! # Invariants the receiver checks
//! Per stream, message numbers strictly increase (nothing twice, nothing
//! out of order); on a reliable stream they are contiguous; a message with
//! a deadline is never handed over after it; bodies match. Every breach is
//! recorded in [`Receiver::violations`].

use super::node::App;
use braid_core::transport::{Connection, Reliability, SendOptions, StreamId};
use braid_core::{Duration, Instant};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// Length of the header every message starts with.
pub const HEADER_LEN: usize = 25;
/// Most violations a receiver records (it counts all).
pub const MAX_VIOLATIONS: usize = 32;

/// The decoded header of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageHeader {
    /// The application's own number (equals the transport's message number
    /// on streams where every message is queued).
    pub number: u64,
    /// When the sender queued it.
    pub sent_at: Instant,
    /// Absolute deadline, if any.
    pub deadline: Option<Instant>,
    /// Tagged (control information that must arrive, seed 002 §3.3).
    pub tagged: bool,
}

impl MessageHeader {
    /// Decodes the header; `None` if the message is too short.
    pub fn decode(data: &[u8]) -> Option<Self> {
        let u = |i: usize| -> Option<u64> {
            Some(u64::from_le_bytes(data.get(i..i + 8)?.try_into().ok()?))
        };
        let d = u(16)?;
        Some(MessageHeader {
            number: u(0)?,
            sent_at: Instant::from_nanos(u(8)?),
            deadline: (d != 0).then(|| Instant::from_nanos(d)),
            tagged: *data.get(24)? != 0,
        })
    }
}

fn body_rng(seed: u64, stream: StreamId, number: u64) -> ChaCha8Rng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..12].copy_from_slice(&stream.0.to_le_bytes());
    key[12..20].copy_from_slice(&number.to_le_bytes());
    ChaCha8Rng::from_seed(key)
}

/// Builds a message of `len` bytes (at least [`HEADER_LEN`]).
pub fn encode_message(seed: u64, stream: StreamId, h: &MessageHeader, len: usize) -> Vec<u8> {
    let len = len.max(HEADER_LEN);
    let mut v = vec![0u8; len];
    v[0..8].copy_from_slice(&h.number.to_le_bytes());
    v[8..16].copy_from_slice(&h.sent_at.as_nanos().to_le_bytes());
    v[16..24].copy_from_slice(&h.deadline.map_or(0, |d| d.as_nanos()).to_le_bytes());
    v[24] = u8::from(h.tagged);
    body_rng(seed, stream, h.number).fill_bytes(&mut v[HEADER_LEN..]);
    v
}

/// True if `data`'s body is what [`encode_message`] made.
pub fn body_matches(seed: u64, stream: StreamId, number: u64, data: &[u8]) -> bool {
    if data.len() < HEADER_LEN {
        return false;
    }
    let mut want = vec![0u8; data.len() - HEADER_LEN];
    body_rng(seed, stream, number).fill_bytes(&mut want);
    want == data[HEADER_LEN..]
}

/// A running 64-bit FNV-1a digest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Digest(pub u64);

impl Default for Digest {
    fn default() -> Self {
        Digest(0xcbf2_9ce4_8422_2325)
    }
}

impl Digest {
    /// Adds `bytes`.
    pub fn update(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Unreliable (or discardable) messages with a deadline sent beside the
/// bulk data, one every `period`, on stream 1.
#[derive(Debug, Clone, Copy)]
pub struct SideTraffic {
    /// Time between messages.
    pub period: Duration,
    /// Message size.
    pub size: usize,
    /// Time to live.
    pub ttl: Duration,
    /// Class (unreliable or discardable).
    pub reliability: Reliability,
    /// Messages to send.
    pub count: u64,
}

/// Stream of the bulk data.
pub const BULK_STREAM: StreamId = StreamId(0);
/// Stream of the side traffic.
pub const SIDE_STREAM: StreamId = StreamId(1);

/// Sends `total` bytes of reliable, verifiable data on stream 0 in
/// messages of `message_size`, keeping at most `backlog` bytes queued.
#[derive(Debug)]
pub struct BulkSender {
    seed: u64,
    total: u64,
    message_size: usize,
    backlog: u64,
    queued: u64,
    next: u64,
    digest: Digest,
    side: Option<SideTraffic>,
    side_next: u64,
    side_at: Instant,
    finished_at: Option<Instant>,
    refused: u64,
    /// The connection was seen established (timers only run after).
    up: bool,
}

impl BulkSender {
    /// A sender of `total` bytes in `message_size`-byte messages.
    pub fn new(seed: u64, total: u64, message_size: usize) -> Self {
        BulkSender {
            seed,
            total,
            message_size: message_size.max(HEADER_LEN),
            backlog: 1 << 20,
            queued: 0,
            next: 0,
            digest: Digest::default(),
            side: None,
            side_next: 0,
            side_at: Instant::ZERO,
            finished_at: None,
            refused: 0,
            up: false,
        }
    }

    /// Adds side traffic.
    pub fn with_side(mut self, side: SideTraffic) -> Self {
        self.side = Some(side);
        self
    }

    /// Digest of every bulk byte queued so far (in order).
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// Bulk bytes queued so far.
    pub fn queued_total(&self) -> u64 {
        self.queued
    }

    /// When every bulk byte had been queued and acknowledged.
    pub fn finished_at(&self) -> Option<Instant> {
        self.finished_at
    }
}

impl App for BulkSender {
    fn drive(&mut self, now: Instant, conn: &mut Connection) {
        if !conn.is_established() {
            return;
        }
        if !self.up {
            self.up = true;
            self.side_at = now;
        }
        if let Some(side) = self.side {
            while self.side_next < side.count && now >= self.side_at {
                let h = MessageHeader {
                    number: self.side_next,
                    sent_at: now,
                    deadline: Some(now + side.ttl),
                    tagged: false,
                };
                let data = encode_message(self.seed, SIDE_STREAM, &h, side.size);
                let opts = SendOptions {
                    reliability: side.reliability,
                    ttl: Some(side.ttl),
                    priority: 0,
                };
                if conn.send(now, SIDE_STREAM, data, opts).is_err() {
                    self.refused += 1;
                }
                self.side_next += 1;
                self.side_at += side.period;
            }
        }
        while self.queued < self.total && conn.queued_bytes() < self.backlog {
            let len = (self.total - self.queued).min(self.message_size as u64) as usize;
            let h = MessageHeader {
                number: self.next,
                sent_at: now,
                deadline: None,
                tagged: false,
            };
            let data = encode_message(self.seed, BULK_STREAM, &h, len);
            let len = data.len() as u64;
            match conn.send(now, BULK_STREAM, data.clone(), SendOptions::RELIABLE) {
                Ok(_) => {
                    self.digest.update(&data);
                    self.queued += len;
                    self.next += 1;
                }
                Err(_) => {
                    self.refused += 1;
                    break;
                }
            }
        }
        if self.finished_at.is_none() && self.queued >= self.total && conn.queued_bytes() == 0 {
            self.finished_at = Some(now);
        }
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let side = self.side?;
        (self.up && self.side_next < side.count).then_some(self.side_at)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("bulk_bytes_queued", self.queued),
            ("side_messages_queued", self.side_next),
            ("send_refused", self.refused),
        ]
    }
}

/// One message handed to the receiving application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// When it was handed over.
    pub at: Instant,
    /// Its stream.
    pub stream: StreamId,
    /// Its header.
    pub header: MessageHeader,
    /// Its length.
    pub len: u32,
}

#[derive(Debug, Default, Clone, Copy)]
struct StreamRecv {
    last: Option<u64>,
    messages: u64,
    bytes: u64,
    digest: Digest,
}

/// Receives everything, checks the invariants in the module docs, and
/// optionally logs every delivery.
#[derive(Debug)]
pub struct Receiver {
    seed: u64,
    verify: bool,
    keep_log: bool,
    log: Vec<Delivery>,
    streams: BTreeMap<StreamId, StreamRecv>,
    violations: Vec<String>,
    violation_count: u64,
    deadline_slack: Duration,
    late: u64,
    max_lateness: Duration,
}

impl Receiver {
    /// A receiver; `verify` compares bodies, `keep_log` keeps
    /// [`Receiver::log`].
    pub fn new(seed: u64, verify: bool, keep_log: bool) -> Self {
        Receiver {
            seed,
            verify,
            keep_log,
            log: Vec::new(),
            streams: BTreeMap::new(),
            violations: Vec::new(),
            violation_count: 0,
            deadline_slack: Duration::ZERO,
            late: 0,
            max_lateness: Duration::ZERO,
        }
    }

    /// Tolerates deliveries up to `slack` after a message's deadline
    /// before calling them violations (they are still counted in
    /// [`Receiver::lateness`]). The transport takes one RTT of transit off
    /// the TTL it sends, so late deliveries should not happen; without
    /// synchronised clocks that is best-effort under sudden queue growth,
    /// which a slack lets a test tolerate explicitly.
    pub fn with_deadline_slack(mut self, slack: Duration) -> Self {
        self.deadline_slack = slack;
        self
    }

    /// (messages delivered after their deadline, the largest lateness).
    pub fn lateness(&self) -> (u64, Duration) {
        (self.late, self.max_lateness)
    }

    /// Every delivery, if logging.
    pub fn log(&self) -> &[Delivery] {
        &self.log
    }

    /// The first [`MAX_VIOLATIONS`] breaches found.
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    /// How many breaches were found.
    pub fn violation_count(&self) -> u64 {
        self.violation_count
    }

    /// (messages, bytes, digest) delivered on `stream`.
    pub fn stream_totals(&self, stream: StreamId) -> (u64, u64, Digest) {
        let s = self.streams.get(&stream).copied().unwrap_or_default();
        (s.messages, s.bytes, s.digest)
    }

    fn violation(&mut self, what: String) {
        self.violation_count += 1;
        if self.violations.len() < MAX_VIOLATIONS {
            self.violations.push(what);
        }
    }

    fn on_message(&mut self, now: Instant, stream: StreamId, rel: Reliability, data: &[u8]) {
        let Some(h) = MessageHeader::decode(data) else {
            self.violation(format!("stream {}: short message", stream.0));
            return;
        };
        let s = self.streams.entry(stream).or_default();
        let prev = s.last;
        s.last = Some(h.number);
        s.messages += 1;
        s.bytes += data.len() as u64;
        s.digest.update(data);
        match prev {
            Some(p) if h.number <= p => self.violation(format!(
                "stream {}: message {} after {} (twice or out of order)",
                stream.0, h.number, p
            )),
            Some(p) if rel == Reliability::Reliable && h.number != p + 1 => self.violation(
                format!("stream {}: reliable gap {} -> {}", stream.0, p, h.number),
            ),
            None if rel == Reliability::Reliable && h.number != 0 => self.violation(format!(
                "stream {}: first reliable is {}",
                stream.0, h.number
            )),
            _ => {}
        }
        if let Some(d) = h.deadline {
            let late = now.saturating_duration_since(d);
            if now > d {
                self.late += 1;
                self.max_lateness = self.max_lateness.max(late);
            }
            if late > self.deadline_slack {
                self.violation(format!(
                    "stream {}: message {} delivered {} us after its deadline",
                    stream.0,
                    h.number,
                    now.saturating_duration_since(d).as_micros()
                ));
            }
        }
        if self.verify && !body_matches(self.seed, stream, h.number, data) {
            self.violation(format!("stream {}: message {} corrupt", stream.0, h.number));
        }
        if self.keep_log {
            self.log.push(Delivery {
                at: now,
                stream,
                header: h,
                len: data.len() as u32,
            });
        }
    }
}

impl App for Receiver {
    fn drive(&mut self, now: Instant, conn: &mut Connection) {
        while conn.poll_event().is_some() {}
        while let Some(m) = conn.recv(now) {
            self.on_message(now, m.stream, m.reliability, &m.data);
        }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let (m, b, _) = self.stream_totals(BULK_STREAM);
        vec![
            ("bulk_messages", m),
            ("bulk_bytes", b),
            ("violations", self.violation_count),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_verify() {
        let h = MessageHeader {
            number: 7,
            sent_at: Instant::from_nanos(5),
            deadline: Some(Instant::from_nanos(9)),
            tagged: true,
        };
        let m = encode_message(3, StreamId(1), &h, 100);
        assert_eq!(m.len(), 100);
        assert_eq!(MessageHeader::decode(&m), Some(h));
        assert!(body_matches(3, StreamId(1), 7, &m));
        assert!(!body_matches(4, StreamId(1), 7, &m));
        let mut bad = m.clone();
        bad[50] ^= 1;
        assert!(!body_matches(3, StreamId(1), 7, &bad));
        assert_eq!(MessageHeader::decode(&m[..10]), None);
    }

    #[test]
    fn receiver_flags_duplicates_gaps_and_lateness() {
        let mut r = Receiver::new(1, true, true);
        let msg = |n: u64, d: Option<u64>| {
            let h = MessageHeader {
                number: n,
                sent_at: Instant::ZERO,
                deadline: d.map(Instant::from_nanos),
                tagged: false,
            };
            encode_message(1, StreamId(0), &h, 40)
        };
        let t = Instant::from_nanos(100);
        r.on_message(t, StreamId(0), Reliability::Reliable, &msg(0, None));
        r.on_message(t, StreamId(0), Reliability::Reliable, &msg(1, None));
        assert_eq!(r.violation_count(), 0);
        r.on_message(t, StreamId(0), Reliability::Reliable, &msg(1, None));
        r.on_message(t, StreamId(0), Reliability::Reliable, &msg(5, None));
        r.on_message(t, StreamId(0), Reliability::Reliable, &msg(6, Some(50)));
        assert_eq!(r.violation_count(), 3, "{:?}", r.violations());
        assert_eq!(r.log().len(), 5);
    }
}
