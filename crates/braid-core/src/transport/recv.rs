//! The receive side of message streams: reassembly of fragments, ordered
//! delivery that waits for reliable messages and delivers around missing
//! non-reliable ones, receiver-side deadlines, bounded buffers and
//! flow-control credit.
//!
//! Main types: [`RecvStreams`], [`ReceivedMessage`], [`RecvError`].
//!
//! Invariants:
//! - Per stream, messages are handed to the application in increasing
//!   message-number order, each at most once; `next` is the lowest number
//!   that may still be delivered, and every *reliable* message below `next`
//!   has been delivered or skipped. A fragment of a message below `next` is
//!   dropped (duplicate or late), so nothing is delivered late or twice.
//! - A message is delivered only once the reliable message it depends on
//!   (`depends_back`) is below `next`.
//! - Reliable bytes buffered never exceed the credit advertised to the peer
//!   (a peer that overruns it is a protocol violation); non-reliable bytes
//!   buffered never exceed `max_unreliable_buffer` (the excess is dropped
//!   and counted); entries per stream never exceed twice
//!   [`MAX_PENDING_MESSAGES`] (plus the one message it waits for), and
//!   across all streams twice [`MAX_PENDING_TOTAL`] (plus one per stream):
//!   new messages past what is pending get the single bound, messages that
//!   fill a hole below it the double one.
//! - Reliable data that finds no room is not taken and the caller is told
//!   ([`Taken::NoRoom`]): its packet is then not acknowledged, so the
//!   sender sends it again. Nothing reliable is dropped once acknowledged.

use super::stats::ClassCounters;
use super::stream_table::StreamTable;
use crate::time::{Duration, Instant};
use crate::wire::{Reliability, StreamFrame, StreamId};
use smallvec::SmallVec;
use std::collections::{btree_map, BTreeMap, VecDeque};

/// Most incomplete or undelivered messages remembered per stream.
pub const MAX_PENDING_MESSAGES: usize = 4096;
/// Most incomplete or undelivered messages remembered across all streams.
pub const MAX_PENDING_TOTAL: usize = 16_384;
/// Most fragment ranges tracked for one message before it is dropped.
pub const MAX_FRAGMENT_RANGES: usize = 256;

/// Whether a frame's data was taken into the receive buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// Buffered, delivered, recognised as a duplicate, or (non-reliable
    /// data) dropped and counted: the packet may be acknowledged.
    Yes,
    /// Reliable data (or a skip) with no room for another pending message
    /// on its stream: the packet must not be acknowledged, so that the
    /// sender sends it again (it is not lost: nothing was acknowledged).
    NoRoom,
}

/// A complete message handed to the application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedMessage {
    /// Its stream.
    pub stream: StreamId,
    /// Its number within the stream.
    pub number: u64,
    /// Its class.
    pub reliability: Reliability,
    /// Its bytes.
    pub data: Vec<u8>,
}

/// A protocol violation found while receiving.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecvError {
    /// The peer sent more reliable data than the advertised credit.
    #[error("flow control credit exceeded")]
    FlowControl,
    /// A message is larger than the maximum this endpoint advertised.
    #[error("message of {0} bytes exceeds the advertised maximum")]
    MessageTooLarge(u64),
    /// Fragments of one message disagree about its length or class.
    #[error("inconsistent fragments")]
    Inconsistent,
}

/// A message's received ranges.
type Ranges = SmallVec<[(u64, u64); 2]>;

#[derive(Debug)]
enum State {
    Partial {
        buf: Vec<u8>,
        /// Received byte ranges `[start, end)`, sorted and disjoint
        /// (inline while few: fragments arriving in order keep one).
        have: Ranges,
    },
    Complete(Vec<u8>),
    Skipped,
}

#[derive(Debug)]
struct Entry {
    reliability: Reliability,
    len: u64,
    depends_back: Option<u64>,
    deadline: Option<Instant>,
    state: State,
}

#[derive(Debug, Default)]
struct RecvStream {
    next: u64,
    entries: BTreeMap<u64, Entry>,
}

#[derive(Debug)]
struct Ready {
    msg: ReceivedMessage,
    deadline: Option<Instant>,
}

