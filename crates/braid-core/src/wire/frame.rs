//! Frames: the typed contents of a packet, with checked decoding and
//! length-exact encoding.
//!
//! Every frame starts with a one-byte type. Every length and count in a frame
//! is bounded by a named constant in [`super`]; a frame that breaks a bound,
//! runs past the packet, or sets a reserved bit is rejected as a whole
//! ([`WireError`]). [`Frame::encoded_len`] is exact, so packet builders can
//! fill a datagram without trial encoding.
//!
//! The layouts are documented field by field in `docs/PROTOCOL.md`.

use super::adapt::{AdaptFrame, TransportParams, ADAPT_CODE};
use super::codec::{put_varint, varint_len, FieldBuf, Reader, VARINT_MAX};
use super::{
    WireError, MAX_ACK_RANGES, MAX_AUTH_LEN, MAX_COOKIE_LEN, MAX_DATAGRAM_SIZE, MAX_MESSAGE_SIZE,
    MAX_REASON_LEN, MAX_STREAMS, MAX_TTL_US,
};

/// Frame type codes.
mod code {
    pub const PADDING: u8 = 0x00;
    pub const PING: u8 = 0x01;
    pub const ACK: u8 = 0x02;
    pub const STREAM: u8 = 0x03;
    pub const MESSAGE_SKIP: u8 = 0x04;
    pub const MAX_DATA: u8 = 0x05;
    pub const CLOSE: u8 = 0x06;
    pub const ADAPT: u8 = super::ADAPT_CODE;
    pub const INITIAL: u8 = 0x10;
    pub const RETRY: u8 = 0x11;
    pub const HANDSHAKE: u8 = 0x12;
    pub const AUTH: u8 = 0x13;
}

/// MESSAGE_SKIP flag: a `depends_back` varint follows.
const SKIP_FLAG_DEP: u8 = 0x04;

pub use crate::id::StreamId;

/// How hard the transport tries to deliver a message (seed 002 §2.1:
/// per-message marks; seed 001 §3.2: prioritized reliability).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reliability {
    /// Ordered and retransmitted until acknowledged (a "marked" message).
    Reliable,
    /// Sent once, never retransmitted; the receiver delivers around gaps.
    Unreliable,
    /// Like `Unreliable`, and the sender may drop it before sending when the
    /// network cannot carry it (an "unmarked" message).
    Discardable,
}

impl Reliability {
    const fn code(self) -> u8 {
        match self {
            Reliability::Reliable => 0,
            Reliability::Unreliable => 1,
            Reliability::Discardable => 2,
        }
    }
    fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => Reliability::Reliable,
            1 => Reliability::Unreliable,
            2 => Reliability::Discardable,
            _ => return None,
        })
    }
}

/// One inclusive range of acknowledged packet numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AckRange {
    /// Smallest packet number in the range.
    pub start: u64,
    /// Largest packet number in the range.
    pub end: u64,
}

/// An ACK frame: up to [`MAX_ACK_RANGES`] disjoint ranges, largest first,
/// and the time the receiver held the largest before acknowledging it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckFrame {
    /// Microseconds between receiving the largest packet and sending this.
    pub ack_delay_us: u64,
    ranges: [AckRange; MAX_ACK_RANGES],
    len: usize,
}

impl AckFrame {
    /// An ACK of `ranges`, which must be disjoint, non-adjacent, sorted
    /// largest first, each with `start <= end`; at most [`MAX_ACK_RANGES`]
    /// are kept (the oldest are dropped).
    ///
    /// # Errors
    /// [`WireError::InvalidAck`] for an empty, unsorted or overlapping list.
    pub fn new(ack_delay_us: u64, ranges: &[AckRange]) -> Result<Self, WireError> {
        let mut out = AckFrame {
            ack_delay_us: ack_delay_us.min(VARINT_MAX),
            ranges: [AckRange::default(); MAX_ACK_RANGES],
            len: 0,
        };
        if ranges.is_empty() || ranges[0].end > VARINT_MAX {
            return Err(WireError::InvalidAck);
        }
        for (i, r) in ranges.iter().take(MAX_ACK_RANGES).enumerate() {
            if r.start > r.end {
                return Err(WireError::InvalidAck);
            }
            if i > 0 {
                let prev = out.ranges[i - 1];
                // A gap of at least one missing packet between ranges.
                if r.end.checked_add(1).is_none_or(|e| e >= prev.start) {
                    return Err(WireError::InvalidAck);
                }
            }
            out.ranges[i] = *r;
            out.len = i + 1;
        }
        Ok(out)
    }

