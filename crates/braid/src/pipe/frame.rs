//! Wire format of the pipe: the session hello, data and control frames.
//!
//! Every connection starts with a fixed-size [`Hello`] from the sender and a
//! fixed-size [`HelloAck`] from the receiver. After that the sender writes
//! [`DataHeader`]-framed records (a 48-byte header, then `len` payload bytes)
//! and the receiver writes fixed 24-byte [`Control`] frames. All integers are
//! big-endian.
//!
//! Invariants: decoding never panics and never trusts a length it has not
//! checked against a named bound ([`MAX_BLOCK_LEN`], [`END_PAYLOAD_LEN`]); a
//! hello with a wrong magic or version is rejected before the receiver
//! allocates anything for the peer.

/// The first eight bytes of every hello and hello-ack.
pub const MAGIC: [u8; 8] = *b"BRDPIPE\0";
/// The protocol version this build speaks (2: a BLAKE3 hash in every data
/// header instead of a CRC-32).
pub const VERSION: u16 = 2;
/// Size of the sender's hello.
pub const HELLO_LEN: usize = 48;
/// Size of the receiver's hello-ack.
pub const HELLO_ACK_LEN: usize = 24;
/// Size of a data-frame header (sender to receiver).
pub const HEADER_LEN: usize = 48;
/// Size of a control frame (receiver to sender).
pub const CONTROL_LEN: usize = 24;
/// The largest block either side accepts (16 MiB).
pub const MAX_BLOCK_LEN: u32 = 16 << 20;
/// Payload of an END frame: total bytes (8) and the BLAKE3 digest (32).
pub const END_PAYLOAD_LEN: u32 = 40;

/// Hello flag: this connection rejoins a running session (a reconnect).
pub const FLAG_REJOIN: u16 = 1;

/// A random-looking session id, chosen by the sender.
pub type TransferId = [u8; 16];

/// The sender's first message on every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// Hello flags ([`FLAG_REJOIN`]).
    pub flags: u16,
    /// The session every connection of one transfer shares.
    pub session: TransferId,
    /// Index of this connection at the sender (for reports).
    pub conn_index: u16,
    /// The largest block the sender will send.
    pub max_block: u32,
    /// The reorder window the sender asks for, in blocks.
    pub window_blocks: u32,
    /// Total input size if known, else `u64::MAX`.
    pub total_size: u64,
}

impl Hello {
    /// Encodes the hello.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_be_bytes());
        b[10..12].copy_from_slice(&self.flags.to_be_bytes());
        b[12..28].copy_from_slice(&self.session);
        b[28..30].copy_from_slice(&self.conn_index.to_be_bytes());
        b[30..34].copy_from_slice(&self.max_block.to_be_bytes());
        b[34..38].copy_from_slice(&self.window_blocks.to_be_bytes());
        b[38..46].copy_from_slice(&self.total_size.to_be_bytes());
        b
    }

    /// Decodes and checks a hello: magic, version and bounds.
    ///
    /// # Errors
    /// [`ProtocolViolation`] for a wrong magic, an unknown version or a
    /// block length outside `1..=MAX_BLOCK_LEN`.
    pub fn decode(b: &[u8; HELLO_LEN]) -> Result<Self, ProtocolViolation> {
        if b[0..8] != MAGIC {
            return Err(ProtocolViolation::BadMagic);
        }
        let version = u16::from_be_bytes([b[8], b[9]]);
        if version != VERSION {
            return Err(ProtocolViolation::Version(version));
        }
        let h = Hello {
            flags: u16::from_be_bytes([b[10], b[11]]),
            session: b[12..28].try_into().unwrap_or([0; 16]),
            conn_index: u16::from_be_bytes([b[28], b[29]]),
            max_block: u32::from_be_bytes([b[30], b[31], b[32], b[33]]),
            window_blocks: u32::from_be_bytes([b[34], b[35], b[36], b[37]]),
            total_size: u64::from_be_bytes(b[38..46].try_into().unwrap_or([0; 8])),
        };
        if h.max_block == 0 || h.max_block > MAX_BLOCK_LEN {
            return Err(ProtocolViolation::BlockLen(h.max_block));
        }
        Ok(h)
    }
}