/// All receive streams of a connection.
#[derive(Debug)]
pub struct RecvStreams {
    streams: StreamTable<RecvStream>,
    ready: VecDeque<Ready>,
    max_message_size: u64,
    window: u64,
    advertised: u64,
    reliable_seen: u64,
    reliable_consumed: u64,
    max_unreliable_buffer: u64,
    unreliable_buffered: u64,
    /// Entries across all streams.
    entries: usize,
    counters: [ClassCounters; 3],
}

/// Whether a new pending entry for `message` fits: within
/// [`MAX_PENDING_MESSAGES`] on its stream and [`MAX_PENDING_TOTAL`] in all
/// (`total` now); a message that fills a hole below what is already
/// pending has twice the room (it lets what waits behind it go, and the
/// sender cannot know what is pending); the message the stream waits for
/// next always fits, so the stream always moves.
fn has_room(s: &RecvStream, message: u64, total: usize) -> bool {
    let fills_hole = s
        .entries
        .last_key_value()
        .is_some_and(|(&k, _)| message < k);
    let k = if fills_hole { 2 } else { 1 };
    message == s.next
        || (s.entries.len() < k * MAX_PENDING_MESSAGES && total < k * MAX_PENDING_TOTAL)
}

fn class_index(r: Reliability) -> usize {
    match r {
        Reliability::Reliable => 0,
        Reliability::Unreliable => 1,
        Reliability::Discardable => 2,
    }
}

impl RecvStreams {
    /// Receive streams accepting messages up to `max_message_size`, with a
    /// reliable credit window of `window` bytes (the initial limit) and at
    /// most `max_unreliable_buffer` bytes of non-reliable data buffered.
    pub fn new(max_message_size: u64, window: u64, max_unreliable_buffer: u64) -> Self {
        RecvStreams {
            streams: StreamTable::new(),
            ready: VecDeque::new(),
            max_message_size,
            window,
            advertised: window,
            reliable_seen: 0,
            reliable_consumed: 0,
            max_unreliable_buffer,
            unreliable_buffered: 0,
            entries: 0,
            counters: Default::default(),
        }
    }

    /// Per-class counters (delivered, expired, late on the receive side).
    pub fn counters(&self) -> &[ClassCounters; 3] {
        &self.counters
    }

    /// Handles a STREAM frame received at `now`.
    ///
    /// # Errors
    /// A [`RecvError`] protocol violation; the connection closes.
    pub fn on_stream(&mut self, now: Instant, f: &StreamFrame<'_>) -> Result<Taken, RecvError> {
        if f.message_len > self.max_message_size {
            return Err(RecvError::MessageTooLarge(f.message_len));
        }
        let ci = class_index(f.reliability);
        let s = self.streams.get_or_default(f.stream);
        if f.message < s.next {
            if f.reliability != Reliability::Reliable && f.offset == 0 {
                self.counters[ci].late += 1;
            }
            return Ok(Taken::Yes);
        }
        let room = has_room(s, f.message, self.entries);
        let e = match s.entries.entry(f.message) {
            btree_map::Entry::Occupied(o) => o.into_mut(),
            btree_map::Entry::Vacant(v) => {
                if !room {
                    // Reliable data comes again if its packet is not
                    // acknowledged; non-reliable data is lost.
                    if f.reliability == Reliability::Reliable {
                        return Ok(Taken::NoRoom);
                    }
                    self.counters[ci].dropped_on_receive += 1;
                    return Ok(Taken::Yes);
                }
                if f.reliability == Reliability::Reliable {
                    if self.reliable_seen + f.message_len > self.advertised {
                        return Err(RecvError::FlowControl);
                    }
                    self.reliable_seen += f.message_len;
                } else {
                    if self.unreliable_buffered + f.message_len > self.max_unreliable_buffer {
                        self.counters[ci].dropped_on_receive += 1;
                        return Ok(Taken::Yes);
                    }
                    self.unreliable_buffered += f.message_len;
                }
                let deadline = f.ttl_us.map(|t| now + Duration::from_micros(t));
                self.entries += 1;
                v.insert(Entry {
                    reliability: f.reliability,
                    len: f.message_len,
                    depends_back: f.depends_back,
                    deadline,
                    state: State::Partial {
                        // Filled as fragments come (see `place`): no
                        // zeroing of bytes that are about to be written.
                        buf: Vec::with_capacity(f.message_len as usize),
                        have: Ranges::new(),
                    },
                })
            }
        };
        if matches!(e.state, State::Skipped) {
            // Skipped (by the sender, or expired here): a late or duplicated
            // fragment changes nothing. A skip carries no dependency, so
            // there is nothing to check it against either.
            return Ok(Taken::Yes);
        }
        if e.len != f.message_len
            || e.reliability != f.reliability
            || e.depends_back != f.depends_back
        {
            return Err(RecvError::Inconsistent);
        }
        if let State::Partial { buf, have } = &mut e.state {
            let start = f.offset;
            let end = f.offset + f.data.len() as u64;
            // Bounds were validated by the wire decoder: end <= message_len.
            place(buf, start as usize, f.data);
            if !insert_range(have, start, end) {
                // Too fragmented: give up on this message (the sender's
                // retransmissions of a reliable one will not be this small).
                e.state = State::Skipped;
                self.counters[ci].dropped_on_receive += 1;
            } else if have.first().is_some_and(|&(a, b)| a == 0 && b == e.len) || e.len == 0 {
                let data = std::mem::take(buf);
                e.state = State::Complete(data);
            }
        }
        self.deliver(f.stream);
        Ok(Taken::Yes)
    }

