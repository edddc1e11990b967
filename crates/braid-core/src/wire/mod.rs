//! The wire format of braid's adaptive reliable UDP transport (IQ-RUDP,
//! seed 002 §2; seed 001 §3.2): packet headers, frames, and checked
//! decoding.
//!
//! Main types: [`Packet`] (a decoded datagram: [`Header`] plus a frame
//! iterator), [`Frame`] and its payload structs, [`PacketBuilder`] for
//! encoding, [`WireError`].
//!
//! Invariants:
//! - Decoding never panics and never allocates: every read goes through the
//!   bounds-checked [`Reader`], every length and count is checked against a
//!   named constant below before it is used, and a violation rejects the
//!   whole datagram.
//! - What decodes re-encodes to the same frame (`encode ∘ decode = id` on
//!   frames), and [`Frame::encoded_len`] is exact.
//! - A packet type admits only its own frames (see [`Packet::decode`]).
//!
//! The layout is specified byte by byte in `docs/PROTOCOL.md`.

mod adapt;
mod codec;
mod frame;
mod header;

pub use adapt::{AdaptAction, AdaptCond, AdaptFrame, AdaptWhen, Ratio, TransportParams};
pub use codec::{put_varint, varint_len, Reader, VARINT_MAX};
use core::ops::ControlFlow;
pub use frame::{
    AckFrame, AckRange, CloseFrame, ErrorCode, Frame, Reliability, StreamFrame, StreamId,
};
pub use header::{ConnectionId, Header, PacketType, CID_LEN};

/// The protocol version this code speaks: 2 added the authenticated
/// handshake (the AUTH frame, and CLOSE in RETRY packets); 3 protects every
/// DATA packet of a keyed connection with an AEAD and carries each side's
/// protection mode in the Noise messages (`transport::protection`).
pub const VERSION: u8 = 3;
/// Largest UDP payload accepted or produced (a 1500-byte Ethernet MTU less
/// IPv4 and UDP headers). Anything larger is dropped as oversized.
pub const MAX_DATAGRAM_SIZE: usize = 1472;
/// Smallest datagram size an endpoint may advertise, and the size a client
/// pads its INITIAL to (limits amplification by a spoofed client).
pub const MIN_DATAGRAM_SIZE: usize = 1200;
/// Most ranges one ACK frame carries.
pub const MAX_ACK_RANGES: usize = 32;
pub use crate::id::MAX_STREAMS;
/// Hard upper bound on a message's length; the negotiated limit is lower.
pub const MAX_MESSAGE_SIZE: u64 = 64 << 20;
/// Longest time-to-live a message may carry: one hour in microseconds.
pub const MAX_TTL_US: u64 = 3_600_000_000;
/// Longest cookie a RETRY may carry.
pub const MAX_COOKIE_LEN: usize = 48;
/// Longest AUTH frame payload (a Noise handshake message,
/// `transport::auth`): message 2 is 32 (e) + 8 (server id) + at most 48
/// (params) + 1 (mode) + 16 (tag) bytes.
pub const MAX_AUTH_LEN: usize = 128;
/// Longest reason phrase a CLOSE may carry.
pub const MAX_REASON_LEN: usize = 256;
/// Longest idle timeout that may be negotiated: ten minutes.
pub const MAX_IDLE_TIMEOUT_MS: u64 = 600_000;
/// Longest ack delay that may be advertised.
pub const MAX_ACK_DELAY_MS: u64 = 1000;
/// Largest size or frequency factor an ADAPT frame may report (100×, in
/// parts per 10 000).
pub const MAX_ADAPT_FACTOR: u32 = 1_000_000;
/// Most frames one packet may hold (a run of padding counts as one).
pub const MAX_FRAMES_PER_PACKET: usize = 256;
/// Parts per unit of a [`Ratio`].
pub const RATIO_ONE: u16 = 10_000;