/// Hello-ack status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HelloStatus {
    /// Accepted.
    Ok,
    /// The receiver serves another session.
    Busy,
    /// A rejoin for a session this receiver does not know (it restarted).
    UnknownSession,
    /// The receiver has as many connections as it accepts.
    TooManyConnections,
    /// The receiver requires a key or a code (the sender runs `--insecure`).
    KeyRequired,
    /// A status this build does not know.
    Other(u8),
}

impl HelloStatus {
    fn code(self) -> u8 {
        match self {
            HelloStatus::Ok => 0,
            HelloStatus::Busy => 1,
            HelloStatus::UnknownSession => 2,
            HelloStatus::TooManyConnections => 3,
            HelloStatus::KeyRequired => 4,
            HelloStatus::Other(c) => c,
        }
    }
    fn from_code(c: u8) -> Self {
        match c {
            0 => HelloStatus::Ok,
            1 => HelloStatus::Busy,
            2 => HelloStatus::UnknownSession,
            3 => HelloStatus::TooManyConnections,
            4 => HelloStatus::KeyRequired,
            c => HelloStatus::Other(c),
        }
    }
}

/// The receiver's answer to a hello.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HelloAck {
    /// Accepted or why not.
    pub status: HelloStatus,
    /// The reorder window the receiver grants, in blocks (the sender must not
    /// send block `seq` unless `seq < written + window_blocks`).
    pub window_blocks: u32,
    /// The reorder window in bytes: the blocks from `written` on that the
    /// sender has read must not add up to more.
    pub window_bytes: u64,
}

impl HelloAck {
    /// Encodes the hello-ack.
    pub fn encode(&self) -> [u8; HELLO_ACK_LEN] {
        let mut b = [0u8; HELLO_ACK_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_be_bytes());
        b[10] = self.status.code();
        b[12..16].copy_from_slice(&self.window_blocks.to_be_bytes());
        b[16..24].copy_from_slice(&self.window_bytes.to_be_bytes());
        b
    }

    /// Decodes a hello-ack.
    ///
    /// # Errors
    /// [`ProtocolViolation`] for a wrong magic or version.
    pub fn decode(b: &[u8; HELLO_ACK_LEN]) -> Result<Self, ProtocolViolation> {
        if b[0..8] != MAGIC || u16::from_be_bytes([b[8], b[9]]) != VERSION {
            return Err(ProtocolViolation::NotAReceiver);
        }
        Ok(HelloAck {
            status: HelloStatus::from_code(b[10]),
            window_blocks: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
            window_bytes: u64::from_be_bytes(b[16..24].try_into().unwrap_or([0; 8])),
        })
    }
}

/// Kinds of sender-to-receiver frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataKind {
    /// A block of the stream: `seq` is its number, the payload its bytes.
    Data,
    /// End of stream: `seq` is the number of blocks, the payload the total
    /// byte count and the stream digest ([`super::digest`]).
    End,
    /// The sender gives up (e.g. its input failed); no payload.
    Abort,
    /// Nothing to send right now, but the sender is alive; no payload.
    /// A connection waiting for work writes one every
    /// [`KEEPALIVE`](super::KEEPALIVE), so the receiver can count
    /// silence as a dead path.
    Keepalive,
    /// The sender read the receiver's DONE and accepted it: the receiver,
    /// which keeps listening after its outcome for a sender that missed it
    /// (and tells such a sender again), may stop now; no payload.
    Bye,
}

/// The header in front of every sender-to-receiver frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    /// What the frame is.
    pub kind: DataKind,
    /// Block number (DATA) or block count (END).
    pub seq: u64,
    /// Payload length in bytes.
    pub len: u32,
    /// The payload's check (DATA: [`super::digest::CheckKind`], BLAKE3
    /// or, on an encrypted connection, XXH3-128 zero-padded; END: BLAKE3;
    /// zeros in ABORT, KEEPALIVE and BYE): the block's check, and what
    /// the end-to-end digest is built from ([`super::digest`]).
    pub check: [u8; 32],
}