    /// Handles a MESSAGE_SKIP: the sender will never complete the message.
    /// `depends_back` keeps order: the skip takes effect only once the
    /// reliable message it depends on is delivered or skipped.
    ///
    /// # Errors
    /// [`RecvError::FlowControl`] if an unseen reliable message's length
    /// overruns the credit.
    pub fn on_skip(
        &mut self,
        stream: StreamId,
        message: u64,
        len: u64,
        class: Reliability,
        depends_back: Option<u64>,
    ) -> Result<Taken, RecvError> {
        let s = self.streams.get_or_default(stream);
        if message < s.next {
            return Ok(Taken::Yes);
        }
        match s.entries.get_mut(&message) {
            Some(e) => {
                release(
                    e,
                    &mut self.reliable_consumed,
                    &mut self.unreliable_buffered,
                );
                e.state = State::Skipped;
            }
            None => {
                if !has_room(s, message, self.entries) {
                    // Sent again: its packet is not acknowledged.
                    return Ok(Taken::NoRoom);
                }
                if class == Reliability::Reliable {
                    if self.reliable_seen + len > self.advertised {
                        return Err(RecvError::FlowControl);
                    }
                    self.reliable_seen += len;
                    self.reliable_consumed += len;
                }
                self.entries += 1;
                s.entries.insert(
                    message,
                    Entry {
                        reliability: class,
                        len,
                        depends_back,
                        deadline: None,
                        state: State::Skipped,
                    },
                );
            }
        }
        self.deliver(stream);
        Ok(Taken::Yes)
    }

    /// Moves deliverable messages of `sid` to the ready queue.
    fn deliver(&mut self, sid: StreamId) {
        let Some(s) = self.streams.get_mut(&sid) else {
            return;
        };
        loop {
            let mut found = None;
            for (&k, e) in s.entries.range(s.next..) {
                let deps_ok = e.depends_back.is_none_or(|d| k - d < s.next);
                if !deps_ok {
                    break;
                }
                match e.state {
                    State::Complete(_) | State::Skipped => {
                        found = Some(k);
                        break;
                    }
                    State::Partial { .. } if e.reliability == Reliability::Reliable => break,
                    State::Partial { .. } => {}
                }
            }
            let Some(k) = found else {
                return;
            };
            // Everything below k still here is a non-reliable message that
            // is incomplete: it will never be delivered now.
            let below: Vec<u64> = s.entries.range(..k).map(|(n, _)| *n).collect();
            for n in below {
                if let Some(mut e) = s.entries.remove(&n) {
                    self.entries -= 1;
                    self.counters[class_index(e.reliability)].dropped_on_receive += 1;
                    release(
                        &mut e,
                        &mut self.reliable_consumed,
                        &mut self.unreliable_buffered,
                    );
                }
            }
            // Invariant: k was found in the map above.
            let e = s.entries.remove(&k).expect("entry present");
            self.entries -= 1;
            s.next = k + 1;
            if let State::Complete(data) = e.state {
                self.ready.push_back(Ready {
                    msg: ReceivedMessage {
                        stream: sid,
                        number: k,
                        reliability: e.reliability,
                        data,
                    },
                    deadline: e.deadline,
                });
            }
        }
    }