/// Why a datagram could not be decoded or a frame encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The datagram ended in the middle of a field.
    #[error("truncated")]
    Truncated,
    /// The datagram is longer than [`MAX_DATAGRAM_SIZE`].
    #[error("datagram of {0} bytes exceeds the maximum")]
    Oversized(usize),
    /// A version this code does not speak.
    #[error("unsupported version {0}")]
    UnsupportedVersion(u8),
    /// The packet type nibble is unknown.
    #[error("unknown packet type")]
    UnknownPacketType,
    /// The frame type byte is unknown.
    #[error("unknown frame type {0:#x}")]
    UnknownFrame(u8),
    /// A reserved bit or enumeration value was set.
    #[error("reserved bits set")]
    Reserved,
    /// A field is outside its bound.
    #[error("{field} out of range")]
    OutOfRange {
        /// The field.
        field: &'static str,
    },
    /// ACK ranges are empty, overlapping or below zero.
    #[error("invalid ack ranges")]
    InvalidAck,
    /// A frame appeared in a packet type that does not admit it.
    #[error("frame not allowed in this packet type")]
    FrameNotAllowed,
    /// More than [`MAX_FRAMES_PER_PACKET`] frames, or none at all.
    #[error("bad frame count")]
    FrameCount,
}

/// A decoded, validated datagram.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// The header.
    pub header: Header,
    payload: &'a [u8],
    /// The first frame when it is a STREAM frame, as validation decoded
    /// it: nearly every bulk packet is one STREAM frame (and padding), so
    /// [`Packet::frames`] does not decode it a second time. ACK frames are
    /// not kept: they are half a kilobyte inline, more to copy than to
    /// decode again.
    first: Option<StreamFrame<'a>>,
    /// Where the frames after `first` start in `payload`.
    after_first: usize,
}

impl<'a> Packet<'a> {
    /// Decodes and validates a whole datagram: the header, then every frame,
    /// checking each frame is allowed in the packet type and the count is
    /// within [`MAX_FRAMES_PER_PACKET`]. After `Ok`, [`Packet::frames`]
    /// yields only `Ok` items.
    ///
    /// Admitted frames: INITIAL packets hold exactly one INITIAL frame, at
    /// most one AUTH, and padding; RETRY exactly one RETRY or one CLOSE (a
    /// stateless refusal); HANDSHAKE one HANDSHAKE, at most one AUTH, plus
    /// ACK, PING and padding; DATA anything but the four handshake frames.
    ///
    /// # Errors
    /// Any [`WireError`].
    pub fn decode(datagram: &'a [u8]) -> Result<Self, WireError> {
        if datagram.len() > MAX_DATAGRAM_SIZE {
            return Err(WireError::Oversized(datagram.len()));
        }
        let mut r = Reader::new(datagram);
        let header = Header::decode(&mut r)?;
        Self::decode_payload(header, r.rest())
    }

    /// As [`Packet::decode`], for a datagram whose header the caller
    /// decoded already: `payload` is everything after it. The caller has
    /// refused datagrams over [`MAX_DATAGRAM_SIZE`] (`decode` checks that
    /// here).
    ///
    /// # Errors
    /// Any [`WireError`] of the frames.
    pub fn decode_payload(header: Header, payload: &'a [u8]) -> Result<Self, WireError> {
        let mut count = 0usize;
        let mut setup_frames = 0usize;
        let mut auth_frames = 0usize;
        let mut first = None;
        let mut after_first = 0;
        let mut fr = Reader::new(payload);
        while !fr.is_empty() {
            // Borrowed, not moved out of the `Result`: a `Frame` is half a
            // kilobyte (the ACK variant's ranges), and each move copies it.
            let decoded = Frame::decode(&mut fr);
            let f = match &decoded {
                Ok(f) => f,
                Err(e) => return Err(*e),
            };
            if count == 0 {
                if let Frame::Stream(s) = f {
                    first = Some(*s);
                    after_first = fr.position();
                }
            }
            count += 1;
            if count > MAX_FRAMES_PER_PACKET {
                return Err(WireError::FrameCount);
            }
            let allowed = match (header.ty, f) {
                (_, Frame::Padding { .. }) => true,
                (PacketType::Initial, Frame::Initial { .. })
                | (PacketType::Retry, Frame::Retry { .. } | Frame::Close(_))
                | (PacketType::Handshake, Frame::Handshake { .. }) => {
                    setup_frames += 1;
                    true
                }
                (PacketType::Initial | PacketType::Handshake, Frame::Auth { .. }) => {
                    auth_frames += 1;
                    auth_frames == 1
                }
                (PacketType::Handshake, Frame::Ack(_) | Frame::Ping) => true,
                (
                    PacketType::Data,
                    Frame::Initial { .. }
                    | Frame::Retry { .. }
                    | Frame::Handshake { .. }
                    | Frame::Auth { .. },
                ) => false,
                (PacketType::Data, _) => true,
                _ => false,
            };
            if !allowed {
                return Err(WireError::FrameNotAllowed);
            }
        }
        let setup_ok = match header.ty {
            PacketType::Data => count > 0,
            _ => setup_frames == 1,
        };
        if !setup_ok {
            return Err(WireError::FrameCount);
        }
        Ok(Packet {
            header,
            payload,
            first,
            after_first,
        })
    }