impl DataHeader {
    /// A frame without a payload (ABORT, KEEPALIVE, BYE).
    pub fn signal(kind: DataKind) -> Self {
        DataHeader {
            kind,
            seq: 0,
            len: 0,
            check: [0; 32],
        }
    }

    /// Encodes the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = match self.kind {
            DataKind::Data => 1,
            DataKind::End => 2,
            DataKind::Abort => 4,
            DataKind::Keepalive => 8,
            DataKind::Bye => 16,
        };
        b[4..8].copy_from_slice(&self.len.to_be_bytes());
        b[8..16].copy_from_slice(&self.seq.to_be_bytes());
        b[16..48].copy_from_slice(&self.check);
        b
    }

    /// Decodes a header and checks its length against `max_block`.
    ///
    /// # Errors
    /// [`ProtocolViolation`] for an unknown kind or a length out of bounds.
    pub fn decode(b: &[u8; HEADER_LEN], max_block: u32) -> Result<Self, ProtocolViolation> {
        let len = u32::from_be_bytes([b[4], b[5], b[6], b[7]]);
        let kind = match b[0] {
            1 => DataKind::Data,
            2 => DataKind::End,
            4 => DataKind::Abort,
            8 => DataKind::Keepalive,
            16 => DataKind::Bye,
            k => return Err(ProtocolViolation::FrameKind(k)),
        };
        let ok = match kind {
            DataKind::Data => len >= 1 && len <= max_block.min(MAX_BLOCK_LEN),
            DataKind::End => len == END_PAYLOAD_LEN,
            DataKind::Abort | DataKind::Keepalive | DataKind::Bye => len == 0,
        };
        if !ok {
            return Err(ProtocolViolation::FrameLen(len));
        }
        Ok(DataHeader {
            kind,
            seq: u64::from_be_bytes(b[8..16].try_into().unwrap_or([0; 8])),
            len,
            check: b[16..48].try_into().unwrap_or([0; 32]),
        })
    }
}

/// Why a receiver stopped (carried in DONE and ABORT frames).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// Everything written and the end-to-end digest matched.
    Verified,
    /// The end-to-end digest or length did not match.
    DigestMismatch,
    /// A block failed its checksum.
    BadChecksum,
    /// The receiver could not write its output.
    OutputFailed,
    /// The sender broke the protocol.
    Protocol,
    /// A code this build does not know.
    Other(u8),
}

impl StopReason {
    fn code(self) -> u8 {
        match self {
            StopReason::Verified => 0,
            StopReason::DigestMismatch => 1,
            StopReason::BadChecksum => 2,
            StopReason::OutputFailed => 3,
            StopReason::Protocol => 4,
            StopReason::Other(c) => c,
        }
    }
    fn from_code(c: u8) -> Self {
        match c {
            0 => StopReason::Verified,
            1 => StopReason::DigestMismatch,
            2 => StopReason::BadChecksum,
            3 => StopReason::OutputFailed,
            4 => StopReason::Protocol,
            c => StopReason::Other(c),
        }
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StopReason::Verified => write!(f, "verified"),
            StopReason::DigestMismatch => write!(f, "end-to-end digest mismatch"),
            StopReason::BadChecksum => write!(f, "a block failed its checksum"),
            StopReason::OutputFailed => write!(f, "the receiver could not write its output"),
            StopReason::Protocol => write!(f, "protocol violation"),
            StopReason::Other(c) => write!(f, "unknown reason {c}"),
        }
    }
}