    /// Skips messages whose deadline passed before they could be delivered.
    pub fn expire(&mut self, now: Instant) {
        // Stream by stream without collecting their ids (`deliver` needs
        // `self`): nothing is allocated per timer.
        let mut next = self.streams.keys().next().copied();
        while let Some(sid) = next {
            next = self.streams.next_after(sid);
            let mut any = false;
            if let Some(s) = self.streams.get_mut(&sid) {
                for e in s.entries.values_mut() {
                    if e.deadline.is_some_and(|d| now >= d) && !matches!(e.state, State::Skipped) {
                        self.counters[class_index(e.reliability)].expired += 1;
                        release(
                            e,
                            &mut self.reliable_consumed,
                            &mut self.unreliable_buffered,
                        );
                        e.state = State::Skipped;
                        any = true;
                    }
                }
            }
            if any {
                self.deliver(sid);
            }
        }
    }

    /// The earliest receiver-side deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.streams
            .values()
            .flat_map(|s| {
                s.entries
                    .values()
                    .filter(|e| !matches!(e.state, State::Skipped))
                    .filter_map(|e| e.deadline)
            })
            .min()
    }

    /// Takes the next message for the application, skipping (and counting)
    /// any whose deadline has passed while it waited.
    pub fn pop(&mut self, now: Instant) -> Option<ReceivedMessage> {
        while let Some(r) = self.ready.pop_front() {
            let len = r.msg.data.len() as u64;
            if r.msg.reliability == Reliability::Reliable {
                self.reliable_consumed += len;
            } else {
                self.unreliable_buffered -= len.min(self.unreliable_buffered);
            }
            let ci = class_index(r.msg.reliability);
            if r.deadline.is_some_and(|d| now >= d) {
                self.counters[ci].expired += 1;
                continue;
            }
            self.counters[ci].delivered += 1;
            return Some(r.msg);
        }
        None
    }

    /// True if a message is waiting for the application.
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// A new credit limit to advertise, when half the window is used up.
    pub fn max_data_update(&mut self) -> Option<u64> {
        let target = self.reliable_consumed + self.window;
        if target - self.advertised.min(target) >= self.window / 2 {
            self.advertised = target;
            return Some(target);
        }
        None
    }

    /// The credit limit last advertised.
    pub fn advertised(&self) -> u64 {
        self.advertised
    }
}

/// Returns an entry's buffer space: reliable bytes count as consumed (the
/// sender gets the credit back), non-reliable bytes leave the buffer.
fn release(e: &mut Entry, consumed: &mut u64, unreliable: &mut u64) {
    if matches!(e.state, State::Skipped) {
        return;
    }
    if e.reliability == Reliability::Reliable {
        *consumed += e.len;
    } else {
        *unreliable -= e.len.min(*unreliable);
    }
}

/// Writes `data` at `start` of a message being reassembled. `buf` holds
/// the message's bytes up to its length so far: fragments in order only
/// append; a fragment beyond the end zero-fills the gap first (its bytes
/// come later and overwrite it); one inside overwrites in place. Once every
/// range has arrived, `buf` is exactly the message.
fn place(buf: &mut Vec<u8>, start: usize, data: &[u8]) {
    let end = start + data.len();
    if start > buf.len() {
        buf.resize(start, 0);
    }
    let inside = end.min(buf.len()) - start;
    buf[start..start + inside].copy_from_slice(&data[..inside]);
    buf.extend_from_slice(&data[inside..]);
}

