//! Packet headers: [`PacketType`], [`ConnectionId`], [`Header`].
//!
//! ```text
//! byte 0      : packet type in the high nibble, low nibble reserved (0)
//! byte 1      : protocol version (VERSION)
//! 8 bytes     : destination connection id
//! 8 bytes     : source connection id      (Initial, Retry, Handshake only)
//! varint      : packet number (< 2^62)
//! ```
//!
//! Long headers (with a source id) are used while the connection is being
//! set up; once it is, `Data` packets carry only the destination id.

use super::codec::{put_varint, varint_len, Reader, VARINT_MAX};
use super::{WireError, VERSION};
use core::fmt;

/// Length of a connection id in bytes.
pub const CID_LEN: usize = 8;

/// A connection id: 8 bytes the endpoint that chose it uses to find the
/// connection. Chosen from caller-supplied randomness, never constructed
/// from a generator here.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ConnectionId(pub [u8; CID_LEN]);

impl ConnectionId {
    /// The id's bytes.
    pub const fn as_bytes(&self) -> &[u8; CID_LEN] {
        &self.0
    }
}

impl fmt::Debug for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// What kind of packet a datagram holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PacketType {
    /// Client's first flight: an INITIAL frame, maybe echoing a cookie.
    Initial,
    /// Server's stateless answer: a RETRY frame with a cookie.
    Retry,
    /// Server's acceptance: a HANDSHAKE frame with its parameters.
    Handshake,
    /// Everything after the handshake.
    Data,
}

impl PacketType {
    const fn code(self) -> u8 {
        match self {
            PacketType::Initial => 1,
            PacketType::Retry => 2,
            PacketType::Handshake => 3,
            PacketType::Data => 4,
        }
    }

    fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            1 => PacketType::Initial,
            2 => PacketType::Retry,
            3 => PacketType::Handshake,
            4 => PacketType::Data,
            _ => return None,
        })
    }

    /// True for the set-up packets, which carry a source connection id.
    pub const fn is_long(self) -> bool {
        !matches!(self, PacketType::Data)
    }
}

/// A decoded packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The packet's type.
    pub ty: PacketType,
    /// The id the receiver chose (or, on a client's first Initial, a random
    /// id the client chose for the server to see).
    pub dst_cid: ConnectionId,
    /// The sender's own id; present on long headers only.
    pub src_cid: Option<ConnectionId>,
    /// The packet number.
    pub pn: u64,
}

impl Header {
    /// Decodes a header from the front of `r`, leaving the payload.
    ///
    /// # Errors
    /// [`WireError::Truncated`], [`WireError::UnknownPacketType`],
    /// [`WireError::Reserved`], [`WireError::UnsupportedVersion`].
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let first = r.u8()?;
        if first & 0x0f != 0 {
            return Err(WireError::Reserved);
        }
        let ty = PacketType::from_code(first >> 4).ok_or(WireError::UnknownPacketType)?;
        let version = r.u8()?;
        if version != VERSION {
            return Err(WireError::UnsupportedVersion(version));
        }
        let dst_cid = ConnectionId(r.array()?);
        let src_cid = if ty.is_long() {
            Some(ConnectionId(r.array()?))
        } else {
            None
        };
        let pn = r.varint()?;
        Ok(Header {
            ty,
            dst_cid,
            src_cid,
            pn,
        })
    }

    /// Encoded length in bytes.
    pub fn encoded_len(&self) -> usize {
        2 + CID_LEN + if self.ty.is_long() { CID_LEN } else { 0 } + varint_len(self.pn)
    }

    /// Appends the header. A long-header type without `src_cid` encodes a
    /// zero id; a `Data` header ignores `src_cid`.
    ///
    /// # Errors
    /// [`WireError::OutOfRange`] if the packet number exceeds 2^62 − 1.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
        if self.pn > VARINT_MAX {
            return Err(WireError::OutOfRange {
                field: "packet number",
            });
        }
        out.push(self.ty.code() << 4);
        out.push(VERSION);
        out.extend_from_slice(&self.dst_cid.0);
        if self.ty.is_long() {
            out.extend_from_slice(&self.src_cid.unwrap_or_default().0);
        }
        put_varint(out, self.pn);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_short_and_long() {
        for ty in [
            PacketType::Initial,
            PacketType::Retry,
            PacketType::Handshake,
            PacketType::Data,
        ] {
            let h = Header {
                ty,
                dst_cid: ConnectionId([1; 8]),
                src_cid: ty.is_long().then_some(ConnectionId([2; 8])),
                pn: 300,
            };
            let mut out = Vec::new();
            h.encode(&mut out).unwrap();
            assert_eq!(out.len(), h.encoded_len());
            let mut r = Reader::new(&out);
            assert_eq!(Header::decode(&mut r).unwrap(), h);
            assert!(r.is_empty());
        }
    }

    #[test]
    fn rejects_bad_first_bytes() {
        let mut good = Vec::new();
        Header {
            ty: PacketType::Data,
            dst_cid: ConnectionId([0; 8]),
            src_cid: None,
            pn: 0,
        }
        .encode(&mut good)
        .unwrap();
        let mut bad = good.clone();
        bad[0] |= 1;
        assert_eq!(
            Header::decode(&mut Reader::new(&bad)),
            Err(WireError::Reserved)
        );
        let mut bad = good.clone();
        bad[0] = 0x90;
        assert_eq!(
            Header::decode(&mut Reader::new(&bad)),
            Err(WireError::UnknownPacketType)
        );
        let mut bad = good.clone();
        bad[1] = 9;
        assert_eq!(
            Header::decode(&mut Reader::new(&bad)),
            Err(WireError::UnsupportedVersion(9))
        );
        assert_eq!(
            Header::decode(&mut Reader::new(&good[..5])),
            Err(WireError::Truncated)
        );
    }
}