/// Receiver-to-sender frames (all [`CONTROL_LEN`] bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Block `seq` arrived verified (`seq == u64::MAX`: none, only an update
    /// of `written`); blocks below `written` are on the output.
    Ack {
        /// The block acknowledged, or `u64::MAX`.
        seq: u64,
        /// Blocks written in order so far.
        written: u64,
    },
    /// The transfer ended; `bytes` were written, all verified per block.
    Done {
        /// Verified, or why the end-to-end check failed.
        reason: StopReason,
        /// Bytes written.
        bytes: u64,
        /// The first 8 bytes of the stream digest of what was written
        /// ([`digest_prefix`]): the sender compares it, and `bytes`, with
        /// its own at its end of input before it declares success.
        digest: u64,
    },
    /// Resume (`--resume`): the receiver already holds the first `bytes`
    /// of the stream, verified; `digest` is the first 8 bytes of their
    /// BLAKE3 ([`digest_prefix`]). Sent right after the hello-ack on every
    /// connection of a resuming receiver; the sender checks it against its
    /// own first `bytes` and sends only the rest.
    Resume {
        /// Length of the verified prefix.
        bytes: u64,
        /// Digest prefix of those bytes.
        digest: u64,
    },
    /// The receiver gave up.
    Abort {
        /// Why.
        reason: StopReason,
        /// Bytes written (all verified) before it gave up.
        bytes: u64,
        /// The block concerned, if any (`u64::MAX` if none).
        seq: u64,
    },
}

impl Control {
    /// Encodes the frame.
    pub fn encode(&self) -> [u8; CONTROL_LEN] {
        let mut b = [0u8; CONTROL_LEN];
        let (kind, code, x, y) = match *self {
            Control::Ack { seq, written } => (3u8, 0u8, seq, written),
            Control::Done {
                reason,
                bytes,
                digest,
            } => (5, reason.code(), bytes, digest),
            Control::Abort { reason, bytes, seq } => (6, reason.code(), bytes, seq),
            Control::Resume { bytes, digest } => (7, 0, bytes, digest),
        };
        b[0] = kind;
        b[1] = code;
        b[8..16].copy_from_slice(&x.to_be_bytes());
        b[16..24].copy_from_slice(&y.to_be_bytes());
        b
    }

    /// Decodes a control frame.
    ///
    /// # Errors
    /// [`ProtocolViolation`] for an unknown kind.
    pub fn decode(b: &[u8; CONTROL_LEN]) -> Result<Self, ProtocolViolation> {
        let x = u64::from_be_bytes(b[8..16].try_into().unwrap_or([0; 8]));
        let y = u64::from_be_bytes(b[16..24].try_into().unwrap_or([0; 8]));
        match b[0] {
            3 => Ok(Control::Ack { seq: x, written: y }),
            5 => Ok(Control::Done {
                reason: StopReason::from_code(b[1]),
                bytes: x,
                digest: y,
            }),
            6 => Ok(Control::Abort {
                reason: StopReason::from_code(b[1]),
                bytes: x,
                seq: y,
            }),
            7 => Ok(Control::Resume {
                bytes: x,
                digest: y,
            }),
            k => Err(ProtocolViolation::ControlKind(k)),
        }
    }
}

/// The first 8 bytes of a BLAKE3 digest as a big-endian integer: what a
/// [`Control::Done`] carries.
pub fn digest_prefix(digest: &[u8; 32]) -> u64 {
    u64::from_be_bytes([
        digest[0], digest[1], digest[2], digest[3], digest[4], digest[5], digest[6], digest[7],
    ])
}

/// Encodes an END payload.
pub fn encode_end(total_bytes: u64, digest: &[u8; 32]) -> [u8; END_PAYLOAD_LEN as usize] {
    let mut b = [0u8; END_PAYLOAD_LEN as usize];
    b[0..8].copy_from_slice(&total_bytes.to_be_bytes());
    b[8..40].copy_from_slice(digest);
    b
}

/// Decodes an END payload into (total bytes, digest).
pub fn decode_end(b: &[u8]) -> Option<(u64, [u8; 32])> {
    if b.len() != END_PAYLOAD_LEN as usize {
        return None;
    }
    let total = u64::from_be_bytes(b[0..8].try_into().ok()?);
    let digest: [u8; 32] = b[8..40].try_into().ok()?;
    Some((total, digest))
}