    /// The ranges, largest first.
    pub fn ranges(&self) -> &[AckRange] {
        &self.ranges[..self.len]
    }

    /// The largest acknowledged packet number.
    pub fn largest(&self) -> u64 {
        self.ranges[0].end
    }

    fn encoded_len(&self) -> usize {
        let r = self.ranges();
        let mut n = 1
            + varint_len(r[0].end)
            + varint_len(self.ack_delay_us)
            + varint_len((r.len() - 1) as u64)
            + varint_len(r[0].end - r[0].start);
        for w in r.windows(2) {
            n += varint_len(w[0].start - w[1].end - 2) + varint_len(w[1].end - w[1].start);
        }
        n
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let r = self.ranges();
        out.push(code::ACK);
        put_varint(out, r[0].end);
        put_varint(out, self.ack_delay_us);
        put_varint(out, (r.len() - 1) as u64);
        put_varint(out, r[0].end - r[0].start);
        for w in r.windows(2) {
            // Invariant from `new`: w[1].end + 1 < w[0].start, so no underflow.
            put_varint(out, w[0].start - w[1].end - 2);
            put_varint(out, w[1].end - w[1].start);
        }
    }

    fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let largest = r.varint()?;
        let ack_delay_us = r.varint()?;
        let extra = r.varint_max((MAX_ACK_RANGES - 1) as u64, "ack range count")? as usize;
        let first = r.varint()?;
        let mut out = AckFrame {
            ack_delay_us,
            ranges: [AckRange::default(); MAX_ACK_RANGES],
            len: 1,
        };
        let start = largest.checked_sub(first).ok_or(WireError::InvalidAck)?;
        out.ranges[0] = AckRange {
            start,
            end: largest,
        };
        for i in 1..=extra {
            let gap = r.varint()?;
            let len = r.varint()?;
            let prev_start = out.ranges[i - 1].start;
            let end = prev_start
                .checked_sub(gap)
                .and_then(|v| v.checked_sub(2))
                .ok_or(WireError::InvalidAck)?;
            let start = end.checked_sub(len).ok_or(WireError::InvalidAck)?;
            out.ranges[i] = AckRange { start, end };
            out.len = i + 1;
        }
        Ok(out)
    }
}

/// A fragment of one message on one stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamFrame<'a> {
    /// The stream.
    pub stream: StreamId,
    /// The message's number within the stream (0, 1, 2, …).
    pub message: u64,
    /// The whole message's length (≤ [`MAX_MESSAGE_SIZE`]).
    pub message_len: u64,
    /// Where `data` starts within the message.
    pub offset: u64,
    /// The message's reliability class.
    pub reliability: Reliability,
    /// How far back the nearest earlier *reliable* message of this stream is
    /// (`message − that message`), or `None` if there is none. The receiver
    /// may deliver this message once that one has been delivered or skipped.
    pub depends_back: Option<u64>,
    /// Time to live in microseconds when this fragment was sent; the
    /// receiver skips the message once that much time has passed since
    /// arrival (≤ [`MAX_TTL_US`]).
    pub ttl_us: Option<u64>,
    /// The fragment's bytes.
    pub data: &'a [u8],
}