/// Adds `[start, end)` to a sorted disjoint range list, merging; false if
/// the list would exceed [`MAX_FRAGMENT_RANGES`].
fn insert_range(have: &mut Ranges, start: u64, end: u64) -> bool {
    if start == end {
        return true;
    }
    // In order, the common case: the fragment starts inside or at the end
    // of the last range. The ranges before it end below that range's start
    // (touching ranges are merged), so it merges with the last one only.
    if let Some(last) = have.last_mut() {
        if last.0 <= start && start <= last.1 {
            last.1 = last.1.max(end);
            return true;
        }
    }
    // In place (nothing allocated once the list has its room): the ranges
    // `i..j` overlap or touch `[start, end)` and merge with it.
    let i = have.partition_point(|&(_, b)| b < start);
    let j = i + have[i..].partition_point(|&(a, _)| a <= end);
    if i == j {
        if have.len() >= MAX_FRAGMENT_RANGES {
            return false;
        }
        have.insert(i, (start, end));
    } else {
        have[i] = (start.min(have[i].0), end.max(have[j - 1].1));
        have.drain(i + 1..j);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn place_builds_the_message_in_any_fragment_order() {
        let msg: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let cuts = [(0, 300), (300, 650), (650, 1000)];
        for order in [
            [0, 1, 2],
            [2, 1, 0],
            [1, 2, 0],
            [2, 0, 1],
            [0, 2, 1],
            [1, 0, 2],
        ] {
            let mut buf = Vec::with_capacity(msg.len());
            for i in order {
                let (a, b) = cuts[i];
                place(&mut buf, a, &msg[a..b]);
            }
            assert_eq!(buf, msg, "order {order:?}");
        }
        // Overlapping and repeated fragments leave the same bytes.
        let mut buf = Vec::new();
        place(&mut buf, 500, &msg[500..1000]);
        place(&mut buf, 200, &msg[200..700]);
        place(&mut buf, 0, &msg[0..300]);
        place(&mut buf, 200, &msg[200..700]);
        assert_eq!(buf, msg);
    }

    fn frame(
        stream: u32,
        message: u64,
        class: Reliability,
        dep: Option<u64>,
        offset: u64,
        len: u64,
        data: &[u8],
    ) -> StreamFrame<'_> {
        StreamFrame {
            stream: StreamId(stream),
            message,
            message_len: len,
            offset,
            reliability: class,
            depends_back: dep,
            ttl_us: None,
            data,
        }
    }

    fn drain(r: &mut RecvStreams) -> Vec<u64> {
        std::iter::from_fn(|| r.pop(Instant::ZERO))
            .map(|m| m.number)
            .collect()
    }

    const R: Reliability = Reliability::Reliable;
    const U: Reliability = Reliability::Unreliable;

    #[test]
    fn reassembles_out_of_order_fragments() {
        let mut r = RecvStreams::new(1 << 20, 1 << 20, 1 << 20);
        let t = Instant::ZERO;
        r.on_stream(t, &frame(0, 0, R, None, 3, 6, b"def")).unwrap();
        assert!(!r.has_ready());
        r.on_stream(t, &frame(0, 0, R, None, 0, 6, b"abc")).unwrap();
        let m = r.pop(t).unwrap();
        assert_eq!(m.data, b"abcdef");
        // A duplicate after delivery is ignored.
        r.on_stream(t, &frame(0, 0, R, None, 0, 6, b"abc")).unwrap();
        assert!(r.pop(t).is_none());
    }

    #[test]
    fn reliable_messages_wait_and_unreliable_are_delivered_around_gaps() {
        let mut r = RecvStreams::new(1 << 20, 1 << 20, 1 << 20);
        let t = Instant::ZERO;
        // 0 R, 1 U (lost), 2 U, 3 R (dep 3), 4 U (dep 1)
        r.on_stream(t, &frame(0, 2, U, Some(2), 0, 1, b"c"))
            .unwrap();
        assert!(drain(&mut r).is_empty(), "2 waits for reliable 0");
        r.on_stream(t, &frame(0, 4, U, Some(1), 0, 1, b"e"))
            .unwrap();
        r.on_stream(t, &frame(0, 0, R, None, 0, 1, b"a")).unwrap();
        assert_eq!(drain(&mut r), vec![0, 2], "1 is skipped, 4 waits for 3");
        r.on_stream(t, &frame(0, 1, U, Some(1), 0, 1, b"b"))
            .unwrap();
        assert!(drain(&mut r).is_empty(), "1 arrived late: never delivered");
        assert_eq!(r.counters()[1].late, 1);
        r.on_stream(t, &frame(0, 3, R, Some(3), 0, 1, b"d"))
            .unwrap();
        assert_eq!(drain(&mut r), vec![3, 4]);
    }

    #[test]
    fn skip_releases_waiting_messages_and_credit() {
        let mut r = RecvStreams::new(1 << 20, 100, 1 << 20);
        let t = Instant::ZERO;
        r.on_stream(t, &frame(0, 1, R, Some(1), 0, 10, &[0; 10]))
            .unwrap();
        r.on_skip(StreamId(0), 0, 90, R, None).unwrap();
        assert_eq!(drain(&mut r), vec![1]);
        assert_eq!(r.max_data_update(), Some(200));
        // Overrunning the credit is a violation.
        assert_eq!(
            r.on_stream(t, &frame(0, 2, R, Some(1), 0, 200, &[0; 10])),
            Err(RecvError::FlowControl)
        );
    }

    #[test]
    fn expired_messages_are_never_delivered() {
        let mut r = RecvStreams::new(1 << 20, 1 << 20, 1 << 20);
        let t = Instant::ZERO;
        let mut f = frame(0, 1, U, None, 0, 2, b"x");
        f.ttl_us = Some(1000);
        r.on_stream(t, &f).unwrap();
        r.expire(t + Duration::from_millis(1));
        r.on_stream(t, &frame(0, 1, U, None, 1, 2, b"y")).unwrap();
        assert!(drain(&mut r).is_empty());
        assert_eq!(r.counters()[1].expired, 1);
        // Complete but not taken before its deadline: dropped at pop.
        let mut f = frame(0, 2, U, None, 0, 1, b"z");
        f.ttl_us = Some(1000);
        r.on_stream(t, &f).unwrap();
        assert!(r.pop(t + Duration::from_millis(2)).is_none());
        assert_eq!(r.counters()[1].expired, 2);
    }

    #[test]
    fn bounds_unreliable_buffer_and_message_size() {
        let mut r = RecvStreams::new(100, 1 << 20, 50);
        let t = Instant::ZERO;
        assert_eq!(
            r.on_stream(t, &frame(0, 0, U, None, 0, 101, b"")),
            Err(RecvError::MessageTooLarge(101))
        );
        r.on_stream(t, &frame(0, 0, U, None, 0, 40, b"")).unwrap();
        r.on_stream(t, &frame(0, 1, U, None, 0, 40, b"")).unwrap();
        assert_eq!(r.counters()[1].dropped_on_receive, 1);
        assert_eq!(
            r.on_stream(t, &frame(0, 0, R, None, 0, 40, b"")),
            Err(RecvError::Inconsistent)
        );
    }

    #[test]
    fn fragments_of_a_skipped_message_are_ignored() {
        let mut r = RecvStreams::new(1 << 20, 1 << 20, 1 << 20);
        let t = Instant::ZERO;
        // Message 2 waits for reliable 1; the sender skips 2, then a late
        // fragment of 2 (with its dependency) arrives.
        r.on_skip(StreamId(0), 2, 5, R, Some(1)).unwrap();
        assert_eq!(
            r.on_stream(t, &frame(0, 2, R, Some(1), 0, 5, b"hello")),
            Ok(Taken::Yes)
        );
        r.on_stream(t, &frame(0, 0, R, None, 0, 1, b"a")).unwrap();
        r.on_stream(t, &frame(0, 1, R, Some(1), 0, 1, b"b"))
            .unwrap();
        r.on_stream(t, &frame(0, 3, R, Some(1), 0, 1, b"d"))
            .unwrap();
        assert_eq!(drain(&mut r), vec![0, 1, 3]);
    }

    #[test]
    fn entries_are_bounded_across_streams() {
        let mut r = RecvStreams::new(1 << 20, 1 << 20, 1 << 20);
        for stream in 0..8u32 {
            for m in 1..=(MAX_PENDING_MESSAGES as u64) {
                // Zero-length unreliable messages beyond a gap: cost no buffer.
                r.on_stream(Instant::ZERO, &frame(stream, m, R, Some(m), 0, 0, b""))
                    .ok();
                r.on_skip(StreamId(stream + 100), m + 5, 0, U, None)
                    .unwrap();
            }
        }
        assert!(r.entries <= MAX_PENDING_TOTAL);
        let held: usize = r.streams.values().map(|s| s.entries.len()).sum();
        assert_eq!(held, r.entries);
    }

    /// A reliable message that finds its stream's pending bound full is
    /// not taken, and says so (its packet is then left unacknowledged, so
    /// the sender sends it again): it is never dropped after being
    /// accepted. Once the hole before it fills, it is taken and delivered.
    #[test]
    fn reliable_data_without_room_is_refused_not_dropped() {
        let mut r = RecvStreams::new(1 << 30, 1 << 30, 1 << 20);
        let n = MAX_PENDING_MESSAGES as u64;
        // Message 0 is missing; 1..=n, each after the one before, wait
        // behind it and fill the bound.
        for m in 1..=n {
            let t = r.on_stream(Instant::ZERO, &frame(0, m, R, Some(1), 0, 1, b"x"));
            assert_eq!(t, Ok(Taken::Yes), "message {m}");
        }
        let late = frame(0, n + 1, R, Some(1), 0, 1, b"y");
        assert_eq!(r.on_stream(Instant::ZERO, &late), Ok(Taken::NoRoom));
        assert_eq!(
            r.on_skip(StreamId(0), n + 2, 1, R, Some(1)),
            Ok(Taken::NoRoom)
        );
        assert_eq!(r.counters()[0].dropped_on_receive, 0);
        // The hole fills; everything drains; the refused message, sent
        // again, is taken and delivered in its place.
        assert_eq!(
            r.on_stream(Instant::ZERO, &frame(0, 0, R, None, 0, 1, b"x")),
            Ok(Taken::Yes)
        );
        let mut got = 0;
        while r.pop(Instant::ZERO).is_some() {
            got += 1;
        }
        assert_eq!(got, n + 1);
        assert_eq!(r.on_stream(Instant::ZERO, &late), Ok(Taken::Yes));
        assert_eq!(r.pop(Instant::ZERO).map(|m| m.number), Some(n + 1));
    }

    /// One arrival at the receiver in the property test.
    #[derive(Debug, Clone)]
    enum Arrival {
        Fragment(u64, u64, usize),
        Skip(u64),
    }

    proptest::proptest! {
        /// Whatever the arrival order, duplication and loss: delivery is in
        /// increasing order, at most once, with the bytes that were sent;
        /// every reliable message that was not skipped is delivered; no
        /// skipped or lost message is.
        #[test]
        fn delivery_invariants_hold_for_any_arrival_order(
            msgs in proptest::collection::vec((0u8..3, 0usize..3000, proptest::bool::ANY), 1..30),
            order in proptest::collection::vec(proptest::num::usize::ANY, 0..400),
            dups in proptest::collection::vec(proptest::num::usize::ANY, 0..20),
        ) {
            let classes = [R, U, Reliability::Discardable];
            let mut last_rel = None;
            let mut meta = Vec::new(); // (class, dep, data, gone: skipped or lost)
            for (i, (c, len, gone)) in msgs.iter().enumerate() {
                let i = i as u64;
                let class = classes[*c as usize];
                let dep = last_rel.map(|r| i - r);
                if class == R {
                    last_rel = Some(i);
                }
                let data: Vec<u8> = (0..*len).map(|b| (b as u64 * 7 + i) as u8).collect();
                meta.push((class, dep, data, *gone));
            }
            let mut arrivals = Vec::new();
            for (i, (class, _, data, gone)) in meta.iter().enumerate() {
                let i = i as u64;
                if *gone && *class == R {
                    // Abandoned by the sender: maybe after a first fragment
                    // (never the whole message, or it could be delivered).
                    if data.len() > 1000 {
                        arrivals.push(Arrival::Fragment(i, 0, 1000));
                    }
                    arrivals.push(Arrival::Skip(i));
                    continue;
                }
                if *gone {
                    continue; // a lost non-reliable message
                }
                let mut off = 0;
                loop {
                    let take = (data.len() - off).min(1000);
                    arrivals.push(Arrival::Fragment(i, off as u64, take));
                    off += take;
                    if off >= data.len() {
                        break;
                    }
                }
            }
            for d in &dups {
                if !arrivals.is_empty() {
                    let a = arrivals[d % arrivals.len()].clone();
                    arrivals.push(a);
                }
            }
            for (k, o) in order.iter().enumerate() {
                if !arrivals.is_empty() {
                    let n = arrivals.len();
                    arrivals.swap(k % n, o % n);
                }
            }
            let mut r = RecvStreams::new(1 << 20, 1 << 20, 1 << 20);
            let mut got = Vec::new();
            for a in &arrivals {
                match *a {
                    Arrival::Fragment(i, off, take) => {
                        let (class, dep, data, _) = &meta[i as usize];
                        let f = frame(0, i, *class, *dep, off, data.len() as u64,
                                      &data[off as usize..off as usize + take]);
                        proptest::prop_assert!(r.on_stream(Instant::ZERO, &f).is_ok());
                    }
                    Arrival::Skip(i) => {
                        let (class, dep, data, _) = &meta[i as usize];
                        proptest::prop_assert!(r.on_skip(StreamId(0), i, data.len() as u64, *class, *dep).is_ok());
                    }
                }
                while let Some(m) = r.pop(Instant::ZERO) {
                    got.push(m);
                }
            }
            let mut prev = None;
            for m in &got {
                proptest::prop_assert!(prev < Some(m.number), "increasing, once");
                prev = Some(m.number);
                let (class, _, data, gone) = &meta[m.number as usize];
                proptest::prop_assert!(!gone, "skipped or lost message delivered");
                proptest::prop_assert_eq!(&m.data, data);
                proptest::prop_assert_eq!(m.reliability, *class);
            }
            for (i, (class, _, _, gone)) in meta.iter().enumerate() {
                if *class == R && !gone {
                    proptest::prop_assert!(got.iter().any(|m| m.number == i as u64),
                        "reliable message {} not delivered", i);
                }
            }
        }
    }

    #[test]
    fn range_insertion_merges() {
        let mut h = Ranges::new();
        assert!(insert_range(&mut h, 10, 20));
        assert!(insert_range(&mut h, 0, 5));
        assert!(insert_range(&mut h, 5, 10));
        assert_eq!(h.as_slice(), [(0, 20)]);
        assert!(insert_range(&mut h, 30, 40));
        assert!(insert_range(&mut h, 15, 35));
        assert_eq!(h.as_slice(), [(0, 40)]);
        // Disjoint ranges stay apart, in order; a bridge merges them all.
        assert!(insert_range(&mut h, 60, 70));
        assert!(insert_range(&mut h, 50, 55));
        assert_eq!(h.as_slice(), [(0, 40), (50, 55), (60, 70)]);
        assert!(insert_range(&mut h, 41, 60));
        assert_eq!(h.as_slice(), [(0, 40), (41, 70)]);
        assert!(insert_range(&mut h, 40, 41));
        assert_eq!(h.as_slice(), [(0, 70)]);
    }

    proptest::proptest! {
        /// Whatever the order (the in-order fast path included), the ranges
        /// are exactly the runs of bytes covered so far: disjoint, not
        /// touching, in order.
        #[test]
        fn ranges_are_the_covered_runs(
            cuts in proptest::collection::vec((0u64..200, 0u64..40), 1..60),
            in_order in proptest::bool::ANY,
        ) {
            let mut cuts = cuts;
            if in_order {
                cuts.sort();
            }
            let mut h = Ranges::new();
            let mut covered = [false; 240];
            for (start, len) in cuts {
                proptest::prop_assert!(insert_range(&mut h, start, start + len));
                for b in &mut covered[start as usize..(start + len) as usize] {
                    *b = true;
                }
            }
            let mut runs = Vec::new();
            let mut i = 0;
            while i < covered.len() {
                if covered[i] {
                    let a = i;
                    while i < covered.len() && covered[i] {
                        i += 1;
                    }
                    runs.push((a as u64, i as u64));
                } else {
                    i += 1;
                }
            }
            proptest::prop_assert_eq!(h.as_slice(), runs.as_slice());
        }
    }
}