/// How a peer broke the protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolViolation {
    /// A hello with the wrong magic.
    #[error("not a braid pipe peer (bad magic)")]
    BadMagic,
    /// A hello with another protocol version.
    #[error("peer speaks pipe version {0}, this build speaks {ours}", ours = VERSION)]
    Version(u16),
    /// A hello-ack with the wrong magic or version.
    #[error("peer is not a braid pipe receiver of this version")]
    NotAReceiver,
    /// A hello's block length outside `1..=MAX_BLOCK_LEN`.
    #[error("block length {0} out of bounds")]
    BlockLen(u32),
    /// A data frame of an unknown kind.
    #[error("unknown frame kind {0}")]
    FrameKind(u8),
    /// A data frame whose length does not fit its kind.
    #[error("frame length {0} out of bounds")]
    FrameLen(u32),
    /// A control frame of an unknown kind.
    #[error("unknown control frame {0}")]
    ControlKind(u8),
    /// An END frame whose checksum or contents are wrong.
    #[error("END frame failed its checksum")]
    EndChecksum,
    /// Two END frames that disagree.
    #[error("two different END frames")]
    TwoEnds,
    /// The END's total is not the size the sender announced.
    #[error("the sender announced {announced} bytes and ended after {total}: its input changed during the send")]
    SizeChanged {
        /// What the hello announced.
        announced: u64,
        /// What the END says was sent.
        total: u64,
    },
    /// A block beyond the receiver's window.
    #[error("block {0} is beyond the reorder window")]
    BeyondWindow(u64),
    /// An authenticate-only connection whose block header did not end its
    /// record (the clear payload must start at a record boundary).
    #[error("a block header that does not end its record")]
    ClearPayload,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_roundtrip_and_rejects() {
        let h = Hello {
            flags: FLAG_REJOIN,
            session: [7; 16],
            conn_index: 3,
            max_block: 1 << 18,
            window_blocks: 256,
            total_size: u64::MAX,
        };
        let b = h.encode();
        assert_eq!(Hello::decode(&b).unwrap(), h);
        let mut bad = b;
        bad[0] = b'X';
        assert!(Hello::decode(&bad).is_err());
        let mut bad = b;
        bad[9] = 99;
        assert!(Hello::decode(&bad).is_err());
        let big = Hello {
            max_block: MAX_BLOCK_LEN + 1,
            ..h
        };
        assert!(Hello::decode(&big.encode()).is_err());
    }

    #[test]
    fn header_bounds() {
        let h = DataHeader {
            kind: DataKind::Data,
            seq: 9,
            len: 100,
            check: [5; 32],
        };
        assert_eq!(DataHeader::decode(&h.encode(), 100).unwrap(), h);
        assert!(DataHeader::decode(&h.encode(), 99).is_err());
        let z = DataHeader { len: 0, ..h };
        assert!(DataHeader::decode(&z.encode(), 100).is_err());
        let e = DataHeader {
            kind: DataKind::End,
            seq: 1,
            len: 41,
            check: [0; 32],
        };
        assert!(DataHeader::decode(&e.encode(), 100).is_err());
        // The frames without a payload round-trip only with length 0.
        for kind in [DataKind::Abort, DataKind::Keepalive, DataKind::Bye] {
            let f = DataHeader::signal(kind);
            assert_eq!(DataHeader::decode(&f.encode(), 100).unwrap(), f);
            let long = DataHeader { len: 1, ..f };
            assert!(DataHeader::decode(&long.encode(), 100).is_err());
        }
        let mut junk = [0xffu8; HEADER_LEN];
        assert!(DataHeader::decode(&junk, 100).is_err());
        junk[0] = 1;
        assert!(DataHeader::decode(&junk, MAX_BLOCK_LEN).is_err());
    }

    #[test]
    fn control_roundtrip() {
        for c in [
            Control::Ack {
                seq: u64::MAX,
                written: 4,
            },
            Control::Done {
                reason: StopReason::Verified,
                bytes: 77,
                digest: 0x0102_0304_0506_0708,
            },
            Control::Abort {
                reason: StopReason::BadChecksum,
                bytes: 1,
                seq: 2,
            },
            Control::Resume {
                bytes: 1 << 33,
                digest: 9,
            },
        ] {
            assert_eq!(Control::decode(&c.encode()).unwrap(), c);
        }
        assert!(Control::decode(&[0u8; CONTROL_LEN]).is_err());
        let (t, d) = decode_end(&encode_end(5, &[3; 32])).unwrap();
        assert_eq!((t, d), (5, [3; 32]));
    }
}