    /// A reader over the frames after the kept first one.
    fn rest_reader(&self) -> Reader<'a> {
        Reader::new(self.payload.get(self.after_first..).unwrap_or(&[]))
    }

    /// The frames, in order.
    pub fn frames(&self) -> impl Iterator<Item = Result<Frame<'a>, WireError>> + 'a {
        let mut first = self.first.map(Frame::Stream);
        let mut r = self.rest_reader();
        core::iter::from_fn(move || {
            if let Some(f) = first.take() {
                return Some(Ok(f));
            }
            if r.is_empty() {
                return None;
            }
            let f = Frame::decode(&mut r);
            if f.is_err() {
                // Stop after the first error; `decode` made this unreachable.
                let _ = r.rest();
            }
            Some(f)
        })
    }

    /// Hands each frame, in order, to `f` until it breaks; what
    /// [`Packet::frames`] yields, without moving each frame (half a
    /// kilobyte) out of an iterator: the receive path's way.
    pub fn visit_frames(&self, mut f: impl FnMut(&Frame<'a>) -> ControlFlow<()>) {
        if let Some(s) = self.first {
            if f(&Frame::Stream(s)).is_break() {
                return;
            }
        }
        let mut r = self.rest_reader();
        while !r.is_empty() {
            let decoded = Frame::decode(&mut r);
            // `decode` validated every frame: an error is unreachable.
            let Ok(frame) = &decoded else { return };
            if f(frame).is_break() {
                return;
            }
        }
    }

    /// The payload length in bytes (everything after the header).
    pub fn payload_len(&self) -> usize {
        self.payload.len()
    }
}

/// Builds one datagram: a header, then frames while they fit.
#[derive(Debug)]
pub struct PacketBuilder<'b> {
    out: &'b mut Vec<u8>,
    start: usize,
    limit: usize,
}

impl<'b> PacketBuilder<'b> {
    /// Starts a packet at the end of `out` that will be at most `limit`
    /// bytes (clamped to [`MAX_DATAGRAM_SIZE`]).
    ///
    /// # Errors
    /// [`WireError::OutOfRange`] if the header does not encode or fit.
    pub fn new(out: &'b mut Vec<u8>, header: &Header, limit: usize) -> Result<Self, WireError> {
        let start = out.len();
        let limit = limit.min(MAX_DATAGRAM_SIZE);
        if header.encoded_len() >= limit {
            return Err(WireError::OutOfRange { field: "limit" });
        }
        header.encode(out)?;
        Ok(PacketBuilder { out, start, limit })
    }

    /// Bytes still free in this packet.
    pub fn remaining(&self) -> usize {
        self.limit
            .saturating_sub(self.out.len().saturating_sub(self.start))
    }

    /// Bytes written so far, header included.
    pub fn len(&self) -> usize {
        self.out.len() - self.start
    }

    /// True if nothing but the header has been written (never: the header
    /// is always there; kept for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `frame` if it fits; returns whether it did.
    ///
    /// # Errors
    /// The frame's own encoding error.
    pub fn push(&mut self, frame: &Frame<'_>) -> Result<bool, WireError> {
        if frame.encoded_len() > self.remaining() {
            return Ok(false);
        }
        frame.encode(self.out)?;
        Ok(true)
    }

    /// Pads with zero bytes to at least `size` bytes in total.
    pub fn pad_to(&mut self, size: usize) {
        let size = size.min(self.limit);
        if self.len() < size {
            let n = size - self.len();
            self.out.resize(self.out.len() + n, 0);
        }
    }