impl StreamFrame<'_> {
    const FLAG_DEP: u8 = 0x04;
    const FLAG_TTL: u8 = 0x08;

    /// Bytes the frame takes around a `data_len`-byte payload.
    pub fn overhead(&self, data_len: usize) -> usize {
        1 + 1
            + varint_len(u64::from(self.stream.0))
            + varint_len(self.message)
            + varint_len(self.message_len)
            + varint_len(self.offset)
            + self.depends_back.map_or(0, varint_len)
            + self.ttl_us.map_or(0, varint_len)
            + varint_len(data_len as u64)
    }

    fn validate(&self) -> Result<(), WireError> {
        let end = self
            .offset
            .checked_add(self.data.len() as u64)
            .ok_or(WireError::OutOfRange { field: "offset" })?;
        if u64::from(self.stream.0) >= u64::from(MAX_STREAMS) {
            return Err(WireError::OutOfRange { field: "stream id" });
        }
        if self.message > VARINT_MAX {
            return Err(WireError::OutOfRange {
                field: "message number",
            });
        }
        if self.message_len > MAX_MESSAGE_SIZE || end > self.message_len {
            return Err(WireError::OutOfRange {
                field: "message length",
            });
        }
        if self.data.len() > MAX_DATAGRAM_SIZE {
            return Err(WireError::OutOfRange {
                field: "fragment length",
            });
        }
        if let Some(d) = self.depends_back {
            if d == 0 || d > self.message {
                return Err(WireError::OutOfRange {
                    field: "depends back",
                });
            }
        }
        if self.ttl_us.is_some_and(|t| t > MAX_TTL_US) {
            return Err(WireError::OutOfRange { field: "ttl" });
        }
        Ok(())
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let mut h = FieldBuf::default();
        h.u8(code::STREAM);
        let mut flags = self.reliability.code();
        if self.depends_back.is_some() {
            flags |= Self::FLAG_DEP;
        }
        if self.ttl_us.is_some() {
            flags |= Self::FLAG_TTL;
        }
        h.u8(flags);
        h.varint(u64::from(self.stream.0));
        h.varint(self.message);
        h.varint(self.message_len);
        h.varint(self.offset);
        if let Some(d) = self.depends_back {
            h.varint(d);
        }
        if let Some(t) = self.ttl_us {
            h.varint(t);
        }
        h.varint(self.data.len() as u64);
        out.reserve(h.as_slice().len() + self.data.len());
        out.extend_from_slice(h.as_slice());
        out.extend_from_slice(self.data);
    }
}

impl<'a> StreamFrame<'a> {
    fn decode(r: &mut Reader<'a>) -> Result<Self, WireError> {
        let flags = r.u8()?;
        if flags & !(0x03 | Self::FLAG_DEP | Self::FLAG_TTL) != 0 {
            return Err(WireError::Reserved);
        }
        let reliability = Reliability::from_code(flags & 0x03).ok_or(WireError::Reserved)?;
        let stream = r.varint_max(u64::from(MAX_STREAMS) - 1, "stream id")?;
        let message = r.varint()?;
        let message_len = r.varint_max(MAX_MESSAGE_SIZE, "message length")?;
        let offset = r.varint()?;
        let depends_back = if flags & Self::FLAG_DEP != 0 {
            Some(r.varint()?)
        } else {
            None
        };
        let ttl_us = if flags & Self::FLAG_TTL != 0 {
            Some(r.varint()?)
        } else {
            None
        };
        let len = r.varint_max(MAX_DATAGRAM_SIZE as u64, "fragment length")? as usize;
        let data = r.bytes(len)?;
        let f = StreamFrame {
            stream: StreamId(stream as u32),
            message,
            message_len,
            offset,
            reliability,
            depends_back,
            ttl_us,
            data,
        };
        f.validate()?;
        Ok(f)
    }
}

/// A close or reset code. Codes below [`ErrorCode::APPLICATION_BASE`] are
/// the transport's; the application may use the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub u64);

impl ErrorCode {
    /// Normal, graceful close.
    pub const NO_ERROR: ErrorCode = ErrorCode(0);
    /// The peer broke the protocol.
    pub const PROTOCOL_VIOLATION: ErrorCode = ErrorCode(1);
    /// The peer sent more than the flow-control credit allowed.
    pub const FLOW_CONTROL: ErrorCode = ErrorCode(2);
    /// The connection was idle too long.
    pub const IDLE_TIMEOUT: ErrorCode = ErrorCode(3);
    /// The connection was reset (aborted) by the application.
    pub const RESET: ErrorCode = ErrorCode(4);
    /// The peer's handshake parameters were unacceptable.
    pub const PARAMETER_ERROR: ErrorCode = ErrorCode(5);
    /// The server has no room for another connection.
    pub const SERVER_BUSY: ErrorCode = ErrorCode(6);
    /// The handshake did not authenticate: a key was missing on one side,
    /// or the two sides hold different keys. The reason phrase says which
    /// (`transport::auth::REASON_*`).
    pub const AUTH_FAILED: ErrorCode = ErrorCode(7);
    /// First code available to applications.
    pub const APPLICATION_BASE: u64 = 0x1000;
}