    /// Finishes the packet and returns its length.
    pub fn finish(self) -> usize {
        self.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn data_header() -> Header {
        Header {
            ty: PacketType::Data,
            dst_cid: ConnectionId([5; 8]),
            src_cid: None,
            pn: 42,
        }
    }

    #[test]
    fn builds_and_decodes_a_packet() {
        let mut buf = Vec::new();
        let mut b = PacketBuilder::new(&mut buf, &data_header(), 1400).unwrap();
        assert!(b.push(&Frame::Ping).unwrap());
        assert!(b.push(&Frame::MaxData { limit: 9 }).unwrap());
        let n = b.finish();
        assert_eq!(n, buf.len());
        let p = Packet::decode(&buf).unwrap();
        assert_eq!(p.header, data_header());
        let frames: Vec<_> = p.frames().map(Result::unwrap).collect();
        assert_eq!(frames, vec![Frame::Ping, Frame::MaxData { limit: 9 }]);
    }

    #[test]
    fn builder_respects_the_limit() {
        let mut buf = Vec::new();
        let mut b = PacketBuilder::new(&mut buf, &data_header(), 20).unwrap();
        let big = [0u8; 64];
        let f = Frame::Close(CloseFrame {
            code: ErrorCode::NO_ERROR,
            reason: &big,
        });
        assert!(!b.push(&f).unwrap());
        b.pad_to(5000);
        assert_eq!(b.finish(), 20);
    }

    #[test]
    fn rejects_wrong_frames_for_the_packet_type() {
        let mut buf = Vec::new();
        let mut b = PacketBuilder::new(&mut buf, &data_header(), 1400).unwrap();
        b.push(&Frame::Retry { cookie: &[1; 8] }).unwrap();
        b.finish();
        assert_eq!(
            Packet::decode(&buf).unwrap_err(),
            WireError::FrameNotAllowed
        );

        let mut buf = Vec::new();
        let h = Header {
            ty: PacketType::Initial,
            src_cid: Some(ConnectionId([1; 8])),
            ..data_header()
        };
        let b = PacketBuilder::new(&mut buf, &h, 1400).unwrap();
        b.finish();
        // An INITIAL without its INITIAL frame.
        assert_eq!(Packet::decode(&buf).unwrap_err(), WireError::FrameCount);
        // An empty DATA packet.
        let mut buf = Vec::new();
        PacketBuilder::new(&mut buf, &data_header(), 1400)
            .unwrap()
            .finish();
        assert_eq!(Packet::decode(&buf).unwrap_err(), WireError::FrameCount);
    }

    #[test]
    fn auth_frames_go_once_in_initial_and_handshake_only() {
        let auth = Frame::Auth { message: &[3; 48] };
        let packet = |ty, frames: &[Frame<'_>]| {
            let h = Header {
                ty,
                src_cid: ty.is_long().then_some(ConnectionId([1; 8])),
                ..data_header()
            };
            let mut buf = Vec::new();
            let mut b = PacketBuilder::new(&mut buf, &h, 1400).unwrap();
            for f in frames {
                assert!(b.push(f).unwrap());
            }
            b.finish();
            buf
        };
        let init = Frame::Initial {
            params: frame::tests::params(),
            cookie: &[1; 20],
        };
        let hs = Frame::Handshake {
            params: frame::tests::params(),
        };
        assert!(Packet::decode(&packet(PacketType::Initial, &[init, auth])).is_ok());
        assert!(Packet::decode(&packet(PacketType::Handshake, &[hs, auth])).is_ok());
        for bad in [
            packet(PacketType::Initial, &[init, auth, auth]),
            packet(PacketType::Data, &[Frame::Ping, auth]),
            packet(PacketType::Retry, &[Frame::Retry { cookie: &[1; 8] }, auth]),
        ] {
            assert!(Packet::decode(&bad).is_err());
        }
        // A stateless refusal: exactly one CLOSE in a RETRY packet.
        let close = Frame::Close(CloseFrame {
            code: ErrorCode::AUTH_FAILED,
            reason: b"key mismatch",
        });
        assert!(Packet::decode(&packet(PacketType::Retry, &[close])).is_ok());
        assert!(Packet::decode(&packet(PacketType::Retry, &[close, close])).is_err());
        // Empty and over-long AUTH frames do not decode.
        let mut raw = vec![0x13, 0];
        assert!(Frame::decode(&mut Reader::new(&raw)).is_err());
        raw = vec![0x13, 0x40, 129];
        raw.resize(3 + 129, 0);
        assert!(Frame::decode(&mut Reader::new(&raw)).is_err());
    }

    #[test]
    fn rejects_oversized() {
        let buf = vec![0u8; MAX_DATAGRAM_SIZE + 1];
        assert_eq!(
            Packet::decode(&buf).unwrap_err(),
            WireError::Oversized(MAX_DATAGRAM_SIZE + 1)
        );
    }

    /// Every frame of `p`, decoded from its payload afresh.
    fn decoded_afresh<'a>(p: &Packet<'a>) -> Vec<Frame<'a>> {
        let mut r = Reader::new(p.payload);
        let mut out = Vec::new();
        while !r.is_empty() {
            out.push(Frame::decode(&mut r).unwrap());
        }
        out
    }

    #[test]
    fn frames_are_the_same_whether_the_first_was_kept_or_not() {
        let stream = |message: u64, data: &'static [u8]| {
            Frame::Stream(StreamFrame {
                stream: StreamId(2),
                message,
                message_len: data.len() as u64,
                offset: 0,
                reliability: Reliability::Reliable,
                depends_back: None,
                ttl_us: None,
                data,
            })
        };
        let ack = Frame::Ack(AckFrame::new(0, &[AckRange { start: 0, end: 4 }]).unwrap());
        let layouts: [&[Frame<'_>]; 4] = [
            &[stream(7, b"abc")],
            &[stream(7, b"abc"), stream(8, b"defg")],
            &[ack, stream(9, b"hi")],
            &[Frame::Ping, stream(1, b"x"), ack],
        ];
        for (i, frames) in layouts.iter().enumerate() {
            let mut buf = Vec::new();
            let mut b = PacketBuilder::new(&mut buf, &data_header(), 1400).unwrap();
            for f in *frames {
                assert!(b.push(f).unwrap());
            }
            b.pad_to(200);
            b.finish();
            let p = Packet::decode(&buf).unwrap();
            assert_eq!(
                p.first.is_some(),
                matches!(frames[0], Frame::Stream(_)),
                "layout {i}: a leading STREAM frame is kept, nothing else"
            );
            let got: Vec<_> = p.frames().map(Result::unwrap).collect();
            assert_eq!(got, decoded_afresh(&p), "layout {i}");
            let mut visited = Vec::new();
            p.visit_frames(|f| {
                visited.push(*f);
                ControlFlow::Continue(())
            });
            assert_eq!(visited, got, "layout {i}");
            let mut one = 0;
            p.visit_frames(|_| {
                one += 1;
                ControlFlow::Break(())
            });
            assert_eq!(one, 1, "layout {i}: a break stops the visit");
            assert_eq!(&got[..frames.len()], *frames, "layout {i}");
            assert!(
                matches!(got.last(), Some(Frame::Padding { len }) if *len > 0),
                "layout {i}: {got:?}"
            );
            assert_eq!(got.len(), frames.len() + 1, "layout {i}");
        }
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_datagrams_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..1600)) {
            if let Ok(p) = Packet::decode(&bytes) {
                for f in p.frames() {
                    prop_assert!(f.is_ok());
                }
            }
        }

        #[test]
        fn decoding_mutated_packets_never_panics(flip in 0usize..200, val in any::<u8>(), cut in 0usize..200) {
            let mut buf = Vec::new();
            let mut b = PacketBuilder::new(&mut buf, &data_header(), 1400).unwrap();
            b.push(&Frame::Stream(StreamFrame {
                stream: StreamId(1), message: 3, message_len: 10, offset: 0,
                reliability: Reliability::Reliable, depends_back: Some(1), ttl_us: Some(9), data: b"0123456789",
            })).unwrap();
            b.push(&Frame::Ack(AckFrame::new(3, &[AckRange { start: 1, end: 9 }]).unwrap())).unwrap();
            b.finish();
            if flip < buf.len() { buf[flip] = val; }
            buf.truncate(cut.max(1));
            if let Ok(p) = Packet::decode(&buf) {
                let frames: Vec<_> = p.frames().collect();
                prop_assert!(frames.iter().all(Result::is_ok));
                let frames: Vec<_> = frames.into_iter().map(Result::unwrap).collect();
                let mut visited = Vec::new();
                p.visit_frames(|f| {
                    visited.push(*f);
                    ControlFlow::Continue(())
                });
                prop_assert_eq!(&visited, &frames);
                prop_assert_eq!(frames, decoded_afresh(&p));
            }
        }
    }
}