/// CLOSE: the sender is closing (or resetting) the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CloseFrame<'a> {
    /// Why.
    pub code: ErrorCode,
    /// A human-readable reason (≤ [`MAX_REASON_LEN`] bytes, not parsed).
    pub reason: &'a [u8],
}

/// A frame.
// The ACK variant holds its ranges inline (about 0.5 KiB) so that decoding
// never allocates; frames are short-lived stack values, so the size is fine.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Frame<'a> {
    /// A run of zero bytes (used to pad INITIAL packets).
    Padding {
        /// How many bytes.
        len: usize,
    },
    /// Asks for an acknowledgement; keeps the connection alive.
    Ping,
    /// Selective acknowledgement.
    Ack(AckFrame),
    /// A message fragment.
    Stream(StreamFrame<'a>),
    /// Message `message` of `stream` (of `message_len` bytes) will never be
    /// sent again: the receiver stops waiting for it.
    MessageSkip {
        /// The stream.
        stream: StreamId,
        /// The abandoned message.
        message: u64,
        /// Its length (returned as flow-control credit if reliable).
        message_len: u64,
        /// Its class.
        reliability: Reliability,
        /// As in STREAM: how far back the nearest earlier reliable message
        /// is, so the receiver keeps order across the skipped message.
        depends_back: Option<u64>,
    },
    /// Flow-control credit: the peer may send reliable message bytes up to
    /// this cumulative total.
    MaxData {
        /// Cumulative limit.
        limit: u64,
    },
    /// The sender is closing the connection.
    Close(CloseFrame<'a>),
    /// The application's report of its adaptation.
    Adapt(AdaptFrame),
    /// Client hello: its parameters and, on the second try, the cookie.
    Initial {
        /// The client's transport parameters.
        params: TransportParams,
        /// The cookie from a RETRY, echoed back (empty on the first try).
        cookie: &'a [u8],
    },
    /// Server's stateless challenge.
    Retry {
        /// The cookie to echo.
        cookie: &'a [u8],
    },
    /// Server's acceptance.
    Handshake {
        /// The server's transport parameters.
        params: TransportParams,
    },
    /// A Noise handshake message (`transport::auth`): message 1 in the
    /// client's cookie-echoing INITIAL, message 2 in the server's
    /// HANDSHAKE. Present only when the endpoints hold a key.
    Auth {
        /// The Noise message (1..=[`MAX_AUTH_LEN`] bytes).
        message: &'a [u8],
    },
}

impl<'a> Frame<'a> {
    /// Exact encoded length.
    pub fn encoded_len(&self) -> usize {
        match self {
            Frame::Padding { len } => *len,
            Frame::Ping => 1,
            Frame::Ack(a) => a.encoded_len(),
            Frame::Stream(s) => s.overhead(s.data.len()) + s.data.len(),
            Frame::MessageSkip {
                stream,
                message,
                message_len,
                depends_back,
                ..
            } => {
                2 + varint_len(u64::from(stream.0))
                    + varint_len(*message)
                    + varint_len(*message_len)
                    + depends_back.map_or(0, varint_len)
            }
            Frame::MaxData { limit } => 1 + varint_len(*limit),
            Frame::Close(c) => {
                1 + varint_len(c.code.0) + varint_len(c.reason.len() as u64) + c.reason.len()
            }
            Frame::Adapt(a) => a.encoded_len(),
            Frame::Initial { params, cookie } => {
                1 + params.encoded_len() + varint_len(cookie.len() as u64) + cookie.len()
            }
            Frame::Retry { cookie } => 1 + varint_len(cookie.len() as u64) + cookie.len(),
            Frame::Handshake { params } => 1 + params.encoded_len(),
            Frame::Auth { message } => 1 + varint_len(message.len() as u64) + message.len(),
        }
    }

    /// Appends the frame.
    ///
    /// # Errors
    /// [`WireError::OutOfRange`] (or [`WireError::InvalidAck`]) if a field
    /// breaks a bound; nothing is written then.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        self.validate()?;
        match self {
            Frame::Padding { len } => out.resize(out.len() + len, 0),
            Frame::Ping => out.push(code::PING),
            Frame::Ack(a) => a.encode(out),
            Frame::Stream(s) => s.encode(out),
            Frame::MessageSkip {
                stream,
                message,
                message_len,
                reliability,
                depends_back,
            } => {
                out.push(code::MESSAGE_SKIP);
                let dep = if depends_back.is_some() {
                    SKIP_FLAG_DEP
                } else {
                    0
                };
                out.push(reliability.code() | dep);
                put_varint(out, u64::from(stream.0));
                put_varint(out, *message);
                put_varint(out, *message_len);
                if let Some(d) = depends_back {
                    put_varint(out, *d);
                }
            }
            Frame::MaxData { limit } => {
                out.push(code::MAX_DATA);
                put_varint(out, *limit);
            }
            Frame::Close(c) => {
                out.push(code::CLOSE);
                put_varint(out, c.code.0);
                put_varint(out, c.reason.len() as u64);
                out.extend_from_slice(c.reason);
            }
            Frame::Adapt(a) => a.encode(out),
            Frame::Initial { params, cookie } => {
                out.push(code::INITIAL);
                params.encode(out);
                put_varint(out, cookie.len() as u64);
                out.extend_from_slice(cookie);
            }
            Frame::Retry { cookie } => {
                out.push(code::RETRY);
                put_varint(out, cookie.len() as u64);
                out.extend_from_slice(cookie);
            }
            Frame::Handshake { params } => {
                out.push(code::HANDSHAKE);
                params.encode(out);
            }
            Frame::Auth { message } => {
                out.push(code::AUTH);
                put_varint(out, message.len() as u64);
                out.extend_from_slice(message);
            }
        }
        Ok(())
    }

    fn validate(&self) -> Result<(), WireError> {
        let bad = |field| Err(WireError::OutOfRange { field });
        match self {
            Frame::Padding { len } if *len == 0 || *len > MAX_DATAGRAM_SIZE => bad("padding"),
            Frame::Ack(a) if a.len == 0 => Err(WireError::InvalidAck),
            Frame::Stream(s) => s.validate(),
            Frame::MessageSkip {
                stream,
                message,
                message_len,
                depends_back,
                ..
            } if stream.0 >= MAX_STREAMS
                || *message > VARINT_MAX
                || *message_len > MAX_MESSAGE_SIZE
                || depends_back.is_some_and(|d| d == 0 || d > *message) =>
            {
                bad("message skip")
            }
            Frame::MaxData { limit } if *limit > VARINT_MAX => bad("max data"),
            Frame::Close(c) if c.code.0 > VARINT_MAX || c.reason.len() > MAX_REASON_LEN => {
                bad("close")
            }
            Frame::Adapt(a) => a.validate(),
            Frame::Initial { params, cookie } => {
                params.validate()?;
                if cookie.len() > MAX_COOKIE_LEN {
                    return bad("cookie length");
                }
                Ok(())
            }
            Frame::Retry { cookie } if cookie.is_empty() || cookie.len() > MAX_COOKIE_LEN => {
                bad("cookie length")
            }
            Frame::Handshake { params } => params.validate(),
            Frame::Auth { message } if message.is_empty() || message.len() > MAX_AUTH_LEN => {
                bad("auth length")
            }
            _ => Ok(()),
        }
    }

    /// Decodes one frame from the front of `r`.
    ///
    /// # Errors
    /// Any [`WireError`]: truncation, an unknown type, a broken bound.
    pub fn decode(r: &mut Reader<'a>) -> Result<Self, WireError> {
        let ty = r.u8()?;
        Ok(match ty {
            code::PADDING => {
                // A bulk sender pads every message's last packet (up to 95
                // bytes): one scan, not a read per byte.
                let zeros = r.peek_rest().iter().take_while(|&&b| b == 0).count();
                r.bytes(zeros)?;
                Frame::Padding { len: 1 + zeros }
            }
            code::PING => Frame::Ping,
            code::ACK => Frame::Ack(AckFrame::decode(r)?),
            code::STREAM => Frame::Stream(StreamFrame::decode(r)?),
            code::MESSAGE_SKIP => {
                let flags = r.u8()?;
                if flags & !(0x03 | SKIP_FLAG_DEP) != 0 {
                    return Err(WireError::Reserved);
                }
                let reliability =
                    Reliability::from_code(flags & 0x03).ok_or(WireError::Reserved)?;
                let stream =
                    StreamId(r.varint_max(u64::from(MAX_STREAMS) - 1, "stream id")? as u32);
                let message = r.varint()?;
                let message_len = r.varint_max(MAX_MESSAGE_SIZE, "message length")?;
                let depends_back = if flags & SKIP_FLAG_DEP != 0 {
                    let d = r.varint()?;
                    if d == 0 || d > message {
                        return Err(WireError::OutOfRange {
                            field: "depends back",
                        });
                    }
                    Some(d)
                } else {
                    None
                };
                Frame::MessageSkip {
                    reliability,
                    stream,
                    message,
                    message_len,
                    depends_back,
                }
            }
            code::MAX_DATA => Frame::MaxData { limit: r.varint()? },
            code::CLOSE => {
                let code = ErrorCode(r.varint()?);
                let len = r.varint_max(MAX_REASON_LEN as u64, "reason length")? as usize;
                Frame::Close(CloseFrame {
                    code,
                    reason: r.bytes(len)?,
                })
            }
            code::ADAPT => Frame::Adapt(AdaptFrame::decode(r)?),
            code::INITIAL => {
                let params = TransportParams::decode(r)?;
                let len = r.varint_max(MAX_COOKIE_LEN as u64, "cookie length")? as usize;
                Frame::Initial {
                    params,
                    cookie: r.bytes(len)?,
                }
            }
            code::RETRY => {
                let len = r.varint_max(MAX_COOKIE_LEN as u64, "cookie length")? as usize;
                if len == 0 {
                    return Err(WireError::OutOfRange {
                        field: "cookie length",
                    });
                }
                Frame::Retry {
                    cookie: r.bytes(len)?,
                }
            }
            code::HANDSHAKE => Frame::Handshake {
                params: TransportParams::decode(r)?,
            },
            code::AUTH => {
                let len = r.varint_max(MAX_AUTH_LEN as u64, "auth length")? as usize;
                if len == 0 {
                    return Err(WireError::OutOfRange {
                        field: "auth length",
                    });
                }
                Frame::Auth {
                    message: r.bytes(len)?,
                }
            }
            other => return Err(WireError::UnknownFrame(other)),
        })
    }

    /// True if receiving this frame obliges the receiver to acknowledge the
    /// packet (everything except ACK, PADDING and CLOSE).
    pub fn is_ack_eliciting(&self) -> bool {
        !matches!(
            self,
            Frame::Ack(_) | Frame::Padding { .. } | Frame::Close(_)
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wire::adapt::{AdaptAction, AdaptCond, AdaptWhen, Ratio};
    use crate::wire::{
        MAX_ACK_DELAY_MS, MAX_ADAPT_FACTOR, MAX_IDLE_TIMEOUT_MS, MIN_DATAGRAM_SIZE, RATIO_ONE,
    };
    use proptest::prelude::*;

    pub(crate) fn params() -> TransportParams {
        TransportParams {
            max_message_size: 1 << 20,
            initial_max_data: 1 << 22,
            loss_tolerance: Ratio::from_parts(4000),
            idle_timeout_ms: 30_000,
            max_ack_delay_ms: 25,
            max_datagram_size: 1400,
        }
    }

    fn round_trip(f: Frame<'_>) {
        let mut out = Vec::new();
        f.encode(&mut out).unwrap();
        assert_eq!(out.len(), f.encoded_len(), "{f:?}");
        let mut r = Reader::new(&out);
        assert_eq!(Frame::decode(&mut r).unwrap(), f);
        assert!(r.is_empty());
    }

    #[test]
    fn every_frame_round_trips() {
        let ack = AckFrame::new(
            250,
            &[
                AckRange {
                    start: 90,
                    end: 100,
                },
                AckRange { start: 50, end: 80 },
                AckRange { start: 0, end: 0 },
            ],
        )
        .unwrap();
        let frames = [
            Frame::Padding { len: 7 },
            Frame::Ping,
            Frame::Ack(ack),
            Frame::Stream(StreamFrame {
                stream: StreamId(3),
                message: 77,
                message_len: 5000,
                offset: 1400,
                reliability: Reliability::Discardable,
                depends_back: Some(2),
                ttl_us: Some(50_000),
                data: b"hello",
            }),
            Frame::MessageSkip {
                stream: StreamId(1),
                message: 9,
                message_len: 44,
                reliability: Reliability::Reliable,
                depends_back: Some(3),
            },
            Frame::MessageSkip {
                stream: StreamId(1),
                message: 0,
                message_len: 0,
                reliability: Reliability::Unreliable,
                depends_back: None,
            },
            Frame::MaxData { limit: 1 << 40 },
            Frame::Close(CloseFrame {
                code: ErrorCode::IDLE_TIMEOUT,
                reason: b"idle",
            }),
            Frame::Adapt(AdaptFrame {
                action: AdaptAction::PacketSize { factor: 8000 },
                when: AdaptWhen::AtMessage {
                    stream: StreamId(2),
                    message: 40,
                },
                cond: Some(AdaptCond {
                    error_ratio: Ratio::from_parts(2000),
                    rate_bps: 20_000_000,
                }),
            }),
            Frame::Auth { message: &[5; 48] },
            Frame::Initial {
                params: params(),
                cookie: &[7; 24],
            },
            Frame::Retry { cookie: &[9; 24] },
            Frame::Handshake { params: params() },
        ];
        for f in frames {
            round_trip(f);
        }
    }

    #[test]
    fn rejects_broken_bounds() {
        let s = StreamFrame {
            stream: StreamId(0),
            message: 1,
            message_len: 3,
            offset: 2,
            reliability: Reliability::Reliable,
            depends_back: None,
            ttl_us: None,
            data: b"ab",
        };
        // offset + len > message_len
        assert!(Frame::Stream(s).encode(&mut Vec::new()).is_err());
        // depends_back beyond message 0
        let s = StreamFrame {
            offset: 0,
            depends_back: Some(2),
            ..s
        };
        assert!(Frame::Stream(s).encode(&mut Vec::new()).is_err());
        assert!(AckFrame::new(
            0,
            &[AckRange { start: 5, end: 9 }, AckRange { start: 3, end: 4 }]
        )
        .is_err());
        assert!(AckFrame::new(0, &[]).is_err());
        // Unknown frame type, reserved STREAM flag.
        assert_eq!(
            Frame::decode(&mut Reader::new(&[0x3f])),
            Err(WireError::UnknownFrame(0x3f))
        );
        assert_eq!(
            Frame::decode(&mut Reader::new(&[code::STREAM, 0x80])),
            Err(WireError::Reserved)
        );
        // ACK whose first range underflows below zero.
        assert_eq!(
            Frame::decode(&mut Reader::new(&[code::ACK, 3, 0, 0, 9])),
            Err(WireError::InvalidAck)
        );
    }

    #[test]
    fn ack_keeps_at_most_max_ranges() {
        let ranges: Vec<AckRange> = (0..(MAX_ACK_RANGES as u64 + 10))
            .rev()
            .map(|i| AckRange {
                start: i * 3,
                end: i * 3 + 1,
            })
            .collect();
        let a = AckFrame::new(0, &ranges).unwrap();
        assert_eq!(a.ranges().len(), MAX_ACK_RANGES);
        round_trip(Frame::Ack(a));
    }

    fn arb_ratio() -> impl Strategy<Value = Ratio> {
        (0..=RATIO_ONE).prop_map(Ratio::from_parts)
    }

    fn arb_params() -> impl Strategy<Value = TransportParams> {
        (
            0..=MAX_MESSAGE_SIZE,
            0..=VARINT_MAX,
            arb_ratio(),
            0..=MAX_IDLE_TIMEOUT_MS,
            0..=MAX_ACK_DELAY_MS,
            MIN_DATAGRAM_SIZE as u64..=MAX_DATAGRAM_SIZE as u64,
        )
            .prop_map(|(a, b, c, d, e, f)| TransportParams {
                max_message_size: a,
                initial_max_data: b,
                loss_tolerance: c,
                idle_timeout_ms: d,
                max_ack_delay_ms: e,
                max_datagram_size: f,
            })
    }

    fn arb_ack() -> impl Strategy<Value = AckFrame> {
        (
            0..VARINT_MAX / 2,
            0..=VARINT_MAX,
            prop::collection::vec((0u64..1000, 0u64..1000), 1..40),
        )
            .prop_map(|(largest, delay, spans)| {
                let mut ranges = Vec::new();
                let mut end = largest;
                for (len, gap) in spans {
                    let start = end.saturating_sub(len);
                    ranges.push(AckRange { start, end });
                    match start.checked_sub(gap + 2) {
                        Some(e) => end = e,
                        None => break,
                    }
                }
                AckFrame::new(delay, &ranges).unwrap()
            })
    }

    /// Owned inputs for a STREAM frame (proptest cannot hand out borrows).
    fn arb_stream() -> impl Strategy<Value = (u32, u64, u64, u8, Option<u64>, Option<u64>, Vec<u8>)>
    {
        (
            0..MAX_STREAMS,
            0..=VARINT_MAX,
            0..=MAX_MESSAGE_SIZE,
            0u8..3,
            proptest::option::of(1..=VARINT_MAX),
            proptest::option::of(0..=MAX_TTL_US),
            prop::collection::vec(any::<u8>(), 0..64),
        )
    }

    proptest! {
        #[test]
        fn stream_round_trips((stream, message, len, class, dep, ttl, data) in arb_stream(), off in 0..=MAX_MESSAGE_SIZE) {
            let message_len = len.max(data.len() as u64);
            let offset = off.min(message_len - data.len() as u64);
            let f = StreamFrame {
                stream: StreamId(stream),
                message,
                message_len,
                offset,
                reliability: Reliability::from_code(class).unwrap(),
                depends_back: dep.map(|d| d.min(message)).filter(|d| *d > 0),
                ttl_us: ttl,
                data: &data,
            };
            round_trip(Frame::Stream(f));
        }

        #[test]
        fn control_frames_round_trip(p in arb_params(), ack in arb_ack(), cookie in prop::collection::vec(any::<u8>(), 0..=MAX_COOKIE_LEN),
                                     code in 0..=VARINT_MAX, reason in prop::collection::vec(any::<u8>(), 0..=MAX_REASON_LEN),
                                     factor in 1..=MAX_ADAPT_FACTOR, r in arb_ratio(), rate in 0..=VARINT_MAX, msg in 0..=VARINT_MAX) {
            round_trip(Frame::Initial { params: p, cookie: &cookie });
            round_trip(Frame::Handshake { params: p });
            if !cookie.is_empty() {
                round_trip(Frame::Auth { message: &cookie });
            }
            round_trip(Frame::Ack(ack));
            round_trip(Frame::Close(CloseFrame { code: ErrorCode(code), reason: &reason }));
            round_trip(Frame::MaxData { limit: rate });
            if !cookie.is_empty() {
                round_trip(Frame::Retry { cookie: &cookie });
            }
            for action in [AdaptAction::Frequency { factor }, AdaptAction::PacketSize { factor },
                           AdaptAction::Marking { unmarked: r }, AdaptAction::LossTolerance { tolerance: r }] {
                for when in [AdaptWhen::Now, AdaptWhen::Deferred, AdaptWhen::AtMessage { stream: StreamId(1), message: msg }] {
                    round_trip(Frame::Adapt(AdaptFrame { action, when, cond: Some(AdaptCond { error_ratio: r, rate_bps: rate }) }));
                    round_trip(Frame::Adapt(AdaptFrame { action, when, cond: None }));
                }
            }
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let mut r = Reader::new(&bytes);
            while !r.is_empty() {
                let before = r.remaining();
                match Frame::decode(&mut r) {
                    Ok(f) => {
                        // Whatever decodes re-encodes to something that decodes the same.
                        let mut out = Vec::new();
                        f.encode(&mut out).unwrap();
                        let g = Frame::decode(&mut Reader::new(&out)).unwrap();
                        prop_assert_eq!(f, g);
                        prop_assert!(r.remaining() < before);
                    }
                    Err(_) => break,
                }
            }
        }
    }
}
